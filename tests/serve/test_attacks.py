"""Attacks on ``grader serve`` through its ASGI application: what a signed-in student or an anonymous client sends.

Each attack gets a refusal (a status and one sentence) and costs the server a bounded amount of
work: a request body is read only up to the route's limit, whatever the client declares.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

from sqlalchemy import func, select  # noqa: E402

from grader.serve.db import Audit, Submission  # noqa: E402
from grader.serve.settings import WAITING, Limits, ServeSettings, load_settings  # noqa: E402

from .conftest import Served, csrf  # noqa: E402

MIB = 1024 * 1024


def _stream(app: Any, path: str, headers: list[tuple[bytes, bytes]], head: bytes, total: int) -> tuple[int, int, bytes]:
    """POST ``head`` then ``total`` bytes of ``#`` in 1 MiB chunks, sent only as the app asks for them.

    Returns the response status, how many body bytes the app read, and the response body.
    """
    sent = 0
    chunks = [head]
    status: list[int] = []
    body: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if chunks:
            chunk = chunks.pop()
        elif sent - len(head) < total:
            chunk = b"#" * MIB
        else:
            return {"type": "http.request", "body": b"", "more_body": False}
        sent += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *headers],  # no content-length: a chunked upload
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    asyncio.run(app(scope, receive, send))
    return status[0], sent, b"".join(body)


def test_a_chunked_upload_without_content_length_is_cut_at_the_limit(served: Served) -> None:
    """A body with no Content-Length is read only up to the upload limit, then refused (413), not spooled to disk."""
    client = served.client("mallory")
    token = csrf(client.get("/").text)
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    boundary = "XyZ"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{token}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="attention.py"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    headers = [(b"cookie", cookie.encode()), (b"content-type", f"multipart/form-data; boundary={boundary}".encode())]
    status, read, page = _stream(served.app, "/submit", headers, head, 64 * MIB)
    limit = served.state.settings.upload_max_bytes
    assert status == 413 and b"larger than 512 KiB" in page
    assert read <= limit + 64 * 1024 + MIB, f"the server read {read / MIB:.1f} MiB of a refused upload"
    with served.state.db() as db:
        assert db.execute(select(func.count()).select_from(Submission)).scalar() == 0
        assert "refused: upload too big" in [a.action for a in db.execute(select(Audit)).scalars()]


@pytest.mark.parametrize("path", ["/login/not-a-token", "/lti/login", "/lti/launch", "/logout"])
def test_an_anonymous_post_of_a_huge_form_is_cut_short(served: Served, path: str) -> None:
    """The routes anyone may post to read a small form only: a 64 MiB field is refused after a bounded read."""
    head = b"csrf="
    headers = [(b"content-type", b"application/x-www-form-urlencoded")]
    status, read, _ = _stream(served.app, path, headers, head, 64 * MIB)
    assert status in (400, 403, 413)
    assert read <= 2 * MIB, f"{path}: the server read {read / MIB:.1f} MiB of a form"


def test_a_submission_graded_longer_than_the_stale_time_is_not_taken_by_a_second_worker(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile submission that hangs every call keeps its worker for many minutes (each call's timeout, then the
    submission's wall-clock backstop); the worker still holds it, so no second worker grades it again meanwhile."""
    import datetime as dt
    import threading
    import time

    from grader.serve import worker

    monkeypatch.setattr(worker, "STALE_AFTER", dt.timedelta(seconds=0.5))
    monkeypatch.setattr(worker, "HEARTBEAT_SECONDS", 0.1)
    client = served.client("mallory")
    assert served.submit(client, b"import time\ntime.sleep(10**6)\n").status_code == 200
    sub_id = worker.claim(served.state)
    assert sub_id is not None

    class Slow:
        """A grading run whose one submission takes 2 s (a worker grading hostile code)."""

        def grade(self, path: object) -> dict[str, object]:
            time.sleep(2.0)
            raise RuntimeError("done waiting")

    thread = threading.Thread(
        target=lambda: pytest.raises(RuntimeError, worker.grade_one, served.state, Slow(), sub_id)
    )
    thread.start()
    taken = []
    while thread.is_alive():
        again = worker.claim(served.state)
        if again is not None:
            taken.append(again)
        time.sleep(0.1)
    thread.join()
    assert taken == [], "a second worker took the submission its worker was still grading"
    with served.state.db() as db:
        assert db.get(Submission, sub_id).state == "running"  # the worker's own failure handling marks it next


