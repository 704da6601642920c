"""Reference for R3: the rectified linear unit and its gradient, on lists of numbers."""


def _values(xs):
    if not isinstance(xs, list) or not xs:
        raise ValueError("give a non-empty list of numbers")
    out = []
    for x in xs:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ValueError(f"{x!r} is not a number")
        out.append(float(x))
    return out


def relu(xs):
    """max(x, 0) for every x of the list."""
    return [x if x > 0 else 0.0 for x in _values(xs)]


def relu_grad(xs):
    """The derivative of relu at every x: 1 where x > 0, else 0 (0 at x = 0 by convention)."""
    return [1.0 if x > 0 else 0.0 for x in _values(xs)]
