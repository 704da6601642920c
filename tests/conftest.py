"""Shared fixtures: the repository's real specs, reference and samples."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.cli import main

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "exercises"
REFERENCE = ROOT / "reference" / "attention.py"
SUBMISSIONS = ROOT / "submissions"
STARTER = ROOT / "exercises" / "starter" / "attention.py"

# Tests run commands in temporary folders, outside the course folder: GRADER_COURSE names it there, as a
# CI job of an instructor's would. A test of the student's installation removes it from its environment.
os.environ.setdefault("GRADER_COURSE", str(ROOT))

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def load_stretch() -> float:
    """How much a busy machine stretches the clock for a process that needs a CPU (1.0 when it is not busy).

    The 1-minute load average over the CPUs this process may use, at least 1. Tests that bound a
    duration measured by the clock (a call timed out on its CPU time, a backstop) multiply their
    upper bound by it: the grader's CPU-time limits hold on a loaded machine, the clock's spans do not.
    """
    return max(1.0, os.getloadavg()[0] / len(os.sched_getaffinity(0)))


def _chromium() -> str:
    """The ``chromium`` command; without it the calling test is skipped with the reason on a developer's
    machine, and fails under ``CI=true`` (``.ci/run`` installs it, so the browser tests always run there)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        why = "chromium is not installed: run 'apt-get install -y chromium' (.ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return chromium


def run_chromium(*args: str) -> subprocess.CompletedProcess:
    """Run Debian's headless ``chromium`` with ``args`` in a fresh profile; return the finished process.

    Skipped, or failed under ``CI=true``, without Chromium (`_chromium`).
    """
    chromium = _chromium()
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@contextlib.contextmanager
def chromium_page(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A page of headless Chromium (Debian's, driven by Playwright) at ``width`` x ``height`` CSS pixels.

    One browser serves every page the test loads into it (``page.goto``): tens of milliseconds a
    page, where a Chromium per page (`run_chromium`) costs one to two seconds. Skipped with the
    reason without Chromium or Playwright, and failed under ``CI=true`` (``.ci/run`` installs both).
    """
    chromium = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = "playwright is not installed: pip install -e '.[test]'"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def dump_doms(uris: list[str]) -> list[str]:
    """Each page's HTML once headless Chromium has loaded it (its ``load`` event), as ``--dump-dom`` prints it."""
    with chromium_page() as page:
        doms = []
        for uri in uris:
            page.goto(uri)
            doms.append(page.content())
    return doms


# Hostile submissions (tests/security/test_adversarial.py grades them); one plants a conftest.py
# that pytest must never import.
collect_ignore = ["adversarial"]


@pytest.fixture(scope="session", autouse=True)
def _not_in_github_actions():
    """Tests run the same inside a GitHub Actions job: no annotations, no step summary
    (tests/harness/test_github.py sets these variables itself)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GITHUB_ACTIONS", raising=False)
        mp.delenv("GITHUB_STEP_SUMMARY", raising=False)
        yield


@pytest.fixture(scope="session", autouse=True)
def _default_course_secret():
    """Tests grade with the documented default course secret (none: hidden checks keep their
    spec seeds, and 'grade' warns once); tests/harness/test_secret.py sets a secret itself."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GRADER_COURSE_SECRET", raising=False)
        mp.delenv("GRADER_COURSE_SECRET_FILE", raising=False)
        yield


def _session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's temporary folder: under pytest-xdist (``-n 2``, the fast run), the one folder
    every worker's own temporary folder sits in, so the workers share what one of them built."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _only_one_at_a_time(lock: Path) -> Iterator[None]:
    """Hold an exclusive lock on file ``lock`` (the other xdist workers wait for it)."""
    try:
        import fcntl
    except ImportError:  # Windows: no xdist run shares a fixture there
        yield
        return
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="session", autouse=True)
def _catalogue_cache(tmp_path_factory: pytest.TempPathFactory):
    """The catalogue's results cache (diagnosis, audit) lives in this session's temporary folder,
    never in the user's ~/.cache: every run starts cold and leaves nothing behind. The xdist workers
    share it (the grader writes each entry atomically), so the mutants run once per session."""
    cache = _session_root(tmp_path_factory) / "grader-cache"
    cache.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADER_CACHE_DIR", str(cache))
        yield


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test from the repository root, where the default paths hold."""
    monkeypatch.chdir(ROOT)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``grader`` with a list of arguments; return (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade every sample submission once per session (once for all xdist workers: the first grades,
    the others wait and read its folder); return the JSON results and the output folder (read only)."""
    root = _session_root(tmp_path_factory)
    out = root / "graded-samples"
    with _only_one_at_a_time(root / "graded-samples.lock"):
        if not (out / "results.json").is_file():
            shutil.rmtree(out, ignore_errors=True)  # a worker that failed half-way
            old = os.getcwd()
            os.chdir(ROOT)
            try:
                code = main(["grade", str(SUBMISSIONS.relative_to(ROOT)), "--out", str(out), "-q"])
            finally:
                os.chdir(old)
            assert code == 0
    results = json.loads((out / "results.json").read_text())
    return {"out": out, "results": results, "by_id": {s["id"]: s for s in results["submissions"]}}


def processes() -> list[dict]:
    """Every process on the machine, from ``/proc``: pid, ppid, uid, name, cmdline (NULs as spaces), state."""
    procs = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        procs.append(
            {
                "pid": int(entry),
                "ppid": int(fields.get("PPid", "0")),
                "uid": int(fields["Uid"].split()[0]),
                "name": fields.get("Name", "").strip(),
                "cmdline": cmdline,
                "state": fields.get("State", ""),
            }
        )
    return procs
