"""Mutant: every function raises ValueError, on every input.

A check that only asks for ValueError on invalid input would pay it for
nothing; a ValueError check pays only when the same function also accepts
a valid input next to the invalid one.
"""


def softmax(scores, allowed=None):
    raise ValueError("invalid input")


def attention(Q, K, V, causal=False):
    raise ValueError("invalid input")


def softmax_backward(p, u):
    raise ValueError("invalid input")


def score_array_bytes(B, H, N, itemsize=4):
    raise ValueError("invalid input")


def bytes_to_mib(nbytes):
    raise ValueError("invalid input")
