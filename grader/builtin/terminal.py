"""Built-in plugin: what the grader prints on the terminal.

``grade`` prints one line per submission as it is graded, then a table of
scores per exercise. ``check`` prints every visible check with what went
wrong, then "N passed, N failed" and how many hidden checks run at grading.
``-q`` prints only the final lines.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from typing import Any

from grader.models import GradingReport, SubmissionResult
from grader.plugins import hookimpl

MARKS = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "not_attempted": "TODO"}


@hookimpl
def grader_addoption(parser: Any) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the summary")


@hookimpl
def grader_configure(config: Any) -> None:
    config.stash["terminal.count"] = 0


@hookimpl
def grader_submission_graded(result: SubmissionResult, config: Any) -> None:
    """Print one progress line per graded submission (``grade`` only)."""
    if config.command != "grade" or config.option("quiet"):
        return
    config.stash["terminal.count"] += 1
    n, total = config.stash["terminal.count"], config.stash.get("total", 0)
    status = f"  error: {result.error}" if result.status == "error" else ""
    print(f"[{n}/{total}] {result.id}: {result.score:g}/{result.max_score:g}{status}", file=sys.stderr, flush=True)


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
        passed = failed = 0
        for ex in sub.exercises:
            if not config.option("quiet"):
                write(f"{ex.id} {ex.title}: {ex.score:g}/{ex.max_score:g}")
            for c in ex.checks:
                if c.status == "passed":
                    passed += 1
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
                    write(_wrapped("hint: " + c.hint))
        hidden = collected.hidden_count if collected else 0
        write(f"{passed} passed, {failed} failed")
        write(f"visible checks: {sub.score:g}/{sub.max_score:g} points; {hidden} hidden checks run at grading")


def summary_grade(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """The instructor's table of ``grader grade``."""
    ids = [e.id for e in report.exercises]
    width = max([len(s.id) for s in report.submissions] + [10])
    write(f"{'submission':{width}}  " + "  ".join(f"{i:>9}" for i in ids) + f"  {'total':>11}")
    for s in report.submissions:
        cells = "  ".join(f"{e.score:>4g}/{e.max_score:<4g}" for e in s.exercises)
        flag = "  (error)" if s.status == "error" else ""
        write(f"{s.id:{width}}  {cells}  {s.score:>5g}/{s.max_score:<5g}{flag}")
    errors = sum(1 for s in report.submissions if s.status == "error")
    write(f"graded {len(report.submissions)} submissions ({errors} could not run)")
    if config.out_dir is not None:
        write(f"reports: {config.out_dir / 'index.html'}")


@hookimpl
def grader_terminal_summary(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """Print the summary of ``check`` or ``grade``."""
    if config.command == "check":
        summary_check(report, config, write)
    elif config.command == "grade":
        summary_grade(report, config, write)
