"""Correct variant: pure Python, masked scores replaced by -inf.

Every masked score becomes float("-inf") before softmax. The maximum of the
row is then the largest *allowed* score (at least one is allowed), and
exp(-inf - top) == 0.0 gives masked positions a weight of exactly zero, even
when the masked scores are far above the allowed ones.
"""

import math

NEG_INF = float("-inf")


def _real(x, where):
    if type(x) is bool or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{where} must be a finite real number, got {x!r}")
    return float(x)


def _rows(M, name):
    if not isinstance(M, (list, tuple)) or len(M) == 0:
        raise ValueError(f"{name} must be a non-empty list of rows")
    rows = []
    for i, row in enumerate(M):
        if not isinstance(row, (list, tuple)) or len(row) == 0:
            raise ValueError(f"{name}[{i}] must be a non-empty list")
        rows.append([_real(x, f"{name}[{i}]") for x in row])
    if any(len(r) != len(rows[0]) for r in rows):
        raise ValueError(f"{name} is ragged")
    return rows


def softmax(scores, allowed=None):
    s = _rows([scores], "scores")[0] if isinstance(scores, (list, tuple)) else None
    if s is None:
        raise ValueError("scores must be a list of numbers")
    if allowed is None:
        allowed = [True] * len(s)
    if (not isinstance(allowed, (list, tuple)) or len(allowed) != len(s)
            or any(type(a) is not bool for a in allowed)):
        raise ValueError("allowed must be one True/False per score")
    if True not in allowed:
        raise ValueError("every position is masked: nothing to normalize")
    masked = [x if ok else NEG_INF for x, ok in zip(s, allowed)]
    top = max(masked)
    exps = [math.exp(x - top) for x in masked]
    total = math.fsum(exps)
    return [e / total for e in exps]


def attention(Q, K, V, causal=False):
    if type(causal) is not bool:
        raise ValueError("causal must be a bool")
    Q, K, V = _rows(Q, "Q"), _rows(K, "K"), _rows(V, "V")
    n, m = len(Q), len(K)
    d_k, d_v = len(Q[0]), len(V[0])
    if len(K[0]) != d_k:
        raise ValueError("Q and K rows must have the same width d_k")
    if len(V) != m:
        raise ValueError("V needs exactly one row per key")
    if causal and n != m:
        raise ValueError("causal attention needs n == m")
    scale = 1.0 / math.sqrt(d_k)
    outputs, weights = [], []
    for i, q in enumerate(Q):
        scores = []
        for key in K:
            try:
                dot = math.fsum(a * b for a, b in zip(q, key))
            except (OverflowError, ValueError):
                dot = math.inf
            scores.append(dot * scale)
        if not all(math.isfinite(x) for x in scores):
            raise ValueError("scores are not finite; the inputs are too large")
        w = softmax(scores, [j <= i for j in range(m)] if causal else None)
        weights.append(w)
        outputs.append([math.fsum(w[j] * V[j][c] for j in range(m)) for c in range(d_v)])
    return outputs, weights


def softmax_backward(p, u):
    p, u = _rows([p], "p")[0], _rows([u], "u")[0]
    if len(p) != len(u):
        raise ValueError("p and u must have the same length")
    pu = math.fsum(a * b for a, b in zip(p, u))
    return [a * (b - pu) for a, b in zip(p, u)]


def score_array_bytes(B, H, N, itemsize=4):
    for name, x in (("B", B), ("H", H), ("N", N), ("itemsize", itemsize)):
        if type(x) is not int or x < 1:
            raise ValueError(f"{name} must be a positive int")
    return B * H * N**2 * itemsize


def bytes_to_mib(nbytes):
    if type(nbytes) not in (int, float) or not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be a finite non-negative number")
    return nbytes / (1024 * 1024)
