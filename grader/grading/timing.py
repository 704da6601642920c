"""Call seconds as the exporters show them, asked of the plugins through ``grader_call_seconds``.

The built-in ``timing`` plugin measures each call around ``grader_run_calls`` and answers the hook;
these helpers sum what it answers per submission or per check. A result taken from the gradebook
cache ran no call here: its time is unknown and counts as 0.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from grader.collected import COLLECTED

if TYPE_CHECKING:
    from grader.config.core import Config

__all__ = ["check_seconds", "submission_seconds"]


def submission_seconds(config: Config, sub_id: str) -> float:
    """Seconds the calls of one submission took, summed (0 when unknown).

    Parameters
    ----------
    config : grader.config.core.Config
        The run's configuration (its plugins answer ``grader_call_seconds``).
    sub_id : str
        The submission's id.

    Returns
    -------
    float
        Rounded to milliseconds.
    """
    return round(sum(config.hooks.call_seconds(submission_id=sub_id, config=config) or ()), 3)


def check_seconds(config: Config, sub_id: str, exercise_id: str | None = None) -> dict[tuple[str, str], float]:
    """Seconds per check of one submission, keyed by (exercise id, check id).

    Each check owns its calls' place in ``Collected.calls`` (see
    `grader.collected.Collected.check_slices`). Empty when the submission did not run or
    the counts do not match (another runner made other calls).

    Parameters
    ----------
    config : grader.config.core.Config
    sub_id : str
    exercise_id : str, optional
        Only this exercise's checks.

    Returns
    -------
    dict of (str, str) to float
    """
    seconds = config.hooks.call_seconds(submission_id=sub_id, config=config)
    collected = config.stash.get(COLLECTED, None)
    if not seconds or collected is None or len(collected.calls) != len(seconds):
        return {}
    where_all = collected.check_slices if exercise_id is None else collected.exercise_check_slices.get(exercise_id, ())
    values = seconds.tolist() if isinstance(seconds, array) else list(seconds)  # slices of a list: no new arrays
    return {key: round(sum(values[where]), 3) for key, where in where_all}
