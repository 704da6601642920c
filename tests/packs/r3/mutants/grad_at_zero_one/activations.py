"""Mutant: relu_grad is 1 at x = 0 (x >= 0 instead of x > 0)."""


def relu(xs):
    if not xs:
        raise ValueError("empty")
    return [max(float(x), 0.0) for x in xs]


def relu_grad(xs):
    if not xs:
        raise ValueError("empty")
    return [1.0 if x >= 0 else 0.0 for x in xs]
