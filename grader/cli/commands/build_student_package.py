"""``grader build-student-package``: the wheel and sdist a course gives its students."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from grader.cli.commands.publish import public_checks
from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.errors import EXIT_OK
from grader.fileio import check_out_dir
from grader.markers import hookimpl
from grader.packs import mutants_dir, reference_file, specs_dir
from grader.safetext import display


def run(config: Config) -> int:
    from grader.packs.public import dumps
    from grader.packs.student import build_student_package, member_names

    check_out_dir(Path(config.option("package_out")), "--out")  # before the checks are published and built
    bundle = public_checks(config)
    mutants, _ = mutants_dir(config)
    artifacts = build_student_package(
        Path(config.option("package_out")),
        dumps(bundle),
        config.pack,
        specs_dir(config),
        reference_file(config),
        mutants or config.pack.mutants,
    )
    visible = sum(len(e["checks"]) for e in bundle["exercises"])
    for artifact in artifacts:
        write(
            f"{display(str(artifact))}: {len(member_names(artifact))} files; inspected: no reference, spec, "
            "hidden check or mutant code"
        )
    write(f"the public checks: {visible} visible checks; {bundle['hidden_count']} hidden checks left out")
    return EXIT_OK


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``build-student-package``'s own arguments."""
    parser.add_argument(
        "--out",
        dest="package_out",
        default="dist",
        metavar="DIR",
        help="folder for the .whl and .tar.gz (default: dist)",
    )


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "build-student-package",
        help="build the wheel and sdist a course gives its students (public checks, starter, diagnosis data)",
        description="Publish the visible checks afresh, then build the student wheel and sdist: the grader, the "
        "public checks with each catalogued mistake's results on them, and the starter; never the reference, a "
        "spec, a hidden input or expected value, or mutant code. Every artifact is opened and inspected.",
        handler=run,
        arguments=arguments,
        uses=("pack", "specs", "mutants"),
    )
