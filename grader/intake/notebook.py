"""Jupyter notebooks as submissions: their code cells as one Python file, with a line map.

Many students hand in a notebook (the course pack's notebook name, e.g.
``attention.ipynb``). The grader never runs a kernel: the notebook is read
as JSON with nbformat, its code cells are joined in order into one
submission file (e.g. ``attention.py``, in a scratch folder), and that file is
graded like any other. IPython-only lines (``%magic``, ``!shell``, and
whole ``%%cell`` magics) are not Python: each is replaced by a comment and
reported as a note (at most `MAX_NOTES` lines per notebook, then a count).
They are found as Python reads the cell: with the tokenizer, only where a
logical line starts, so ``% b)`` continuing a bracket, ``!= 2)`` and a line
inside a triple-quoted string stay Python. A notebook nbformat's validator
rejects is refused in one line; its warnings (e.g. duplicate cell ids, which
nbformat repairs) are not printed. `Notebook.where` maps a line of the joined file back to
the cell and the line in it, so every message says (e.g.) ``attention.ipynb, cell
3, line 2`` instead of a line of a file the student never saw.

Cells are numbered as the notebook shows them, from 1, counting every cell
(Markdown ones too), so "cell 3" is the third cell from the top.
"""

from __future__ import annotations

import re
import tokenize
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MAX_NOTES", "Notebook", "NotebookError", "convert", "ipython_lines"]

MAX_NOTES = 3
"""Notes kept per notebook; the rest are counted in one more line."""

_BRACKETS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


class NotebookError(ValueError):
    """The file is not a notebook nbformat can read."""


@dataclass(frozen=True)
class Notebook:
    """A notebook's code as one Python source, and where each line came from.

    Attributes
    ----------
    name : str
        The notebook's file name, e.g. ``"attention.ipynb"``.
    source : str
        The code cells joined in order (one blank line between cells).
    lines : tuple of (int, int)
        For line ``k`` of `source` (1-based), ``lines[k - 1]`` is (cell
        number, line in that cell), both from 1; (0, 0) for the blank line
        between cells.
    notes : tuple of str
        One per line dropped (IPython magics and shell lines), naming its
        cell and line.
    """

    name: str
    source: str
    lines: tuple[tuple[int, int], ...]
    notes: tuple[str, ...] = field(default=())
    source_name: str = "submission.py"
    """The file name the joined code is graded as (the course pack's submission file)."""

    def where(self, line: int) -> str:
        """``"attention.ipynb, cell 3, line 2"`` for a line of `source` (the file's name alone if unknown)."""
        if 1 <= line <= len(self.lines) and self.lines[line - 1][0]:
            cell, in_cell = self.lines[line - 1]
            return f"{self.name}, cell {cell}, line {in_cell}"
        return self.name

    def relocate(self, text: str) -> str:
        """Replace every ``<source_name>, line N`` in a message by the cell and line it came from."""
        if not text:
            return text
        pattern = re.compile(r"\(?" + re.escape(self.source_name) + r", line (\d+)\)?")

        def repl(m: re.Match[str]) -> str:
            shown = self.where(int(m.group(1)))
            return f"({shown})" if m.group(0).startswith("(") else shown

        return pattern.sub(repl, text)


