"""The LTI 1.3 routes, on `grader.serve.lti`: login initiation, launch, deep linking, the tool's key set.

``/lti/login`` (GET or POST) answers the platform's login initiation with a redirect to its
authorization endpoint; the state and nonce are kept in the database (the platform posts the
launch back cross-site, where a ``SameSite=Lax`` session cookie is not sent) and, when the browser
keeps it, in a short-lived cookie that must be sent back and match: a launch without it is
refused (login CSRF: an attacker's own launch posted from a victim's browser would sign the victim
in as the attacker), unless ``serve.yaml`` says ``lti.allow_missing_state_cookie: true`` for an
LMS that embeds the tool in an iframe where the browser drops third-party cookies. ``/lti/launch`` validates the ``id_token``
(signature against the platform's key set, issuer, audience, expiry, deployment, nonce used once),
signs the user in with the launch's role and remembers the line item their score goes to. A deep
linking request from the staff answers with a signed response that adds the assignment.
Every refusal is a status and one sentence, logged, with nothing stored.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from grader.serve.db import LtiLink, LtiState, Nonce, User, now
from grader.serve.pages import Pages
from grader.serve.security import STAFF_ROLES, audit, log_in
from grader.serve.state import ServerState
from grader.serve.store import Refused

__all__ = ["STATE_COOKIE", "routes"]

STATE_COOKIE = "grader_lti_state"
"""The cookie binding a login in progress to the browser that started it."""

NEW_WINDOW = "This browser {}; open the assignment in a new window (not inside the LMS page) and try again."
"""The refusal of a launch whose state cookie is missing or another's (a login CSRF, or an embedded tool)."""

STATE_MINUTES = 10
"""How long a login initiation's state and nonce stay usable."""


def base_url(state: ServerState, request: Request) -> str:
    """How users reach the server: ``public_url``, else the request's own origin."""
    return state.settings.public_url or str(request.base_url).rstrip("/")


def platform_for(state: ServerState, issuer: str, client_id: str | None) -> Any:
    """The registered platform with this issuer (and client id, when given), or None."""
    from grader.serve.lti import Platform

    for data in state.settings.platforms:
        if data.get("issuer") == issuer and (client_id is None or data.get("client_id") == client_id):
            return Platform.from_mapping(data, state.settings.source or "serve.yaml")
    return None


def _cookie_attributes(state: ServerState) -> dict[str, Any]:
    """The state cookie's attributes: on the course's ``/lti/`` only, http-only, sent cross-site (``SameSite=None``, which
    browsers take only with ``Secure``) when the server is reached over https, else ``SameSite=Lax``."""
    secure = state.settings.secure
    return {
        "path": f"{state.settings.prefix}/lti/",
        "httponly": True,
        "secure": secure,
        "samesite": "none" if secure else "lax",
    }


def routes(state: ServerState, pages: Pages) -> list[Route]:
    """The LTI routes."""
    from grader.serve import lti

    def refuse(request: Request, status: int, sentence: str, what: str) -> Refused:
        audit(state, request, "lti", f"refused: {what}", sentence)
        return Refused(status, sentence)

    async def login(request: Request) -> Response:
        if request.method == "POST":
            async with request.form(max_files=0, max_fields=20) as form:
                params = {k: v for k, v in form.items() if isinstance(v, str)}
        else:
            params = dict(request.query_params)
        platform = platform_for(state, params.get("iss", ""), params.get("client_id"))
        if platform is None:
            raise refuse(request, 400, "The login request names a platform this tool is not registered with.", "login")
        token, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        try:
            url = lti.login_redirect(platform, params, base_url(state, request) + "/lti/launch", token, nonce)
        except lti.LaunchError as exc:
            raise refuse(request, 400, str(exc), "login") from None
        with state.db() as db:
            db.execute(delete(LtiState).where(LtiState.created < now() - dt.timedelta(minutes=STATE_MINUTES)))
            db.add(LtiState(state=token, nonce=nonce, issuer=platform.issuer, client_id=platform.client_id))
            db.commit()
        response = RedirectResponse(url, status_code=302)
        response.set_cookie(STATE_COOKIE, token, max_age=STATE_MINUTES * 60, **_cookie_attributes(state))
        return response

    async def launch(request: Request) -> Response:
        async with request.form(max_files=0, max_fields=10, max_part_size=128 * 1024) as form:
            id_token, token = form.get("id_token"), form.get("state")
        if not isinstance(id_token, str) or not isinstance(token, str) or not token:
            raise refuse(request, 400, "The launch has no id_token or no state.", "launch")
        cookie = request.cookies.get(STATE_COOKIE)
        if cookie is None and not state.settings.allow_missing_state_cookie:
            raise refuse(request, 403, NEW_WINDOW.format("did not keep the cookie of the login it started"), "launch")
        if cookie is not None and not secrets.compare_digest(cookie, token):
            raise refuse(request, 403, NEW_WINDOW.format("did not start this launch"), "launch")
        with state.db() as db:
            row = db.get(LtiState, token)
            if row is None or row.created < now() - dt.timedelta(minutes=STATE_MINUTES):
                raise refuse(
                    request, 400, "The launch's state is unknown or expired; open the assignment again.", "launch"
                )
            issued_nonce, issuer, client_id = row.nonce, row.issuer, row.client_id
            db.delete(row)
            db.commit()
        platform = platform_for(state, issuer, client_id)
        if platform is None:
            raise refuse(request, 400, "The platform of this launch is no longer registered.", "launch")

        def nonce_unused(nonce: str) -> bool:
            if not secrets.compare_digest(nonce, issued_nonce):
                return False
            with state.db() as db:
                db.add(Nonce(value=nonce))
                try:
                    db.commit()
                except IntegrityError:
                    return False
            return True

        try:
            # In a thread: an unknown key id makes it fetch the platform's key set (up to 5 s), which
            # must not hold every other request of the event loop.
            launched = await run_in_threadpool(lti.validate_launch, platform, id_token, nonce_unused=nonce_unused)
        except lti.LaunchError as exc:
            raise refuse(request, 401, str(exc), "launch") from None
        user = _launch_user(state, platform, launched)
        audit(state, request, user.login, "launch", f"{launched.message_type} as {launched.role}")
        response: Response
        if launched.message_type == "LtiDeepLinkingRequest":
            response = _deep_link(state, pages, request, platform, launched, user)
        else:
            log_in(request, user)
            response = RedirectResponse(f"{state.settings.prefix}/", status_code=303)
        response.delete_cookie(STATE_COOKIE, **_cookie_attributes(state))  # used once
        return response

    async def jwks(request: Request) -> Response:
        from grader.serve.keys import tool_key

        return JSONResponse(tool_key(state.settings.state).jwks(), headers={"Cache-Control": "max-age=300"})

    return [
        Route("/lti/login", login, methods=["GET", "POST"]),
        Route("/lti/launch", launch, methods=["POST"]),
        Route("/lti/jwks", jwks, methods=["GET"]),
    ]


