"""Large inputs (issue 16): a compare check on 512x64 Q, K, V is cheap per submission and per run,
and as strict as on small inputs.

* The pack's float64 error bound on softmax rows (`g14.kinds.weight_bounds`) takes O(m) per
  row of m keys and agrees with the bound's definition, each weight's own O(m) sum.
* Preparing a check calls the reference once on its arguments, not once per use.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from test_checks import make, prepare

from g14.kinds import EPS, row_weight_bound, score_rounding, weight_bounds
from grader.kinds import FLOOR_KEY


def _pairwise_row(scores: np.ndarray, allowed: np.ndarray, error: np.ndarray) -> np.ndarray:
    """The bound of one row as its docstring defines it, weight by weight (O(m**2)): the oracle."""
    out = np.zeros(scores.shape)
    idx = np.flatnonzero(allowed)
    if idx.size <= 1:
        return out
    s, e = scores[idx], error[idx]

    def lse(x: np.ndarray) -> np.ndarray:
        top = np.max(x, axis=-1, keepdims=True)
        return (top + np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True)))[..., 0]

    diff = s[None, :] - s[:, None]
    spread = e[None, :] + e[:, None]
    np.fill_diagonal(spread, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.exp(-lse(diff))
        high = np.exp(-lse(diff - spread))
        low = np.exp(-lse(diff + spread))
    top = float(np.max(s))
    common = min(EPS * abs(top), float(lse(s - top))) + (idx.size + 4) * EPS
    out[idx] = np.maximum(high - p, p - low) + p * np.expm1(common)
    return out


ROWS = [
    (np.array([1.0, 2.0, 3.0]), np.array([True, True, True]), np.zeros(3)),
    (np.array([1e12, 1e12 + 1.0, 1e12 - 2.0]), np.ones(3, bool), np.zeros(3)),
    (np.array([1e12, 0.0, 1e12 + 0.5, -3.0]), np.array([True, False, True, True]), np.full(4, 1e-4)),
    (np.array([700.0, -700.0, 0.0]), np.ones(3, bool), np.full(3, 1e-13)),
    (np.array([0.0, 0.0, 0.0, 0.0]), np.ones(4, bool), np.full(4, 1e-12)),
    (np.array([5.0, 1.0]), np.array([False, True]), np.zeros(2)),  # one allowed key: exactly 0
]


@pytest.mark.parametrize("row", range(len(ROWS)))
def test_the_row_bound_agrees_with_its_definition(row: int) -> None:
    scores, allowed, error = ROWS[row]
    got = row_weight_bound(scores, allowed, error)
    want = _pairwise_row(scores, allowed, error)
    assert got.shape == want.shape
    assert np.all(got[~allowed] == 0.0)
    # The two sums round differently: a few eps of the weight (<= 1), nothing more.
    assert np.all(np.abs(got - want) <= 1e-12 * want + 8 * EPS), (got, want)
    if row == 1:  # near 1e12 the log-sum-exp route's rounding dominates: about 1e-4 per weight
        assert 1e-5 < float(np.max(got)) < 1e-3
    if row == len(ROWS) - 1:
        assert np.all(got == 0.0)


def test_the_matrix_bound_is_the_bound_of_each_row_with_a_causal_mask() -> None:
    rng = np.random.default_rng(5)
    n = 40
    scores = rng.normal(size=(n, n)) * 30
    scores[3] = 1e12 + rng.normal(size=n)  # spread like unit scores, near 1e12
    allowed = np.tril(np.ones((n, n), bool))
    error = np.abs(rng.normal(size=(n, n))) * 1e-12
    got = weight_bounds(scores, allowed, error)
    for i in range(n):
        want = _pairwise_row(scores[i], allowed[i], error[i])
        assert np.all(np.abs(got[i] - want) <= 1e-12 * want + 8 * EPS), i
    assert np.all(got[0] == 0.0)  # the first causal row has one key
    assert float(np.max(got[3])) > 1e-5  # the row near 1e12


def test_the_512x64_attention_bound_is_small_and_quick() -> None:
    import time

    rng = np.random.default_rng(9901)
    q, k, v = (rng.normal(size=(512, 64)) for _ in range(3))
    s = q @ k.T / 8.0
    w = np.exp(s - s.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    start = time.process_time()
    bound = score_rounding("attention", [q.tolist(), k.tolist(), v.tolist()], {"outputs": w @ v, "weights": w})
    seconds = time.process_time() - start
    assert bound is not None and bound["weights"].shape == (512, 512) and bound["outputs"].shape == (512, 64)
    # Well-conditioned inputs: float64 code is accurate to about 1e-13; the check keeps its 1e-9.
    assert 0.0 < float(np.max(bound["weights"])) < 1e-12
    assert seconds < 2.0  # the pairwise bound took 3.6 s of CPU here (a 512x512 sum per weight row)


def test_a_big_check_calls_the_reference_once() -> None:
    calls = []
    args = {"Q": {"normal": [64, 8]}, "K": {"normal": [64, 8]}, "V": {"normal": [64, 8]}}
    check, plain = make("compare", "attention", args)
    real = plain.reference["attention"]

    @functools.wraps(real)
    def counted(*a: object, **kw: object) -> object:
        calls.append(a)
        return real(*a, **kw)

    # As grading prepares it: the pack's error analysis (the grader_float64_error hook) gives the floor.
    ctx = dataclasses.replace(plain, reference={**plain.reference, "attention": counted}, error_bound=score_rounding)
    prepared = prepare(check, ctx)
    # The expected value and its rounding floor share one call ...
    assert len(calls) == 1
    call = prepared.calls[0]
    known, value = ctx.last_reference("attention", call.args)
    assert known and np.array_equal(value[1], prepared.expected["weights"])
    # ... which the result budget reuses; other arguments, or another function, are not taken for these.
    assert ctx.last_reference("attention", tuple(list(call.args))) == (False, None)
    assert ctx.last_reference("softmax", call.args) == (False, None)
    ctx.forget_reference()
    assert ctx.last_reference("attention", call.args) == (False, None)
    assert FLOOR_KEY not in prepared.expected  # well-conditioned: the default tolerance stands
