"""``grader similarity``: grade the class and flag pairs of submissions that share code or wrong values."""

from __future__ import annotations

import argparse
from typing import Any

from grader.cli.commands.grade import run
from grader.config.commands import Commands
from grader.fileio import output_file
from grader.markers import hookimpl


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``similarity``'s own arguments."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a folder of student folders, or a zip export")
    parser.add_argument("--out", default="reports", metavar="DIR", help="folder for the reports (default: reports)")
    parser.add_argument("--json", metavar="FILE", type=output_file, help="write the JSON results here")


def as_grade(options: argparse.Namespace, pm: Any) -> argparse.Namespace:
    """``similarity`` is ``grade --similarity`` under its own name."""
    options.command, options.similarity = "grade", True
    return options


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "similarity",
        help="grade and write DIR/similarity.html: copied code, identical wrong values",
        description="Grade the class (like 'grade --similarity') and flag pairs of submissions: code that shares "
        "most of its tokens (copydetect, starter as boilerplate) and identical wrong values on hidden checks.",
        handler=run,
        arguments=arguments,
        uses=("pack", "specs", "mutants", "grading"),
        prepare=as_grade,
    )
