"""Built-in plugin: what the grader prints on the terminal.

``grade`` shows progress while it grades: a progress bar with count, rate
and ETA on a terminal (tqdm), or a plain line at most every 2 seconds (and
for every submission that cannot run) when stderr is not a terminal; then a
table of scores per exercise. ``check`` prints every visible check with what went
wrong, then "N passed, N failed" and how many hidden checks run at grading.
``-q`` prints only the final lines.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

from grader.models import GradingReport, SubmissionResult
from grader.plugins import hookimpl

MAX_TABLE_ROWS = 50
"""Rows of the score table printed by ``grade``; the reports hold every submission."""

MARKS = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "not_attempted": "TODO"}


@hookimpl
def grader_addoption(parser: Any) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the summary")


class Progress:
    """Progress of a batch on stderr: a tqdm bar on a terminal, else periodic lines.

    Parameters
    ----------
    total : int
        Number of submissions in the batch.
    stream : file
        Where to write (stderr).
    interval : float
        Seconds between plain lines when not on a terminal.
    """

    def __init__(self, total: int, stream: Any = None, interval: float = 2.0) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.count = 0
        self.interval = interval
        self.started = self.last = time.monotonic()
        self.bar = None
        if self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="submission", file=self.stream, dynamic_ncols=True, leave=False)

    def update(self, result: SubmissionResult) -> None:
        """Count one finished submission and show progress when due."""
        self.count += 1
        line = f"[{self.count}/{self.total}] {result.id}: {result.score:g}/{result.max_score:g}"
        if result.status == "error":
            line += f"  error: {result.error}"
        if self.bar is not None:
            if result.status == "error":
                self.bar.write(line, file=self.stream)
            self.bar.update(1)
            return
        now = time.monotonic()
        due = self.count in (1, self.total) or now - self.last >= self.interval or result.status == "error"
        if due:
            self.last = now
            print(line + self._rate(now), file=self.stream, flush=True)

    def _rate(self, now: float) -> str:
        elapsed = now - self.started
        if self.count < 2 or elapsed < 1.0:
            return ""
        rate = self.count / elapsed
        return f"  ({rate:.1f}/s, ETA {max(self.total - self.count, 0) / rate:.0f} s)"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@hookimpl
def grader_submission_graded(result: SubmissionResult, config: Any) -> None:
    """Show progress (``grade`` only, not with ``-q``)."""
    if config.command != "grade" or config.option("quiet"):
        return
    progress = config.stash.get("terminal.progress")
    if progress is None:
        progress = config.stash["terminal.progress"] = Progress(config.stash.get("total", 0))
    progress.update(result)


@hookimpl
def grader_unconfigure(config: Any) -> None:
    progress = config.stash.pop("terminal.progress", None)
    if progress is not None:
        progress.close()


INDENT = " " * 10


def _wrapped(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), width=100, initial_indent=INDENT, subsequent_indent=INDENT + "  ")


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary_check(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """The student-facing summary of ``grader check``."""
    collected = config.stash.get("collected")
    for sub in report.submissions:
        if sub.status == "error":
            write(f"ERROR {sub.path}: {sub.error}")
        passed = failed = todo = 0
        for ex in sub.exercises:
            if not config.option("quiet"):
                write(f"{ex.id} {ex.title}: {ex.score:g}/{ex.max_score:g}")
            for c in ex.checks:
                if c.status == "passed":
                    passed += 1
                elif c.status == "not_attempted":
                    todo += 1
                else:
                    failed += 1
                if config.option("quiet") or (sub.status == "error" and c.status == "error"):
                    continue
                write(f"  {MARKS.get(c.status, c.status.upper()):7} {c.id}")
                if c.status != "passed":
                    write(_wrapped(c.message))
                    for label, value in c.details:
                        if label != "call" or c.status != "not_attempted":
                            write(f"{INDENT}{label}: {_one_line(value, 200)}")
                    for d in c.diagnosis:
                        write(_wrapped(f"likely mistake: {d.misconception} See the chapter section \"{d.section}\"."))
                    write(_wrapped("hint: " + c.hint))
        hidden = collected.hidden_count if collected else 0
        write(f"{passed} passed, {failed} failed" + (f", {todo} not attempted" if todo else ""))
        write(f"visible checks: {sub.score:g}/{sub.max_score:g} points; {hidden} hidden checks run at grading")


def summary_grade(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """The instructor's table of ``grader grade``."""
    ids = [e.id for e in report.exercises]
    width = max([len(s.id) for s in report.submissions] + [10])
    write(f"{'submission':{width}}  " + "  ".join(f"{i:<8}" for i in ids) + "  total")
    shown = report.submissions if len(report.submissions) <= MAX_TABLE_ROWS else report.submissions[:MAX_TABLE_ROWS]
    for s in shown:
        cells = "  ".join(f"{f'{e.score:g}/{e.max_score:g}':<8}" for e in s.exercises)
        flag = "  (error)" if s.status == "error" else ""
        write(f"{s.id:{width}}  {cells}  {s.score:g}/{s.max_score:g}{flag}")
    if len(shown) < len(report.submissions):
        write(f"... and {len(report.submissions) - len(shown)} more (all of them are in the reports)")
    errors = sum(1 for s in report.submissions if s.status == "error")
    n = len(report.submissions)
    write(f"graded {n} submission{'s' if n != 1 else ''} ({errors} could not run)")
    if config.out_dir is not None:
        write(f"reports: {config.out_dir / 'index.html'}")


@hookimpl
def grader_terminal_summary(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """Print the summary of ``check`` or ``grade``."""
    progress = config.stash.pop("terminal.progress", None)
    if progress is not None:
        progress.close()
    if config.command == "check":
        summary_check(report, config, write)
    elif config.command == "grade":
        summary_grade(report, config, write)
