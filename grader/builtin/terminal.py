"""Built-in plugin: what the grader prints on the terminal.

``grade`` shows progress while it grades: a progress bar with count, rate
and ETA on a terminal (tqdm), or a plain line at most every 2 seconds (and
for every submission that cannot run) when stderr is not a terminal; then a
table of scores per exercise. ``check`` prints every visible check with what went
wrong (one line per function not attempted yet, each number once, wrapped
to the terminal's width, marks coloured on a terminal unless ``NO_COLOR``
is set), what the file printed, then "N passed, N failed" and how many
hidden checks run at grading; a folder of students gets a header per
student. ``-q`` prints only the final lines.

Student text (ids, paths, exception messages, what the code printed) goes
through `grader.safetext.display` first: no escape sequence, control or
bidi character reaches the terminal, and no line break the grader did not
put there. In a GitHub Actions job the summary sits between
``::stop-commands::TOKEN`` and ``::TOKEN::`` (a fresh random token), so no
student text can run as a workflow command.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from grader.collected import COLLECTED
from grader.markers import hookimpl
from grader.models import GradingReport, Submission, SubmissionResult
from grader.reporting.checktext import INDENT, MARKS, detail_lines, failure_lines, width
from grader.reporting.checktext import one_line as _one_line
from grader.reporting.checktext import wrapped as _wrapped
from grader.reporting.feedback import headline, how_many
from grader.safetext import display, in_github_actions, stop_commands
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_PROGRESS: StashKey[Progress] = StashKey()
_TOTAL = StashKey[int]()

MAX_TABLE_ROWS = 50
"""Rows of the score table printed by ``grade``; the reports hold every submission."""

ID_WIDTH = 60
"""Characters of a student id shown in the score table (longer ids are cut with an ellipsis)."""


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity", "check", "merge"):
        return
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
def grader_collection_finish(submissions: Sequence[Submission], config: Config) -> None:
    """Learn the batch's size, for the progress bar."""
    config.stash[_TOTAL] = len(submissions)


@hookimpl
def grader_submission_graded(result: SubmissionResult, config: Config) -> None:
    """Show progress (``grade`` only, not with ``-q``)."""
    if config.command != "grade" or config.option("quiet"):
        return
    progress = config.stash.get(_PROGRESS)
    if progress is None:
        progress = config.stash[_PROGRESS] = Progress(config.stash.get(_TOTAL, 0))
    progress.update(result)


@hookimpl
def grader_unconfigure(config: Config) -> None:
    progress = config.stash.pop(_PROGRESS, None)
    if progress is not None:
        progress.close()


PRINTED_LINES = 12
"""Lines of what a submission printed that ``check`` shows (the rest is counted)."""

COLOURS = {"PASS": "32", "FAIL": "31", "ERROR": "31", "TIMEOUT": "31", "TODO": "33"}
"""ANSI colour of each mark at the start of a ``check`` line (green, red, yellow)."""

_CUT_NOTE = re.compile(r"^\[output cut at (\d+ KiB)\]$|^\[.*hidden.*\]$")
"""The notes `grader.execution.jobs` ends captured output with: cut at its cap (the size kept), or at the first hidden call."""

_MARK_AT_START = re.compile(r"^(\s*)(PASS|FAIL|ERROR|TIMEOUT|TODO)\b")


def use_colour(stream: Any = None) -> bool:
    """Whether to colour the marks: a terminal, ``NO_COLOR`` unset or empty (no-color.org), ``TERM`` not dumb."""
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def colourize(line: str) -> str:
    """Colour the mark that starts a line (the grader's own word, never student text)."""
    return _MARK_AT_START.sub(lambda m: f"{m.group(1)}\x1b[{COLOURS[m.group(2)]}m{m.group(2)}\x1b[0m", line, count=1)


def shown_id(sid: str, limit: int = ID_WIDTH) -> str:
    """A student id as the terminal shows it: inert (`grader.safetext.display`), one line, cut to ``limit``."""
    return _one_line(sid, limit)


def table_layout(name_width: int, rows: list[list[str]], total_width: int, columns: int) -> tuple[int, int | None]:
    """The score table's name and exercise-cell widths on a terminal of ``columns`` characters.

    Parameters
    ----------
    name_width : int
        Characters of the longest student id shown (at least 10).
    rows : list of list of str
        The exercise columns' texts, the header's ids first, then each row's scores.
    total_width : int
        Characters of the widest total (its ``(error)`` flag included).
    columns : int
        The terminal's width (`grader.reporting.checktext.width`).

    Returns
    -------
    tuple
        ``(name_width, cell)``, ``cell`` the characters of an exercise column with the spaces after
        it: 10 (or the longest text and 2) when the table fits; the longest text and 2, then 1,
        when only that fits; ``None`` when no exercise column fits (the ids then cut so that the
        name and the total fit).
    """
    longest = max([len(text) for row in rows for text in row] + [1])
    exercises = max((len(row) for row in rows), default=0)
    for cell in (max(8, longest) + 2, longest + 2, longest + 1):
        if name_width + 2 + exercises * cell + total_width <= columns:
            return name_width, cell
    return min(name_width, max(10, columns - 2 - total_width)), None


