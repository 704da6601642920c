"""What every part of the server shares: the course, its settings, the database, the server's own files."""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from grader.errors import UsageError
from grader.packs import Pack, load_pack
from grader.serve.db import Setting, make_engine, sessions
from grader.serve.settings import ServeSettings, load_settings
from grader.term import Policy, load_policy

__all__ = ["ServerState", "default_db_url", "open_database", "open_state", "private_file"]


@dataclass
class ServerState:
    """The course, its settings, the database and the server's folder."""

    pack: Pack
    settings: ServeSettings
    engine: Engine
    sessions: Any
    policy: Policy | None

    @property
    def uploads(self) -> Path:
        """Where uploads are kept (outside any served folder)."""
        return self.settings.state / "uploads"

    def db(self) -> Session:
        """A new ORM session (use as a context manager)."""
        session: Session = self.sessions()
        return session

    def flag(self, db: Session, key: str) -> bool:
        """A yes/no server setting (``released``)."""
        row = db.execute(select(Setting).where(Setting.key == key)).scalar_one_or_none()
        return row is not None and row.value == "yes"

    def set_flag(self, db: Session, key: str, value: bool) -> None:
        """Set a yes/no server setting (the caller commits)."""
        row = db.get(Setting, key)
        if row is None:
            db.add(Setting(key=key, value="yes" if value else "no"))
        else:
            row.value = "yes" if value else "no"


def default_db_url(state: Path) -> str:
    """The SQLite database in the server's folder."""
    return f"sqlite:///{state / 'serve.db'}"


def private_file(path: Path, make: Any) -> bytes:
    """The bytes of a secret file in the server's folder, made by ``make()`` (mode 0600) the first time."""
    if not path.is_file():
        data: bytes = make()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    return path.read_bytes()


def session_secret(state: Path) -> str:
    """The key that signs session cookies, made on first start and kept in the server's folder."""
    return private_file(state / "session-secret", lambda: secrets.token_hex(32).encode()).decode().strip()


def open_state(
    course: Path,
    db_url: str | None = None,
    state_dir: Path | None = None,
    migrate: bool = True,
    settings: ServeSettings | Path | None = None,
) -> ServerState:
    """Open the course's server: read its settings, make its folder, migrate its database.

    Parameters
    ----------
    course : pathlib.Path
        The course folder (holding ``course.yaml``).
    db_url : str, optional
        SQLAlchemy URL (default: SQLite in the server's folder).
    state_dir : pathlib.Path, optional
        The server's folder (default ``course/.grader-serve``).
    migrate : bool
        Run the migrations (the server does on start; workers need not).
    settings : ServeSettings or pathlib.Path, optional
        Settings, or the settings file to read, instead of the course's ``serve.yaml``.

    Raises
    ------
    grader.errors.ConfigError
        A bad ``course.yaml``, ``serve.yaml`` or policy, in one line.
    """
    course = course.resolve()
    pack = load_pack(course)
    if not isinstance(settings, ServeSettings):
        settings = load_settings(course, state_dir, settings)
    policy = load_policy(str(settings.policy)) if settings.policy is not None else None
    made = not settings.state.exists()
    try:
        settings.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        ignore = settings.state / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# the server's database, uploads and keys: never committed\n*\n")
        engine = open_database(db_url or default_db_url(settings.state), migrate)
    except BaseException:
        if made:  # nothing left behind by a start that failed
            shutil.rmtree(settings.state, ignore_errors=True)
        raise
    return ServerState(pack=pack, settings=settings, engine=engine, sessions=sessions(engine), policy=policy)


DB_EXAMPLE = "give sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
"""The fix a bad ``--db`` names."""


def open_database(url: str, migrate: bool = True) -> Engine:
    """The engine of ``url``, connected (and migrated to the newest schema when ``migrate``).

    Raises
    ------
    grader.errors.UsageError
        In one line naming ``--db`` (its password hidden) and the fix: a URL that does not parse, a
        driver that is not installed, a database that does not answer.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        raise UsageError(f"--db {url!r}: not a database URL; {DB_EXAMPLE}") from None
    try:
        engine = make_engine(url)
    except NoSuchModuleError:
        driver = make_url(url).drivername
        raise UsageError(f"--db {shown!r}: no database driver {driver!r} installed; {DB_EXAMPLE}") from None
    except (ArgumentError, ImportError) as exc:
        raise UsageError(f"--db {shown!r}: {str(exc).splitlines()[0][:200]}; {DB_EXAMPLE}") from None
    try:
        if migrate:
            from grader.serve.migrate import upgrade

            upgrade(engine)
        else:
            with engine.connect():
                pass
    except OperationalError as exc:
        engine.dispose()
        reason = str(exc.orig or exc).strip().splitlines()[0][:200]
        raise UsageError(f"--db {shown!r}: cannot connect ({reason}); {DB_EXAMPLE}") from None
    return engine
