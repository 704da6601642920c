"""The class roster: the student ids a batch should hold, read from a CSV file (``--roster``).

`read_roster` reads the ids (the first column named in `ROSTER_COLUMNS`); `apply_roster` adds a
"no submission" entry for each id nobody sent and warns about ids not on the roster.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from grader.errors import UsageError
from grader.models import Submission
from grader.safetext import display

__all__ = ["ROSTER_COLUMNS", "apply_roster", "read_roster"]


ROSTER_COLUMNS = ("id", "student", "student_id", "username", "login", "sis_user_id")
"""Column names a roster's student ids may stand under (case-insensitive)."""


def read_roster(path: str, ignore_case: bool = False) -> list[str]:
    """Student ids of a roster CSV: the column named in `ROSTER_COLUMNS` (first match).

    Parameters
    ----------
    path : str
        The CSV file.
    ignore_case : bool
        Whether ids are compared without regard to case (``--roster-ignore-case``);
        then ``Alice`` and ``alice`` on one roster are a duplicate too.

    Raises
    ------
    grader.errors.UsageError
        If the file cannot be read, holds no ids, or lists an id twice.
    """
    from grader.readers.tables import delimiter_name, read_table

    table = read_table(path, "--roster", UsageError)
    if not table.header:
        raise UsageError(f"--roster {path}: the file holds no student ids; give a CSV file with a header row")
    header = table.header
    column = table.column(*ROSTER_COLUMNS)
    if column is None:
        found = ", ".join(repr(c) for c in header[:6])
        raise UsageError(
            f"--roster {path}: line {table.header_line}: no student id column (found {found}, "
            f"{delimiter_name(table.delimiter)}-separated); the first row must name the columns, "
            f"one of them {', '.join(repr(c) for c in ROSTER_COLUMNS)}"
        )
    rows = [(table.header_line, header), *table.rows]
    empty = [line for line, row in table.rows if len(row) <= column or not row[column].strip()]
    if empty:
        shown = ", ".join(str(n) for n in empty[:10]) + (" ..." if len(empty) > 10 else "")
        print(
            f"grader: warning: --roster {display(path)}: {len(empty)} row(s) with an empty "
            f"{header[column]!r} are left out (line {shown}); give each student's id",
            file=sys.stderr,
        )
    ids: list[str] = []
    first: dict[str, tuple[int, str]] = {}
    for line, row in rows[1:]:
        if len(row) <= column or not row[column].strip():
            continue
        sid = row[column].strip()
        key = sid.casefold() if ignore_case else sid
        if key in first:
            where, other = first[key]
            same = "" if other == sid else f" (as {display(repr(other))} on line {where}: --roster-ignore-case is on)"
            raise UsageError(
                f"--roster {path}: the id {display(repr(sid))} is listed twice, on lines {where} and "
                f"{line}{same}; list each student once"
            )
        first[key] = (line, sid)
        ids.append(sid)
    if not ids:
        raise UsageError(f"--roster {path}: the file holds no student ids")
    return ids


def apply_roster(found: list[Submission], roster: list[str], ignore_case: bool = False) -> list[Submission]:
    """Add a "no submission" entry for each roster id without one; warn about ids not on it.

    With ``ignore_case`` an id matches a roster id of another case
    (``Alice``, ``alice``); without it, an id not on the roster whose case
    alone differs from a roster id is named with a hint.
    """
    fold: Callable[[str], str] = str.casefold if ignore_case else str
    have = {fold(s.id) for s in found}
    on_roster = {fold(sid) for sid in roster}
    missing = [sid for sid in roster if fold(sid) not in have]
    unknown = sorted({s.id for s in found if fold(s.id) not in on_roster})
    if unknown:
        by_fold = {sid.casefold(): sid for sid in roster}
        near = [f"{u} (the roster has {by_fold[u.casefold()]})" for u in unknown if u.casefold() in by_fold]
        hint = (
            f"; ids that differ only in case: {', '.join(near)}: pass --roster-ignore-case to match them"
            if near
            else ""
        )
        print(f"grader: warning: not on the roster: {display(', '.join(unknown) + hint)}", file=sys.stderr)
    if missing:
        print(
            f"grader: warning: {len(missing)} student(s) on the roster sent nothing: {display(', '.join(missing))}",
            file=sys.stderr,
        )
    return found + [Submission(sid, "", None, "", "no submission from this student") for sid in missing]
