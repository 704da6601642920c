"""The reference implementation: the chapter's hand values and contract."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
from conftest import REFERENCE

from grader.builtin.reference import load_reference

ref = load_reference(str(REFERENCE))


def test_exports_exactly_the_contract() -> None:
    assert sorted(ref) == ["attention", "bytes_to_mib", "score_array_bytes", "softmax", "softmax_backward"]


def test_g14_01_shapes() -> None:
    rng = np.random.default_rng(1)
    outputs, weights = ref["attention"](
        rng.normal(size=(3, 2)).tolist(), rng.normal(size=(5, 2)).tolist(), rng.normal(size=(5, 4)).tolist()
    )
    assert outputs.shape == (3, 4) and weights.shape == (3, 5)
    with pytest.raises(ValueError, match="K has 5 rows but V has 4"):
        ref["attention"](
            rng.normal(size=(3, 2)).tolist(), rng.normal(size=(5, 2)).tolist(), rng.normal(size=(4, 5)).tolist()
        )


def test_g14_02_hand_values() -> None:
    outputs, weights = ref["attention"]([[0.0]], [[0.0], [0.0]], [[2.0], [8.0]])
    assert outputs.tolist() == [[5.0]] and weights.tolist() == [[0.5, 0.5]]
    outputs, weights = ref["attention"]([[1.0]], [[math.log(3)], [0.0]], [[2.0], [8.0]])
    assert outputs[0, 0] == pytest.approx(3.5, abs=1e-15)
    assert weights[0].tolist() == pytest.approx([0.75, 0.25], abs=1e-15)
    assert ref["softmax"]([0.0, 0.0]).tolist() == [0.5, 0.5]
    assert ref["softmax"]([7.5, 7.5 + math.log(3)]).tolist() == pytest.approx([0.25, 0.75], abs=1e-15)


def test_g14_03_causal_hand_values() -> None:
    outputs, weights = ref["attention"]([[0.0], [0.0]], [[0.0], [0.0]], [[2.0], [8.0]], causal=True)
    assert outputs.tolist() == [[2.0], [5.0]]
    assert weights.tolist() == [[1.0, 0.0], [0.5, 0.5]]
    assert ref["softmax"]([3.0, 1.0, -2.0], [False, True, False]).tolist() == [0.0, 1.0, 0.0]


def test_g14_04_softmax_backward_hand_value() -> None:
    grad = ref["softmax_backward"]([0.25, 0.75], [1.0, 3.0])
    assert grad.tolist() == [-0.375, 0.375]
    assert grad.sum() == 0.0


def test_g14_05_memory() -> None:
    assert ref["score_array_bytes"](2, 8, 1024) == 67_108_864
    assert ref["bytes_to_mib"](67_108_864) == 64.0
    assert ref["score_array_bytes"](2, 8, 2048) == 268_435_456
    assert ref["bytes_to_mib"](268_435_456) == 256.0
    assert ref["bytes_to_mib"](2**20) == 1.0
    assert ref["score_array_bytes"](1, 1, 3, itemsize=8) == 72


@pytest.mark.parametrize(
    ("function", "args", "phrase"),
    [
        ("softmax", ([],), "scores is empty"),
        ("softmax", ([1.0, math.nan],), "not finite"),
        ("softmax", ([1.0, math.inf],), "not finite"),
        ("softmax", ([1.0, 2.0], [False, False]), "no allowed position"),
        ("softmax", ([1.0, 2.0], [True]), "allowed must be a list of 2 booleans"),
        ("softmax", ([1.0, 2.0], [1, 0]), "only booleans"),
        ("attention", ([[1.0, 2.0], [3.0]], [[1.0, 0.0]], [[1.0]]), "Q is ragged: its rows have widths [1, 2]"),
        ("attention", ([[1.0, 2.0]], [[1.0]], [[1.0]]), "Q rows have width 2 but K rows have width 1"),
        ("attention", ([[1.0]], [[1.0], [2.0], [3.0]], [[1.0], [2.0]]), "K has 3 rows but V has 2"),
        ("attention", ([], [[1.0]], [[1.0]]), "non-empty"),
        ("attention", ([[1.0]], [[math.nan]], [[1.0]]), "not finite"),
        ("attention", ([[1.0], [2.0]], [[1.0], [2.0], [3.0]], [[1.0], [2.0], [3.0]], True), "n=2, m=3"),
        ("attention", ([[1.0]], [[1.0]], [[1.0]], 1), "causal must be True or False"),
        ("attention", ([[1e200]], [[1e200]], [[1.0]]), "overflow"),
        ("softmax_backward", ([0.5, 0.5], [1.0]), "p has 2 entries but u has 1"),
        ("score_array_bytes", (2, 8, 0), "N must be a positive integer"),
        ("bytes_to_mib", (-1,), "finite size >= 0"),
    ],
)
def test_invalid_input_raises_value_error(function: str, args: tuple, phrase: str) -> None:
    with pytest.raises(ValueError, match=".*") as info:
        ref[function](*args)
    assert phrase in str(info.value)


def _pure_attention(Q, K, V, causal):
    """An independent pure-Python implementation, for comparison."""
    d = len(Q[0])
    outputs, weights = [], []
    for i, q in enumerate(Q):
        allowed = [j for j in range(len(K)) if not causal or j <= i]
        scores = [math.fsum(a * b for a, b in zip(q, K[j])) / math.sqrt(d) for j in allowed]
        top = max(scores)
        e = [math.exp(s - top) for s in scores]
        total = math.fsum(e)
        row = [0.0] * len(K)
        for j, x in zip(allowed, e):
            row[j] = x / total
        weights.append(row)
        outputs.append([math.fsum(row[j] * V[j][c] for j in range(len(K))) for c in range(len(V[0]))])
    return outputs, weights


@pytest.mark.parametrize("seed", range(40))
def test_agrees_with_an_independent_implementation(seed: int) -> None:
    rnd = random.Random(seed)
    n, m, dk, dv = (rnd.randint(1, 6) for _ in range(4))
    causal = rnd.random() < 0.4
    if causal:
        m = n
    scale = rnd.choice([0.1, 1.0, 30.0, 1e3])
    Q = [[rnd.gauss(0, scale) for _ in range(dk)] for _ in range(n)]
    K = [[rnd.gauss(0, scale) for _ in range(dk)] for _ in range(m)]
    V = [[rnd.gauss(0, 1) for _ in range(dv)] for _ in range(m)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outputs, weights = ref["attention"](Q, K, V, causal=causal)
    want_out, want_w = _pure_attention(Q, K, V, causal)
    np.testing.assert_allclose(weights, want_w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(outputs, want_out, rtol=1e-9, atol=1e-12)


def test_extreme_scores_stay_finite_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ref["softmax"]([1e308, -1e308]).tolist() == [1.0, 0.0]
        w = ref["softmax"]([0.0, -1e12, -999999999998.0], [False, True, True])
        assert w[0] == 0.0
        assert w.tolist() == pytest.approx([0.0, 1 / (1 + math.exp(2)), 1 / (1 + math.exp(-2))], rel=1e-12)
        assert ref["softmax"]([-1000.0, -1001.0]).tolist() == pytest.approx([1 / (1 + math.exp(-1)), 1 / (1 + math.e)])
