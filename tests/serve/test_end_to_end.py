"""End to end: a real uvicorn on 127.0.0.1 with its grading worker process, a simulated LTI 1.3 platform,
two students launched from it, graded, released, and their scores posted back through AGS."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
import yaml
from sqlalchemy import select

from grader.serve.app import create_app
from grader.serve.db import Push, Submission, User
from grader.serve.state import open_state
from grader.serve.testing import free_port, run_server

from .conftest import ROOT, SAMPLES, csrf
from .lti_platform import SimulatedPlatform, form_fields

pytestmark = pytest.mark.slow


def launch(platform: SimulatedPlatform, base: str, login_hint: str, **extra: str) -> httpx.Client:
    """A browser that opens the assignment in the LMS: login initiation, the platform's auto-post, the launch."""
    client = httpx.Client(base_url=base, follow_redirects=False, timeout=30)
    params = platform.login_initiation_params(base + "/lti/launch", login_hint, **extra)
    start = client.get("/lti/login?" + urlencode(params))
    assert start.status_code == 302, start.text
    auth = httpx.get(start.headers["location"], timeout=30)
    assert auth.status_code == 200, auth.text
    action, fields = form_fields(auth.text)
    assert action == base + "/lti/launch"
    landed = client.post(action, data=fields)
    assert landed.status_code == 303, landed.text
    return client


def wait_graded(client: httpx.Client, number: int, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = client.get(f"/submissions/{number}")
        if 'http-equiv="refresh"' not in page.text:
            return page.text
        time.sleep(0.2)
    raise AssertionError(f"submission {number} not graded in {timeout} s")


def test_lti_launch_submit_release_and_ags_scores(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with SimulatedPlatform(redirect_uris=[base + "/lti/launch"], tool_jwks_url=base + "/lti/jwks") as platform:
        settings = tmp_path / "serve.yaml"
        settings.write_text(yaml.safe_dump({"public_url": base, "lti": {"platforms": [platform.registration()]}}))
        app = create_app(ROOT, db_url, state_dir=tmp_path / "state", workers=1, settings=settings)
        platform.add_user("alice")
        platform.add_user("bob")
        platform.add_user("ines", role="instructor")
        with run_server(app, port=port):
            students = {"alice": "no_sqrt_dk", "bob": "correct_numpy"}
            clients = {name: launch(platform, base, name) for name in students}
            for name, sample in students.items():
                client = clients[name]
                home = client.get("/")
                assert home.status_code == 200 and "Submit your attention.py" in home.text
                data = (SAMPLES / sample / "attention.py").read_bytes()
                sent = client.post("/submit", data={"csrf": csrf(home.text)}, files={"file": ("attention.py", data)})
                assert sent.status_code == 303
            pages = {name: wait_graded(clients[name], 1) for name in students}
            assert "Visible checks:" in pages["alice"]
            teacher = launch(platform, base, "ines")
            staff = teacher.get("/staff")
            assert staff.status_code == 200 and "alice" in staff.text
            assert platform.scores == []  # nothing is pushed before release
            released = teacher.post("/staff/release", data={"csrf": csrf(staff.text), "released": "yes"})
            assert released.status_code == 303
            scores = platform.wait_for_scores(2)
        state = open_state(ROOT, db_url, tmp_path / "state", migrate=False, settings=settings)
        with state.db() as db:
            expected = {}
            for user in db.execute(select(User).where(User.role == "student")).scalars():
                sub = db.execute(select(Submission).where(Submission.user_id == user.id)).scalar_one()
                expected[user.subject] = (sub.score, sub.max_score)
            pushes = db.execute(select(Push)).scalars().all()
        state.engine.dispose()
    got = {s.body["userId"]: (s.body["scoreGiven"], s.body["scoreMaximum"]) for s in scores}
    assert got == expected
    assert got["sub-bob"][0] == got["sub-bob"][1] and got["sub-alice"][0] < got["sub-alice"][1]
    assert all(s.body["gradingProgress"] == "FullyGraded" for s in scores)
    assert sorted((p.state, p.status, p.reason) for p in pushes) == [("sent", 200, "released")] * 2
