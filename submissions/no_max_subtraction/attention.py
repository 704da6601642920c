"""Sample submission with a classic mistake: no max subtraction in softmax.

exp() is applied to the raw scores. That is mathematically the same softmax
and is fine for ordinary scores, but scores around 1e3 or larger overflow to
inf (and very negative ones underflow to 0), giving nan weights with no error
raised. Expected to lose points on G14.06 only (extreme scores); the hand
examples of G14.02/G14.03 use small scores and still pass.
"""

import math

import numpy as np


def _to_array(x, name, ndim):
    if not isinstance(x, list) or len(x) == 0:
        raise ValueError(f"{name}: need a non-empty list")
    try:
        arr = np.array(x)
    except ValueError:
        raise ValueError(f"{name}: ragged") from None
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name}: not numeric")
    arr = arr.astype(float)
    if arr.ndim != ndim or arr.size == 0:
        raise ValueError(f"{name}: wrong shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: not finite")
    return arr


def _softmax_rows(S, mask):
    if not np.all(np.any(mask, axis=1)):
        raise ValueError("row with every position masked")
    # numpy complains about big numbers sometimes, silence it
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        E = np.where(mask, np.exp(S), 0.0)
        return E / E.sum(axis=1, keepdims=True)


def softmax(scores, allowed=None):
    s = _to_array(scores, "scores", 1)
    if allowed is None:
        allowed = [True] * len(s)
    elif not isinstance(allowed, list) or len(allowed) != len(s) \
            or not all(isinstance(a, bool) for a in allowed):
        raise ValueError("allowed must be a list of len(scores) bools")
    return _softmax_rows(s[np.newaxis, :], np.array([allowed]))[0]


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be a bool")
    Q = _to_array(Q, "Q", 2)
    K = _to_array(K, "K", 2)
    V = _to_array(V, "V", 2)
    n, d_k = Q.shape
    m = K.shape[0]
    if K.shape[1] != d_k:
        raise ValueError("Q/K width mismatch")
    if V.shape[0] != m:
        raise ValueError("K/V row count mismatch")
    if causal and n != m:
        raise ValueError("causal attention needs n == m")
    with np.errstate(over="ignore", invalid="ignore"):
        S = (Q @ K.T) / math.sqrt(d_k)
    if not np.all(np.isfinite(S)):
        raise ValueError("scores overflowed")
    mask = np.tril(np.ones((n, m), dtype=bool)) if causal else np.ones((n, m), dtype=bool)
    P = _softmax_rows(S, mask)
    return P @ V, P


def softmax_backward(p, u):
    p = _to_array(p, "p", 1)
    u = _to_array(u, "u", 1)
    if p.shape != u.shape:
        raise ValueError("p and u must match")
    return p * (u - np.sum(p * u))


def score_array_bytes(B, H, N, itemsize=4):
    for v in (B, H, N, itemsize):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError("arguments must be positive ints")
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)):
        raise ValueError("nbytes must be a number")
    if not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be finite and >= 0")
    return nbytes / 2**20
