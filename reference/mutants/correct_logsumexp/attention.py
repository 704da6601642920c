"""Correct variant: log-sum-exp with math.fsum, pure Python.

Each weight is exp(s_j - lse) with lse = log(sum_k exp(s_k)) over the
allowed columns, computed stably as (s_j - top) - log(fsum(exp(s_k - top))):
subtracting the two parts one at a time keeps full precision even when the
scores are large (top + log(...) would round away the small part).
"""

import math


def _finite_list(values, name):
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{name}: expected a non-empty list")
    out = []
    for x in values:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ValueError(f"{name}: {x!r} is not a number")
        if math.isnan(x) or math.isinf(x):
            raise ValueError(f"{name}: {x!r} is not finite")
        out.append(float(x))
    return out


def _table(rows, name):
    if not isinstance(rows, (list, tuple)) or not rows:
        raise ValueError(f"{name}: expected a non-empty list of rows")
    table = [_finite_list(r, f"{name} row {i}") for i, r in enumerate(rows)]
    if len(set(map(len, table))) != 1:
        raise ValueError(f"{name}: rows of different lengths")
    return table


def log_softmax(scores, allowed):
    """log p_j for allowed j (None for masked j)."""
    top = max(s for s, ok in zip(scores, allowed) if ok)
    log_total = math.log(math.fsum(math.exp(s - top) for s, ok in zip(scores, allowed) if ok))
    return [(s - top) - log_total if ok else None for s, ok in zip(scores, allowed)]


def softmax(scores, allowed=None):
    s = _finite_list(scores, "scores")
    if allowed is None:
        allowed = [True] * len(s)
    elif not isinstance(allowed, (list, tuple)) or len(allowed) != len(s):
        raise ValueError("allowed must match scores in length")
    elif not all(isinstance(a, bool) for a in allowed):
        raise ValueError("allowed must be booleans")
    if not any(allowed):
        raise ValueError("all positions are masked")
    return [0.0 if lp is None else math.exp(lp) for lp in log_softmax(s, allowed)]


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be a bool")
    Q, K, V = _table(Q, "Q"), _table(K, "K"), _table(V, "V")
    if len(Q[0]) != len(K[0]):
        raise ValueError("Q and K widths differ")
    if len(K) != len(V):
        raise ValueError("K and V row counts differ")
    if causal and len(Q) != len(K):
        raise ValueError("causal attention requires equal query and key counts")
    d_k = len(Q[0])
    outputs, weights = [], []
    for i, q in enumerate(Q):
        try:
            row = [math.fsum(a * b for a, b in zip(q, k)) / math.sqrt(d_k) for k in K]
        except (OverflowError, ValueError):
            raise ValueError("scores overflow") from None
        if any(math.isinf(x) or math.isnan(x) for x in row):
            raise ValueError("scores overflow")
        w = softmax(row, [j <= i for j in range(len(K))] if causal else None)
        weights.append(w)
        outputs.append([math.fsum(wj * vj[c] for wj, vj in zip(w, V)) for c in range(len(V[0]))])
    return outputs, weights


def softmax_backward(p, u):
    p, u = _finite_list(p, "p"), _finite_list(u, "u")
    if len(p) != len(u):
        raise ValueError("p and u lengths differ")
    weighted_mean = math.fsum(pj * uj for pj, uj in zip(p, u))
    return [pk * (uk - weighted_mean) for pk, uk in zip(p, u)]


def score_array_bytes(B, H, N, itemsize=4):
    for x in (B, H, N, itemsize):
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise ValueError("sizes must be positive integers")
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)):
        raise ValueError("nbytes must be a number")
    if not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be finite and >= 0")
    return nbytes / 2**20
