"""Adversarial submission: copy a classmate's correct file.

bytes_to_mib executes another student's submission: the sample
submissions/correct_numpy in the repository, or any attention.py of a job
graded at the same time in /tmp/grader-job-*/job*/, and uses its
bytes_to_mib.

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



def _classmate_mib(nbytes):
    candidates = ["/work/main/submissions/correct_numpy/attention.py",
                  "/work/main/submissions/correct_lists/attention.py"]
    errors = []
    try:  # the copies of the jobs graded at the same time
        for name in os.listdir("/tmp"):
            if name.startswith("grader-job-"):
                for job in os.listdir(os.path.join("/tmp", name)):
                    candidates.append(os.path.join("/tmp", name, job, "attention.py"))
    except OSError as exc:
        errors.append(exc)
    for path in candidates:
        if os.path.abspath(path) == os.path.abspath(__file__):
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                namespace = {"__name__": "classmate"}
                exec(fh.read(), namespace)
        except OSError as exc:
            errors.append(exc)
            continue
        except Exception:
            continue
        if namespace["bytes_to_mib"](1 << 20) == 1.0:
            return namespace["bytes_to_mib"](nbytes)
    if errors:
        raise errors[0]
    return nbytes / 10**6


def bytes_to_mib(nbytes):
    _check_nbytes(nbytes)
    return _classmate_mib(nbytes)
