"""The disclosure rule (grader.disclosure): what a student may see, decided in one module."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from grader.disclosure import (
    HIDDEN_NOTE,
    hidden_bad_return,
    hidden_type,
    hidden_where,
    is_public,
    is_released,
    is_shown,
    message_shown,
    secret_while_grading,
    student_message,
)
from grader.models import CallResult, Check, CheckResult

PACKAGE = Path(__file__).resolve().parents[2] / "grader"


def _check(visibility: str) -> Check:
    return Check("c", "compare", "softmax", 1.0, visibility, "hint", 1.0)


def _result(status: str, shown: bool, message: str = "softmax raised ValueError: x=[1, 2]") -> CheckResult:
    return CheckResult("c", "", status, 0.0, 1.0, "hidden", message, "hint", shown, ())


@pytest.mark.parametrize(
    ("visibility", "after_due_date", "published", "expected"),
    [
        ("visible", False, False, True),
        ("hidden", True, True, False),
        ("after_due_date", False, True, False),
        ("after_due_date", True, False, True),
        ("after_published", True, False, False),
        ("after_published", False, True, True),
    ],
)
def test_what_is_shown_follows_the_visibility_and_the_options(
    visibility: str, after_due_date: bool, published: bool, expected: bool
) -> None:
    assert is_shown(visibility, after_due_date, published) is expected
    config = argparse.Namespace(after_due_date=after_due_date, published=published)
    with_options = type("C", (), {"option": lambda self, name, default=None: getattr(config, name, default)})()
    assert is_released(_check(visibility), with_options) is expected


def test_only_visible_checks_are_public_and_everything_else_is_secret_while_grading() -> None:
    assert [is_public(_check(v)) for v in ("visible", "hidden", "after_due_date", "after_published")] == [
        True,
        False,
        False,
        False,
    ]
    assert secret_while_grading(_check("after_due_date")) and not secret_while_grading(_check("visible"))
    assert is_released(_check("after_due_date")) is False  # no configuration: only visible checks


def test_a_hidden_check_names_only_plain_classes_and_a_well_formed_line() -> None:
    assert hidden_type("ValueError") == "ValueError"
    assert hidden_type("LinAlgError") == "LinAlgError"
    assert hidden_type("Secret_0_17_x") == "an exception of its own class"
    assert hidden_where(CallResult("raised", where="attention.py, line 12")) == " (attention.py, line 12)"
    assert hidden_where(CallResult("raised", where="x=[0.17] line 1")) == ""
    assert hidden_bad_return("the result is too large") == ": the result is too large"
    tail = "; return numbers, lists, tuples or numpy arrays"
    assert hidden_bad_return(f"the result holds a generator{tail}") == f": the result holds a generator{tail}"
    assert hidden_bad_return(f"the result holds a Leak017{tail}") == (
        f": the result holds an object of a class of its own{tail}"
    )
    assert hidden_bad_return("x = 0.17") == " (return plain numbers, lists of them or numpy arrays)"


def test_what_a_student_reads_of_a_check_that_is_not_shown() -> None:
    assert student_message(_result("passed", False)) == ""
    assert student_message(_result("failed", False)) == HIDDEN_NOTE
    assert student_message(_result("failed", True)) == "softmax raised ValueError: x=[1, 2]"
    for status in ("error", "timeout", "not_attempted"):  # the message names no input or expected value
        assert message_shown(_result(status, False)) and student_message(_result(status, False)).startswith("softmax")


def test_the_rule_is_written_once() -> None:
    """No other module of the grader spells the rule out again (the list of always-shown statuses,
    the released visibilities, the hidden note's text)."""
    patterns = [
        r"\(\s*\"not_attempted\",\s*\"timeout\",\s*\"error\"\s*\)",
        r"visibility == \"after_due_date\" and",
        r"visibility == \"after_published\" and",
        re.escape(HIDDEN_NOTE),
    ]
    found = [
        f"{path.relative_to(PACKAGE)}: {pattern}"
        for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.html")])
        if path.name != "disclosure.py"
        for pattern in patterns
        if re.search(pattern, path.read_text(encoding="utf-8"))
    ]
    assert found == []
