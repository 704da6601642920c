"""Tolerant comparison of a submission's returned data with expected values.

Everything here runs in the grader's process on plain data that came back
from the child process as JSON: nested lists of numbers. Nothing a student
wrote is called.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_WHY",
    "EPS",
    "FLOOR_WHY",
    "Mismatch",
    "as_array",
    "compare",
    "format_value",
    "part_names",
    "perturb",
    "rounding_floor",
    "split_parts",
    "tolerance_limit",
]


class Mismatch(Exception):
    """Raised by the helpers below when returned data has the wrong form.

    Parameters
    ----------
    message : str
        A sentence for the student, e.g. ``"weights has shape (3, 2), expected (3, 5)"``.
    details : tuple of (str, str)
        Evidence shown for visible checks only.
    """

    def __init__(self, message: str, details: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


def _py(value: Any, depth: int = 0, multiline: bool = True) -> str:
    """Python-style text of plain data, long lists shortened."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        return repr(float(f"{value:.10g}")) if math.isfinite(value) else repr(value)
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, (list, tuple)):
        items = [_py(v, depth + 1, multiline) for v in value[:MAX_SHOWN_ITEMS]]
        if len(value) > MAX_SHOWN_ITEMS:
            items.append(f"… {len(value) - MAX_SHOWN_ITEMS} more")
        if multiline and depth == 0 and value and all(isinstance(v, (list, tuple)) for v in value):
            return "[" + ",\n ".join(items) + "]"
        return "[" + ", ".join(items) + "]"
    return repr(value)[:200]


MAX_SHOWN_ITEMS = 24


def format_value(value: Any, limit: int = 600, multiline: bool = True) -> str:
    """Render data for a report as Python literals, shortened to ``limit`` characters.

    Matrices are shown one row per line unless ``multiline`` is False; floats with up to 10 significant
    digits; lists longer than 24 items are cut with a count of the rest.
    """
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    text = _py(value, multiline=multiline)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def as_array(name: str, data: Any) -> np.ndarray:
    """Convert returned JSON data to a float64 array.

    Parameters
    ----------
    name : str
        What the data is (``"outputs"``), for messages.
    data : object
        Nested lists of numbers, or a number.

    Returns
    -------
    ndarray of float64

    Raises
    ------
    Mismatch
        If the data is not numeric or is ragged.
    """
    if data is None:
        raise Mismatch(f"{name} is None; return numbers")
    if isinstance(data, str):
        raise Mismatch(f"{name} is a string; return numbers")
    if _has_bool(data):
        raise Mismatch(f"{name} holds True/False where numbers are expected")
    try:
        arr = np.asarray(data, dtype=np.float64)
    except OverflowError:
        raise Mismatch(f"{name} holds an integer too large for a float") from None
    except (TypeError, ValueError):
        if isinstance(data, list) and data and all(isinstance(r, list) for r in data):
            widths = sorted({len(r) for r in data})
            raise Mismatch(f"{name} is ragged: its rows have lengths {widths}") from None
        raise Mismatch(f"{name} is not made of numbers") from None
    return arr


_PLAIN_NUMBERS = frozenset({float, int})


def _has_bool(data: Any) -> bool:
    """Whether nested lists hold a bool anywhere."""
    if type(data) is list:
        kinds = set(map(type, data))  # a row at C speed: most rows are numbers only
        if kinds <= _PLAIN_NUMBERS:
            return False
        if bool in kinds:
            return True
        return any(_has_bool(item) for item in data if type(item) is list or isinstance(item, np.ndarray))
    if isinstance(data, np.ndarray):  # a large array that came as binary
        return bool(data.dtype == np.bool_)
    return isinstance(data, bool)


