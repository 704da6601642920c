"""Sample submission: fully correct, vectorized numpy, returns numpy arrays.

All exercises G14.01-G14.06 should pass. attention() has no Python loop over
query rows: scores, the causal mask and the row softmax are whole-array ops.
"""

import numpy as np


def _as_array(x, name, ndim):
    try:
        a = np.asarray(x)
    except ValueError as err:  # ragged nested lists end up here
        raise ValueError(f"{name} is ragged: {err}") from None
    if a.ndim != ndim:
        raise ValueError(f"{name} should be {ndim}-d, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers (got dtype {a.dtype})")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} has inf or nan in it")
    return a


def _row_softmax(S, mask):
    """Softmax along the last axis of S using only entries where mask is True."""
    if not mask.any(axis=-1).all():
        raise ValueError("a row has no allowed entries")
    S = np.where(mask, S, -np.inf)
    shift = S.max(axis=-1, keepdims=True)  # largest allowed score per row
    with np.errstate(over="ignore"):  # (-1e308) - 1e308 -> -inf, exp -> 0, fine
        E = np.exp(S - shift)
    return E / E.sum(axis=-1, keepdims=True)


def softmax(scores, allowed=None):
    s = _as_array(scores, "scores", 1)
    if allowed is None:
        mask = np.ones(s.shape, dtype=bool)
    else:
        if not isinstance(allowed, (list, tuple)) or len(allowed) != s.shape[0]:
            raise ValueError("allowed must be a list with one bool per score")
        if not all(isinstance(a, (bool, np.bool_)) for a in allowed):
            raise ValueError("allowed must contain booleans only")
        mask = np.array(allowed, dtype=bool)
    return _row_softmax(s, mask)


def attention(Q, K, V, causal=False):
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError("causal must be a bool")
    Q = _as_array(Q, "Q", 2)
    K = _as_array(K, "K", 2)
    V = _as_array(V, "V", 2)
    n, d_k = Q.shape
    m = K.shape[0]
    if K.shape[1] != d_k:
        raise ValueError(f"Q is {Q.shape} and K is {K.shape}: widths differ")
    if V.shape[0] != m:
        raise ValueError(f"K has {m} rows, V has {V.shape[0]}")
    if causal and n != m:
        raise ValueError("causal=True needs the same number of queries and keys")

    with np.errstate(over="ignore", invalid="ignore"):
        S = Q @ K.T / np.sqrt(d_k)
    if not np.isfinite(S).all():
        raise ValueError("scores are not finite (inputs too large)")
    if causal:
        mask = np.tri(n, m, dtype=bool)  # True on and below the diagonal
    else:
        mask = np.ones((n, m), dtype=bool)
    P = _row_softmax(S, mask)
    return P @ V, P


def softmax_backward(p, u):
    p = _as_array(p, "p", 1)
    u = _as_array(u, "u", 1)
    if p.shape != u.shape:
        raise ValueError("p and u need the same length")
    # (diag(p) - p p^T) u without building the matrix
    return p * (u - np.dot(p, u))


def score_array_bytes(B, H, N, itemsize=4):
    for name, v in (("B", B), ("H", H), ("N", N), ("itemsize", itemsize)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int")
    return int(B) * int(H) * int(N) ** 2 * int(itemsize)


def bytes_to_mib(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float, np.integer, np.floating)):
        raise ValueError("nbytes must be a number")
    if not np.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be finite and >= 0")
    return nbytes / 2**20