def convert(path: str | Path, source_name: str = "submission.py") -> Notebook:
    """Read a notebook (never executed) and join its code cells.

    Parameters
    ----------
    path : path-like
        An ``.ipynb`` file.
    source_name : str
        The file the joined code is graded as (the course pack's submission
        file): its tracebacks' ``<source_name>, line N`` are relocated.

    Returns
    -------
    Notebook

    Raises
    ------
    NotebookError
        If nbformat cannot read the file as a notebook.
    """
    import nbformat  # reads and validates the JSON; it never starts a kernel
    from nbformat.reader import reads

    path = Path(path)

    def refuse(why: str) -> NotebookError:
        return NotebookError(
            f"{path.name} is not a notebook nbformat can read ({why}); save it again from Jupyter, or hand in "
            f"{source_name}"
        )

    with warnings.catch_warnings():  # nbformat warns once per repaired cell (20,000 duplicate ids: 20,000 lines)
        warnings.simplefilter("ignore")
        try:
            nb = nbformat.convert(reads(path.read_text(encoding="utf-8")), 4)
        except Exception as exc:  # noqa: BLE001 - nbformat raises JSON, encoding and version errors alike
            raise refuse(_first_line(exc)) from None
        try:
            nbformat.validate(nb)
        except nbformat.ValidationError as exc:
            raise refuse(_validation_line(exc)) from None
    out: list[str] = []
    where: list[tuple[int, int]] = []
    notes: list[str] = []
    dropped = 0
    for number, cell in enumerate(nb.get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        cell_lines = str(source).split("\n")
        if out:
            out.append("")
            where.append((0, 0))
        cell_magic = bool(cell_lines) and cell_lines[0].lstrip().startswith("%%")
        if cell_magic:
            dropped += 1
            if len(notes) < MAX_NOTES:
                notes.append(
                    f"{path.name}, cell {number}: the cell magic {cell_lines[0].strip()[:40]!r} is not "
                    "Python; the whole cell was left out"
                )
            out.extend("# left out by the grader: a cell magic" for _ in cell_lines)
            where.extend((number, k) for k in range(1, len(cell_lines) + 1))
            continue
        magic = ipython_lines(cell_lines)
        for k, line in enumerate(cell_lines, start=1):
            if k - 1 in magic:
                if magic[k - 1] and len(notes) < MAX_NOTES:
                    notes.append(
                        f"{path.name}, cell {number}, line {k}: {line.strip()[:40]!r} is an IPython "
                        "line, not Python; it was left out"
                    )
                dropped += magic[k - 1]
                indent = line[: len(line) - len(line.lstrip())]
                out.append(f"{indent}pass  # left out by the grader: an IPython line")
            else:
                out.append(line)
            where.append((number, k))
    if dropped > len(notes):
        notes.append(
            f"{path.name}: {dropped - len(notes):,} more IPython line(s) or cell magic(s) were left out the same way"
        )
    return Notebook(path.name, "\n".join(out) + "\n", tuple(where), tuple(notes), source_name)


def ipython_lines(lines: list[str]) -> dict[int, int]:
    """The IPython-only lines of one code cell, found where Python would start a statement.

    A line is an IPython line when a logical line starts there (as
    `tokenize` reads the cell: not inside brackets, a string or after a
    backslash) and its first character is ``%`` or ``!``; a backslash at its
    end carries the magic onto the next line, as in IPython.

    Parameters
    ----------
    lines : list of str
        The cell's lines, without their newlines.

    Returns
    -------
    dict of int to int
        Index (from 0) of each line to leave out -> 1 for the line a magic
        starts on, 0 for a line that continues it.
    """
    found: dict[int, int] = {}
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith(("%", "!")):
            found[i] = 1
            while lines[i].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                found[i] = 0
            i += 1
            continue
        end = _logical_end(lines, i)
        if end is None:  # not Python the tokenizer can end (e.g. an unclosed bracket): the compiler will say so
            break
        i = end + 1
    return found


def _logical_end(lines: list[str], start: int) -> int | None:
    """Index of the last line of the logical line starting at ``lines[start]`` (None if the tokenizer fails)."""

    def feed() -> Iterator[str]:
        yield lines[start].lstrip() + "\n"
        for line in lines[start + 1 :]:
            yield line + "\n"

    depth = 0
    rows = feed()
    try:
        for tok in tokenize.generate_tokens(lambda: next(rows, "")):
            if tok.type == tokenize.OP:
                depth += _BRACKETS.get(tok.string, 0)
            elif tok.type == tokenize.NEWLINE or (tok.type == tokenize.NL and depth <= 0):
                return start + tok.start[0] - 1
            elif tok.type == tokenize.ENDMARKER:
                return len(lines) - 1
    except (tokenize.TokenError, SyntaxError):
        return None
    return len(lines) - 1


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _validation_line(exc: Exception) -> str:
    """One line for nbformat's multi-line validation error: its first line, and where (e.g. ``cell 3``)."""
    first = _first_line(exc)
    m = re.search(r"On instance\['cells'\]\[(\d+)\]", str(exc))
    return f"cell {int(m.group(1)) + 1}: {first}" if m else first
