"""``grader check``: a student runs the visible checks on their own file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from grader.cli.common import finish
from grader.config.commands import Commands
from grader.config.core import Config
from grader.fileio import remove_stale_scratch
from grader.grading import session
from grader.markers import hookimpl
from grader.safetext import display


class _OnePath(argparse.Action):
    """Keeps the one FILE (or the default, this folder) as a list, as ``grade`` keeps its paths."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, [values])


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``check``'s own arguments."""
    file = pack.submission if pack is not None else "submission file"
    notebook = pack.notebook if pack is not None else "notebook"
    parser.add_argument(
        "paths",
        nargs="?",
        default=".",
        action=_OnePath,
        metavar="FILE",
        help=f"your {file}, {notebook}, or the folder holding it (default: this folder)",
    )
    parser.add_argument(
        "--public",
        metavar="FILE",
        help="public checks made by 'grader publish' (default: the specs folder if present, "
        "else the checks shipped with the grader)",
    )


def run(config: Config) -> int:
    """Run the visible checks; exit 1 unless every one passed."""
    remove_stale_scratch()
    config.options.out = None
    pack = config.pack
    for path in config.options.paths:  # a file of another course: every function would read as missing
        if Path(path).is_file() and Path(path).name not in (pack.submission, pack.notebook):
            print(
                f"grader: warning: {display(path)}: the course {pack.id} ({pack.chapter}) grades "
                f"{pack.submission}; pass --pack DIR if {display(Path(path).name)} is another course's",
                file=sys.stderr,
            )
    report = session.grade(config, config.options.paths, visible_only=True)
    return finish(config, report, checks_decide=True)


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "check",
        help="run the visible checks on your own submission file",
        description="Run the visible checks on one submission file and print a summary.",
        handler=run,
        arguments=arguments,
        uses=("pack", "specs", "mutants"),
    )
