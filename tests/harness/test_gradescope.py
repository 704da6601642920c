"""Gradescope results.json files (gradescope), validated against the published format.

The JSON Schema below transcribes the field list of Gradescope's "Autograder
Specifications" (Output format; Test case status; Controlling Test Case
Visibility; Output String Formatting): every key Gradescope defines, with its
type, and no other key.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import SUBMISSIONS
from course.test_samples import EXERCISES, EXPECTED

from grader.reporting.feedback import HIDDEN_NOTE

VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}

GRADESCOPE_RESULTS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number"},
        "output": {"type": "string"},
        "output_format": FORMAT,
        "test_output_format": FORMAT,
        "test_name_format": FORMAT,
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "score": {"type": "number"},
                    "max_score": {"type": "number"},
                    "status": {"enum": ["passed", "failed"]},
                    "name": {"type": "string"},
                    "name_format": FORMAT,
                    "number": {"type": "string"},
                    "output": {"type": "string"},
                    "output_format": FORMAT,
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "visibility": VISIBILITY,
                    "extra_data": {"type": "object"},
                },
            },
        },
        "leaderboard": {"type": "array"},
    },
    # "score: optional, but required if not on each test case"; we give both.
    "anyOf": [{"required": ["score"]}, {"required": ["tests"]}],
}

# What the brief promises on top of the format: these keys are always there.
TOP_KEYS = {"score", "execution_time", "output", "visibility", "stdout_visibility", "tests"}
TEST_KEYS = {"name", "number", "score", "max_score", "status", "output", "tags", "visibility"}


def _load(graded: dict, sid: str) -> dict:
    return json.loads((graded["out"] / "gradescope" / f"{sid}.json").read_text())


def _tests(data: dict) -> dict[str, dict]:
    return {t["name"].split(":")[0]: t for t in data["tests"]}


def test_every_file_follows_the_published_format(graded: dict) -> None:
    files = sorted((graded["out"] / "gradescope").glob("*.json"))
    assert [f.stem for f in files] == sorted(EXPECTED)
    for f in files:
        data = json.loads(f.read_text())
        jsonschema.validate(data, GRADESCOPE_RESULTS)
        assert TOP_KEYS <= set(data), f.name
        assert isinstance(data["execution_time"], (int, float)) and data["execution_time"] >= 0
        assert data["output_format"] == "text"  # nothing a student wrote is rendered as HTML
        for test in data["tests"]:
            assert set(test) == TEST_KEYS, test
        sub = graded["by_id"][f.stem]
        assert data["score"] == sub["score"]
        assert data["score"] == sum(t["score"] for t in data["tests"])
        assert sum(t["max_score"] for t in data["tests"]) == sub["max_score"]
        assert [t["status"] for t in data["tests"]] == [
            "passed" if c["status"] == "passed" else "failed" for e in sub["exercises"] for c in e["checks"]
        ]
        assert [t["visibility"] for t in data["tests"]] == [
            c["visibility"] for e in sub["exercises"] for c in e["checks"]
        ]


def test_scores_per_exercise_through_tags(graded: dict) -> None:
    for sid, points in EXPECTED.items():
        data = _load(graded, sid)
        per_tag = {ex: sum(t["score"] for t in data["tests"] if t["tags"] == [ex]) for ex in EXERCISES}
        assert per_tag == dict(zip(EXERCISES, map(float, points))), sid
        assert data["score"] == float(sum(points))


def test_names_numbers_and_visible_feedback(graded: dict) -> None:
    data = _load(graded, "unnormalized_scores")
    test = _tests(data)["G14.02 zero-scores"]
    assert test["name"] == "G14.02 zero-scores: zero scores and values (2, 8) give weights (1/2, 1/2) and output 5"
    assert test["number"] == "2.1"
    assert (test["score"], test["max_score"], test["status"], test["visibility"]) == (0.0, 2.0, "failed", "visible")
    assert test["tags"] == ["G14.02"]
    assert test["output"].splitlines()[:5] == [
        "outputs differs from the expected value by up to 5 (at outputs[0][0]); asked: within rtol=1e-06, "
        "atol=1e-09 (float64 code is accurate to about 1e-13 here; float16 or a wrong formula is not)",
        "call: attention(Q=[[0.0]], K=[[0.0], [0.0]], V=[[2.0], [8.0]]), and "
        "attention(Q=[[1.0]], K=[[2.0], [0.0]], V=[[2.0], [8.0]])",
        "expected: [[5.0]]",
        "got: [[0.0]]",
        "largest error: 5",
    ]
    assert test["output"].splitlines()[-1].startswith("Hint: Normalize the scores with softmax first")
    assert [t["number"] for t in data["tests"]][:7] == ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2.1"]
    passed = [t for t in _load(graded, "correct_numpy")["tests"]]
    assert {t["status"] for t in passed} == {"passed"} and {t["output"] for t in passed} == {""}


def test_hidden_checks_reveal_only_status_and_hint(graded: dict) -> None:
    test = _tests(_load(graded, "no_sqrt_dk"))["G14.01 unequal-counts-and-widths"]
    assert (test["status"], test["visibility"]) == ("failed", "hidden")
    assert test["output"].splitlines()[0] == HIDDEN_NOTE
    assert test["output"].splitlines()[1].startswith("Hint: Write the inner dimensions of each product")
    assert "differs" not in test["output"] and "by up to" not in test["output"]
    for sid in EXPECTED:
        for t in _load(graded, sid)["tests"]:
            if t["visibility"] != "visible":
                assert "expected:" not in t["output"] and "call:" not in t["output"], (sid, t["name"])


def test_a_file_that_cannot_run_says_why(graded: dict) -> None:
    data = _load(graded, "syntax_error")
    assert data["output"].startswith(
        "Your file could not be graded: importing the file failed with SyntaxError (attention.py, line 20)"
    )
    assert data["score"] == 0 and data["extra_data"]["status"] == "error"


def test_one_submission_to_the_gradescope_path(cli, tmp_path: Path) -> None:
    target = tmp_path / "autograder" / "results" / "results.json"
    code, _, err = cli("grade", SUBMISSIONS / "mib_decimal", "--out", tmp_path / "o", "-q", "--gradescope", target)
    assert code == 0, err
    data = json.loads(target.read_text())
    jsonschema.validate(data, GRADESCOPE_RESULTS)
    assert data["score"] == float(sum(EXPECTED["mib_decimal"]))
    assert sum(t["score"] for t in data["tests"] if t["tags"] == ["G14.05"]) == 5.0
    assert isinstance(data["execution_time"], float) and 0 <= data["execution_time"] < 60
    # The per-student copy is the same file.
    assert json.loads((tmp_path / "o" / "gradescope" / "mib_decimal.json").read_text()) == data


def test_gradescope_path_refuses_a_batch(cli, tmp_path: Path) -> None:
    code, _, err = cli(
        "grade",
        SUBMISSIONS / "starter",
        SUBMISSIONS / "syntax_error",
        "--out",
        tmp_path / "o",
        "-q",
        "--gradescope",
        tmp_path / "results.json",
    )
    assert code == 2
    assert "--gradescope" in err and "one submission per run, and this run has more than one (2 found so far)" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("ours", ["visible", "hidden", "after_due_date", "after_published"])
def test_visibility_words_are_gradescopes(ours: str) -> None:
    from grader.builtin.gradescope import VISIBILITY as MAPPING

    assert MAPPING[ours] in VISIBILITY["enum"]


def test_student_text_in_outputs_is_inert_and_valid_json() -> None:
    from grader.builtin.gradescope import gradescope_results
    from grader.models import (
        CheckResult,
        ExerciseResult,
        GradingReport,
        SubmissionResult,
    )

    hidden = CheckResult(
        "h1", "", "error", 0.0, 1.0, "hidden", "softmax raised TypeError (attention.py, line 12)", "Reread.", False
    )
    visible = CheckResult(
        "v1", "", "error", 0.0, 1.0, "visible", "softmax raised ValueError: \x1b[2Jbad\ud800", "", True
    )
    sub = SubmissionResult(
        "eve\x1b]0;pwn\x07",
        "p",
        "",
        "graded",
        0.0,
        2.0,
        (ExerciseResult("G14.02", "Softmax", "s", 0.0, 2.0, (hidden, visible)),),
        stdout="hello\x1b]0;title\x07 world\r\nline 2\n",
        stderr="\x1b[31m\n",
    )
    data = gradescope_results(GradingReport("0", "h", "grade", (sub,)), sub)
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # no lone surrogate left
    shown = json.dumps({"output": data["output"], "tests": data["tests"]})  # what the student reads
    assert "\\u001b" not in shown and "\\u0007" not in shown and "\\ud800" not in shown
    assert data["output"].splitlines()[-2:] == ["hello world", "line 2"]
    assert "(stderr)" not in data["output"]  # only an escape sequence: nothing to show
    assert [t["output"] for t in data["tests"]] == [
        "softmax raised TypeError (attention.py, line 12)",  # an error on valid input: no hint (its line says where)
        "softmax raised ValueError: bad\ufffd",
    ]
    assert data["extra_data"]["id"] == "eve\x1b]0;pwn\x07"  # staff-only: verbatim, JSON-escaped


def test_a_file_made_from_kept_exercise_parts_is_the_whole_dict_encoded() -> None:
    """`results_text` encodes each exercise's tests once per distinct result (issue 29): its text is
    ``json.dumps`` of `gradescope_results` whatever the exercises (none, one without checks, an
    unhashable detail, hostile text)."""
    import dataclasses

    from grader.builtin.gradescope import _dumps, gradescope_results, results_text
    from grader.models import Adjustment, CheckResult, ExerciseResult, GradingReport, SubmissionResult

    shown = CheckResult(
        "v1", "d", "failed", 0.5, 1.0, "visible", "wrong \x1b[2J\ud800é", "Hint.", True, (("got", "1"),)
    )
    hidden = CheckResult("h1", "", "passed", 1.0, 1.0, "hidden", "", "", False)
    listed = dataclasses.replace(shown, id="v2", details=[("got", "2")])  # type: ignore[arg-type]
    exercises = (
        ExerciseResult("G14.01", "One", "s", 1.5, 2.0, (shown, hidden)),
        ExerciseResult("G14.02", "None", "s", 0.0, 0.0, ()),
        ExerciseResult("G14.03", "Listed", "s", 0.5, 1.0, (listed,)),
    )
    late = (Adjustment("late", -0.5, "1 day late"),)
    report = GradingReport("0", "h", "grade", ())
    for sub in (
        SubmissionResult("zoë", "p", "", "graded", 2.0, 3.0, exercises, stdout="hi\n"),
        SubmissionResult("b", "p", "", "graded", 1.5, 3.0, exercises[:2], raw_score=2.0, adjustments=late),
        SubmissionResult("c", "p", "", "error", 0.0, 3.0, (), error="SyntaxError"),
        SubmissionResult("d", "p", "", "graded", 0.0, 0.0, exercises[1:2]),
    ):
        for _ in range(2):  # the second time from the kept parts
            assert results_text(report, sub, 0.25) == _dumps(gradescope_results(report, sub, 0.25))


def test_a_file_made_from_a_results_kept_parts_is_the_file_made_whole() -> None:
    """`_Results` keeps a file's ``output`` and ``tests`` per distinct result and encodes the rest for each
    student (issue 29): every file is the one `results_text` makes."""
    import dataclasses
    import types

    from grader.builtin.gradescope import _Results, results_text
    from grader.models import Adjustment, CheckResult, ExerciseResult, GradingReport, SubmissionResult
    from grader.packs import find_pack

    shown = CheckResult("v1", "d", "failed", 0.5, 1.0, "visible", "wrong \x1b[2J\ud800é", "Hint.", True)
    hidden = CheckResult("h1", "", "passed", 1.0, 1.0, "hidden", "", "", False)
    listed = dataclasses.replace(shown, id="v2", details=[("got", "2")])  # type: ignore[arg-type]
    plain = (ExerciseResult("G14.01", "One", "s", 1.5, 2.0, (shown, hidden)),)
    unhashable = (ExerciseResult("G14.03", "Listed", "s", 0.5, 1.0, (listed,)),)
    report = GradingReport("0", "h", "grade", ())
    seconds = {"a": [0.25, 0.5], "b": [0.125]}
    hooks = types.SimpleNamespace(call_seconds=lambda submission_id, config: seconds.get(submission_id))
    config = types.SimpleNamespace(pack=find_pack(), hooks=hooks)
    files = _Results(report, config)
    late = (Adjustment("late", -0.5, "1 day late"),)
    for exercises in (plain, unhashable, ()):
        for extra in (
            {},
            {"stdout": "hi\n"},
            {"status": "error", "error": "bad"},
            {"raw_score": 2.0, "adjustments": late},
            # equal keys but for the sign of a zero: "-0" in one file, "+0" in the other
            {"raw_score": 1.5, "adjustments": (Adjustment("late", -0.0, "on time"),)},
            {"raw_score": 1.5, "adjustments": (Adjustment("late", 0.0, "on time"),)},
        ):
            for sid, sha in (("a", "f" * 64), ("b", ""), ("zoë\x1b]0;x\x07\ud800", "f" * 64), ("c", "f" * 64)):
                sub = dataclasses.replace(SubmissionResult(sid, "p", sha, "graded", 1.5, 2.0, exercises), **extra)
                for _ in range(2):
                    made = results_text(report, sub, round(sum(seconds.get(sid, ())), 3), config.pack)
                    assert files(sub) == made, (sid, extra)
