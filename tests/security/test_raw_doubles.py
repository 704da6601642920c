"""Attacks on the worker's raw-double lists (``grader/child/doubles.py``): a returned rectangle of
floats must be refused, or accepted, exactly as its JSON form would be, with the same message."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grader.child import worker


def _outcome(value: Any, blobs: list[Any] | None) -> str:
    try:
        worker.to_data(value, np, blobs=blobs)
    except worker.BadReturn as exc:
        return "refused: " + str(exc)
    return "accepted"


@pytest.mark.parametrize(
    "value",
    [
        [[0.5]] * (worker.MAX_ITEMS // 2),  # one float per row: JSON counts each row's list too
        ([[0.5] * 2] * (worker.MAX_ITEMS // 3 - 8), [0.5] * 64),  # the rest of the result after it
        [[[0.5]] * 4] * (worker.MAX_ITEMS // 8),  # three levels, one float at the bottom
    ],
    ids=["rows-of-one", "budget-after", "three-levels"],
)
def test_a_rectangle_over_the_item_budget_is_refused_as_its_json_form_is(value: Any) -> None:
    """The budget counts lists as well as numbers: a rectangle of thin rows that the JSON path
    refuses as too large must not slip through as raw doubles (to meet the grader's other message)."""
    assert _outcome(value, None) == "refused: the result is too large"
    assert _outcome(value, []) == "refused: the result is too large"


def test_a_rectangle_just_within_the_budget_still_travels_as_doubles() -> None:
    rows = (worker.MAX_ITEMS - 1) // 3  # each row: its list and two floats
    value = [[0.25, -0.0]] * rows
    blobs: list[Any] = []
    assert worker.to_data(value, np, blobs=blobs) == {"$array": ["<f8", [rows, 2]]}
    assert _outcome(value, None) == "accepted"
    assert _outcome([[0.25, -0.0]] * (rows + 1), []) == "refused: the result is too large"
