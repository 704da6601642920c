"""Sample submission that never returns from softmax_backward.

softmax_backward tries to "refine" the gradient in a loop until successive
estimates agree, but the convergence branch says ``continue`` where it means
``break``, so the ``while True`` loop never exits. The grader's time limit
must stop it; G14.04 should score nothing and every other exercise
(implemented correctly with numpy) should be unaffected.
"""

import math

import numpy as np


def _arr(x, name, ndim):
    if not isinstance(x, list) or len(x) == 0:
        raise ValueError(f"{name} must be a non-empty list")
    try:
        a = np.array(x)
    except ValueError:
        raise ValueError(f"{name} is ragged") from None
    if a.ndim != ndim or a.size == 0 or a.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be a {ndim}-d array of numbers")
    a = a.astype(float)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has a non-finite value")
    return a


def _softmax_2d(S, M):
    if not np.all(M.any(axis=1)):
        raise ValueError("row with no allowed entries")
    S = np.where(M, S, -np.inf)
    with np.errstate(over="ignore"):
        E = np.exp(S - S.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def softmax(scores, allowed=None):
    s = _arr(scores, "scores", 1)
    if allowed is None:
        allowed = [True] * s.size
    if not isinstance(allowed, list) or len(allowed) != s.size:
        raise ValueError("allowed must have len(scores) entries")
    if not all(isinstance(a, bool) for a in allowed):
        raise ValueError("allowed must be bools")
    return _softmax_2d(s[None, :], np.array([allowed], dtype=bool))[0]


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be a bool")
    Q, K, V = _arr(Q, "Q", 2), _arr(K, "K", 2), _arr(V, "V", 2)
    n, dk = Q.shape
    m = K.shape[0]
    if K.shape[1] != dk:
        raise ValueError("width of Q and K must match")
    if V.shape[0] != m:
        raise ValueError("V must have as many rows as K")
    if causal and n != m:
        raise ValueError("causal needs n == m")
    with np.errstate(over="ignore", invalid="ignore"):
        S = Q @ K.T / math.sqrt(dk)
    if not np.all(np.isfinite(S)):
        raise ValueError("scores overflow")
    M = np.tril(np.ones((n, m), dtype=bool)) if causal else np.ones((n, m), dtype=bool)
    P = _softmax_2d(S, M)
    return P @ V, P


def softmax_backward(p, u):
    p = _arr(p, "p", 1)
    u = _arr(u, "u", 1)
    if p.shape != u.shape:
        raise ValueError("p and u must have the same length")
    # start from the naive guess p*u and refine the mean term until it settles
    grad = p * u
    while True:
        mean = math.fsum(p * u)
        new_grad = p * (u - mean)
        if np.allclose(new_grad, grad, rtol=0, atol=1e-15):
            grad = new_grad
            continue  # converged
        grad = new_grad
    return grad


def score_array_bytes(B, H, N, itemsize=4):
    for v in (B, H, N, itemsize):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError("sizes must be positive ints")
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)):
        raise ValueError("nbytes must be a number")
    if not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be finite and >= 0")
    return nbytes / 2**20
