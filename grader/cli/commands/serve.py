"""``grader serve``: the web server where students submit and read their feedback; ``serve invite`` prints login links."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from grader.config.commands import Commands
from grader.config.core import Config
from grader.errors import EXIT_OK, UsageError
from grader.markers import hookimpl

LIMIT_CONCURRENCY = 500
"""Connections and requests the server takes at once (uvicorn's ``limit_concurrency``); past it, 503.

Below a process's usual 1024 open files: a flood of connections gets a quick 503 instead of
failing every ``accept`` (and the database and the uploads, which need files too)."""

KEEP_ALIVE_SECONDS = 5
"""How long an idle connection stays open between two requests (uvicorn's ``timeout_keep_alive``)."""


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``serve``'s own arguments."""
    parser.add_argument(
        "action",
        nargs="*",
        metavar="[invite ROSTER.csv]",
        help="nothing to run the server; 'invite ROSTER.csv' to print each user's one-time login link",
    )
    parser.add_argument(
        "--course",
        action="append",
        default=None,
        metavar="DIR",
        help="the course folder (default: the --pack found); repeat it to serve several courses, each on the "
        "host name of its serve.yaml's public_url",
    )
    parser.add_argument(
        "--db", default=None, metavar="URL", help="database URL (default: SQLite in DIR/.grader-serve/serve.db)"
    )
    parser.add_argument(
        "--settings", default=None, metavar="FILE", help="the server's settings (default: DIR/serve.yaml, if present)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--workers", type=int, default=2, metavar="N", help="grading worker processes (default 2)")
    parser.add_argument(
        "--limit-concurrency",
        type=int,
        default=LIMIT_CONCURRENCY,
        metavar="N",
        help=f"connections and requests at once; past it, 503 (default {LIMIT_CONCURRENCY})",
    )
    parser.add_argument(
        "--keep-alive",
        type=int,
        default=KEEP_ALIVE_SECONDS,
        metavar="SECONDS",
        help=f"how long an idle connection is kept open between requests (default {KEEP_ALIVE_SECONDS})",
    )
    parser.add_argument(
        "--dask",
        default=None,
        metavar="ADDRESS",
        help="grade on this Dask scheduler (tcp://host:8786) instead of in the workers' own jobs; the workers "
        "queue, send and store (needs the 'dask' extra; the course folder at the same path on every Dask worker)",
    )
    for name, what in (("ca", "the CA certificate"), ("cert", "the client's certificate"), ("key", "its private key")):
        parser.add_argument(
            f"--dask-tls-{name}", default=None, metavar="FILE", help=f"for a tls:// scheduler: {what} (PEM)"
        )


def _courses(config: Config) -> list[Path]:
    courses = config.option("course")
    if courses:
        return [Path(course) for course in courses]
    pack = config.pack
    if pack is None or not (Path(pack.root) / "course.yaml").is_file():
        raise UsageError("serve: no course folder found; give --course DIR (the folder holding course.yaml)")
    return [Path(pack.root)]


def _needs_extra() -> None:
    """A one-line refusal when the ``serve`` extra is not installed."""
    import importlib.util

    missing = [
        m
        for m in ("starlette", "uvicorn", "sqlalchemy", "alembic", "multipart", "jwt")
        if not importlib.util.find_spec(m)
    ]
    if missing:
        raise UsageError(
            f"serve: {', '.join(missing)} not installed; install the server's extra: pip install 'grader-harness[serve]'"
        )


def _check_address(host: str, port: int) -> None:
    """A one-line refusal when the server could not listen on ``host:port`` (before anything is made)."""
    import errno
    import socket

    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, OverflowError) as exc:
        raise UsageError(
            f"serve: --host {host} --port {port}: {exc}; give an address of this machine, e.g. 127.0.0.1"
        ) from None
    with socket.socket(family, kind) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(
                    f"serve: --port {port}: {host}:{port} is in use; give another --port or stop the server using it"
                ) from None
            raise UsageError(
                f"serve: --host {host} --port {port}: cannot listen there ({exc.strerror}); "
                "give an address of this machine, e.g. 127.0.0.1, and a free port"
            ) from None


def _cluster(config: Config) -> Any:
    """The ``--dask`` cluster, reached once now (a one-line refusal when it cannot be), or None."""
    address = config.option("dask")
    if address is None:
        return None
    import importlib.util

    from grader.serve.worker import Cluster

    if not importlib.util.find_spec("distributed"):
        raise UsageError(
            f"serve: --dask {address}: the Dask client is not installed; pip install 'grader-harness[dask]'"
        )
    tls = tuple((n, config.option(f"dask_tls_{n}")) for n in ("ca", "cert", "key") if config.option(f"dask_tls_{n}"))
    for name, path in tls:
        if not Path(path).is_file():
            raise UsageError(f"serve: --dask-tls-{name} {path}: no such file; give the PEM file's path")
    from grader.config.addresses import check_dask_address, probe_dask

    try:
        check_dask_address(address, certificates=bool(tls))
    except UsageError as exc:
        raise UsageError(f"serve: {exc}") from None
    prefix = f"--dask {address}: "
    try:
        probe_dask(address)
        if not address.startswith("tcp://") and "://" in address:  # tls:// and others: the client's own connection
            _connect_once(address, dict(tls))
    except UsageError as exc:
        what = str(exc).removeprefix(prefix).rsplit("; ", 1)[0]
        raise UsageError(f"serve: --dask {address}: {what}; start the scheduler or drop --dask") from None
    return Cluster(address, tls)


def _connect_once(address: str, files: dict[str, str]) -> None:
    """Connect a Dask client to ``address`` and close it (`UsageError` in one line when it cannot)."""
    from distributed import Client

    from grader.builtin.dask_cluster import security

    try:
        client = Client(address, timeout=20, set_as_default=False, security=security(files) if files else None)  # type: ignore[no-untyped-call]
        client.close()  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(f"--dask {address}: cannot reach the Dask scheduler ({type(exc).__name__}: {exc})") from None


def run(config: Config) -> int:
    """Run the server, or print invite links."""
    _needs_extra()
    from grader.serve.state import open_state

    action = list(config.option("action") or [])
    courses = _courses(config)
    course = courses[0]
    if len(courses) > 1 and (action or config.option("db") or config.option("settings")):
        raise UsageError(
            "serve: with several --course, give no --db, --settings or invite (each course uses its own); "
            "give one --course for those"
        )
    if action:
        if action[0] != "invite" or len(action) != 2:
            raise UsageError("serve: give no argument to run the server, or 'invite ROSTER.csv'")
        from grader.serve.invites import invite, read_invite_roster

        entries = read_invite_roster(action[1])
        settings = config.option("settings")
        state = open_state(course, config.option("db"), settings=Path(settings) if settings else None)
        base = state.settings.public_url or f"http://{config.option('host')}:{config.option('port')}"
        for link in invite(state, entries, base):
            print(f"{link.login},{link.role},{link.url}")
        days = state.settings.invite_days
        print(
            f"serve: each link signs its user in once, within {days} days (serve.yaml: invites.days)", file=sys.stderr
        )
        return EXIT_OK
    if not 0 <= int(config.option("workers")) <= 64:
        raise UsageError("serve: --workers: give 0 to 64 grading processes")
    if not 1 <= int(config.option("limit_concurrency")) <= 100_000:
        raise UsageError("serve: --limit-concurrency: give 1 to 100000 connections")
    if not 1 <= int(config.option("keep_alive")) <= 3600:
        raise UsageError("serve: --keep-alive: give whole seconds, 1 to 3600")
    _check_address(config.option("host"), int(config.option("port")))
    cluster = _cluster(config)
    import uvicorn

    from grader.serve.app import create_app, create_courses_app

    if len(courses) > 1:
        app = create_courses_app(courses, workers=int(config.option("workers")), cluster=cluster)
    else:
        app = create_app(
            course,
            config.option("db"),
            workers=int(config.option("workers")),
            settings=config.option("settings"),
            cluster=cluster,
        )
    print(
        f"grader: serving {', '.join(map(str, courses))} on http://{config.option('host')}:{config.option('port')}",
        file=sys.stderr,
    )
    _hang_up_as_sigterm()
    uvicorn.run(
        app,
        host=config.option("host"),
        port=int(config.option("port")),
        log_level="info",
        limit_concurrency=int(config.option("limit_concurrency")),
        timeout_keep_alive=int(config.option("keep_alive")),
    )
    return EXIT_OK


def _hang_up_as_sigterm() -> None:
    """A hang-up (the terminal the server runs in closed) stops the server as SIGTERM does: gracefully.

    Uvicorn stops gracefully on SIGINT and SIGTERM only (its workers stopped, the uploads under way
    answered); ``grader``'s own stop on SIGHUP (`grader.errors.Interrupted`) would end its event loop
    mid-request instead. Under ``nohup`` (SIGHUP ignored) nothing changes.
    """
    if not hasattr(signal, "SIGHUP") or signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        return
    signal.signal(signal.SIGHUP, lambda *_: os.kill(os.getpid(), signal.SIGTERM))


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "serve",
        help="run the web server where students submit and read their feedback (or: serve invite ROSTER.csv)",
        description="Serve a course: students upload their file and read the visible feedback in seconds; "
        "the staff see the class, release results and enter manual scores. 'invite ROSTER.csv' prints one-time "
        "login links for a course without LTI.",
        handler=run,
        arguments=arguments,
        uses=("pack",),
        plugin_options=False,
    )
