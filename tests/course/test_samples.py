"""End to end: every sample submission gets the score its mistake deserves.

The samples in ``submissions/`` are graded once (fixture ``graded``) by the
real CLI, with the real specs and reference, in child processes.
"""

from __future__ import annotations

import pytest
from spec_totals import G14

EXERCISES = ("G14.01", "G14.02", "G14.03", "G14.04", "G14.05", "G14.06")
FULL = (14, 11, 14, 10, 10, 27)

# Expected points per exercise, in the order of EXERCISES.
EXPECTED = {
    "correct_lists": FULL,
    "correct_numpy": FULL,
    "starter": (0, 0, 0, 0, 0, 0),
    "syntax_error": (0, 0, 0, 0, 0, 0),
    "hangs": (14, 11, 14, 0, 10, 27),
    "mask_after_softmax": (14, 11, 0, 10, 10, 20),
    "masked_row_nan": (14, 11, 14, 10, 10, 26),
    "mib_decimal": (14, 11, 14, 10, 5, 27),
    # exp(800) overflows in the causal check with a future score far above the past ones
    "no_max_subtraction": (14, 11, 12, 10, 10, 21),
    "no_sqrt_dk": (6, 8, 9, 10, 10, 23),
    # It rejects valid input with n != m: its ValueErrors on invalid input earn nothing either.
    "transposed_shapes": (0, 4, 9, 10, 10, 13),
    "unnormalized_scores": (6, 4, 4, 10, 10, 21),
}


def _checks(sub: dict) -> dict[tuple[str, str], dict]:
    return {(e["id"], c["id"]): c for e in sub["exercises"] for c in e["checks"]}


def test_every_sample_is_graded(graded: dict) -> None:
    assert sorted(graded["by_id"]) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_score_per_exercise(graded: dict, name: str) -> None:
    sub = graded["by_id"][name]
    got = {e["id"]: e["score"] for e in sub["exercises"]}
    assert got == dict(zip(EXERCISES, map(float, EXPECTED[name])))
    assert sub["max_score"] == G14.points
    assert sub["score"] == float(sum(EXPECTED[name]))


@pytest.mark.parametrize("name", ["correct_lists", "correct_numpy"])
def test_correct_samples_pass_every_check(graded: dict, name: str) -> None:
    sub = graded["by_id"][name]
    assert sub["status"] == "graded"
    assert {c["status"] for c in _checks(sub).values()} == {"passed"}


def test_starter_is_not_attempted_rather_than_crashed(graded: dict) -> None:
    sub = graded["by_id"]["starter"]
    assert sub["status"] == "graded"
    checks = _checks(sub).values()
    assert {c["status"] for c in checks} == {"not_attempted"}
    assert all(c["message"].startswith("not attempted:") for c in checks)


def test_syntax_error_names_the_line(graded: dict) -> None:
    sub = graded["by_id"]["syntax_error"]
    assert sub["status"] == "error"
    assert "SyntaxError (attention.py, line 20)" in sub["error"]
    assert "Traceback" not in sub["error"]
    assert {c["status"] for c in _checks(sub).values()} == {"error"}


def test_hanging_submission_loses_only_the_calls_that_hang(graded: dict) -> None:
    checks = _checks(graded["by_id"]["hangs"])
    timed_out = {key for key, c in checks.items() if c["status"] == "timeout"}
    assert timed_out == {
        ("G14.04", "chapter-example"),
        ("G14.04", "sums-to-zero"),
        ("G14.04", "finite-difference"),
        ("G14.04", "random-compare"),
        ("G14.04", "backward-leaves-inputs-unchanged"),  # it calls softmax_backward too
    }
    assert all(c["status"] == "passed" for key, c in checks.items() if key not in timed_out)
    assert checks[("G14.04", "chapter-example")]["message"] == (
        "softmax_backward did not finish: the call used more than 2 s of CPU time"
    )


# Which checks each mistake must fail, and a phrase of the reason.
FAILURES = {
    "mask_after_softmax": {
        ("G14.03", "causal-two-positions"): "outputs differs from the expected value by up to 1 (at outputs[0][0])",
        ("G14.03", "one-allowed-key"): "weights differs",
        ("G14.06", "causal-rows-sum-to-one"): "row 0 of weights sums to",
        ("G14.06", "causal-noninterference"): "changing only the last key and value changed outputs[0]",
    },
    "unnormalized_scores": {
        ("G14.02", "zero-scores"): "outputs differs from the expected value by up to 5 (at outputs[0][0])",
        ("G14.03", "causal-two-positions"): "outputs differs",
    },
    "no_max_subtraction": {
        ("G14.06", "large-scores"): "weights[0] is nan where a finite number is expected",
        ("G14.06", "huge-scores"): "is nan where a finite number is expected",
    },
    "no_sqrt_dk": {
        ("G14.01", "unequal-counts-and-widths"): "outputs differs",
        ("G14.06", "unequal-counts"): "outputs differs",
    },
    "transposed_shapes": {
        ("G14.01", "shapes-3x2-5x2-5x4"): "attention raised ValueError on valid input (attention.py, line",
        # A hidden check: the type and line only, never the exception text.
        ("G14.03", "causal-random"): "attention raised IndexError (attention.py, line",
    },
    "mib_decimal": {
        ("G14.05", "mib-n1024"): "mib differs from the expected value",
        ("G14.05", "one-mib"): "mib differs",
    },
    "masked_row_nan": {
        (
            "G14.06",
            "rejects-all-masked",
        ): "returned a value instead of raising ValueError for a row where no position is allowed",
    },
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_mistakes_fail_the_right_checks_for_the_right_reason(graded: dict, name: str) -> None:
    checks = _checks(graded["by_id"][name])
    for key, phrase in FAILURES[name].items():
        assert checks[key]["status"] in ("failed", "error"), key
        assert phrase in checks[key]["message"], (key, checks[key]["message"])
        assert checks[key]["score"] == 0.0
