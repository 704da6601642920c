"""Chapter G14 lab: scaled dot-product attention, written by you.

Fill in the five functions below. Each one raises ``NotImplementedError``
until you replace its body; the grader marks such a function "not attempted"
rather than failing it, so you can work through the exercises in order.

The grader calls your functions with plain Python values: numbers, booleans
and nested lists (a matrix is a list of rows). You may convert them to numpy
arrays inside your functions and you may return lists, tuples or arrays.

Check your work on the visible checks with::

    grader check attention.py

Contract (see the chapter, section "The central question"):

* ``Q`` holds n query rows of width d_k, ``K`` holds m key rows of width d_k
  and ``V`` holds m value rows of width d_v. n need not equal m, and d_k need
  not equal d_v.
* scores  = Q K^T / sqrt(d_k)      -> n x m
* weights = softmax of each row   -> n x m, each row sums to one
* outputs = weights V             -> n x d_v
* Invalid input raises ``ValueError``.
* Compute in float64: Python floats, or numpy arrays of numpy's default
  float64 (not float32 or float16). The checks allow only float64's rounding
  error on their inputs (e.g. a row of weights sums to 1 within about
  m x 2.2e-16), which float32 arithmetic (about 1e-7) exceeds.
* Leave the caller's lists unchanged: build new lists or arrays for your
  results instead of writing into ``scores``, ``Q``, ``K``, ``V``, ``p`` or ``u``.
"""


def softmax(scores, allowed=None):
    """Weights of one row of scores (exercises G14.02 and G14.06).

    Parameters
    ----------
    scores : list of float, length m
        One row of finite scores.
    allowed : list of bool, length m, optional
        ``allowed[j]`` is False where column j is masked out. ``None`` means
        every column is allowed.

    Returns
    -------
    weights : list of float, length m
        Nonnegative weights that sum to one over the allowed columns; a
        masked column gets weight exactly 0.

    Raises
    ------
    ValueError
        If the row is empty, a score is not finite, ``allowed`` has the wrong
        length or is not made of booleans, or no column is allowed (there is
        no distribution to normalize).

    Notes
    -----
    Mask before you normalize, and subtract the largest *allowed* score
    before exponentiating so that large scores do not overflow.
    """
    raise NotImplementedError("softmax")


def attention(Q, K, V, causal=False):
    """Single-head scaled dot-product attention (G14.01-G14.03, G14.06).

    Parameters
    ----------
    Q : (n, d_k) list of lists of float
        Query rows.
    K : (m, d_k) list of lists of float
        Key rows.
    V : (m, d_v) list of lists of float
        Value rows, one per key.
    causal : bool, optional
        If True, query i may only use keys j <= i. A causal call needs
        n == m.

    Returns
    -------
    outputs : (n, d_v) list of lists of float
    weights : (n, m) list of lists of float

    Raises
    ------
    ValueError
        If a matrix is empty or ragged, an entry is not finite, the widths of
        Q and K differ, K and V have different row counts, or ``causal`` is
        True while n != m.
    """
    raise NotImplementedError("attention")


def softmax_backward(p, u):
    """Gradient of a loss with respect to one row of scores (G14.04).

    Parameters
    ----------
    p : list of float, length m
        The softmax weights of the row.
    u : list of float, length m
        Upstream sensitivities, u[j] = dL/dp[j].

    Returns
    -------
    grad : list of float, length m
        grad[k] = dL/ds[k].
    """
    raise NotImplementedError("softmax_backward")


def score_array_bytes(B, H, N, itemsize=4):
    """Bytes held by one B x H x N x N score array (G14.05).

    Parameters
    ----------
    B, H, N : int
        Batch size, number of heads, sequence length.
    itemsize : int, optional
        Bytes per entry; 4 for float32.

    Returns
    -------
    int
        Size of the array in bytes.
    """
    raise NotImplementedError("score_array_bytes")


def bytes_to_mib(nbytes):
    """Convert a size in bytes to MiB (G14.05).

    Parameters
    ----------
    nbytes : int
        A size in bytes.

    Returns
    -------
    float
        The same size in mebibytes (MiB).
    """
    raise NotImplementedError("bytes_to_mib")
