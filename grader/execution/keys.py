"""Stash keys the execution layer shares with the plugins that start and feed its jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.execution.jobs import ForkServer, LauncherPool

__all__ = [
    "EARLY_ZYGOTE",
    "FORK_SERVER",
    "JOB_LAUNCHERS",
]

JOB_LAUNCHERS: StashKey[LauncherPool] = StashKey()
"""The sandbox's workers, lent one submission at a time."""
FORK_SERVER: StashKey[ForkServer] = StashKey()
"""A warm fork server the command line started ahead for ``check`` (`grader.execution.jobs.ForkServer`); the runner runs the calls in its jobs."""
EARLY_ZYGOTE: StashKey[tuple[Any, Any, Any]] = StashKey()
"""``grade``'s sandbox zygote as the command line exec'd it before loading anything
(`grader.execution.servers.grade_zygote`: process, socket, standard error file); the sandbox plugin takes it."""
