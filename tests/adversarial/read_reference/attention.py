"""Adversarial submission: read the reference implementation and use its answer.

bytes_to_mib opens the grader's reference/attention.py by its absolute path
in the repository (and a few other likely places), executes it and divides by
its MIB constant. If the sandbox let it read the file, bytes_to_mib would be
right and the submission would score full marks.

Apart from the attack this is an honest but wrong solution (a copy of
submissions/mib_decimal: bytes_to_mib divides by 10**6 instead of 2**20), so
it deserves exactly what mib_decimal scores; the attack lives in bytes_to_mib.
"""

import math
import os
import sys

import numpy as np


def _check(x, name, ndim):
    if not isinstance(x, list) or not x:
        raise ValueError(f"{name} must be a non-empty list")
    try:
        a = np.array(x)
    except ValueError:
        raise ValueError(f"{name} is ragged") from None
    if a.ndim != ndim or a.size == 0:
        raise ValueError(f"{name} has shape {a.shape}, expected {ndim} dimensions")
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{name} must contain numbers")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains inf or nan")
    return a


def _masked_softmax(S, mask):
    if not mask.any(axis=1).all():
        raise ValueError("cannot normalize a row with no allowed entries")
    S = np.where(mask, S, -np.inf)
    with np.errstate(over="ignore"):
        E = np.exp(S - S.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def softmax(scores, allowed=None):
    s = _check(scores, "scores", 1)
    if allowed is None:
        mask = np.ones_like(s, dtype=bool)
    else:
        if not isinstance(allowed, list) or len(allowed) != s.size:
            raise ValueError("allowed must have one entry per score")
        if not all(isinstance(b, bool) for b in allowed):
            raise ValueError("allowed entries must be True or False")
        mask = np.array(allowed, dtype=bool)
    return _masked_softmax(s[None], mask[None])[0]


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be a bool")
    Q = _check(Q, "Q", 2)
    K = _check(K, "K", 2)
    V = _check(V, "V", 2)
    (n, dk), m = Q.shape, K.shape[0]
    if K.shape[1] != dk:
        raise ValueError("Q and K widths differ")
    if V.shape[0] != m:
        raise ValueError("K and V row counts differ")
    if causal and n != m:
        raise ValueError("causal requires n == m")
    with np.errstate(over="ignore", invalid="ignore"):
        S = Q @ K.T / math.sqrt(dk)
    if not np.isfinite(S).all():
        raise ValueError("scores overflowed")
    mask = np.tril(np.ones((n, m), dtype=bool)) if causal else np.ones((n, m), dtype=bool)
    P = _masked_softmax(S, mask)
    return P @ V, P


def softmax_backward(p, u):
    p = _check(p, "p", 1)
    u = _check(u, "u", 1)
    if p.size != u.size:
        raise ValueError("p and u must be the same length")
    return p * (u - math.fsum(p * u))


def score_array_bytes(B, H, N, itemsize=4):
    for v in (B, H, N, itemsize):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError("B, H, N, itemsize must be positive integers")
    return B * H * N * N * itemsize


def _check_nbytes(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)):
        raise ValueError("nbytes must be a number")
    if not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be finite and non-negative")


REFERENCE_GUESSES = (
    "/work/main/reference/attention.py",
    "/proc/1/root/work/main/reference/attention.py",
    os.path.join(os.path.expanduser("~"), "reference", "attention.py"),
    os.path.abspath(os.path.join(os.getcwd(), "..", "..", "reference", "attention.py")),
)


def _reference_mib():
    for path in REFERENCE_GUESSES:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:  # the sandbox must refuse this
                namespace = {"__name__": "stolen_reference"}
                exec(compile(fh.read(), path, "exec"), namespace)
            return namespace["MIB"]
    return 10**6


def bytes_to_mib(nbytes):
    _check_nbytes(nbytes)
    return nbytes / _reference_mib()
