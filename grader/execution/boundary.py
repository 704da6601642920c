"""The boundary between a job and the grader: every frame a job sends is checked here first.

A job (``grader/child/worker.py`` in a child process or a sandboxed job) answers
the grader in *frames*: a 4-byte big-endian length, then that many bytes of
UTF-8 JSON holding one object. Nothing in a frame is trusted: the student's
code runs in the job and can write any bytes to the result pipe. So,

1. the length prefix is checked against the frame's byte limit *before* the
   frame is read (`check_length`); a frame over its limit is refused unread
   and the job is killed;
2. the bytes are parsed by a JSON parser that refuses the ``NaN`` and
   ``Infinity`` literals and integers too large to be a float (the worker
   writes a non-finite float as ``{"$float": "nan"}``, ``"inf"`` or
   ``"-inf"``, see `FLOAT_KEY`);
3. the object is validated strictly (`decode_frame`): known event types and
   keys only, strings valid Unicode (lone surrogates become U+FFFD) and
   bounded in length, a call's value made of bools, ints within float range,
   finite floats (or the agreed non-finite encoding), lists and binary
   arrays, no deeper and with no more elements than the call's
   `ResultBudget` allows.

Binary arrays
-------------
A numpy array a submission returns travels as raw little-endian data, not
as JSON numbers: the frame is ``b"\\x00"``, the length of its JSON text
(4 bytes, big-endian), the JSON text, then the arrays' bytes, in the order
the JSON names them as ``{"$array": [DTYPE, SHAPE]}`` (`ARRAY_KEY`; DTYPE
one of `WIRE_DTYPES`). The decoder checks each header (a known dtype, a
shape of non-negative ints no deeper and no larger than the budget, counted
as the same value in nested lists would be), that the bytes are exactly
what the headers announce, and takes the data with ``numpy.frombuffer``: no
number is visited one by one. An array of fewer than `LIST_BELOW_ITEMS`
numbers becomes nested lists (exactly what the JSON would have given); a
larger one stays a read-only float64, int64, uint64 or bool array.

A call's budget comes from what the reference returns for the same call
(`budget_for`: a few times its size, plus slack); a call without a reference
value gets `DEFAULT_BUDGET`.

Memory bound
------------
Per submission in flight, the grader holds at most:

* the frame being read: ``4 + limit`` bytes, where ``limit`` is
  ``budget.max_bytes + FRAME_OVERHEAD_BYTES`` (at most
  ``MAX_BUDGET.max_bytes + FRAME_OVERHEAD_BYTES`` = 32 MiB + 64 KiB; a
  frame of `grader.execution.channel.LARGE_FRAME_BYTES` or more is read into one buffer
  of the length it announced, once that length is within its limit), and,
  while it is parsed, its text (up to 4 bytes a character) and at most
  ``budget.max_items + FRAME_OVERHEAD_BYTES`` parsed items (counted in the
  bytes before parsing), about 40 bytes each: with `DEFAULT_BUDGET`, about
  15 MiB at the peak of one frame;
* the validated values of the calls made so far (kept for judging), each at
  most its budget's ``max_items`` items (about 40 bytes each);
* stdout and stderr, each capped at 16 KiB
  (`grader.builtin.runner.OUTPUT_CAP_BYTES`).

Only one frame is read at a time: the next call is sent once the previous
frame is decoded. Parsing costs time in proportion to the frame's bytes, so
the same bound holds for the grader's CPU per frame.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from dataclasses import dataclass
from typing import Any

from grader.execution.memo import BudgetTable

__all__ = [
    "ARRAY_KEY",
    "CALL_KEYS",
    "CHANNEL_LOST_EXIT",
    "DEFAULT_BUDGET",
    "FLOAT_KEY",
    "FRAMES",
    "FRAME_OVERHEAD_BYTES",
    "IMPORT_FRAME_BYTES",
    "LIST_BELOW_ITEMS",
    "MAX_BUDGET",
    "WIRE_DTYPES",
    "BoundaryError",
    "FrameMemo",
    "ResultBudget",
    "budget_for",
    "check_length",
    "decode_frame",
    "encode_nonfinite",
    "frame_limit",
    "plain_data",
]

FLOAT_KEY = "$float"
"""A non-finite float travels as ``{"$float": "nan" | "inf" | "-inf"}`` (JSON has no literal for it)."""

ARRAY_KEY = "$array"
"""A binary array's header in a frame's JSON: ``{"$array": [DTYPE, SHAPE]}`` (its bytes follow the JSON)."""

WIRE_DTYPES = {"<f8": 8, "<i8": 8, "<u8": 8, "|b1": 1}
"""The dtypes an array may travel as, with their item sizes in bytes."""

LIST_BELOW_ITEMS = 4096
"""A binary array with fewer numbers than this is decoded as nested lists (as its JSON would be);
a larger one stays a read-only numpy array."""

CHANNEL_LOST_EXIT = 75
"""The worker's exit code when its result or call channel was closed or replaced by the
submission (the worker repeats the number: it imports nothing from the grader)."""

FRAME_OVERHEAD_BYTES = 64 << 10
"""Bytes a call frame may hold beside its value (status, exception type, message, line, mutated)."""

IMPORT_FRAME_BYTES = 64 << 10
"""Byte limit of the import frame (and of a ``grader doctor`` probe frame)."""

MAX_TEXT = 2000
"""Characters kept of an exception message."""
MAX_NAME = 100
"""Characters kept of an exception type's name."""
MAX_WHERE = 200
"""Characters kept of a ``file, line N`` location."""
MAX_MUTATED = 64
"""Argument positions a call frame may list as changed in place."""

