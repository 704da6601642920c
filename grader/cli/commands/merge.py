"""``grader merge``: the ``--out`` folders of every shard of a class, combined into one run's files."""

from __future__ import annotations

import argparse
from typing import Any

from grader.cli.common import finish
from grader.config.commands import Commands
from grader.config.core import Config
from grader.config.parser import build_parser
from grader.fileio import output_file
from grader.markers import hookimpl


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``merge``'s own arguments."""
    parser.add_argument("shard_dirs", nargs="+", metavar="SHARD_DIR", help="the --out folder of each shard")
    parser.add_argument(
        "--out", default="reports", metavar="DIR", help="folder for the merged reports (default: reports)"
    )
    parser.add_argument(
        "--json", metavar="FILE", type=output_file, help="write the JSON results here (default: DIR/results.json)"
    )


def as_grade(options: argparse.Namespace, pm: Any) -> argparse.Namespace:
    """An unsharded ``grade`` run's options, fed from the shards' records."""
    from grader.shards.merge import merge_options

    options = merge_options(options, build_parser(pm))
    options.command = "grade"
    return options


def run(config: Config) -> int:
    """Merge the shards; exit 0 once every file is written."""
    from grader.shards.merge import merge

    return finish(config, merge(config))


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "merge",
        help="merge the folders of 'grade --shard K/N' runs into one run's files",
        description="Combine the --out folders of every shard of a class into exactly the files one unsharded "
        "'grader grade' writes. Refuses shards made with other specs, reference, grader, secret or settings, and "
        "names shards missing or given twice.",
        handler=run,
        arguments=arguments,
        uses=("pack", "specs", "mutants"),
        prepare=as_grade,
    )
