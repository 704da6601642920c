"""The course's totals read from its specs (exercises/*.yaml), for tests whose point is not the number itself.

Read with ``yaml.safe_load``, each check merged over its spec's ``defaults`` as the spec loader does, not
through the grader: a test comparing a report's total with these values compares it with the specs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

SPECS = Path(__file__).resolve().parent.parent / "exercises"


@dataclass(frozen=True)
class Totals:
    """Points and check counts of a course, in all and by visibility.

    Attributes
    ----------
    points, visible_points, hidden_points : float
        The points of every check, of the ``visible`` ones, of the others.
    checks, visible_checks, hidden_checks : int
        How many checks there are, ``visible`` ones, others.
    exercise_points : dict[str, float]
        Each exercise's points, by exercise id.
    """

    points: float
    visible_points: float
    hidden_points: float
    checks: int
    visible_checks: int
    hidden_checks: int
    exercise_points: dict[str, float]


@cache
def totals(specs: Path = SPECS) -> Totals:
    """The totals of the specs ``specs/*.yaml`` (G14's by default).

    Parameters
    ----------
    specs : Path
        A folder of exercise specs.

    Returns
    -------
    Totals
        Their points and check counts.
    """
    visible: list[float] = []
    hidden: list[float] = []
    exercise_points: dict[str, float] = {}
    for path in sorted(specs.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        defaults = data.get("defaults", {})
        points = []
        for check in data["checks"]:
            merged = {**defaults, **check}
            points.append(float(merged["points"]))
            (visible if merged["visibility"] == "visible" else hidden).append(float(merged["points"]))
        exercise_points[data["exercise"]] = sum(points)
    return Totals(
        points=sum(visible) + sum(hidden),
        visible_points=sum(visible),
        hidden_points=sum(hidden),
        checks=len(visible) + len(hidden),
        visible_checks=len(visible),
        hidden_checks=len(hidden),
        exercise_points=exercise_points,
    )


G14 = totals()
"""G14's totals (86 points, 35 of them visible, in 23 visible and 36 hidden checks when this was written)."""
