"""Typed per-run state for plugins: ``config.stash[KEY]`` with a `StashKey`, never a string.

The model is pytest's ``Stash``: a plugin makes its own keys at module level,
``_BOOK = StashKey[Gradebook]()``, and only code holding a key reads or writes its value, so two
plugins cannot collide on a name, and mypy knows the type of ``config.stash[_BOOK]``. A plugin's
state stays under its own keys. What one plugin asks of another is a hook of `grader.hookspecs`,
never a key: the outcomes that already exist (``grader_known_outcome``), the links of the class
pages (``grader_report_links``), the seconds of each call (``grader_call_seconds``).

Shared keys
-----------
The core's own state, each key declared by the module that owns it, beside its type (a wall of
``tests/harness/test_walls.py`` fails on a key imported by another module and not named here):
`grader.collected.COLLECTED` (the run's collected checks), `grader.grading.session.CHECK_KINDS` and
`INTERNAL_ERRORS`, `grader.execution.keys` (``JOB_LAUNCHERS``, ``FORK_SERVER`` and
``EARLY_ZYGOTE``: the job launchers, the fork server and the early zygote, which the command line,
the sandbox plugin and the runner share), `grader.intake.lms.LOCATED` (the submissions as
located, before naming), `grader.grading.slices` (``STASH_KEY``, ``CLASS_IDS`` and
``CLASS_LISTING``: the shard a run grades and its class) and `grader.shards.REPLAY_KEY` (a merge's
recorded outcomes).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast, overload

__all__ = ["Stash", "StashKey"]

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
