"""Built-in plugin: what the grader prints on the terminal.

``grade`` shows progress while it grades: a progress bar with count, rate
and ETA on a terminal (tqdm), or a plain line at most every 2 seconds (and
for every submission that cannot run) when stderr is not a terminal; then a
table of scores per exercise. ``check`` prints every visible check with what went
wrong, then "N passed, N failed" and how many hidden checks run at grading.
``-q`` prints only the final lines.

Student text (ids, paths, exception messages, what the code printed) goes
through `grader.safetext.display` first: no escape sequence, control or
bidi character reaches the terminal, and no line break the grader did not
put there. In a GitHub Actions job the summary sits between
``::stop-commands::TOKEN`` and ``::TOKEN::`` (a fresh random token), so no
student text can run as a workflow command.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

from grader.models import GradingReport, SubmissionResult
from grader.plugins import hookimpl
from grader.safetext import display, in_github_actions, stop_commands

MAX_TABLE_ROWS = 50
"""Rows of the score table printed by ``grade``; the reports hold every submission."""

ID_WIDTH = 60
"""Characters of a student id shown in the score table (longer ids are cut with an ellipsis)."""

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
        line = f"[{self.count}/{self.total}] {shown_id(result.id)}: {result.score:g}/{result.max_score:g}"
        if result.status == "error":
            line += f"  error: {display(result.error)}"
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


def shown_id(sid: str, limit: int = ID_WIDTH) -> str:
    """A student id as the terminal shows it: inert (`grader.safetext.display`), one line, cut to ``limit``."""
    return _one_line(sid, limit)


def _wrapped(text: str) -> str:
    return textwrap.fill(" ".join(display(text).split()), width=100, initial_indent=INDENT, subsequent_indent=INDENT + "  ")


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(display(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary_check(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """The student-facing summary of ``grader check``."""
    collected = config.stash.get("collected")
    for sub in report.submissions:
        if sub.status == "error":
            write(f"ERROR {display(sub.path)}: {display(sub.error)}")
        passed = failed = todo = 0
        for ex in sub.exercises:
            if not config.option("quiet"):
                write(f"{display(ex.id)} {display(ex.title)}: {ex.score:g}/{ex.max_score:g}")
            for c in ex.checks:
                if c.status == "passed":
                    passed += 1
                elif c.status == "not_attempted":
                    todo += 1
                else:
                    failed += 1
                if config.option("quiet") or (sub.status == "error" and c.status == "error"):
                    continue
                write(f"  {MARKS.get(c.status, c.status.upper()):7} {display(c.id)}")
                if c.status != "passed":
                    write(_wrapped(c.message))
                    for label, value in c.details:
                        if label != "call" or c.status != "not_attempted":
                            write(f"{INDENT}{display(label)}: {_one_line(value, 200)}")
                    for d in c.diagnosis:
                        write(_wrapped(f"likely mistake: {d.misconception} See the chapter section \"{d.section}\"."))
                    write(_wrapped("hint: " + c.hint))
        hidden = collected.hidden_count if collected else 0
        write(f"{passed} passed, {failed} failed" + (f", {todo} not attempted" if todo else ""))
        write(f"visible checks: {sub.score:g}/{sub.max_score:g} points; {hidden} hidden checks run at grading")


def summary_grade(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """The instructor's table of ``grader grade``."""
    ids = [display(e.id) for e in report.exercises]
    names = {id(s): shown_id(s.id) for s in report.submissions}
    width = max([len(n) for n in names.values()] + [10])
    write(f"{'submission':{width}}  " + "  ".join(f"{i:<8}" for i in ids) + "  total")
    shown = report.submissions if len(report.submissions) <= MAX_TABLE_ROWS else report.submissions[:MAX_TABLE_ROWS]
    for s in shown:
        cells = "  ".join(f"{f'{e.score:g}/{e.max_score:g}':<8}" for e in s.exercises)
        flag = "  (error)" if s.status == "error" else ""
        write(f"{names[id(s)]:{width}}  {cells}  {s.score:g}/{s.max_score:g}{flag}")
    if len(shown) < len(report.submissions):
        write(f"... and {len(report.submissions) - len(shown)} more (all of them are in the reports)")
    errors = sum(1 for s in report.submissions if s.status == "error")
    n = len(report.submissions)
    write(f"graded {n} submission{'s' if n != 1 else ''} ({errors} could not run)")
    if config.out_dir is not None:
        write(f"reports: {display(str(config.out_dir / 'index.html'))}")


@hookimpl
def grader_terminal_summary(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """Print the summary of ``check`` or ``grade`` (between stop-commands markers in GitHub Actions)."""
    progress = config.stash.pop("terminal.progress", None)
    if progress is not None:
        progress.close()
    if config.command not in ("check", "grade"):
        return

    def safe(line: str) -> None:
        write(display(line, newlines=True))  # line breaks here are the grader's (wrapped text)

    summary = summary_check if config.command == "check" else summary_grade
    if not in_github_actions():
        summary(report, config, safe)
        return
    stop, resume = stop_commands()
    write(stop)
    try:
        summary(report, config, safe)
    finally:
        write(resume)
