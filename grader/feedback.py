"""What a student may read about a check, shared by the exporters.

The HTML page decides in its template what a hidden check reveals; the
exporters (Gradescope, JUnit, GitHub annotations) follow the same rule
through these functions, so that no file says more than the page:

* a check whose details are shown (``visible``, or ``after_due_date`` /
  ``after_published`` graded with ``--after-due-date`` / ``--published``)
  gives its message, its details (call, expected, got...) and its hint;
* any other check gives its status and hint, and its message only when the
  check did not return a value to judge (not attempted, timed out, error):
  that message names the student's own exception or the time limit, never
  an input or an expected value.
"""

from __future__ import annotations

from pathlib import Path

from grader.models import CheckResult, SubmissionResult

__all__ = ["HIDDEN_NOTE", "STATUS_LABELS", "check_feedback", "shorten", "student_message", "submission_file"]

STATUS_LABELS = {
    "passed": "passed",
    "failed": "failed",
    "error": "error",
    "timeout": "timed out",
    "not_attempted": "not attempted",
}
"""Words for each check status, as a student reads them."""

HIDDEN_NOTE = "Hidden check: its inputs and expected values are not shown."

_MESSAGE_ALWAYS_SHOWN = ("not_attempted", "timeout", "error")


def student_message(check: CheckResult) -> str:
    """The sentence a student may read about why ``check`` did not pass.

    Parameters
    ----------
    check : grader.models.CheckResult

    Returns
    -------
    str
        Empty for a passed check; the verdict's message when the check is
        shown or did not return a value; otherwise `HIDDEN_NOTE`.
    """
    if check.status == "passed":
        return ""
    if check.shown or check.status in _MESSAGE_ALWAYS_SHOWN:
        return check.message
    return HIDDEN_NOTE


def shorten(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (None: no limit)."""
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + "…"


def check_feedback(check: CheckResult, details: bool = True, limit: int | None = None) -> str:
    """Multi-line feedback on one check, as plain text.

    Parameters
    ----------
    check : grader.models.CheckResult
    details : bool
        Include the labelled evidence (``call: ...``, ``expected: ...``) of a
        shown check. A hidden check has none (the scorer drops it).
    limit : int, optional
        Cut each detail value to this many characters.

    Returns
    -------
    str
        Empty for a passed check; else the message (see `student_message`),
        the details when asked, and ``Hint: ...``.
    """
    if check.status == "passed":
        return ""
    lines = [student_message(check)]
    if details and check.shown:
        lines += [f"{label}: {shorten(value, limit)}" for label, value in check.details]
    if check.hint:
        lines.append(f"Hint: {check.hint}")
    return "\n".join(line for line in lines if line)


def submission_file(sub: SubmissionResult, filename: str) -> Path:
    """The graded file of a submission: its path, or ``path/<filename>`` for a folder.

    Parameters
    ----------
    sub : grader.models.SubmissionResult
    filename : str
        The file looked for in a student folder (the course pack's submission file).

    Returns
    -------
    pathlib.Path
        The path, which need not exist (a folder without the file).
    """
    path = Path(sub.path)
    return path if path.suffix == ".py" else path / filename
