"""Stash keys the execution layer shares with the plugins that start and feed its jobs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from grader.collected import COLLECTED
from grader.stash import Stash, StashKey

if TYPE_CHECKING:
    from grader.execution.jobs import ForkServer, LauncherPool
    from grader.models import Call, RunOutcome, Submission

__all__ = [
    "CALL_SECONDS",
    "EARLY_ZYGOTE",
    "FORK_SERVER",
    "JOB_LAUNCHERS",
    "OUTCOME_SOURCES",
    "check_seconds",
    "submission_seconds",
]

JOB_LAUNCHERS: StashKey[LauncherPool] = StashKey()
"""The sandbox's workers, lent one submission at a time."""
FORK_SERVER: StashKey[ForkServer] = StashKey()
"""A warm fork server the command line started ahead for ``check`` (`grader.execution.jobs.ForkServer`); the runner runs the calls in its jobs."""
EARLY_ZYGOTE: StashKey[tuple[Any, Any, Any]] = StashKey()
"""``grade``'s sandbox zygote as the command line exec'd it before loading anything
(`grader.execution.servers.grade_zygote`: process, socket, standard error file); the sandbox plugin takes it."""
OUTCOME_SOURCES: StashKey[list[Callable[[Submission, Sequence[Call]], RunOutcome | None]]] = StashKey()
"""Callables ``(submission, calls) -> RunOutcome | None`` the runner asks before it runs the calls."""
CALL_SECONDS = StashKey[dict[str, Sequence[float]]]()
"""The seconds of each call of each submission, by submission id (in ``Collected.calls`` order)."""


def submission_seconds(stash: Stash, sub_id: str) -> float:
    """Seconds the calls of one submission took, summed (0 when unknown).

    Parameters
    ----------
    stash : Stash
        The run's ``config.stash``.
    sub_id : str
        The submission's id.

    Returns
    -------
    float
        Rounded to milliseconds.
    """
    return round(sum(stash.get(CALL_SECONDS, {}).get(sub_id, ())), 3)


def check_seconds(stash: Stash, sub_id: str, exercise_id: str | None = None) -> dict[tuple[str, str], float]:
    """Seconds per check of one submission, keyed by (exercise id, check id).

    Each check owns its calls' place in ``Collected.calls`` (see
    `grader.grading.session.Collected.split`). Empty when the submission did not run or
    the counts do not match.

    Parameters
    ----------
    stash : Stash
    sub_id : str
    exercise_id : str, optional
        Only this exercise's checks.

    Returns
    -------
    dict of (str, str) to float
    """
    seconds = stash.get(CALL_SECONDS, {}).get(sub_id)
    collected = stash.get(COLLECTED, None)
    if not seconds or collected is None or len(collected.calls) != len(seconds):
        return {}
    where_all = collected.check_slices if exercise_id is None else collected.exercise_check_slices.get(exercise_id, ())
    return {key: round(sum(seconds[where]), 3) for key, where in where_all}
