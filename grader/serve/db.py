"""The server's tables (SQLAlchemy 2 ORM), one engine per database URL.

Every query goes through the ORM with bound parameters. Times are UTC, stored as timezone-aware
datetimes; a student's receipt time is the server's own clock when the upload was stored.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker
from sqlalchemy.types import TypeDecorator

__all__ = [
    "Audit",
    "Base",
    "Invite",
    "LtiLink",
    "LtiState",
    "Manual",
    "Nonce",
    "Push",
    "Regrade",
    "Setting",
    "Submission",
    "User",
    "make_engine",
    "now",
]

ROLES = ("student", "ta", "instructor")
"""The roles a user has; staff are ``ta`` and ``instructor``."""

QUEUE_STATES = ("queued", "running", "done", "error")
"""A submission's grading state."""


def now() -> dt.datetime:
    """The server's clock, UTC (the trusted receipt time)."""
    return dt.datetime.now(dt.UTC)


class UtcDateTime(TypeDecorator[dt.datetime]):
    """A UTC datetime on every database (SQLite keeps no offset: it is put back on read)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("a naive datetime: give the server's UTC time (grader.serve.db.now)")
        return value.astimezone(dt.UTC) if value is not None else None

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


class Base(DeclarativeBase):
    """The tables' base; `Base.metadata` is what the migrations create."""

    type_annotation_map = {dict[str, Any]: JSON, dt.datetime: UtcDateTime()}


class User(Base):
    """A student or a staff member: from the roster (``login``) or an LTI launch (``issuer`` + ``subject``)."""

    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("issuer", "subject"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    login: Mapped[str] = mapped_column(String(200), unique=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str] = mapped_column(String(320), default="")
    role: Mapped[str] = mapped_column(String(20), default="student")
    issuer: Mapped[str | None] = mapped_column(String(500), nullable=True)
    subject: Mapped[str | None] = mapped_column(String(300), nullable=True)
    last_upload: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    created: Mapped[dt.datetime] = mapped_column(default=now)


class Invite(Base):
    """A one-time login link: only the SHA-256 of its token is stored."""

    __tablename__ = "invites"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created: Mapped[dt.datetime] = mapped_column(default=now)
    used: Mapped[dt.datetime | None] = mapped_column(nullable=True)


class Submission(Base):
    """One upload and its grading: ``visible`` is what the student reads now, ``full`` is every check."""

    __tablename__ = "submissions"
    __table_args__ = (UniqueConstraint("user_id", "number", name="uq_submissions_user_id_number"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    filename: Mapped[str] = mapped_column(String(40))
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)
    received: Mapped[dt.datetime] = mapped_column(default=now, index=True)
    state: Mapped[str] = mapped_column(String(10), default="queued", index=True)
    # when a worker took it, renewed every HEARTBEAT_SECONDS while it grades (grader.serve.worker)
    started: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    graded: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    details: Mapped[bool] = mapped_column(Boolean, default=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    visible_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    visible_max: Mapped[float | None] = mapped_column(Float, nullable=True)
    visible: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    full: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    previous: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    regrade_id: Mapped[int | None] = mapped_column(ForeignKey("regrades.id"), nullable=True)
    spec_hash: Mapped[str] = mapped_column(String(64), default="")


class Regrade(Base):
    """A staff regrade of some students' latest submissions (their previous results kept for the diff)."""

    __tablename__ = "regrades"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    by: Mapped[str] = mapped_column(String(200))
    created: Mapped[dt.datetime] = mapped_column(default=now)
    count: Mapped[int] = mapped_column(Integer, default=0)


class Manual(Base):
    """A manual score of a student on an exercise or a check (``G14.02`` or ``G14.02/check``), kept across regrades."""

    __tablename__ = "manual_scores"
    __table_args__ = (UniqueConstraint("user_id", "target"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    target: Mapped[str] = mapped_column(String(200))
    points: Mapped[float] = mapped_column(Float)
    comment: Mapped[str] = mapped_column(Text, default="")
    grader: Mapped[str] = mapped_column(String(200), default="")
    updated: Mapped[dt.datetime] = mapped_column(default=now)


class Setting(Base):
    """Server state that staff change (``released``)."""

    __tablename__ = "settings"
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Audit(Base):
    """One line of the audit log: every staff action and every refused request."""

    __tablename__ = "audit"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[dt.datetime] = mapped_column(default=now, index=True)
    actor: Mapped[str] = mapped_column(String(200))
    address: Mapped[str] = mapped_column(String(100), default="")
    action: Mapped[str] = mapped_column(String(100))
    detail: Mapped[str] = mapped_column(Text, default="")


class Push(Base):
    """A score sent (or to send) to the LMS gradebook through LTI AGS, with its outcome."""

    __tablename__ = "pushes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    reason: Mapped[str] = mapped_column(String(50))
    created: Mapped[dt.datetime] = mapped_column(default=now)
    state: Mapped[str] = mapped_column(String(10), default="pending", index=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    detail: Mapped[str] = mapped_column(Text, default="")
    done: Mapped[dt.datetime | None] = mapped_column(nullable=True)


class LtiLink(Base):
    """Where a user's score goes: the platform and line item of their latest launch (or the line items
    container and resource link, to find or make the line item when the platform couples none)."""

    __tablename__ = "lti_links"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), unique=True)
    issuer: Mapped[str] = mapped_column(String(500))
    client_id: Mapped[str] = mapped_column(String(300))
    lineitem_url: Mapped[str | None] = mapped_column(String(2000), nullable=True)
    subject: Mapped[str] = mapped_column(String(300))
    lineitems_url: Mapped[str | None] = mapped_column(String(2000), nullable=True)
    resource_link_id: Mapped[str] = mapped_column(String(300), default="", server_default="")


class LtiState(Base):
    """An OIDC login in progress: its state, nonce and platform, until the launch uses it."""

    __tablename__ = "lti_states"
    state: Mapped[str] = mapped_column(String(100), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(100))
    issuer: Mapped[str] = mapped_column(String(500))
    client_id: Mapped[str] = mapped_column(String(300))
    created: Mapped[dt.datetime] = mapped_column(default=now)


class Nonce(Base):
    """A nonce an accepted launch used: a second launch with it is a replay."""

    __tablename__ = "lti_nonces"
    value: Mapped[str] = mapped_column(String(200), primary_key=True)
    used: Mapped[dt.datetime] = mapped_column(default=now)


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and foreign keys (workers share the file).

    Parameters
    ----------
    url : str
        ``sqlite:///path`` or ``postgresql+psycopg://user@host/db``.
    """
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def sessions(engine: Engine) -> sessionmaker[Any]:
    """The ORM session factory of ``engine`` (objects stay readable after commit)."""
    return sessionmaker(engine, expire_on_commit=False)
