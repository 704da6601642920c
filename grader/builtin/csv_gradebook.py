"""Built-in plugin: a CSV gradebook (``DIR/gradebook.csv`` or ``--csv FILE``).

One row per submission: the student id, the points of each exercise, the
total, the maximum and the status (``graded`` or ``error``). Written by
``grader grade`` only; numbers are written as ``10`` or ``7.5``.

Every field is quoted (``"alice","10","7.5"``: Canvas, Moodle, Excel and
LibreOffice read a quoted number as a number). A student id is text the
student chose (a folder or file name): it is written on one line (CR and
LF become spaces) and, when it starts like a formula (``= + - @`` or TAB,
also after leading spaces or quotes), prefixed with ``'`` so that no
spreadsheet runs it (`grader.safetext.csv_cell`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import UsageError
from grader.fileio import output_file, write_atomic
from grader.markers import hookimpl
from grader.models import GradingReport
from grader.reporting.feedback import adjustment_lines
from grader.safetext import csv_cell

if TYPE_CHECKING:
    from grader.config.core import Config

__all__ = ["gradebook_csv", "gradebook_csv_lines"]

FILENAME = "gradebook.csv"


def gradebook_csv(report: GradingReport) -> str:
    """The gradebook as CSV text.

    Parameters
    ----------
    report : grader.models.GradingReport

    Returns
    -------
    str
        A header ``student,G14.01,...,G14.06,total,max_score,status`` and one
        row per submission, in the report's order, ``\\n``-terminated, every
        field quoted. A student id is made inert with
        `grader.safetext.csv_cell` (one line; ``'`` before a formula).
        When a result was adjusted (manual scores, late penalty), two more
        columns follow: ``raw_score`` (the automatic total) and
        ``adjustments`` (each reason, ``|``-separated); ``total`` is final.
    """
    return "".join(gradebook_csv_lines(report))


def gradebook_csv_lines(report: GradingReport) -> Iterator[str]:
    """`gradebook_csv`'s text a row at a time (the header first), never the whole file in memory.

    Parameters
    ----------
    report : grader.models.GradingReport

    Yields
    ------
    str
        One ``\n``-terminated CSV row.
    """
    adjusted = any(s.adjustments for s in report.submissions)
    ids = [e.id for e in report.exercises] or [e.id for s in report.submissions[:1] for e in s.exercises]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)

    def line() -> str:
        text = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        return text

    writer.writerow(
        [
            "student",
            *(csv_cell(i) for i in ids),
            "total",
            "max_score",
            "status",
            *(["raw_score", "adjustments"] if adjusted else []),
        ]
    )
    yield line()
    for s in report.submissions:
        scores = {e.id: e.score for e in s.exercises}
        writer.writerow(
            [
                csv_cell(s.id),
                *[f"{scores[i]:g}" if i in scores else "" for i in ids],
                f"{s.score:g}",
                f"{s.max_score:g}",
                csv_cell(s.status),
                *(
                    [
                        f"{s.raw_score if s.raw_score is not None else s.score:g}",
                        csv_cell(" | ".join(adjustment_lines(s)[:-1])),
                    ]
                    if adjusted
                    else []
                ),
            ]
        )
        yield line()


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity", "merge"):
        return
    parser.add_argument(
        "--csv", metavar="FILE", type=output_file, help=f"write the CSV gradebook here (default: DIR/{FILENAME})"
    )


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write the gradebook for ``grader grade``."""
    if config.command != "grade":
        return
    out = config.out_dir
    target = config.option("csv") or (out / FILENAME if out else None)
    if target is None:
        return
    try:
        write_atomic(Path(target), gradebook_csv_lines(report))
    except OSError as exc:
        raise UsageError(f"--csv {target}: cannot write the file ({exc.strerror})") from None
