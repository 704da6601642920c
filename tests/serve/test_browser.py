"""A real browser through ``grader serve``: headless Debian Chromium driven by Playwright.

The real server (uvicorn on 127.0.0.1, a free port, its grading worker process) serves a temporary
copy of the course on SQLite (and on PostgreSQL under .ci/run), registered with the simulated LTI 1.3
platform. In Chromium:

- a student opens the assignment in the LMS (an LTI launch: the platform's login initiation form,
  the tool's redirect to the platform, the auto-posted signed ``id_token``), uploads a buggy sample,
  watches the progress page turn into feedback, uploads the correct one and reads the history;
  before release no page of theirs holds a hidden check's name, description, input, expected value
  or message;
- a TA launches from the same LMS, enters a manual score with a comment and releases the hidden
  results; the student then reads the final score, the hidden tallies and the comment, and the
  gradebook receives the final score.

Every step is screenshotted at 1280 px and at a phone's 390 px; each screenshot is checked for its
page's expected text (read by Playwright) and for being a real picture (not one flat colour).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from grader.serve.app import create_app, start_workers
from grader.serve.db import Submission, User
from grader.serve.state import ServerState
from grader.serve.testing import free_port, run_server
from grader.serve.worker import Grading

from .lti_platform import SimulatedPlatform
from .test_crawl import secrets_of

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "submissions"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTHS = {"desktop": 1280, "phone": 390}
TIMEOUT_MS = 90_000
"""How long a page may take to turn into feedback (the machine may be loaded)."""


CONTRAST_JS = """
() => {
  const rgb = (s) => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    const box = el.getBoundingClientRect();
    if (!own || box.width === 0 || box.height === 0) continue;
    const a = lum(rgb(getComputedStyle(el).color).slice(0, 3)), b = lum(background(el));
    out.push({text: el.textContent.trim().slice(0, 40), ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)});
  }
  return out;
}
"""
"""Every element with text of its own: its rendered colour against the first opaque background behind it."""


def _need(missing: str | None) -> None:
    """Skip with the reason on a developer's machine; fail under CI=true (.ci/run installs both)."""
    if missing is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(missing)
    pytest.skip(missing)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, launched by Playwright (no ``playwright install``: its own browsers are not used)."""
    _need(None if CHROMIUM.is_file() else "chromium is not installed: run 'apt-get install -y chromium' (.ci/run does)")
    _need(
        None
        if importlib.util.find_spec("playwright") is not None
        else "playwright is not installed: pip install -e '.[test]'"
    )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def copy_course(target: Path) -> Path:
    """A copy of the repository's course (manifest, specs, reference), without its samples or server state."""
    target.mkdir()
    shutil.copy2(ROOT / "course.yaml", target / "course.yaml")
    for folder in ("exercises", "reference"):
        shutil.copytree(ROOT / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@dataclass
class Lms:
    """The simulated LMS and the real server registered with it."""

    platform: SimulatedPlatform
    tool: str
    state: ServerState
    db_url: str
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_grading(self) -> None:
        """Start the server's grading worker process (held back until the test has seen a queued submission)."""
        self.workers += start_workers(self.state, 1, self.db_url)


@pytest.fixture
def lms(tmp_path: Path, db_url: str) -> Iterator[Lms]:
    """The simulated LMS and the real server on ``db_url`` (no grading worker until `Lms.start_grading`)."""
    port = free_port()
    tool = f"http://127.0.0.1:{port}"
    with SimulatedPlatform(redirect_uris=[tool + "/lti/launch"], tool_jwks_url=tool + "/lti/jwks") as platform:
        platform.tool_login_url = tool + "/lti/login"
        course = copy_course(tmp_path / "course")
        serve_yaml = {"lti": {"platforms": [platform.registration()]}}
        (course / "serve.yaml").write_text(yaml.safe_dump(serve_yaml))
        app = create_app(course, db_url, tmp_path / "state")
        with run_server(app, port=port) as url:
            assert url == tool
            lms = Lms(platform, tool, app.state.server, db_url)
            try:
                yield lms
            finally:
                for proc in lms.workers:
                    proc.terminate()
                    proc.wait(timeout=30)


def launch(context: Any, platform: SimulatedPlatform, tool: str, login_hint: str, javascript: bool = True) -> Any:
    """Open the assignment from the LMS's course page as ``login_hint``: it posts the login initiation to the tool.

    Without JavaScript the user presses the auto-posting forms' Continue buttons, as such a browser shows them.
    """
    page = context.new_page()
    page.goto(platform.course_page_url(login_hint, tool + "/"))  # the course page in the LMS, the assignment's link
    if not javascript:
        page.get_by_role("button", name="Continue").click()  # the LMS posts the login initiation to the tool
        page.wait_for_url(re.compile(re.escape(platform.base_url) + "/auth"))
        page.get_by_role("button", name="Continue").click()  # the platform posts the signed id_token back
    page.wait_for_url(re.compile(re.escape(tool) + r"/(staff)?$"), timeout=TIMEOUT_MS)
    return page


UNHINTED_SCROLL_JS = """
[...document.querySelectorAll('.scroll')]
  .filter(box => box.scrollWidth > box.clientWidth)
  .filter(box => {
    const hint = box.previousElementSibling;
    return !(hint && hint.classList.contains('scroll-hint') && hint.getClientRects().length > 0);
  })
  .map(box => box.innerText.slice(0, 60))
"""
"""The text of each box that scrolls sideways with no visible ``.scroll-hint`` just above it."""


def shoot(page: Any, folder: Path, name: str, expected: list[str]) -> dict[str, str]:
    """Screenshot ``page`` at each width; check each for ``expected`` text and a real picture; return the texts."""
    from PIL import Image

    texts = {}
    for label, width in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": 900})
        text = page.inner_text("body")
        for words in expected:
            assert words in text, f"{name} at {width} px lacks {words!r}:\n{text[:2000]}"
        png = page.screenshot(full_page=True)
        (folder / f"{name}-{width}.png").write_bytes(png)
        with Image.open(io.BytesIO(png)) as image:
            assert image.width == width, (name, image.size)
            colours = image.convert("L").getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 16, f"{name} at {width} px is a blank picture"
        # the page fits the width: nothing but scrollable tables is wider than the viewport
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} at {width} px scrolls sideways by {overflow} px"
        # a table that scrolls sideways inside its box says so just above it, on the screen
        unhinted = page.evaluate(UNHINTED_SCROLL_JS)
        assert not unhinted, f"{name} at {width} px: a table scrolls sideways with no hint: {unhinted}"
        if label == "desktop":  # the header is one line on a desktop screen
            tops = page.evaluate("[...document.querySelectorAll('header > *')].map(e => e.getBoundingClientRect().top)")
            assert max(tops) - min(tops) < 16, f"{name} at {width} px: the header wraps ({tops})"
        low = [f"{c['text']!r}: {c['ratio']:.2f}:1" for c in page.evaluate(CONTRAST_JS) if c["ratio"] < 4.5]
        assert not low, f"{name} at {width} px: text below WCAG AA contrast (4.5:1): {low[:5]}"
        texts[label] = text
    return texts


