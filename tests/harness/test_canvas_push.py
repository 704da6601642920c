"""``grade --canvas-push`` (issue 23, item 3): one bulk request, rate limits, no comment twice, no plain http.

A local server answers as Canvas's REST API does (https://canvas.instructure.com/doc/api/):
``GET /api/v1/courses/:id``, ``GET .../assignments/:id``, ``GET .../assignments/:id/submissions``
(with ``include[]=submission_comments``), ``POST .../submissions/update_grades`` (the bulk update,
answering a Progress) and ``GET /api/v1/progress/:id``. Canvas refuses a request over its rate with
``403 Forbidden (Rate Limit Exceeded)`` and ``X-Rate-Limit-Remaining`` (or 429), which the push must
wait out and retry.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from grader.builtin import lms
from grader.cli import main
from harness.test_term import _canvas, _grade

pytest.importorskip("canvasapi")


class _Canvas(BaseHTTPRequestHandler):
    requests: ClassVar[list] = []
    comments: ClassVar[dict[int, list[str]]] = {}
    grades: ClassVar[dict[int, str]] = {}
    refuse: ClassVar[list[tuple[int, dict[str, str], str]]] = []  # answers given before any real one

    def _send(self, body: object, status: int = 200, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if not isinstance(body, str) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _refused(self) -> bool:
        if self.refuse:
            status, headers, body = self.refuse.pop(0)
            self._send(body, status, headers)
            return True
        return False

    def do_GET(self) -> None:
        self.requests.append(("GET", self.path, self.headers.get("Authorization"), {}))
        if self._refused():
            return
        path = self.path.split("?")[0].strip("/").split("/")
        if path[-1] == "submissions":
            self._send(
                [
                    {"id": 9, "user_id": u, "assignment_id": 2, "submission_comments": [{"comment": c} for c in cs]}
                    for u, cs in sorted(self.comments.items())
                ]
            )
        elif path[-2:-1] == ["progress"]:
            self._send({"id": 5, "workflow_state": "completed", "url": "x"})
        elif path[-2:-1] == ["assignments"]:
            self._send({"id": 2, "course_id": 1, "name": "G14"})
        else:
            self._send({"id": 1, "name": "Course"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        form = urllib.parse.parse_qs(body)
        self.requests.append(("POST", self.path, self.headers.get("Authorization"), form))
        if self._refused():
            return
        for key, values in form.items():
            user, field = key.removeprefix("grade_data[").removesuffix("]").split("][")
            if field == "text_comment":
                self.comments.setdefault(int(user), []).append(values[0])
            elif field == "posted_grade":
                self.grades[int(user)] = values[0]
        self._send({"id": 5, "workflow_state": "queued", "url": "x"})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Canvas.requests, _Canvas.comments, _Canvas.grades, _Canvas.refuse = [], {}, {}, []
    httpd = HTTPServer(("127.0.0.1", 0), _Canvas)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/courses/1/assignments/2"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Canvas may respond unexpectedly:UserWarning")  # the test server is plain HTTP
def test_one_bulk_request_for_the_class_and_no_comment_twice(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _canvas(tmp_path)
    monkeypatch.setenv("CANVAS_API_TOKEN", "t0ken")
    assert _grade(tmp_path, "--canvas-push", server, "--allow-http") == 0
    assert all(auth == "Bearer t0ken" for _, _, auth, _ in _Canvas.requests)
    posts = [(p, form) for method, p, _, form in _Canvas.requests if method == "POST"]
    assert [p for p, _ in posts] == ["/api/v1/courses/1/assignments/2/submissions/update_grades"]  # one, for all
    assert not [r for r in _Canvas.requests if r[0] == "PUT"]
    assert _Canvas.grades == {340934: "68", 340935: "75.4"}
    [ann] = _Canvas.comments[340935]
    assert "marked LATE" in ann and "G14: 75.4 / 86" in ann and "(grader result " in ann
    # The same results pushed again: the grades again (harmless), no second comment.
    assert _grade(tmp_path, "--canvas-push", server, "--allow-http") == 0
    posts = [form for method, _, _, form in _Canvas.requests if method == "POST"]
    assert len(posts) == 2 and not any(k.endswith("[text_comment]") for k in posts[1])
    assert [len(c) for _, c in sorted(_Canvas.comments.items())] == [1, 1]
    # A changed result (another manual score) is a new comment.
    manual = tmp_path / "manual.csv"
    manual.write_text(manual.read_text().replace("smithbob,G14.01,8,", "smithbob,G14.01,10,"))
    assert _grade(tmp_path, "--canvas-push", server, "--allow-http") == 0
    assert [len(c) for _, c in sorted(_Canvas.comments.items())] == [2, 1]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Canvas may respond unexpectedly:UserWarning")
def test_rate_limits_are_waited_out_with_the_servers_back_off(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _canvas(tmp_path)
    waits: list[float] = []
    monkeypatch.setattr(lms, "SLEEP", waits.append)
    _Canvas.refuse = [
        (403, {"X-Rate-Limit-Remaining": "0"}, "403 Forbidden (Rate Limit Exceeded)"),
        (429, {"Retry-After": "7"}, "slow down"),
    ]
    monkeypatch.setenv("CANVAS_API_TOKEN", "t0ken")
    assert _grade(tmp_path, "--canvas-push", server, "--allow-http") == 0
    assert waits[:2] == [2.0, 7.0]  # an empty bucket: 2 s; then the server's Retry-After
    assert _Canvas.grades == {340934: "68", 340935: "75.4"}
    # A 403 that is no rate limit (the token may not grade) is not retried: one line, exit 3.
    _Canvas.refuse = [(403, {}, '{"errors": [{"message": "user not authorized"}]}')]
    assert _grade(tmp_path, "--canvas-push", server, "--allow-http") == 3


@pytest.mark.parametrize(
    ("url", "extra", "says"),
    [
        ("http://canvas.example.edu/courses/1/assignments/2", (), "plain http:// would send the Canvas token in clear"),
        ("http://canvas.example.edu/courses/1/assignments/2", ("--allow-http",), "accepts localhost only"),
        ("https://canvas.example.edu/courses/1/quizzes/2", (), "not an assignment's address"),
    ],
)
def test_bad_addresses_are_one_line_before_grading(
    tmp_path: Path, url: str, extra: tuple, says: str, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    _canvas(tmp_path)
    monkeypatch.setenv("CANVAS_API_TOKEN", "t0ken")
    assert _grade(tmp_path, "--canvas-push", url, *extra) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"grader: error: --canvas-push {url}: ") and says in err[0]
    assert not (tmp_path / "out").exists()  # refused before anything was graded or written


def test_a_push_without_a_token_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _canvas(tmp_path)
    monkeypatch.delenv("CANVAS_API_TOKEN", raising=False)
    code = main(["grade", str(tmp_path / "canvas.zip"), "--out", str(tmp_path / "out"), "--canvas-push",
                 "https://canvas.example.edu/courses/1/assignments/2"])  # fmt: skip
    assert code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["grader: error: --canvas-push: set CANVAS_API_TOKEN to a Canvas access token"]
    assert not (tmp_path / "out").exists()


def test_fingerprint_follows_the_result() -> None:
    one = lms.comment_fingerprint("7", 75.4, "G14: 75.4 / 86")
    assert one == lms.comment_fingerprint("7", 75.4, "G14: 75.4 / 86") and len(one) == 16
    assert one != lms.comment_fingerprint("7", 75.5, "G14: 75.4 / 86")
    assert one != lms.comment_fingerprint("8", 75.4, "G14: 75.4 / 86")
