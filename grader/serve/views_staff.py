"""The staff's pages: the class live, each student's history with every check, manual scores, release,
regrades with their diff, the batch path's exports, the audit log.

Every route asks `grader.serve.security.require_staff` first: a student gets 403 and one sentence,
logged, and nothing changes. Every change is a POST with the session's CSRF token and a line in the
audit log; a change to a released student's grade queues a push to the LMS.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import func, select
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from grader.errors import ConfigError
from grader.serve.db import Audit, LtiLink, Manual, Push, Regrade, Submission, User, now
from grader.serve.feedback import staff_view
from grader.serve.pages import Pages
from grader.serve.probing import Attempt, flagged
from grader.serve.pushes import enqueue_push, manual_rows
from grader.serve.security import audit, check_csrf, require_staff
from grader.serve.state import ServerState
from grader.serve.store import Refused

__all__ = ["routes", "summary_rows"]

SUMMARY_REFRESH = 10
"""Seconds between reloads of the class summary (it stays live without JavaScript)."""


def _history(db: Any, user: User) -> list[Submission]:
    return list(
        db.execute(select(Submission).where(Submission.user_id == user.id).order_by(Submission.number)).scalars()
    )


def _evidence(state: ServerState, subs: list[Submission]) -> list[Any]:
    attempts = [Attempt(s.number, s.received, s.full) for s in subs if s.full is not None]
    return flagged(attempts, state.settings.probing_min_steps)


def summary_rows(state: ServerState) -> list[dict[str, Any]]:
    """One row per student: attempts, latest state and scores (visible, automatic, final), probing flag."""
    from grader.serve.pushes import latest_final

    rows = []
    with state.db() as db:
        for user in db.execute(select(User).where(User.role == "student").order_by(User.login)).scalars():
            subs = _history(db, user)
            latest = subs[-1] if subs else None
            final = latest_final(state, db, user)
            rows.append(
                {
                    "user": user,
                    "attempts": len(subs),
                    "latest": latest,
                    "final": final,
                    "flagged": bool(_evidence(state, subs)),
                }
            )
    return rows


class StaffViews:
    """The routes' handlers, sharing the server's state and pages."""

    def __init__(self, state: ServerState, pages: Pages) -> None:
        self.state = state
        self.pages = pages

    async def summary(self, request: Request) -> Response:
        """``GET /staff``: the class, live (it reloads itself), with the release and regrade forms."""
        staff = require_staff(self.state, request)
        with self.state.db() as db:
            released = self.state.flag(db, "released")
            queued = db.execute(
                select(func.count()).select_from(Submission).where(Submission.state == "queued")
            ).scalar()
            regrades = db.execute(select(Regrade).order_by(Regrade.id.desc()).limit(10)).scalars().all()
        return self.pages.render(
            request,
            "staff.html",
            user=staff,
            rows=summary_rows(self.state),
            released=released,
            queued=queued,
            regrades=regrades,
            refresh=SUMMARY_REFRESH,
        )

    async def student(self, request: Request) -> Response:
        """``GET /staff/students/{uid}``: a student's submissions with every check, manual scores, pushes, probing evidence."""
        staff = require_staff(self.state, request)
        with self.state.db() as db:
            user = db.get(User, request.path_params["uid"])
            if user is None:
                raise Refused(404, "No such student.")
            subs = _history(db, user)
            views = [staff_view(self.state, db, user, s) for s in reversed(subs)]
            manual = db.execute(select(Manual).where(Manual.user_id == user.id).order_by(Manual.target)).scalars().all()
            pushes = db.execute(select(Push).where(Push.user_id == user.id).order_by(Push.id.desc())).scalars().all()
            link = db.execute(select(LtiLink).where(LtiLink.user_id == user.id)).scalar_one_or_none()
            targets = _targets(subs[-1].full if subs and subs[-1].full else None)
            graded = next((v.final for v in views if v.final is not None), None)
            applied = {a.target for a in graded.adjustments if a.kind == "manual"} if graded is not None else set()
        return self.pages.render(
            request,
            "staff_student.html",
            user=staff,
            student=user,
            views=views,
            manual=manual,
            pushes=pushes,
            link=link,
            evidence=_evidence(self.state, subs),
            targets=targets,
            applied=applied,
        )

    async def manual_score(self, request: Request) -> Response:
        """``POST /staff/students/{uid}/manual``: set (or, empty, remove) a manual score; checked against the latest result."""
        staff = require_staff(self.state, request)
        async with request.form(max_files=0, max_fields=10) as form:
            check_csrf(self.state, request, form)
            target, points_text, comment = (str(form.get(k) or "").strip() for k in ("target", "points", "comment"))
        uid = request.path_params["uid"]
        with self.state.db() as db:
            user = db.get(User, uid)
            if user is None:
                raise Refused(404, "No such student.")
            row = db.execute(select(Manual).where(Manual.user_id == uid, Manual.target == target)).scalar_one_or_none()
            if not points_text:  # an empty score removes the manual score
                if row is not None:
                    db.delete(row)
                action = f"manual score removed: {user.login} {target}"
            else:
                points = _points(points_text)
                if row is None:
                    row = Manual(user_id=uid, target=target, points=points)
                    db.add(row)
                row.points, row.comment, row.grader, row.updated = points, comment[:2000], staff.login, now()
                action = f"manual score: {user.login} {target} = {points:g}" + (
                    f" ({comment[:200]})" if comment else ""
                )
            db.flush()
            _check_manual(self.state, db, user)
            if self.state.flag(db, "released"):
                enqueue_push(db, user, "manual")
            db.commit()
        audit(self.state, request, staff.login, "manual score", action)
        return RedirectResponse(f"{self.state.settings.prefix}/staff/students/{uid}", status_code=303)

    async def push_again(self, request: Request) -> Response:
        """``POST /staff/students/{uid}/push``: queue the student's final score for the LMS again (after release only)."""
        staff = require_staff(self.state, request)
        async with request.form(max_files=0, max_fields=5) as form:
            check_csrf(self.state, request, form)
        uid = request.path_params["uid"]
        with self.state.db() as db:
            user = db.get(User, uid)
            if user is None:
                raise Refused(404, "No such student.")
            if not self.state.flag(db, "released"):
                raise Refused(409, "Release the results first: no score leaves for the LMS before release.")
            push = enqueue_push(db, user, "staff")
            if push is None:
                raise Refused(409, "This student has no LTI line item to send a score to.")
            db.commit()
        audit(self.state, request, staff.login, "push again", user.login)
        return RedirectResponse(f"{self.state.settings.prefix}/staff/students/{uid}", status_code=303)

    async def release(self, request: Request) -> Response:
        """``POST /staff/release``: release (``released=yes``) or withdraw the hidden results and final grades."""
        staff = require_staff(self.state, request)
        async with request.form(max_files=0, max_fields=5) as form:
            check_csrf(self.state, request, form)
            value = form.get("released") == "yes"
        with self.state.db() as db:
            self.state.set_flag(db, "released", value)
            pushed = 0
            if value:
                for user in db.execute(select(User).where(User.role == "student")).scalars():
                    pushed += enqueue_push(db, user, "released") is not None
            db.commit()
        audit(self.state, request, staff.login, "release" if value else "withdraw release", f"{pushed} push(es) queued")
        return RedirectResponse(f"{self.state.settings.prefix}/staff", status_code=303)

    async def regrade(self, request: Request) -> Response:
        """``POST /staff/regrade``: grade the chosen students' (``who=all``: everyone's) latest submissions again."""
        staff = require_staff(self.state, request)
        async with request.form(max_files=0, max_fields=10_000) as form:
            check_csrf(self.state, request, form)
            everyone = form.get("who") == "all"
            chosen = {int(v) for v in form.getlist("student") if isinstance(v, str) and v.isdigit()}
        with self.state.db() as db:
            job = Regrade(by=staff.login)
            db.add(job)
            db.flush()
            count = 0
            for user in db.execute(select(User).where(User.role == "student")).scalars():
                if not everyone and user.id not in chosen:
                    continue
                subs = [s for s in _history(db, user) if s.full is not None]
                if not subs:
                    continue
                latest = subs[-1]
                latest.previous, latest.state, latest.regrade_id, latest.started = latest.full, "queued", job.id, None
                count += 1
            job.count = count
            db.commit()
            job_id = job.id
        audit(self.state, request, staff.login, "regrade", f"regrade {job_id}: {count} submission(s)")
        return RedirectResponse(f"{self.state.settings.prefix}/staff/regrades/{job_id}", status_code=303)

    async def regrade_page(self, request: Request) -> Response:
        """``GET /staff/regrades/{rid}``: a regrade's progress, then the ``grader diff`` of old and new results."""
        from grader.grading.regrade import diff_results

        staff = require_staff(self.state, request)
        with self.state.db() as db:
            job = db.get(Regrade, request.path_params["rid"])
            if job is None:
                raise Refused(404, "No such regrade.")
            subs = db.execute(select(Submission).where(Submission.regrade_id == job.id)).scalars().all()
            waiting = sum(1 for s in subs if s.state in ("queued", "running"))
            old: dict[str, Any] = {}
            new: dict[str, Any] = {}
            for sub in subs:
                user = db.get(User, sub.user_id)
                if sub.state in ("queued", "running") or sub.previous is None or sub.full is None or user is None:
                    continue
                old[user.login], new[user.login] = dict(sub.previous, id=user.login), dict(sub.full, id=user.login)
            lines = diff_results(old, new) if new else []
        return self.pages.render(
            request, "regrade.html", user=staff, job=job, waiting=waiting, lines=lines, refresh=2 if waiting else None
        )

    async def export(self, request: Request) -> Response:
        """``GET /staff/export.zip``: every report the batch path writes, zipped."""
        from starlette.concurrency import run_in_threadpool

        from grader.serve.exports import export_zip

        staff = require_staff(self.state, request)
        data = await run_in_threadpool(export_zip, self.state)
        audit(self.state, request, staff.login, "export", f"{len(data)} bytes")
        return Response(
            data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{self.state.pack.id}-reports.zip"'},
        )

    async def audit_page(self, request: Request) -> Response:
        """``GET /staff/audit``: the newest 500 lines of the audit log."""
        staff = require_staff(self.state, request)
        with self.state.db() as db:
            lines = db.execute(select(Audit).order_by(Audit.id.desc()).limit(500)).scalars().all()
        return self.pages.render(request, "audit.html", user=staff, lines=lines)

    def routes(self) -> list[Route]:
        """Each path and its handler."""
        return [
            Route("/staff", self.summary),
            Route("/staff/students/{uid:id}", self.student),
            Route("/staff/students/{uid:id}/manual", self.manual_score, methods=["POST"]),
            Route("/staff/students/{uid:id}/push", self.push_again, methods=["POST"]),
            Route("/staff/release", self.release, methods=["POST"]),
            Route("/staff/regrade", self.regrade, methods=["POST"]),
            Route("/staff/regrades/{rid:id}", self.regrade_page),
            Route("/staff/export.zip", self.export),
            Route("/staff/audit", self.audit_page),
        ]


