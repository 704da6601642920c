"""``grader gradescope-bundle``: the zip a Gradescope programming assignment's autograder is."""

from __future__ import annotations

from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.integrations.gradescope_bundle import arguments
from grader.integrations.gradescope_bundle import run as write_bundle
from grader.markers import hookimpl


def run(config: Config) -> int:
    """Write the zip and say what it holds."""
    return write_bundle(config, write)


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "gradescope-bundle",
        help="write a Gradescope autograder zip (setup.sh, run_autograder, the grader and the course)",
        description="Write the zip a Gradescope programming assignment's autograder is: setup.sh, run_autograder, "
        "this grader and the course, and the course secret when one is set. Upload it as is.",
        handler=run,
        arguments=arguments,
        uses=("pack",),
    )