def hidden_secrets(state: ServerState, grading: Grading) -> dict[str, str]:
    """What a student must not read before release: each hidden check's name, description, inputs and expected
    values (`test_crawl.secrets_of`, from the specs) and the message it got in these submissions."""
    secrets = secrets_of(grading)
    with state.db() as db:
        results = [s.full for s in db.execute(select(Submission)).scalars() if s.full]
    visible_text = ""
    for result in results:
        for exercise in result["exercises"]:
            for check in exercise["checks"]:
                if check["visibility"] == "visible":
                    visible_text += json.dumps(check)
                elif check.get("message"):
                    secrets[check["message"]] = f"message of {check['id']}"
    found = {secret: what for secret, what in secrets.items() if secret not in visible_text}
    assert len(found) > 40, "the course has hidden checks: the test can fail"
    return found


def wait_for_feedback(page: Any, number: int) -> None:
    """The progress page of submission ``number`` reloads itself until its feedback is there."""
    page.wait_for_url(re.compile(rf"/submissions/{number}$"))
    page.get_by_text(re.compile(r"Visible checks: [\d.]+ / [\d.]+")).wait_for(timeout=TIMEOUT_MS)


def upload(page: Any, tool: str, sample: str) -> None:
    page.goto(tool + "/")
    page.set_input_files("#file", str(SAMPLES / sample / "attention.py"))
    page.get_by_role("button", name="Submit").click()


