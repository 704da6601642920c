"""A real browser's LTI launch: headless Chromium opens the simulated LMS's course page and, through the
auto-posted login initiation, the platform's authorization and the auto-posted id_token, lands signed in on
the student's page of a real server (cookies, redirects and form posts as Chromium handles them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import run_chromium

from grader.serve.app import create_app
from grader.serve.testing import free_port, run_server

from .conftest import ROOT
from .lti_platform import SimulatedPlatform

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_chromium_launches_from_the_lms_course_page_to_the_student_page(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with SimulatedPlatform(redirect_uris=[base + "/lti/launch"], tool_jwks_url=base + "/lti/jwks") as platform:
        platform.tool_login_url = base + "/lti/login"
        platform.add_user("ada", name="Ada Lovelace")
        settings = tmp_path / "serve.yaml"
        settings.write_text(yaml.safe_dump({"public_url": base, "lti": {"platforms": [platform.registration()]}}))
        app = create_app(
            ROOT, f"sqlite:///{tmp_path / 'serve.db'}", state_dir=tmp_path / "state", workers=0, settings=settings
        )
        with run_server(app, port=port):
            proc = run_chromium("--virtual-time-budget=20000", "--dump-dom", platform.course_page_url("ada"))
    page = re.sub(r"<style>.*?</style>", "", proc.stdout, flags=re.S)
    assert "<h1>Submit your attention.py</h1>" in page, page[:2000] + proc.stderr[-2000:]
    assert "<span>Ada Lovelace</span>" in page and 'action="/logout"' in page
    assert platform.refusals == []
