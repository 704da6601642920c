"""Similarity (``grader similarity``): a per-file budget off the critical path, and placeholders never flagged."""

from __future__ import annotations

import json
import resource
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT
from scale_support import run

from grader.builtin.similarity import CodeSimilarity, placeholder

pytest.importorskip("copydetect")

REFERENCE = ROOT / "reference" / "attention.py"


def _cpu() -> float:
    """CPU seconds of this process and of its children waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.mark.timing
def test_two_2_mib_files_cost_under_2_s_of_cpu_and_are_named_as_cut(tmp_path: Path) -> None:
    code = REFERENCE.read_text()
    big = tmp_path / "big.py"
    big.write_text((code * ((2 << 20) // len(code) + 1))[: 2 << 20])
    numbers = tmp_path / "numbers.py"
    numbers.write_text(("x = [" + "1, " * (2 << 20))[: (2 << 20) - 2] + "]\n")  # 700,000 tokens on one line
    small = tmp_path / "small.py"
    small.write_text(code)
    before = _cpu()
    pairs, cut = CodeSimilarity({"big": str(big), "numbers": str(numbers), "small": str(small)}, None, 0.6).result()
    spent = _cpu() - before
    assert spent < 2.0, f"{spent:.2f} s of CPU (the grader and its comparing process)"
    reasons = dict(cut)
    assert set(reasons) == {"big", "numbers"}  # the 10 KiB file is compared whole
    assert reasons["big"].startswith("2.0 MiB: only its first 256 KiB compared")
    assert reasons["numbers"].startswith("2.0 MiB: only its first 256 KiB compared")
    # what was compared still counts: the first 256 KiB of the big file are the small file, repeated
    assert pairs[("big", "small")] >= 0.9


def test_placeholder_values_are_told_from_real_ones() -> None:
    p, u = [0.2, 0.3, 0.5], [1.0, -2.0, 0.5]
    assert placeholder([p], [(p, u)])  # an argument returned unchanged
    assert placeholder([[0.0, 0.0, 0.0]], [(p, u)])  # zeros
    assert placeholder([[0.25, 0.25, 0.25]], [(p, u)])  # a constant fill
    assert placeholder([0], [(p, u)]) and placeholder([None], [(p, u)])
    assert placeholder([[[[1, 2]], [[0, 0]]]], [([[1, 2]], [[3, 4]], [[1, 2]])])  # (V, zeros): each part
    # the same value from calls with different arguments: a function that ignores its input
    assert placeholder([[0.1, 0.7], [0.1, 0.7]], [([1.0, 2.0],), ([5.0, 3.0],)])
    assert not placeholder([[0.2, -0.6, 0.25]], [(p, u)])  # a value computed from the input
    assert not placeholder([[0.1, 0.7], [0.4, 0.2]], [([1.0, 2.0],), ([5.0, 3.0],)])


PLACEHOLDERS = {
    "ana": """
        import numpy as np

        def softmax(scores, allowed=None):
            return np.zeros(len(scores))

        def attention(Q, K, V, causal=False):
            return V, np.zeros((len(Q), len(K)))

        def softmax_backward(p, u):
            return p

        def score_array_bytes(B, H, N, itemsize=4):
            return 0

        def bytes_to_mib(nbytes):
            return 0.0
        """,
    "ben": """
        def softmax(scores, allowed=None):
            out = []
            for _ in scores:
                out.append(0.0)
            return out

        def attention(Q, K, V, causal=False):
            weights = [[0.0 for _k in K] for _q in Q]
            return (V, weights)

        def softmax_backward(p, u):
            # TODO: the real gradient
            return list(p)

        def score_array_bytes(B, H, N, itemsize=4):
            return 0

        def bytes_to_mib(nbytes):
            return 0
        """,
    "cleo": """
        import numpy

        def softmax(scores, allowed=None):
            n = len(scores)
            return numpy.zeros(n).tolist()

        def attention(Q, K, V, causal=False):
            result = numpy.array(V, dtype=float)
            return result, numpy.zeros((len(Q), len(K)))

        def softmax_backward(p, u):
            grad = numpy.asarray(p, dtype=float)
            return grad

        def score_array_bytes(B, H, N, itemsize=4):
            return 0

        def bytes_to_mib(nbytes):
            return 0.0
        """,
}

SHARED_MISTAKE = """
    import numpy as np

    def softmax(scores, allowed=None):
        {body}

    def attention(Q, K, V, causal=False):
        return V, np.zeros((len(Q), len(K)))

    def softmax_backward(p, u):
        return p

    def score_array_bytes(B, H, N, itemsize=4):
        return 0

    def bytes_to_mib(nbytes):
        return 0
    """


@pytest.mark.slow
def test_placeholders_written_apart_are_not_flagged_and_a_shared_wrong_value_is_with_its_reason(
    tmp_path: Path,
) -> None:
    klass = tmp_path / "class"
    for name, source in PLACEHOLDERS.items():
        (klass / name).mkdir(parents=True)
        (klass / name / "attention.py").write_text(textwrap.dedent(source))
    # two students who make the same uncatalogued mistake in softmax (exp without normalizing, plus one),
    # written differently
    bodies = {
        "dan": "e = np.exp(np.asarray(scores, dtype=float))\n    return e / (e.sum() + 1.0)",
        "eve": "import math\n    ex = [math.exp(s) for s in scores]\n    t = sum(ex) + 1.0\n    return [v / t for v in ex]",
    }
    for name, body in bodies.items():
        (klass / name).mkdir(parents=True)
        (klass / name / "attention.py").write_text(textwrap.dedent(SHARED_MISTAKE).replace("{body}", body))
    out = tmp_path / "out"
    done = run("similarity", klass, "--out", out, "--insecure", "--similarity-threshold", "0.95")
    page = (out / "similarity.html").read_text()
    assert "similarity: 1 pair(s) flagged" in done.stdout
    rows = [line for line in page.splitlines() if line.startswith("<td>")]
    flagged = [line for line in page.splitlines() if line.startswith("<tr><td><a")]
    assert len(flagged) == 1 and ">dan<" in flagged[0] and ">eve<" in flagged[0]
    assert any("both returned the same wrong values on" in line and "no placeholder gives" in line for line in rows)
    for name in PLACEHOLDERS:
        assert f">{name}<" not in page
    results = json.loads((out / "results.json").read_text())
    assert {s["id"] for s in results["submissions"]} == {"ana", "ben", "cleo", "dan", "eve"}