def test_a_huge_number_in_a_url_is_not_found_not_a_crash(served: Served) -> None:
    """A number past the database's integers (a guessed or fuzzed id) gets 404, not a server error."""
    student = served.client("mallory")
    staff = served.client("tina", role="ta")
    huge = "9" * 20
    assert student.get(f"/submissions/{huge}").status_code == 404
    assert staff.get(f"/staff/students/{huge}").status_code == 404
    assert staff.get(f"/staff/regrades/{huge}").status_code == 404
    token = csrf(staff.get("/staff").text)
    assert staff.post(f"/staff/students/{huge}/manual", data={"csrf": token, "points": "1"}).status_code == 404
    assert student.get("/submissions/2147483648").status_code == 404


def test_a_notebook_nested_too_deep_is_refused_not_a_crash(served: Served) -> None:
    """A JSON bomb of nesting (200,000 brackets in 400 KB) is not a notebook: 415, nothing stored, no server error."""
    client = served.client("mallory")
    bomb = b'{"cells": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    sent = served.submit(client, bomb, name="attention.ipynb")
    assert sent.status_code == 415 and "not valid JSON" in sent.text
    with served.state.db() as db:
        assert db.execute(select(func.count()).select_from(Submission)).scalar() == 0


def test_a_grading_worker_that_dies_is_started_again() -> None:
    """A worker killed (the kernel's OOM killer, a crash) is replaced: before, the server went on taking uploads that
    no worker would ever grade, and said nothing."""
    import subprocess
    import sys

    from grader.serve.app import supervise

    procs = [subprocess.Popen([sys.executable, "-c", "pass"])]  # a worker that is gone at once
    started: list[subprocess.Popen[bytes]] = []

    def start_one() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        started.append(proc)
        return proc

    async def run() -> None:
        stopping = asyncio.Event()
        task = asyncio.create_task(supervise(procs, start_one, stopping, interval=0.05, restart_after=0.0))
        await asyncio.sleep(1.5)
        stopping.set()
        await task

    try:
        asyncio.run(run())
        assert len(started) == 1 and procs[0] is started[0] and procs[0].poll() is None
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def test_the_database_password_is_not_on_a_worker_command_line(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any local user reads every process's command line (``ps``): the --db URL reaches the workers in their
    environment instead, and they read it from there."""
    from grader.serve import app, worker

    seen: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(app.subprocess, "Popen", lambda command, env: seen.append((command, env)))
    url = "postgresql+psycopg://grader:s3cret-pw@db.example.edu/g14"
    app.start_workers(served.state, 1, url)
    ((command, env),) = seen
    assert not any("s3cret-pw" in part for part in command)
    assert env["GRADER_SERVE_DB"] == url
    opened: list[object] = []
    monkeypatch.setenv("GRADER_SERVE_DB", url)
    monkeypatch.setattr(worker, "open_state", lambda *args, **kwargs: opened.append(args[1]) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        worker.main(command[command.index("--course") :])
    assert opened == [url]


@pytest.mark.serve_settings(limits=Limits(waiting=WAITING))
def test_one_student_cannot_fill_the_queue(served: Served) -> None:
    """With no per-window limit set, a student still has at most ``limits.waiting`` (2) submissions waiting: a burst
    of slow submissions (each import sleeping to its 10 s limit holds a worker for 40 s) would keep every other
    student's feedback waiting for as long as the burst takes."""
    client = served.client("mallory")
    codes = [served.submit(client, b"import time\ntime.sleep(%d)\n" % i).status_code for i in range(5)]
    assert codes == [200, 200, 429, 429, 429]
    refused = served.submit(client, b"import time\n")
    assert "2 submissions waiting to be graded" in refused.text
    with served.state.db() as db:
        assert db.execute(select(func.count()).select_from(Submission)).scalar() == 2
        assert [a.action for a in db.execute(select(Audit)).scalars()].count("refused: limit") == 4
    other = served.client("alice")
    assert served.submit(other, "correct_numpy").status_code == 200  # another student's upload is taken


def test_the_waiting_limit_is_on_by_default(tmp_path: Path) -> None:
    assert ServeSettings(course=tmp_path, state=tmp_path / "state").limits.waiting == WAITING == 2
    (tmp_path / "serve.yaml").write_text("limits: {per_window: 5}\n")
    assert load_settings(tmp_path).limits == Limits(per_window=5, waiting=2)
    (tmp_path / "serve.yaml").write_text("limits: {waiting: 0}\n")
    assert load_settings(tmp_path).limits.waiting == 0


def test_a_session_cookie_copied_before_sign_out_no_longer_works(served: Served) -> None:
    """Sessions are signed cookies: without a server-side mark, a cookie copied (a shared lab computer, a stolen
    cookie) stayed valid for its 12 hours after its owner signed out."""
    client = served.client("mallory")
    copied = dict(client.cookies)
    assert client.post("/logout", data={"csrf": csrf(client.get("/").text)}).status_code == 200
    thief = served.client()
    for name, value in copied.items():
        thief.cookies.set(name, value)
    assert thief.get("/history").status_code == 401
    assert thief.post("/submit", files={"file": ("attention.py", b"x = 1\n")}).status_code in (401, 403)
    again = served.client("mallory")  # a new sign-in works
    assert again.get("/history").status_code == 200


HANGS_EVERY_CALL = b"""import time


def _hang(*args, **kwargs):
    time.sleep(10**6)


softmax = attention = softmax_backward = score_array_bytes = bytes_to_mib = _hang
"""


@pytest.mark.serve_settings(submission_seconds=1.0)
def test_a_submission_that_hangs_every_call_frees_its_worker_after_the_servers_budget(served: Served) -> None:
    """Each hanging call waits out its own timeout; ``grade``'s budget (120 s of CPU, 8 minutes of wall clock for
    code that sleeps) would hold the worker that long. ``grading.submission_seconds`` is the server's own budget:
    the hanging submission is recorded as timed out and the next student's is graded."""
    import time

    from grader.serve.worker import Grading, work

    assert served.submit(served.client("mallory"), HANGS_EVERY_CALL).status_code == 200
    assert served.submit(served.client("alice"), "correct_numpy").status_code == 200
    grading = Grading(served.state)
    try:
        began = time.monotonic()
        assert work(served.state, once=True, grading=grading) == 2
        took = time.monotonic() - began
    finally:
        grading.close()
    with served.state.db() as db:
        hung, fine = db.execute(select(Submission).order_by(Submission.id)).scalars()
    assert took < 60, f"the worker was held {took:.0f} s"
    assert (hung.state, hung.score) == ("done", 0.0)
    assert "used up its 4 s budget of wall-clock time" in str(hung.full)
    assert (fine.state, fine.score) == ("done", fine.max_score)
    assert "budget" in str(hung.visible)  # the student is told why: their submission ran out of time


def test_the_servers_submission_budget_is_shorter_than_grades_by_default(tmp_path: Path) -> None:
    from grader.errors import ConfigError
    from grader.serve.settings import SUBMISSION_SECONDS

    assert load_settings(tmp_path).submission_seconds == SUBMISSION_SECONDS == 60.0
    (tmp_path / "serve.yaml").write_text("grading: {submission_seconds: 2.5}\n")
    assert load_settings(tmp_path).submission_seconds == 2.5
    (tmp_path / "serve.yaml").write_text("grading: {submission_seconds: 0}\n")
    with pytest.raises(ConfigError, match=r"serve.yaml: grading.submission_seconds: .*more than 0 and at most 3600"):
        load_settings(tmp_path)


def test_invite_days_are_read_and_checked(tmp_path: Path) -> None:
    from grader.errors import ConfigError
    from grader.serve.settings import INVITE_DAYS

    assert load_settings(tmp_path).invite_days == INVITE_DAYS == 14
    (tmp_path / "serve.yaml").write_text("invites: {days: 3}\n")
    assert load_settings(tmp_path).invite_days == 3
    for bad in ("0", "1000", "'two'"):
        (tmp_path / "serve.yaml").write_text(f"invites: {{days: {bad}}}\n")
        with pytest.raises(ConfigError, match=r"serve.yaml: invites.days: .*give 1 to 366 days"):
            load_settings(tmp_path)


@pytest.mark.sandbox
def test_a_zygote_killed_under_the_worker_is_started_again_and_the_submission_graded(served: Served) -> None:
    """The out-of-memory killer (or an administrator) ends the sandbox's zygote of a running worker: the
    submission it was grading is not the student's failure. The worker starts a new sandbox and grades it
    again; before, it was stored as failed, and so was every later one."""
    import os
    import signal
    import sys

    from grader.serve.worker import Grading, work

    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("the sandbox needs Linux and root")
    from conftest import processes

    def zygotes() -> set[int]:
        return {p["pid"] for p in processes() if p["ppid"] == os.getpid() and "child/zygote.py" in p["cmdline"]}

    before = zygotes()
    grading = Grading(served.state)
    try:
        assert served.submit(served.client("alice"), "correct_numpy").status_code == 200
        assert work(served.state, once=True, grading=grading) == 1  # the sandbox is up (started lazily or not)
        ours = zygotes() - before
        assert len(ours) == 1
        os.kill(ours.pop(), signal.SIGKILL)
        assert served.submit(served.client("bob"), "correct_numpy").status_code == 200
        assert work(served.state, once=True, grading=grading) == 1
    finally:
        grading.close()
    with served.state.db() as db:
        rows = list(db.execute(select(Submission).order_by(Submission.id)).scalars())
    assert [r.state for r in rows] == ["done", "done"]
    assert all(
        r.max_score and r.score == r.max_score for r in rows
    )  # both graded in full, the second after the restart