ITEM_FACTOR = 4
"""A result may hold this many times as many items (lists and numbers) as the reference's..."""
ITEM_SLACK = 256
"""... plus this many."""
DEPTH_SLACK = 2
"""A result may nest this many levels deeper than the reference's."""
BYTES_PER_ITEM = 32
"""Bytes allowed per item (the longest float literal, ``-2.2250738585072014e-308``, is 24, plus a comma)."""
BYTES_SLACK = 4096
"""Bytes allowed on top of ``BYTES_PER_ITEM * max_items``."""


@dataclass(frozen=True)
class ResultBudget:
    """How large one call's value may be when it crosses the boundary.

    Attributes
    ----------
    max_items : int
        Lists and numbers in the value, counted together (``[[1, 2]]`` is 4).
    max_depth : int
        Nesting of lists (a number is 0 deep, ``[1]`` 1, ``[[1]]`` 2).
    max_bytes : int
        Bytes of the value's JSON text; the frame may be
        `FRAME_OVERHEAD_BYTES` larger (see `frame_limit`).
    """

    max_items: int
    max_depth: int
    max_bytes: int


DEFAULT_BUDGET = ResultBudget(max_items=1 << 16, max_depth=16, max_bytes=2 << 20)
"""The budget of a call without a reference value: 65,536 items, 16 deep, 2 MiB."""

MAX_BUDGET = ResultBudget(max_items=1 << 20, max_depth=64, max_bytes=32 << 20)
"""`budget_for` never gives more: about a million items, 64 deep, 32 MiB."""


def _array_items(shape: tuple[int, ...]) -> int:
    """Lists and numbers of an array of ``shape`` written as nested lists (``(2, 3)``: 1 + 2 + 6)."""
    items, lists = 0, 1
    for n in shape:
        items += lists
        lists *= n
    return items + lists


def _measure(value: Any) -> tuple[int, int]:
    """(items, depth) of plain data: lists, tuples and dicts nest; anything else is one item."""
    items, deepest = 0, 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        shape = getattr(item, "shape", None)
        if type(shape) is tuple and shape and getattr(getattr(item, "dtype", None), "kind", "?") in tuple("biuf"):
            items += _array_items(shape)  # a numeric numpy array: measured from its shape
            deepest = max(deepest, depth + len(shape))
            continue
        items += 1
        if hasattr(item, "tolist") and not isinstance(item, (list, tuple, dict)):
            item = item.tolist()  # a numpy array or scalar
        if isinstance(item, (list, tuple)):
            deepest = max(deepest, depth + 1)
            stack.extend((x, depth + 1) for x in item)
        elif isinstance(item, dict):
            deepest = max(deepest, depth + 1)
            stack.extend((x, depth + 1) for x in item.values())
    return items, deepest


