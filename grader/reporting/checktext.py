"""How a check that did not pass reads on a terminal: its mark, its message and what follows.

Shared by the terminal summary of ``grader check`` and the failure text of the pytest plugin, so
that both read alike: the message, the details it does not already state (each number once), the
likely mistake and the hint, wrapped to the terminal's width, student text inert
(`grader.safetext.display`).
"""

from __future__ import annotations

import shutil
import textwrap
from typing import Any

from grader.safetext import display

__all__ = ["INDENT", "MARKS", "detail_lines", "failure_lines", "one_line", "width", "wrapped"]

MARKS = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "not_attempted": "TODO"}

INDENT = " " * 10
"""Indent of the lines under a check's mark."""


def width() -> int:
    """Columns to wrap to: the terminal's (``COLUMNS`` when set), between 40 and 100; 100 off a terminal."""
    columns = shutil.get_terminal_size((100, 24)).columns
    return max(40, min(columns, 100))


def wrapped(text: str, first: str = INDENT, rest: str = INDENT + "  ", columns: int | None = None) -> str:
    """``text`` on one paragraph wrapped to ``columns`` (default `width`), student text inert, indented ``first`` then ``rest``."""
    return textwrap.fill(
        " ".join(display(text).split()),
        width=columns or width(),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=True,
        break_on_hyphens=False,
    )


def one_line(text: str, limit: int = 160) -> str:
    """``text`` inert, on one line, cut to ``limit`` characters."""
    text = " ".join(display(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _said(value: str, message: str) -> bool:
    """Whether a detail's value is already in the message (each number is stated once)."""
    value = " ".join(display(value).split())
    return bool(value) and value in " ".join(display(message).split())


def detail_lines(label: str, value: str, message: str = "", columns: int | None = None) -> list[str]:
    """One detail under a check (``call: ...``, ``expected: ...``), or none when the message states it.

    The call is wrapped whole, never cut (``causal=True`` at its end matters); a value is one line,
    cut to the width (``columns``, default `width`).
    """
    columns = columns or width()
    if _said(value, message):
        return []
    if label == "call":
        return wrapped(f"{label}: {value}", columns=columns).split("\n")
    return [f"{INDENT}{display(label)}: {one_line(value, max(20, columns - len(INDENT) - 20))}"]


def failure_lines(c: Any, mistake: Any = None, columns: int | None = None) -> list[str]:
    """What ``check`` prints under a check that did not pass (also pytest's failure text).

    The message, the details it does not already state (each number once;
    the call wrapped whole), the likely mistake and the hint chosen by what
    failed (`grader.reporting.feedback.hint_for`), wrapped to ``columns`` (default: `width`; pytest gives its
    terminal's), student text
    inert. With ``mistake`` (the exercise's `grader.reporting.feedback.ExerciseMistake`,
    said once above its checks) a check it explains gets its message's first
    clause and no likely mistake or hint of its own; otherwise a check names
    at most one likely mistake (`grader.reporting.feedback.check_mistake`).
    """
    from grader.reporting.feedback import check_mistake, headline, hint_for

    columns = columns or width()
    explained = mistake is not None and c.id in mistake.checks
    message = headline(c.message) if explained else c.message
    lines = wrapped(message, columns=columns).split("\n")
    for label, value in c.details:
        lines += detail_lines(label, value, message, columns)
    d = None if mistake is not None else check_mistake(c)
    if d is not None:
        lines += wrapped(
            f'likely mistake: {d.misconception} See the chapter section "{d.section}".', columns=columns
        ).split("\n")
    hint = hint_for(c, mistake)
    if hint:
        lines += wrapped("hint: " + hint, columns=columns).split("\n")
    return lines
