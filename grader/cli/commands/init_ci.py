"""``grader init-ci``: the CI files of a student template repository (visible checks only)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.errors import EXIT_OK
from grader.fileio import check_out_dir
from grader.markers import hookimpl
from grader.safetext import display


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``init-ci``'s own arguments."""
    parser.add_argument("target", choices=("github", "gitlab", "classroom50"), help="the CI to write files for")
    parser.add_argument(
        "--dir",
        dest="ci_dir",
        default=".",
        metavar="DIR",
        help="the repository to write into (default: the current folder)",
    )
    parser.add_argument(
        "--package",
        default=None,
        metavar="SPEC",
        help="required: what CI installs with pip, "
        "the course's student wheel as a path in the repository (dist/NAME.whl), an https:// URL, "
        "or the name the course publishes it under on its index",
    )
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")


def run(config: Config) -> int:
    """Write the files and say what they do."""
    from grader.integrations.ci import NOTE, init_ci

    check_out_dir(Path(config.option("ci_dir")), "--dir")  # before anything is written
    for path in init_ci(
        config.option("target"),
        Path(config.option("ci_dir")),
        config.option("package"),
        bool(config.option("force")),
        config.pack,
    ):
        write(f"wrote {display(str(path))}")
    write(NOTE)
    return EXIT_OK


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "init-ci",
        help="write CI files for a student repository (github, gitlab or classroom50)",
        description="Write the CI files of a student template repository. CI runs the visible checks only "
        "(grader check); the grade comes from 'grader grade'.",
        handler=run,
        arguments=arguments,
        uses=("pack",),
        plugin_options=False,
    )
