"""Helpers a check kind compares named result parts with: tolerances, rounding floors, the contract gate."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.compare import (
    DEFAULT_WHY,
    FLOOR_WHY,
    Mismatch,
    as_array,
    compare,
    format_value,
    part_names,
    rounding_floor,
    split_parts,
)
from grader.kinds.context import KindContext, guarded_call, normalize
from grader.models import Check, Verdict

DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-9
"""Default tolerances of ``compare`` and ``literal``; why: `grader.compare.DEFAULT_WHY`. A check's
inputs may widen them (`with_floor`), never narrow them."""
ROW_SUM_ATOL = 1e-9
"""How far a row of a distribution may sum from 1: m float64 weights, each within a few ulps, sum
to 1 within about m * 2.2e-16; 1e-9 refuses nothing float64 can do and any real normalisation bug."""
FLOOR_KEY = "~floor"
"""Key of a prepared expectation holding the float64 rounding floor of each part (when it matters)."""
REF_KEY = "~ref"
"""Key of a property check's prepared expectation holding the reference's result, for the contract gate."""
ORDER_MARGIN = 1e-3
"""Two reference weights ordered by more than this relative margin must be ordered the same way
in a result for it to meet the contract (a larger score gets a larger weight)."""

GATE_NOTE = "a property pays only for a result that meets the basic contract"
"""Ends the message of a property check failed by its contract gate (`gated`): the check's own hint,
about the property, does not apply then (`grader.reporting.feedback.hint_for`)."""


def tolerances(check: Check) -> tuple[float, float]:
    """The check's ``(rtol, atol)``."""
    return float(check.params.get("rtol", DEFAULT_RTOL)), float(check.params.get("atol", DEFAULT_ATOL))


def compare_parts(
    check: Check, ctx: KindContext, expected: dict[str, Any], got: Any, function: str | None = None
) -> Verdict:
    """Compare the named parts in ``expected`` with the returned value ``got``."""
    rtol, atol = tolerances(check)
    floors = expected.get(FLOOR_KEY, {})
    why = check.params.get("why") or (FLOOR_WHY if floors else DEFAULT_WHY)
    try:
        parts = split_parts(part_names(function or check.function, ctx.exercise.returns), got)
        for name, value in expected.items():
            if name.startswith("~"):
                continue
            floor = floors.get(name)
            compare(name, value, parts[name], rtol, atol, floor, why, ctx.limit_for(value, rtol, atol, floor))
    except Mismatch as m:
        return Verdict("failed", m.message, m.details)
    return Verdict("passed", fraction=1.0)


def named(check: Check, ctx: KindContext, value: Any, select: Sequence[str] | None = None) -> dict[str, Any]:
    """Name the parts of a (reference) result and keep those in ``select``."""
    names = part_names(check.function, ctx.exercise.returns)
    parts = dict(zip(names, value)) if len(names) > 1 else {names[0]: value}
    if select:
        unknown = [s for s in select if s not in parts]
        if unknown:
            raise ctx.fail(
                check, "select", f"unknown part(s) {unknown}; the result has {list(names)}: select among them"
            )
        parts = {k: parts[k] for k in select}
    return parts


def reference_shapes(check: Check, ctx: KindContext, args: Sequence[Any]) -> dict[str, tuple[int, ...]]:
    """Shape of each part of the reference's result on ``args``."""
    return {k: np.shape(v) for k, v in named(check, ctx, ctx.call_reference(check, args)).items()}


