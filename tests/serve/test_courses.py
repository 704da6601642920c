"""Several course folders in one ``grader serve``: each course on its own host name (its ``public_url``), with its
own database, uploads, sessions and LTI registration; a request for another host name finds no course."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

from sqlalchemy import func, select  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from grader.serve.app import create_courses_app  # noqa: E402
from grader.serve.db import Submission  # noqa: E402
from grader.serve.invites import RosterEntry, invite  # noqa: E402

from .conftest import SAMPLES, csrf  # noqa: E402
from .test_cli import course_copy  # noqa: E402


def two_copies(tmp_path: Path, names: tuple[str, str]) -> list[Path]:
    folders = []
    for name in names:
        (tmp_path / name).mkdir()
        folders.append(course_copy(tmp_path / name))
    return folders


def test_two_courses_are_served_each_on_its_own_host_name(tmp_path: Path) -> None:
    courses = two_copies(tmp_path, ("g14a", "g14b"))
    for name, course in zip(("g14a", "g14b"), courses, strict=True):
        (course / "serve.yaml").write_text(f"public_url: http://{name}.test\n")
    app = create_courses_app(courses)
    states = {host: sub.state.server for host, sub in app.state.courses.items()}
    assert sorted(states) == ["g14a.test", "g14b.test"]
    with TestClient(app, base_url="http://g14a.test") as alice:
        (link,) = invite(states["g14a.test"], [RosterEntry("alice", name="Alice")], "http://g14a.test")
        page = alice.get(link.url)
        assert alice.post(link.url, data={"csrf": csrf(page.text)}).status_code == 200
        data = (SAMPLES / "correct_numpy" / "attention.py").read_bytes()
        token = csrf(alice.get("/").text)
        assert alice.post("/submit", data={"csrf": token}, files={"file": ("attention.py", data)}).status_code == 200
        same_link_elsewhere = TestClient(app, base_url="http://g14b.test").get(urlpath(link.url))
        assert same_link_elsewhere.status_code == 403  # the one-time link is course A's, unknown to course B
        assert TestClient(app, base_url="http://other.test").get("/").status_code == 404
    counts = {}
    for host, state in states.items():
        with state.db() as db:
            counts[host] = db.execute(select(func.count()).select_from(Submission)).scalar()
    assert counts == {"g14a.test": 1, "g14b.test": 0}


def urlpath(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path


def test_several_courses_need_distinct_public_urls(tmp_path: Path) -> None:
    from grader.errors import UsageError

    courses = two_copies(tmp_path, ("a", "b"))
    (courses[0] / "serve.yaml").write_text("public_url: http://same.test\n")
    with pytest.raises(UsageError, match=r"b/course: serve.yaml: public_url: missing; give each course its own"):
        create_courses_app(courses)
    assert not (courses[0] / ".grader-serve").exists()  # nothing left behind
    (courses[1] / "serve.yaml").write_text("public_url: http://same.test\n")
    with pytest.raises(UsageError, match=r"public_url: same.test is another course's; give each course its own"):
        create_courses_app(courses)


def test_several_courses_refuse_one_db_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grader.cli import main

    a, b = two_copies(tmp_path, ("a", "b"))
    assert main(["serve", "--course", str(a), "--course", str(b), "--db", "sqlite:///x.db"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "with several --course, give no --db" in err[0]
    assert not (a / ".grader-serve").exists() and not (b / ".grader-serve").exists()
