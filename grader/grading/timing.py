"""Call seconds as the exporters show them, asked of the plugins through ``grader_call_seconds``.

The built-in ``timing`` plugin measures each call around ``grader_run_calls`` and answers the hook;
these helpers sum what it answers per submission or per check. A result taken from the gradebook
cache ran no call here: its time is unknown and counts as 0.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from grader.collected import COLLECTED
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

__all__ = ["CheckTimes", "check_seconds", "check_times", "submission_seconds"]


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


class CheckTimes:
    """`check_seconds` of every submission of one report, each worked out once and kept as a row.

    The end-of-run writers (JUnit, CTRF) read each submission's check seconds several times (a pass
    for the totals, a pass for the cases); a row holds them in ``Collected.check_slices`` order, as
    `check_seconds` rounds them, so that a writer makes no dict per submission. Called with a
    submission id it answers as `check_seconds` does.

    Parameters
    ----------
    config : grader.config.core.Config
        The run's configuration (its plugins answer ``grader_call_seconds``).
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        collected = config.stash.get(COLLECTED, None)
        where_all = collected.check_slices if collected is not None else ()
        self.keys: tuple[tuple[str, str], ...] = tuple(key for key, _ in where_all)
        """(exercise id, check id) of each place of a row."""
        self.index: dict[tuple[str, str], int] = {key: i for i, key in enumerate(self.keys)}
        """Each key's place in a row (the last, for a key given twice, as `check_seconds`'s dict keeps)."""
        self._slices = tuple(where for _, where in where_all)
        self._n_calls = len(collected.calls) if collected is not None else -1
        self._rows: dict[str, array[float] | None] = {}
        self._zeros = array("d", bytes(8 * (len(self.keys) + 1)))

    def places(self, keys: Iterable[tuple[str, str]]) -> tuple[int, ...]:
        """Each key's place in a `padded` row (a key no check has: the last place, which holds 0.0)."""
        missing = len(self.keys)
        return tuple(self.index.get(key, missing) for key in keys)

    def padded(self, sub_id: str) -> array[float]:
        """`row`, or zeros when unknown, with one 0.0 more at the end (the place of an unknown key)."""
        made = self.row(sub_id)
        return self._zeros if made is None else made

    def row(self, sub_id: str) -> array[float] | None:
        """The seconds of each check of one submission, in `keys` order, then 0.0; None when unknown (all 0).

        Each value is ``check_seconds(config, sub_id)[key]`` (the same float).
        """
        rows = self._rows
        if sub_id in rows:
            return rows[sub_id]
        seconds = self.config.hooks.call_seconds(submission_id=sub_id, config=self.config)
        made: array[float] | None = None
        if seconds and len(seconds) == self._n_calls:
            values = seconds.tolist() if isinstance(seconds, array) else list(seconds)
            made = array("d", [round(sum(values[where]), 3) for where in self._slices])
            made.append(0.0)  # the place of a key no check has (`places`)
        rows[sub_id] = made
        return made

    def __call__(self, sub_id: str) -> dict[tuple[str, str], float]:
        """`check_seconds` of one submission (from its kept row)."""
        made = self.row(sub_id)
        return {} if made is None else dict(zip(self.keys, made))  # zip stops before the padding

    def for_exercise(self, sub_id: str, exercise_id: str) -> dict[tuple[str, str], float]:
        """`check_seconds` of one submission's checks of one exercise."""
        return {key: value for key, value in self(sub_id).items() if key[0] == exercise_id}


_TIMES = StashKey[tuple[Any, CheckTimes]]()
"""The `CheckTimes` of the report being written, with that report."""


def check_times(config: Config, report: Any) -> CheckTimes:
    """The `CheckTimes` every writer of ``report`` shares (made by the first one that asks).

    Parameters
    ----------
    config : grader.config.core.Config
    report : grader.models.GradingReport
        The report being written: another report gets rows of its own.

    Returns
    -------
    CheckTimes
    """
    kept = config.stash.get(_TIMES, None)
    if kept is None or kept[0] is not report:
        kept = (report, CheckTimes(config))
        config.stash[_TIMES] = kept
    return kept[1]
