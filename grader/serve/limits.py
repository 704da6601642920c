"""Submission limits, enforced when an upload arrives (never trusted to the page).

A student may submit at most ``per_window`` times in any ``window_minutes`` and must wait
``cooldown_seconds`` between two submissions, and have at most ``waiting`` submissions queued or
being graded; the check and the new row are one transaction with
the student's row locked (PostgreSQL ``SELECT ... FOR UPDATE``; SQLite writes one at a time), so
two uploads sent at once cannot both pass.
"""

from __future__ import annotations

import datetime as dt
import math

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from grader.serve.db import Submission, User, now
from grader.serve.settings import Limits
from grader.serve.store import Refused

__all__ = ["check_limits", "shows_details"]


def check_limits(db: Session, user: User, limits: Limits, at: dt.datetime | None = None) -> None:
    """`Refused` (429, one sentence saying when to try again) if ``user`` may not submit now.

    Parameters
    ----------
    db : sqlalchemy.orm.Session
        The transaction the new submission is added in (the user's row is locked in it).
    user : User
    limits : grader.serve.settings.Limits
    at : datetime, optional
        The receipt time (default: now).
    """
    at = at or now()
    db.execute(select(User.id).where(User.id == user.id).with_for_update())
    if limits.cooldown_seconds:
        last = db.execute(select(func.max(Submission.received)).where(Submission.user_id == user.id)).scalar()
        if last is not None:
            last = last if last.tzinfo else last.replace(tzinfo=dt.UTC)
            wait = (last + dt.timedelta(seconds=limits.cooldown_seconds) - at).total_seconds()
            if wait > 0:
                raise Refused(429, f"Wait {math.ceil(wait)} s before your next submission (cool-down).")
    if limits.per_window:
        start = at - dt.timedelta(minutes=limits.window_minutes)
        recent = list(
            db.execute(
                select(Submission.received)
                .where(Submission.user_id == user.id, Submission.received > start)
                .order_by(Submission.received)
            ).scalars()
        )
        if len(recent) >= limits.per_window:
            oldest = recent[-limits.per_window]
            oldest = oldest if oldest.tzinfo else oldest.replace(tzinfo=dt.UTC)
            wait = (oldest + dt.timedelta(minutes=limits.window_minutes) - at).total_seconds()
            raise Refused(
                429,
                f"You have made {limits.per_window} submissions in the last {limits.window_minutes} min; "
                f"the next one is possible in {max(1, math.ceil(wait / 60))} min.",
            )
    if limits.waiting:
        waiting = db.execute(
            select(func.count())
            .select_from(Submission)
            .where(
                Submission.user_id == user.id,
                Submission.state.in_(("queued", "running")),
                Submission.regrade_id.is_(None),  # the staff's regrade is not the student's to wait for
            )
        ).scalar()
        if (waiting or 0) >= limits.waiting:
            raise Refused(
                429,
                f"You have {waiting} submissions waiting to be graded; submit again when their feedback is there.",
            )


def shows_details(number: int, limits: Limits) -> bool:
    """Whether a student's ``number``-th submission shows the visible checks' details."""
    return not limits.details_for_first or number <= limits.details_for_first
