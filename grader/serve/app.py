"""The ASGI application: `create_app` wires the pages, the sessions, the rate limits and the workers.

Middleware, outermost first: the deadline of a request's body (``upload_seconds``), signed session
cookies (http-only, ``SameSite=Lax``, ``Secure`` when ``public_url`` is https), then the rate limit
per address and per user. A `Refused` anywhere becomes its status and one sentence on a page.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from grader.serve.pages import Pages
from grader.serve.security import BodyDeadline, RateLimit, RateLimiter
from grader.serve.state import ServerState, open_state, session_secret
from grader.serve.store import Refused
from grader.serve.worker import DB_ENV, SERVER_PID_ENV, Cluster

__all__ = [
    "CoursePath",
    "course_places",
    "create_app",
    "create_courses_app",
    "requeue_running",
    "start_workers",
    "supervise",
]

SESSION_HOURS = 12
"""How long a sign-in lasts."""

RESTART_SECONDS = 5.0
"""The least time between two starts of one worker slot (a worker that dies at once is not restarted in a loop)."""

log = logging.getLogger("grader.serve")


def requeue_running(state: ServerState) -> int:
    """Queue again what a stopped server's workers left half graded (its own workers have not started yet)."""
    from sqlalchemy import update

    from grader.serve.db import Submission

    with state.db() as db:
        done = db.execute(update(Submission).where(Submission.state == "running").values(state="queued", started=None))
        db.commit()
    return int(getattr(done, "rowcount", 0) or 0)


def start_workers(
    state: ServerState, count: int, db_url: str | None, cluster: Cluster | None = None
) -> list[subprocess.Popen[bytes]]:
    """Start ``count`` grading worker processes (`grader.serve.worker`) for this course and database.

    With a ``cluster`` (``grader serve --dask``) they send each submission to that Dask cluster and
    run no student code themselves.
    """
    # -P: the workers import the grader the server runs, never a grader/ folder in the working directory
    # (a course repository such as this one holds its own copy, maybe of another version).
    command = [sys.executable, "-P", "-m", "grader.serve.worker", "--course", str(state.pack.root)]
    command += ["--state", str(state.settings.state)]
    if state.settings.source:
        command += ["--settings", state.settings.source]
    if cluster is not None:
        command += cluster.argv()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", SERVER_PID_ENV: str(os.getpid())}
    if db_url:  # in the environment: any local user reads a command line (and the password in the URL)
        env[DB_ENV] = db_url
    return [subprocess.Popen(command, env=env) for _ in range(count)]


async def supervise(
    procs: list[subprocess.Popen[bytes]],
    start_one: Callable[[], subprocess.Popen[bytes]],
    stopping: asyncio.Event,
    interval: float = 1.0,
    restart_after: float = RESTART_SECONDS,
) -> None:
    """Start a new worker in place of each one in ``procs`` that exited, until ``stopping`` is set.

    A worker killed (the kernel's out-of-memory killer, a crash) would otherwise leave the server
    taking uploads that no worker grades. Each exit is logged; a slot is started at most once per
    ``restart_after`` seconds. ``procs`` is changed in place, so the caller stops the current ones.
    """
    began = [time.monotonic()] * len(procs)
    while not stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), interval)
        if stopping.is_set():
            return
        for slot, proc in enumerate(procs):
            if proc.poll() is None or time.monotonic() - began[slot] < restart_after:
                continue
            log.warning("grader serve: grading worker %s exited (%s); starting another", proc.pid, proc.returncode)
            procs[slot] = start_one()
            began[slot] = time.monotonic()


def create_app(
    course: str | Path,
    db_url: str | None = None,
    state_dir: str | Path | None = None,
    workers: int = 0,
    state: ServerState | None = None,
    settings: str | Path | None = None,
    cluster: Cluster | None = None,
) -> Starlette:
    """The server's ASGI application for one course folder.

    Parameters
    ----------
    course : str or pathlib.Path
        The course folder (holding ``course.yaml`` and, optionally, ``serve.yaml``).
    db_url : str, optional
        SQLAlchemy URL; default SQLite in ``course/.grader-serve/``. Migrations run here.
    state_dir : str or pathlib.Path, optional
        The server's folder (database, uploads, keys); default ``course/.grader-serve``.
    workers : int
        Grading worker processes started with the application and stopped with it (0: none; run
        `grader.serve.worker.work` elsewhere).
    state : ServerState, optional
        An opened state (tests share it with an in-test worker).
    settings : str or pathlib.Path, optional
        The settings file (default ``course/serve.yaml``).
    cluster : grader.serve.worker.Cluster, optional
        The workers grade on this Dask cluster (``grader serve --dask``) instead of in their own jobs.

    Returns
    -------
    starlette.applications.Starlette
    """
    from grader.serve import views_lti, views_staff, views_student

    if state is None:
        state = open_state(
            Path(course),
            db_url,
            Path(state_dir) if state_dir is not None else None,
            settings=Path(settings) if settings is not None else None,
        )
    pages = Pages(state)
    routes: list[BaseRoute] = [
        *views_student.routes(state, pages),
        *views_staff.routes(state, pages),
        *views_lti.routes(state, pages),
    ]
    if state.settings.prefix:  # public_url https://host/g14: the course is served under /g14 only
        routes = [Mount(state.settings.prefix, routes=routes)]

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        page = pages.render(request, "refused.html", status=exc.status, sentence=exc.sentence)
        if exc.status == 408:  # the rest of a body too slow to arrive is not waited for: the connection ends
            page.headers["Connection"] = "close"
        return page

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if workers:
            requeue_running(state)
        procs = start_workers(state, workers, db_url, cluster) if workers else []
        stopping = asyncio.Event()
        watch = asyncio.create_task(supervise(procs, lambda: start_workers(state, 1, db_url, cluster)[0], stopping))
        try:
            yield
        finally:
            stopping.set()
            await watch
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            state.engine.dispose()

    middleware = [
        Middleware(BodyDeadline, seconds=state.settings.upload_seconds),
        Middleware(
            SessionMiddleware,
            secret_key=session_secret(state.settings.state),
            session_cookie="grader_session",
            path=state.settings.prefix or "/",  # a course under a path: its cookie is never sent to another
            max_age=SESSION_HOURS * 3600,
            same_site="lax",
            https_only=state.settings.secure,
        ),
        Middleware(
            RateLimit,
            per_user=RateLimiter(state.settings.rate_per_minute),
            per_address=RateLimiter(state.settings.rate_per_address_per_minute),
        ),
    ]
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={Refused: refused}, lifespan=lifespan)
    app.state.server = state
    return app


