"""Built-in plugin: the generic check kinds (a course pack adds its own).

Kinds
-----
compare
    Call the function on the spec's (seeded) arguments and compare with the
    reference's result on the same arguments. Keys: ``select``, ``rtol``,
    ``atol``.
literal
    Compare with a hand value written in the spec (``expect``), e.g. the
    chapter's worked examples. ``grader validate`` also checks the literal
    against the reference.
raises
    The call must raise ``ValueError``; ``reason`` says what is invalid.
shape
    Compare only the shapes of the result's parts (``expect``).
no_mutation
    The call leaves its arguments (the caller's lists) unchanged.

The protocol they follow, and the helpers they use, are the core's
(`grader.kinds`).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.compare import Mismatch, format_value, part_names
from grader.kinds import (
    LITERAL,
    REASON,
    REFERENCE_MEMORY,
    REFERENCE_SECONDS,
    SELECT,
    SHAPES,
    TOLERANCE,
    VALID,
    WHY,
    Kind,
    KindContext,
    compare_parts,
    gated,
    guarded_call,
    keys_schema,
    mib,
    named,
    normalize,
    reference_parts,
    shaped_parts,
    with_floor,
)
from grader.markers import hookimpl
from grader.models import Call, CallResult, Check, Prepared, Verdict


class CompareKind(Kind):
    """Expected value: the reference on the same (seeded) arguments. Keys: ``select``, ``rtol``, ``atol``."""

    name = "compare"
    params = {"select": "optional", "rtol": "optional", "atol": "optional", "why": "optional"}
    schema = keys_schema(select=SELECT, rtol=TOLERANCE, atol=TOLERANCE, why=WHY)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        """The reference's parts, and the float64 rounding floor of the inputs where it matters (`with_floor`)."""
        return with_floor(
            check, ctx, args, named(check, ctx, ctx.call_reference(check, args), check.params.get("select"))
        )

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        return compare_parts(check, ctx, expected, got)


class LiteralKind(CompareKind):
    """Expected value: a hand value from the chapter (``expect``), which the reference must reproduce."""

    name = "literal"
    params = {"expect": "required", "rtol": "optional", "atol": "optional", "why": "optional", "companion": "optional"}
    schema = keys_schema(expect=LITERAL, rtol=TOLERANCE, atol=TOLERANCE, why=WHY, companion=VALID)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        names = part_names(check.function, ctx.exercise.returns)
        expect = check.params["expect"]
        if len(names) == 1:
            return with_floor(check, ctx, args, {names[0]: normalize(expect)})
        if not isinstance(expect, dict) or not expect or set(expect) - set(names):
            raise ctx.fail(check, "expect", f"give a mapping with some of the parts {list(names)}")
        return with_floor(check, ctx, args, {k: normalize(v) for k, v in expect.items()})

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        """Prepare, and refuse a hand value that the reference disagrees with."""
        prepared = super().prepare(check, ctx)
        parts = [_plain(v) for v in named(check, ctx, ctx.call_reference(check, prepared.calls[0].args)).values()]
        verdict = compare_parts(check, ctx, prepared.expected, parts if len(parts) > 1 else parts[0])
        if verdict.status != "passed":
            raise ctx.fail(check, "expect", f"the reference disagrees with this hand value: {verdict.message}")
        companion = check.params.get("companion")
        if companion is None:
            return prepared
        signature = inspect.signature(ctx.reference_function(check))
        try:
            twin = tuple(signature.bind(**companion).args)
        except TypeError as exc:
            raise ctx.fail(check, "companion", f"does not fit {check.function}{signature}: {exc}") from None
        reference = reference_parts(check, ctx, twin)
        return Prepared(
            calls=(*prepared.calls, Call(check.function, twin, check.timeout)),
            expected={**prepared.expected, "~companion": reference},
            shown_call=f"{prepared.shown_call}, and {ctx.shown_call(check, twin)}",
        )

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        """The hand value; with a ``companion``, its result must also meet the basic contract.

        Uniform weights are right at zero scores, and a one-allowed-key row is (0, 1, 0) for any
        code that only counts the allowed keys: such a hand value pays only when the same function
        also meets the contract (`grader.kinds.contract_problem`: weights ordered like the scores)
        on the companion call, whose scores differ.
        """
        verdict = self.check_value(check, prepared.expected, results[0].value, ctx)
        companion = prepared.expected.get("~companion")
        if verdict.status != "passed" or companion is None or len(results) < 2:
            return verdict
        return gated(check, ctx, results[1].value, companion, "this hand value") or verdict


def _plain(value: Any) -> Any:
    """A reference value as the JSON data a submission would return."""
    return value.tolist() if isinstance(value, np.ndarray) else value


class ShapeKind(Kind):
    """Only the shapes of the result's parts (``expect``)."""

    name = "shape"
    params = {"expect": "required"}
    schema = keys_schema(expect=SHAPES)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        names = part_names(check.function, ctx.exercise.returns)
        expect = check.params["expect"]
        if not isinstance(expect, dict) or set(expect) - set(names):
            raise ctx.fail(check, "expect", f"give a mapping from parts {list(names)} to shapes")
        reference = named(check, ctx, ctx.call_reference(check, args), list(expect))
        for part, shape in expect.items():
            if tuple(shape) != np.shape(reference[part]):
                raise ctx.fail(
                    check,
                    "expect",
                    f"{part} shape {shape} disagrees with the reference's {list(np.shape(reference[part]))}",
                )
        return {k: tuple(v) for k, v in expect.items()}

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        try:
            shaped_parts(check, ctx, got, expected)
        except Mismatch as m:
            return Verdict("failed", m.message, m.details)
        return Verdict("passed", fraction=1.0)


