"""A client that trickles its request body gets 408 from the real ``grader serve`` once ``upload_seconds`` have
passed since its headers, its connection is closed, and nothing is stored."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from grader.serve.testing import free_port

from .conftest import csrf
from .test_cli import course_copy, signed_in

pytestmark = pytest.mark.slow


def test_a_body_sent_a_byte_at_a_time_gets_408_and_nothing_is_stored(tmp_path: Path) -> None:
    course = course_copy(tmp_path)
    (course / "serve.yaml").write_text("upload_seconds: 2\n")
    with signed_in(course, tmp_path, workers=0) as (browser, port, home):
        cookie = "; ".join(f"{name}={value}" for name, value in browser.cookies.items())
        boundary = "b0undary"
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{csrf(home.text)}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="attention.py"\r\n\r\n'
            + "def f():\n    return 1\n" * 20
            + f"\r\n--{boundary}--\r\n"
        ).encode()
        head = (
            f"POST /submit HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(head)
            began = time.monotonic()
            answer = b""
            raw.setblocking(False)
            for byte in body:  # one byte every 0.1 s: the whole body would take well over a minute
                try:
                    raw.send(bytes([byte]))
                except OSError:
                    break  # the server closed the connection
                try:
                    answer += raw.recv(65536)
                    if b"\r\n\r\n" in answer:
                        break
                except BlockingIOError:
                    pass
                except ConnectionResetError:
                    break  # closed with a byte of ours unread: see below
                time.sleep(0.1)
            raw.setblocking(True)
            try:
                while chunk := raw.recv(65536):  # the rest of the answer, then the server closes the connection
                    answer += chunk
            except ConnectionResetError:
                # The server closed with a byte of ours still unread (one was in flight when it gave up):
                # its kernel answers with a reset, not an end of file. The answer read so far is checked below.
                pass
            took = time.monotonic() - began
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert b"did not arrive within 2 seconds; send it again on a faster connection." in answer
        assert 1.9 < took < 15
        assert browser.get("/").status_code == 200  # the server still answers others
    assert not list((course / ".grader-serve" / "uploads").rglob("*.py"))
    engine = create_engine(f"sqlite:///{course / '.grader-serve' / 'serve.db'}")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM submissions")).scalar() == 0
    engine.dispose()


def test_uvicorns_limits_are_the_options_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from grader.cli import main

    course = course_copy(tmp_path)
    given: list[dict[str, object]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: given.append(kwargs))
    base = ["serve", "--course", str(course), "--port", str(free_port()), "--workers", "0"]
    assert main(base) == 0
    assert main([*base, "--limit-concurrency", "7", "--keep-alive", "3"]) == 0
    assert [(k["limit_concurrency"], k["timeout_keep_alive"]) for k in given] == [(500, 5), (7, 3)]


@pytest.mark.parametrize(
    ("argv", "settings", "expected"),
    [
        (["--limit-concurrency", "0"], "", "serve: --limit-concurrency: give 1 to 100000 connections"),
        (["--keep-alive", "0"], "", "serve: --keep-alive: give whole seconds, 1 to 3600"),
        (
            [],
            "upload_seconds: 0\n",
            "serve.yaml: upload_seconds: 0 is less than or equal to the minimum of 0; give seconds",
        ),
    ],
)
def test_bad_limits_stop_the_server_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], settings: str, expected: str
) -> None:
    from grader.cli import main

    course = course_copy(tmp_path)
    if settings:
        (course / "serve.yaml").write_text(settings)
    assert main(["serve", "--course", str(course), "--port", str(free_port()), *argv]) in (2, 3)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not (course / ".grader-serve").exists()
