"""The student's pages: sign-in by link, upload, the latest feedback, the history of attempts.

Before release a student reads the visible checks only (as ``grader check`` reports them), and
their details only for the first ``details_for_first`` submissions; after release, every check's
status and the final score, never a hidden check's inputs or expected values
(`grader.disclosure.student_message`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import func, select
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from grader.serve.db import Invite, Submission, User, now
from grader.serve.feedback import student_view
from grader.serve.limits import check_limits, shows_details
from grader.serve.pages import Pages
from grader.serve.security import audit, check_csrf, current_user, hash_token, limit_body, log_in, log_out, require_user
from grader.serve.state import ServerState
from grader.serve.store import Refused, check_upload, store_upload

__all__ = ["routes"]

REFRESH_SECONDS = 1
"""How often a page waiting for feedback reloads itself (meta refresh: no JavaScript)."""


class StudentViews:
    """The routes' handlers, sharing the server's state and pages."""

    def __init__(self, state: ServerState, pages: Pages) -> None:
        self.state = state
        self.pages = pages

    async def home(self, request: Request) -> Response:
        """``GET /``: the upload form and the latest submission (staff go to ``/staff``)."""
        user = current_user(self.state, request)
        if user is None:
            return self.pages.render(request, "welcome.html")
        if user.role != "student":
            return RedirectResponse(f"{self.state.settings.prefix}/staff", status_code=303)
        with self.state.db() as db:
            latest = db.execute(
                select(Submission).where(Submission.user_id == user.id).order_by(Submission.number.desc()).limit(1)
            ).scalar_one_or_none()
            view = student_view(self.state, db, user, latest) if latest is not None else None
            released = self.state.flag(db, "released")
        return self.pages.render(
            request,
            "home.html",
            user=user,
            view=view,
            limits=self.state.settings.limits,
            released=released,
            refresh=REFRESH_SECONDS if view is not None and view.waiting else None,
            max_kib=self.state.settings.upload_max_bytes // 1024,
        )

    async def submit(self, request: Request) -> Response:
        """``POST /submit``: check the upload and the limits, store it under its hash, queue it."""
        user = require_user(self.state, request)
        limit = self.state.settings.upload_max_bytes
        too_big = Refused(
            413, f"The file is larger than {limit // 1024} KiB; upload your {self.state.pack.submission} only."
        )
        try:  # the body is read only up to the limit, Content-Length or not (a chunked upload)
            bounded = limit_body(request, limit + 64 * 1024, too_big)
            async with bounded.form(max_files=1, max_fields=5, max_part_size=limit + 1) as form:
                check_csrf(self.state, request, form)
                upload = form.get("file")
                if upload is None or isinstance(upload, str):
                    raise Refused(400, f"Choose your {self.state.pack.submission} to upload.")
                data = await upload.read(limit + 1)
                name = upload.filename or ""
        except Refused as refusal:
            if refusal is too_big:
                size = request.headers.get("content-length")
                detail = f"{size[:20]} bytes" if size else "no Content-Length: cut at the limit"
                audit(self.state, request, user.login, "refused: upload too big", detail)
            raise
        try:
            filename = check_upload(name, data, (self.state.pack.submission, self.state.pack.notebook), limit)
        except Refused as refusal:
            audit(self.state, request, user.login, "refused: upload", refusal.sentence)
            raise
        received = now()
        with self.state.db() as db:
            try:
                check_limits(db, user, self.state.settings.limits, received)
            except Refused as refusal:
                db.rollback()
                audit(self.state, request, user.login, "refused: limit", refusal.sentence)
                raise
            stored = store_upload(self.state.uploads, filename, data)
            number = (
                db.execute(select(func.max(Submission.number)).where(Submission.user_id == user.id)).scalar() or 0
            ) + 1
            sub = Submission(
                user_id=user.id,
                number=number,
                filename=stored.filename,
                sha256=stored.sha256,
                size=stored.size,
                received=received,
                state="queued",
                details=shows_details(number, self.state.settings.limits),
            )
            db.add(sub)
            db.commit()
        return RedirectResponse(f"{self.state.settings.prefix}/submissions/{number}", status_code=303)

    async def submission(self, request: Request) -> Response:
        """``GET /submissions/{number}``: one of the student's own submissions (reloads itself while queued)."""
        user = require_user(self.state, request)
        number = request.path_params["number"]
        with self.state.db() as db:
            sub = db.execute(
                select(Submission).where(Submission.user_id == user.id, Submission.number == number)
            ).scalar_one_or_none()
            if sub is None:
                raise Refused(404, "You have no submission with that number.")
            view = student_view(self.state, db, user, sub)
        return self.pages.render(
            request, "submission.html", user=user, view=view, refresh=REFRESH_SECONDS if view.waiting else None
        )

    async def history(self, request: Request) -> Response:
        """``GET /history``: every attempt with its visible (after release: final) score."""
        user = require_user(self.state, request)
        with self.state.db() as db:
            subs = db.execute(
                select(Submission).where(Submission.user_id == user.id).order_by(Submission.number.desc())
            ).scalars()
            views = [student_view(self.state, db, user, sub, ahead=False) for sub in subs]
        return self.pages.render(request, "history.html", user=user, views=views)

    async def login_page(self, request: Request) -> Response:
        """``GET /login/{token}``: the sign-in button of a one-time link (a GET signs nobody in: link scanners)."""
        with self.state.db() as db:
            user = db.get(User, _usable_invite(self.state, db, request.path_params["token"]).user_id)
            assert user is not None
            name = user.name or user.login
        return self.pages.render(request, "login.html", user=None, name=name)

    async def login(self, request: Request) -> Response:
        """``POST /login/{token}``: use the link once and start a new session."""
        async with request.form(max_files=0, max_fields=5) as form:
            check_csrf(self.state, request, form)
        token = request.path_params["token"]
        with self.state.db() as db:
            invite = _usable_invite(self.state, db, token)
            invite.used = now()
            user = db.get(User, invite.user_id)
            db.commit()
        assert user is not None
        log_in(request, user)
        audit(self.state, request, user.login, "login by link")
        return RedirectResponse(f"{self.state.settings.prefix}/", status_code=303)

    async def logout(self, request: Request) -> Response:
        """``POST /logout``: end the session."""
        async with request.form(max_files=0, max_fields=5) as form:
            check_csrf(self.state, request, form)
        log_out(self.state, request)
        return RedirectResponse(f"{self.state.settings.prefix}/", status_code=303)

    def routes(self) -> list[Route]:
        """Each path and its handler."""
        return [
            Route("/", self.home),
            Route("/submit", self.submit, methods=["POST"]),
            Route("/submissions/{number:id}", self.submission),
            Route("/history", self.history),
            Route("/login/{token}", self.login_page, methods=["GET"]),
            Route("/login/{token}", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
        ]


def routes(state: ServerState, pages: Pages) -> list[Route]:
    """The student's routes."""
    return StudentViews(state, pages).routes()


def _usable_invite(state: ServerState, db: Any, token: str) -> Invite:
    """The unused, unexpired invite of ``token`` (`grader.serve.settings.ServeSettings.invite_days`), else 403."""
    invite = db.execute(select(Invite).where(Invite.token_hash == hash_token(token))).scalar_one_or_none()
    if invite is None or invite.used is not None:
        raise Refused(403, "This login link has been used or does not exist; ask your instructor for a new one.")
    expires = invite.created + dt.timedelta(days=state.settings.invite_days)
    if now() >= expires:
        raise Refused(403, f"This login link expired on {expires:%Y-%m-%d}; ask your instructor for a new one.")
    assert isinstance(invite, Invite)
    return invite