def budget_for(reference_value: Any) -> ResultBudget:
    """The budget of a call whose reference returns ``reference_value``.

    ``ITEM_FACTOR`` (4) times the reference's items plus ``ITEM_SLACK`` (256),
    ``DEPTH_SLACK`` (2) levels deeper, and ``BYTES_PER_ITEM`` (32) bytes per
    allowed item plus ``BYTES_SLACK`` (4 KiB); never more than `MAX_BUDGET`.

    Parameters
    ----------
    reference_value : object
        Plain data (numbers, lists, tuples; numpy arrays are measured as
        lists), or None when the reference returns nothing usable (for
        example, it raises): then the slack alone.

    Returns
    -------
    ResultBudget

    Examples
    --------
    >>> budget_for([[0.5, 0.5], [0.25, 0.75]])
    ResultBudget(max_items=284, max_depth=4, max_bytes=13184)
    """
    items, depth = (0, 0) if reference_value is None else _measure(reference_value)
    max_items = min(ITEM_FACTOR * items + ITEM_SLACK, MAX_BUDGET.max_items)
    return ResultBudget(
        max_items=max_items,
        max_depth=min(depth + DEPTH_SLACK, MAX_BUDGET.max_depth),
        max_bytes=min(BYTES_PER_ITEM * max_items + BYTES_SLACK, MAX_BUDGET.max_bytes),
    )


def frame_limit(budget: ResultBudget | None) -> int:
    """Bytes a call frame may hold (after its 4-byte length): the value's budget plus the overhead."""
    return (budget or DEFAULT_BUDGET).max_bytes + FRAME_OVERHEAD_BYTES


class BoundaryError(Exception):
    """A frame refused at the boundary.

    Attributes
    ----------
    message : str
        Why, in words for a student (never the frame's content).
    fatal : bool
        True when the job's channel can no longer be trusted (a frame over
        its limit, bytes that are not the agreed JSON): the job is killed
        and the call is ``crashed``. False when the frame was well formed
        but its value is not acceptable (too large, an integer beyond float
        range): the call is ``bad_return`` and the job goes on.
    """

    def __init__(self, message: str, fatal: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.fatal = fatal


UNREADABLE = "the grader could not read its answer (does your code write to a file descriptor it did not open?)"
"""The message of a frame that is not what the worker writes."""


def _size_words(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.0f} KiB"


def check_length(size: int, limit: int, budget: ResultBudget | None = None, what: str = "call") -> None:
    """Refuse a frame whose length prefix exceeds ``limit``, before any of it is read.

    Parameters
    ----------
    size : int
        The frame's length prefix, in bytes.
    limit : int
        The frame's byte limit (`frame_limit` for a call frame).
    budget : ResultBudget or None
        The call's budget; None: `DEFAULT_BUDGET` (a call without a
        reference value), or a frame that is not a call's.
    what : str
        ``"call"``, ``"import"`` or ``"probe"``.

    Raises
    ------
    BoundaryError
        (fatal) If ``size > limit``.
    """
    if size <= limit:
        return
    if what != "call":
        # The worker's own import and probe messages are small: a longer one is bytes the submission
        # wrote on the grader's channel.
        raise BoundaryError(
            f"the grader could not read the job's {what} message (it announced "
            f"{_size_words(size)}): does your code write to a file descriptor it did not open?"
        )
    if budget is None:
        raise BoundaryError(f"the result is larger than the grader accepts ({_size_words(size)})")
    raise BoundaryError(f"the result is far larger than the reference's ({_size_words(size)})")


class _BigInt(ValueError):
    def __init__(self, digits: str) -> None:
        super().__init__(digits)
        self.digits = digits


def _no_constant(name: str) -> Any:
    raise ValueError(f"the literal {name} is not accepted")


def _parse_int(text: str) -> int:
    digits = len(text) - (text[:1] == "-")
    if digits > 330:  # beyond any float; int() of it would cost time (and fail past 4300 digits)
        raise _BigInt(str(digits))
    value = int(text)
    if digits >= 309:
        try:
            float(value)
        except OverflowError:
            raise _BigInt(str(digits)) from None
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_int=_parse_int)
_SURROGATE = re.compile("[\ud800-\udfff]")
_FLOATS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def clean_text(value: Any, limit: int) -> str:
    """A frame's string, cut to ``limit`` characters, lone surrogates replaced by U+FFFD.

    Raises
    ------
    BoundaryError
        (fatal) If ``value`` is not a string.
    """
    if type(value) is not str:
        raise BoundaryError(UNREADABLE)
    text: str = value[:limit]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text


