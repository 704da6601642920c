"""Sample submission with a classic mistake: masking after normalization.

softmax() normalizes over ALL columns first and only then zeroes the masked
weights (the causal mask in attention() and the ``allowed`` mask in softmax()),
without renormalizing. Rows under a mask no longer sum to one and the first
causal output of the chapter's example is 1 instead of 2. Unmasked results
are correct. This should cost points on G14.03 and G14.06 only.
"""

import math

import numpy as np


def _matrix(A, name):
    if not isinstance(A, list) or len(A) == 0:
        raise ValueError(name + " must be a non-empty list of rows")
    for row in A:
        if not isinstance(row, list) or len(row) == 0:
            raise ValueError(name + " has an empty or non-list row")
        if len(row) != len(A[0]):
            raise ValueError(name + " is ragged")
        for x in row:
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise ValueError(name + " must contain numbers")
            if not math.isfinite(x):
                raise ValueError(name + " contains inf/nan")
    return np.array(A, dtype=float)


def softmax(scores, allowed=None):
    s = _matrix([scores], "scores")[0]
    if allowed is not None:
        if not isinstance(allowed, list) or len(allowed) != len(s):
            raise ValueError("allowed has the wrong length")
        if any(not isinstance(a, bool) for a in allowed):
            raise ValueError("allowed must be booleans")
        if not any(allowed):
            raise ValueError("no allowed column")

    # stable softmax over the row
    with np.errstate(over="ignore"):
        e = np.exp(s - s.max())
    p = e / e.sum()

    # now apply the mask
    if allowed is not None:
        p[~np.array(allowed)] = 0.0
    return p


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be a bool")
    Q = _matrix(Q, "Q")
    K = _matrix(K, "K")
    V = _matrix(V, "V")
    n, d_k = Q.shape
    m = K.shape[0]
    if K.shape[1] != d_k:
        raise ValueError("Q and K must have the same width")
    if V.shape[0] != m:
        raise ValueError("K and V must have the same number of rows")
    if causal and n != m:
        raise ValueError("causal needs n == m")

    with np.errstate(over="ignore", invalid="ignore"):
        scores = Q @ K.T / math.sqrt(d_k)
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores overflow")

    weights = np.zeros((n, m))
    for i in range(n):
        if causal:
            weights[i] = softmax(scores[i].tolist(), [j <= i for j in range(m)])
        else:
            weights[i] = softmax(scores[i].tolist())
    return weights @ V, weights


def softmax_backward(p, u):
    p = _matrix([p], "p")[0]
    u = _matrix([u], "u")[0]
    if len(p) != len(u):
        raise ValueError("p and u lengths differ")
    return p * (u - math.fsum(p * u))


def score_array_bytes(B, H, N, itemsize=4):
    for x in (B, H, N, itemsize):
        if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
            raise ValueError("sizes must be positive integers")
    return B * H * N**2 * itemsize


def bytes_to_mib(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)):
        raise ValueError("nbytes must be a number")
    if not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be finite and non-negative")
    return nbytes / (1024 * 1024)
