"""Mutant: every function returns a constant of the right shape.

Nothing is computed and nothing is validated: softmax returns zeros, attention
returns zero outputs and zero weights, softmax_backward zeros, the memory
functions 0. Only the shapes are right, so only shape checks may pay: a
property (shift invariance, causal noninterference, sum to zero, no mutation)
holds trivially for a constant and must not earn its points here.
"""


def _width(rows):
    return len(rows[0]) if rows and isinstance(rows[0], (list, tuple)) else 0


def softmax(scores, allowed=None):
    return [0.0] * len(scores)


def attention(Q, K, V, causal=False):
    n, m, d_v = len(Q), len(K), _width(V)
    return [[0.0] * d_v for _ in range(n)], [[0.0] * m for _ in range(n)]


def softmax_backward(p, u):
    return [0.0] * len(p)


def score_array_bytes(B, H, N, itemsize=4):
    return 0


def bytes_to_mib(nbytes):
    return 0.0
