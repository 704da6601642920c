"""The grader's own errors, and the exit code each one maps to.

A student's failure is never an exception here: it becomes a check result.
These exceptions are for the grader's callers (instructors): a bad command
line, a malformed spec, a missing reference. ``grader.cli.main`` turns each
into a single line on stderr and the exit code below.
"""

from __future__ import annotations

__all__ = [
    "EXIT_CHECKS_FAILED",
    "EXIT_CONFIG",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "ConfigError",
    "GraderError",
    "PluginError",
    "SpecError",
    "UsageError",
]

EXIT_OK = 0
"""Everything ran; for ``check`` and ``validate``, every check passed."""
EXIT_CHECKS_FAILED = 1
"""``check`` or ``validate`` ran, and at least one check did not pass."""
EXIT_USAGE = 2
"""The command line is wrong: unknown option, missing or unreadable path."""
EXIT_CONFIG = 3
"""An exercise spec, the reference or a plugin is broken."""
EXIT_INTERNAL = 4
"""A bug in the grader or in a plugin: a traceback is printed."""


class GraderError(Exception):
    """Base class of every error the grader reports in one line.

    Parameters
    ----------
    message : str
        A complete sentence that names the file, key or option at fault and,
        where possible, the fix.
    """

    exit_code: int = EXIT_CONFIG

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(GraderError):
    """A wrong command line: bad option, missing path, unwritable output."""

    exit_code = EXIT_USAGE


class ConfigError(GraderError):
    """The grading setup (specs folder, reference) cannot be used."""

    exit_code = EXIT_CONFIG


class SpecError(ConfigError):
    """A malformed exercise spec.

    Parameters
    ----------
    path : str
        The spec file.
    where : str
        The key or check at fault, e.g. ``"checks[2].points"``; may be empty.
    problem : str
        What is wrong and how to fix it.
    """

    def __init__(self, path: str, where: str, problem: str) -> None:
        self.path = str(path)
        self.where = where
        self.problem = problem
        location = f"{self.path}: {where}: " if where else f"{self.path}: "
        super().__init__(location + problem)


class PluginError(ConfigError):
    """A plugin could not be loaded or registers an unknown hook."""
