"""The check-kind protocol: what a check kind is, and what it may use (`KindContext`).

A check kind turns a spec's check into calls for the child process
(``prepare``) and decides the check from what came back (``judge``). All of
it runs in the grader's process; expected values never leave it. Kinds are
contributed through the ``grader_check_kinds`` hook: the built-in generic
ones (``grader.builtin.checks``) and each course pack's own (its plugin).

This package holds the protocol (`CheckKind`), a base class most kinds
derive from (`Kind`: one call, judged by ``check_value``), the context a
kind is given (`KindContext`: the exercise, the reference, seeded argument
generators and a guarded reference call) and helpers to compare named
result parts with tolerances.
"""

from __future__ import annotations

from grader.kinds.context import GENERATOR_EXTRAS as GENERATOR_EXTRAS
from grader.kinds.context import GENERATORS as GENERATORS
from grader.kinds.context import LIMIT_KEPT_ELEMENTS as LIMIT_KEPT_ELEMENTS
from grader.kinds.context import MAX_ARG_BYTES as MAX_ARG_BYTES
from grader.kinds.context import MAX_ARG_ELEMENTS as MAX_ARG_ELEMENTS
from grader.kinds.context import MAX_CHECK_ELEMENTS as MAX_CHECK_ELEMENTS
from grader.kinds.context import MAX_NDIM as MAX_NDIM
from grader.kinds.context import MAX_RESULT_ELEMENTS as MAX_RESULT_ELEMENTS
from grader.kinds.context import REFERENCE_MEMORY as REFERENCE_MEMORY
from grader.kinds.context import REFERENCE_SECONDS as REFERENCE_SECONDS
from grader.kinds.context import KindContext, guarded_call, mib, normalize
from grader.kinds.parts import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    FLOOR_KEY,
    REF_KEY,
    ROW_SUM_ATOL,
    compare_parts,
    contract_problem,
    gated,
    named,
    reference_parts,
    reference_shapes,
    shaped_parts,
    tolerance_of,
    tolerances,
    with_floor,
)
from grader.kinds.parts import GATE_NOTE as GATE_NOTE
from grader.kinds.parts import ORDER_MARGIN as ORDER_MARGIN
from grader.kinds.protocol import LITERAL, REASON, SELECT, SHAPES, TOLERANCE, VALID, WHY, CheckKind, Kind, keys_schema

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "FLOOR_KEY",
    "LITERAL",
    "REASON",
    "REF_KEY",
    "ROW_SUM_ATOL",
    "SELECT",
    "SHAPES",
    "TOLERANCE",
    "VALID",
    "WHY",
    "CheckKind",
    "Kind",
    "KindContext",
    "compare_parts",
    "contract_problem",
    "gated",
    "guarded_call",
    "keys_schema",
    "mib",
    "named",
    "normalize",
    "reference_parts",
    "reference_shapes",
    "shaped_parts",
    "tolerance_of",
    "tolerances",
    "with_floor",
]
