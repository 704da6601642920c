"""Check kinds and comparison, in-process: prepare a check against the real
reference, hand-make the call results, and judge them. No child process."""

from __future__ import annotations

import dataclasses
import math
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import REFERENCE
from course_plugin import KINDS as G14_KINDS

from grader.builtin.checks import BUILTIN_KINDS
from grader.builtin.reference import load_reference
from grader.compare import Mismatch, as_array, compare, format_value, split_parts
from grader.errors import SpecError
from grader.grading.judging import judge
from grader.kinds import KindContext
from grader.models import CallResult, Check, Exercise, Prepared, Verdict

KINDS = {kind.name: kind for kind in (*BUILTIN_KINDS, *G14_KINDS)}
REF = load_reference(str(REFERENCE))
ATTENTION = {"attention": ("outputs", "weights")}
SPEC_PATH = "specs/G14.99.yaml"


def make(
    kind: str,
    function: str,
    args: dict | None = None,
    params: dict | None = None,
    *,
    id: str = "the-check",  # noqa: A002
    seed: int = 1499000,
    returns: dict | None = None,
) -> tuple[Check, KindContext]:
    check = Check(
        id=id,
        kind=kind,
        function=function,
        points=1.0,
        visibility="visible",
        hint="Reread the chapter.",
        timeout=2.0,
        args=dict(args or {}),
        params=dict(params or {}),
        seed=seed,
    )
    exercise = Exercise(
        id="G14.99",
        title="Test",
        section="Tests",
        path=SPEC_PATH,
        checks=(check,),
        returns=ATTENTION if returns is None else returns,
    )
    return check, KindContext(exercise, dict(REF))


def prepare(check: Check, ctx: KindContext) -> Prepared:
    return KINDS[check.kind].prepare(check, ctx)


def verdict_of(check: Check, prepared: Prepared, *values: object, ctx: KindContext) -> Verdict:
    """Judge ``values`` (one per call) as returned results, through the kind."""
    results = [CallResult("returned", value=v) for v in values]
    assert len(results) == len(prepared.calls)
    return KINDS[check.kind].judge(check, prepared, results, ctx)


