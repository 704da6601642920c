"""Sample submission: fully correct, pure Python lists (math module only).

Every exercise (G14.01-G14.06) should pass. Scores are shifted by the largest
allowed score before exponentiating and every sum goes through math.fsum, so
the results agree with the numpy reference to about 1e-12.
"""

import math


def _check_number(x, where):
    # bools are ints in Python, but a True inside a matrix is almost surely a bug
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"{where}: expected a number, got {x!r}")
    if not math.isfinite(x):
        raise ValueError(f"{where}: {x!r} is not finite")
    return float(x)


def _check_vector(v, name):
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{name} must be a list")
    if len(v) == 0:
        raise ValueError(f"{name} is empty")
    return [_check_number(x, f"{name}[{j}]") for j, x in enumerate(v)]


def _check_matrix(A, name):
    if not isinstance(A, (list, tuple)) or len(A) == 0:
        raise ValueError(f"{name} must be a non-empty list of rows")
    rows = [_check_vector(r, f"{name}[{i}]") for i, r in enumerate(A)]
    width = len(rows[0])
    for i, r in enumerate(rows):
        if len(r) != width:
            raise ValueError(f"{name} is ragged: row 0 has {width} entries, row {i} has {len(r)}")
    return rows


def softmax(scores, allowed=None):
    s = _check_vector(scores, "scores")
    m = len(s)
    if allowed is None:
        mask = [True] * m
    else:
        if not isinstance(allowed, (list, tuple)) or len(allowed) != m:
            raise ValueError(f"allowed must be a list of {m} booleans")
        if not all(isinstance(a, bool) for a in allowed):
            raise ValueError("allowed must contain only True/False")
        mask = list(allowed)
    if not any(mask):
        raise ValueError("every column is masked, nothing to normalize")

    biggest = max(x for x, ok in zip(s, mask) if ok)
    # x - biggest <= 0 for allowed x, so exp never overflows; it may be -inf
    # (e.g. -1e308 - 1e308) and exp(-inf) is 0.0, which is what we want
    expd = [math.exp(x - biggest) if ok else 0.0 for x, ok in zip(s, mask)]
    total = math.fsum(expd)  # >= 1 because the max term is exp(0)
    return [e / total for e in expd]


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be True or False")
    Q = _check_matrix(Q, "Q")
    K = _check_matrix(K, "K")
    V = _check_matrix(V, "V")
    n, d_k = len(Q), len(Q[0])
    m, d_v = len(K), len(V[0])
    if len(K[0]) != d_k:
        raise ValueError(f"Q has width {d_k} but K has width {len(K[0])}")
    if len(V) != m:
        raise ValueError(f"K has {m} rows but V has {len(V)}; need one value per key")
    if causal and n != m:
        raise ValueError("causal attention needs n == m")

    root = math.sqrt(d_k)
    weights = []
    outputs = []
    for i in range(n):
        row = []
        for j in range(m):
            try:
                dot = math.fsum(a * b for a, b in zip(Q[i], K[j]))
            except OverflowError:
                dot = math.inf
            row.append(dot / root)
        if not all(math.isfinite(x) for x in row):
            raise ValueError("scores overflowed; inputs are too large")
        mask = [j <= i for j in range(m)] if causal else None
        p = softmax(row, mask)
        weights.append(p)
        outputs.append([math.fsum(p[j] * V[j][c] for j in range(m)) for c in range(d_v)])
    return outputs, weights


def softmax_backward(p, u):
    p = _check_vector(p, "p")
    u = _check_vector(u, "u")
    if len(p) != len(u):
        raise ValueError("p and u must have the same length")
    mean = math.fsum(pj * uj for pj, uj in zip(p, u))
    return [pk * (uk - mean) for pk, uk in zip(p, u)]


def _positive_int(x, name):
    if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
        raise ValueError(f"{name} must be a positive integer")
    return x


def score_array_bytes(B, H, N, itemsize=4):
    B = _positive_int(B, "B")
    H = _positive_int(H, "H")
    N = _positive_int(N, "N")
    itemsize = _positive_int(itemsize, "itemsize")
    return B * H * N * N * itemsize


def bytes_to_mib(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)):
        raise ValueError("nbytes must be a number")
    if not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError("nbytes must be finite and non-negative")
    return nbytes / 2**20  # 1 MiB = 1024 * 1024 bytes
