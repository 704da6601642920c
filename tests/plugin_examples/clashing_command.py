"""A plugin that registers a command the harness already has."""

from __future__ import annotations

from typing import Any

from grader import hookimpl


@hookimpl
def grader_add_commands(commands: Any) -> None:
    commands.add("grade", help="another grade", handler=lambda config: 0)
