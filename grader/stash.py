"""Typed per-run state for plugins: ``config.stash[KEY]`` with a `StashKey`, never a string.

The model is pytest's ``Stash``: a plugin makes its own keys at module level,
``_BOOK = StashKey[Gradebook]()``, and only code holding a key reads or writes its value, so two
plugins cannot collide on a name, and mypy knows the type of ``config.stash[_BOOK]``. A plugin's
private state stays under its own keys; what several plugins share is a key of the core, listed
below (each says who writes it and who reads it).

Shared keys
-----------
`COLLECTED`
    The session's `grader.grading.session.Collected` (exercises, prepared checks, spec hash), set by
    ``grader.grading.session.grade`` before ``grader_collection_finish``.
`CHECK_KINDS`
    The merged check kinds by name, set by ``grader.grading.session.collect`` before the specs load (the
    spec loader validates a check's keys against its kind).
`INTERNAL_ERRORS`
    (submission id, internal-error id) of every submission the grader failed on this run.
`INDEX_LINKS`, `SUMMARY_LINKS`
    (label, file name) pairs that the class index page and the summary page link to; a plugin
    writing a class-wide page (similarity, the summary page) appends its own.
`JOB_LAUNCHERS`
    The sandbox's workers (`grader.execution.jobs.LauncherPool`), set by the sandbox plugin when it starts;
    the runner plugin runs every ``grade`` submission in one of them.
`OUTCOME_SOURCES`
    Where outcomes already exist (a merge's shard records, a Dask cluster's answers): the runner
    asks each in turn before it runs anything, so which one answers follows the configuration,
    never the order in which plugins were registered.
`CALL_SECONDS`
    The seconds of each call, by submission id (the ``timing`` plugin records them), read through
    `submission_seconds` and `check_seconds` by the Gradescope and JUnit writers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

if TYPE_CHECKING:
    from grader.execution.jobs import ForkServer, LauncherPool
    from grader.models import Call, RunOutcome, Submission
    from grader.grading.session import Collected

__all__ = [
    "CALL_SECONDS",
    "CHECK_KINDS",
    "COLLECTED",
    "EARLY_ZYGOTE",
    "FORK_SERVER",
    "INDEX_LINKS",
    "INTERNAL_ERRORS",
    "JOB_LAUNCHERS",
    "OUTCOME_SOURCES",
    "SUMMARY_LINKS",
    "Stash",
    "StashKey",
    "check_seconds",
    "submission_seconds",
]

T = TypeVar("T")
D = TypeVar("D")
_MISSING = object()


class StashKey(Generic[T]):
    """A key of `Stash` whose value has type ``T``; each instance is its own key.

    Examples
    --------
    >>> COUNT = StashKey[int]()
    >>> stash = Stash()
    >>> stash[COUNT] = 3
    >>> stash[COUNT] + 1
    4
    """

    __slots__ = ()


class Stash:
    """A mapping from `StashKey` to values of the key's type (pytest's ``Stash``, plus `pop`).

    Raises
    ------
    TypeError
        When a key is not a `StashKey` (a string key of the old ``config.stash`` dict).
    """

    __slots__ = ("_storage",)

    def __init__(self) -> None:
        self._storage: dict[StashKey[Any], object] = {}

    @staticmethod
    def _check(key: object) -> None:
        if not isinstance(key, StashKey):
            raise TypeError(f"stash keys are grader.stash.StashKey instances, not {type(key).__name__} ({key!r})")

    def __setitem__(self, key: StashKey[T], value: T) -> None:
        self._check(key)
        self._storage[key] = value

    def __getitem__(self, key: StashKey[T]) -> T:
        self._check(key)
        return cast("T", self._storage[key])

    @overload
    def get(self, key: StashKey[T]) -> T | None: ...
    @overload
    def get(self, key: StashKey[T], default: D) -> T | D: ...
    def get(self, key: StashKey[T], default: object = None) -> object:
        """The value of ``key``, or ``default`` (None) when it has none."""
        self._check(key)
        return self._storage.get(key, default)

    def setdefault(self, key: StashKey[T], default: T) -> T:
        """The value of ``key``; set to ``default`` first when it has none."""
        self._check(key)
        return cast("T", self._storage.setdefault(key, default))

    @overload
    def pop(self, key: StashKey[T]) -> T: ...
    @overload
    def pop(self, key: StashKey[T], default: D) -> T | D: ...
    def pop(self, key: StashKey[T], default: object = _MISSING) -> object:
        """Remove and return the value of ``key``, or ``default`` when it has none.

        Raises
        ------
        KeyError
            When ``key`` has no value and no ``default`` is given.
        """
        self._check(key)
        if default is _MISSING:
            return self._storage.pop(key)
        return self._storage.pop(key, default)

    def __delitem__(self, key: StashKey[T]) -> None:
        self._check(key)
        del self._storage[key]

    def __contains__(self, key: object) -> bool:
        self._check(key)
        return key in self._storage

    def __len__(self) -> int:
        return len(self._storage)


COLLECTED: StashKey[Collected] = StashKey()
"""The session's collected checks (see the module docstring)."""
CHECK_KINDS = StashKey[dict[str, Any]]()
"""The run's check kinds by name."""
INTERNAL_ERRORS = StashKey[list[tuple[str, str]]]()
"""(submission id, internal-error id) of each submission the grader failed on."""
INDEX_LINKS = StashKey[list[tuple[str, str]]]()
"""(label, file name) pairs the class index page (``index.html``) links to."""
SUMMARY_LINKS = StashKey[list[tuple[str, str]]]()
"""(label, file name) pairs the summary page (``summary.html``) links to."""
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
