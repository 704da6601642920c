"""Mutant: the 1/sqrt(d_k) scale is applied after softmax, to the weights.

P = softmax(Q K^T) / sqrt(d_k): the weights no longer sum to one when d_k > 1.

Derived from mutants/correct_numpy/attention.py by this one change; everything
else is correct.
"""

import math

import numpy as np

DTYPE = np.float64  # the arithmetic precision
MASKED = -np.inf  # the score a masked position gets before softmax


def _array(x, name, ndim):
    try:
        a = np.asarray(x)
    except ValueError:  # ragged nested lists
        raise ValueError(f"{name} is ragged") from None
    if a.ndim != ndim or a.size == 0:
        raise ValueError(f"{name} must be a non-empty {ndim}-d array, got shape {a.shape}")
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers, not {a.dtype}")
    a = a.astype(DTYPE)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} holds a value that is not finite")
    return a


def _row_softmax(S):
    top = S.max(axis=-1, keepdims=True)  # masked entries are -inf: this is the largest allowed score
    with np.errstate(over="ignore"):  # -1e308 - 1e308 is -inf, and exp(-inf) is 0
        E = np.exp(S - top)
    return E / E.sum(axis=-1, keepdims=True)


def _masked_softmax(S, allowed):
    return _row_softmax(np.where(allowed, S, MASKED))


def softmax(scores, allowed=None):
    """Weights of one row over its allowed columns; masked columns get 0."""
    s = _array(scores, "scores", 1)
    if allowed is None:
        mask = np.ones(s.shape, dtype=bool)
    else:
        if not isinstance(allowed, (list, tuple)) or len(allowed) != len(s):
            raise ValueError(f"allowed must be a list of {len(s)} booleans")
        if not all(isinstance(a, (bool, np.bool_)) for a in allowed):
            raise ValueError("allowed must hold only True or False")
        mask = np.array(allowed, dtype=bool)
    if not mask.any():
        raise ValueError("no column is allowed: there is no distribution to normalize")
    return _masked_softmax(s, mask)


def attention(Q, K, V, causal=False):
    """Scaled dot-product attention: (outputs n x d_v, weights n x m)."""
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError("causal must be True or False")
    Q, K, V = _array(Q, "Q", 2), _array(K, "K", 2), _array(V, "V", 2)
    (n, d_k), (m, d_v) = Q.shape, V.shape
    if K.shape[1] != d_k:
        raise ValueError(f"Q is {Q.shape} and K is {K.shape}: their widths differ")
    if K.shape[0] != m:
        raise ValueError(f"K has {K.shape[0]} rows but V has {m}: one value row per key")
    if causal and n != m:
        raise ValueError(f"causal attention needs as many queries as keys (n={n}, m={m})")
    with np.errstate(over="ignore", invalid="ignore"):
        S = Q @ K.T
    if not np.isfinite(S).all():
        raise ValueError("the scores overflow: scale the inputs down")
    if causal:
        allowed = np.tril(np.ones((n, m), dtype=bool))  # query i sees keys j <= i
    else:
        allowed = np.ones((n, m), dtype=bool)
    P = _masked_softmax(S, allowed) / math.sqrt(d_k)
    return P @ V, P


def softmax_backward(p, u):
    """dL/ds = p * (u - p.u), without building the Jacobian."""
    p, u = _array(p, "p", 1), _array(u, "u", 1)
    if p.shape != u.shape:
        raise ValueError(f"p has {p.size} entries but u has {u.size}")
    return p * (u - p @ u)


def score_array_bytes(B, H, N, itemsize=4):
    """Bytes of one B x H x N x N score array."""
    for name, x in (("B", B), ("H", H), ("N", N), ("itemsize", itemsize)):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) or x < 1:
            raise ValueError(f"{name} must be a positive integer, got {x!r}")
    return int(B) * int(H) * int(N) ** 2 * int(itemsize)


def bytes_to_mib(nbytes):
    """Bytes to mebibytes (2**20 bytes)."""
    if isinstance(nbytes, (bool, np.bool_)) or not isinstance(nbytes, (int, float, np.integer, np.floating)):
        raise ValueError(f"nbytes must be a number, got {nbytes!r}")
    if not np.isfinite(nbytes) or nbytes < 0:
        raise ValueError(f"nbytes must be finite and non-negative, got {nbytes!r}")
    return float(nbytes) / 2**20
