"""What a page shows of a submission: the student's view (`student_view`) and the staff's (`staff_view`).

A student's view is built from the stored visible part: each visible check's status and its
feedback as ``grader check`` words it (`grader.reporting.feedback.check_feedback`, details only
while the submission shows them). After release it adds, per exercise, how many hidden checks
passed and the final score; a hidden check is never named, nor its inputs or expected values.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from grader.models import result_from_dict
from grader.reporting.feedback import STATUS_LABELS, check_feedback, exercise_mistake, how_many
from grader.serve.db import Submission, User
from grader.serve.state import ServerState

__all__ = ["CheckLine", "ExerciseView", "SubmissionView", "staff_view", "student_view"]


INTERNAL_ERROR = "the grader failed on this submission (not your code's fault); submit again or tell your instructor"
"""What a student reads when the grader itself failed on their submission."""


@dataclass(frozen=True)
class CheckLine:
    """One check as a page shows it."""

    name: str
    status: str
    label: str
    feedback: str
    score: float
    max_score: float
    hidden: bool = False


@dataclass(frozen=True)
class ExerciseView:
    """One exercise: its shown checks and, after release (or for the staff), the hidden ones' tally."""

    id: str
    title: str
    score: float
    max_score: float
    checks: tuple[CheckLine, ...]
    hidden_passed: int = 0
    hidden_total: int = 0
    mistake: str = ""


@dataclass(frozen=True)
class SubmissionView:
    """A submission as a page shows it."""

    number: int
    received: dt.datetime
    state: str
    ahead: int
    details: bool
    score: float | None = None
    max_score: float | None = None
    error: str = ""
    exercises: tuple[ExerciseView, ...] = ()
    released: bool = False
    final: Any = None
    adjustments: tuple[str, ...] = field(default_factory=tuple)

    @property
    def waiting(self) -> bool:
        """Queued or being graded (the page reloads itself)."""
        return self.state in ("queued", "running")


def _ahead(db: Session, sub: Submission) -> int:
    if sub.state != "queued":
        return 0
    return int(
        db.execute(
            select(func.count())
            .select_from(Submission)
            .where(Submission.state == "queued", Submission.id < sub.id, Submission.regrade_id.is_(None))
        ).scalar()
        or 0
    )


def _visible_exercises(part: dict[str, Any], details: bool) -> list[ExerciseView]:
    result = result_from_dict(part)
    views = []
    for exercise in result.exercises:
        lines = tuple(
            CheckLine(
                name=c.description or c.id,
                status=c.status,
                label=STATUS_LABELS.get(c.status, c.status),
                feedback=check_feedback(c, details=details, limit=400),
                score=c.score,
                max_score=c.max_score,
            )
            for c in exercise.checks
        )
        mistake = exercise_mistake(exercise) if details else None
        said = ""
        if mistake is not None:  # as 'grader check' says it, once per exercise
            d = mistake.diagnosis
            said = f'Likely mistake ({how_many(mistake)}): {d.misconception} Reread "{d.section}".'
        views.append(ExerciseView(exercise.id, exercise.title, exercise.score, exercise.max_score, lines, mistake=said))
    return views


def student_view(state: ServerState, db: Session, user: User, sub: Submission, ahead: bool = True) -> SubmissionView:
    """``sub`` as its student may see it now.

    Parameters
    ----------
    state : ServerState
    db : sqlalchemy.orm.Session
    user : User
        The submission's owner.
    sub : Submission
    ahead : bool
        Count the submissions queued before it (the progress line).
    """
    base = SubmissionView(
        number=sub.number,
        received=sub.received,
        state=sub.state,
        ahead=_ahead(db, sub) if ahead else 0,
        details=sub.details,
    )
    if sub.visible is None or sub.full is None:
        if sub.state == "error":
            return dataclasses.replace(base, error=INTERNAL_ERROR)
        return base
    released = state.flag(db, "released")
    exercises = _visible_exercises(sub.visible, sub.details)
    error = sub.visible.get("error", "") if sub.state == "error" else ""
    if not released:
        return dataclasses.replace(
            base, score=sub.visible_score, max_score=sub.visible_max, error=error, exercises=tuple(exercises)
        )
    from grader.serve.grades import final_result
    from grader.serve.pushes import manual_rows
    from grader.term import adjustment_lines

    final = final_result(sub.full, user.login, manual_rows(db, user), state.policy, sub.received)
    tallies = {
        e.id: (
            sum(1 for c in e.checks if c.visibility != "visible" and c.status == "passed"),
            sum(1 for c in e.checks if c.visibility != "visible"),
            e.score,
            e.max_score,
            e.title,
        )
        for e in final.exercises
    }
    shown = {e.id: e for e in exercises}
    merged = []
    for exercise_id, (passed, total, score, max_score, title) in tallies.items():
        checks = shown[exercise_id].checks if exercise_id in shown else ()
        mistake = shown[exercise_id].mistake if exercise_id in shown else ""
        merged.append(ExerciseView(exercise_id, title, score, max_score, checks, passed, total, mistake))
    return dataclasses.replace(
        base,
        score=final.score,
        max_score=final.max_score,
        error=error,
        exercises=tuple(merged),
        released=True,
        final=final,
        adjustments=tuple(adjustment_lines(final)),
    )


def staff_view(state: ServerState, db: Session, user: User, sub: Submission) -> SubmissionView:
    """``sub`` with every check, hidden ones named with their messages and details, and the final score."""
    from grader.serve.grades import final_result
    from grader.serve.pushes import manual_rows
    from grader.term import adjustment_lines

    base = SubmissionView(
        number=sub.number, received=sub.received, state=sub.state, ahead=_ahead(db, sub), details=True
    )
    if sub.full is None:
        return base
    final = final_result(sub.full, user.login, manual_rows(db, user), state.policy, sub.received)
    exercises = []
    for e in final.exercises:
        lines = tuple(
            CheckLine(
                name=f"{c.id}: {c.description}" if c.description else c.id,
                status=c.status,
                label=STATUS_LABELS.get(c.status, c.status),
                feedback="\n".join([c.message, *(f"{label}: {value[:400]}" for label, value in c.details)]).strip(),
                score=c.score,
                max_score=c.max_score,
                hidden=c.visibility != "visible",
            )
            for c in e.checks
        )
        exercises.append(ExerciseView(e.id, e.title, e.score, e.max_score, lines))
    return dataclasses.replace(
        base,
        score=final.score,
        max_score=final.max_score,
        error=final.error,
        exercises=tuple(exercises),
        released=True,
        final=final,
        adjustments=tuple(adjustment_lines(final)),
    )
