"""Built-in plugin: GitHub Actions annotations and a job step summary.

Active only when ``GITHUB_ACTIONS=true`` (GitHub sets it in every job), for
any command; its main user is ``grader check`` (e.g. ``grader check attention.py``) in a student's
own repository. It then

* prints workflow commands (``::error file=attention.py,line=14,title=...::``)
  so that every check that did not pass shows on the student's file, on the
  line that raised or else on the ``def`` of the function the check calls;
  a function still raising ``NotImplementedError`` gets one ``::notice``
  instead of one error per check, and a file that cannot be imported gets
  one ``::error`` on the line at fault;
* appends a Markdown summary (a table of points per exercise and, for
  ``check``, every check that did not pass with its message and hint) to the
  file named by ``$GITHUB_STEP_SUMMARY``.

GitHub shows at most 10 annotations of each level per step, so no more are
printed; the summary lists everything. Detail values (a call with random
inputs) are cut to `DETAIL_LIMIT` characters. What a hidden check reveals follows
`grader.reporting.feedback`: its status and hint, never its inputs or expected
values. Student text is escaped for workflow commands as GitHub documents
(`grader.safetext.gh_data`, `grader.safetext.gh_property`: ``%``, CR, LF,
and ``:`` ``,`` in properties; control characters and escape sequences
removed first), and for Markdown (`grader.safetext.markdown_inline`), so
it can never start a workflow command or inject HTML, links or table cells.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.collected import COLLECTED
from grader.markers import hookimpl
from grader.models import Check, GradingReport, SubmissionResult
from grader.packs import find_pack
from grader.reporting.feedback import STATUS_LABELS, check_feedback, shorten, student_message, submission_file
from grader.safetext import display, gh_data, gh_property, in_github_actions, markdown_inline

if TYPE_CHECKING:
    from grader.config.core import Config

__all__ = ["annotations", "escape_data", "escape_property", "in_github_actions", "step_summary"]

MAX_PER_LEVEL = 10
"""GitHub keeps at most 10 error, 10 warning and 10 notice annotations per step."""

LEVEL = {"failed": "error", "error": "error", "timeout": "error"}

DETAIL_LIMIT = 300
"""Longest detail value (a call with random inputs can be long), in characters."""


def escape_data(text: str) -> str:
    """Escape the message of a workflow command (``%``, CR, LF); see `grader.safetext.gh_data`."""
    return gh_data(text)


def escape_property(text: str) -> str:
    """Escape a property value of a workflow command (also ``:`` and ``,``); see `grader.safetext.gh_property`."""
    return gh_property(text)


def _command(level: str, message: str, **props: Any) -> str:
    """One workflow command line; control characters go first, then GitHub's escaping."""
    shown = ",".join(
        f"{key}={gh_property(display(str(value)))}" for key, value in props.items() if value not in (None, "")
    )
    data = gh_data(display(message, newlines=True))
    return f"::{level} {shown}::{data}" if shown else f"::{level}::{data}"


def _relative(path: Path) -> str:
    """The path as GitHub wants it: relative to the workspace when inside it."""
    resolved = path.resolve()
    for root in (os.environ.get("GITHUB_WORKSPACE"), os.getcwd()):
        if root:
            try:
                return resolved.relative_to(Path(root).resolve()).as_posix()
            except ValueError:
                continue
    return path.as_posix()


def _def_lines(path: Path) -> dict[str, int]:
    """Line of each top-level ``def NAME(`` in the file (read as text, never run)."""
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    lines: dict[str, int] = {}
    for number, line in enumerate(source.splitlines(), start=1):
        m = re.match(r"def\s+([A-Za-z_]\w*)\s*\(", line)
        if m and m.group(1) not in lines:
            lines[m.group(1)] = number
    return lines


def _line_in(text: str, filename: str) -> int | None:
    """The line of ``(<filename>, line 12)`` in a message, if it names our file."""
    for m in re.finditer(r"\(([^(),]+), line (\d+)\)", text):
        if Path(m.group(1)).name == filename:
            return int(m.group(2))
    return None


def workflow_commands(report: GradingReport, pack: Any = None) -> list[str]:
    """The workflow commands for a session, at most `MAX_PER_LEVEL` per level.

    Parameters
    ----------
    report : grader.models.GradingReport
    pack : grader.packs.Pack, optional
        The course pack (its submission file); default: the installed one.

    Returns
    -------
    list of str
        ``::error ...`` and ``::notice ...`` lines.
    """
    pack = pack or find_pack()
    checks: dict[tuple[str, str], Check] = {(e.id, c.id): c for e in report.exercises for c in e.checks}
    out: list[tuple[str, str]] = []
    for sub in report.submissions:
        file = submission_file(sub, pack.submission)
        where = _relative(file)
        if sub.status == "error":
            title = f"{sub.id}: the file could not be graded"
            out.append(
                ("error", _command("error", sub.error, file=where, line=_line_in(sub.error, file.name), title=title))
            )
            continue
        defs = _def_lines(file)
        not_attempted: dict[str, int] = {}
        for ex in sub.exercises:
            for c in ex.checks:
                check = checks.get((ex.id, c.id))
                function = check.function if check else ""
                if c.status == "not_attempted":
                    not_attempted[function] = not_attempted.get(function, 0) + 1
                    continue
                level = LEVEL.get(c.status)
                if level is None:
                    continue
                line = _line_in(student_message(c), file.name) or defs.get(function)
                title = f"{ex.id} {c.id}: {STATUS_LABELS.get(c.status, c.status)} ({c.score:g}/{c.max_score:g} points)"
                feedback = check_feedback(c, limit=DETAIL_LIMIT)
                out.append((level, _command(level, feedback, file=where, line=line, title=title)))
        for function, count in not_attempted.items():
            name = function or "a function"
            checks_word = "check is" if count == 1 else "checks are"
            message = f"{name} still raises NotImplementedError: {count} {checks_word} not attempted yet."
            out.append(
                (
                    "notice",
                    _command(
                        "notice", message, file=where, line=defs.get(function), title=f"{name}: not attempted yet"
                    ),
                )
            )
    kept: list[str] = []
    per_level: dict[str, int] = {}
    for level, command in out:
        per_level[level] = per_level.get(level, 0) + 1
        if per_level[level] <= MAX_PER_LEVEL:
            kept.append(command)
    return kept