class CoursePath(BaseRoute):
    """A course's application on every path under its prefix (``/g14`` and ``/g14/...``; all paths when "").

    The request reaches the course's application unchanged: it serves its own pages under its
    prefix (`create_app` mounts them there), so its links, redirects and cookies carry it.
    """

    def __init__(self, prefix: str, app: ASGIApp) -> None:
        self.prefix = prefix
        self.app = app

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path = scope.get("path", "")
        if scope["type"] == "http" and (not self.prefix or path == self.prefix or path.startswith(self.prefix + "/")):
            return Match.FULL, {}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def course_places(courses: Sequence[Path]) -> dict[tuple[str, str], Path]:
    """Each course's host name and path prefix, from its ``public_url`` (checked: no two courses share one).

    On one host name the courses are all under paths none of which holds another (``/g14`` and
    ``/g15``, never ``/`` and ``/g14`` nor ``/g1`` and ``/g1/a``), so no course's cookie is sent to another.

    Raises
    ------
    grader.errors.UsageError
        In one line naming the course's settings file, ``public_url`` and the fix.
    """
    from urllib.parse import urlsplit

    from grader.errors import UsageError
    from grader.serve.settings import SETTINGS_FILE, load_settings

    places: dict[tuple[str, str], Path] = {}  # every course checked before any server folder is made
    for course in courses:
        settings = load_settings(course)
        where = f"{course}: {SETTINGS_FILE}: public_url"
        host, prefix = (urlsplit(settings.public_url).hostname or "").lower(), settings.prefix
        if not host:
            raise UsageError(
                f"{where}: missing; give each course its own host name or path when serving several, "
                "e.g. https://grader.example.edu/g14"
            )
        for other_host, other in places:
            if other_host != host:
                continue
            if other == prefix:
                raise UsageError(f"{where}: {host}{prefix} is another course's; give each course its own host or path")
            if not prefix or not other or prefix.startswith(other + "/") or other.startswith(prefix + "/"):
                raise UsageError(
                    f"{where}: {host}{prefix or '/'} holds or is held by another course's {host}{other or '/'}; "
                    "give each course on one host its own path, e.g. /g14 and /g15"
                )
        places[(host, prefix)] = course
    return places


def create_courses_app(courses: Sequence[str | Path], workers: int = 0, cluster: Cluster | None = None) -> Starlette:
    """One server for several course folders, told apart by the host name and path of each ``public_url``.

    Each course is `create_app`'s application on its own folder: its own ``serve.yaml``, database
    (SQLite in its ``.grader-serve/``), uploads, tool key, sessions and grading workers. A course
    whose ``public_url`` has a path (``https://grader.example.edu/g14``) serves every page, link,
    redirect, cookie and LTI address under that path; one without a path needs a host name of its
    own. A request for another host name or path gets 404.

    Parameters
    ----------
    courses : sequence of str or pathlib.Path
        The course folders; each ``serve.yaml`` gives a ``public_url`` (`course_places`).
    workers : int
        Grading worker processes per course.
    cluster : grader.serve.worker.Cluster, optional
        Every course's workers grade on this Dask cluster.

    Raises
    ------
    grader.errors.UsageError
        In one line, when a course has no ``public_url`` or shares its place with another.
    """
    from starlette.routing import Host, Router

    places = course_places([Path(course) for course in courses])
    apps = {place: create_app(course, workers=workers, cluster=cluster) for place, course in places.items()}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:  # each course's workers start and stop with the server
            for sub in apps.values():
                await stack.enter_async_context(sub.router.lifespan_context(sub))
            yield

    hosts: dict[str, list[BaseRoute]] = {}
    for (host, prefix), sub in sorted(apps.items(), key=lambda item: -len(item[0][1])):
        hosts.setdefault(host, []).append(CoursePath(prefix, sub))
    app = Starlette(
        routes=[Host(host, app=Router(routes=paths, redirect_slashes=False)) for host, paths in hosts.items()],
        lifespan=lifespan,
    )
    app.state.courses = {f"{host}{prefix}": sub for (host, prefix), sub in apps.items()}
    return app
