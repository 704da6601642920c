"""Notebooks: code cells joined (never run in a kernel), IPython lines left out, lines pointing at cells."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.intake.notebook import NotebookError, convert

ROOT = Path(__file__).resolve().parents[2]
MUTANT = (ROOT / "reference" / "mutants" / "mask_after_softmax" / "attention.py").read_text()


def _notebook(path: Path, *cells: tuple[str, str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(src) if kind == "code" else nbformat.v4.new_markdown_cell(src) for kind, src in cells
    ]
    nbformat.write(nb, str(path))
    return path


def test_code_cells_are_joined_in_order_and_ipython_lines_left_out(tmp_path: Path) -> None:
    path = _notebook(
        tmp_path / "attention.ipynb",
        ("md", "# Title"),
        ("code", "%matplotlib inline\nimport math"),
        ("code", "%%timeit\nx = 1"),
        ("code", "def f():\n    !ls\n    return math.pi"),
    )
    nb = convert(path, "attention.py")
    assert nb.source == (
        "pass  # left out by the grader: an IPython line\nimport math\n\n"
        "# left out by the grader: a cell magic\n# left out by the grader: a cell magic\n\n"
        "def f():\n    pass  # left out by the grader: an IPython line\n    return math.pi\n"
    )
    assert nb.lines[:2] == ((2, 1), (2, 2)) and nb.lines[2] == (0, 0) and nb.lines[6:9] == ((4, 1), (4, 2), (4, 3))
    assert nb.notes == (
        "attention.ipynb, cell 2, line 1: '%matplotlib inline' is an IPython line, not Python; it was left out",
        "attention.ipynb, cell 3: the cell magic '%%timeit' is not Python; the whole cell was left out",
        "attention.ipynb, cell 4, line 2: '!ls' is an IPython line, not Python; it was left out",
    )
    assert nb.where(9) == "attention.ipynb, cell 4, line 3" and nb.where(3) == "attention.ipynb"
    assert nb.relocate("f raised (attention.py, line 9): x") == "f raised (attention.ipynb, cell 4, line 3): x"
    compile(nb.source, "attention.py", "exec")  # valid Python


def test_a_file_that_is_not_a_notebook(tmp_path: Path) -> None:
    bad = tmp_path / "attention.ipynb"
    bad.write_text("{not json")
    with pytest.raises(NotebookError, match=r"^attention.ipynb is not a notebook nbformat can read \("):
        convert(bad, "attention.py")


@pytest.mark.slow
def test_check_on_a_notebook_matches_the_py_and_names_cells(cli, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "attention.py").write_text(MUTANT)
    code_py, out_py, _ = cli("check", tmp_path / "py" / "attention.py")
    head, _, rest = MUTANT.partition("\ndef softmax")
    broken = "def softmax" + rest.replace('"""Weights of one row', 'raise RuntimeError("boom")\n    """Weights', 1)
    nb = _notebook(
        tmp_path / "attention.ipynb",
        ("md", "# mine"),
        ("code", "%load_ext autoreload\n" + head),
        ("code", "def softmax" + rest),
    )
    code_nb, out_nb, err = cli("check", nb)
    assert (code_nb, out_nb) == (code_py, out_py)  # the same results, line for line
    assert "grader: note: attention.ipynb, cell 2, line 1: '%load_ext autoreload' is an IPython line" in err
    _notebook(nb, ("code", head), ("md", "text"), ("code", broken))
    code, out, err = cli("check", nb)
    assert code == 1
    # the terminal wraps long lines at its width (80 columns under pytest-xdist): compare the words
    assert "softmax raised RuntimeError on valid input (attention.ipynb, cell 3, line 2): boom" in " ".join(out.split())
    assert "attention.py, line" not in out


def test_grade_takes_notebooks_in_a_class_folder(cli, tmp_path: Path) -> None:  # noqa: ANN001
    klass = tmp_path / "class"
    (klass / "ann").mkdir(parents=True)
    _notebook(klass / "ann" / "attention.ipynb", ("code", MUTANT))
    _notebook(klass / "bob.ipynb", ("code", MUTANT))
    (klass / "eve.ipynb").write_text("[]")
    code, _, err = cli("grade", klass, "--out", tmp_path / "out", "-q")
    assert code == 0, err
    results = {s["id"]: s for s in json.loads((tmp_path / "out" / "results.json").read_text())["submissions"]}
    assert results["ann"]["score"] == results["bob"]["score"] == 65.0 and results["ann"]["max_score"] == 86.0
    assert results["eve"]["status"] == "error" and "not a notebook nbformat can read" in results["eve"]["error"]


@pytest.mark.slow
def test_pytest_in_a_notebook_folder(tmp_path: Path) -> None:
    _notebook(tmp_path / "attention.ipynb", ("code", MUTANT))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "FAILED attention.ipynb::G14.03::causal-two-positions" in proc.stdout
    assert "7 failed, 16 passed" in proc.stdout


def test_ipython_lines_are_found_as_python_reads_the_cell() -> None:
    from grader.intake.notebook import ipython_lines

    cell = [
        "x = (1",
        " % 2)",  # a continuation line: Python's modulo
        "y = (x",
        "!= 2)",  # Python's !=
        's = """',
        "%not a magic",  # inside a string
        "!nor this",
        '"""',
        "%time f()",
        "!ls \\",  # a shell line continued by a backslash, as IPython reads it
        "  -la",
        "if x:",
        "    !echo hi",
        "z = 1 \\",
        "  % 2",  # a backslash continuation: Python
    ]
    assert ipython_lines(cell) == {8: 1, 9: 1, 10: 0, 12: 1}


