"""What a student may read about a check, as plain text, shared by the exporters.

The rule of what a check reveals is `grader.disclosure` (the HTML page's
template asks it too); these functions word it for Gradescope, JUnit and the
GitHub annotations, so that no file says more than the page: a shown check
gives its message, its details (call, expected, got...) and its hint; any
other check its status, hint and `grader.disclosure.student_message`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.disclosure import HIDDEN_NOTE, student_message
from grader.kinds import GATE_NOTE
from grader.models import CheckResult, Diagnosis, ExerciseResult, SubmissionResult

__all__ = [
    "HIDDEN_NOTE",
    "STATUS_LABELS",
    "ExerciseMistake",
    "adjustment_lines",
    "check_feedback",
    "check_mistake",
    "exercise_mistake",
    "headline",
    "mistake_example",
    "submission_feedback",
    "not_attempted",
    "hint_for",
    "how_many",
    "shorten",
    "student_message",
    "submission_file",
]

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


@dataclass(frozen=True)
class ExerciseMistake:
    """The one likely mistake of an exercise: what a student reads once, above its failing checks.

    Attributes
    ----------
    diagnosis : grader.models.Diagnosis
        The catalogued mistake.
    checks : tuple of str
        The ids of the failing checks it explains (they fail the way it does).
    failing : int
        How many checks of the exercise did not pass.
    """

    diagnosis: Diagnosis
    checks: tuple[str, ...]
    failing: int


def how_many(mistake: ExerciseMistake) -> str:
    """Which failing checks the mistake explains, in words: "all 3 failing checks fail as it does"."""
    n = len(mistake.checks)
    if n == mistake.failing:
        return "the failing check fails as it does" if n == 1 else f"all {n} failing checks fail as it does"
    return f"{n} of {mistake.failing} failing checks fail as it does"


def check_mistake(check: CheckResult) -> Diagnosis | None:
    """The one likely mistake of a check: its diagnosis when it names exactly one misconception.

    Two different misconceptions fitting the same evidence say neither is the cause: none is shown.
    """
    if check.status == "passed" or len({d.misconception for d in check.diagnosis}) != 1:
        return None
    return check.diagnosis[0]


def exercise_mistake(ex: ExerciseResult) -> ExerciseMistake | None:
    """The mistake that explains most of an exercise's failing checks (one per exercise), or None.

    Each failing check's own diagnosis stays in the results (``CheckResult.diagnosis``); this is
    what the terminal and the page show once per exercise: the misconception named on the most
    failing checks (`check_mistake`), and which those are. None when no failing check names one,
    or when two misconceptions are named on as many checks (neither explains the failure alone).
    """
    failing = [c for c in ex.checks if c.status != "passed"]
    found: dict[str, tuple[Diagnosis, list[str]]] = {}
    for c in failing:
        d = check_mistake(c)
        if d is not None:
            found.setdefault(d.misconception, (d, []))[1].append(c.id)
    if not found:
        return None
    ranked = sorted(found.values(), key=lambda item: -len(item[1]))
    if len(ranked) > 1 and len(ranked[0][1]) == len(ranked[1][1]):
        return None
    diagnosis, checks = ranked[0]
    return ExerciseMistake(diagnosis, tuple(checks), len(failing))


def mistake_example(ex: ExerciseResult, mistake: ExerciseMistake | None) -> CheckResult | None:
    """The check shown whole among those ``mistake`` explains: the shown one with the shortest call (None: none).

    The others are one line each (`headline`): one call, expected and got is the evidence a student
    needs; the shortest call is the easiest to work by hand.
    """
    if mistake is None:
        return None
    explained = [c for c in ex.checks if c.id in mistake.checks and c.shown and c.status != "passed"]
    return min(explained, key=lambda c: len(dict(c.details).get("call", "")), default=None)


def not_attempted(checks: Sequence[CheckResult]) -> str:
    """One line for an exercise's not-attempted checks: the functions named, once each.

    E.g. ``"attention, softmax: still raise NotImplementedError (or are not defined)"``; the
    messages themselves when they name no function the grader's way (a plugin's words).
    """
    names: list[str] = []
    others: list[str] = []
    for c in checks:
        m = re.match(r"not attempted: (\w+) (still raises NotImplementedError|defines no function)", c.message)
        if m is None:
            if c.message not in others:
                others.append(c.message)
        elif m.group(1) not in names:
            names.append(m.group(1))
    said = (
        [
            f"{', '.join(names)}: still {'raise' if len(names) > 1 else 'raises'} NotImplementedError (or "
            f"{'are' if len(names) > 1 else 'is'} not defined)"
        ]
        if names
        else []
    )
    return "; ".join(said + others)


def headline(message: str) -> str:
    """The first clause of a check's message: what went wrong, without the tolerance asked or the gate's reason."""
    cut = len(message)
    for mark in ("; asked:", " (asked:", ", so "):
        at = message.find(mark)
        if 0 < at < cut:
            cut = at
    return message[:cut]


def hint_for(check: CheckResult, mistake: ExerciseMistake | None = None) -> str:
    """The hint a student reads under a check that did not pass, chosen by what failed ("" for none).

    Only a check that failed (returned a wrong result) gets one: under an error raised on valid
    input, a crash or a timeout, a hint about the formula would point away from the line that
    broke. None when the exercise's likely mistake explains the check (its misconception and chapter
    section say what to change; a hint written for another cause would contradict it), nor when a
    property check failed on its contract gate (its hint is about the property, e.g. "work on a
    copy", which the result never reached).
    """
    if check.status != "failed" or not check.hint:  # an error, a crash or a timeout: its message is the pointer
        return ""
    if mistake is not None and check.id in mistake.checks:
        return ""
    if check.message.endswith(GATE_NOTE):
        return ""
    return check.hint


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
        the details when asked, and ``Hint: ...`` (`hint_for`).
    """
    if check.status == "passed":
        return ""
    lines = [student_message(check)]
    if details and check.shown:
        lines += [f"{label}: {shorten(value, limit)}" for label, value in check.details]
    hint = hint_for(check)  # none under a property check its contract gate failed
    if hint:
        lines.append(f"Hint: {hint}")
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


def adjustment_lines(result: SubmissionResult) -> list[str]:
    """One line per adjustment, then the raw and final scores; [] without adjustments (every writer shows these)."""
    if not result.adjustments:
        return []
    lines = [
        f"{'Late penalty' if a.kind == 'late' else 'Manual score'}: {a.points:+g}: {a.reason}"
        + (f" (by {a.grader})" if a.grader else "")
        for a in result.adjustments
    ]
    raw = result.raw_score if result.raw_score is not None else result.score
    lines.append(f"Automatic score {raw:g}, final score {result.score:g} / {result.max_score:g}")
    return lines


def submission_feedback(result: SubmissionResult, chapter: str) -> str:
    """A short comment for the LMS: the final score, each exercise's, the adjustments (no hidden detail).

    ``chapter`` (the course pack's short name) heads the comment.
    """
    lines = [f"{chapter}: {result.score:g} / {result.max_score:g}"]
    lines += [f"{e.id} {e.title}: {e.score:g} / {e.max_score:g}" for e in result.exercises]
    if result.status == "error":
        lines.append(f"Your file could not be graded: {result.error}")
    lines += adjustment_lines(result)
    return "\n".join(lines)
