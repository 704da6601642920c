"""A stored result's two parts and its final score: what a student may read, what the staff read.

A grading worker stores every check's result (``full``, `grader.models.result_to_dict`). The
student's part (`visible_part`) keeps the visible checks only and their score, as ``grader check``
reports them. The final result (`final_result`) applies the staff's manual scores, then the late
penalty of the course policy from the server's own receipt time (`grader.term`), the batch path's
order.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from collections.abc import Iterable
from typing import Any

from grader.models import SubmissionResult, result_from_dict
from grader.term import ManualRow, Policy, apply_manual, apply_penalty, late_penalty

__all__ = ["RECEIPT_SOURCE", "final_result", "fitting", "hidden_statuses", "visible_part", "visible_statuses"]

RECEIPT_SOURCE = "the server's receipt time"
"""How a late penalty's reason names the time it was computed from."""


def visible_part(full: dict[str, Any]) -> dict[str, Any]:
    """The result a student reads before release: visible checks only, scores summed over them.

    Parameters
    ----------
    full : dict
        A `grader.models.result_to_dict` result.

    Returns
    -------
    dict
        The same shape; exercises without a visible check are left out.
    """
    part = copy.deepcopy(full)
    exercises = []
    for exercise in part["exercises"]:
        checks = [c for c in exercise["checks"] if c["visibility"] == "visible"]
        if not checks:
            continue
        exercise["checks"] = checks
        exercise["score"] = round(sum(c["score"] for c in checks), 6)
        exercise["max_score"] = round(sum(c["max_score"] for c in checks), 6)
        exercises.append(exercise)
    part["exercises"] = exercises
    part["score"] = round(sum(e["score"] for e in exercises), 6)
    part["max_score"] = round(sum(e["max_score"] for e in exercises), 6)
    part["raw_score"] = None
    part["adjustments"] = []
    return part


def _statuses(full: dict[str, Any] | None, visible: bool) -> dict[str, str]:
    if not full:
        return {}
    return {
        f"{e['id']}/{c['id']}": c["status"]
        for e in full["exercises"]
        for c in e["checks"]
        if (c["visibility"] == "visible") == visible
    }


def hidden_statuses(full: dict[str, Any] | None) -> dict[str, str]:
    """``exercise/check`` to status of every check that is not visible."""
    return _statuses(full, visible=False)


def visible_statuses(full: dict[str, Any] | None) -> dict[str, str]:
    """``exercise/check`` to status of every visible check."""
    return _statuses(full, visible=True)


def fitting(result: SubmissionResult, manual: Iterable[ManualRow]) -> list[ManualRow]:
    """The manual rows that fit ``result``: their exercise (and check) exist and the points are within its worth."""
    worth: dict[str, float] = {}
    for exercise in result.exercises:
        worth[exercise.id] = exercise.max_score
        for check in exercise.checks:
            worth[f"{exercise.id}/{check.id}"] = check.max_score
    return [row for row in manual if row.target in worth and row.points <= worth[row.target]]


def final_result(
    full: dict[str, Any],
    student: str,
    manual: Iterable[ManualRow] = (),
    policy: Policy | None = None,
    received: dt.datetime | None = None,
    strict: bool = False,
) -> SubmissionResult:
    """The graded result with the manual scores, then the late penalty from the receipt time, applied.

    Parameters
    ----------
    full : dict
        The stored result (every check).
    student : str
        The student's login (the id manual rows and late days name).
    manual : iterable of grader.term.ManualRow
    policy : grader.term.Policy, optional
    received : datetime, optional
        When the server stored the upload.
    strict : bool
        Raise on a manual score that does not fit this result (the staff's form checks a new one so);
        otherwise such a row (its check gone or worth less after a spec fix and a regrade) is left out
        and the rest applied: a page or a push never fails on it.

    Returns
    -------
    grader.models.SubmissionResult

    Raises
    ------
    grader.errors.ConfigError
        With ``strict``, naming the row that does not fit.
    """
    result = dataclasses.replace(result_from_dict(full), id=student, slug=student)
    rows = list(manual) if strict else fitting(result, manual)
    if rows:
        result = apply_manual(result, rows, "manual scores")
    if policy is not None and received is not None and result.status == "graded":
        adjustment = late_penalty(policy, student, result.max_score, result.score, received, RECEIPT_SOURCE)
        result = apply_penalty(result, adjustment)
    return result