class _Count:
    __slots__ = ("blob", "budget", "items", "offset")

    def __init__(self, budget: ResultBudget, blob: memoryview | None = None) -> None:
        self.items = 0
        self.budget = budget
        self.blob = blob  # the arrays' bytes after the frame's JSON (None: a frame without any)
        self.offset = 0


def _array(header: Any, depth: int, count: _Count, reference: bool) -> Any:
    """Validate one binary array's header against the budget and take its bytes from the frame."""
    if (
        type(header) is not list
        or len(header) != 2
        or type(header[0]) is not str
        or header[0] not in WIRE_DTYPES
        or type(header[1]) is not list
        or not header[1]
        or len(header[1]) > MAX_BUDGET.max_depth
        or any(type(n) is not int or n < 0 for n in header[1])
    ):
        raise BoundaryError(UNREADABLE)
    dtype, shape = header[0], tuple(header[1])
    if depth + len(shape) > count.budget.max_depth:
        raise BoundaryError(f"the result is nested more than {count.budget.max_depth} lists deep", fatal=False)
    items, lists = 0, 1
    for n in shape:  # as _array_items, stopping as soon as the budget is exceeded
        items += lists
        lists *= n
        if count.items + items + lists > count.budget.max_items:
            raise BoundaryError(
                f"{_larger(reference)} (more than {count.budget.max_items} numbers and lists)", fatal=False
            )
    count.items += items + lists
    nbytes = lists * WIRE_DTYPES[dtype]
    if count.blob is None or count.offset + nbytes > len(count.blob):
        raise BoundaryError(UNREADABLE)  # the bytes the header announces are not there
    import numpy as np

    array = np.frombuffer(count.blob, dtype=dtype, count=lists, offset=count.offset).reshape(shape)
    count.offset += nbytes
    if lists < LIST_BELOW_ITEMS:
        return array.tolist()
    array = array.astype(array.dtype.newbyteorder("="), copy=False)
    array.flags.writeable = False
    return array


def _larger(reference: bool) -> str:
    return (
        "the result is far larger than the reference's" if reference else "the result is larger than the grader accepts"
    )


_NUMBERS = frozenset({float, int, bool})
_LIST = frozenset({list})


def _check_row(row: list[Any], kinds: set[type]) -> None:
    """Refuse a row of numbers holding an overflowed float (1e999); its sum is computed in C."""
    if float in kinds:
        total = sum(row)
        if total - total != 0.0 and any(type(x) is float and x - x != 0.0 for x in row):
            raise BoundaryError("the result holds a number too large to be a float", fatal=False)


