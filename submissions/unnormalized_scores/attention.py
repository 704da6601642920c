"""Sample submission with a classic mistake: mixing values with raw scores.

The weights are computed correctly and returned, but the outputs are formed
as scores @ V (the scaled, unnormalized scores) instead of weights @ V. With
zero scores the chapter's example gives output 0 instead of 5. Output values
should fail in G14.01, G14.02, G14.03 and G14.06; weights, shapes, softmax,
the backward pass and the memory count are all correct.
"""

import math

import numpy as np


def check_matrix(M, name):
    if not isinstance(M, list) or not M or not all(isinstance(r, list) and r for r in M):
        raise ValueError(f"{name} must be a non-empty list of non-empty rows")
    if len({len(r) for r in M}) != 1:
        raise ValueError(f"{name} is ragged")
    for r in M:
        for x in r:
            if type(x) not in (int, float) or not math.isfinite(x):
                raise ValueError(f"{name} has a bad entry {x!r}")
    return np.array(M, dtype=np.float64)


def softmax(scores, allowed=None):
    s = check_matrix([scores], "scores")[0]
    if allowed is None:
        allowed = [True] * len(s)
    if not isinstance(allowed, list) or len(allowed) != len(s):
        raise ValueError("allowed must match the scores in length")
    if any(type(a) is not bool for a in allowed):
        raise ValueError("allowed must be a list of bools")
    ok = np.array(allowed)
    if not ok.any():
        raise ValueError("nothing is allowed in this row")
    top = s[ok].max()
    w = np.zeros_like(s)
    with np.errstate(over="ignore"):
        w[ok] = np.exp(s[ok] - top)
    return w / w.sum()


def attention(Q, K, V, causal=False):
    if type(causal) is not bool:
        raise ValueError("causal must be True/False")
    Q = check_matrix(Q, "Q")
    K = check_matrix(K, "K")
    V = check_matrix(V, "V")
    n, dk = Q.shape
    m = K.shape[0]
    if K.shape[1] != dk:
        raise ValueError("Q and K widths differ")
    if V.shape[0] != m:
        raise ValueError("need one V row per K row")
    if causal and n != m:
        raise ValueError("causal requires a square score matrix")

    with np.errstate(over="ignore", invalid="ignore"):
        scores = Q @ K.T / np.sqrt(dk)
    if not np.isfinite(scores).all():
        raise ValueError("scores are too large")

    weights = np.empty((n, m))
    for i in range(n):
        allowed = [j <= i for j in range(m)] if causal else None
        weights[i] = softmax(scores[i].tolist(), allowed)

    # each output is a combination of the value rows
    outputs = scores @ V
    return outputs, weights


def softmax_backward(p, u):
    p = check_matrix([p], "p")[0]
    u = check_matrix([u], "u")[0]
    if p.shape != u.shape:
        raise ValueError("p and u differ in length")
    return p * (u - math.fsum(p * u))


def score_array_bytes(B, H, N, itemsize=4):
    if any(type(x) is not int or x < 1 for x in (B, H, N, itemsize)):
        raise ValueError("B, H, N, itemsize must be positive integers")
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    if type(nbytes) not in (int, float) or not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("bad byte count")
    return nbytes / 1048576