def test_a_student_and_a_ta_through_launch_upload_feedback_history_release_and_manual_score(
    browser: Any, lms: Lms, grading: Grading, tmp_path: Path
) -> None:
    platform, tool, state = lms.platform, lms.tool, lms.state
    shots = tmp_path / "screenshots"
    shots.mkdir()
    platform.add_user("sam", role="student", name="Sam Student")
    platform.add_user("tara", role="ta", name="Tara Assistant")

    # The student's browser runs no JavaScript: the essentials work without it.
    student = browser.new_context(java_script_enabled=False)
    page = launch(student, platform, tool, "sam", javascript=False)
    shoot(page, shots, "1-launched", ["Submit your attention.py", "Sam Student", "Hidden checks and the final grade"])

    upload(page, tool, "no_sqrt_dk")
    page.wait_for_url(tool + "/submissions/1")
    progress = shoot(page, shots, "2-queued", ["Submission 1 is queued. This page reloads itself."])["desktop"]
    assert "Visible checks" not in progress
    assert page.locator('meta[http-equiv="refresh"]').count() == 1
    lms.start_grading()
    wait_for_feedback(page, 1)  # the page reloads itself (a meta refresh) until the feedback is there
    with state.db() as db:
        first = db.execute(select(Submission)).scalar_one()
        assert first.state == "done" and first.visible_score is not None and first.visible_max is not None
        assert first.visible_score < first.visible_max
        visible = f"Visible checks: {first.visible_score:g} / {first.visible_max:g}"
    texts = shoot(page, shots, "3-feedback-buggy", ["Submission 1", visible, "Hint:"])
    assert "failed" in texts["phone"] and "Final score" not in texts["phone"]
    assert page.locator('meta[http-equiv="refresh"]').count() == 0

    upload(page, tool, "correct_numpy")
    wait_for_feedback(page, 2)
    with state.db() as db:
        second = db.execute(select(Submission).where(Submission.number == 2)).scalar_one()
        correct = f"Visible checks: {second.visible_max:g} / {second.visible_max:g}"
    shoot(page, shots, "4-feedback-correct", ["Submission 2", correct])

    page.get_by_role("banner").get_by_role("link", name="History").click()
    page.wait_for_url(tool + "/history")
    history = shoot(page, shots, "5-history", ["Your submissions"])["desktop"]
    assert f"{first.visible_score:g} / {first.visible_max:g} (visible)" in history
    assert f"{second.visible_max:g} / {second.visible_max:g} (visible)" in history

    secrets = hidden_secrets(state, grading)
    for url in ("/", "/submissions/1", "/submissions/2", "/history"):
        page.goto(tool + url)
        html, text = page.content(), page.inner_text("body")
        for secret, what in secrets.items():
            assert secret not in html and secret not in text, f"{what} ({secret!r}) on {url} before release"

    staff = browser.new_context()
    ta = launch(staff, platform, tool, "tara")
    assert ta.url == tool + "/staff"
    shoot(ta, shots, "6-class", ["Class", "Release hidden results and grades", "Sam Student"])
    with state.db() as db:
        sam = db.execute(select(User).where(User.role == "student")).scalar_one()
    ta.get_by_role("link", name=sam.login).click()
    ta.wait_for_url(f"{tool}/staff/students/{sam.id}")
    ta.select_option("#target", "G14.01")
    ta.fill("#points", "2")
    ta.fill("#comment", "Explain the scaling in a comment, please.")
    ta.get_by_role("button", name="Save the manual score").click()
    ta.wait_for_url(f"{tool}/staff/students/{sam.id}")
    shoot(ta, shots, "7-manual-score", ["G14.01: 2 by", "Explain the scaling in a comment, please."])

    ta.goto(tool + "/staff")
    ta.get_by_role("button", name="Release hidden results and grades").click()
    ta.wait_for_url(tool + "/staff")
    shoot(ta, shots, "8-released", ["Hidden results and final grades are released."])

    (post,) = platform.wait_for_scores(1, timeout=TIMEOUT_MS / 1000)
    page.goto(tool + "/submissions/2")
    final = f"Final score: {post.body['scoreGiven']:g} / {post.body['scoreMaximum']:g}"
    texts = shoot(page, shots, "9-released-student", ["Submission 2", final, "Hidden checks:", "passed"])
    assert "Explain the scaling in a comment, please." in texts["phone"]
    assert post.body["userId"] == "sub-sam" and post.body["gradingProgress"] == "FullyGraded"
    with state.db() as db:
        automatic = db.execute(select(Submission).where(Submission.number == 2)).scalar_one().score
    g1 = next(e for e in second.full["exercises"] if e["id"] == "G14.01") if second.full else None
    assert g1 is not None and automatic is not None
    assert post.body["scoreGiven"] == pytest.approx(automatic - g1["score"] + 2)

    student.close()
    staff.close()
