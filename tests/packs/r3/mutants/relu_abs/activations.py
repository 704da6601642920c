"""Mutant: relu returns |x| (negative inputs are flipped, not cut)."""


def relu(xs):
    if not xs:
        raise ValueError("empty")
    return [abs(float(x)) for x in xs]


def relu_grad(xs):
    if not xs:
        raise ValueError("empty")
    return [1.0 if x > 0 else 0.0 for x in xs]
