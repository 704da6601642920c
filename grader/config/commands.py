"""The subcommands of ``grader``, as plugins register them (tox 4's ``parser.add_command`` is the model).

Each subcommand is a plugin that implements ``grader_add_commands(commands)`` and calls
`Commands.add` once: its name, its help, what it reads (`USES`), a function adding its own
arguments and its handler. The built-in commands are the modules of ``grader.cli.commands``, found
by listing that package: adding a subcommand is adding one module there. A third-party plugin adds
one the same way.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from grader.errors import PluginError

__all__ = ["USES", "Command", "Commands"]

USES = frozenset({"pack", "specs", "mutants", "grading"})
"""What a command may declare it reads, each bringing its shared options:

``pack``
    ``--pack DIR`` (every command that reads the course).
``specs``
    ``--specs DIR`` and ``--reference FILE`` (the exercise specs and the reference).
``mutants``
    ``--mutants DIR`` (the catalogue of known mistakes).
``grading``
    ``--jobs N`` and the options grading plugins add (``grader_addoption``).
"""


@dataclass(frozen=True)
class Command:
    """One subcommand.

    Attributes
    ----------
    name : str
        What follows ``grader`` on the command line.
    help : str
        One line for ``grader --help``.
    handler : callable
        ``handler(config) -> int``: runs the command, returns its exit code.
    description : str
        The paragraph of ``grader NAME --help``.
    arguments : callable, optional
        ``arguments(parser, pack)`` adds the command's own arguments (``pack`` is the course found
        for the run, or None, for help texts).
    uses : frozenset of str
        Members of `USES`.
    plugin_options : bool
        Whether plugins are asked for options (``grader_addoption``) for this command.
    prepare : callable, optional
        ``prepare(options, pm) -> options``: rewrites the parsed options before the run's `Config`
        is made (``similarity`` and ``merge`` run as ``grade``).
    """

    name: str
    help: str
    handler: Callable[[Any], int]
    description: str = ""
    arguments: Callable[[argparse.ArgumentParser, Any], None] | None = None
    uses: frozenset[str] = frozenset()
    plugin_options: bool = True
    prepare: Callable[[argparse.Namespace, Any], argparse.Namespace] | None = None


class Commands:
    """The registry plugins add their subcommands to (``grader_add_commands``)."""

    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}
        self._owners: dict[str, str] = {}
        self.owner = ""
        """The plugin being asked (set by the caller), for the message naming two plugins."""

    def add(
        self,
        name: str,
        *,
        help: str,  # noqa: A002 - argparse's own word
        handler: Callable[[Any], int],
        description: str = "",
        arguments: Callable[[argparse.ArgumentParser, Any], None] | None = None,
        uses: tuple[str, ...] | frozenset[str] = (),
        plugin_options: bool = True,
        prepare: Callable[[argparse.Namespace, Any], argparse.Namespace] | None = None,
    ) -> None:
        """Register one subcommand.

        Raises
        ------
        grader.errors.PluginError
            If another plugin registered a command of that name, or ``uses`` names something not in
            `USES`.
        """
        unknown = set(uses) - USES
        if unknown:
            raise PluginError(
                f"{self.owner or 'a plugin'}: command '{name}' uses {sorted(unknown)}; give some of {sorted(USES)}"
            )
        if name in self._commands:
            raise PluginError(
                f"two plugins define the command '{name}': {self._owners[name]} and {self.owner or 'another'}; "
                "block one with -p no:NAME"
            )
        self._commands[name] = Command(
            name, help, handler, description, arguments, frozenset(uses), plugin_options, prepare
        )
        self._owners[name] = self.owner

    def __iter__(self) -> Iterator[Command]:
        return iter(sorted(self._commands.values(), key=lambda c: c.name))

    def __contains__(self, name: object) -> bool:
        return name in self._commands

    def __getitem__(self, name: str) -> Command:
        return self._commands[name]