class RaisesKind(Kind):
    """The call must raise ``ValueError``; ``reason`` says why the input is invalid."""

    name = "raises"
    params = {"reason": "required", "valid": "optional"}
    schema = keys_schema(reason=REASON, valid=VALID)
    expects_raise = True

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        """The invalid call and, with ``valid``, the valid call next to it (which must return).

        Without its valid twin a ValueError check pays a file that raises ValueError on every
        input; with it, the points go only to code that tells the invalid input from a valid one.
        """
        prepared = super().prepare(check, ctx)
        valid = check.params.get("valid")
        if valid is None:
            return prepared
        signature = inspect.signature(ctx.reference_function(check))
        try:
            twin = tuple(signature.bind(**valid).args)
        except TypeError as exc:
            raise ctx.fail(check, "valid", f"does not fit {check.function}{signature}: {exc}") from None
        try:
            guarded_call(ctx.reference_function(check), copy.deepcopy(twin))
        except KeyboardInterrupt:  # Ctrl-C while the checks are prepared: the run stops, no spec is blamed
            raise
        except BaseException as exc:  # noqa: BLE001 - instructor data, one line
            raise ctx.fail(
                check,
                "valid",
                f"the reference raised {type(exc).__name__} on these arguments, which should be valid: {exc}",
            ) from None
        return Prepared(
            calls=(*prepared.calls, Call(check.function, twin, check.timeout)),
            expected=prepared.expected,
            shown_call=f"{prepared.shown_call}, and the valid {ctx.shown_call(check, twin)}",
        )

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        try:
            guarded_call(ctx.reference_function(check), args)
        except ValueError:
            return None
        except (MemoryError, TimeoutError):
            raise ctx.fail(
                check,
                "args",
                f"the reference needs more than {mib(REFERENCE_MEMORY)} or "
                f"{REFERENCE_SECONDS} s on these arguments; make them smaller",
            ) from None
        except KeyboardInterrupt:  # Ctrl-C while the checks are prepared: the run stops, no spec is blamed
            raise
        except BaseException as exc:  # noqa: BLE001 - instructor code, one line
            raise ctx.fail(
                check, "args", f"the reference raised {type(exc).__name__}, not ValueError, on these arguments: {exc}"
            ) from None
        raise ctx.fail(check, "args", "the reference does not raise ValueError on these arguments")

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        result = results[0]
        reason = check.params["reason"]
        if result.status == "raised" and result.value_error:
            twin = results[1] if len(results) > 1 else None
            if twin is not None and twin.status == "raised":
                return Verdict(
                    "failed",
                    f"raised ValueError, but also {twin.error_type} for the valid input next to it: an error on "
                    "every input does not show that the invalid one was checked",
                    (("valid input raised", f"{twin.error_type}: {twin.message}"),),
                )
            return Verdict("passed", fraction=1.0)
        if result.status == "raised":
            where = f" ({result.where})" if result.where else ""
            return Verdict(
                "failed",
                f"raised {result.error_type} instead of ValueError for {reason}{where}",
                (("got", f"{result.error_type}: {result.message}"),),
            )
        return Verdict(
            "failed",
            f"returned a value instead of raising ValueError for {reason}",
            (("got", format_value(result.value)),),
        )


class NoMutationKind(Kind):
    """The call leaves the caller's lists exactly as they were.

    The worker compares the JSON text of every argument before and after
    the call (``CallResult.mutated_args``). The point goes only to a result
    that also meets the basic contract (`grader.kinds.contract_problem`):
    a constant leaves its arguments alone too.
    """

    name = "no_mutation"
    params: dict[str, str] = {}
    schema = keys_schema()

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        # The parameter names, for the message; the reference's result, for the contract gate.
        parts = reference_parts(check, ctx, copy.deepcopy(args))  # the arguments must be valid input
        return {"params": list(inspect.signature(ctx.reference_function(check)).parameters), "~parts": parts}

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        changed = results[0].mutated_args
        if not changed:  # the arguments are intact: that pays only for a result that meets the contract
            parts = prepared.expected.get("~parts")
            failed = gated(check, ctx, results[0].value, parts, "leaving the arguments unchanged") if parts else None
            return failed or Verdict("passed", fraction=1.0)
        params = prepared.expected["params"]
        names = ", ".join(params[i] if i < len(params) else f"argument {i + 1}" for i in changed)
        return Verdict(
            "failed",
            f"{check.function} changed the caller's {names} in place; work on a copy and leave the arguments unchanged",
            (("changed", names),),
        )


BUILTIN_KINDS = (
    CompareKind(),
    LiteralKind(),
    ShapeKind(),
    RaisesKind(),
    NoMutationKind(),
)


@hookimpl
def grader_check_kinds() -> Sequence[Kind]:
    """Contribute the built-in check kinds."""
    return BUILTIN_KINDS