_md = markdown_inline
"""Student or spec text as inert inline Markdown (one line, no HTML, no links)."""


def _exercise_table(sub: SubmissionResult) -> list[str]:
    lines = ["| Exercise | Points | Checks passed |", "| --- | ---: | ---: |"]
    for e in sub.exercises:
        passed = sum(1 for c in e.checks if c.status == "passed")
        lines.append(f"| {_md(e.id)} {_md(e.title)} | {e.score:g} / {e.max_score:g} | {passed} / {len(e.checks)} |")
    return lines


def _check_summary(sub: SubmissionResult, hidden: int, pack: Any) -> list[str]:
    checks = [(e, c) for e in sub.exercises for c in e.checks]
    passed = sum(1 for _, c in checks if c.status == "passed")
    lines = [f"## {_md(pack.chapter)} checks: {_md(submission_file(sub, pack.submission).name)}", ""]
    if sub.status == "error":
        lines += [f"**The file could not be graded:** {_md(sub.error)}", ""]
    lines += [
        f"**{passed} passed, {len(checks) - passed} failed** · {sub.score:g} / {sub.max_score:g} points on these checks; "
        f"{hidden} hidden checks run at grading.",
        "",
        *_exercise_table(sub),
        "",
    ]
    failing = [(e, c) for e, c in checks if c.status != "passed"]
    if failing and sub.status != "error":
        lines += ["### Checks that did not pass", ""]
        for e, c in failing:
            lines.append(
                f"- **{_md(e.id)} {_md(c.id)}** ({STATUS_LABELS.get(c.status, c.status)}): {_md(student_message(c))}"
            )
            if c.shown and c.status != "not_attempted":
                lines += [
                    f"  - {_md(label)}: <code>{_md(shorten(value, DETAIL_LIMIT))}</code>" for label, value in c.details
                ]
            if c.hint:
                lines.append(f"  - Hint: {_md(c.hint)}")
        lines.append("")
    return lines


def _grade_summary(report: GradingReport, pack: Any) -> list[str]:
    ids = [e.id for e in report.exercises]
    lines = [
        f"## {_md(pack.chapter)} grades: {len(report.submissions)} submission{'' if len(report.submissions) == 1 else 's'}",
        "",
        "| Submission | " + " | ".join(_md(i) for i in ids) + " | Total | Status |",
        "| --- | " + " | ".join("---:" for _ in ids) + " | ---: | --- |",
    ]
    for s in report.submissions:
        scores = {e.id: f"{e.score:g}" for e in s.exercises}
        cells = " | ".join(scores.get(i, "") for i in ids)
        lines.append(f"| {_md(s.id)} | {cells} | {s.score:g} / {s.max_score:g} | {s.status} |")
    lines.append("")
    return lines


def step_summary(report: GradingReport, command: str, hidden: int = 0, pack: Any = None) -> str:
    """The Markdown step summary of a session.

    Parameters
    ----------
    report : grader.models.GradingReport
    command : str
        ``check`` gives each submission's checks in detail; ``grade`` and
        ``validate`` a table of points per submission.
    hidden : int
        Number of hidden checks not run by ``check``.
    pack : grader.packs.Pack, optional
        The course pack (its chapter's name, its submission file); default:
        the installed one.

    Returns
    -------
    str
        Markdown, ending in a newline.
    """
    pack = pack or find_pack()
    lines: list[str] = []
    if command == "check":
        for sub in report.submissions:
            lines += _check_summary(sub, hidden, pack)
    else:
        lines += _grade_summary(report, pack)
    return "\n".join(lines) + "\n"


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Print annotations and append the step summary, in GitHub Actions only."""
    if not in_github_actions():
        return
    for line in workflow_commands(report, config.pack):
        print(line, file=sys.stdout, flush=True)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        collected = config.stash.get(COLLECTED)
        hidden = collected.hidden_count if collected is not None else 0
        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(step_summary(report, config.command, hidden, config.pack))
        except OSError as exc:
            print(f"grader: warning: cannot append the step summary to {summary} ({exc.strerror})", file=sys.stderr)