def _value(value: Any, depth: int, count: _Count, reference: bool) -> Any:
    """Validate one value of a call frame; return it with non-finite floats decoded."""
    kind = type(value)
    count.items += 1
    if kind is float:
        if value - value != 0.0:  # only an overflowing literal (1e999) gets here: NaN literals are refused
            raise BoundaryError("the result holds a number too large to be a float", fatal=False)
        return value
    if kind is int or kind is bool:
        return value
    if kind is list:
        if depth >= count.budget.max_depth:
            raise BoundaryError(f"the result is nested more than {count.budget.max_depth} lists deep", fatal=False)
        count.items += len(value)
        if count.items > count.budget.max_items:
            raise BoundaryError(
                f"{_larger(reference)} (more than {count.budget.max_items} numbers and lists)", fatal=False
            )
        kinds = set(map(type, value))
        if kinds <= _NUMBERS:  # a row of numbers: checked in C, unless it holds an overflow
            _check_row(value, kinds)
            return value
        if kinds == _LIST and depth + 2 <= count.budget.max_depth:  # a matrix: its rows checked here
            rows = 0
            for row in value:
                row_kinds = set(map(type, row))
                if not row_kinds <= _NUMBERS:
                    break
                _check_row(row, row_kinds)
                rows += 1
                count.items += len(row)
            else:
                if count.items > count.budget.max_items:
                    raise BoundaryError(
                        f"{_larger(reference)} (more than {count.budget.max_items} numbers and lists)", fatal=False
                    )
                return value
            for row in value[:rows]:  # uncounted again: the rows are walked one by one below
                count.items -= len(row)
        count.items -= len(value)  # counted again, one by one
        return [_value(x, depth + 1, count, reference) for x in value]
    if kind is dict and len(value) == 1 and type(value.get(FLOAT_KEY)) is str and value[FLOAT_KEY] in _FLOATS:
        return _FLOATS[value[FLOAT_KEY]]
    if kind is dict and len(value) == 1 and ARRAY_KEY in value:
        count.items -= 1  # counted as the array's outer list
        return _array(value[ARRAY_KEY], depth, count, reference)
    if kind is str:
        raise BoundaryError("the result holds a string", fatal=False)
    if value is None:
        raise BoundaryError("the result holds null (None)", fatal=False)
    raise BoundaryError(f"the result holds a {'dict' if kind is dict else kind.__name__}", fatal=False)


def _plain(value: Any, depth: int, count: _Count) -> Any:
    """Validate the data of a probe frame: dicts with string keys, lists, numbers, bools, strings."""
    count.items += 1
    if count.items > count.budget.max_items or depth > count.budget.max_depth:
        raise BoundaryError(UNREADABLE)
    kind = type(value)
    if kind in (bool, int) or value is None:
        return value
    if kind is float:
        return value if value - value == 0.0 else 0.0
    if kind is str:
        return clean_text(value, MAX_TEXT)
    if kind is list:
        return [_plain(x, depth + 1, count) for x in value]
    if kind is dict:
        return {clean_text(k, MAX_NAME): _plain(v, depth + 1, count) for k, v in value.items()}
    return _value(value, depth, count, False)  # a {"$float": ...}


CALL_KEYS = {
    "returned": frozenset({"event", "status", "value", "mutated"}),
    "raised": frozenset({"event", "status", "type", "value_error", "message", "where", "mutated"}),
    "not_implemented": frozenset({"event", "status", "message", "mutated"}),
    "bad_return": frozenset({"event", "status", "message", "mutated"}),
}
"""The keys a call frame may hold, by status."""
_IMPORT_KEYS = frozenset({"event", "ok", "type", "message", "where"})
PROBE_BUDGET = ResultBudget(max_items=4096, max_depth=4, max_bytes=IMPORT_FRAME_BYTES)


