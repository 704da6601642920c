"""A returned rectangle of floats as raw doubles: what the worker writes of a large list answer.

A numpy answer travels as its array's bytes (the worker's "A frame with arrays"); the same numbers
returned as lists (a numpy answer's ``tolist()``) were written as JSON text, number by number, and
parsed so again in the grader: the two parts of a 512x512 attention took the job about 140 ms to
write and the grader about 80 ms to parse. A list that is a rectangle of floats, and nothing else,
of at least `RAW_LIST_ITEMS` numbers now travels as the array of its own doubles (``np.array`` of
floats copies their bits: -0.0, NaN and the infinities too), and the grader decodes it into the
same numbers, read-only, as a numpy answer's. Anything else (an int, a bool or a float subclass
among the numbers, rows of unequal lengths, a smaller list) is written as before.

Part of the sandbox child (``grader/child``), loaded by path by the worker: it imports only the
standard library and is handed numpy.
"""

from __future__ import annotations

from typing import Any

RAW_LIST_ITEMS = 4096
"""A returned list holding at least this many floats in a rectangle travels as raw doubles; the
grader decodes a smaller array into lists again (its ``LIST_BELOW_ITEMS``, the same number), so a
smaller list is written as JSON, as it always was."""

_FLOATS_ONLY = frozenset({float})


def float_block(value: list[Any] | tuple[Any, ...], np: Any, levels: int, budget: list[int]) -> Any:
    """``value`` as a C-ordered float64 array when it is a rectangle of at least `RAW_LIST_ITEMS`
    floats, at most ``levels`` lists deep and within the result's ``budget`` (items still
    allowed, decreased by its numbers and the lists inside it, as the item-by-item path counts
    them); else None: the worker converts it item by item, as before (and refuses it with its
    usual message when it is too large or too deep: a list of thin rows that the item-by-item path
    refuses is never sent as doubles for lack of its lists in the count).
    """
    shape = _shape(value, levels)
    if shape is None:
        return None
    count, lists = 1, 0
    for n in shape[:-1]:  # the lists inside ``value``: the item-by-item path counts each of them too
        count *= n
        lists += count
    count *= shape[-1]
    if count < RAW_LIST_ITEMS or count + lists > budget[0] or not _holds(value, shape, 0):
        return None
    array = np.array(value, dtype=np.float64)
    if array.shape != tuple(shape):  # pragma: no cover - a rectangle of floats always converts so
        return None
    budget[0] -= count + lists
    return array


def _shape(value: list[Any] | tuple[Any, ...], levels: int) -> list[int] | None:
    """The shape ``value`` has if it is a rectangle of floats, read along its first items (nested
    lists or tuples, none empty, ending in a ``float``, at most ``levels`` deep); else None.
    Whether every item fits that shape is `_holds`'s to say."""
    shape: list[int] = []
    item: Any = value
    while type(item) is list or type(item) is tuple:
        if not item or len(shape) >= levels:
            return None
        shape.append(len(item))
        item = item[0]
    return shape if type(item) is float else None


def _holds(value: list[Any] | tuple[Any, ...], shape: list[int], level: int) -> bool:
    """Whether ``value`` (of length ``shape[level]``) is a rectangle of floats of ``shape[level:]``."""
    if level == len(shape) - 1:
        return set(map(type, value)) == _FLOATS_ONLY
    width = shape[level + 1]
    if level == len(shape) - 2:  # rows of floats: each checked in C
        for row in value:
            if (type(row) is not list and type(row) is not tuple) or len(row) != width:
                return False
            if set(map(type, row)) != _FLOATS_ONLY:
                return False
        return True
    return all(
        (type(row) is list or type(row) is tuple) and len(row) == width and _holds(row, shape, level + 1)
        for row in value
    )
