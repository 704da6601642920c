"""The R3 pack's plugin: one check kind of its own, ``nondecreasing``.

``nondecreasing`` sorts the (seeded) first argument, calls the function once
and passes when the result never goes down: what a monotone activation does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grader import hookimpl
from grader.compare import Mismatch, as_array
from grader.kinds import TOLERANCE, Kind, KindContext, keys_schema
from grader.models import Call, CallResult, Check, Prepared, Verdict


class NondecreasingKind(Kind):
    """The result on sorted inputs never decreases (by more than ``atol``)."""

    name = "nondecreasing"
    params = {"atol": "optional"}
    schema = keys_schema(atol=TOLERANCE)

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        args = ctx.arguments(check)
        if not args or not isinstance(args[0], list):
            raise ctx.fail(check, "args", "the first argument must be a list of numbers")
        ordered = (sorted(args[0]), *args[1:])
        ctx.call_reference(check, ordered)  # valid input for the reference
        return Prepared(
            calls=(Call(check.function, ordered, check.timeout),),
            expected=None,
            shown_call=ctx.shown_call(check, ordered),
        )

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        try:
            values = as_array("result", results[0].value).ravel()
        except Mismatch as m:
            return Verdict("failed", m.message, m.details)
        steps = np.diff(values)
        atol = float(check.params.get("atol", 0.0))
        if values.size != len(prepared.calls[0].args[0]) or not np.all(np.isfinite(values)):
            return Verdict("failed", "the result is not one finite number per input")
        if np.any(steps < -atol):
            at = int(np.flatnonzero(steps < -atol)[0])
            return Verdict(
                "failed",
                f"the result goes down from position {at} to {at + 1} on sorted inputs",
                (("at", f"{values[at]:.6g} then {values[at + 1]:.6g}"),),
            )
        return Verdict("passed", fraction=1.0)


@hookimpl
def grader_check_kinds() -> Sequence[Any]:
    """Contribute the R3 check kind."""
    return (NondecreasingKind(),)