def encode_nonfinite(value: Any) -> Any:
    """Plain data with each NaN or infinity replaced by its ``{"$float": ...}`` encoding (as the worker writes it)."""
    if type(value) is float and value - value != 0.0:
        return {FLOAT_KEY: "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if type(value) is list or type(value) is tuple:
        return [encode_nonfinite(v) for v in value]
    if type(value) is dict:
        return {k: encode_nonfinite(v) for k, v in value.items()}
    return value


def plain_data(value: Any) -> Any:
    """A decoded value with every numpy array (a large binary one, see "Binary arrays") as nested lists.

    What code that writes values as JSON (caches, digests) needs; other
    values are returned as they are (lists are copied only when they hold
    an array).
    """
    if type(value) is list:
        converted = [plain_data(v) for v in value]
        return value if all(a is b for a, b in zip(converted, value)) else converted
    if hasattr(value, "tolist") and hasattr(value, "dtype"):
        return value.tolist()
    return value


def _mutated(value: Any) -> tuple[int, ...]:
    if type(value) is not list or len(value) > MAX_MUTATED or any(type(i) is not int for i in value):
        raise BoundaryError(UNREADABLE)
    return tuple(sorted({i for i in value if 0 <= i < MAX_MUTATED}))


def decode_frame(data: bytes | bytearray, expect: str = "call", budget: ResultBudget | None = None) -> dict[str, Any]:
    """Parse and validate one frame's bytes (without its length prefix).

    Parameters
    ----------
    data : bytes
        The frame, already checked by `check_length`.
    expect : str
        The frame the grader waits for: ``"import"``, ``"call"`` or
        ``"probe"``; any other event type is refused.
    budget : ResultBudget or None
        The call's budget (None: `DEFAULT_BUDGET`).

    Returns
    -------
    dict
        A fresh dict holding only known keys, every one present:
        import: ``event, ok, type, message, where``; call: ``event,
        status, value, type, value_error, message, where, mutated`` (a
        sorted tuple); probe: ``event, layers``.

    Raises
    ------
    BoundaryError
        Fatal when the bytes are not a frame of the expected kind; not
        fatal when a call's value breaks its budget or holds what is not
        a number (its message says what).
    """
    reference = budget is not None
    budget = budget or DEFAULT_BUDGET
    blob = None
    if data[:1] == b"\x00":  # JSON, then the bytes of the arrays it names (see "Binary arrays")
        size = int.from_bytes(data[1:5], "big")
        if expect != "call" or len(data) < 5 or 5 + size > len(data):
            raise BoundaryError(UNREADABLE)
        blob = memoryview(data)[5 + size :]
        data = data[5 : 5 + size]
    if expect == "call":
        # Parsed items cannot outnumber these bytes; refuse before parsing what would exceed the budget.
        tokens = data.count(b",") + data.count(b"[") + data.count(b"{")
        if tokens > budget.max_items + FRAME_OVERHEAD_BYTES:
            raise BoundaryError(f"{_larger(reference)} (more than {budget.max_items} numbers and lists)", fatal=False)
    try:
        frame = _DECODER.decode(data.decode("utf-8"))
    except _BigInt as exc:
        raise BoundaryError(
            f"the result holds an integer too large to be a float ({exc.digits} digits)", fatal=False
        ) from None
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: nested too deep to parse
        raise BoundaryError(UNREADABLE) from None
    if type(frame) is not dict or frame.get("event") != expect:
        raise BoundaryError(UNREADABLE)
    if expect == "import":
        if not frame.keys() <= _IMPORT_KEYS or type(frame.get("ok")) is not bool:
            raise BoundaryError(UNREADABLE)
        if frame["ok"] and len(frame) != 2:
            raise BoundaryError(UNREADABLE)
        return {
            "event": "import",
            "ok": frame["ok"],
            "type": clean_text(frame.get("type", "Error"), MAX_NAME) or "Error",
            "message": clean_text(frame.get("message", ""), MAX_TEXT),
            "where": clean_text(frame.get("where", ""), MAX_WHERE),
        }
    if expect == "probe":
        if frame.keys() != {"event", "layers"} or type(frame["layers"]) is not dict:
            raise BoundaryError(UNREADABLE)
        return {"event": "probe", "layers": _plain(frame["layers"], 0, _Count(PROBE_BUDGET))}
    status = frame.get("status")
    allowed = CALL_KEYS.get(status) if type(status) is str else None
    if allowed is None or not frame.keys() <= allowed or (status == "returned" and "value" not in frame):
        raise BoundaryError(UNREADABLE)
    value_error = frame.get("value_error", False)
    if type(value_error) is not bool:
        raise BoundaryError(UNREADABLE)
    out = {
        "event": "call",
        "status": status,
        "value": None,
        "type": clean_text(frame.get("type", ""), MAX_NAME),
        "value_error": value_error,
        "message": clean_text(frame.get("message", ""), MAX_TEXT),
        "where": clean_text(frame.get("where", ""), MAX_WHERE),
        "mutated": _mutated(frame.get("mutated", [])),
    }
    if status == "returned":
        count = _Count(budget, blob)
        out["value"] = _value(frame["value"], 0, count, reference)
        if blob is not None and count.offset != len(blob):
            raise BoundaryError(UNREADABLE)  # bytes no array header announced
    elif blob is not None:
        raise BoundaryError(UNREADABLE)
    return out


class FrameMemo(BudgetTable[tuple[bytes, str, "ResultBudget | None"], tuple[dict[str, Any], bytes | None]]):
    """`decode_frame`'s answers for frames seen before in a run: equal bytes, an equal (fresh) frame.

    A class's jobs send the same frames again and again (the same shapes,
    the same ``ValueError``, the same right or wrong values). A frame is
    decoded and validated once; a frame with the same bytes, for the same
    expectation and budget, gets a copy of that answer: its own dict and
    its own lists (numbers, strings and the read-only large arrays are
    shared), so no consumer can change another's: a value of lists and
    numbers only is kept as its pickle too, and each copy is made from it in
    C. Refusals are not kept.
    At most `MAX_BYTES` of frames are kept as keys; past that the table
    starts again. Thread-safe.
    """

    MAX_BYTES = 2 << 20
    """Bytes of frames kept as keys, at most (2 MiB)."""

    LARGEST = 16 << 10
    """Frames longer than this are decoded each time (their copies would cost about as much)."""

    def decode(self, data: bytes, expect: str = "call", budget: ResultBudget | None = None) -> dict[str, Any]:
        """`decode_frame` (same arguments, same answer, same errors), from the table when it can."""
        if len(data) > self.LARGEST:
            return decode_frame(data, expect, budget)
        kept, pickled = self._answer(data, expect, budget)
        frame = dict(kept)
        if pickled is not None:
            frame["value"] = pickle.loads(pickled)  # noqa: S301 - pickled above, from validated data
        elif type(frame.get("value")) is list:
            frame["value"] = fresh(frame["value"])
        elif type(frame.get("layers")) is dict:
            frame["layers"] = fresh(frame["layers"])
        return frame

    def shared(self, data: bytes, expect: str = "call", budget: ResultBudget | None = None) -> dict[str, Any]:
        """`decode` without its copy: a call frame seen before is the very frame kept, shared, never to be changed.

        How the channel reads every answer (`grader.execution.channel.JobChannel`): its frames
        become `grader.models.CallResult` values, which no grader code changes in place, and the
        judges get values of their own (`grader.execution.channel.own_results`). Other frames (an
        import's, a probe's) and frames longer than `LARGEST` are decoded as `decode` does.
        """
        if expect != "call" or len(data) > self.LARGEST:
            return self.decode(data, expect, budget)
        return self._answer(data, expect, budget)[0]

    def _answer(self, data: bytes, expect: str, budget: ResultBudget | None) -> tuple[dict[str, Any], bytes | None]:
        """The kept answer for ``data`` (decoded and kept now if it is new): the frame, and its value's pickle."""
        key = (data, expect, budget)
        kept = self._table.get(key)  # `_kept`, without its call: once per frame of every job
        if kept is None:
            decoded = decode_frame(data, expect, budget)
            value = decoded.get("value")
            kept = (decoded, pickle.dumps(value, 5) if type(value) is list and _lists_only(value) else None)
            self._keep(key, len(data), kept)
        return kept


def _lists_only(value: list[Any]) -> bool:
    """Whether a decoded value holds lists and numbers only (no read-only array, which a copy must share)."""
    kinds = set(map(type, value))
    if kinds <= _NUMBERS:
        return True
    return kinds <= _NUMBERS | _LIST and all(_lists_only(v) for v in value if type(v) is list)


def fresh(value: Any) -> Any:
    """A copy of decoded data: new lists and dicts, the same numbers, strings and read-only arrays.

    Parameters
    ----------
    value : object
        Data as `decode_frame` returns it (lists, dicts, numbers, strings, read-only arrays), nested.

    Returns
    -------
    object
        ``value`` with every list and dict made anew, at every depth; anything else shared.
    """
    kind = type(value)
    if kind is list:
        kinds = set(map(type, value))
        if list not in kinds and dict not in kinds:
            return value[:]
        return [fresh(v) for v in value]
    if kind is dict:
        return {k: fresh(v) for k, v in value.items()}
    return value


FRAMES = FrameMemo()
"""The grader's one table of decoded frames (`FrameMemo`)."""