def _not_attempted(sub: SubmissionResult, functions: dict[tuple[str, str], str]) -> dict[str, list[Any]]:
    """Function name to [checks, points, exercise ids, why] of its not-attempted checks, in first-seen order.

    ``why`` is the job's words when the file does not define the function
    (``attention.py defines no function softmax``), else "" (it still raises
    ``NotImplementedError``).
    """
    todo: dict[str, list[Any]] = {}
    for ex in sub.exercises:
        for c in ex.checks:
            if c.status != "not_attempted":
                continue
            row = todo.setdefault(functions.get((ex.id, c.id), "") or "a function", [0, 0.0, [], ""])
            row[0] += 1
            row[1] += c.max_score
            if ex.id not in row[2]:
                row[2].append(ex.id)
            if " defines no function " in c.message:
                row[3] = c.message.removeprefix("not attempted: ")
    return todo


def _check_lines(
    sub: SubmissionResult, config: Any, functions: dict[tuple[str, str], str], write: Callable[[str], None]
) -> None:
    """Per exercise its points; under one that did not pass all: its likely mistake (once), then its checks.

    Checks the likely mistake explains are one line each (the first clause of their message), but
    one of them, the one with the shortest call, shown whole (message, call, expected, got) as the
    example; any other failing check in full. The checks that passed are one line of ids.
    """
    from grader.reporting.feedback import exercise_mistake, mistake_example

    if config.option("quiet"):
        return
    said: dict[str, str] = {}  # misconception -> the exercise that said it first
    errors: dict[str, str] = {}  # an error's message -> the check that showed it whole first
    for ex in sub.exercises:
        marks = {c.status for c in ex.checks}
        if marks == {"passed"}:
            write(f"{display(ex.id)} {display(ex.title)}: {ex.score:g}/{ex.max_score:g}  PASS all {len(ex.checks)}")
            continue
        write(f"{display(ex.id)} {display(ex.title)}: {ex.score:g}/{ex.max_score:g}")
        shown = [
            c
            for c in ex.checks
            if c.status not in ("passed", "not_attempted") and not (sub.status == "error" and c.status == "error")
        ]  # not attempted: one line per function below; a file that cannot run is said once
        mistake = exercise_mistake(ex)
        example = mistake_example(ex, mistake)
        if mistake is not None:
            d = mistake.diagnosis
            first = said.setdefault(d.misconception, ex.id)
            what = f'{d.misconception} Reread "{d.section}".' if first == ex.id else f"the same as {display(first)}'s."
            write(
                _wrapped(
                    f"likely mistake ({how_many(mistake)}): {what}",
                    first="  ",
                    rest="    ",
                )
            )
        passed = [display(c.id) for c in ex.checks if c.status == "passed"]
        if passed:
            write(_wrapped(" ".join(passed), first=f"  {'PASS':7} ", rest=INDENT))
        for c in shown:
            mark = MARKS.get(c.status, c.status.upper())
            if mistake is not None and c.id in mistake.checks:
                write(_wrapped(f"{display(c.id)}: {headline(c.message)}", first=f"  {mark:7} ", rest=INDENT + "  "))
                if c is example:  # the evidence, once: the call, expected and got
                    for label, value in c.details:
                        if label in ("call", "expected", "got"):
                            for line in detail_lines(label, value, headline(c.message)):
                                write(line)
                continue
            if c.status == "error" and c.message in errors:  # the same exception again: said once
                write(
                    _wrapped(f"{display(c.id)}: the same error as {display(errors[c.message])}", first=f"  {mark:7} ")
                )
                continue
            if c.status == "error":
                errors[c.message] = f"{ex.id} {c.id}"
            write(f"  {mark:7} {display(c.id)}")
            for line in failure_lines(c, mistake):
                write(line)


def _printed(sub: SubmissionResult, write: Callable[[str], None]) -> None:
    """What the submission printed while the visible checks ran (``check`` runs no hidden call)."""
    text = display(sub.stdout, newlines=True).rstrip("\n")
    if not text.strip():
        return
    lines = text.split("\n")
    notes: list[str] = []  # the job's own notes at the end: the output was cut (its first 16 KiB kept), hidden calls
    while lines and _CUT_NOTE.match(lines[-1]):
        notes.insert(0, lines.pop())
    write("your prints (what the file printed while the visible checks ran):")
    for line in lines[:PRINTED_LINES]:
        write("  | " + _one_line(line, max(20, width() - 4)))
    cut = next((m for n in notes if (m := _CUT_NOTE.match(n)) and m.group(1)), None)
    more = len(lines) - PRINTED_LINES
    if cut is not None:  # the rest was never kept: its size is unknown, say so
        kept = f"{more:,} more lines of the first {cut.group(1)} kept, " if more > 0 else ""
        write(
            _wrapped(
                f"... {kept}and more not kept (the grader keeps the first {cut.group(1)} of what a file prints)",
                first="  | ",
                rest="  |   ",
            )
        )
    elif more > 0:
        write(f"  | ... and {more:,} more lines")
    for note in notes:
        if not _CUT_NOTE.match(note).group(1):  # type: ignore[union-attr]
            write("  | " + _one_line(note, max(20, width() - 4)))


