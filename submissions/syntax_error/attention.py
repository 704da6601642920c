"""Sample submission that does not even compile: one syntax error.

The code is close to correct, but the ``def`` line of softmax (line 20) lacks
its closing colon, so importing the module raises SyntaxError. The grader has
to report the error with its line number and award nothing, rather than crash.
"""

import math


def _row(v, name):
    if not isinstance(v, list) or len(v) == 0:
        raise ValueError(name + " must be a non-empty list")
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise ValueError(name + " must contain finite numbers")
    return [float(x) for x in v]


def softmax(scores, allowed=None)
    s = _row(scores, "scores")
    if allowed is None:
        allowed = [True] * len(s)
    if not isinstance(allowed, list) or len(allowed) != len(s):
        raise ValueError("allowed has the wrong length")
    if not all(isinstance(a, bool) for a in allowed):
        raise ValueError("allowed must be booleans")
    if not any(allowed):
        raise ValueError("no column is allowed")
    top = max(x for x, a in zip(s, allowed) if a)
    e = [math.exp(x - top) if a else 0.0 for x, a in zip(s, allowed)]
    total = math.fsum(e)
    return [x / total for x in e]


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be a bool")
    for M, name in ((Q, "Q"), (K, "K"), (V, "V")):
        if not isinstance(M, list) or len(M) == 0:
            raise ValueError(name + " is empty")
        rows = [_row(r, name) for r in M]
        if any(len(r) != len(rows[0]) for r in rows):
            raise ValueError(name + " is ragged")
    n, m, dk, dv = len(Q), len(K), len(Q[0]), len(V[0])
    if len(K[0]) != dk:
        raise ValueError("Q and K widths differ")
    if len(V) != m:
        raise ValueError("K and V row counts differ")
    if causal and n != m:
        raise ValueError("causal needs n == m")
    outputs, weights = [], []
    for i in range(n):
        s = [math.fsum(a * b for a, b in zip(Q[i], K[j])) / math.sqrt(dk) for j in range(m)]
        if not all(math.isfinite(x) for x in s):
            raise ValueError("scores overflow")
        p = softmax(s, [j <= i for j in range(m)] if causal else None)
        weights.append(p)
        outputs.append([math.fsum(p[j] * V[j][c] for j in range(m)) for c in range(dv)])
    return outputs, weights


def softmax_backward(p, u):
    p, u = _row(p, "p"), _row(u, "u")
    if len(p) != len(u):
        raise ValueError("p and u differ in length")
    mean = math.fsum(a * b for a, b in zip(p, u))
    return [a * (b - mean) for a, b in zip(p, u)]


def score_array_bytes(B, H, N, itemsize=4):
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    return nbytes / 2**20
