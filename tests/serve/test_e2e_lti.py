"""Issue 28's first done-when, end to end: ``grader serve --course .`` on a fresh clone, started for real
(uvicorn on 127.0.0.1, its own grading workers), takes two students through a full LTI 1.3 launch from a
simulated platform (its own RSA keys and JWKS, a real signed id_token), grades the buggy sample and the
correct one they upload, and both scores arrive at the platform's AGS score service with the right values.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.course.test_samples import EXPECTED
from tests.serve.lti_platform import SimulatedPlatform, launch_through
from tests.spec_totals import totals

ROOT = Path(__file__).resolve().parents[2]
CORRECT, BUGGY = "correct_numpy", "no_sqrt_dk"

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone of this repository (its committed course: specs, reference, samples)."""
    dest = tmp_path_factory.mktemp("fresh") / "course"
    if shutil.which("git") and (ROOT / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True, timeout=120)
    else:  # an unpacked source tree: copy the course the way a clone holds it
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".venv", "reports", ".grader-serve", "*.egg-info"))
    return dest


@pytest.fixture(scope="module")
def served(clone: Path, tmp_path_factory: pytest.TempPathFactory):
    """The simulated platform, and ``grader serve --course .`` running in the clone, registered with each other."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with SimulatedPlatform(redirect_uris=[base + "/lti/launch"], tool_jwks_url=base + "/lti/jwks") as platform:
        settings = {"public_url": base, "lti": {"platforms": [platform.registration()]}}
        (clone / "serve.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
        log = (tmp_path_factory.mktemp("serve") / "serve.log").open("w")
        env = {k: v for k, v in os.environ.items() if k != "GRADER_COURSE"}
        # The installed console script, as a user types it (python -m grader would import the clone's own grader/).
        script = Path(sys.executable).with_name("grader")
        grader = [str(script)] if script.is_file() else [sys.executable, "-P", "-m", "grader"]
        server = subprocess.Popen(
            [*grader, "serve", "--course", ".", "--port", str(port), "--workers", "2"],
            cwd=clone,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_until_up(server, base, Path(log.name))
            yield platform, base
        finally:
            try:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=10)
            log.close()


def _wait_until_up(server: subprocess.Popen, base: str, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"grader serve exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(base + "/lti/jwks", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"grader serve did not answer within 90 s:\n{log.read_text()[-3000:]}")


CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _csrf(page: httpx.Response) -> str:
    found = CSRF.search(page.text)
    assert found is not None, f"no form with a CSRF token on {page.url}: {page.text[:300]}"
    return found.group(1)


def _launch(platform: SimulatedPlatform, base: str, login: str) -> tuple[httpx.Client, httpx.Response]:
    """A browser launched into the tool from the LMS as ``login``: (the browser, the page it lands on)."""
    browser = httpx.Client(base_url=base, timeout=30, follow_redirects=True)
    landing = launch_through(browser, platform, base + "/lti/login", base + "/lti/launch", login)
    assert landing.status_code == 200, landing.text[:500]
    return browser, landing


def test_two_students_launch_from_the_lms_submit_and_their_scores_reach_the_gradebook(served, clone):
    platform, base = served
    total = totals(clone / "exercises")
    expected = {
        "sub-ada": float(total.points),  # the correct sample earns every point of the specs
        "sub-bob": float(sum(EXPECTED[BUGGY])),  # the buggy one what tests/course/test_samples.py says it earns
    }
    assert expected["sub-bob"] < expected["sub-ada"]
    browsers = []
    for login, sample in (("ada", CORRECT), ("bob", BUGGY)):
        platform.add_user(login, role="student")
        browser, home = _launch(platform, base, login)
        browsers.append(browser)
        assert str(home.url) == base + "/" and "Submit your attention.py" in home.text
        source = (clone / "submissions" / sample / "attention.py").read_bytes()
        sent = browser.post("/submit", data={"csrf": _csrf(home)}, files={"file": ("attention.py", source)})
        assert sent.status_code == 200 and str(sent.url) == base + "/submissions/1", sent.text[:500]
    for browser in browsers:
        _wait_graded(browser)
    assert platform.scores == []  # nothing reaches the gradebook before the staff release the results
    platform.add_user("ines", role="instructor")
    teacher, staff = _launch(platform, base, "ines")
    browsers.append(teacher)
    assert str(staff.url) == base + "/staff"
    released = teacher.post("/staff/release", data={"csrf": _csrf(staff), "released": "yes"})
    assert released.status_code == 200, released.text[:500]
    posts = platform.wait_for_scores(2, timeout=120)
    time.sleep(1.0)  # a push sent twice would arrive now
    posts = list(platform.scores)
    for browser in browsers:
        browser.close()
    by_user = {post.body["userId"]: post.body for post in posts}
    assert set(by_user) == set(expected) and len(posts) == 2
    for user, score in expected.items():
        body = by_user[user]
        assert body["scoreGiven"] == pytest.approx(score)
        assert body["scoreMaximum"] == pytest.approx(float(total.points))
        assert body["activityProgress"] == "Completed" and body["gradingProgress"] == "FullyGraded"
    assert {post.lineitem_id for post in posts} == {"1"}
    assert {post.content_type for post in posts} == {"application/vnd.ims.lis.v1.score+json"}
    assert platform.refusals == []  # no token request or score post was refused on the way


def _wait_graded(browser: httpx.Client, timeout: float = 120.0) -> str:
    """The first submission's page once graded (it reloads itself while queued)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = browser.get("/submissions/1")
        assert page.status_code == 200, page.text[:300]
        if 'http-equiv="refresh"' not in page.text:
            return page.text
        time.sleep(1.0)  # as the page's own refresh does (the server limits each user's request rate)
    raise AssertionError(f"submission 1 was not graded in {timeout} s")
