"""Mutant: the weights are uniform over the allowed keys, whatever the scores.

Inputs are validated as the contract asks (so the ValueError checks pass
honestly), but softmax ignores the scores: each allowed column gets
1/(number allowed). attention mixes the values with those uniform weights;
the other functions are still the starter's. On zero scores (the chapter's
worked examples) uniform weights are right, so those hand values alone must
not pay.
"""

import math


def _number(x):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"not a finite number: {x!r}")
    return float(x)


def _vector(values):
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError("expected a non-empty list of numbers")
    return [_number(x) for x in values]


def _matrix(rows):
    if not isinstance(rows, (list, tuple)) or not rows:
        raise ValueError("expected a non-empty list of rows")
    out = [_vector(r) for r in rows]
    if len({len(r) for r in out}) != 1:
        raise ValueError("ragged matrix")
    return out


def _uniform(mask):
    count = sum(mask)
    if not count:
        raise ValueError("no column is allowed")
    return [1.0 / count if ok else 0.0 for ok in mask]


def softmax(scores, allowed=None):
    s = _vector(scores)
    if allowed is None:
        allowed = [True] * len(s)
    if not isinstance(allowed, (list, tuple)) or len(allowed) != len(s) or not all(isinstance(a, bool) for a in allowed):
        raise ValueError("allowed must be a list of booleans, one per score")
    return _uniform(allowed)


def attention(Q, K, V, causal=False):
    if not isinstance(causal, bool):
        raise ValueError("causal must be True or False")
    q, k, v = _matrix(Q), _matrix(K), _matrix(V)
    n, m = len(q), len(k)
    if len(k[0]) != len(q[0]) or len(v) != m or (causal and n != m):
        raise ValueError("shapes do not match")
    weights = [_uniform([j <= i or not causal for j in range(m)]) for i in range(n)]
    outputs = [[math.fsum(p[j] * v[j][c] for j in range(m)) for c in range(len(v[0]))] for p in weights]
    return outputs, weights


def softmax_backward(p, u):
    raise NotImplementedError("softmax_backward")


def score_array_bytes(B, H, N, itemsize=4):
    raise NotImplementedError("score_array_bytes")


def bytes_to_mib(nbytes):
    raise NotImplementedError("bytes_to_mib")