def summary_check(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """The student-facing summary of ``grader check``.

    Per exercise a line with its points (``PASS all N`` when every check
    passes), then each check that was run: its mark, and for one that did
    not pass, the message, the details the message does not already state,
    the likely mistake and the hint. Checks of a function that still raises
    ``NotImplementedError`` are one line per function. Then what the file
    printed, and the totals. With several submissions (a folder), each
    starts with a header naming the student.
    """
    collected = config.stash.get(COLLECTED)
    functions = {(e.id, c.id): c.function for e in report.exercises for c in e.checks}
    many = len(report.submissions) > 1
    for sub in report.submissions:
        if many:
            write(f"== {shown_id(sub.id)} ({_one_line(sub.path, 80)}) ==")
        if sub.status == "error":
            write(f"ERROR {display(sub.path)}: {display(sub.error)}")
        passed = sum(1 for e in sub.exercises for c in e.checks if c.status == "passed")
        todo_n = sum(1 for e in sub.exercises for c in e.checks if c.status == "not_attempted")
        failed = sum(len(e.checks) for e in sub.exercises) - passed - todo_n
        _check_lines(sub, config, functions, write)
        if not config.option("quiet"):
            todo = _not_attempted(sub, functions)
            for function, (count, _points, exercises, why) in todo.items():
                word = "check" if count == 1 else "checks"
                write(
                    _wrapped(
                        f"{display(function)}: {count} {word} not attempted ({' '.join(map(display, exercises))})"
                        + (f": {display(why)}" if why else ""),
                        first="  TODO    ",
                        rest=INDENT,
                    )
                )
            if any(not why for *_, why in todo.values()):
                write(f"{INDENT}(not attempted: the function still raises NotImplementedError)")
            _printed(sub, write)
        hidden = collected.hidden_count if collected else 0
        write(f"{passed} passed, {failed} failed" + (f", {todo_n} not attempted" if todo_n else ""))
        write(
            _wrapped(
                f"visible checks: {sub.score:g}/{sub.max_score:g} points; {hidden} hidden checks run at grading",
                first="",
                rest="  ",
            )
        )
        if many:
            write("")


def summary_grade(report: GradingReport, config: Any, write: Callable[[str], None]) -> None:
    """The instructor's table of ``grader grade``, fitted to the terminal's width (`table_layout`)."""
    ids = [display(e.id) for e in report.exercises]
    shown = report.submissions if len(report.submissions) <= MAX_TABLE_ROWS else report.submissions[:MAX_TABLE_ROWS]
    cells = {id(s): [f"{e.score:g}/{e.max_score:g}" for e in s.exercises] for s in shown}
    totals = {id(s): f"{s.score:g}/{s.max_score:g}" + ("  (error)" if s.status == "error" else "") for s in shown}
    name_width, cell = table_layout(
        max([len(shown_id(s.id)) for s in report.submissions] + [10]),
        [ids, *cells.values()],
        max([len(t) for t in totals.values()] + [len("total")]),
        width(),
    )
    write(f"{config.pack.chapter}: {config.pack.title}")
    write(f"course: {display(str(config.pack.root))}")  # the folder found, as pytest prints its rootdir
    head = "".join(f"{i:<{cell}}" for i in ids) if cell else ""
    write(f"{'submission':{name_width}}  {head}total")
    for s in shown:
        row = "".join(f"{c:<{cell}}" for c in cells[id(s)]) if cell else ""
        write(f"{shown_id(s.id, name_width):{name_width}}  {row}{totals[id(s)]}")  # cut only where no column fits
    if len(shown) < len(report.submissions):
        write(f"... and {len(report.submissions) - len(shown)} more (all of them are in the reports)")
    if cell is None and ids:
        write("(too narrow for each exercise's score: see the reports)")
    errors = sum(1 for s in report.submissions if s.status == "error")
    n = len(report.submissions)
    write(f"graded {n} submission{'s' if n != 1 else ''} ({errors} could not run)")
    if config.out_dir is not None:
        write(f"reports: {display(str(config.out_dir / 'index.html'))}")


@hookimpl
def grader_terminal_summary(report: GradingReport, config: Config, write: Callable[[str], None]) -> None:
    """Print the summary of ``check`` or ``grade`` (between stop-commands markers in GitHub Actions)."""
    progress = config.stash.pop(_PROGRESS, None)
    if progress is not None:
        progress.close()
    if config.command not in ("check", "grade"):
        return

    colour = config.command == "check" and use_colour()

    def safe(line: str) -> None:
        line = display(line, newlines=True)  # line breaks here are the grader's (wrapped text)
        write(colourize(line) if colour else line)  # colour after display: only the grader's own marks

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
