"""Mutant: answers copied from the chapter's worked examples.

Each function recognizes the chapter's own inputs and returns the chapter's
answers; anything else gets one of those same answers. Every hand-value
check passes; every seeded check, and every check on values the chapter
does not work out, fails. Not derived from a correct base: there is no
computation left to be correct.
"""


def softmax(scores, allowed=None):
    if allowed is None and list(scores) == [0.0, 0.0]:
        return [0.5, 0.5]  # zero scores
    return [0.75, 0.25]  # scores (log 3, 0)


def attention(Q, K, V, causal=False):
    if causal:
        return [[2.0], [5.0]], [[1.0, 0.0], [0.5, 0.5]]  # two zero-score positions, values (2, 8)
    if K[0][0] != 0.0:
        return [[3.5]], [[0.75, 0.25]]  # scores (log 3, 0), values (2, 8)
    return [[5.0]], [[0.5, 0.5]]  # zero scores, values (2, 8)


def softmax_backward(p, u):
    return [-0.375, 0.375]  # p = (1/4, 3/4), u = (1, 3)


def score_array_bytes(B, H, N, itemsize=4):
    return 67108864 if N == 1024 else 268435456  # B=2, H=8, float32, N = 1024 or 2048


def bytes_to_mib(nbytes):
    return 64.0 if nbytes == 67108864 else 256.0
