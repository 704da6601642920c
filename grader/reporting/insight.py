"""The class at a glance (issue 27): what to reteach, and which checks measure what.

Two computations over a class's results, both pure (no files, no plugin):

* `misconceptions`: each catalogued misconception the diagnosis
  (`grader.builtin.diagnosis`) named, with how many students it was named
  for, the exercises where it bites and the chapter section to revisit.
  A diagnosis counts once per student and exercise, and only where the
  diagnosis rule named it: nothing is guessed here.
* `item_analysis`: per check, its difficulty (the share of submissions
  passing it) and its discrimination (the point-biserial correlation
  between passing it and the total of the other checks); flags for checks
  that measure nothing (every submission passes, or none), that strong
  students fail more often than weak ones, or that always fail together
  with another check; per exercise, Cronbach's alpha. Computed with numpy
  on the submissions that could run (status ``graded``), and only for a
  class of at least `MIN_CLASS` of them: below that the figures are noise.

The summary page shows the first without names; the staff page
(``DIR/staff/class/index.html``) shows who, and the item analysis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grader.models import GradingReport, SubmissionResult

__all__ = [
    "MIN_CLASS",
    "NEGATIVE_BELOW",
    "ItemAnalysis",
    "ItemStat",
    "Misconception",
    "cronbach_alpha",
    "item_analysis",
    "misconceptions",
    "point_biserial",
]

MIN_CLASS = 30
"""Fewest submissions that could run for the item analysis to be shown (fewer give noise)."""
NEGATIVE_BELOW = -0.1
"""A discrimination below this is flagged: strong students fail the check more often than weak ones."""


@dataclass(frozen=True)
class Misconception:
    """One catalogued misconception, added up over the class.

    Attributes
    ----------
    misconception : str
        The catalogue's sentence.
    section : str
        The chapter section that addresses it.
    url : str
        A link to that section ("" without a chapter URL).
    students : tuple of str
        The ids of the students it was named for, sorted (staff only).
    exercises : tuple of (str, int)
        Each exercise where it was named and for how many students, in exercise order.
    class_size : int
        How many submissions the class has.
    """

    misconception: str
    section: str
    url: str
    students: tuple[str, ...]
    exercises: tuple[tuple[str, int], ...]
    class_size: int

    @property
    def count(self) -> int:
        """How many students it was named for."""
        return len(self.students)

    @property
    def share(self) -> float:
        """`count` over the class size (0 for an empty class)."""
        return self.count / self.class_size if self.class_size else 0.0

    def to_dict(self, who: bool) -> dict[str, object]:
        """Plain data for ``results.json``; ``who`` adds the students' ids."""
        data: dict[str, object] = {
            "misconception": self.misconception,
            "section": self.section,
            "count": self.count,
            "share": round(self.share, 6),
            "exercises": [{"id": ex, "count": n} for ex, n in self.exercises],
        }
        if who:
            data["students"] = list(self.students)
        return data


def misconceptions(submissions: Sequence[SubmissionResult]) -> list[Misconception]:
    """Every misconception the diagnosis named in a class, by reach (most students first).

    Parameters
    ----------
    submissions : sequence of grader.models.SubmissionResult
        The class; each check's ``diagnosis`` is what the diagnosis rule named.

    Returns
    -------
    list of Misconception
        Sorted by number of students (descending), then by first
        appearance in exercise order, then by the sentence. A student
        diagnosed with one misconception on several checks of an exercise
        counts once for that exercise.
    """
    found: dict[str, dict[str, set[str]]] = {}  # misconception -> exercise -> students
    about: dict[str, tuple[str, str]] = {}
    order: dict[str, tuple[int, int]] = {}
    exercise_order: dict[str, int] = {}
    for s in submissions:
        for e in s.exercises:
            exercise_order.setdefault(e.id, len(exercise_order))
            for c in e.checks:
                for d in c.diagnosis:
                    found.setdefault(d.misconception, {}).setdefault(e.id, set()).add(s.id)
                    about.setdefault(d.misconception, (d.section, d.url))
                    order.setdefault(d.misconception, (exercise_order[e.id], len(order)))
    out = []
    for text, by_exercise in found.items():
        students = set().union(*by_exercise.values())
        exercises = tuple(
            (ex, len(ids)) for ex, ids in sorted(by_exercise.items(), key=lambda item: exercise_order[item[0]])
        )
        section, url = about[text]
        out.append(Misconception(text, section, url, tuple(sorted(students)), exercises, len(submissions)))
    out.sort(key=lambda m: (-m.count, order[m.misconception], m.misconception))
    return out


