"""Fixtures of the server's tests: a fresh database (SQLite, and PostgreSQL when GRADER_TEST_POSTGRES_URL is set),
the server opened on the repository's course, a client signed in by a one-time link, and an in-test grading worker."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

from starlette.testclient import TestClient  # noqa: E402

from grader.serve.app import create_app  # noqa: E402
from grader.serve.invites import RosterEntry, invite  # noqa: E402
from grader.serve.settings import Limits, ServeSettings  # noqa: E402
from grader.serve.state import ServerState, open_state  # noqa: E402
from grader.serve.worker import Grading, work  # noqa: E402
from tests.serve.postgres import in_schema, postgres_url, worker_schema  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "submissions"

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _reset_postgres(url: str, schema: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database's URL: SQLite in tmp_path, or the PostgreSQL of GRADER_TEST_POSTGRES_URL, emptied
    (in a schema of this pytest process's own, `worker_schema`).

    Without that URL the PostgreSQL case is skipped with the reason on a developer's machine and fails
    under ``CI=true`` (tests/serve/postgres.py): ``.ci/run`` starts the server, so CI never passes on SQLite alone.
    """
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'serve.db'}"
    url, schema = postgres_url(), worker_schema()
    _reset_postgres(url, schema)  # this process's own schema: the other xdist worker's tests run meanwhile
    return in_schema(url, schema)


@pytest.fixture(scope="session")
def grading(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grading]:
    """One grading run of the course, shared by the tests' in-test workers (collecting takes ~1 s)."""
    state = open_state(ROOT, "sqlite://", tmp_path_factory.mktemp("grading"), migrate=False)
    run = Grading(state)
    yield run
    run.close()


def make_settings(tmp_path: Path, **changes: Any) -> ServeSettings:
    """Settings for a test: the repository's course, the server's folder in tmp_path."""
    limits = changes.pop("limits", Limits())
    return ServeSettings(course=ROOT, state=tmp_path / "state", limits=limits, **changes)


@dataclass
class Served:
    """A test's server: its state, its application and helpers to sign in, submit and grade."""

    state: ServerState
    app: Any
    grading: Grading
    clients: list[TestClient] = field(default_factory=list)

    def client(self, login: str | None = None, role: str = "student") -> TestClient:
        """A browser: signed in as ``login`` through a fresh one-time link when given."""
        client = TestClient(self.app, base_url="http://testserver")
        self.clients.append(client)
        if login is not None:
            (link,) = invite(self.state, [RosterEntry(login, name=login.title(), role=role)], "http://testserver")
            page = client.get(link.url)
            assert page.status_code == 200, page.text
            done = client.post(link.url, data={"csrf": csrf(page.text)})
            assert done.status_code == 200 and "Sign out" in done.text, done.text
        return client

    def submit(self, client: TestClient, sample: str | bytes, name: str = "attention.py") -> Any:
        """Upload a sample (``submissions/<sample>/attention.py``) or bytes; return the response."""
        data = sample if isinstance(sample, bytes) else (SAMPLES / sample / "attention.py").read_bytes()
        token = csrf(client.get("/").text)
        return client.post("/submit", data={"csrf": token}, files={"file": (name, data)})

    def drain(self) -> int:
        """Grade everything queued (and send pending pushes) in this process; return how many were graded."""
        return work(self.state, once=True, grading=self.grading)


def csrf(html: str) -> str:
    """The CSRF token of the first form of a page."""
    found = CSRF.search(html)
    assert found is not None, html[:500]
    return found.group(1)


@pytest.fixture
def served(db_url: str, tmp_path: Path, grading: Grading, request: pytest.FixtureRequest) -> Iterator[Served]:
    """The server on a fresh database; ``@pytest.mark.serve_settings(limits=Limits(...))`` changes its settings."""
    marker = request.node.get_closest_marker("serve_settings")
    settings = make_settings(tmp_path, **(marker.kwargs if marker else {}))
    state = open_state(ROOT, db_url, settings.state, settings=settings)
    app = create_app(ROOT, state=state)
    serve = Served(state, app, grading)
    yield serve
    for client in serve.clients:
        client.close()
    state.engine.dispose()
