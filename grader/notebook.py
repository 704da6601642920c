"""Jupyter notebooks as submissions: their code cells as one Python file, with a line map.

Many students hand in a notebook (the course pack's notebook name, e.g.
``attention.ipynb``). The grader never runs a kernel: the notebook is read
as JSON with nbformat, its code cells are joined in order into one
submission file (e.g. ``attention.py``, in a scratch folder), and that file is
graded like any other. IPython-only lines (``%magic``, ``!shell``, and
whole ``%%cell`` magics) are not Python: each is replaced by a comment and
reported as a note. `Notebook.where` maps a line of the joined file back to
the cell and the line in it, so every message says (e.g.) ``attention.ipynb, cell
3, line 2`` instead of a line of a file the student never saw.

Cells are numbered as the notebook shows them, from 1, counting every cell
(Markdown ones too), so "cell 3" is the third cell from the top.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Notebook", "NotebookError", "convert"]

_IPYTHON_LINE = re.compile(r"^\s*[%!]")


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

    path = Path(path)
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat raises JSON, validation and version errors alike
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise NotebookError(
            f"{path.name} is not a notebook nbformat can read ({first}); save it again from "
            f"Jupyter, or hand in {source_name}"
        ) from None
    out: list[str] = []
    where: list[tuple[int, int]] = []
    notes: list[str] = []
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
            notes.append(
                f"{path.name}, cell {number}: the cell magic {cell_lines[0].strip()[:40]!r} is not "
                "Python; the whole cell was left out"
            )
        for k, line in enumerate(cell_lines, start=1):
            if cell_magic or _IPYTHON_LINE.match(line):
                if not cell_magic:
                    notes.append(
                        f"{path.name}, cell {number}, line {k}: {line.strip()[:40]!r} is an IPython "
                        "line, not Python; it was left out"
                    )
                indent = line[: len(line) - len(line.lstrip())]
                out.append(
                    "# left out by the grader: a cell magic"
                    if cell_magic
                    else f"{indent}pass  # left out by the grader: an IPython line"
                )
            else:
                out.append(line)
            where.append((number, k))
    return Notebook(path.name, "\n".join(out) + "\n", tuple(where), tuple(notes), source_name)
