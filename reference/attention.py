"""Reference solution for the chapter G14 lab (instructors only).

A numpy implementation of the contract in ``exercises/g14/attention.py``.
The grader runs it in its own (trusted) process to compute the expected
value of every ``compare`` check on seeded inputs, and ``grader validate``
checks it against every hand value written in the exercise specs.

Chapter sections are cited by their headings in
``G14: Attention, embeddings, and transformer reasoning``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "attention",
    "bytes_to_mib",
    "score_array_bytes",
    "softmax",
    "softmax_backward",
]

MIB = 2**20
"""Bytes in one mebibyte (MiB); the chapter's hint to G14.05."""


def _is_bool(x: object) -> bool:
    return isinstance(x, (bool, np.bool_))


def _is_real(x: object) -> bool:
    return isinstance(x, numbers.Real) and not _is_bool(x)


def _row(name: str, values: object) -> np.ndarray:
    """Return ``values`` as a finite 1-d float64 array or raise ValueError."""
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"{name} must be a list of numbers, got {type(values).__name__}")
    if len(values) == 0:
        raise ValueError(f"{name} is empty")
    if not all(_is_real(x) for x in values):
        raise ValueError(f"{name} must hold only real numbers")
    row = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(row)):
        raise ValueError(f"{name} holds a value that is not finite")
    return row


def _matrix(name: str, rows: object) -> np.ndarray:
    """Return ``rows`` as a finite, non-ragged 2-d float64 array or raise ValueError."""
    if isinstance(rows, np.ndarray):
        rows = rows.tolist()
    if not isinstance(rows, (list, tuple)) or len(rows) == 0:
        raise ValueError(f"{name} must be a non-empty list of rows")
    out = [_row(f"{name}[{i}]", r) for i, r in enumerate(rows)]
    widths = {len(r) for r in out}
    if len(widths) != 1:
        raise ValueError(f"{name} is ragged: its rows have widths {sorted(widths)}")
    return np.stack(out)