@pytest.mark.slow
def test_a_notebook_python_reads_grades_like_its_py_with_few_notes(cli, tmp_path: Path) -> None:  # noqa: ANN001
    """`% b)` continuation lines, magics inside strings and 20,000 duplicate cell ids: graded like the .py."""
    odd = '_ODD = (7\n % 3)\n_NE = (1\n!= 2)\n_DOC = """\n%timeit inside a string\n!ls inside a string\n"""\n'
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "attention.py").write_text(odd + MUTANT)
    code_py, out_py, _ = cli("check", tmp_path / "py" / "attention.py")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("same id") for _ in range(20_000)]
    magics = "\n".join(f"%load_ext ext{k}" for k in range(50)) + "\n!pip install numpy"
    nb.cells += [nbformat.v4.new_code_cell(magics), nbformat.v4.new_code_cell(odd + MUTANT)]
    raw = json.loads(nbformat.writes(nb))
    for cell in raw["cells"]:
        cell["id"] = "same"
    path = tmp_path / "attention.ipynb"
    path.write_text(json.dumps(raw))
    code_nb, out_nb, err = cli("check", path)
    assert (code_nb, out_nb) == (code_py, out_py)
    assert code_py == 1 and "G14.03" in out_py  # the mutant's failures, not a syntax error
    notes = [line for line in err.splitlines() if line.strip()]
    assert len(notes) <= 5, err[:2000]
    assert notes[-1] == (
        "grader: note: attention.ipynb: 48 more IPython line(s) or cell magic(s) were left out the same way"
    )
    assert "DuplicateCellId" not in err and "Warning" not in err


def test_a_notebook_the_validator_rejects_is_refused_in_one_line(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("y = 2")]
    raw = json.loads(nbformat.writes(nb))
    raw["cells"][1]["bogus"] = 1
    path = tmp_path / "attention.ipynb"
    path.write_text(json.dumps(raw))
    with pytest.raises(NotebookError) as info:
        convert(path, "attention.py")
    assert str(info.value) == (
        "attention.ipynb is not a notebook nbformat can read (cell 2: Additional properties are not allowed "
        "('bogus' was unexpected)); save it again from Jupyter, or hand in attention.py"
    )


def test_a_notebook_whose_code_outgrows_the_limit_is_said_so(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = _notebook(tmp_path / "attention.ipynb", ("code", "!a\n" * 150_000))
    code, out, err = cli("check", path)
    assert code != 0
    assert "code cells make" in out + err and "moved or changed" not in out + err
    assert len([line for line in err.splitlines() if line.startswith("grader: note:")]) <= 4
