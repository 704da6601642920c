"""Sample submission with a classic mistake: a fully masked row gives NaNs.

When softmax() is given no allowed column it returns a row of NaN instead of
raising ValueError, so the caller silently gets garbage instead of an error.
attention() never builds such a row (a causal row always allows its own
position), and everything else is correct, pure Python. Should lose points on
G14.06 only.
"""

import math


def _finite_list(v, name):
    if not isinstance(v, list) or not v:
        raise ValueError(f"{name} must be a non-empty list")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ValueError(f"{name} contains a non-number: {x!r}")
        if math.isnan(x) or math.isinf(x):
            raise ValueError(f"{name} contains {x}")
        out.append(float(x))
    return out


def _matrix(M, name):
    if not isinstance(M, list) or not M:
        raise ValueError(f"{name} must be a non-empty list of rows")
    rows = [_finite_list(r, name) for r in M]
    if len(set(map(len, rows))) > 1:
        raise ValueError(f"{name} is ragged")
    return rows


def softmax(scores, allowed=None):
    s = _finite_list(scores, "scores")
    if allowed is None:
        allowed = [True] * len(s)
    if not isinstance(allowed, list) or len(allowed) != len(s):
        raise ValueError("allowed must have the same length as scores")
    for a in allowed:
        if not isinstance(a, bool):
            raise ValueError("allowed must hold booleans")
    if not any(allowed):
        # nothing to normalize over, so the weights are undefined
        return [math.nan] * len(s)
    shift = max(x for x, a in zip(s, allowed) if a)
    ex = []
    for x, a in zip(s, allowed):
        ex.append(math.exp(x - shift) if a else 0.0)
    denom = math.fsum(ex)
    return [e / denom for e in ex]


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be a bool")
    Q, K, V = _matrix(Q, "Q"), _matrix(K, "K"), _matrix(V, "V")
    n, m = len(Q), len(K)
    dk, dv = len(Q[0]), len(V[0])
    if len(K[0]) != dk:
        raise ValueError("Q and K have different widths")
    if len(V) != m:
        raise ValueError("K and V have different numbers of rows")
    if causal and n != m:
        raise ValueError("causal attention requires n == m")

    outputs, weights = [], []
    for i in range(n):
        s = []
        for j in range(m):
            try:
                s.append(math.fsum(q * k for q, k in zip(Q[i], K[j])) / math.sqrt(dk))
            except OverflowError:
                raise ValueError("score overflow") from None
        if not all(map(math.isfinite, s)):
            raise ValueError("score overflow")
        w = softmax(s, [j <= i for j in range(m)] if causal else None)
        weights.append(w)
        outputs.append([math.fsum(w[j] * V[j][c] for j in range(m)) for c in range(dv)])
    return outputs, weights


def softmax_backward(p, u):
    p, u = _finite_list(p, "p"), _finite_list(u, "u")
    if len(p) != len(u):
        raise ValueError("length mismatch between p and u")
    c = math.fsum(a * b for a, b in zip(p, u))
    return [a * (b - c) for a, b in zip(p, u)]


def score_array_bytes(B, H, N, itemsize=4):
    for v in (B, H, N, itemsize):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError("all sizes must be positive integers")
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)):
        raise ValueError("nbytes must be a number")
    if not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be finite and non-negative")
    return nbytes / 2**20