def _masked_softmax_rows(scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Row-wise softmax over the allowed entries of ``scores``.

    ``scores`` and ``allowed`` are (n, m). Every row must allow at least one
    entry. The largest allowed score of each row is subtracted before
    exponentiating, and masked entries get weight exactly 0 (chapter section
    "Mask before normalization").
    """
    if not np.all(allowed.any(axis=1)):
        raise ValueError("a row has no allowed position: there is no distribution to normalize")
    masked = np.where(allowed, scores, -np.inf)
    top = masked.max(axis=1, keepdims=True)
    with np.errstate(over="ignore"):
        # A finite difference may overflow to -inf (e.g. -1e308 - 1e308);
        # exp(-inf) == 0 is the right weight there and for masked entries.
        e = np.exp(masked - top)
    return e / e.sum(axis=1, keepdims=True)


def softmax(scores, allowed=None):
    """Softmax of one row of scores over its allowed columns.

    Chapter sections "A numerical example before the general architecture"
    and "Mask before normalization" (exercises G14.02, G14.06).

    Parameters
    ----------
    scores : (m,) array_like
        One row of finite scores.
    allowed : (m,) sequence of bool, optional
        False where a column is masked out; ``None`` allows every column.

    Returns
    -------
    weights : (m,) ndarray of float64
        Nonnegative, summing to one over the allowed columns; exactly 0 at
        masked columns.

    Raises
    ------
    ValueError
        If ``scores`` is empty or holds a non-finite or non-real value, if
        ``allowed`` is not a sequence of m booleans, or if no column is
        allowed.

    Examples
    --------
    >>> softmax([0.0, 0.0]).tolist()
    [0.5, 0.5]
    """
    s = _row("scores", scores)
    if allowed is None:
        mask = np.ones(s.shape, dtype=bool)
    else:
        if isinstance(allowed, np.ndarray):
            allowed = allowed.tolist()
        if not isinstance(allowed, (list, tuple)) or len(allowed) != len(s):
            raise ValueError(f"allowed must be a list of {len(s)} booleans")
        if not all(_is_bool(a) for a in allowed):
            raise ValueError("allowed must hold only booleans")
        mask = np.asarray(allowed, dtype=bool)
    return _masked_softmax_rows(s[None, :], mask[None, :])[0]


def attention(Q, K, V, causal=False):
    """Single-head scaled dot-product attention, forward pass only.

    Computes ``scores = Q K^T / sqrt(d_k)``, ``weights = softmax_row(scores)``
    and ``outputs = weights V``. Chapter sections "The central question",
    "Mask before normalization" and "Complete solutions" (exercises
    G14.01-G14.03, G14.06).

    Parameters
    ----------
    Q : (n, d_k) array_like
        Query rows.
    K : (m, d_k) array_like
        Key rows.
    V : (m, d_v) array_like
        Value rows, one per key.
    causal : bool, optional
        If True, query i uses only keys j <= i; requires n == m.

    Returns
    -------
    outputs : (n, d_v) ndarray of float64
    weights : (n, m) ndarray of float64
        Each row is nonnegative and sums to one.

    Raises
    ------
    ValueError
        If a matrix is empty, ragged or holds a non-finite value; if Q and K
        have different widths; if K and V have different row counts; if
        ``causal`` is not a bool; if ``causal`` is True and n != m; or if the
        scores overflow to a non-finite value.
    """
    if not _is_bool(causal):
        raise ValueError("causal must be True or False")
    q = _matrix("Q", Q)
    k = _matrix("K", K)
    v = _matrix("V", V)
    n, d_k = q.shape
    m = k.shape[0]
    if k.shape[1] != d_k:
        raise ValueError(f"Q rows have width {d_k} but K rows have width {k.shape[1]}")
    if v.shape[0] != m:
        raise ValueError(f"K has {m} rows but V has {v.shape[0]}: one value row per key")
    if causal and n != m:
        raise ValueError(f"causal attention needs as many queries as keys, got n={n}, m={m}")
    with np.errstate(over="ignore", invalid="ignore"):
        scores = (q @ k.T) / math.sqrt(d_k)
    if not np.all(np.isfinite(scores)):
        raise ValueError("the scores overflow: scale the inputs down")
    if causal:
        allowed = np.tril(np.ones((n, m), dtype=bool))
    else:
        allowed = np.ones((n, m), dtype=bool)
    weights = _masked_softmax_rows(scores, allowed)
    return weights @ v, weights


def softmax_backward(p, u):
    """Gradient of a loss with respect to one row of softmax scores.

    With ``p = softmax(s)`` and upstream ``u[j] = dL/dp[j]``, returns
    ``dL/ds[k] = p[k] * (u[k] - sum_j p[j] u[j])``, the product of ``u`` with
    the Jacobian ``diag(p) - p p^T``, without building that matrix. Chapter
    section "Differentiate the mixing operation" (exercise G14.04).

    Parameters
    ----------
    p : (m,) array_like
        Softmax weights of the row.
    u : (m,) array_like
        Upstream sensitivities.

    Returns
    -------
    grad : (m,) ndarray of float64
        Its entries sum to zero up to rounding.

    Raises
    ------
    ValueError
        If ``p`` or ``u`` is empty or non-finite, or their lengths differ.
    """
    pv = _row("p", p)
    uv = _row("u", u)
    if pv.shape != uv.shape:
        raise ValueError(f"p has {len(pv)} entries but u has {len(uv)}")
    return pv * (uv - math.fsum(pv * uv))


def _positive_int(name: str, x: object) -> int:
    if _is_bool(x) or not isinstance(x, numbers.Integral) or x < 1:
        raise ValueError(f"{name} must be a positive integer, got {x!r}")
    return int(x)


def score_array_bytes(B, H, N, itemsize=4):
    """Bytes of one straightforward B x H x N x N attention score array.

    Chapter section "Count computation and memory before claiming
    acceleration" (exercise G14.05). Queries, keys, values, gradients,
    activations, optimizer state and temporary buffers are not counted.

    Parameters
    ----------
    B, H, N : int
        Batch size, heads and sequence length; each at least 1.
    itemsize : int, optional
        Bytes per entry (4 for float32, the default).

    Returns
    -------
    int
        ``B * H * N**2 * itemsize``, in bytes.

    Raises
    ------
    ValueError
        If an argument is not a positive integer.
    """
    return (
        _positive_int("B", B) * _positive_int("H", H) * _positive_int("N", N) ** 2 * _positive_int("itemsize", itemsize)
    )


def bytes_to_mib(nbytes):
    """Convert bytes to mebibytes (MiB, 2**20 bytes; G14.05).

    Parameters
    ----------
    nbytes : int or float
        A non-negative size in bytes.

    Returns
    -------
    float
        The size in MiB.

    Raises
    ------
    ValueError
        If ``nbytes`` is negative, not finite or not a real number.
    """
    if not _is_real(nbytes) or not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError(f"nbytes must be a finite size >= 0, got {nbytes!r}")
    return nbytes / MIB
