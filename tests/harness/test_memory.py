"""The grader's memory stays flat in the class size (issue 16: peak RSS at 10,000 submissions <= 150 MB).

``grader grade --insecure`` grades classes of `SMALL` and `LARGE` correct submissions, each in a
fresh interpreter. Only the first submissions of a class run in a job: every later one is answered
with the first outcome again (through the hook ``grader_known_outcome``), so a class costs little
CPU and what is measured is the grader's own process (judging, scoring, every writer, the
gradebook), as fast as it can go. The slope of its RSS between the two classes (its own peak,
``RUSAGE_SELF``, and its RSS when the end-of-run writers start) is what each more submission costs.

What it guards: finished results written and dropped as they come (each grading thread hands over
its own result before it takes the next submission, so writers slower than the jobs pile nothing up), the class pages and the CSV counted or written a piece at a time,
SQLite's page cache kept small, and a few KB kept per submission. The code before these changes
grew by about 20 KB per submission here (finished results waiting for the writers, the summary's
lists of statuses, the index page built whole), and fails this test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SUBMISSIONS

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and ru_maxrss in KiB")

SMALL, LARGE = 100, 700

PEAK_PER_SUBMISSION = 8_000
"""Bytes the grader's peak RSS may grow by per submission (about 2,900 measured; 20,300 before)."""
KEPT_PER_SUBMISSION = 6_000
"""Bytes of RSS per submission when the end-of-run writers start (about 2,900 measured; 19,900 before)."""

SCRIPT = r"""
import dataclasses, functools, json, resource, sys, threading
import grader.config.plugins
from grader.cli import main
from grader.markers import hookimpl

class Replay:
    # The first outcome that comes back answers every later submission: no job runs for them.
    def __init__(self):
        self.outcome, self.lock, self.kept = None, threading.Lock(), None

    @hookimpl(tryfirst=True)
    def grader_known_outcome(self, submission, calls, config):
        with self.lock:
            outcome = self.outcome
        return None if outcome is None else dataclasses.replace(outcome, sha256=submission.sha256)

    @hookimpl(wrapper=True)
    def grader_run_calls(self, submission, calls, config):
        outcome = yield
        with self.lock:
            if self.outcome is None and outcome is not None and not outcome.import_error:
                self.outcome = outcome
        return outcome

    @hookimpl(tryfirst=True)
    def grader_write_reports(self, report, config):
        with open("/proc/self/status") as fh:
            self.kept = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))

replay = Replay()
real = grader.config.plugins.get_plugin_manager

def with_replay(*args, **kwargs):
    pm = real(*args, **kwargs)
    pm.register(replay, name="replay")
    # The grader's bounded caches (functools.lru_cache, up to 4,096 answers) fill up over the first
    # thousands of submissions: shrunk to 16 answers here, so the slope shows what grows without bound.
    for module in [m for name, m in sys.modules.items() if name.startswith("grader") and m is not None]:
        for attr, value in list(vars(module).items()):
            if isinstance(value, functools._lru_cache_wrapper) and (value.cache_parameters()["maxsize"] or 17) > 16:
                setattr(module, attr, functools.lru_cache(maxsize=16)(value.__wrapped__))
    return pm

grader.cli.app.get_plugin_manager = with_replay
code = main(["grade", sys.argv[1], "--out", sys.argv[2], "--insecure", "-q", "--jobs", "2"])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # this process's own (KiB), not its jobs'
print(json.dumps({"code": code, "peak": peak, "kept": replay.kept}))
"""


def _grade(tmp_path: Path, n: int) -> dict[str, int]:
    """Grade a class of ``n`` correct submissions (each file unique by a comment); the heap's figures."""
    source = (SUBMISSIONS / "correct_numpy" / "attention.py").read_text()
    folder = tmp_path / f"class-{n}"
    for i in range(n):
        (folder / f"s{i:04d}").mkdir(parents=True)
        (folder / f"s{i:04d}" / "attention.py").write_text(f"{source}\n# student {i}\n")
    out = tmp_path / f"out-{n}"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(folder), str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["code"] == 0, proc.stderr[-3000:]
    subs = json.loads((out / "results.json").read_text())["submissions"]
    assert [s["score"] for s in subs] == [86.0] * n  # every submission graded, from the replayed outcome
    return figures


@pytest.mark.slow
def test_the_grader_s_memory_grows_by_a_few_kilobytes_a_submission_at_most(tmp_path: Path) -> None:
    small, large = _grade(tmp_path, SMALL), _grade(tmp_path, LARGE)
    peak = 1024 * (large["peak"] - small["peak"]) / (LARGE - SMALL)
    kept = 1024 * (large["kept"] - small["kept"]) / (LARGE - SMALL)
    assert peak < PEAK_PER_SUBMISSION, f"the peak grows by {peak:.0f} bytes a submission"
    assert kept < KEPT_PER_SUBMISSION, f"{kept:.0f} bytes are kept per submission"
