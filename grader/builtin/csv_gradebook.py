"""Built-in plugin: a CSV gradebook (``DIR/gradebook.csv`` or ``--csv FILE``).

One row per submission: the student id, the points of each exercise, the
total, the maximum and the status (``graded`` or ``error``). Written by
``grader grade`` only; numbers are written as ``10`` or ``7.5``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from grader.errors import UsageError
from grader.fileio import output_file, write_atomic
from grader.models import GradingReport
from grader.plugins import hookimpl

__all__ = ["gradebook_csv"]

FILENAME = "gradebook.csv"

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: str) -> str:
    """Neutralize a text cell a spreadsheet would run as a formula."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def gradebook_csv(report: GradingReport) -> str:
    """The gradebook as CSV text.

    Parameters
    ----------
    report : grader.models.GradingReport

    Returns
    -------
    str
        A header ``student,G14.01,...,G14.06,total,max_score,status`` and one
        row per submission, in the report's order, ``\\n``-terminated. A
        student id that starts like a spreadsheet formula (``=``, ``+``,
        ``-``, ``@``) is prefixed with ``'``.
    """
    ids = [e.id for e in report.exercises] or [e.id for s in report.submissions[:1] for e in s.exercises]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", *ids, "total", "max_score", "status"])
    for s in report.submissions:
        scores = {e.id: e.score for e in s.exercises}
        writer.writerow(
            [
                _cell(s.id),
                *[f"{scores[i]:g}" if i in scores else "" for i in ids],
                f"{s.score:g}",
                f"{s.max_score:g}",
                s.status,
            ]
        )
    return buf.getvalue()


@hookimpl
def grader_addoption(parser: Any) -> None:
    parser.add_argument("--csv", metavar="FILE", type=output_file, help=f"write the CSV gradebook here (default: DIR/{FILENAME})")


@hookimpl
def grader_write_reports(report: GradingReport, config: Any) -> None:
    """Write the gradebook for ``grader grade``."""
    if config.command != "grade":
        return
    out = config.out_dir
    target = config.option("csv") or (out / FILENAME if out else None)
    if target is None:
        return
    try:
        write_atomic(Path(target), gradebook_csv(report))
    except OSError as exc:
        raise UsageError(f"--csv {target}: cannot write the file ({exc.strerror})") from None
