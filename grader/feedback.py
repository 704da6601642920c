"""What a student may read about a check, as plain text, shared by the exporters.

The rule of what a check reveals is `grader.disclosure` (the HTML page's
template asks it too); these functions word it for Gradescope, JUnit and the
GitHub annotations, so that no file says more than the page: a shown check
gives its message, its details (call, expected, got...) and its hint; any
other check its status, hint and `grader.disclosure.student_message`.
"""

from __future__ import annotations

from pathlib import Path

from grader.disclosure import HIDDEN_NOTE, student_message
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