def shaped_parts(check: Check, ctx: KindContext, got: Any, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Split a returned value into float arrays and check each part's shape.

    Raises
    ------
    grader.compare.Mismatch
        If the value has the wrong parts, non-numeric data or a part whose
        shape differs from the reference's.
    """
    parts = split_parts(part_names(check.function, ctx.exercise.returns), got)
    arrays = {}
    for name, shape in shapes.items():
        if name.startswith("~"):  # what judging keeps beside the shapes (`REF_KEY`, ...)
            continue
        arr = as_array(name, parts[name])
        if arr.shape != shape:
            raise Mismatch(
                f"{name} has shape {arr.shape}, expected {shape}",
                (("expected shape", str(shape)), ("got shape", str(arr.shape))),
            )
        arrays[name] = arr
    return arrays


def with_floor(check: Check, ctx: KindContext, args: Sequence[Any], expected: dict[str, Any]) -> dict[str, Any]:
    """``expected`` plus, under `FLOOR_KEY`, each part's float64 rounding floor on ``args`` where it matters.

    The floor is what correct float64 code may be off by on these inputs: the course pack's
    error analysis when it states one (``ctx.error_bound``), otherwise what rounding of the
    inputs by a few ulps moves the reference's result (`grader.compare.rounding_floor`). A
    check's tolerance is its ``rtol``/``atol`` plus that floor (kept only where it exceeds
    them), so every correct float64 route passes on any inputs, however large, while the check
    stays as strict as its inputs allow.

    Raises
    ------
    grader.errors.SpecError
        If the floor is so large (over 1e-2 of the largest expected value) that the check would
        prove nothing: the inputs are too ill-conditioned for float64; choose others.
    """
    floats = {k: v for k, v in expected.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"}
    if not floats:
        return expected
    fn = ctx.reference_function(check)
    names = part_names(check.function, ctx.exercise.returns)
    reference = named(check, ctx, ctx.call_reference(check, args))
    floor = ctx.error_bound(check.function, args, reference) if ctx.error_bound is not None else None
    if floor is None:
        seed = zlib.crc32(f"{ctx.exercise.id}/{check.id}".encode())
        floor = rounding_floor(lambda *a: normalize(guarded_call(fn, a)), args, floats, names, seed)
    floor = {k: np.asarray(v, dtype=np.float64) for k, v in floor.items() if k in floats}
    floor = {k: v for k, v in floor.items() if v.shape == np.shape(floats[k])}
    rtol, atol = tolerances(check)
    floor = {k: v for k, v in floor.items() if np.any(v > atol + rtol * np.abs(floats[k]))}
    for part, values in floor.items():
        scale = float(np.max(np.abs(floats[part]))) if floats[part].size else 0.0
        if float(np.max(values)) > 1e-2 * max(scale, 1e-300):
            raise ctx.fail(
                check,
                "args",
                f"float64 rounding of these inputs moves {part} by up to {float(np.max(values)):.3g} "
                f"(of at most {scale:.3g}): the check would prove nothing; choose better-conditioned inputs",
            )
    return {**expected, FLOOR_KEY: floor} if floor else expected


def tolerance_of(check: Check, expected: dict[str, Any], part: str) -> tuple[float, float, np.ndarray]:
    """The tolerance a prepared compare/literal check asks of ``part``: ``(rtol, atol, floor)``.

    An element passes when ``|got - expected| <= atol + rtol * |expected| + floor``.
    """
    rtol, atol = tolerances(check)
    value = np.asarray(expected[part], dtype=np.float64)
    floor = expected.get(FLOOR_KEY, {}).get(part)
    return rtol, atol, np.zeros(value.shape) if floor is None else np.broadcast_to(np.asarray(floor), value.shape)


def _is_distribution(ref: np.ndarray) -> bool:
    """Whether a reference part is rows of weights: nonnegative, each row (last axis, >= 2 entries) summing to 1."""
    if ref.ndim == 0 or ref.shape[-1] < 2 or ref.size == 0 or ref.min() < 0:
        return False
    return bool(np.all(np.abs(ref.sum(axis=-1) - 1.0) <= ROW_SUM_ATOL * ref.shape[-1]))


def _is_gradient(ref: np.ndarray) -> bool:
    """Whether a reference part is rows (last axis, >= 2 entries) summing to 0 with entries that do not."""
    if ref.ndim == 0 or ref.shape[-1] < 2 or ref.size == 0 or not np.all(np.isfinite(ref)):
        return False
    rows = ref.reshape(-1, ref.shape[-1])
    size = np.sum(np.abs(rows), axis=-1)
    return bool(np.all(size > 0) and np.all(np.abs(rows.sum(axis=-1)) <= 1e-9 * size))


def contract_problem(parts: dict[str, np.ndarray], reference: dict[str, Any]) -> str | None:
    """Why a result does not meet its function's basic contract, or None when it does.

    A property (shift invariance, causal noninterference, rows summing to one, no mutation)
    holds trivially for a constant, for uniform weights or for zeros, so a property check pays
    only when the result also meets the basic contract, judged against the reference's result
    on the same call (nothing here names a function: the rules follow from the reference's data):

    * every part is finite;
    * a part the reference returns as rows of weights (nonnegative, summing to 1) is such rows
      too (within `ROW_SUM_ATOL`), 0 where the reference's is exactly 0 (masked), and ordered
      like the reference's: where the reference's largest weight of a row exceeds its smallest
      nonzero one by `ORDER_MARGIN` (relative), the result's must be larger too (a larger score
      gets a larger weight);
    * a part the reference returns as rows summing to 0 with nonzero entries (a gradient along
      the simplex) has the reference's sign wherever the reference's entry is clearly nonzero
      (over 1e-6 of its row's largest): a constant or zeros point nowhere.

    Parameters
    ----------
    parts : dict of str to ndarray
        The result's parts, shapes already checked.
    reference : dict of str to array_like
        The reference's parts on the same call.
    """
    for name, got in parts.items():
        if not np.all(np.isfinite(got)):
            return f"{name} holds a value that is not finite"
        if name not in reference:
            continue
        ref = np.asarray(reference[name], dtype=np.float64)
        if ref.shape != got.shape:
            continue
        if _is_gradient(ref):
            refs, rows = ref.reshape(-1, ref.shape[-1]), got.reshape(-1, got.shape[-1])
            clear = np.abs(refs) > 1e-6 * np.max(np.abs(refs), axis=-1, keepdims=True)
            if np.any(np.sign(rows[clear]) != np.sign(refs[clear])):
                return f"the {name} point the wrong way for some entry (their sign differs from the expected one)"
            continue
        if not _is_distribution(ref):
            continue
        rows, refs = got.reshape(-1, got.shape[-1]), ref.reshape(-1, ref.shape[-1])
        if rows.min() < -ROW_SUM_ATOL:
            return f"the {name} hold a negative entry"
        if np.any(np.abs(rows.sum(axis=-1) - 1.0) > ROW_SUM_ATOL * rows.shape[-1]):
            return f"the {name} do not sum to 1 in every row"
        if np.any(np.abs(rows[refs == 0.0]) > 1e-12):
            return f"a masked entry of the {name} is not 0"
        for i, (row, r) in enumerate(zip(rows, refs)):
            nonzero = np.flatnonzero(r > 0)
            hi = int(np.argmax(r))
            lo = int(nonzero[np.argmin(r[nonzero])])
            if r[hi] > r[lo] * (1 + ORDER_MARGIN) and not row[hi] > row[lo]:
                return (
                    f"in row {i} the {name} ignore the scores: the largest score's weight is not above the "
                    "smallest allowed score's"
                )
    return None


def gated(
    check: Check,
    ctx: KindContext,
    got: Any,
    expected: dict[str, Any],
    prop: str,
    ref_key: str = REF_KEY,
) -> Verdict | None:
    """A failed verdict when ``got`` does not meet the basic contract (`contract_problem`), else None.

    ``expected`` holds the parts' shapes and, under ``ref_key``, the reference's result on the same call.
    """
    shapes = {k: v for k, v in expected.items() if not k.startswith("~")}
    try:
        parts = shaped_parts(check, ctx, got, shapes)
    except Mismatch as m:
        return Verdict("failed", m.message, m.details)
    problem = contract_problem(parts, expected.get(ref_key, {}))
    if problem is None:
        return None
    return Verdict(
        "failed",
        f"{problem}, so {prop} earns nothing here: {GATE_NOTE}",
        tuple((k, format_value(v)) for k, v in parts.items()),
    )


def reference_parts(check: Check, ctx: KindContext, args: Sequence[Any]) -> dict[str, Any]:
    """Shapes of the reference's parts on ``args`` plus, under `REF_KEY`, the parts themselves."""
    parts = named(check, ctx, ctx.call_reference(check, args))
    return {
        **{k: np.shape(v) for k, v in parts.items()},
        REF_KEY: {k: np.asarray(v, dtype=np.float64) for k, v in parts.items()},
    }
