"""The G14 pack's float64 error analysis of softmax and attention (instructor side only).

It computes softmax weights (to bound how far correct code may put them), so it lives beside the
reference and never goes into the student package; ``kinds.py`` loads it for the
``grader_float64_error`` hook while checks are prepared, and the bounds reach students as data
(each prepared check's floor in the public checks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.compare import EPS

FLOOR_SAFETY = 4.0
"""Margin of `score_rounding` over the error bound it states."""


def _lse(x: np.ndarray) -> np.ndarray:
    """log(sum(exp(x))) along the last axis, stably."""
    top = np.max(x, axis=-1, keepdims=True)
    return (top + np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True)))[..., 0]


def _lse_others(x: np.ndarray) -> np.ndarray:
    """``log(sum_{k != j} exp(x_k))`` along the last axis, for every ``j`` (rows of finite maxima).

    One pass of exponentials per row, without cancellation: for every ``j`` but the row's
    largest, the others' sum is the total less its own term, and so at least the largest term
    (the relative error of the subtraction is a few eps); for the largest, the others are summed
    again without it. ``-inf`` entries (masked) add nothing; ``-inf`` where nothing else is left.
    """
    top = np.max(x, axis=-1, keepdims=True)
    terms = np.exp(x - top)
    rest = np.sum(terms, axis=-1, keepdims=True) - terms
    rows = np.arange(x.shape[0])
    largest = np.argmax(x, axis=-1)
    terms[rows, largest] = 0.0
    rest[rows, largest] = np.sum(terms, axis=-1)
    with np.errstate(divide="ignore"):
        return top + np.log(rest)


def weight_bounds(scores: np.ndarray, allowed: np.ndarray, score_error: np.ndarray) -> np.ndarray:
    """How far correct float64 code may put each weight of softmax rows (absolute), see `score_rounding`.

    ``scores``, ``allowed`` and ``score_error`` are (n, m): one softmax row each. Two parts per
    weight: the interval of the weight when every score of its row may be off by
    ``score_error`` (its exact extremes: its own score up and the others down, and the reverse),
    and the log-sum-exp route's common factor ``exp(c) - 1``, ``c = min(eps |top|, log sum_k
    exp(s_k - top)) + (m + 4) eps``: it rounds ``top + log(sum)`` to float64's spacing at
    ``|top|``, or drops the log entirely when it is below that spacing. 0 where masked, and on a
    row with one allowed key (its weight is exactly 1 in every route).

    A weight is ``1 / (1 + sum_{k != j} exp(s_k - s_j))``; the sum over the other keys is taken
    once per row (`_lse_others`), so a row of m keys costs O(m), not the O(m**2) of each weight's
    own sum: 512 rows of 512 keys take milliseconds.
    """
    scores = np.asarray(scores, dtype=np.float64)
    allowed = np.asarray(allowed, dtype=bool)
    error = np.asarray(score_error, dtype=np.float64)
    out = np.zeros(scores.shape)
    counts = allowed.sum(axis=-1)
    rows = np.flatnonzero(counts > 1)
    if rows.size == 0:
        return out
    ok = allowed[rows]
    top = np.max(np.where(ok, scores[rows], -np.inf), axis=-1, keepdims=True)
    x = np.where(ok, scores[rows] - top, -np.inf)  # exact near the top (Sterbenz), where weights live
    e = np.where(ok, error[rows], 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        p = 1.0 / (1.0 + np.exp(_lse_others(x) - x))
        high = 1.0 / (1.0 + np.exp(_lse_others(x - e) - (x + e)))
        low = 1.0 / (1.0 + np.exp(_lse_others(x + e) - (x - e)))
        total = np.log(np.sum(np.exp(x), axis=-1))
    common = np.minimum(EPS * np.abs(top[:, 0]), total) + (counts[rows] + 4) * EPS
    bound = np.maximum(high - p, p - low) + p * np.expm1(common)[:, None]
    out[rows] = np.where(ok, bound, 0.0)
    return out


def row_weight_bound(scores: np.ndarray, allowed: np.ndarray, score_error: np.ndarray) -> np.ndarray:
    """`weight_bounds` of one softmax row (1-d arrays)."""
    return weight_bounds(np.asarray(scores)[None, :], np.asarray(allowed)[None, :], np.asarray(score_error)[None, :])[0]


def score_rounding(function: str, args: Sequence[Any], parts: dict[str, Any]) -> dict[str, np.ndarray] | None:
    """A bound on the error of correct float64 code, per element, for ``softmax`` and ``attention``.

    Error analysis of the routes the chapter allows (max subtraction, log-sum-exp in pure Python or
    numpy, renormalising, ``math.fsum``), with ``eps`` = 2.2e-16:

    * a score ``s_ij = q_i . k_j / sqrt(d_k)`` is off by at most ``d_k eps sum_k |q_ik k_jk| /
      sqrt(d_k) + eps |s_ij|`` (a d_k-term dot product); softmax's own scores are exact;
    * a weight is off by what those score errors can move it (`weight_bounds`), plus the
      log-sum-exp route's common factor: ``top + log(sum)`` rounds to float64's spacing at the
      largest allowed score ``|top|`` (1.2e-4 near 1e12);
    * an output ``sum_j p_ij V_jv`` is off by ``sum_j |dp_ij| |V_jv|`` plus m roundings of it.

    Returns
    -------
    dict of str to ndarray or None
        The bound times `FLOOR_SAFETY`, per part (``weights``, ``outputs``) present in ``parts``;
        None for another function or arguments of another form (the caller measures instead).
    """
    try:
        if function == "softmax":
            scores = np.asarray(args[0], dtype=np.float64)
            mask = np.ones(scores.shape, bool) if len(args) < 2 or args[1] is None else np.asarray(args[1], bool)
            bound = row_weight_bound(scores, mask, np.zeros(scores.shape))
            return {k: FLOOR_SAFETY * bound for k in parts if k in ("weights", "result")}
        if function == "attention":
            q, k, v = (np.asarray(a, dtype=np.float64) for a in args[:3])
            causal = bool(args[3]) if len(args) > 3 else False
            if q.ndim != 2 or k.ndim != 2 or v.ndim != 2:
                return None
            n, d = q.shape
            m = k.shape[0]
            root = np.sqrt(d)
            with np.errstate(over="ignore", invalid="ignore"):
                scores = q @ k.T / root
                error = d * EPS * (np.abs(q) @ np.abs(k).T) / root + EPS * np.abs(scores)
            if not (np.all(np.isfinite(scores)) and np.all(np.isfinite(error))):
                return None
            allowed = np.tril(np.ones((n, m), bool)) if causal else np.ones((n, m), bool)
            weights = np.asarray(parts["weights"], dtype=np.float64) if "weights" in parts else None
            if weights is None or weights.shape != (n, m):
                return None
            bound = weight_bounds(scores, allowed, error)
            out: dict[str, np.ndarray] = {"weights": FLOOR_SAFETY * bound}
            if "outputs" in parts:
                out["outputs"] = FLOOR_SAFETY * (bound @ np.abs(v) + m * EPS * (weights @ np.abs(v)))
            return {key: val for key, val in out.items() if key in parts}
    except (TypeError, ValueError, IndexError):
        return None
    return None
