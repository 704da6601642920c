"""Scores to the LMS gradebook through LTI Assignment and Grade Services, each push recorded.

A push is queued (`enqueue_push`) when a released student's grade changes: graded, released,
regraded, or a manual score. A grading worker sends it (`send_pending`) with the final score at
send time (manual scores and the late penalty applied) and `grader.term.submission_feedback` as
the comment; `grader.serve.lti.AgsClient` retries with back-off, and the outcome (HTTP status,
attempts, detail) is stored on the row.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from grader.serve.db import LtiLink, Push, User, now
from grader.serve.state import ServerState

__all__ = ["enqueue_push", "latest_final", "manual_rows", "send_pending"]

_CLIENTS: dict[tuple[Any, str, Any], Any] = {}
"""This process's `grader.serve.lti.AgsClient` by platform, tool key (the server's folder) and test transport."""
_CLIENTS_LOCK = threading.Lock()


def enqueue_push(db: Session, user: User, reason: str) -> Push | None:
    """Queue a push of ``user``'s score if an LTI launch gave a line item for them (the caller commits).

    A push already waiting for the user stands for this one: it sends the final score of the moment it is sent.
    """
    link = db.execute(select(LtiLink).where(LtiLink.user_id == user.id)).scalar_one_or_none()
    if link is None or not (link.lineitem_url or link.lineitems_url):
        return None
    waiting = db.execute(
        select(Push).where(Push.user_id == user.id, Push.state == "pending").limit(1)
    ).scalar_one_or_none()
    if waiting is not None:  # one push sends the score as it is then: a second would send the same
        return waiting
    push = Push(user_id=user.id, reason=reason, state="pending")
    db.add(push)
    return push


def manual_rows(db: Session, user: User) -> list[Any]:
    """``user``'s manual scores as `grader.term.ManualRow` rows, oldest first (the later wins)."""
    from grader.serve.db import Manual
    from grader.term import ManualRow

    rows = db.execute(select(Manual).where(Manual.user_id == user.id).order_by(Manual.updated, Manual.id)).scalars()
    return [ManualRow(i + 1, user.login, m.target, m.points, m.comment, m.grader) for i, m in enumerate(rows)]


def latest_final(state: ServerState, db: Session, user: User) -> Any:
    """``user``'s final result: their latest graded submission with manual scores and late penalty, or None."""
    from grader.serve.db import Submission
    from grader.serve.grades import final_result

    sub = db.execute(
        select(Submission)
        .where(Submission.user_id == user.id, Submission.full.is_not(None))
        .order_by(Submission.number.desc())
        .limit(1)
    ).scalar_one_or_none()
    if sub is None or sub.full is None:
        return None
    return final_result(sub.full, user.login, manual_rows(db, user), state.policy, sub.received)


def _platform(state: ServerState, link: LtiLink) -> Any:
    from grader.serve.lti import Platform

    for data in state.settings.platforms:
        if data.get("issuer") == link.issuer and data.get("client_id") == link.client_id:
            return Platform.from_mapping(data, state.settings.source)
    return None


def _claim(state: ServerState) -> int | None:
    """Take the oldest pending push (``sending``), or None."""
    with state.db() as db:
        for push_id in db.execute(select(Push.id).where(Push.state == "pending").order_by(Push.id).limit(5)).scalars():
            # One atomic update takes it, as grader.serve.worker.claim takes a submission: two workers
            # never send the same push (the platform would get the score twice).
            taken = db.execute(update(Push).where(Push.id == push_id, Push.state == "pending").values(state="sending"))
            db.commit()
            if getattr(taken, "rowcount", 0) == 1:
                return int(push_id)
    return None


def _record(server: ServerState, push_id: int, **values: Any) -> None:
    """Store a push's outcome (``values``: the `Push` columns to set)."""
    with server.db() as db:
        db.execute(update(Push).where(Push.id == push_id).values(done=now(), **values))
        db.commit()


def _client(state: ServerState, platform: Any, http: Any) -> Any:
    from grader.serve.keys import tool_key
    from grader.serve.lti import AgsClient

    key = (platform, str(state.settings.state), http)
    with _CLIENTS_LOCK:  # one client per platform and process: its access token is reused until it expires
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = AgsClient(platform, tool_key(state.settings.state), http=http)
    return client


def send_pending(state: ServerState, http: Any = None) -> bool:
    """Send the oldest pending push; False when none is waiting.

    The database is read, then let go while the platform is called (with its retries), then written.
    """
    from grader.term import submission_feedback

    push_id = _claim(state)
    if push_id is None:
        return False
    with state.db() as db:
        push = db.get(Push, push_id)
        user = db.get(User, push.user_id) if push is not None else None
        link = db.execute(select(LtiLink).where(LtiLink.user_id == user.id)).scalar_one_or_none() if user else None
        result = latest_final(state, db, user) if user is not None else None
        if link is not None:
            db.expunge(link)
    if user is None or link is None or not (link.lineitem_url or link.lineitems_url) or result is None:
        _record(state, push_id, state="skipped", detail="no line item or no graded submission")
        return True
    platform = _platform(state, link)
    if platform is None:
        _record(state, push_id, state="failed", detail=f"no platform {link.issuer!r} in serve.yaml")
        return True
    client = _client(state, platform, http)
    lineitem = link.lineitem_url
    if not lineitem and link.lineitems_url:  # the platform coupled no line item: find or make it
        lineitem, outcome = client.ensure_lineitem(
            link.lineitems_url,
            label=f"{state.pack.chapter}: {state.pack.title}"[:200],
            score_maximum=result.max_score,
            resource_link_id=link.resource_link_id,
        )
        if lineitem is None:
            detail = str(outcome.detail)[:2000]
            _record(state, push_id, state="failed", status=outcome.status, attempts=outcome.attempts, detail=detail)
            return True
        with state.db() as db:
            db.execute(update(LtiLink).where(LtiLink.id == link.id).values(lineitem_url=lineitem))
            db.commit()
    assert lineitem is not None
    outcome = client.post_score(
        lineitem,
        link.subject,
        result.score,
        result.max_score,
        submission_feedback(result, state.pack.chapter),
        now().isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    )
    _record(
        state,
        push_id,
        state="sent" if outcome.ok else "failed",
        score=result.score,
        max_score=result.max_score,
        status=outcome.status,
        attempts=outcome.attempts,
        detail=str(outcome.detail)[:2000],
    )
    return True
