"""Tables the grader keeps answers in while a class is graded: bounded, exact, thread-safe.

`BudgetTable` keeps answers under keys whose size is counted (frame bytes: `grader.execution.boundary.FrameMemo`,
`grader.grading.judging.VerdictCache`); `IdentityTable` keeps an answer made from two objects, found again
only for those very objects (a check result per check and verdict, `grader.builtin.scoring`; a
verdict with its call shown, `grader.grading.session`); `LargeFrame` is a large frame's bytes as such a key. Both start again when full: an answer is only ever
one that would be worked out anew, so forgetting it costs time, never a different result.
"""

from __future__ import annotations

import threading
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["BudgetTable", "IdentityTable", "LargeFrame"]


class BudgetTable(Generic[K, V]):
    """Answers under keys of a counted size, at most `MAX_BYTES` of them; past that the table starts again.

    Keys that hold a large frame (`LargeFrame`) are counted apart, at most `LARGE_MAX_BYTES` of
    them; past that only those are dropped: a class whose large answers all differ would otherwise
    empty the table every few submissions, and every small answer kept in it would be worked out
    anew. Subclasses set `MAX_BYTES` (read at each `_keep`, so a test may lower it on the class).
    """

    MAX_BYTES = 1 << 20
    """Total size of the keys kept, in bytes (keys with a large frame apart)."""

    LARGE_MAX_BYTES = 8 << 20
    """Total size of the keys with a large frame kept, in bytes (8 MiB: three answers of a 512x64 attention)."""

    def __init__(self) -> None:
        self._table: dict[K, V] = {}
        self._bytes = 0
        self._large: list[K] = []  # the keys with a large frame, in the order kept
        self._large_bytes = 0
        self._lock = threading.Lock()

    def _kept(self, key: K) -> V | None:
        """The answer kept under ``key``, if any."""
        return self._table.get(key)

    def _keep(self, key: K, size: int, value: V, large: bool = False) -> None:
        """Keep ``value`` under ``key``, which counts ``size`` bytes (the first answer for a key stays);
        ``large``: the key holds a large frame (counted against `LARGE_MAX_BYTES`)."""
        with self._lock:
            if large:
                if self._large_bytes + size > self.LARGE_MAX_BYTES:
                    for kept in self._large:
                        self._table.pop(kept, None)
                    self._large.clear()
                    self._large_bytes = 0
                if key not in self._table:
                    self._table[key] = value
                    self._large.append(key)
                    self._large_bytes += size
                return
            if self._bytes + size > self.MAX_BYTES:
                self._table = {k: self._table[k] for k in self._large if k in self._table}
                self._bytes = 0
            if key not in self._table:
                self._table[key] = value
                self._bytes += size


class IdentityTable:
    """An answer made from two objects, kept with them (so their ids stay theirs) and found only for them.

    At most ``most`` answers; past that the table starts again. Thread-safe under the GIL (one
    dict lookup or store at a time; a lost store only means working the answer out again).
    """

    def __init__(self, most: int = 8192) -> None:
        self.most = most
        self._table: dict[tuple[int, int], tuple[Any, Any, Any]] = {}

    def get(self, first: Any, second: Any) -> Any:
        """The answer kept for exactly ``first`` and ``second``, or None."""
        kept = self._table.get((id(first), id(second)))
        if kept is not None and kept[0] is first and kept[1] is second:
            return kept[2]
        return None

    def put(self, first: Any, second: Any, answer: Any) -> Any:
        """Keep ``answer`` for ``first`` and ``second``; return it."""
        if len(self._table) >= self.most:
            self._table.clear()
        self._table[(id(first), id(second))] = (first, second, answer)
        return answer


class LargeFrame:
    """A large frame's bytes (`grader.execution.channel.LARGE_FRAME_BYTES` or more) as a key of the
    grader's answer tables (`grader.grading.judging`): equal to another when their bytes are (one
    ``memcmp``: about 0.15 ms for the 2.3 MiB answer of a 512x64 attention, less when they differ
    early), hashed from a sample of them.

    Hashing such a frame whole (``hash`` of its bytes) costs about what judging it does, so it was
    judged again for every submission, and so was every other check of the submission (the table of
    whole submissions needs every answer's key). The hash here reads the length, the first and last
    `EDGE` bytes and one byte in `STRIDE` (about 0.01 ms). Frames that differ only where no sample
    falls share a hash and are told apart by the comparison; a table holds few large keys (its byte
    budget counts each one's length), so a lookup compares with few. The bytes are the grader's own
    buffer of the frame, which nothing writes once it is read (the arrays decoded from it are
    read-only views of it).
    """

    __slots__ = ("_hash", "data")

    EDGE = 256
    STRIDE = 4093

    def __init__(self, data: bytearray) -> None:
        self.data = data
        self._hash: int | None = None

    def __len__(self) -> int:
        return len(self.data)

    def __hash__(self) -> int:
        if self._hash is None:
            with memoryview(self.data) as view:
                sample = (view[: self.EDGE].tobytes(), view[:: self.STRIDE].tobytes(), view[-self.EDGE :].tobytes())
            self._hash = hash((len(self.data), *sample))
        return self._hash

    def __eq__(self, other: object) -> bool:
        return type(other) is LargeFrame and self.data == other.data
