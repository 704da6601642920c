"""Sessions, CSRF tokens, roles, rate limits and the audit log: the checks every request goes through.

Refusals are `grader.serve.store.Refused` (an HTTP status and one sentence); each is written to
the audit log with who asked, from where, and what, and changes nothing else.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import secrets
import threading
import time
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from grader.serve.db import Audit, Setting, User
from grader.serve.state import ServerState
from grader.serve.store import Refused

__all__ = [
    "STAFF_ROLES",
    "BodyDeadline",
    "RateLimiter",
    "address",
    "audit",
    "check_csrf",
    "csrf_token",
    "current_user",
    "hash_token",
    "limit_body",
    "log_in",
    "log_out",
    "require_staff",
    "require_user",
]

log = logging.getLogger("grader.serve")

SIGNED_OUT = "signed-out:"
"""Prefix of the server setting holding when a user last signed out (``signed-out:<user id>``)."""

STAFF_ROLES = ("instructor", "ta")
"""Roles that reach the staff pages."""


def hash_token(token: str) -> str:
    """The SHA-256 of a login token (only hashes are stored)."""
    return hashlib.sha256(token.encode()).hexdigest()


def address(request: Request) -> str:
    """The client's address as the server sees it (behind a proxy, uvicorn's ``--forwarded-allow-ips`` sets it)."""
    return request.client.host if request.client is not None else ""


def audit(state: ServerState, request: Request | None, actor: str, action: str, detail: str = "") -> None:
    """Add a line to the audit log (its own transaction: a refused request's line stays)."""
    where = address(request) if request is not None else ""
    with state.db() as db:
        db.add(Audit(actor=actor[:200], address=where[:100], action=action[:100], detail=detail[:4000]))
        db.commit()
    log.info("audit: %s %s %s %s", actor, where, action, detail[:200])


def current_user(state: ServerState, request: Request) -> User | None:
    """The signed-in user, or None."""
    uid = request.session.get("uid")
    if not isinstance(uid, int):
        return None
    since = request.session.get("since")
    with state.db() as db:
        out = db.get(Setting, f"{SIGNED_OUT}{uid}")
        if out is not None and not (isinstance(since, float) and since > float(out.value)):
            request.session.clear()  # signed in before its user signed out: a copied or stolen cookie
            return None
        return db.get(User, uid)


def require_user(state: ServerState, request: Request) -> User:
    """The signed-in user, or `Refused` (401)."""
    user = current_user(state, request)
    if user is None:
        raise Refused(401, "Sign in first: open the assignment from your course page or your login link.")
    return user


def require_staff(state: ServerState, request: Request) -> User:
    """The signed-in staff member, or `Refused` (403, logged, nothing changed)."""
    user = require_user(state, request)
    if user.role not in STAFF_ROLES:
        audit(state, request, user.login, "refused: staff page", f"{request.method} {request.url.path}")
        raise Refused(403, "This page is for the course staff only.")
    return user


def log_in(request: Request, user: User) -> None:
    """Start a new session for ``user`` (a fresh CSRF token; nothing of the old session kept)."""
    request.session.clear()
    request.session["uid"] = user.id
    request.session["since"] = time.time()
    request.session["csrf"] = secrets.token_urlsafe(32)


def log_out(state: ServerState, request: Request) -> None:
    """End the session, and every other session of its user started before now.

    Sessions are signed cookies the server does not keep: the time of the sign-out, stored, is what
    makes a copy of the cookie (a shared computer, a stolen cookie) stop working with it.
    """
    uid = request.session.get("uid")
    request.session.clear()
    if not isinstance(uid, int):
        return
    with state.db() as db:
        row = db.get(Setting, f"{SIGNED_OUT}{uid}")
        if row is None:
            db.add(Setting(key=f"{SIGNED_OUT}{uid}", value=repr(time.time())))
        else:
            row.value = repr(time.time())
        db.commit()


def csrf_token(request: Request) -> str:
    """The session's CSRF token (made when missing), for every form's hidden ``csrf`` field."""
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


def check_csrf(state: ServerState, request: Request, form: Any) -> None:
    """`Refused` (403, logged) unless the form's ``csrf`` field is the session's token."""
    sent = form.get("csrf")
    token = request.session.get("csrf")
    if not isinstance(sent, str) or not isinstance(token, str) or not secrets.compare_digest(sent, token):
        who = str(request.session.get("uid", "anonymous"))
        audit(state, request, who, "refused: no CSRF token", f"{request.method} {request.url.path}")
        raise Refused(403, "The form did not come from this site's page; reload the page and send it again.")


def limit_body(request: Request, max_bytes: int, refusal: Refused) -> Request:
    """``request`` whose body is read at most ``max_bytes`` far: past that, reading raises ``refusal``.

    A declared ``Content-Length`` over the limit is refused before anything is read; a body without
    one (chunked) is counted as it arrives, so a client cannot make the server read, spool or store
    more than the limit whatever it declares.
    """
    declared = request.headers.get("content-length") or ""
    if declared.isdigit() and int(declared) > max_bytes:
        raise refusal
    receive = request.receive
    seen = 0

    async def bounded() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > max_bytes:
                raise refusal
        return message

    return Request(request.scope, bounded)


class RateLimiter:
    """At most ``per_minute`` requests per key in any sliding minute (keys: the user and the address)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._hits: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str, at: float | None = None) -> bool:
        """Count a request of ``key``; False when it is over the limit."""
        moment = time.monotonic() if at is None else at
        with self._lock:
            hits = self._hits.setdefault(key, collections.deque())
            while hits and hits[0] <= moment - 60.0:
                hits.popleft()
            if len(hits) >= self.per_minute:
                return False
            hits.append(moment)
            if len(self._hits) > 100_000:  # forget idle keys rather than grow without bound
                self._hits = {k: v for k, v in self._hits.items() if v and v[-1] > moment - 60.0}
            return True


class RateLimit:
    """ASGI middleware: 429 and one sentence past the rate limit of the signed-in user or of the address.

    Parameters
    ----------
    app : ASGI application
    per_user, per_address : RateLimiter
        The user's limit, and the address's (higher: a lab behind one NAT address shares it).
    """

    def __init__(self, app: ASGIApp, per_user: RateLimiter, per_address: RateLimiter) -> None:
        self.app = app
        self.per_user = per_user
        self.per_address = per_address

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            client = scope.get("client") or ("", 0)
            uid = (scope.get("session") or {}).get("uid")
            allowed = self.per_address.allow(f"address:{client[0]}")
            if allowed and uid is not None:
                allowed = self.per_user.allow(f"user:{uid}")
            if not allowed:
                from starlette.responses import PlainTextResponse

                log.warning("rate limit: address %s user %s %s", client[0], uid, scope.get("path"))
                response = PlainTextResponse("Too many requests; wait a minute and try again.\n", status_code=429)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BodyDeadline:
    """ASGI middleware: a request whose body has not all arrived ``seconds`` after its headers gets 408.

    A client that sends its upload a byte at a time would otherwise hold a connection (and a
    request's memory) for as long as it likes. The deadline covers the whole body, not each read:
    reading past it raises `grader.serve.store.Refused` (408, one sentence), which the page turns
    into the refusal; the handler stops there, so nothing is stored. Once the body is complete,
    ``receive`` is passed through as it is (it then only waits for the client to leave).

    Parameters
    ----------
    app : ASGI application
    seconds : float
        ``serve.yaml``'s ``upload_seconds``.
    """

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        complete = False
        started = False
        too_slow = Refused(
            408,
            f"The request's body did not arrive within {self.seconds:g} seconds; send it again on a faster connection.",
        )

        async def bounded() -> Message:
            nonlocal complete
            if complete:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                client = scope.get("client") or ("", 0)
                log.warning("slow body: address %s %s %s", client[0], scope.get("method"), scope.get("path"))
                raise too_slow from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                complete = True
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded, sending)
        except Refused as refusal:  # read outside a page (a middleware): the sentence as plain text
            if refusal is not too_slow or started:
                raise
            from starlette.responses import PlainTextResponse

            await PlainTextResponse(too_slow.sentence + "\n", status_code=408, headers={"Connection": "close"})(
                scope, receive, send
            )
