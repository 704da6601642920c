"""The catalogue's reference runs (its mutants) keep nothing in a student's place.

The catalogue runs each mutant through ``grader_run_calls`` in the grading run's own configuration,
under the mutant's name. A student whose folder has that name (``mask_after_softmax``, as the
samples are named) must keep the records of their own calls: the call seconds behind Gradescope's
``execution_time`` and JUnit's times, whether the catalogue runs that mutant in the same run (a cold
cache, or one made under another course secret, where only the hidden calls run again) or not.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import SUBMISSIONS

from grader.cli import main


def _times(out: Path, sid: str) -> tuple[float, list[str]]:
    """The student's Gradescope ``execution_time`` and their JUnit test cases' times."""
    gradescope = json.loads((out / "gradescope" / f"{sid}.json").read_text())
    junit = (out / "junit.xml").read_text()
    cases = re.findall(rf'<testcase classname="{re.escape(sid)}\.[^"]*" [^>]*time="([^"]*)"', junit)
    return gradescope["execution_time"], cases


@pytest.mark.slow
def test_a_student_named_like_a_mutant_keeps_their_own_call_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One student, named like a mutant and failing like it: their first failed check builds the
    # catalogue's table, which runs the mutant of that name after the student's own calls.
    student = tmp_path / "class" / "mask_after_softmax"
    shutil.copytree(SUBMISSIONS / "mask_after_softmax", student)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))  # cold at first
    monkeypatch.syspath_prepend(str(Path(__file__).parent.parent))  # tests/fixed_seconds.py
    found = {}
    # cold cache; warm cache (no mutant runs); a cache made under another secret (the hidden calls run again)
    for run, secret in (
        ("cold", "course-secret-one-2026"),
        ("warm", "course-secret-one-2026"),
        ("other", "course-secret-two-2026"),
    ):
        monkeypatch.setenv("GRADER_COURSE_SECRET", secret)
        code = main(["grade", "class", "--out", run, "-q", "-p", "fixed_seconds"])
        assert code == 0
        found[run] = _times(tmp_path / run, "mask_after_softmax")
    seconds, cases = found["warm"]
    # every call is 1..5 ms under fixed_seconds: 80 calls of this course make 0.24 s
    assert seconds == pytest.approx(0.24) and len(cases) > 10 and any(float(t) > 0 for t in cases)
    assert found["cold"] == found["warm"]
    assert found["other"] == found["warm"], "the mutant's hidden calls took the student's place"
