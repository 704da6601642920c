"""Mutant: the maximum subtracted is taken over masked entries too.

top is the largest score of the row, masked or not: when a masked score is
far above the allowed ones, every allowed exp underflows to 0 and 0/0 is NaN.

Derived from mutants/correct_renormalize/attention.py by this one change; everything
else is correct.
"""

import math

import numpy as np


def _checked(x, name, ndim):
    try:
        a = np.array(x, dtype=float)
    except (ValueError, TypeError):
        raise ValueError(f"{name} must be a rectangular array of numbers") from None
    if isinstance(x, (list, tuple)) and any(isinstance(v, bool) for v in np.asarray(x, dtype=object).ravel()):
        raise ValueError(f"{name} must hold numbers, not booleans")
    if a.ndim != ndim or a.size == 0:
        raise ValueError(f"{name} must be a non-empty {ndim}-d array")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    return a


def _normalize_allowed(S, allowed):
    top = np.max(S, axis=-1, keepdims=True)
    with np.errstate(over="ignore"):
        E = np.exp(S - top)  # masked entries may overflow to inf ...
    E = np.where(allowed, E, 0.0)  # ... and are zeroed here
    return E / E.sum(axis=-1, keepdims=True)


def softmax(scores, allowed=None):
    s = _checked(scores, "scores", 1)
    if allowed is None:
        mask = np.ones(s.size, dtype=bool)
    else:
        if not isinstance(allowed, (list, tuple)) or len(allowed) != s.size:
            raise ValueError("allowed must have one entry per score")
        if not all(isinstance(a, bool) for a in allowed):
            raise ValueError("allowed must hold booleans")
        mask = np.array(allowed, dtype=bool)
    if not mask.any():
        raise ValueError("no allowed position in the row")
    return _normalize_allowed(s, mask)


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be a bool")
    Q, K, V = _checked(Q, "Q", 2), _checked(K, "K", 2), _checked(V, "V", 2)
    n, d_k = Q.shape
    m = K.shape[0]
    if K.shape[1] != d_k or V.shape[0] != m:
        raise ValueError(f"incompatible shapes Q {Q.shape}, K {K.shape}, V {V.shape}")
    if causal and n != m:
        raise ValueError("causal attention requires n == m")
    with np.errstate(over="ignore", invalid="ignore"):
        S = np.matmul(Q, K.T) / math.sqrt(d_k)
    if not np.all(np.isfinite(S)):
        raise ValueError("scores overflowed")
    allowed = np.arange(m)[None, :] <= np.arange(n)[:, None] if causal else np.ones((n, m), dtype=bool)
    P = _normalize_allowed(S, allowed)
    return np.matmul(P, V), P


def softmax_backward(p, u):
    p, u = _checked(p, "p", 1), _checked(u, "u", 1)
    if p.shape != u.shape:
        raise ValueError("p and u differ in length")
    jacobian_t_u = p * u - p * np.dot(p, u)
    return jacobian_t_u


def score_array_bytes(B, H, N, itemsize=4):
    sizes = (B, H, N, itemsize)
    if any(isinstance(x, bool) or not isinstance(x, int) or x <= 0 for x in sizes):
        raise ValueError("B, H, N and itemsize must be positive integers")
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) or not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be a finite, non-negative number")
    return nbytes / 1048576
