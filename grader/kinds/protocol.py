"""The check-kind protocol (`CheckKind`), the base most kinds derive from (`Kind`), and the JSON
Schemas of common spec keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from grader.kinds.context import KindContext
from grader.models import Call, CallResult, Check, Prepared, Verdict

TOLERANCE = {"type": "number", "minimum": 0, "description": "give a tolerance: a number >= 0"}
"""JSON Schema of an ``rtol`` or ``atol`` key."""


def keys_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    """A kind's ``schema``: its keys' JSON Schemas, e.g. ``keys_schema(atol=TOLERANCE)``."""
    return {"type": "object", "properties": properties}


LITERAL = {
    "type": ["number", "array", "object"],
    "description": "give the hand value: a number, a list of numbers or a mapping from part names to them",
}
SHAPES = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    "description": "give a mapping from part names to shapes, e.g. {weights: [4, 6]}",
}
SELECT = {
    "type": "array",
    "minItems": 1,
    "uniqueItems": True,
    "items": {"type": "string", "minLength": 1},
    "description": "give a list of part names, e.g. [weights]",
}
REASON = {"type": "string", "minLength": 1, "description": "give the reason in words, e.g. empty scores"}
WHY = {"type": "string", "minLength": 10, "description": "say in words why the check asks this tolerance"}
VALID = {
    "type": "object",
    "minProperties": 1,
    "description": "give the arguments of a valid call next to the invalid one, e.g. {scores: [1.0, 0.0]}",
}


class Kind:
    """Base of most kinds (a `CheckKind`): one call, judged by `check_value`.

    Attributes
    ----------
    name : str
        The ``kind:`` of specs.
    params : dict of str to str
        Kind-specific spec keys, each ``"required"`` or ``"optional"``.
    schema : dict
        JSON Schema of the kind's own keys (an object's ``properties``):
        types and ranges, each with a ``description`` saying what to write,
        which the spec loader adds to its error line.
    expects_raise : bool
        Whether a raised exception is the kind's to judge (else the judge
        reports it as an error).
    """

    name = ""
    params: dict[str, str] = {}
    schema: dict[str, Any] = {"type": "object"}
    expects_raise = False

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        """Resolve the arguments, compute what judging needs, and return the calls.

        Raises
        ------
        grader.errors.SpecError
            If the check cannot be prepared (bad arguments, the reference
            disagrees or raises).
        """
        args = ctx.arguments(check)
        return Prepared(
            calls=(Call(check.function, args, check.timeout),),
            expected=self.expected(check, ctx, args),
            shown_call=ctx.shown_call(check, args),
        )

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        """What judging will compare with (kept in the grader's process); None by default."""
        return None

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        """Decide the check from its call results (every call returned)."""
        return self.check_value(check, prepared.expected, results[0].value, ctx)

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        """Decide a one-call check from the returned JSON data ``got``."""
        raise NotImplementedError


@runtime_checkable
class CheckKind(Protocol):
    """What the harness asks of a check kind (a plugin returns these from ``grader_check_kinds``).

    Attributes
    ----------
    name : str
        The ``kind:`` of specs; unique over every plugin.
    params : dict of str to str
        The kind's own spec keys, each ``"required"`` or ``"optional"``.
    schema : dict
        JSON Schema of those keys (an object's ``properties``), each with a
        ``description`` saying what to write.
    expects_raise : bool
        Whether a raised exception is the kind's to judge (else the judge
        reports it as an error).
    """

    name: str
    params: dict[str, str]
    schema: dict[str, Any]
    expects_raise: bool

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        """The check's calls and what judging needs (kept in the grader's process).

        Raises
        ------
        grader.errors.SpecError
            If the check cannot be prepared.
        """
        ...

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        """Decide the check from its calls' results (every call returned, unless `expects_raise`)."""
        ...
