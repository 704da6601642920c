"""``grader serve`` from the command line: invite links from a roster, the server started in one command,
the schema the migrations make equal to the models, rate limits, bad settings in one line."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import create_engine

from grader.cli import main
from grader.serve.db import Base
from grader.serve.migrate import upgrade
from grader.serve.security import RateLimiter
from grader.serve.settings import load_settings
from grader.serve.testing import free_port

from .conftest import ROOT, SAMPLES, Served, csrf


def course_copy(tmp_path: Path) -> Path:
    """A fresh clone's course folder: course.yaml, exercises/, reference/ (no server folder yet)."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(ROOT / "course.yaml", course)
    for folder in ("exercises", "reference"):
        shutil.copytree(ROOT / folder, course / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return course


@contextlib.contextmanager
def signed_in(
    course: Path, tmp_path: Path, workers: int, output: int | None = subprocess.DEVNULL
) -> Iterator[tuple[httpx.Client, int, httpx.Response]]:
    """The installed ``grader serve --course COURSE`` on a free port, and a client signed in by an invite link.

    Yields the client, the port and the home page it signed in to; the server is stopped afterwards.
    """
    roster = tmp_path / "roster.csv"
    roster.write_text("id\nalice\n")
    port = free_port()
    grader = [sys.executable, "-m", "grader", "serve", "--course", str(course), "--port", str(port)]
    link = subprocess.run([*grader, "invite", str(roster)], capture_output=True, text=True, check=True).stdout
    server = subprocess.Popen(
        [*grader, "--workers", str(workers)],
        stdout=output,
        stderr=subprocess.STDOUT if output == subprocess.PIPE else subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        deadline = time.monotonic() + 60
        while True:
            try:
                page = client.get(link.split(",")[2].strip())
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline and server.poll() is None, "the server did not start"
                time.sleep(0.2)
        home = client.post(page.url.path, data={"csrf": csrf(page.text)}, follow_redirects=True)
        assert "Sign out" in home.text
        yield client, port, home
    finally:
        server.terminate()
        server.wait(30)


def test_invite_prints_one_login_link_per_roster_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    course = course_copy(tmp_path)
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,role\nalice,Alice A,alice@example.edu,\ntina,Tina T,,ta\n")
    assert main(["serve", "invite", str(roster), "--course", str(course), "--port", "8123"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(",")[:2] for line in lines] == [["alice", "student"], ["tina", "ta"]]
    assert all(line.split(",")[2].startswith("http://127.0.0.1:8123/login/") for line in lines)
    assert (course / ".grader-serve" / "serve.db").is_file()
    assert (course / ".grader-serve" / ".gitignore").read_text().strip().endswith("*")


def test_invite_refuses_a_bad_role_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    course = course_copy(tmp_path)
    roster = tmp_path / "roster.csv"
    roster.write_text("id,role\nalice,admin\n")
    assert main(["serve", "invite", str(roster), "--course", str(course)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 2: role 'admin'; give one of student, ta, instructor" in err[0]


def test_bad_settings_stop_the_server_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    course = course_copy(tmp_path)
    (course / "serve.yaml").write_text("limits:\n  per_windw: 5\n")
    assert main(["serve", "--course", str(course)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "serve.yaml: limits:" in err[0] and "per_window" in err[0]
    assert not (course / ".grader-serve").exists()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"deployment_ids": None},
            "serve.yaml: lti.platforms[0]: deployment_ids: missing; give the value from the platform's registration.",
        ),
        (
            {"jwks_url": "http://lms.example.edu/jwks"},
            "serve.yaml: lti.platforms[0]: jwks_url: must be an https:// URL (plain http is accepted for 127.0.0.1 and localhost only).",
        ),
    ],
)
def test_a_bad_lms_registration_stops_the_server_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict, expected: str
) -> None:
    course = course_copy(tmp_path)
    good = {
        "issuer": "https://lms.example.edu",
        "client_id": "c",
        "deployment_ids": ["d"],
        "auth_login_url": "https://lms.example.edu/auth",
        "auth_token_url": "https://lms.example.edu/token",
        "jwks_url": "https://lms.example.edu/jwks",
    }
    entry = {k: v for k, v in {**good, **change}.items() if v is not None}
    (course / "serve.yaml").write_text(yaml.safe_dump({"lti": {"platforms": [entry]}}))
    assert main(["serve", "--course", str(course)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(expected), err
    assert not (course / ".grader-serve").exists()


@pytest.mark.slow
def test_grader_serve_starts_in_one_command_and_grades(tmp_path: Path) -> None:
    course = course_copy(tmp_path)
    with signed_in(course, tmp_path, workers=1, output=subprocess.PIPE) as (client, _, home):
        deadline = time.monotonic() + 60
        data = (SAMPLES / "correct_numpy" / "attention.py").read_bytes()
        sent = client.post("/submit", data={"csrf": csrf(home.text)}, files={"file": ("attention.py", data)})
        assert sent.status_code == 303
        while 'http-equiv="refresh"' in (page := client.get("/submissions/1")).text:
            assert time.monotonic() < deadline + 60, "not graded in time"
            time.sleep(0.2)
        assert "Visible checks:" in page.text and 'status-failed"' not in page.text
    uploads = list((course / ".grader-serve" / "uploads").rglob("*.py"))
    assert len(uploads) == 1 and uploads[0].stem == __import__("hashlib").sha256(data).hexdigest()


def _grading_workers(server: int) -> list[int]:
    from conftest import processes

    return [p["pid"] for p in processes() if p["ppid"] == server and "grader.serve.worker" in p["cmdline"]]


@pytest.mark.parametrize("how", ["SIGKILL", "SIGHUP"])
def test_a_server_that_ends_abruptly_or_hangs_up_leaves_no_grading_worker(tmp_path: Path, how: str) -> None:
    """Killed (SIGKILL, the out-of-memory killer), the server left its grading workers running on their
    own, orphans grading from the database and holding its terminal; a hang-up (its terminal closed) did
    too. Now a worker ends once its server is gone, and a hang-up stops the server as SIGTERM does."""
    import signal

    from conftest import processes

    course = course_copy(tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "grader", "serve", "--course", str(course), "--port", str(port), "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers := _grading_workers(server.pid)) < 2:
            assert time.monotonic() < deadline and server.poll() is None, "the server did not start its workers"
            time.sleep(0.2)
        time.sleep(1.0)  # the workers have started their sandboxes and wait for submissions
        server.send_signal(getattr(signal, how))
        deadline = time.monotonic() + 30
        while {p["pid"] for p in processes()} & set(workers):
            assert time.monotonic() < deadline, f"grading workers still running 30 s after the server's {how}"
            time.sleep(0.2)
        code = server.wait(timeout=30)
    finally:
        server.kill()
        server.wait()
        for pid in workers:  # whatever the test found, nothing of it outlives it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if how == "SIGHUP":
        assert code == 0 and "Traceback" not in server.stderr.read()  # stopped as by SIGTERM, gracefully


def test_the_migrations_make_the_models_schema(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = create_engine(f"sqlite:///{tmp_path / 'schema.db'}")
    upgrade(engine)
    upgrade(engine)  # a second start finds nothing to do
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


def test_rate_limiter_counts_a_sliding_minute() -> None:
    limiter = RateLimiter(per_minute=3)
    assert [limiter.allow("a", at=t) for t in (0.0, 1.0, 2.0, 3.0)] == [True, True, True, False]
    assert limiter.allow("b", at=3.0)  # another user or address has its own count
    assert limiter.allow("a", at=60.5)  # the first request left the minute


def test_requests_past_the_rate_limit_get_429(served: Served) -> None:
    limits = next(m for m in served.app.user_middleware if m.cls.__name__ == "RateLimit").kwargs
    limits["per_user"].per_minute, limits["per_address"].per_minute = 5, 12
    student = served.client("alice")  # signing in: 3 requests of the address, the last one the user's first
    codes = [student.get("/").status_code for _ in range(7)]
    assert codes == [200] * 4 + [429] * 3  # the user's limit: 5 a minute
    other = served.client()  # signed out, from the same address: 10 of its 12 are used
    codes = [other.get("/").status_code for _ in range(5)]
    assert codes == [200, 200, 429, 429, 429]
    assert "Too many requests" in other.get("/").text


def test_default_settings_without_serve_yaml() -> None:
    settings = load_settings(ROOT)
    assert settings.limits.per_window == 0 and settings.upload_max_bytes == 512 * 1024 and not settings.secure


def test_a_restarted_server_grades_what_its_stopped_workers_left(served: Served) -> None:
    from sqlalchemy import select

    from grader.serve.app import requeue_running
    from grader.serve.db import Submission
    from grader.serve.worker import claim

    client = served.client("alice")
    served.submit(client, "correct_numpy")
    assert claim(served.state) is not None  # a worker took it, then the server stopped
    assert requeue_running(served.state) == 1
    assert served.drain() == 1
    with served.state.db() as db:
        assert db.execute(select(Submission.state)).scalar_one() == "done"


def test_a_students_new_submission_is_graded_before_a_regrade_of_older_ones(served: Served) -> None:
    from sqlalchemy import select

    from grader.serve.db import Regrade, Submission
    from grader.serve.worker import claim

    client = served.client("alice")
    served.submit(client, "no_sqrt_dk")
    served.drain()
    with served.state.db() as db:
        job = Regrade(by="ines")
        db.add(job)
        db.flush()
        old = db.execute(select(Submission)).scalar_one()
        old.state, old.regrade_id, old.previous = "queued", job.id, old.full
        db.commit()
    other = served.client("bob")
    served.submit(other, "correct_numpy")
    with served.state.db() as db:
        new_id = db.execute(select(Submission.id).where(Submission.regrade_id.is_(None))).scalar_one()
    assert claim(served.state) == new_id


@pytest.mark.parametrize(
    ("db", "said"),
    [
        ("nosuch://x", "--db 'nosuch://x': no database driver 'nosuch'"),
        (
            "postgresql+psycopg://nobody@127.0.0.1:1/x",
            "--db 'postgresql+psycopg://nobody@127.0.0.1:1/x': cannot connect",
        ),
        ("not a url", "--db 'not a url': not a database URL"),
    ],
)
def test_a_bad_db_url_stops_the_server_in_one_line_leaving_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], db: str, said: str
) -> None:
    course = course_copy(tmp_path)
    assert main(["serve", "--course", str(course), "--db", db, "--workers", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and "postgresql+psycopg://USER@HOST/DB" in err[0], err
    assert not (course / ".grader-serve").exists()


def test_a_bad_policy_stops_the_server_leaving_no_server_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    course = course_copy(tmp_path)
    (course / "policy.yaml").write_text("due: notadate\n")
    (course / "serve.yaml").write_text("policy: policy.yaml\n")
    assert main(["serve", "--course", str(course), "--workers", "0"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "policy.yaml: due: 'notadate' is not a date" in err[0]
    assert not (course / ".grader-serve").exists()


def test_a_port_in_use_stops_the_server_in_one_line_leaving_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    course = course_copy(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["serve", "--course", str(course), "--port", str(port), "--workers", "0"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--port {port}: 127.0.0.1:{port} is in use" in err[0], err
    assert not (course / ".grader-serve").exists()
