"""Sample submission with a classic mistake: the 1/sqrt(d_k) scale is missing.

Scores are Q K^T, not Q K^T / sqrt(d_k). With d_k = 1 the two agree, so the
hand examples of G14.02 and G14.03 still pass, but every seeded check with
d_k > 1 gets sharper weights and different outputs. Everything else (shapes,
validation, masking, softmax, backward, memory) is correct.
"""

import math


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def check_row(row, what):
    if not isinstance(row, list) or len(row) == 0:
        raise ValueError(what + " must be a non-empty list")
    for x in row:
        if not is_number(x) or not math.isfinite(x):
            raise ValueError(what + " must contain finite numbers only")
    return [float(x) for x in row]


def check_matrix(M, what):
    if not isinstance(M, list) or len(M) == 0:
        raise ValueError(what + " must be a non-empty list of rows")
    rows = [check_row(r, what) for r in M]
    if any(len(r) != len(rows[0]) for r in rows):
        raise ValueError(what + " has rows of different lengths")
    return rows


def softmax(scores, allowed=None):
    s = check_row(scores, "scores")
    if allowed is None:
        allowed = [True for _ in s]
    if not isinstance(allowed, list) or len(allowed) != len(s):
        raise ValueError("allowed must have one entry per score")
    if not all(a is True or a is False for a in allowed):
        raise ValueError("allowed must be booleans")
    if True not in allowed:
        raise ValueError("all columns are masked")
    a = max(s[j] for j in range(len(s)) if allowed[j])
    e = [math.exp(s[j] - a) if allowed[j] else 0.0 for j in range(len(s))]
    z = math.fsum(e)
    return [x / z for x in e]


def dot(x, y):
    try:
        return math.fsum(a * b for a, b in zip(x, y))
    except OverflowError:
        return math.inf


def attention(Q, K, V, causal=False):
    if causal is not True and causal is not False:
        raise ValueError("causal must be a bool")
    Q = check_matrix(Q, "Q")
    K = check_matrix(K, "K")
    V = check_matrix(V, "V")
    n, m = len(Q), len(K)
    if len(K[0]) != len(Q[0]):
        raise ValueError("queries and keys must have the same width")
    if len(V) != m:
        raise ValueError("V needs exactly one row per key")
    if causal and n != m:
        raise ValueError("causal mask needs as many queries as keys")
    d_v = len(V[0])

    weights, outputs = [], []
    for i in range(n):
        scores = [dot(Q[i], K[j]) for j in range(m)]
        if not all(math.isfinite(x) for x in scores):
            raise ValueError("score overflow")
        p = softmax(scores, [j <= i for j in range(m)] if causal else None)
        weights.append(p)
        outputs.append([math.fsum(p[j] * V[j][c] for j in range(m)) for c in range(d_v)])
    return outputs, weights


def softmax_backward(p, u):
    p = check_row(p, "p")
    u = check_row(u, "u")
    if len(p) != len(u):
        raise ValueError("p and u have different lengths")
    pu = math.fsum(p[j] * u[j] for j in range(len(p)))
    return [p[k] * (u[k] - pu) for k in range(len(p))]


def score_array_bytes(B, H, N, itemsize=4):
    for x in (B, H, N, itemsize):
        if not isinstance(x, int) or isinstance(x, bool) or x < 1:
            raise ValueError("B, H, N and itemsize must be positive integers")
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    if not is_number(nbytes) or not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be a finite non-negative number")
    return nbytes / 2**20