def plain(value: object) -> object:
    """A reference result as the JSON data a child would send back."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value.tolist() if isinstance(value, np.ndarray) else value


def reference_result(function: str, args: tuple) -> object:
    return plain(REF[function](*args))


def passed(v: Verdict) -> None:
    assert v == Verdict("passed", fraction=1.0), v


def failed(v: Verdict) -> str:
    assert v.status == "failed", v
    assert v.fraction == 0.0
    return v.message


def rng_for(seed: int, check_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(check_id.encode())])


RANDOM_ATTENTION = {"Q": {"normal": [3, 4]}, "K": {"normal": [5, 4]}, "V": {"normal": [5, 2]}}


# --- compare ---------------------------------------------------------------


def test_compare_passes_on_the_reference_and_reports_the_largest_error() -> None:
    check, ctx = make("compare", "attention", RANDOM_ATTENTION)
    prepared = prepare(check, ctx)
    (call,) = prepared.calls
    assert call.function == "attention" and call.timeout == 2.0
    Q, K, V = call.args
    assert np.array(Q).shape == (3, 4) and np.array(K).shape == (5, 4) and np.array(V).shape == (5, 2)
    assert set(prepared.expected) == {"outputs", "weights"}
    assert prepared.shown_call.startswith("attention(Q=[[")
    outputs, weights = reference_result("attention", call.args)
    passed(verdict_of(check, prepared, [outputs, weights], ctx=ctx))

    # a tiny error inside the tolerance still passes
    nudged = [row[:] for row in weights]
    nudged[0][0] += 1e-12
    passed(verdict_of(check, prepared, [outputs, nudged], ctx=ctx))

    bad = [row[:] for row in weights]
    bad[1][2] += 0.01
    bad[0][4] -= 0.004
    v = verdict_of(check, prepared, [outputs, bad], ctx=ctx)
    message = failed(v)
    assert message.startswith("weights ")
    assert re.search(r"\b0\.01\b", message) and "weights[1][2]" in message
    details = dict(v.details)
    assert details["expected"] == format_value(np.array(weights))
    assert details["got"] == format_value(np.array(bad))
    assert details["largest error"] == "0.01"
    assert details["where"] == "weights[1][2]"
    assert details["tolerance"] == "rtol=1e-06, atol=1e-09"


def test_compare_select_compares_only_the_selected_part() -> None:
    check, ctx = make("compare", "attention", RANDOM_ATTENTION, {"select": ["outputs"]})
    prepared = prepare(check, ctx)
    assert set(prepared.expected) == {"outputs"}
    outputs, weights = reference_result("attention", prepared.calls[0].args)
    passed(verdict_of(check, prepared, [outputs, [[0.0]]], ctx=ctx))
    check, ctx = make("compare", "attention", RANDOM_ATTENTION, {"select": ["scores"]})
    with pytest.raises(SpecError, match=r"check 'the-check'\.select: unknown part\(s\) \['scores'\]"):
        prepare(check, ctx)


def test_compare_shape_mismatch() -> None:
    check, ctx = make(
        "compare", "attention", {"Q": {"normal": [3, 2]}, "K": {"normal": [5, 2]}, "V": {"normal": [5, 4]}}
    )
    prepared = prepare(check, ctx)
    outputs, weights = reference_result("attention", prepared.calls[0].args)
    v = verdict_of(check, prepared, [outputs, [row[:2] for row in weights]], ctx=ctx)
    assert failed(v) == "weights has shape (3, 2), expected (3, 5)"
    details = dict(v.details)
    assert details["expected shape"] == "(3, 5)" and details["got shape"] == "(3, 2)"
    # transposed outputs
    v = verdict_of(check, prepared, [np.array(outputs).T.tolist(), weights], ctx=ctx)
    assert failed(v) == "outputs has shape (4, 3), expected (3, 4)"


def test_compare_nan_where_finite_expected() -> None:
    check, ctx = make("compare", "attention", RANDOM_ATTENTION)
    prepared = prepare(check, ctx)
    outputs, weights = reference_result("attention", prepared.calls[0].args)
    weights[0][1] = math.nan
    v = verdict_of(check, prepared, [outputs, weights], ctx=ctx)
    assert failed(v).startswith(
        "weights[0][1] is nan where a finite number is expected; asked: within rtol=1e-06, "
        "atol=1e-09 (float64 code is accurate to about 1e-13 here"
    )
    assert dict(v.details)["largest error"] == "not finite"
    outputs[2][0] = -math.inf
    assert failed(verdict_of(check, prepared, [outputs, weights], ctx=ctx)).startswith(
        "outputs[2][0] is -inf where a finite number is expected"
    )


def test_compare_ragged_and_non_numeric_results() -> None:
    check, ctx = make("compare", "attention", RANDOM_ATTENTION)
    prepared = prepare(check, ctx)
    outputs, weights = reference_result("attention", prepared.calls[0].args)
    ragged = [outputs[0], outputs[1][:1], outputs[2]]
    assert failed(verdict_of(check, prepared, [ragged, weights], ctx=ctx)) == (
        "outputs is ragged: its rows have lengths [1, 2]"
    )
    assert failed(verdict_of(check, prepared, [outputs, None], ctx=ctx)) == "weights is None; return numbers"
    assert failed(verdict_of(check, prepared, [outputs, "weights"], ctx=ctx)) == "weights is a string; return numbers"
    assert failed(verdict_of(check, prepared, [outputs, {"a": 1}], ctx=ctx)) == "weights is not made of numbers"


def test_compare_wrong_tuple_arity() -> None:
    check, ctx = make("compare", "attention", RANDOM_ATTENTION)
    prepared = prepare(check, ctx)
    outputs, weights = reference_result("attention", prepared.calls[0].args)
    assert failed(verdict_of(check, prepared, [outputs], ctx=ctx)) == (
        "expected a tuple (outputs, weights), got a sequence of 1 items"
    )
    assert failed(verdict_of(check, prepared, [outputs, weights, weights], ctx=ctx)) == (
        "expected a tuple (outputs, weights), got a sequence of 3 items"
    )
    assert failed(verdict_of(check, prepared, 5.0, ctx=ctx)) == "expected a tuple (outputs, weights), got float"


def test_integers_compare_exactly() -> None:
    check, ctx = make("literal", "score_array_bytes", {"B": 2, "H": 8, "N": 1024}, {"expect": 67108864}, returns={})
    prepared = prepare(check, ctx)
    assert prepared.calls[0].args == (2, 8, 1024)
    assert prepared.expected == {"result": 67108864}
    passed(verdict_of(check, prepared, 67108864, ctx=ctx))
    passed(verdict_of(check, prepared, 67108864.0, ctx=ctx))
    for wrong in (67108865, 67108864.5, 64.0, True, [67108864], None):
        v = verdict_of(check, prepared, wrong, ctx=ctx)
        assert failed(v) == "result is wrong"
        assert dict(v.details) == {"expected": "67108864", "got": format_value(wrong)}
    # the comparison itself, with any part name
    compare("nbytes", 67108864, 67108864.0, 0.0, 0.0)
    with pytest.raises(Mismatch, match="^nbytes is wrong$"):
        compare("nbytes", 67108864, 67108865, 1.0, 1e9)  # tolerances do not apply to integers


def test_float_comparison_tolerance_rule() -> None:
    compare("mib", 64.0, 64.0 + 64e-6, 1e-6, 0.0)  # |err| <= rtol * |expected|
    with pytest.raises(Mismatch) as info:
        compare("mib", 64.0, 64.0 + 65e-6, 1e-6, 0.0)
    assert "mib" in info.value.message
    compare("x", [0.0, 1.0], [1e-9, 1.0], 0.0, 1e-9)  # |err| <= atol
    with pytest.raises(Mismatch, match=r"x\[0\]"):
        compare("x", [0.0, 1.0], [2e-9, 1.0], 0.0, 1e-9)


# --- literal -----------------------------------------------------------------


def test_literal_softmax_and_attention() -> None:
    check, ctx = make("literal", "softmax", {"scores": [0.0, 0.0]}, {"expect": [0.5, 0.5]})
    prepared = prepare(check, ctx)
    assert prepared.calls[0].args == ([0.0, 0.0],)
    assert prepared.shown_call == "softmax(scores=[0.0, 0.0])"
    passed(verdict_of(check, prepared, [0.5, 0.5], ctx=ctx))
    message = failed(verdict_of(check, prepared, [0.6, 0.4], ctx=ctx))
    assert message.startswith("result ") and re.search(r"\b0\.1\b", message) and "result[0]" in message

    args = {"Q": [[1.0]], "K": [[1.0986122886681098], [0.0]], "V": [[2.0], [8.0]]}
    check, ctx = make("literal", "attention", args, {"expect": {"weights": [[0.75, 0.25]]}})
    prepared = prepare(check, ctx)
    assert set(prepared.expected) == {"weights"}
    passed(verdict_of(check, prepared, [[[123.0]], [[0.75, 0.25]]], ctx=ctx))  # only weights are checked
    message = failed(verdict_of(check, prepared, [[[3.5]], [[0.25, 0.75]]], ctx=ctx))
    assert message.startswith("weights ") and re.search(r"\b0\.5\b", message) and "weights[0][0]" in message


def test_literal_prepare_refuses_a_wrong_hand_value() -> None:
    args = {"Q": [[0.0]], "K": [[0.0], [0.0]], "V": [[2.0], [8.0]]}
    check, ctx = make(
        "literal", "attention", args, {"expect": {"outputs": [[6.0]], "weights": [[0.5, 0.5]]}}, id="zero-scores"
    )
    with pytest.raises(SpecError) as info:
        prepare(check, ctx)
    assert info.value.path == SPEC_PATH
    assert info.value.where == "check 'zero-scores'.expect"
    assert info.value.problem.startswith("the reference disagrees with this hand value: outputs ")
    assert "outputs[0][0]" in info.value.problem

    check, ctx = make("literal", "attention", args, {"expect": [[5.0]]})
    with pytest.raises(SpecError, match=r"give a mapping with some of the parts \['outputs', 'weights'\]"):
        prepare(check, ctx)


# --- shape ---------------------------------------------------------------


def test_shape_kind() -> None:
    args = {"Q": {"normal": [3, 2]}, "K": {"normal": [5, 2]}, "V": {"normal": [5, 4]}}
    check, ctx = make("shape", "attention", args, {"expect": {"outputs": [3, 4], "weights": [3, 5]}})
    prepared = prepare(check, ctx)
    assert prepared.expected == {"outputs": (3, 4), "weights": (3, 5)}
    passed(verdict_of(check, prepared, [np.zeros((3, 4)).tolist(), np.ones((3, 5)).tolist()], ctx=ctx))
    v = verdict_of(check, prepared, [np.zeros((3, 4)).tolist(), np.ones((5, 3)).tolist()], ctx=ctx)
    assert failed(v) == "weights has shape (5, 3), expected (3, 5)"
    assert dict(v.details) == {"expected shape": "(3, 5)", "got shape": "(5, 3)"}

    wrong, ctx = make("shape", "attention", args, {"expect": {"outputs": [3, 4], "weights": [5, 3]}})
    with pytest.raises(SpecError, match=r"weights shape \[5, 3\] disagrees with the reference's \[3, 5\]"):
        prepare(wrong, ctx)


# --- raises ------------------------------------------------------------------


def test_raises_kind() -> None:
    args = {"Q": {"normal": [3, 2]}, "K": {"normal": [5, 2]}, "V": {"normal": [4, 5]}}
    reason = "a V with 4 rows for 5 keys"
    check, ctx = make("raises", "attention", args, {"reason": reason})
    prepared = prepare(check, ctx)
    kind = KINDS["raises"]
    ok = CallResult("raised", error_type="ValueError", value_error=True, message="K has 5 rows but V has 4")
    passed(kind.judge(check, prepared, [ok], ctx))
    subclass = CallResult("raised", error_type="ShapeError", value_error=True, message="bad")
    passed(kind.judge(check, prepared, [subclass], ctx))

    v = kind.judge(check, prepared, [CallResult("returned", value=[[[1.0]], [[1.0]]])], ctx)
    assert v.status == "failed"
    assert v.message == f"returned a value instead of raising ValueError for {reason}"
    assert dict(v.details) == {"got": "[[[1.0]],\n [[1.0]]]"}

    typeerr = CallResult("raised", error_type="TypeError", message="can't multiply", where="attention.py, line 7")
    v = kind.judge(check, prepared, [typeerr], ctx)
    assert v.status == "failed"
    assert v.message == f"raised TypeError instead of ValueError for {reason} (attention.py, line 7)"
    assert dict(v.details) == {"got": "TypeError: can't multiply"}

    accepted, ctx = make("raises", "attention", {**args, "V": {"normal": [5, 5]}}, {"reason": reason}, id="ok-args")
    with pytest.raises(SpecError) as info:
        prepare(accepted, ctx)
    assert str(info.value) == (
        f"{SPEC_PATH}: check 'ok-args'.args: the reference does not raise ValueError on these arguments"
    )


# --- row_sums ------------------------------------------------------------------


def test_row_sums_kind() -> None:
    check, ctx = make(
        "row_sums", "attention", {"Q": {"normal": [4, 3]}, "K": {"normal": [6, 3]}, "V": {"normal": [6, 2]}}
    )
    prepared = prepare(check, ctx)
    assert {k: v for k, v in prepared.expected.items() if not k.startswith("~")} == {
        "weights": (4, 6),
        "outputs": (4, 2),
    }
    outputs, weights = reference_result("attention", prepared.calls[0].args)
    np.testing.assert_array_equal(prepared.expected["~ref"]["weights"], weights)  # for the contract gate
    passed(verdict_of(check, prepared, [outputs, weights], ctx=ctx))

    half = [row[:] for row in weights]
    half[2] = [w / 2 for w in half[2]]
    v = verdict_of(check, prepared, [outputs, half], ctx=ctx)
    assert failed(v) == (
        "row 2 of weights sums to 0.5, not 1; asked: within 1e-09 (float64 sums m weights to 1 "
        "within about m * 2.2e-16)"
    )
    sums = [round(float(s), 12) for s in np.sum(half, axis=1)]
    assert sums == [1.0, 1.0, 0.5, 1.0]

    negative = [row[:] for row in weights]
    negative[1][0], negative[1][1] = -0.1, negative[1][1] + negative[1][0] + 0.1
    assert failed(verdict_of(check, prepared, [outputs, negative], ctx=ctx)) == (
        "weights hold a negative or non-finite entry"
    )
    assert failed(verdict_of(check, prepared, [outputs, weights[0]], ctx=ctx)) == (
        "weights has shape (6,), expected (4, 6)"
    )
    # Uniform rows sum to one but ignore the scores: no point for the property alone.
    uniform = [[1 / 6] * 6 for _ in weights]
    assert failed(verdict_of(check, prepared, [outputs, uniform], ctx=ctx)) == (
        "in row 0 the weights ignore the scores: the largest score's weight is not above the smallest allowed "
        "score's, so summing to one earns nothing here: a property pays only for a result that meets the basic contract"
    )
    # Non-finite outputs break the contract too.
    bad = [row[:] for row in outputs]
    bad[0][0] = math.inf
    assert failed(verdict_of(check, prepared, [bad, weights], ctx=ctx)).startswith(
        "outputs holds a value that is not finite"
    )


# --- shift_invariance ------------------------------------------------------------


def test_shift_invariance_kind() -> None:
    check, ctx = make(
        "shift_invariance", "softmax", {"scores": {"normal": [6]}}, {"shift": 100.0}, returns={"softmax": ("weights",)}
    )
    prepared = prepare(check, ctx)
    first, second = prepared.calls
    assert len(first.args[0]) == 6
    assert second.args[0] == [s + 100.0 for s in first.args[0]]
    assert first.args[0] == rng_for(1499000, "the-check").normal(0.0, 1.0, [6]).tolist()
    passed(
        verdict_of(
            check, prepared, reference_result("softmax", first.args), reference_result("softmax", second.args), ctx=ctx
        )
    )

    def plus_one_softmax(s: list[float]) -> list[float]:  # a classic slip: exp(s) / (1 + sum exp(s))
        e = np.exp(s)
        return (e / (1.0 + e.sum())).tolist()

    message = failed(
        verdict_of(check, prepared, plus_one_softmax(first.args[0]), plus_one_softmax(second.args[0]), ctx=ctx)
    )
    assert message.startswith("adding the same constant to every score changed the weights: ")

    def scaled_softmax(s: list[float]) -> list[float]:  # a temperature taken from the scores themselves
        a = np.asarray(s) / np.max(np.abs(s))
        e = np.exp(a - a.max())
        return (e / e.sum()).tolist()

    message = failed(
        verdict_of(check, prepared, scaled_softmax(first.args[0]), scaled_softmax(second.args[0]), ctx=ctx)
    )
    assert message.startswith("adding the same constant to every score changed the weights: ")
    assert "asked: within rtol=1e-06" in message and "the shift itself rounds each score" in message
    # Constant weights are shift invariant, and earn nothing.
    zeros = [0.0] * 6
    assert "earns nothing" in failed(verdict_of(check, prepared, zeros, zeros, ctx=ctx))


# --- causal_noninterference --------------------------------------------------------


def test_causal_noninterference_kind() -> None:
    args = {"Q": {"normal": [5, 3]}, "K": {"normal": [5, 3]}, "V": {"normal": [5, 2]}, "causal": True}
    check, ctx = make("causal_noninterference", "attention", args)
    prepared = prepare(check, ctx)
    before, after = prepared.calls
    (q0, k0, v0, c0), (q1, k1, v1, c1) = before.args, after.args
    assert c0 is True and c1 is True
    assert q1 == q0 and k1[:-1] == k0[:-1] and v1[:-1] == v0[:-1]
    assert k1[-1] != k0[-1] and v1[-1] != v0[-1]
    again = prepare(check, ctx)  # deterministic, changes included
    assert again.calls == prepared.calls and again.shown_call == prepared.shown_call

    ref_before, ref_after = reference_result("attention", before.args), reference_result("attention", after.args)
    passed(verdict_of(check, prepared, ref_before, ref_after, ctx=ctx))

    # forgetting the mask: every position sees the changed last key
    leaky_before = plain(REF["attention"](q0, k0, v0, False))
    leaky_after = plain(REF["attention"](q1, k1, v1, False))
    message = failed(verdict_of(check, prepared, leaky_before, leaky_after, ctx=ctx))
    assert "changed" in message and "outputs" in message and "[0]" in message

    # only an earlier row of weights moves
    moved = [row[:] for row in ref_after[1]]
    moved[2] = [moved[2][1], moved[2][0], *moved[2][2:]]
    message = failed(verdict_of(check, prepared, ref_before, [ref_after[0], moved], ctx=ctx))
    assert "changed" in message and "weights" in message and "[2]" in message

    # the last row may change freely (keeping to the contract: a distribution ordered like the scores)
    last = [0.9 * w + 0.02 for w in ref_after[1][-1]]
    passed(verdict_of(check, prepared, ref_before, [ref_after[0], ref_after[1][:-1] + [last]], ctx=ctx))
    # Constant outputs and weights never change: that is no evidence of causal masking.
    zeros = [[[0.0] * 2 for _ in range(5)], [[0.0] * 5 for _ in range(5)]]
    assert "earns nothing" in failed(verdict_of(check, prepared, zeros, zeros, ctx=ctx))


# --- sum_to_zero -------------------------------------------------------------------


def test_sum_to_zero_kind() -> None:
    check, ctx = make("sum_to_zero", "softmax_backward", {"p": [0.25, 0.75], "u": [1.0, 3.0]}, returns={})
    prepared = prepare(check, ctx)
    assert prepared.calls[0].args == ([0.25, 0.75], [1.0, 3.0])
    assert reference_result("softmax_backward", prepared.calls[0].args) == [-0.375, 0.375]
    passed(verdict_of(check, prepared, [-3 / 8, 3 / 8], ctx=ctx))
    v = verdict_of(check, prepared, [-3 / 8, 1 / 2], ctx=ctx)
    assert failed(v).startswith("the gradient's entries sum to 0.125, not 0; asked: within ")
    assert dict(v.details) == {"gradient": "[-0.375, 0.5]"}
    assert "not 0" in failed(verdict_of(check, prepared, [math.nan, 0.0], ctx=ctx))
    # Zeros sum to zero but point nowhere: the property alone earns nothing.
    assert "the gradient points the wrong way" in failed(verdict_of(check, prepared, [0.0, 0.0], ctx=ctx))

    random_check, ctx = make("sum_to_zero", "softmax_backward", {"p": {"simplex": 6}, "u": {"normal": [6]}})
    prepared = prepare(random_check, ctx)
    p, u = prepared.calls[0].args
    assert len(p) == 6 and math.isclose(sum(p), 1.0) and min(p) > 0
    passed(verdict_of(random_check, prepared, reference_result("softmax_backward", (p, u)), ctx=ctx))


# --- finite_difference ---------------------------------------------------------------


def test_finite_difference_kind() -> None:
    check, ctx = make(
        "finite_difference",
        "softmax_backward",
        {},
        {"scores": {"normal": [5]}, "upstream": {"normal": [5]}},
        returns={},
    )
    prepared = prepare(check, ctx)
    p, u = prepared.calls[0].args
    rng = rng_for(1499000, "the-check")
    scores = rng.normal(0.0, 1.0, [5])
    assert u == rng.normal(0.0, 1.0, [5]).tolist()
    assert p == REF["softmax"](scores.tolist()).tolist()
    np.testing.assert_allclose(prepared.expected["gradient"], REF["softmax_backward"](p, u), rtol=1e-6, atol=1e-8)

    passed(verdict_of(check, prepared, reference_result("softmax_backward", (p, u)), ctx=ctx))
    diagonal_only = (np.array(p) * (1 - np.array(p)) * np.array(u)).tolist()  # p(1-p)u drops the off-diagonal terms
    v = verdict_of(check, prepared, diagonal_only, ctx=ctx)
    message = failed(v)
    assert message.startswith("disagrees with a finite-difference gradient: gradient ")
    assert "gradient[" in dict(v.details)["where"]

    with_args, ctx = make(
        "finite_difference",
        "softmax_backward",
        {"p": [1.0]},
        {"scores": [0.0, 1.0], "upstream": [1.0, 2.0]},
        returns={},
    )
    with pytest.raises(SpecError, match=r"give 'scores' and 'upstream' of one length, and no 'args'"):
        prepare(with_args, ctx)


# --- seeded generators -----------------------------------------------------------------


def test_seeded_generators_are_deterministic_and_per_check() -> None:
    args = {
        "Q": {"normal": [3, 2], "scale": 3.0},
        "K": {"uniform": [4, 2], "low": 0.0, "high": 2.0},
        "V": {"normal": [4, 1]},
        "causal": False,
    }
    check, ctx = make("compare", "attention", args, id="alpha", seed=7)
    first, second = prepare(check, ctx), prepare(check, ctx)
    assert first.calls == second.calls
    Q, K, V, causal = first.calls[0].args
    rng = rng_for(7, "alpha")
    assert Q == (rng.normal(0.0, 1.0, [3, 2]) * 3.0).tolist()
    assert K == rng.uniform(0.0, 2.0, [4, 2]).tolist()
    assert V == rng.normal(0.0, 1.0, [4, 1]).tolist()
    assert causal is False
    assert all(0.0 <= x < 2.0 for row in K for x in row)

    other_id, ctx2 = make("compare", "attention", args, id="beta", seed=7)
    other_seed, ctx3 = make("compare", "attention", args, id="alpha", seed=8)
    q_beta = prepare(other_id, ctx2).calls[0].args[0]
    q_seed = prepare(other_seed, ctx3).calls[0].args[0]
    assert q_beta != Q and q_seed != Q and q_beta != q_seed


def test_mask_and_simplex_generators() -> None:
    check, ctx = make("compare", "softmax", {"scores": {"normal": [8]}, "allowed": {"mask": 8}})
    scores, allowed = prepare(check, ctx).calls[0].args
    assert len(allowed) == 8 and all(type(a) is bool for a in allowed) and any(allowed)
    check, ctx = make("compare", "softmax", {"scores": {"normal": [8]}, "allowed": {"mask": 8, "p": 0.1}})
    with pytest.raises(
        SpecError, match=r"check 'the-check'\.args\.allowed: generator 'mask' does not take p \(it takes no other key\)"
    ):
        prepare(check, ctx)
    check, ctx = make("compare", "softmax", {"scores": {"normal": [0]}})
    with pytest.raises(SpecError, match="'normal' takes a shape: a list of positive integers"):
        prepare(check, ctx)


# --- judge: calls that did not return --------------------------------------------------


def _literal_softmax() -> tuple[Check, Prepared, KindContext]:
    check, ctx = make("literal", "softmax", {"scores": [0.0, 0.0]}, {"expect": [0.5, 0.5]})
    return check, prepare(check, ctx), ctx


@pytest.mark.parametrize(
    ("result", "status", "message"),
    [
        (
            CallResult("not_implemented", message=""),
            "not_attempted",
            "not attempted: softmax still raises NotImplementedError",
        ),
        (
            CallResult("not_implemented", message="attention.py defines no function softmax"),
            "not_attempted",
            "not attempted: attention.py defines no function softmax",
        ),
        (
            CallResult("timeout", message="the call took longer than 2 s"),
            "timeout",
            "softmax did not finish: the call took longer than 2 s",
        ),
        (
            CallResult("crashed", message="the process exited with code 0 before answering"),
            "error",
            "softmax crashed: the process exited with code 0 before answering",
        ),
        (
            CallResult("skipped", message="importing the file failed with SyntaxError"),
            "error",
            "not run: importing the file failed with SyntaxError",
        ),
        (
            CallResult("bad_return", message="the result holds a generator"),
            "error",
            "softmax returned something the grader cannot read: the result holds a generator",
        ),
        (
            CallResult(
                "raised", error_type="ValueError", value_error=True, message="boom", where="attention.py, line 3"
            ),
            "error",
            "softmax raised ValueError on valid input (attention.py, line 3): boom",
        ),
        (
            CallResult("raised", error_type="ZeroDivisionError", message="division by zero"),
            "error",
            "softmax raised ZeroDivisionError on valid input: division by zero",
        ),
    ],
    ids=["stub", "missing", "timeout", "crashed", "skipped", "bad-return", "raised-value-error", "raised-other"],
)
def test_judge_maps_call_statuses(result: CallResult, status: str, message: str) -> None:
    check, prepared, ctx = _literal_softmax()
    v = judge(check, prepared, [result], KINDS["literal"], ctx)
    assert v.status == status
    assert v.message == message
    assert v.fraction == 0.0


def test_judge_precedence_and_delegation() -> None:
    check, prepared, ctx = _literal_softmax()
    passed(judge(check, prepared, [CallResult("returned", value=[0.5, 0.5])], KINDS["literal"], ctx))
    assert judge(check, prepared, [CallResult("returned", value=[1.0, 0.0])], KINDS["literal"], ctx).status == "failed"

    shift, ctx2 = make("shift_invariance", "softmax", {"scores": [1.0, 2.0]}, {"shift": 5.0})
    prep2 = prepare(shift, ctx2)
    mixed = [CallResult("returned", value=[0.5, 0.5]), CallResult("timeout", message="the call took longer than 2 s")]
    assert judge(shift, prep2, mixed, KINDS["shift_invariance"], ctx2).status == "timeout"
    both = [CallResult("crashed", message="x"), CallResult("skipped", message="not run: budget")]
    assert judge(shift, prep2, both, KINDS["shift_invariance"], ctx2) == Verdict("error", "not run: not run: budget")

    raises, ctx3 = make("raises", "softmax", {"scores": []}, {"reason": "an empty row"})
    prep3 = prepare(raises, ctx3)
    value_error = CallResult("raised", error_type="ValueError", value_error=True, message="scores is empty")
    passed(judge(raises, prep3, [value_error], KINDS["raises"], ctx3))
    assert judge(raises, prep3, [CallResult("not_implemented")], KINDS["raises"], ctx3).status == "not_attempted"
    other = CallResult("raised", error_type="IndexError", message="list index out of range")
    assert judge(raises, prep3, [other], KINDS["raises"], ctx3).status == "failed"


# --- judge: hidden stays hidden -------------------------------------------------------

LEAK = "Q=[[0.123456789, 0.987654321]] and the expected [[0.5]]"


def _hidden_softmax(visibility: str = "hidden") -> tuple[Check, Prepared, KindContext]:
    check, ctx = make("literal", "softmax", {"scores": [0.0, 0.0]}, {"expect": [0.5, 0.5]})
    check = dataclasses.replace(check, visibility=visibility)
    return check, prepare(check, ctx), ctx


def test_a_hidden_check_that_raised_shows_type_and_line_never_the_message() -> None:
    check, prepared, ctx = _hidden_softmax()
    raised = CallResult("raised", error_type="TypeError", message=LEAK, where="attention.py, line 12")
    v = judge(check, prepared, [raised], KINDS["literal"], ctx)
    assert v == Verdict("error", "softmax raised TypeError (attention.py, line 12)")
    # The same call on a visible check keeps the student's own message.
    visible, vprep, vctx = _hidden_softmax("visible")
    v = judge(visible, vprep, [raised], KINDS["literal"], vctx)
    assert v.message == f"softmax raised TypeError on valid input (attention.py, line 12): {LEAK}"
    # Released checks follow --after-due-date / --published; unreleased ones are hidden.
    late, lprep, lctx = _hidden_softmax("after_due_date")
    assert judge(late, lprep, [raised], KINDS["literal"], lctx, shown=True).message.endswith(LEAK)
    assert LEAK not in judge(late, lprep, [raised], KINDS["literal"], lctx).message


def test_hidden_check_messages_carry_nothing_the_job_wrote() -> None:
    check, prepared, ctx = _hidden_softmax()
    cases = [
        (
            CallResult("raised", error_type="Q_0_123456789", message=LEAK, where="attention.py, line 3"),
            "softmax raised an exception of its own class (attention.py, line 3)",
        ),
        (
            CallResult("raised", error_type="ValueError", message=LEAK, where=f"attention.py, line 3): {LEAK}"),
            "softmax raised ValueError",
        ),
        (CallResult("raised", error_type="LinAlgError", message=LEAK), "softmax raised LinAlgError"),
        (
            CallResult("raised", error_type="PermissionError", message=LEAK, where="attention.py, line 9"),
            (
                "softmax raised PermissionError (attention.py, line 9) (the grader's sandbox does not allow this: while "
                "grading, your code may read only its own file, the standard library and numpy, and may not use the network, "
                "write outside its own folder, or start, stop or inspect other programs)"
            ),
        ),
        (
            CallResult("not_implemented", message=LEAK),
            "not attempted: softmax still raises NotImplementedError or is not defined",
        ),
        (
            CallResult("bad_return", message=LEAK),
            "softmax returned something the grader cannot read (return plain numbers, lists of them or numpy arrays)",
        ),
        (
            CallResult(
                "bad_return", message="the result holds a Q_0_123; return numbers, lists, tuples or numpy arrays"
            ),
            (
                "softmax returned something the grader cannot read: the result holds an object of a class of its own; "
                "return numbers, lists, tuples or numpy arrays"
            ),
        ),
        (
            CallResult(
                "bad_return", message="the result holds a generator; return numbers, lists, tuples or numpy arrays"
            ),
            (
                "softmax returned something the grader cannot read: the result holds a generator; "
                "return numbers, lists, tuples or numpy arrays"
            ),
        ),
        (
            CallResult("bad_return", message="the result holds a numpy array of dtype <U5; return numbers"),
            (
                "softmax returned something the grader cannot read: the result holds a numpy array of dtype <U5; "
                "return numbers"
            ),
        ),
        (
            CallResult("bad_return", message="the result is nested too deeply"),
            "softmax returned something the grader cannot read: the result is nested too deeply",
        ),
    ]
    for result, message in cases:
        v = judge(check, prepared, [result], KINDS["literal"], ctx)
        assert (v.status, v.message, v.details) == (
            "error" if result.status != "not_implemented" else "not_attempted",
            message,
            (),
        ), result
        assert "0.123" not in v.message


# --- format_value ----------------------------------------------------------------------


def test_format_value_renders_python_literals() -> None:
    assert format_value([[1.0, 2.0], [3.0, 4.0]]) == "[[1.0, 2.0],\n [3.0, 4.0]]"
    assert format_value(np.array([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]])) == "[[0.5, 0.25, 0.25],\n [1.0, 0.0, 0.0]]"
    assert format_value([0.25, 0.75]) == "[0.25, 0.75]"
    assert format_value(1 / 3) == "0.3333333333"
    assert format_value(np.float64(0.5)) == "0.5"
    assert format_value(67108864) == "67108864"
    assert format_value([math.nan, math.inf, -math.inf]) == "[nan, inf, -inf]"
    assert format_value([True, None]) == "[True, None]"
    assert format_value(list(range(30))) == "[" + ", ".join(map(str, range(24))) + ", … 6 more]"
    long = format_value(np.zeros((24, 24)), limit=100)
    assert len(long) == 100 and long.endswith("…") and long.startswith("[[0.0, 0.0")
    # one row per line, every row a valid Python literal
    rows = format_value(np.arange(6.0).reshape(3, 2)).splitlines()
    assert rows == ["[[0.0, 1.0],", " [2.0, 3.0],", " [4.0, 5.0]]"]
    assert eval(format_value(np.arange(6.0).reshape(3, 2))) == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]  # noqa: S307


def test_split_parts_and_as_array() -> None:
    assert split_parts(("result",), 3) == {"result": 3}
    assert split_parts(("outputs", "weights"), [[1.0], [2.0]]) == {"outputs": [1.0], "weights": [2.0]}
    arr = as_array("x", [[1, 2], [3, 4]])
    assert arr.dtype == np.float64 and arr.tolist() == [[1.0, 2.0], [3.0, 4.0]]


# --- bugs found while writing these tests ----------------------------------------------


def test_row_sums_on_an_empty_matrix_fails_the_check() -> None:
    check, ctx = make(
        "row_sums", "attention", {"Q": {"normal": [4, 3]}, "K": {"normal": [6, 3]}, "V": {"normal": [6, 2]}}
    )
    prepared = prepare(check, ctx)
    assert verdict_of(check, prepared, [[[]], [[]]], ctx=ctx).status == "failed"


def test_huge_integer_result_fails_the_check() -> None:
    check, ctx = make("literal", "bytes_to_mib", {"nbytes": 67108864}, {"expect": 64.0}, returns={})
    prepared = prepare(check, ctx)
    assert verdict_of(check, prepared, 10**400, ctx=ctx).status == "failed"


@pytest.mark.parametrize(
    ("kind", "function", "args", "params", "values"),
    [
        ("sum_to_zero", "softmax_backward", {"p": {"simplex": 6}, "u": {"normal": [6]}}, {}, ([],)),
        ("sum_to_zero", "softmax_backward", {"p": {"simplex": 6}, "u": {"normal": [6]}}, {}, (0.0,)),
        (
            "row_sums",
            "attention",
            {"Q": {"normal": [4, 3]}, "K": {"normal": [6, 3]}, "V": {"normal": [6, 2]}},
            {},
            ([[[0.0]], [[1.0]]],),
        ),
        ("shift_invariance", "softmax", {"scores": {"normal": [6]}}, {"shift": 100.0}, ([1.0], [1.0])),
        (
            "causal_noninterference",
            "attention",
            {"Q": {"normal": [5, 3]}, "K": {"normal": [5, 3]}, "V": {"normal": [5, 2]}, "causal": True},
            {},
            ([[[0.0]], [[1.0]]], [[[0.0]], [[1.0]]]),
        ),
    ],
    ids=["sum-to-zero-empty", "sum-to-zero-scalar", "row-sums-1x1", "shift-1", "causal-1x1"],
)
def test_property_kinds_reject_wrong_shapes(kind: str, function: str, args: dict, params: dict, values: tuple) -> None:
    check, ctx = make(kind, function, args, params)
    prepared = prepare(check, ctx)
    assert verdict_of(check, prepared, *values, ctx=ctx).status == "failed"


def test_no_mutation_names_the_changed_argument() -> None:
    check, ctx = make(
        "no_mutation", "softmax", {"scores": {"normal": [5]}, "allowed": {"mask": 5}}, returns={"softmax": ("weights",)}
    )
    prepared = prepare(check, ctx)
    assert prepared.expected["params"] == ["scores", "allowed"] and len(prepared.calls) == 1
    good = reference_result("softmax", prepared.calls[0].args)
    passed(KINDS["no_mutation"].judge(check, prepared, [CallResult("returned", value=good)], ctx))
    # Leaving the arguments alone earns nothing for a result that breaks the contract (uniform weights).
    assert "earns nothing" in failed(
        KINDS["no_mutation"].judge(check, prepared, [CallResult("returned", value=[0.2] * 5)], ctx)
    )
    changed = CallResult("returned", value=[0.2] * 5, mutated_args=(0,))
    verdict = KINDS["no_mutation"].judge(check, prepared, [changed], ctx)
    assert failed(verdict) == (
        "softmax changed the caller's scores in place; work on a copy and leave the arguments unchanged"
    )
    assert verdict.details == (("changed", "scores"),)
    both = KINDS["no_mutation"].judge(check, prepared, [CallResult("returned", value=0, mutated_args=(0, 1))], ctx)
    assert "changed the caller's scores, allowed in place" in failed(both)


def test_no_mutation_needs_valid_arguments() -> None:
    check, ctx = make("no_mutation", "softmax", {"scores": [1.0, 2.0], "allowed": [False, False]})
    with pytest.raises(SpecError, match="the reference raised ValueError"):
        prepare(check, ctx)


def test_ctrl_c_in_the_reference_stops_the_run_and_is_no_spec_error() -> None:
    # Ctrl-C while the checks are prepared lands in the reference's code: it must stop the run
    # ("grader: interrupted", exit 130), not be reported as the spec's error (exit 3), nor be lost.
    from grader.grading.session import _bounded

    def interrupted(scores: object, allowed: object) -> object:
        raise KeyboardInterrupt

    check, ctx = make("no_mutation", "softmax", {"scores": {"normal": [5]}, "allowed": {"mask": 5}})
    ctx.reference["softmax"] = interrupted
    with pytest.raises(KeyboardInterrupt):
        prepare(check, ctx)
    prepared = prepare(*make("no_mutation", "softmax", {"scores": {"normal": [5]}, "allowed": {"mask": 5}}))
    check, ctx = make("no_mutation", "softmax", {"scores": {"normal": [5]}, "allowed": {"mask": 5}})
    ctx.reference["softmax"] = interrupted  # a context that never ran the reference: _bounded calls it
    with pytest.raises(KeyboardInterrupt):
        _bounded(check, ctx, prepared)


def test_ctrl_c_in_the_reference_of_a_raises_check_stops_the_run_and_is_no_spec_error() -> None:
    # One Ctrl-C 0.7 s into grader grade under load landed in the reference called for a raises check's
    # arguments: it was "G14.06.yaml: check ...: the reference raised KeyboardInterrupt, not ValueError", exit 3.
    def interrupted(Q: object, K: object, V: object) -> object:  # noqa: N803 - the reference's names
        raise KeyboardInterrupt

    args = {"Q": {"normal": [3, 2]}, "K": {"normal": [5, 2]}, "V": {"normal": [4, 5]}}
    check, ctx = make("raises", "attention", args, {"reason": "a V with 4 rows for 5 keys"})
    ctx.reference["attention"] = interrupted
    with pytest.raises(KeyboardInterrupt):
        prepare(check, ctx)
    valid = {"Q": [[1.0, 0.0]], "K": [[1.0, 0.0]], "V": [[2.0]]}
    check, ctx = make("raises", "attention", args, {"reason": "a V with 4 rows for 5 keys", "valid": valid})
    real = ctx.reference["attention"]
    calls = iter([real, interrupted])  # the args' call raises ValueError as it should; the valid twin's is stopped
    ctx.reference["attention"] = lambda Q, K, V: next(calls)(Q, K, V)  # noqa: N803
    with pytest.raises(KeyboardInterrupt):
        prepare(check, ctx)


def test_ctrl_c_while_the_pack_s_plugin_imports_stops_the_run(tmp_path: Path) -> None:
    # One Ctrl-C 0.3 s into grader grade lands in exercises/kinds.py's import: it was reported as the
    # pack's error ("the pack's plugin failed to import at ...: KeyboardInterrupt", exit 3).
    from grader.packs import _import_plugin

    plugin = tmp_path / "kinds.py"
    plugin.write_text("raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        _import_plugin(plugin, "", "ctrl-c-pack")


def _verdict(expected: np.ndarray, got: object, floor: np.ndarray | None = None) -> str:
    """``compare``'s answer on one part: "passed", or its failure's message and details."""
    try:
        compare("weights", expected, got, 1e-6, 1e-9, floor)
    except Mismatch as m:
        return f"{m.message} {m.details}"
    return "passed"


@pytest.mark.parametrize(
    "change",
    [
        "none",
        "at-limit",
        "past-limit-last-block",
        "past-limit-first-block",
        "nan",
        "inf",
        "negative-zero",
        "two-bad-blocks",
    ],
)
def test_compare_by_blocks_answers_as_the_whole_part(change: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large part is first checked a block at a time: the same verdict and message as one pass over it.

    300x300 is 2 blocks and a partial third (`grader.compare.BLOCK_ELEMENTS`); each change puts
    an element exactly at, or just past, its limit, or a non-finite one, in one block or another.
    """
    import grader.compare as comparing

    rng = np.random.default_rng(7)
    expected = rng.standard_normal((300, 300))
    floor = np.zeros_like(expected)
    floor[299, 299] = 1e-3
    got = expected.copy()
    limit = comparing.tolerance_limit(expected, 1e-6, 1e-9, floor)
    if change == "at-limit":
        for i, j in ((299, 290), (299, 299), (0, 0)):  # the largest got with |got - exp| <= limit: at it
            got[i, j] = expected[i, j] + limit[i, j]
            while abs(got[i, j] - expected[i, j]) > limit[i, j]:
                got[i, j] = np.nextafter(got[i, j], -math.inf)
    elif change == "past-limit-last-block":
        got[299, 298] += 3 * limit[299, 298]
    elif change == "past-limit-first-block":
        got[0, 1] -= 3 * limit[0, 1]
    elif change == "nan":
        got[150, 7] = math.nan
    elif change == "inf":
        got[200, 3] = -math.inf
    elif change == "negative-zero":
        expected[5, 5], got[5, 5] = 0.0, -0.0
    elif change == "two-bad-blocks":
        got[0, 0] += 1.0
        got[250, 0] += 2.0
    blocked = _verdict(expected, got, floor)
    monkeypatch.setattr(comparing, "BLOCK_ELEMENTS", 1 << 30)  # one pass over the whole part, as before
    whole = _verdict(expected, got, floor)
    assert blocked == whole
    reference = bool(np.all(np.abs(got - expected) <= limit))
    assert (blocked == "passed") is reference
    assert (blocked == "passed") is (change in ("none", "at-limit", "negative-zero"))
