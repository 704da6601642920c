"""The command-line parser, built from the commands and options the plugins register.

`build_parser` asks every plugin for its commands (``grader_add_commands``) and each command's
plugins for their options (``grader_addoption``); `for_command` builds a run's `Config` the same way
without a command line (the pytest plugin, the student API and a Dask worker use it).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import pluggy

from grader._version import __version__
from grader.config.commands import Command, Commands
from grader.config.core import Config, Hooks
from grader.errors import UsageError
from grader.execution.jobs import positive_int

__all__ = ["MAX_JOBS", "Parser", "build_parser", "commands_of", "for_command", "job_count", "plugin_args"]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one-line `grader.errors.UsageError` exceptions."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def plugin_args(argv: Sequence[str]) -> list[str]:
    """The ``-p`` values, read before the full parser exists."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("-p", action="append", default=[])
    known, _ = pre.parse_known_args(list(argv))
    return [str(p) for p in known.p]


MAX_JOBS = 256
"""The most submissions graded at once (``--jobs``): each needs threads and a sandboxed process of its own."""


def job_count(text: str) -> int:
    """argparse type of ``--jobs``: a whole number from 1 to `MAX_JOBS`."""
    value = positive_int(text)
    if value > MAX_JOBS:
        raise argparse.ArgumentTypeError(f"at most {MAX_JOBS} submissions are graded at once, got {value}")
    return value


def commands_of(pm: pluggy.PluginManager) -> Commands:
    """Every command the plugins of ``pm`` register (``grader_add_commands``), each plugin asked in turn."""
    commands = Commands()
    for impl in reversed(pm.hook.grader_add_commands.get_hookimpls()):
        commands.owner = impl.plugin_name
        impl.function(commands=commands)
    commands.owner = ""
    return commands


def _pack_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pack",
        default=None,
        metavar="DIR",
        help="the course: its folder (holding course.yaml) or an installed course's id "
        "(default: the course.yaml at or above the working folder, else the one installed)",
    )


def _common(pm: pluggy.PluginManager, command: Command) -> Parser:
    """The shared options ``command`` declares it uses (`grader.config.commands.USES`), then its plugins' options."""
    common = Parser(add_help=False)
    if "pack" in command.uses or "specs" in command.uses:
        _pack_argument(common)
    if "specs" in command.uses:
        common.add_argument(
            "--specs", default=None, metavar="DIR", help="exercise specs folder (default: the course's)"
        )
        common.add_argument(
            "--reference", default=None, metavar="FILE", help="reference implementation (default: the course's)"
        )
    if "grading" in command.uses:
        common.add_argument(
            "-j",
            "--jobs",
            type=job_count,
            default=None,
            metavar="N",
            help=f"submissions graded at once, 1 to {MAX_JOBS} (default: one per usable core, and one more)",
        )
    if "mutants" in command.uses:
        common.add_argument(
            "--mutants",
            default=None,
            metavar="DIR",
            help="catalogue of known mistakes, for diagnosis and 'audit' (default: the course's, if it has one)",
        )
    if command.plugin_options:
        common.add_argument(
            "-p",
            action="append",
            default=[],
            metavar="PLUGIN",
            help="load a plugin module by name, or block one with -p no:NAME (repeatable)",
        )
        Hooks(pm).addoption(parser=common, command=command.name)
    return common


def build_parser(pm: pluggy.PluginManager, pack: Any = None, only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command the plugins register.

    Parameters
    ----------
    pm : pluggy.PluginManager
        The run's plugin manager.
    pack : grader.packs.Pack, optional
        The course found for the run: it names the chapter and the submission file in the help.
    only : str, optional
        The command about to be parsed: the others are listed with their help but get none of
        their options (nothing parses them; plugins are asked once, not once per command).

    Returns
    -------
    argparse.ArgumentParser
    """
    what = f"chapter {pack.chapter} ({pack.title})" if pack is not None else "a course's"
    parser = Parser(prog="grader", description=f"Grade {what} exercises.")
    parser.add_argument("--version", action="version", version=f"grader {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for command in commands_of(pm):
        parents = [_common(pm, command)] if only in (None, command.name) else []
        parsed = sub.add_parser(
            command.name,
            parents=parents,
            help=command.help,
            description=command.description or command.help,
        )
        if command.arguments is not None and only in (None, command.name):
            command.arguments(parsed, pack)
    return parser


def for_command(command: str, argv: Sequence[str] = (), plugins: Sequence[str] = (), pack: str | None = None) -> Config:
    """A run's `Config` for ``command`` without a command line: the options' defaults, then ``argv``.

    Parameters
    ----------
    command : str
        A registered command (``"check"``, ``"grade"``, ...).
    argv : sequence of str
        The command's arguments (e.g. ``["attention.py", "-q"]``).
    plugins : sequence of str
        ``-p`` values.
    pack : str, optional
        ``--pack``'s value.

    Returns
    -------
    grader.config.core.Config

    Raises
    ------
    grader.errors.UsageError
        If ``argv`` is not valid for the command.
    """
    from grader.config.plugins import get_plugin_manager

    pm = get_plugin_manager(list(plugins), pack=pack)
    options = build_parser(pm, only=command).parse_args([command, *argv])
    if getattr(options, "pack", None) is None:
        options.pack = pack
    return Config(command=command, options=options, pluginmanager=pm)
