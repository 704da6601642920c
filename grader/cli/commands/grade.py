"""``grader grade``: grade one submission, a student folder or a class, and write the reports."""

from __future__ import annotations

import argparse
from typing import Any

from grader.cli.common import finish
from grader.config.commands import Commands
from grader.config.core import Config
from grader.fileio import output_file, remove_stale_scratch
from grader.grading import session
from grader.markers import hookimpl


def shard(text: str) -> object:
    """``--shard K/N`` or ``auto/N`` as a `grader.grading.slices.ShardSpec`, read with the command line (a wrong
    one is refused before anything runs)."""
    from grader.grading.slices import parse_shard

    return parse_shard(text)


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``grade``'s own arguments."""
    file = pack.submission if pack is not None else "submission file"
    parser.add_argument("paths", nargs="+", metavar="PATH", help=f"{file}, a student folder, or a folder of them")
    parser.add_argument(
        "--out", default="reports", metavar="DIR", help="folder for the HTML and JSON reports (default: reports)"
    )
    parser.add_argument(
        "--json", metavar="FILE", type=output_file, help="write the JSON results here (default: DIR/results.json)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="ID",
        help="grade only these students again; the others' results come from the gradebook (left out when it has none)",
    )
    parser.add_argument(
        "--shard",
        metavar="K/N",
        type=shard,
        help="grade only the K-th of N slices of the class (K from 1; auto/N: K from "
        "JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID or GRADER_SHARD_INDEX) and write DIR/shard/ "
        "for 'grader merge'",
    )


def run(config: Config) -> int:
    """Grade every submission behind the paths; exit 0 once every file is written."""
    remove_stale_scratch()  # what graders killed with kill -9 left in the temporary folder
    return finish(config, session.grade(config, config.options.paths))


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "grade",
        help="grade submissions and write reports",
        description="Grade one submission file, a student folder, or a folder of student folders.",
        handler=run,
        arguments=arguments,
        uses=("pack", "specs", "mutants", "grading"),
    )
