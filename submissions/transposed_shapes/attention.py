"""Sample submission with two transposition slips that square tests hide.

Pure Python lists. (1) The row-count check compares V with Q (the queries)
instead of K (the keys), so valid input with n != m is rejected with
ValueError, and some invalid V is accepted. (2) The output width is taken
from Q's width d_k instead of V's width d_v, so with d_k != d_v the outputs
have the wrong width (or an IndexError is raised when d_k > d_v). With n == m
and d_k == d_v everything is right. Should lose points on G14.01 and G14.06.
"""

import math


def _validate(M, label):
    if type(M) is not list or not M:
        raise ValueError(f"{label} is empty or not a list")
    width = None
    for row in M:
        if type(row) is not list or not row:
            raise ValueError(f"{label} has an empty row")
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise ValueError(f"{label} is ragged")
        for x in row:
            if type(x) not in (int, float) or not math.isfinite(x):
                raise ValueError(f"{label} has a non-finite or non-numeric entry")
    return [[float(x) for x in row] for row in M]


def softmax(scores, allowed=None):
    (s,) = _validate([scores], "scores")
    m = len(s)
    if allowed is None:
        allowed = [True] * m
    elif type(allowed) is not list or len(allowed) != m or any(type(a) is not bool for a in allowed):
        raise ValueError("allowed must be a list of m bools")
    idx = [j for j in range(m) if allowed[j]]
    if not idx:
        raise ValueError("no allowed column in this row")
    big = max(s[j] for j in idx)
    w = [0.0] * m
    for j in idx:
        w[j] = math.exp(s[j] - big)
    tot = math.fsum(w)
    return [x / tot for x in w]


def attention(Q, K, V, causal=False):
    if type(causal) is not bool:
        raise ValueError("causal must be a bool")
    Q = _validate(Q, "Q")
    K = _validate(K, "K")
    V = _validate(V, "V")
    n = len(Q)
    m = len(K)
    d = len(Q[0])
    if len(K[0]) != d:
        raise ValueError("Q and K must have the same number of columns")
    if len(V) != len(Q):
        raise ValueError("V must have one row per position")
    if causal and n != m:
        raise ValueError("causal needs n == m")

    scale = 1.0 / math.sqrt(d)
    W = []
    for i in range(n):
        row = []
        for j in range(m):
            try:
                row.append(math.fsum(Q[i][t] * K[j][t] for t in range(d)) * scale)
            except OverflowError:
                row.append(math.inf)
        if any(not math.isfinite(x) for x in row):
            raise ValueError("scores overflow")
        W.append(softmax(row, [j <= i for j in range(m)] if causal else None))

    out = []
    for i in range(n):
        out.append([math.fsum(W[i][j] * V[j][c] for j in range(m)) for c in range(d)])
    return out, W


def softmax_backward(p, u):
    (p,) = _validate([p], "p")
    (u,) = _validate([u], "u")
    if len(p) != len(u):
        raise ValueError("p and u must be the same length")
    avg = math.fsum(a * b for a, b in zip(p, u))
    return [a * (b - avg) for a, b in zip(p, u)]


def score_array_bytes(B, H, N, itemsize=4):
    for v in (B, H, N, itemsize):
        if type(v) is not int or v <= 0:
            raise ValueError("expected positive integers")
    return B * H * N**2 * itemsize


def bytes_to_mib(nbytes):
    if type(nbytes) not in (int, float) or not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be a finite number >= 0")
    return nbytes / 2**20
