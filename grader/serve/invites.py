"""The roster's one-time login links, for a course without LTI (``grader serve invite roster.csv``)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from grader.errors import UsageError
from grader.serve.db import ROLES, Invite, User
from grader.serve.security import hash_token
from grader.serve.state import ServerState

__all__ = ["InviteLink", "RosterEntry", "invite", "read_invite_roster"]


@dataclass(frozen=True)
class RosterEntry:
    """A roster row: the login (student id), name, email and role."""

    login: str
    name: str = ""
    email: str = ""
    role: str = "student"


@dataclass(frozen=True)
class InviteLink:
    """A user's new one-time login link."""

    login: str
    role: str
    url: str


def read_invite_roster(path: str) -> list[RosterEntry]:
    """The rows of a roster CSV: an id column (`grader.intake.roster.ROSTER_COLUMNS`), optional ``name``, ``email``, ``role``.

    Raises
    ------
    grader.errors.UsageError
        One line naming the file, the line and the fix.
    """
    from grader.intake.roster import ROSTER_COLUMNS
    from grader.readers.tables import read_table

    table = read_table(path, "invite", UsageError)
    column = table.column(*ROSTER_COLUMNS)
    if column is None:
        raise UsageError(
            f"{path}: line {table.header_line}: no student id column; name one of {', '.join(ROSTER_COLUMNS)}"
        )
    name, email, role = (table.column(n) for n in ("name", "email", "role"))
    entries: list[RosterEntry] = []
    seen: set[str] = set()

    def cell(row: list[str], index: int | None) -> str:
        return row[index].strip() if index is not None and index < len(row) else ""

    for line, row in table.rows:
        login = cell(row, column)
        if not login:
            continue
        if login in seen:
            raise UsageError(f"{path}: line {line}: {header(table, column)} {login!r} is listed twice; keep one row")
        seen.add(login)
        given = cell(row, role).lower() or "student"
        if given not in ROLES:
            raise UsageError(f"{path}: line {line}: role {given!r}; give one of {', '.join(ROLES)}")
        entries.append(RosterEntry(login, cell(row, name), cell(row, email), given))
    if not entries:
        raise UsageError(f"{path}: no rows with an id; give one row per student")
    return entries


def header(table: Any, column: int) -> str:
    """The name of ``column`` in ``table``'s header."""
    return str(table.header[column])


def invite(state: ServerState, entries: list[RosterEntry], base_url: str) -> list[InviteLink]:
    """Create (or update) each roster user and a new one-time link for each; old unused links stop working.

    Parameters
    ----------
    state : ServerState
    entries : list of RosterEntry
    base_url : str
        How users reach the server (``serve.yaml``'s ``public_url``), e.g. ``https://grader.example.edu``.
    """
    links = []
    with state.db() as db:
        for entry in entries:
            user = db.execute(select(User).where(User.login == entry.login)).scalar_one_or_none()
            if user is None:
                user = User(login=entry.login, name=entry.name, email=entry.email, role=entry.role)
                db.add(user)
                db.flush()
            else:
                user.name = entry.name or user.name
                user.email = entry.email or user.email
                user.role = entry.role
            for old in db.execute(select(Invite).where(Invite.user_id == user.id, Invite.used.is_(None))).scalars():
                db.delete(old)
            token = secrets.token_urlsafe(24)
            db.add(Invite(token_hash=hash_token(token), user_id=user.id))
            links.append(InviteLink(entry.login, entry.role, f"{base_url.rstrip('/')}/login/{token}"))
        db.commit()
    return links
