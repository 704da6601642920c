"""The G14 pack's plugin: the check kinds only attention needs.

Kinds
-----
row_sums
    Every row of ``weights`` is nonnegative and sums to one.
shift_invariance
    Adding ``shift`` to every score leaves softmax unchanged.
causal_noninterference
    Changing the last key and value leaves earlier causal outputs and
    weights unchanged.
sum_to_zero
    The entries of a softmax-backward result sum to zero.
finite_difference
    softmax_backward agrees with a central finite difference of the
    reference softmax.

They follow the core's check-kind protocol (`grader.kinds`); the generic
kinds (compare, literal, shape, raises, no_mutation) are the grader's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grader import hookimpl
from grader.compare import Mismatch, compare, format_value
from grader.kinds import (
    TOLERANCE,
    Kind,
    KindContext,
    keys_schema,
    reference_shapes,
    shaped_parts,
    tolerances,
)
from grader.models import Call, CallResult, Check, Prepared, Verdict

MAX_FD_LENGTH = 1_000
"""Longest ``scores`` of a ``finite_difference`` check (it calls the reference softmax 2n times)."""

VECTOR = {
    "type": ["array", "object"],
    "description": "give a list of numbers or a generator such as {normal: [5]}",
}
SHIFT = {
    "type": "number", "minimum": -1e6, "maximum": 1e6,
    "description": "give a number between -1e6 and 1e6 (no thousands separators)",
}
STEP = {"type": "number", "exclusiveMinimum": 0, "maximum": 0.1, "description": "give a step > 0 and at most 0.1, e.g. 1e-6"}


class RowSumsKind(Kind):
    """Every row of ``weights`` is nonnegative and sums to one (G14.06, "Mask before normalization")."""

    name = "row_sums"
    params = {"atol": "optional"}
    schema = keys_schema(atol=TOLERANCE)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        shapes = reference_shapes(check, ctx, args)
        if "weights" not in shapes or len(shapes["weights"]) != 2:
            raise ctx.fail(check, "function", "row_sums needs a function whose result has a 'weights' matrix")
        return {"weights": shapes["weights"]}

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        atol = float(check.params.get("atol", 1e-9))
        try:
            weights = shaped_parts(check, ctx, got, expected)["weights"]
        except Mismatch as m:
            return Verdict("failed", m.message, m.details)
        sums = weights.sum(axis=1)
        if not np.all(np.isfinite(weights)) or weights.min() < -atol:
            return Verdict("failed", "weights hold a negative or non-finite entry", (("weights", format_value(weights)),))
        worst = int(np.argmax(np.abs(sums - 1.0)))
        if abs(sums[worst] - 1.0) > atol:
            return Verdict(
                "failed",
                f"row {worst} of weights sums to {sums[worst]:.12g}, not 1",
                (("row sums", format_value(sums)),),
            )
        return Verdict("passed", fraction=1.0)


class ShiftInvarianceKind(Kind):
    """softmax(s + shift) equals softmax(s) (G14.02, "A numerical example before the general architecture")."""

    name = "shift_invariance"
    params = {"shift": "required", "rtol": "optional", "atol": "optional"}
    schema = keys_schema(shift=SHIFT, rtol=TOLERANCE, atol=TOLERANCE)

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        args = ctx.arguments(check)
        shift = float(check.params["shift"])
        if not (args and isinstance(args[0], list) and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in args[0])):
            raise ctx.fail(check, "args", "the first argument must be a list of scores (numbers) to shift")
        shifted = ([x + shift for x in args[0]], *args[1:])
        return Prepared(
            calls=(Call(check.function, args, check.timeout), Call(check.function, shifted, check.timeout)),
            expected=reference_shapes(check, ctx, args),
            shown_call=f"{ctx.shown_call(check, args)} and the same scores plus {shift:g}",
        )

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        rtol, atol = tolerances(check)
        try:
            before = shaped_parts(check, ctx, results[0].value, prepared.expected)
            after = shaped_parts(check, ctx, results[1].value, prepared.expected)
            for name in before:
                compare(f"{name} after the shift", before[name], after[name].tolist(), rtol, atol)
        except Mismatch as m:
            return Verdict("failed", "adding the same constant to every score changed the weights: " + m.message, m.details)
        return Verdict("passed", fraction=1.0)


class CausalNoninterferenceKind(Kind):
    """Changing the last key and value leaves earlier causal rows unchanged (G14.06, "Mask before normalization")."""

    name = "causal_noninterference"
    params = {"atol": "optional"}
    schema = keys_schema(atol=TOLERANCE)

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        rng = ctx.rng(check)
        args = ctx.arguments(check, rng)
        q, k, v = (list(map(list, a)) for a in args[:3])
        if len(q) < 2 or len(q) != len(k):
            raise ctx.fail(check, "args", "needs Q and K with the same number (at least 2) of rows")
        k[-1] = (np.asarray(k[-1]) + rng.normal(0.0, 3.0, len(k[-1]))).tolist()
        v[-1] = (np.asarray(v[-1]) + rng.normal(0.0, 3.0, len(v[-1]))).tolist()
        changed = (q, k, v, *args[3:])
        return Prepared(
            calls=(Call(check.function, args, check.timeout), Call(check.function, changed, check.timeout)),
            expected=reference_shapes(check, ctx, args),
            shown_call=f"{ctx.shown_call(check, args)}, then again with the last key and value changed",
        )

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        atol = float(check.params.get("atol", 1e-12))
        try:
            before = shaped_parts(check, ctx, results[0].value, prepared.expected)
            after = shaped_parts(check, ctx, results[1].value, prepared.expected)
            for part, a in before.items():
                b = after[part]
                with np.errstate(invalid="ignore"):
                    moved = ~(np.abs(a[:-1] - b[:-1]) <= atol)
                if moved.any():
                    row = int(np.flatnonzero(moved.any(axis=1))[0])
                    raise Mismatch(
                        f"changing only the last key and value changed {part}[{row}]: "
                        f"an earlier position used a future one",
                        ((f"{part}[{row}] before", format_value(a[row])), (f"{part}[{row}] after", format_value(b[row]))),
                    )
        except Mismatch as m:
            return Verdict("failed", m.message, m.details)
        return Verdict("passed", fraction=1.0)


class SumToZeroKind(Kind):
    """The softmax-backward gradient sums to zero (G14.04, "Differentiate the mixing operation")."""

    name = "sum_to_zero"
    params = {"atol": "optional"}
    schema = keys_schema(atol=TOLERANCE)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        return reference_shapes(check, ctx, args)

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        atol = float(check.params.get("atol", 1e-12))
        try:
            (grad,) = shaped_parts(check, ctx, got, expected).values()
        except Mismatch as m:
            return Verdict("failed", m.message, m.details)
        total = float(np.sum(grad))
        scale = 1.0 + float(np.sum(np.abs(grad))) if np.all(np.isfinite(grad)) else 1.0
        if not np.isfinite(total) or abs(total) > atol * scale:
            return Verdict(
                "failed", f"the gradient's entries sum to {total:.6g}, not 0", (("gradient", format_value(grad)),)
            )
        return Verdict("passed", fraction=1.0)


class FiniteDifferenceKind(Kind):
    """softmax_backward(p, u) against d(u . softmax(s))/ds by central differences.

    The spec gives ``scores`` and ``upstream`` (literals or generators)
    instead of ``args``; ``p`` is the reference softmax of the scores and
    ``u`` the upstream sensitivities.
    """

    name = "finite_difference"
    params = {"scores": "required", "upstream": "required", "step": "optional", "rtol": "optional", "atol": "optional"}
    schema = keys_schema(scores=VECTOR, upstream=VECTOR, step=STEP, rtol=TOLERANCE, atol=TOLERANCE)

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        rng = ctx.rng(check)
        for key in ("scores", "upstream"):
            raw = check.params[key]
            n = ctx.generated_size(check, key, raw) or (len(raw) if isinstance(raw, list) else 0)
            if n > MAX_FD_LENGTH:
                raise ctx.fail(check, key, f"{n:,} entries are more than {MAX_FD_LENGTH:,}, the most a finite "
                               "difference takes (it calls softmax twice per entry): make it shorter")
        try:
            scores = np.asarray(ctx.generate(check, "scores", check.params["scores"], rng), dtype=np.float64)
            u = np.asarray(ctx.generate(check, "upstream", check.params["upstream"], rng), dtype=np.float64)
        except (TypeError, ValueError):
            raise ctx.fail(check, "scores", "give 'scores' and 'upstream' as lists of numbers or generators") from None
        if check.args or scores.ndim != 1 or u.shape != scores.shape:
            raise ctx.fail(check, "upstream", "give 'scores' and 'upstream' of one length, and no 'args'")
        if not (np.all(np.isfinite(scores)) and np.all(np.isfinite(u))):
            raise ctx.fail(check, "scores", "'scores' and 'upstream' must hold finite numbers")
        ctx.reference_function(check, "softmax")

        def softmax(values: list[float]) -> Any:
            return ctx.call_reference(check, (values,), "softmax")

        p = np.asarray(softmax(scores.tolist()), dtype=np.float64)
        h = float(check.params.get("step", 1e-6))
        grad = np.empty_like(scores)
        for k in range(scores.size):
            up, down = scores.copy(), scores.copy()
            up[k] += h
            down[k] -= h
            grad[k] = (np.dot(u, softmax(up.tolist())) - np.dot(u, softmax(down.tolist()))) / (2 * h)
        args = (p.tolist(), u.tolist())
        return Prepared(
            calls=(Call(check.function, args, check.timeout),),
            expected={"gradient": grad},
            shown_call=ctx.shown_call(check, args),
        )

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        rtol = float(check.params.get("rtol", 1e-5))
        atol = float(check.params.get("atol", 1e-7))
        try:
            compare("gradient", expected["gradient"], got, rtol, atol)
        except Mismatch as m:
            return Verdict("failed", "disagrees with a finite-difference gradient: " + m.message, m.details)
        return Verdict("passed", fraction=1.0)


KINDS = (
    RowSumsKind(),
    ShiftInvarianceKind(),
    CausalNoninterferenceKind(),
    SumToZeroKind(),
    FiniteDifferenceKind(),
)


@hookimpl
def grader_check_kinds() -> Sequence[Kind]:
    """Contribute the G14 check kinds."""
    return KINDS