def part_names(function: str, returns: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Names of the parts of ``function``'s result, or ``("result",)``."""
    return returns.get(function, ("result",))


def split_parts(names: Sequence[str], got: Any) -> dict[str, Any]:
    """Split a returned value into its named parts.

    Raises
    ------
    Mismatch
        If a tuple result has the wrong number of parts.
    """
    if len(names) == 1:
        return {names[0]: got}
    if isinstance(got, np.ndarray) and got.ndim:  # a large array that came as binary: its rows, as a list would be
        got = list(got) if got.ndim > 1 else got.tolist()
    if not isinstance(got, list) or len(got) != len(names):
        what = f"a sequence of {len(got)} items" if isinstance(got, list) else type(got).__name__
        raise Mismatch(f"expected a tuple ({', '.join(names)}), got {what}")
    return dict(zip(names, got))


def tolerance_limit(expected: Any, rtol: float, atol: float, floor: Any = None) -> np.ndarray:
    """How far each element may be from ``expected`` in `compare`: ``atol + rtol * |expected| + floor``.

    The same sums, in the same order, as written out (``rtol |e|``, then ``atol``, then the
    floor); made in place, so a 512x512 part costs one array.
    """
    exp = np.asarray(expected, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        limit: np.ndarray = np.asarray(np.abs(exp))
        limit *= rtol
        limit += atol
        if floor is not None:
            limit += np.broadcast_to(np.asarray(floor, dtype=np.float64), exp.shape)
    return limit


SCRATCH_KEPT_ELEMENTS = 1 << 19
"""`compare` keeps its work arrays (a float and a bool array, per thread) for parts up to this many
elements (4.5 MiB): a large part's comparison then touches no fresh memory, which in a grading
thread costs more than the arithmetic (page faults on every new array)."""

_SCRATCH = threading.local()


def _scratch(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """A float64 and a bool array of ``shape`` to compute in (their contents are not kept)."""
    size = math.prod(shape)
    if size > SCRATCH_KEPT_ELEMENTS:
        return np.empty(shape), np.empty(shape, dtype=bool)
    kept = getattr(_SCRATCH, "arrays", None)
    if kept is None or kept[0].size < size:
        kept = _SCRATCH.arrays = (np.empty(size), np.empty(size, dtype=bool))
    return kept[0][:size].reshape(shape), kept[1][:size].reshape(shape)


BLOCK_ELEMENTS = 1 << 15
"""`compare` first checks a large part this many elements at a time (`_within_by_blocks`)."""


def _within_by_blocks(arr: np.ndarray, exp: np.ndarray, limit: np.ndarray) -> bool:
    """Whether ``|arr - exp| <= limit`` holds everywhere, worked out a block of `BLOCK_ELEMENTS` at a
    time, for a part of two blocks or more whose three arrays (of one shape) are C-contiguous; False
    for any other part, and for one that fails (`compare` then works the whole part out).

    The same operations as `compare`'s (a subtraction, its absolute value, the comparison), element
    for element, so the same answer; but each block's intermediate values stay in the CPU's cache
    (two small arrays per thread), where one pass per operation over a 512x512 part streams 2 MiB
    arrays through memory three times: about a third less time for a part that passes.
    """
    if (
        exp.size < 2 * BLOCK_ELEMENTS
        or not isinstance(limit, np.ndarray)
        or not (arr.flags.c_contiguous and exp.flags.c_contiguous and limit.flags.c_contiguous)
    ):
        return False
    kept = getattr(_SCRATCH, "block", None)
    if kept is None:
        kept = _SCRATCH.block = (np.empty(BLOCK_ELEMENTS), np.empty(BLOCK_ELEMENTS, dtype=bool))
    got, want, most = arr.reshape(-1), exp.reshape(-1), limit.reshape(-1)
    size = got.size
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, size, BLOCK_ELEMENTS):
            end = min(size, start + BLOCK_ELEMENTS)
            err, ok = kept[0][: end - start], kept[1][: end - start]
            np.subtract(got[start:end], want[start:end], out=err)
            np.abs(err, out=err)
            np.less_equal(err, most[start:end], out=ok)
            if not ok.all():
                return False
    return True


def _index(name: str, flat: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return name
    return name + "".join(f"[{i}]" for i in np.unravel_index(flat, shape))


def compare(
    name: str,
    expected: Any,
    got: Any,
    rtol: float,
    atol: float,
    floor: Any = None,
    why: str = "",
    limit: np.ndarray | None = None,
) -> None:
    """Compare one returned part with its expected value.

    Integers are compared exactly; floats with
    ``abs(got - expected) <= atol + rtol * abs(expected) + floor``,
    elementwise, and a NaN or infinity where a finite number is expected
    always fails. A failure's message says the accuracy asked and why.

    Parameters
    ----------
    name : str
        The part's name, used in messages (``"weights"``).
    expected : int, float or ndarray
    got : object
        Returned JSON data.
    rtol, atol : float
        Relative and absolute tolerance.
    floor : ndarray or float, optional
        A further absolute allowance per element (the shape of
        ``expected``): what float64 rounding can move the result by on these
        inputs (`rounding_floor`). Zero by default.
    why : str, optional
        The reason for the tolerance, in words, for the message
        (default `DEFAULT_WHY`).
    limit : ndarray, optional
        ``tolerance_limit(expected, rtol, atol, floor)``, when the caller
        keeps it for a part it compares again and again (a large one).

    Raises
    ------
    Mismatch
        With the largest error and where it is, when they differ.
    """
    if isinstance(expected, (int, np.integer)) and not isinstance(expected, bool):
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != expected:
            raise Mismatch(
                f"{name} is wrong",
                (("expected", format_value(int(expected))), ("got", format_value(got))),
            )
        return
    exp = np.asarray(expected, dtype=np.float64)
    arr = as_array(name, got)
    if arr.shape != exp.shape:
        raise Mismatch(
            f"{name} has shape {arr.shape}, expected {exp.shape}",
            (("expected shape", str(exp.shape)), ("got shape", str(arr.shape)), ("got", format_value(arr))),
        )
    if limit is None or np.shape(limit) != exp.shape:
        limit = tolerance_limit(exp, rtol, atol, floor)
    if _within_by_blocks(arr, exp, limit):
        return  # every element within its limit; else the whole part is worked out below, for the message
    err, ok = _scratch(exp.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        # In place from here: arr - exp, its absolute value and the comparison, in a float and a bool
        # array as large as the part (the thread's own, kept for its next part of this size or less).
        np.subtract(arr, exp, out=err)
        np.abs(err, out=err)
        np.less_equal(err, limit, out=ok)
    if ok.all():
        return
    bad = ~ok
    extra = np.zeros(exp.shape) if floor is None else np.broadcast_to(np.asarray(floor, dtype=np.float64), exp.shape)
    nonfinite = bad & ~np.isfinite(arr)
    if nonfinite.any():
        flat = int(np.flatnonzero(nonfinite)[0])
        where = _index(name, flat, exp.shape)
        value = float(arr.reshape(-1)[flat])
        message = f"{where} is {value!r} where a finite number is expected"
        largest = "not finite"
    else:
        flat = int(np.argmax(np.where(bad, err, -1.0)))
        where = _index(name, flat, exp.shape)
        largest = f"{float(err.reshape(-1)[flat]):.6g}"
        message = f"{name} differs from the expected value by up to {largest} (at {where})"
    asked = f"rtol={rtol:g}, atol={atol:g}"
    most = float(np.max(extra)) if extra.size else 0.0
    if most > 0:
        asked += f", plus up to {most:.3g} for float64 rounding"
    message += f"; asked: within {asked} ({why or DEFAULT_WHY})"
    details = (
        ("expected", format_value(exp if exp.shape else float(exp))),
        ("got", format_value(arr if arr.shape else float(arr))),
        ("largest error", largest),
        ("where", where),
        ("tolerance", asked),
    )
    raise Mismatch(message, details)


EPS = float(np.finfo(np.float64).eps)
"""float64's machine epsilon, 2**-52 (about 2.2e-16)."""

DEFAULT_WHY = "float64 code is accurate to about 1e-13 here; float16 or a wrong formula is not"
"""Why the default tolerances (rtol 1e-6, atol 1e-9) are what a check asks."""

FLOOR_WHY = (
    "the default, widened by what correct float64 code may be off by on inputs of this size: near a "
    "score of 1e12 float64's spacing is about 1e-4, and a log-sum-exp route rounds to it"
)
"""Why a computed `rounding_floor` widens a check's tolerance."""

SAFETY = 8.0
"""Factor on the measured perturbation effect in `rounding_floor` (it is sampled, not a bound)."""


def perturb(value: Any, rng: np.random.Generator, rel: float) -> Any:
    """A copy of plain data with every float multiplied by ``1 + d``, ``|d| = rel`` with a random sign.

    Integers, booleans and None are kept: they are sizes, flags and masks, not measured values.
    """
    if isinstance(value, list):
        return [perturb(v, rng, rel) for v in value]
    if isinstance(value, tuple):
        return tuple(perturb(v, rng, rel) for v in value)
    if isinstance(value, float):
        return value * (1.0 + rel * (1.0 if rng.random() < 0.5 else -1.0))
    return value


def _signed(value: Any, pattern: int, counter: list[int], rel: float) -> Any:
    """A copy of plain data with float number i multiplied by ``1 + rel`` or ``1 - rel``, as bit
    ``pattern`` of i says (so that every two floats move apart in one pattern or another)."""
    if isinstance(value, list):
        return [_signed(v, pattern, counter, rel) for v in value]
    if isinstance(value, tuple):
        return tuple(_signed(v, pattern, counter, rel) for v in value)
    if isinstance(value, float):
        index = counter[0]
        counter[0] += 1
        return value * (1.0 + (rel if (index >> pattern) & 1 else -rel))
    return value


def _terms(value: Any) -> int:
    """The longest list in nested data: the most terms one sum over it can have."""
    if not isinstance(value, (list, tuple)):
        return 1
    return max([len(value), *(_terms(v) for v in value)])


def rounding_floor(
    fn: Any,
    args: Sequence[Any],
    expected: dict[str, Any],
    names: Sequence[str],
    seed: int,
    trials: int = 4,
) -> dict[str, np.ndarray]:
    """What float64 rounding can move each part of a result by, measured on the inputs themselves.

    A backward-stable float64 route (max subtraction, log-sum-exp, renormalising, ``math.fsum``)
    computes the exact result of inputs perturbed by a few units in the last place, ``k * EPS``
    relative with ``k`` the longest sum (at least 4). So the reference ``fn`` is called on
    such perturbations (sign patterns by the bits of each float's index, so that every two
    inputs move apart in one of them, then ``trials`` with random signs, seeded) and each
    element's largest change,
    times `SAFETY`, is the floor: about 0 on well-conditioned inputs, about 1e-3 for weights of
    scores near 1e12, where float64's spacing is 1e-4.

    Parameters
    ----------
    fn : callable
        The trusted reference function.
    args : sequence
        The check's arguments (plain data).
    expected : dict of str to ndarray
        The parts to measure, by name (their shapes; a hand value may stand
        for the reference's result: the changes are measured from the
        reference's own result on ``args``).
    names : sequence of str
        The names of the result's parts, in order.
    seed : int
        Seeds the perturbations (a check's floor is the same on every run).
    trials : int, optional

    Returns
    -------
    dict of str to ndarray
        Per part in ``expected``, an array of its shape (zeros where nothing moves); a part whose
        perturbed value is not finite or changes shape is left at zero.
    """
    rng = np.random.default_rng(seed)
    rel = max(4, _terms(list(args))) * EPS
    floats = [0]
    _signed(list(args), 0, floats, 0.0)  # count them
    patterns = max(1, int(floats[0]).bit_length())
    floor = {k: np.zeros(np.shape(v)) for k, v in expected.items()}
    try:
        base = fn(*args)
    except Exception:  # noqa: BLE001 - the caller reports a reference that fails on the inputs
        return floor
    base_parts = dict(zip(names, base if len(names) > 1 else (base,)))
    for trial in range(patterns + trials):
        # Sign patterns first (each pair of inputs moves apart in one of them), then random signs.
        moved = _signed(list(args), trial, [0], rel) if trial < patterns else perturb(list(args), rng, rel)
        try:
            value = fn(*moved)
        except Exception:  # noqa: BLE001, S112 - a perturbed input the reference refuses: no evidence
            continue
        parts = value if len(names) > 1 else (value,)
        for name, part in zip(names, parts):
            if name not in floor:
                continue
            try:
                arr = np.asarray(part, dtype=np.float64)
            except (TypeError, ValueError):
                continue
            ref = np.asarray(base_parts[name], dtype=np.float64)
            if arr.shape != ref.shape or ref.shape != floor[name].shape or not np.all(np.isfinite(arr)):
                continue
            floor[name] = np.maximum(floor[name], SAFETY * np.abs(arr - ref))
    return floor


def is_close_scalar(a: float, b: float, rtol: float, atol: float) -> bool:
    """``math.isclose`` with numpy's tolerance rule (finite values only)."""
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= atol + rtol * abs(b)
