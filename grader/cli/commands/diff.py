"""``grader diff``: who changed between two results files, by how much, on which checks (a regrade)."""

from __future__ import annotations

import argparse
from typing import Any

from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.errors import EXIT_OK
from grader.markers import hookimpl
from grader.safetext import display


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``diff``'s own arguments."""
    parser.add_argument("old", metavar="OLD.json")
    parser.add_argument("new", metavar="NEW.json")


def run(config: Config) -> int:
    """Print one line per difference."""
    from grader.grading.regrade import diff_results, load_results

    for line in diff_results(load_results(config.option("old")), load_results(config.option("new"))):
        write(display(line))
    return EXIT_OK


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "diff",
        help="compare two results.json: who changed, by how much, on which checks",
        description="List the students whose score or checks differ between two results files (a regrade).",
        handler=run,
        arguments=arguments,
        plugin_options=False,
    )
