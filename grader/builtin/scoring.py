"""Built-in plugin: points, partial credit and what a student may see.

Each check earns ``points * verdict.fraction``; an exercise's score is the
sum over its checks. Whether a check's details are shown follows its
visibility and the ``--after-due-date`` / ``--published`` options
(`grader.disclosure.is_shown`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from grader.disclosure import is_shown
from grader.execution.memo import IdentityTable
from grader.markers import hookimpl
from grader.models import Check, CheckResult, Exercise, ExerciseResult, Verdict
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_KEPT = StashKey[IdentityTable]()
"""The check results made in this run, by (check, verdict) object (see `score_exercise`)."""


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    group = parser.add_argument_group("visibility")
    group.add_argument(
        "--after-due-date",
        action="store_true",
        help="show the details of 'after_due_date' checks in reports",
    )
    group.add_argument(
        "--published",
        action="store_true",
        help="show the details of 'after_published' checks in reports",
    )


def score_exercise(exercise: Exercise, verdicts: Sequence[tuple[Check, Verdict]], config: Any) -> ExerciseResult:
    """Build an `ExerciseResult` from verdicts (see the module docstring).

    Details (the call, expected and got values) are kept only for checks the
    student may see. A check's result is made once per check and verdict
    object (a verdict judged before comes back as the same object,
    `grader.grading.judging.VerdictCache`), and shared.
    """
    checks = []
    after_due_date, published = config.option("after_due_date", False), config.option("published", False)
    kept = config.stash.setdefault(_KEPT, IdentityTable())
    for check, verdict in verdicts:
        known = kept.get(check, verdict)
        if known is not None:  # the same check and verdict objects (a verdict judged before)
            checks.append(known)
            continue
        shown = is_shown(check.visibility, after_due_date, published)
        fraction = min(max(float(verdict.fraction), 0.0), 1.0)
        checks.append(
            CheckResult(
                id=check.id,
                # A description may state the inputs or the answer ("B=3, H=4, N=100 ... is
                # 240,000 bytes"): students see it only where they may see the details.
                description=check.description if shown else "",
                status=verdict.status,
                score=round(check.points * fraction, 6),
                max_score=check.points,
                visibility=check.visibility,
                message=verdict.message,
                hint=check.hint,
                shown=shown,
                details=verdict.details if shown else (),
                diagnosis=verdict.diagnosis,
            )
        )
        kept.put(check, verdict, checks[-1])
    return ExerciseResult(
        id=exercise.id,
        title=exercise.title,
        section=exercise.section,
        score=round(sum(c.score for c in checks), 6),
        max_score=round(sum(c.max_score for c in checks), 6),
        checks=tuple(checks),
    )


@hookimpl(trylast=True)
def grader_score_exercise(
    exercise: Exercise, verdicts: Sequence[tuple[Check, Verdict]], config: Config
) -> ExerciseResult:
    """Score with `score_exercise`."""
    return score_exercise(exercise, verdicts, config)
