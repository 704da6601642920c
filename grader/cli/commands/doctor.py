"""``grader doctor``: which sandbox layers are active on this machine."""

from __future__ import annotations

from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.errors import ConfigError
from grader.markers import hookimpl


def run(config: Config) -> int:
    """Ask the sandbox plugin (``grader_doctor``); exit 1 when a layer is missing."""
    code = config.hooks.doctor(write=write, config=config)
    if code is None:
        raise ConfigError("no plugin can say which sandbox layers are active (grader_doctor)")
    return code


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "doctor",
        help="show which sandbox layers are active on this machine",
        description="Start the sandbox, run an empty job in it, and list every isolation layer.",
        handler=run,
        uses=("pack",),
    )
