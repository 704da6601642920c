"""Property-based tests of the reference, and the chapter's hand values.

The reference (numpy: masked scores set to -inf, shift by the row maximum)
is compared with an independent implementation written here in plain Python
(log-sum-exp over the allowed columns only, math.fsum everywhere) on random
shapes, masks and score scales from 1e-300 to 1e300. Hypothesis runs
derandomized, so CI sees the same examples every time.

The second half checks every number the chapter works out by hand
(sections "A numerical example before the general architecture", "Mask
before normalization", "Differentiate the mixing operation", "Count
computation and memory before claiming acceleration" and the solutions).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import REFERENCE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.builtin.reference import load_reference

REF = load_reference(str(REFERENCE))
SETTINGS = settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


# --- an independent implementation ------------------------------------------------------------


def ind_softmax(scores: list[float], allowed: list[bool]) -> list[float]:
    """Log-sum-exp over the allowed columns only; masked columns are never exponentiated."""
    idx = [j for j, ok in enumerate(allowed) if ok]
    if not scores or not idx or not all(math.isfinite(s) for s in scores):
        raise ValueError("nothing to normalize")
    top = max(scores[j] for j in idx)
    log_total = math.log(math.fsum(math.exp(scores[j] - top) for j in idx))
    out = [0.0] * len(scores)
    for j in idx:
        out[j] = math.exp((scores[j] - top) - log_total)
    return out


def ind_attention(Q, K, V, causal):  # noqa: ANN001, ANN201
    """Row by row, scores with math.fsum, softmax with `ind_softmax`."""
    n, m, d_k = len(Q), len(K), len(Q[0])
    if causal and n != m:
        raise ValueError("causal needs n == m")
    root = math.sqrt(d_k)
    outputs, weights = [], []
    for i in range(n):
        row = []
        for j in range(m):
            try:
                row.append(math.fsum(a * b for a, b in zip(Q[i], K[j])) / root)
            except (OverflowError, ValueError):  # inf - inf, or an intermediate overflow
                row.append(math.inf)
        if not all(math.isfinite(s) for s in row):
            raise ValueError("the scores overflow")
        p = ind_softmax(row, [j <= i or not causal for j in range(m)])
        weights.append(p)
        outputs.append([math.fsum(p[j] * V[j][c] for j in range(m)) for c in range(len(V[0]))])
    return outputs, weights


def outcome(fn, *args):  # noqa: ANN001, ANN201
    """("ok", value) or ("ValueError", None): invalid input must raise ValueError, nothing else."""
    try:
        return "ok", fn(*args)
    except ValueError:
        return "ValueError", None


def close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float | np.ndarray) -> bool:
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= atol + rtol * np.abs(want)))


# --- strategies -------------------------------------------------------------------------------

SCALES = [1e-300, 1e-12, 1e-3, 1.0, 30.0, 1e3, 1e8, 1e100, 1e300]


@st.composite
def masked_rows(draw):  # noqa: ANN001, ANN201
    m = draw(st.integers(1, 12))
    scale = draw(st.sampled_from(SCALES))
    unit = draw(st.lists(st.floats(-1.0, 1.0), min_size=m, max_size=m))
    wild = draw(st.booleans())  # sometimes any finite float at all, up to +-1.8e308
    scores = (
        draw(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=m, max_size=m))
        if wild
        else [x * scale for x in unit]
    )
    allowed = draw(st.lists(st.booleans(), min_size=m, max_size=m))
    return scores, allowed


@st.composite
def exact_problems(draw):  # noqa: ANN001, ANN201
    """Q and K of small integers times powers of two: every dot product is exact, so both
    implementations see bit-identical scores at every scale, from 2**-1000 to overflow."""
    causal = draw(st.booleans())
    n = draw(st.integers(1, 5))
    m = n if causal else draw(st.integers(1, 5))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    eq, ek = (
        draw(st.sampled_from([-500, -30, 0, 7, 100, 250, 500, 600])),
        draw(st.sampled_from([-500, -30, 0, 7, 250, 500])),
    )

    def ints(rows: int, cols: int, e: int) -> list[list[float]]:
        return [
            [math.ldexp(float(x), e) for x in draw(st.lists(st.integers(-8, 8), min_size=cols, max_size=cols))]
            for _ in range(rows)
        ]

    values = st.floats(-1e3, 1e3)
    V = [draw(st.lists(values, min_size=d_v, max_size=d_v)) for _ in range(m)]
    return ints(n, d_k, eq), ints(m, d_k, ek), V, causal


@st.composite
def float_problems(draw):  # noqa: ANN001, ANN201
    causal = draw(st.booleans())
    n = draw(st.integers(1, 6))
    m = draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    entry = st.floats(-10.0, 10.0)

    def matrix(rows: int, cols: int) -> list[list[float]]:
        return [draw(st.lists(entry, min_size=cols, max_size=cols)) for _ in range(rows)]

    return matrix(n, d_k), matrix(m, d_k), matrix(m, d_v), causal


# --- properties -------------------------------------------------------------------------------


@pytest.mark.slow
@SETTINGS
@given(masked_rows())
def test_softmax_agrees_with_an_independent_implementation(row) -> None:  # noqa: ANN001
    scores, allowed = row
    ref, ind = outcome(REF["softmax"], scores, allowed), outcome(ind_softmax, scores, allowed)
    assert ref[0] == ind[0]
    if ref[0] == "ValueError":
        assert not any(allowed)
        return
    p = np.asarray(ref[1])
    assert close(p, ind[1], rtol=1e-11, atol=1e-300)
    assert np.all(p[~np.asarray(allowed)] == 0.0)  # masked weights are exactly zero
    assert np.all(p >= 0) and abs(math.fsum(p) - 1.0) <= 1e-12
    top = max(s for s, ok in zip(scores, allowed) if ok)
    assert all(p[j] == p.max() for j, (s, ok) in enumerate(zip(scores, allowed)) if ok and s == top)


@pytest.mark.slow
@SETTINGS
@given(exact_problems())
def test_attention_agrees_at_extreme_scales(problem) -> None:  # noqa: ANN001
    Q, K, V, causal = problem
    ref, ind = outcome(REF["attention"], Q, K, V, causal), outcome(ind_attention, Q, K, V, causal)
    assert ref[0] == ind[0]
    if ref[0] == "ValueError":
        return
    (o_ref, p_ref), (o_ind, p_ind) = ref[1], ind[1]
    assert close(p_ref, p_ind, rtol=1e-11, atol=1e-300)
    if causal:
        assert np.all(np.triu(np.asarray(p_ref), k=1) == 0.0)
    bound = 1e-11 * np.abs(np.asarray(V)).sum(axis=0) + 1e-300  # |error| <= sum_j |dP_ij| |V_jc|
    assert close(o_ref, o_ind, rtol=0.0, atol=bound)


@pytest.mark.slow
@SETTINGS
@given(float_problems())
def test_attention_agrees_on_random_shapes(problem) -> None:  # noqa: ANN001
    Q, K, V, causal = problem
    ref, ind = outcome(REF["attention"], Q, K, V, causal), outcome(ind_attention, Q, K, V, causal)
    assert ref[0] == ind[0]
    if ref[0] == "ValueError":
        assert causal and len(Q) != len(K)
        return
    (o_ref, p_ref), (o_ind, p_ind) = ref[1], ind[1]
    assert np.shape(p_ref) == (len(Q), len(K)) and np.shape(o_ref) == (len(Q), len(V[0]))
    # The two score computations differ by rounding (at most ~1e-13 here); a weight moves
    # by at most half the largest score difference.
    assert close(p_ref, p_ind, rtol=0.0, atol=1e-10)
    assert close(o_ref, o_ind, rtol=0.0, atol=1e-10 * np.abs(np.asarray(V)).sum(axis=0) + 1e-12)
    assert np.allclose(np.sum(p_ref, axis=1), 1.0, rtol=0, atol=1e-12)


@SETTINGS
@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=10), st.data())
def test_softmax_backward_is_the_jacobian_times_u(raw, data) -> None:  # noqa: ANN001
    total = math.fsum(raw)
    p = [x / total for x in raw]
    u = data.draw(st.lists(st.floats(-1e3, 1e3), min_size=len(p), max_size=len(p)))
    got = np.asarray(REF["softmax_backward"](p, u))
    # (diag(p) - p p^T) u, built entry by entry from the chapter's dp_j/ds_k = p_j (1[j=k] - p_k)
    want = [math.fsum(u[j] * p[j] * ((j == k) - p[k]) for j in range(len(p))) for k in range(len(p))]
    scale = math.fsum(abs(a * b) for a, b in zip(p, u)) + 1e-300
    assert close(got, want, rtol=0.0, atol=1e-12 * scale)
    assert abs(math.fsum(got)) <= 1e-12 * scale  # the constant-shift direction has zero sensitivity


@SETTINGS
@given(st.integers(1, 64), st.integers(1, 128), st.integers(1, 1 << 16), st.sampled_from([1, 2, 4, 8]))
def test_memory_of_a_score_array(B, H, N, itemsize) -> None:  # noqa: ANN001, N803
    nbytes = REF["score_array_bytes"](B, H, N, itemsize)
    assert nbytes == B * H * N * N * itemsize and isinstance(nbytes, int)
    assert REF["bytes_to_mib"](nbytes) * 2**20 == nbytes


@SETTINGS
@given(masked_rows(), st.floats(-1e3, 1e3))
def test_a_common_shift_leaves_the_weights_unchanged(row, c) -> None:  # noqa: ANN001
    scores, allowed = row
    if not any(allowed) or max(map(abs, scores)) > 1e6:
        return
    a = REF["softmax"](scores, allowed)
    b = REF["softmax"]([s + c for s in scores], allowed)
    # s + c rounds: the shifted differences are off by up to 2 ulp(|s| + |c|)
    assert close(b, a, rtol=1e-12 * (1.0 + abs(c) + max(map(abs, scores))), atol=1e-300)


# --- the chapter's hand values ------------------------------------------------------------------


def test_shapes_follow_from_the_summation_indices() -> None:
    rng = np.random.default_rng(0)
    Q, K, V = (rng.normal(size=s).tolist() for s in ((3, 2), (5, 2), (5, 4)))
    outputs, weights = REF["attention"](Q, K, V)
    assert np.shape(weights) == (3, 5) and np.shape(outputs) == (3, 4)
    with pytest.raises(ValueError):
        REF["attention"](Q, K, rng.normal(size=(4, 5)).tolist())  # four value rows for five keys


def test_zero_scores_mix_both_values() -> None:
    outputs, weights = REF["attention"]([[0.0]], [[0.0], [0.0]], [[2.0], [8.0]])
    assert weights.tolist() == [[0.5, 0.5]] and outputs.tolist() == [[5.0]]


def test_log3_scores() -> None:
    assert math.isclose(math.exp(math.log(3.0)), 3.0, rel_tol=1e-15)  # exponentials (3, 1)
    outputs, weights = REF["attention"]([[1.0]], [[math.log(3.0)], [0.0]], [[2.0], [8.0]])
    assert np.allclose(weights, [[0.75, 0.25]], rtol=1e-15, atol=0)
    assert math.isclose(outputs[0][0], 3.5, rel_tol=1e-15) and math.isclose(3 / 2 + 2, 7 / 2)
    shifted = REF["softmax"]([math.log(3.0) + 5.0, 5.0])
    assert np.allclose(shifted, [0.75, 0.25], rtol=1e-14, atol=0)


def test_causal_example_and_the_mask_after_softmax_counterexample() -> None:
    zeros = [[0.0], [0.0]]
    outputs, weights = REF["attention"](zeros, zeros, [[2.0], [8.0]], True)
    assert weights.tolist() == [[1.0, 0.0], [0.5, 0.5]] and outputs.tolist() == [[2.0], [5.0]]
    wrong_row = REF["softmax"]([0.0, 0.0]) * np.array([1.0, 0.0])  # normalize over both, then zero the future
    assert wrong_row.tolist() == [0.5, 0.0] and float(wrong_row @ [2.0, 8.0]) == 1.0
    assert wrong_row.sum() != 1.0


def test_one_allowed_key_gets_weight_one() -> None:
    assert REF["softmax"]([3.0, 1.0, -2.0], [False, True, False]).tolist() == [0.0, 1.0, 0.0]


def test_empty_allowed_set_is_rejected() -> None:
    with pytest.raises(ValueError):
        REF["softmax"]([1.0, 2.0], [False, False])


def test_softmax_gradient_example() -> None:
    p, u = [0.25, 0.75], [1.0, 3.0]
    assert math.fsum(a * b for a, b in zip(p, u)) == 2.5  # the weighted upstream mean
    grad = REF["softmax_backward"](p, u)
    assert grad.tolist() == [-0.375, 0.375] and grad.sum() == 0.0


def test_jacobian_is_diag_p_minus_p_pT() -> None:
    s = np.array([0.3, -1.2, 2.0, 0.0])
    p = REF["softmax"](s.tolist())
    h = 1e-6
    numeric = np.empty((4, 4))
    for k in range(4):
        e = np.zeros(4)
        e[k] = h
        numeric[:, k] = (REF["softmax"]((s + e).tolist()) - REF["softmax"]((s - e).tolist())) / (2 * h)
    assert np.allclose(numeric, np.diag(p) - np.outer(p, p), atol=1e-9)


def test_memory_hand_values() -> None:
    one = REF["score_array_bytes"](2, 8, 1024)
    assert one == 2 * 8 * 1024**2 * 4 == 67_108_864 and REF["bytes_to_mib"](one) == 64.0
    doubled = REF["score_array_bytes"](2, 8, 2048)
    assert doubled == 268_435_456 and REF["bytes_to_mib"](doubled) == 256.0
    assert REF["bytes_to_mib"](2**20) == 1.0 and REF["bytes_to_mib"](10**6) != 1.0


def test_dot_product_variance_motivates_sqrt_dk() -> None:
    """Independent zero-mean unit-variance coordinates: q.k has variance d_k; divided by
    sqrt(d_k), variance one (a motivating model, checked on seeded samples)."""
    rng = np.random.default_rng(14)
    for d_k in (4, 64):
        q, k = rng.normal(size=(2, 40_000, d_k))
        dots = np.einsum("ij,ij->i", q, k)
        assert abs(dots.var() / d_k - 1.0) < 0.05
        assert abs((dots / math.sqrt(d_k)).var() - 1.0) < 0.05