def point_biserial(passed: np.ndarray, rest: np.ndarray) -> float | None:
    """The point-biserial correlation of a 0/1 item with a score (Pearson's r).

    Parameters
    ----------
    passed : numpy.ndarray, shape (n,)
        1 where the submission passed the check, 0 where not.
    rest : numpy.ndarray, shape (n,)
        The submission's total on the other checks (points).

    Returns
    -------
    float or None
        r in [-1, 1]; None when either has no variance (undefined).
    """
    x = np.asarray(passed, dtype=float)
    y = np.asarray(rest, dtype=float)
    x, y = x - x.mean(), y - y.mean()
    den = float(np.sqrt((x * x).sum() * (y * y).sum()))
    if den == 0.0:
        return None
    return float(np.clip((x * y).sum() / den, -1.0, 1.0))


def cronbach_alpha(scores: np.ndarray) -> float | None:
    """Cronbach's alpha of a set of items.

    Parameters
    ----------
    scores : numpy.ndarray, shape (n submissions, k items)
        Each item's points.

    Returns
    -------
    float or None
        ``k / (k - 1) * (1 - sum of item variances / variance of the total)``
        (sample variances, ddof=1); None for fewer than 2 items or 2
        submissions, or a total without variance.
    """
    scores = np.asarray(scores, dtype=float)
    n, k = scores.shape
    if k < 2 or n < 2:
        return None
    total_var = float(scores.sum(axis=1).var(ddof=1))
    if total_var == 0.0:
        return None
    return float(k / (k - 1) * (1.0 - scores.var(axis=0, ddof=1).sum() / total_var))


@dataclass(frozen=True)
class ItemStat:
    """One check's item statistics.

    Attributes
    ----------
    exercise, check : str
        Its exercise id and check id.
    difficulty : float
        Share of the submissions passing it, in [0, 1].
    discrimination : float or None
        Point-biserial correlation between passing it and the total of the
        other checks; None when undefined (a constant check).
    flags : tuple of str
        ``"constant"`` (every submission passes it, or none does),
        ``"negative"`` (discrimination below `NEGATIVE_BELOW`),
        ``"redundant"`` (always fails together with `twins`).
    twins : tuple of str
        ``EXERCISE check`` of the checks failed by exactly the same submissions.
    """

    exercise: str
    check: str
    difficulty: float
    discrimination: float | None
    flags: tuple[str, ...]
    twins: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.exercise} {self.check}"


@dataclass(frozen=True)
class ItemAnalysis:
    """The item analysis of a class.

    Attributes
    ----------
    size : int
        Submissions counted (those that could run).
    shown : bool
        Whether ``size >= MIN_CLASS``: below it, ``items`` and ``alpha`` are empty.
    items : tuple of ItemStat
        In spec order.
    alpha : tuple of (str, float or None)
        Each exercise's Cronbach's alpha over its checks' points.
    """

    size: int
    shown: bool
    items: tuple[ItemStat, ...] = ()
    alpha: tuple[tuple[str, float | None], ...] = ()


def item_analysis(report: GradingReport, min_class: int = MIN_CLASS) -> ItemAnalysis:
    """Difficulty, discrimination and flags of every check; Cronbach's alpha of every exercise.

    Parameters
    ----------
    report : grader.models.GradingReport
    min_class : int
        Fewest submissions that could run for the figures to be computed.

    Returns
    -------
    ItemAnalysis
        Over the submissions with status ``graded`` (one that could not run
        says nothing about a check); ``shown`` False for a smaller class.
    """
    subs = [s for s in report.submissions if s.status == "graded"]
    if len(subs) < max(min_class, 2):
        return ItemAnalysis(len(subs), False)
    keys = [(e.id, c.id) for e in subs[0].exercises for c in e.checks]
    column = {key: j for j, key in enumerate(keys)}
    passed = np.zeros((len(subs), len(keys)))
    points = np.zeros((len(subs), len(keys)))
    for i, s in enumerate(subs):
        for e in s.exercises:
            for c in e.checks:
                j = column.get((e.id, c.id))
                if j is not None:
                    passed[i, j] = c.status == "passed"
                    points[i, j] = c.score
    total = points.sum(axis=1)
    failing = {j: frozenset(np.flatnonzero(passed[:, j] == 0).tolist()) for j in range(len(keys))}
    items = []
    for j, (ex, check) in enumerate(keys):
        difficulty = float(passed[:, j].mean())
        r = point_biserial(passed[:, j], total - points[:, j])
        flags = []
        if difficulty in (0.0, 1.0):
            flags.append("constant")
        if r is not None and r < NEGATIVE_BELOW:
            flags.append("negative")
        twins: tuple[str, ...] = ()
        if failing[j] and len(failing[j]) < len(subs):
            twins = tuple(f"{keys[o][0]} {keys[o][1]}" for o in range(len(keys)) if o != j and failing[o] == failing[j])
            if twins:
                flags.append("redundant")
        items.append(ItemStat(ex, check, difficulty, r, tuple(flags), twins))
    alpha = []
    for e in subs[0].exercises:
        cols = [column[(e.id, c.id)] for c in e.checks]
        alpha.append((e.id, cronbach_alpha(points[:, cols])))
    return ItemAnalysis(len(subs), True, tuple(items), tuple(alpha))
