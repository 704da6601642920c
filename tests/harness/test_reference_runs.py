"""The catalogue's reference runs (its mutants) keep nothing in a student's place.

The catalogue runs each mutant through ``grader_run_calls`` in the grading run's own configuration,
under the mutant's name. A student whose folder has that name (``mask_after_softmax``, as the
samples are named) must keep the records of their own calls: the call seconds behind Gradescope's
``execution_time`` and JUnit's times, whether the catalogue runs that mutant in the same run (a cold
cache, or one made under another course secret, where only the hidden calls run again) or not.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import sys
import types
from pathlib import Path

import pytest
from conftest import SUBMISSIONS

from grader.cli import main
from grader.config.core import Config
from grader.config.plugins import get_plugin_manager
from grader.markers import hookimpl
from grader.models import Call, CallResult, RunOutcome, Submission


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


def _stub_runner() -> types.ModuleType:
    """A runner whose seconds tell a reference run (9 s a call) from a student's (0.5 s a call)."""
    module = types.ModuleType("stub_reference_runner")

    @hookimpl
    def grader_run_calls(submission, calls, config):  # noqa: ANN001, ANN202
        seconds, value = (9.0, 7.25) if submission.reference else (0.5, 2.5)
        return RunOutcome(
            tuple(CallResult("returned", value=value * (i + 1), seconds=seconds) for i in range(len(calls)))
        )

    module.grader_run_calls = grader_run_calls
    return module


def test_no_per_student_record_keeps_a_reference_run_of_the_same_name(monkeypatch, request, tmp_path: Path) -> None:  # noqa: ANN001
    from grader.builtin import shard_record, similarity, staff
    from grader.collected import COLLECTED, Collected, PreparedCheck
    from grader.grading.slices import STASH_KEY
    from grader.models import Check, Exercise, Prepared
    from grader.packs.catalogue import Entry

    monkeypatch.setitem(sys.modules, "stub_reference_runner", _stub_runner())
    pm = get_plugin_manager(["stub_reference_runner"], load_entrypoints=False)
    options = argparse.Namespace(staff=True, similarity=True, out=str(tmp_path))
    config = Config(command="grade", options=options, pluginmanager=pm)
    pm.hook.grader_configure(config=config)
    # The built-in plugins configured: the sandbox started its zygote and its folder; stopped as a run ends.
    request.addfinalizer(lambda: pm.hook.grader_unconfigure(config=config))
    calls = [Call("softmax", ([0.0],), 1.0), Call("softmax", ([1.0],), 1.0)]
    hidden = Check("h", "compare", "softmax", 1.0, "hidden", "h", 1.0)
    exercise = Exercise("E1", "t", "s", "p", (hidden,))
    config.stash[COLLECTED] = Collected(
        (exercise,), ((exercise, (PreparedCheck(hidden, None, None, Prepared(calls=tuple(calls))),)),), "hash"
    )
    config.stash[STASH_KEY] = object()  # a shard's run: its record keeps each outcome
    config.stash[shard_record._OUTCOMES] = {}  # as its grader_collection_finish makes it
    student = Submission("no_sqrt_dk", "class/no_sqrt_dk", "class/no_sqrt_dk/attention.py")
    mutant = Entry("no_sqrt_dk", "mutant", "reference/mutants/no_sqrt_dk/attention.py", "0" * 64).submission
    assert mutant.reference and mutant.id == student.id and not student.reference
    mine = config.hooks.run_calls(submission=student, calls=calls, config=config)
    theirs = config.hooks.run_calls(submission=mutant, calls=calls, config=config)  # the catalogue, after the student
    assert [r.seconds for r in theirs.results] == [9.0, 9.0]  # the reference run's own outcome, unchanged
    assert list(config.hooks.call_seconds(submission_id="no_sqrt_dk", config=config) or ()) == [0.5, 0.5]
    assert config.stash[staff._OUTCOMES] == {"no_sqrt_dk": mine}  # the staff page shows the student's calls
    (digest,) = config.stash[similarity._VALUES]["no_sqrt_dk"].values()  # similarity compares the student's values
    assert config.stash[similarity._VALUES] == {"no_sqrt_dk": {"E1/h": digest}}
    assert digest == similarity.hashlib.sha256(b"[2.5, 5.0]").hexdigest()
    assert config.stash[shard_record._OUTCOMES] == {"no_sqrt_dk": mine}  # the shard records the student's outcome


def test_the_runner_gives_a_reference_run_no_student_s_known_outcome(monkeypatch) -> None:  # noqa: ANN001
    from grader.builtin import runner

    asked: list[str] = []
    students = RunOutcome((CallResult("returned", value="the student's", seconds=0.5),))
    ran = RunOutcome((CallResult("returned", value="run here", seconds=0.25),))

    @hookimpl
    def grader_known_outcome(submission, calls, config):  # noqa: ANN001, ANN202
        asked.append(submission.id)  # a Dask cluster's or a merge's answers, by submission id
        return students

    pm = get_plugin_manager([], load_entrypoints=False)
    pm.register(types.SimpleNamespace(grader_known_outcome=grader_known_outcome), name="known-by-id")
    config = Config(command="audit", options=argparse.Namespace(insecure=True), pluginmanager=pm)
    monkeypatch.setattr(runner, "sandboxed", lambda config: False)
    monkeypatch.setattr(runner, "run_calls", lambda *args, **kwargs: ran)
    calls = [Call("softmax", ([0.0],), 1.0)]
    student = Submission("mib_decimal", "class/mib_decimal", "class/mib_decimal/attention.py")
    mutant = dataclasses.replace(student, reference=True)
    assert runner.grader_run_calls(submission=student, calls=calls, config=config) is students
    assert runner.grader_run_calls(submission=mutant, calls=calls, config=config) is ran
    assert asked == ["mib_decimal"]  # asked once, for the student only
