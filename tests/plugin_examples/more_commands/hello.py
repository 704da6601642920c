"""``grader hello NAME``: a subcommand that is one module and nothing else."""

from __future__ import annotations

import argparse
from typing import Any

from grader import hookimpl


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    parser.add_argument("name")


def run(config: Any) -> int:
    print(f"hello {config.option('name')}, from {config.pack.chapter}")
    return 0


@hookimpl
def grader_add_commands(commands: Any) -> None:
    commands.add("hello", help="say hello", handler=run, arguments=arguments, uses=("pack",))
