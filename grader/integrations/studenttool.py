"""The student package's ``grader``: its ``--help`` lists the student's commands only; its README.

In the student package (built by ``grader build-student-package``) the course pack holds no
specs and no reference, so ``grade``, ``publish``, ``audit``, ``validate`` and the other
instructor commands can only fail there. `student_help` leaves them out of ``grader --help``
(they still parse, and still say what they need, if typed); in the course repository every
command is listed.
"""

from __future__ import annotations

import argparse
from typing import Any

from grader.packs.student import is_student_install

__all__ = ["STUDENT_COMMANDS", "student_help"]

STUDENT_COMMANDS = ("check", "starter", "init-ci")
"""The commands a student runs, in the order ``grader --help`` lists them."""


def student_help(parser: argparse.ArgumentParser, pack: Any) -> argparse.ArgumentParser:
    """``parser`` with its command listing cut to `STUDENT_COMMANDS` when ``pack`` is a student install.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        ``grader``'s parser, its subcommands added.
    pack : grader.packs.Pack or None

    Returns
    -------
    argparse.ArgumentParser
        The same parser (changed in place).
    """
    if not is_student_install(pack):
        return parser
    for action in parser._subparsers._group_actions if parser._subparsers else ():  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            listed = {a.dest: a for a in action._choices_actions}  # noqa: SLF001
            action._choices_actions = [listed[c] for c in STUDENT_COMMANDS if c in listed]  # noqa: SLF001
    parser.description = (
        f"Check your chapter {pack.chapter} work ({pack.submission}) against the visible checks, offline. "
        f"'grader COMMAND --help' tells more; the grade itself comes from your course."
    )
    return parser