def _launch_user(state: ServerState, platform: Any, launched: Any) -> User:
    """The user of a launch, made or updated (role, name, email), and where their score goes."""
    with state.db() as db:
        user = db.execute(
            select(User).where(User.issuer == platform.issuer, User.subject == launched.subject)
        ).scalar_one_or_none()
        if user is None:
            login = launched.email or launched.subject
            if db.execute(select(User.id).where(User.login == login)).first() is not None:
                login = f"{login}#{launched.subject}"
            user = User(login=login[:200], issuer=platform.issuer, subject=launched.subject)
            db.add(user)
        user.name = launched.name[:200] or user.name
        user.email = launched.email[:320] or user.email
        user.role = launched.role
        db.flush()
        link = db.execute(select(LtiLink).where(LtiLink.user_id == user.id)).scalar_one_or_none()
        if link is None:
            link = LtiLink(
                user_id=user.id, issuer=platform.issuer, client_id=platform.client_id, subject=launched.subject
            )
            db.add(link)
        if launched.lineitem_url:
            link.lineitem_url = launched.lineitem_url[:2000]
        if launched.lineitems_url:
            link.lineitems_url = launched.lineitems_url[:2000]
        if launched.resource_link_id:
            link.resource_link_id = launched.resource_link_id[:300]
        link.issuer, link.client_id, link.subject = platform.issuer, platform.client_id, launched.subject
        db.commit()
        return user


def _deep_link(
    state: ServerState, pages: Pages, request: Request, platform: Any, launched: Any, user: User
) -> Response:
    from grader.serve import lti
    from grader.serve.keys import tool_key

    if user.role not in STAFF_ROLES or not launched.deep_link_return_url:
        audit(state, request, user.login, "refused: deep link", "not staff or no return URL")
        raise Refused(403, "Only the course staff add the assignment to the course.")
    jwt_text = lti.deep_link_response(
        platform,
        tool_key(state.settings.state),
        launched,
        title=f"{state.pack.chapter}: {state.pack.title}"[:200],
        url=base_url(state, request) + "/lti/launch",
        score_maximum=max_points(state),
        resource_id=state.pack.id,
    )
    log_in(request, user)
    return pages.render(request, "deep_link.html", user=user, return_url=launched.deep_link_return_url, jwt=jwt_text)


def max_points(state: ServerState) -> float:
    """The course's total points (the line item's maximum): its specs' exercises as the grader loads them."""
    from grader.config.parser import for_command
    from grader.grading.session import CHECK_KINDS, check_kinds

    config = for_command("grade", [str(state.pack.starter)], pack=str(state.pack.root))
    config.stash[CHECK_KINDS] = check_kinds(config)
    total = 0.0
    for spec in sorted(state.pack.specs.glob("*.yaml")):
        exercise = config.hooks.load_exercise(path=str(spec), config=config)
        total += exercise.max_score if exercise is not None else 0.0
    return round(total, 6) or 100.0
