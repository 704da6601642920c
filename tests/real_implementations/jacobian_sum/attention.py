"""A real implementation with one uncatalogued mistake: softmax_backward sums the Jacobian before multiplying by u.

The forward functions are right (pure Python lists). The gradient is sum_j J[j][k] * u[k] instead of
sum_j u[j] J[j][k]: the columns of the softmax Jacobian sum to zero, so it returns zeros whatever the
input. It is not "every function returns a constant" (catalogue: constant_outputs): no catalogued
mistake is this one, so no likely mistake may be named (tests/harness/test_diagnosis.py).
"""

import math

MIB = 2**20  # bytes in one mebibyte


def _number(x, where):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"{where} is not a number: {x!r}")
    if not math.isfinite(x):
        raise ValueError(f"{where} is not finite: {x!r}")
    return float(x)


def _vector(values, name):
    """A new list of floats, checked: non-empty, real, finite."""
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{name} must be a non-empty list of numbers")
    return [_number(x, f"{name}[{j}]") for j, x in enumerate(values)]


def _matrix(rows, name):
    if not isinstance(rows, (list, tuple)) or not rows:
        raise ValueError(f"{name} must be a non-empty list of rows")
    out = [_vector(row, f"{name}[{i}]") for i, row in enumerate(rows)]
    if len({len(row) for row in out}) != 1:
        raise ValueError(f"{name} is ragged: its rows have different lengths")
    return out


def _mask(allowed, m):
    if allowed is None:
        return [True] * m
    if not isinstance(allowed, (list, tuple)) or len(allowed) != m:
        raise ValueError(f"allowed must be a list of {m} booleans")
    if not all(isinstance(a, bool) for a in allowed):
        raise ValueError("allowed must hold only True or False")
    if not any(allowed):
        raise ValueError("no column is allowed: there is no distribution to normalize")
    return list(allowed)


def _dot(a, b):
    try:
        return math.fsum(x * y for x, y in zip(a, b))
    except (OverflowError, ValueError):  # inf - inf inside the sum
        return math.nan


def softmax(scores, allowed=None):
    """Weights of one row over its allowed columns; masked columns get 0."""
    s = _vector(scores, "scores")
    mask = _mask(allowed, len(s))
    top = max(x for x, ok in zip(s, mask) if ok)
    for j, ok in enumerate(mask):
        s[j] = math.exp(s[j] - top) if ok else 0.0
    total = math.fsum(s)
    return [x / total for x in s]


def attention(Q, K, V, causal=False):
    """Scaled dot-product attention: (outputs n x d_v, weights n x m)."""
    if not isinstance(causal, bool):
        raise ValueError("causal must be True or False")
    q, k, v = _matrix(Q, "Q"), _matrix(K, "K"), _matrix(V, "V")
    n, m, d_k, d_v = len(q), len(k), len(q[0]), len(v[0])
    if len(k[0]) != d_k:
        raise ValueError(f"Q rows have width {d_k} but K rows have width {len(k[0])}")
    if len(v) != m:
        raise ValueError(f"K has {m} rows but V has {len(v)}: one value row per key")
    if causal and n != m:
        raise ValueError(f"causal attention needs as many queries as keys (n={n}, m={m})")
    root = math.sqrt(d_k)
    outputs, weights = [], []
    for i in range(n):
        row = [_dot(q[i], k[j]) / root for j in range(m)]
        if not all(math.isfinite(x) for x in row):
            raise ValueError("the scores overflow: scale the inputs down")
        p = softmax(row, [j <= i for j in range(m)] if causal else None)
        weights.append(p)
        outputs.append([math.fsum(p[j] * v[j][c] for j in range(m)) for c in range(d_v)])
    return outputs, weights


def softmax_backward(p, u):
    """dL/ds_k = p_k (u_k - sum_j p_j u_j)."""
    pv, uv = _vector(p, "p"), _vector(u, "u")
    if len(pv) != len(uv):
        raise ValueError(f"p has {len(pv)} entries but u has {len(uv)}")
    # The Jacobian J[j][k] = dp_j/ds_k = p_j (delta_jk - p_k), summed over j before multiplying by u:
    # sum_j J[j][k] is 0 for every k, so the gradient is 0 whatever u is (the sum belongs after the product).
    jacobian = [[pj * ((1.0 if j == k else 0.0) - pk) for k, pk in enumerate(pv)] for j, pj in enumerate(pv)]
    column_sums = [math.fsum(row[k] for row in jacobian) for k in range(len(pv))]
    return [c * b for c, b in zip(column_sums, uv)]


def _count(x, name):
    if isinstance(x, bool) or not isinstance(x, int) or x < 1:
        raise ValueError(f"{name} must be a positive integer, got {x!r}")
    return x


def score_array_bytes(B, H, N, itemsize=4):
    """Bytes of one B x H x N x N score array."""
    B, H, N, itemsize = _count(B, "B"), _count(H, "H"), _count(N, "N"), _count(itemsize, "itemsize")
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    """Bytes to mebibytes."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)):
        raise ValueError(f"nbytes must be a number, got {nbytes!r}")
    if not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError(f"nbytes must be finite and non-negative, got {nbytes!r}")
    return nbytes / MIB
