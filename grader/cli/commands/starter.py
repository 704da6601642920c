"""``grader starter``: copy the starter file into a folder; an existing file is never overwritten."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.errors import EXIT_OK, ConfigError, UsageError
from grader.markers import hookimpl
from grader.safetext import display


def run(config: Config) -> int:
    """Copy the starter: the student package's copy, else the specs folder's (in the course repository)."""
    import shutil

    pack = config.pack
    source = pack.starter
    if not source.is_file():
        raise ConfigError(f"{source}: the pack has no starter; install the course's student package (it ships one)")
    target = Path(config.option("starter_dir")) / pack.submission
    if target.is_symlink():  # even a dangling one: copying would create the file it points to, elsewhere
        raise UsageError(f"{target}: a symbolic link; the starter writes only a file of its own (remove the link)")
    if target.exists():
        raise UsageError(f"{target}: exists; the starter never overwrites your file")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    count = len(pack.functions)
    write(
        f"wrote {display(str(target))}: fill in the {NUMBERS.get(count, str(count))} function{'s' if count != 1 else ''}, "
        f"then run 'grader check {display(str(target))}'"
    )
    return EXIT_OK


NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``starter``'s own arguments."""
    parser.add_argument("starter_dir", nargs="?", default=".", metavar="DIR", help="where to put it (default: .)")


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "starter",
        help="copy the starter submission file into a folder (default: here)",
        description="Copy the starter file (shipped in the student package) into DIR; an existing file is never "
        "overwritten.",
        handler=run,
        arguments=arguments,
        uses=("pack",),
        plugin_options=False,
    )
