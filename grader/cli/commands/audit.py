"""``grader audit``: grade the catalogued mutants and correct variants; print the kill matrix."""

from __future__ import annotations

from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.markers import hookimpl


def run(config: Config) -> int:
    """Exit 1 when a mutant survives an exercise it is tagged for, or a correct variant loses a point."""
    from grader.grading.audit import audit

    return audit(config, write)


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "audit",
        help="grade the catalogued mutants and correct variants; print the kill matrix",
        description="Grade every mutant and correct variant of the catalogue (--mutants). Fails if a mutant "
        "survives an exercise it is tagged for, or a correct variant loses a point.",
        handler=run,
        uses=("pack", "specs", "mutants"),
    )