def routes(state: ServerState, pages: Pages) -> list[Route]:
    """The staff routes."""
    return StaffViews(state, pages).routes()


def _points(text: str) -> float:
    try:
        points = float(text)
    except ValueError:
        raise Refused(400, f"Points must be a number, got {text[:40]!r}.") from None
    if not math.isfinite(points) or points < 0:
        raise Refused(400, "Points must be a finite number, 0 or more.")
    return points


def _targets(full: dict[str, Any] | None) -> list[str]:
    if not full:
        return []
    return [t for e in full["exercises"] for t in (e["id"], *(f"{e['id']}/{c['id']}" for c in e["checks"]))]


def _check_manual(state: ServerState, db: Any, user: User) -> None:
    """`Refused` (400) when the manual scores do not fit the student's latest result (as ``--manual`` checks)."""
    from grader.serve.grades import final_result

    latest = db.execute(
        select(Submission)
        .where(Submission.user_id == user.id, Submission.full.is_not(None))
        .order_by(Submission.number.desc())
        .limit(1)
    ).scalar_one_or_none()
    if latest is None:
        raise Refused(400, "This student has no graded submission to score by hand yet.")
    try:
        final_result(latest.full, user.login, manual_rows(db, user), strict=True)
    except ConfigError as exc:
        db.rollback()
        raise Refused(400, str(exc).replace("--manual manual scores: ", "").split("; give")[0] + ".") from None
