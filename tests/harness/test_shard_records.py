"""A shard's record lines: each distinct frame and exercise result written once, later lines naming it by position."""

from __future__ import annotations

import json

import pytest

from grader.execution.boundary import FRAMES, ResultBudget
from grader.execution.channel import result_of
from grader.models import Call, CallResult, CheckResult, ExerciseResult, RunOutcome, Submission, SubmissionResult
from grader.shards import OutcomeError, decode_outcome, record_line, result_from_record

BUDGET = ResultBudget(64, 4, 1 << 16)
CALLS = [Call("f", ([1.0],), 1.0, BUDGET), Call("f", ([2.0],), 1.0, BUDGET)]
RIGHT = json.dumps({"event": "call", "status": "returned", "value": [1.0, 2.0]}).encode()
WRONG = json.dumps({"event": "call", "status": "returned", "value": [9.0]}).encode()


def _result(sid: str, status: str) -> SubmissionResult:
    check = CheckResult("shape", "", status, 1.0 if status == "passed" else 0.0, 1.0, "visible", "m", "", True)
    exercise = ExerciseResult("E1", "Title", "1", check.score, 1.0, (check,))
    return SubmissionResult(sid, f"/class/{sid}", "a" * 64, "graded", check.score, 1.0, (exercise,), slug=sid)


def _outcome(*wires: bytes) -> RunOutcome:
    return RunOutcome(tuple(result_of(FRAMES.decode(w, "call", BUDGET), 0.25, w) for w in wires))


def test_lines_name_what_earlier_lines_hold_and_read_back_in_their_order() -> None:
    frames: dict[bytes, int] = {}
    exercises: dict[str, int] = {}
    subs = [Submission(s, f"/class/{s}", f"/class/{s}/a.py", "a" * 64) for s in ("ann", "bob", "cy")]
    made = [
        (subs[0], _result("ann", "passed"), _outcome(RIGHT, RIGHT)),
        (subs[1], _result("bob", "passed"), _outcome(RIGHT, WRONG)),
        (subs[2], _result("cy", "failed"), _outcome(WRONG, RIGHT)),
    ]
    lines = [json.loads(record_line(s, r, o, frames, exercises)) for s, r, o in made]
    assert len(frames) == 2 and len(exercises) == 2
    assert [row["wire"] for row in lines[1]["outcome"]["results"]] == [0, lines[1]["outcome"]["results"][1]["wire"]]
    assert type(lines[1]["outcome"]["results"][1]["wire"]) is str  # WRONG is new in bob's line: written out
    assert lines[1]["result"]["exercises"] == [0]  # bob's exercise result is ann's
    table: list = []
    shared: list = []
    for (sub, result, outcome), line in zip(made, lines):
        assert result_from_record(line["result"], shared) == result
        back = decode_outcome(line["outcome"], CALLS, table, grow=True)
        assert back == outcome and [r.wire for r in back.results] == [r.wire for r in outcome.results]
    assert table == [RIGHT, WRONG]
    # read out of order, a line names what no line read before holds: refused, never guessed
    with pytest.raises(OutcomeError, match="no such frame"):
        decode_outcome(lines[2]["outcome"], CALLS, [], grow=True)
    with pytest.raises(ValueError, match="names no exercise result"):
        result_from_record(lines[1]["result"], [])
    with pytest.raises(ValueError, match="is not a number of points"):
        bad = json.loads(json.dumps(lines[0]["result"]))
        bad["exercises"][0]["checks"][0]["score"] = "1"
        result_from_record(bad, [])


def test_checked_reading_keeps_statuses_and_seconds_and_checks_each_frame_once() -> None:
    frames: dict[bytes, int] = {}
    line = json.loads(
        record_line(
            Submission("ann", "/a", "/a/a.py", ""), _result("ann", "passed"), _outcome(RIGHT, RIGHT), frames, {}
        )
    )
    checked: dict = {}
    back = decode_outcome(line["outcome"], CALLS, [], checked=checked, grow=True)
    assert back.results == (CallResult("returned", seconds=0.25), CallResult("returned", seconds=0.25))
    assert checked == {(0, BUDGET): "returned"}
    small = [Call("f", ([1.0],), 1.0, ResultBudget(1, 1, 64)), CALLS[1]]
    with pytest.raises(OutcomeError, match="larger than"):  # each call's own budget, even for a frame seen before
        decode_outcome(line["outcome"], small, [], checked=checked, grow=True)
