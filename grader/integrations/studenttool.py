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

__all__ = ["STUDENT_COMMANDS", "is_student_install", "student_guide", "student_help"]

STUDENT_COMMANDS = ("check", "starter", "init-ci")
"""The commands a student runs, in the order ``grader --help`` lists them."""


def is_student_install(pack: Any) -> bool:
    """Whether ``pack`` is a student package's pack: it ships neither its specs nor its reference.

    Parameters
    ----------
    pack : grader.packs.Pack or None
        The installed (or ``--pack``) course pack.
    """
    if pack is None:
        return False
    return not pack.specs.is_dir() and not pack.reference.is_file()


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


def student_guide(pack: Any) -> str:
    """The student package's README: the student guide, written from the pack's manifest.

    What to install, how to start (``grader starter``), ``grader check``, pytest, notebooks, CI,
    and what a submission may import (`grader.child.worker.LISTED`, the pack's ``imports``): the list the
    import error refers to. Nothing in it comes from a file of the pack's folder (an instructor's
    notes there may tell of hidden checks).

    Parameters
    ----------
    pack : grader.packs.Pack

    Returns
    -------
    str
        Markdown.
    """
    from grader.child.worker import LISTED

    names = ", ".join(f"`{f}`" for f in pack.functions)
    extra = sorted({*pack.imports, *(m for m in LISTED if m.split(".")[0] in pack.imports)})
    stdlib = " ".join(m for m in LISTED if m.split(".")[0] not in {"numpy", *pack.imports})
    return f"""# {pack.chapter} grader for students

{pack.title}: the visible checks of chapter {pack.chapter}, for your own `{pack.submission}`.

## Install

Your course gives you this package (a wheel file, a URL or an index name), e.g.

```sh
python -m pip install {pack.distribution}-*.whl     # the file, URL or name your course gives
```

It brings the `grader` command, pytest, and the public part of the course pack `{pack.id}`: the visible
checks (with their expected values), the data that names likely mistakes, and the starter. It holds
nothing hidden: no reference solution, no hidden check.

## Start and check

```sh
grader starter                  # copies the starter {pack.submission} here (never overwrites one)
grader check {pack.submission}       # or {pack.notebook}, or the folder holding it
```

Fill in the functions ({names}). `grader check` runs the visible checks only, offline: per exercise
its points; under an exercise that does not pass, its likely mistake (once), then each failing
check with the call, the expected and the returned values. A function that still raises
`NotImplementedError` is "not attempted". The grade also counts hidden checks, run when your course
grades: passing every visible check is not full marks. `grader check --help` lists its options.

## What the checks ask

Compute in float64: Python floats, or numpy arrays of numpy's default float64. A check allows only
the rounding error correct float64 code can make on its inputs (e.g. a row of m weights sums to 1
within about m x 2.2e-16), so float32 or float16 arithmetic fails it, and `grader check` names that
mistake when it is the cause. Leave the lists you are given unchanged (build new ones): checks
call your functions with the same lists again.

## pytest

Plain `pytest` in the folder holding `{pack.submission}` (or `{pack.notebook}`) collects one test per
visible check, named `{pack.submission}::EXERCISE::CHECK`; `-k EXERCISE` runs one exercise and
`-p no:grader` turns it off.

## Notebooks

`{pack.notebook}` works wherever `{pack.submission}` does. It is never run in a kernel: its code cells
are joined in order, IPython lines (`%magic`, `!shell`, `%%cell` magics) are left out with a note,
and every message names the cell and the line in it. A folder holding both is graded from
`{pack.submission}`.

## CI

`grader init-ci github|gitlab|classroom50 --package SPEC` writes the files a template repository needs
(`SPEC`: what CI installs with pip, the wheel your course gives). CI runs the visible checks only and
never gives the grade.

## What your file may import

{", ".join(f"`{m}`" for m in extra) or "nothing beyond the standard library"}, these modules of the
standard library: `{stdlib}`, and what Python has imported already (`os`, `sys`). Anything else
fails with `No module named '...'`, in `grader check` exactly as when your course grades the file.
"""
