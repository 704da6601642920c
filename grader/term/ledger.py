"""The term ledger (issue 27): one gradebook across a term's assignments, and one budget of late days.

``grader term A1/ A2/ A3/results.json --out term/`` reads each assignment's
results (a ``grade --out`` folder or its ``results.json``), in the order
given, and writes:

* ``term/ledger.json``: per student, each assignment's final score, the
  days it was late and the late days charged to it, the late days used
  and left of the term's budget, and the totals; per assignment, the days
  each student had left before it (``left_before``);
* ``term/gradebook.csv``: the CSV gradebook's format
  (`grader.builtin.csv_gradebook`), one column per assignment, with the
  late penalties and the late days in its ``adjustments`` column;
* ``term/canvas.csv`` / ``term/moodle.csv``: the LMS gradebook imports
  (`grader.builtin.lms`) of the term's total, for the students an LMS
  export named (column ``--canvas-assignment``, default ``Term total``).

The budget is a policy's ``late_days: {term: 5}`` (`grader.term`). Each
assignment's policy names the assignment (``assignment: A2``) and the
ledger (``late_days: {term: 5, ledger: term/ledger.json}``): its late
penalty then reads the days the ledger says the student has left before
that assignment (`term_allowances`), and its results record what it
charged (``late``: days late, late days used). The ledger replays the
charges in order from the budget and refuses results that were charged
from another balance (an assignment graded before the ledger knew the
earlier ones): every output agrees or none is written.

Bad input gets one line naming the file and the fix (exit 2): a results
file of another course, two assignments with the same id, a student
missing from one assignment (unless ``--missing zero``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.errors import ConfigError, UsageError
from grader.stash import StashKey

__all__ = [
    "Ledger",
    "build_ledger",
    "late_record",
    "ledger_json",
    "load_assignment",
    "remember_term",
    "results_about",
    "term_allowances",
]

LEDGER_FILE = "ledger.json"
GRADEBOOK_FILE = "gradebook.csv"

_ABOUT = StashKey[dict[str, Any]]()


# --- the grading side: the policy reads the ledger, the results record the charge ---------------


def term_allowances(policy_path: str, late_days: dict[str, Any], assignment: str) -> dict[str, Any]:
    """A policy's ``late_days`` with the term's budget replaced by what the ledger says is left.

    Parameters
    ----------
    policy_path : str
        The policy file (``ledger`` is relative to its folder).
    late_days : dict
        The policy's ``late_days``, with ``term`` (days per student for the
        term) and optionally ``ledger``.
    assignment : str
        The policy's ``assignment``: the days left *before* it are read
        (after the last recorded assignment when the ledger does not list it).

    Returns
    -------
    dict
        ``default`` the term's budget (for students the ledger does not
        know yet) and ``students`` the days each student has left.

    Raises
    ------
    grader.errors.ConfigError
        ``students`` given with ``term``; ``ledger`` without ``assignment``;
        the ledger unreadable, or of another budget.
    """
    budget = int(late_days["term"])
    if late_days.get("students"):
        raise ConfigError(
            f"{policy_path}: late_days: 'students' and 'term' together; with a term's budget the ledger "
            "gives each student's days: remove 'students'"
        )
    out: dict[str, Any] = {"default": budget, "students": {}, "term": budget}
    if not late_days.get("ledger"):
        return out
    if not assignment:
        raise ConfigError(
            f"{policy_path}: late_days.ledger without 'assignment'; add 'assignment: A2' (this assignment's id in "
            "the term) so the ledger gives the days left before it"
        )
    path = Path(policy_path).parent / str(late_days["ledger"])
    if not path.exists():  # the term's first assignment: no ledger yet, every student has the budget
        return out
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        kept = int(data["late_days"]["term"])
        order = [a["id"] for a in data["assignments"]]
        left_before = data["left_before"]
        left = {s["id"]: int(s["late_days_left"]) for s in data["students"]}
    except OSError as exc:
        raise ConfigError(f"{policy_path}: late_days.ledger: cannot read {path} ({exc.strerror})") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            f"{policy_path}: late_days.ledger: {path} is not a ledger; give the {LEDGER_FILE} 'grader term' wrote"
        ) from None
    if kept != budget:
        raise ConfigError(
            f"{policy_path}: late_days.term: {budget}, but the ledger {path} counts from {kept}; give the same term budget"
        )
    out["students"] = {k: int(v) for k, v in left_before[assignment].items()} if assignment in order else left
    return out


def late_record(policy: Any, student: str, submitted: dt.datetime | None) -> dict[str, int]:
    """What a term's policy charged one submission: ``{"days": late days, "used": charged}``.

    Parameters
    ----------
    policy : grader.term.Policy
    student : str
    submitted : datetime or None
        The trusted submission time (None: unknown, nothing recorded).

    Returns
    -------
    dict of str to int
        Empty without a term's budget (``late_days.term``), without a time,
        or when on time (within the grace period). ``days`` is whole days
        late, rounded up, as `grader.term.late_penalty` counts them.
    """
    if policy.late_days_term is None or submitted is None:
        return {}
    delay = submitted - policy.due - policy.grace
    if delay <= dt.timedelta(0):
        return {}
    days = math.ceil(delay / dt.timedelta(days=1))
    allowed = policy.late_days.get(student, policy.late_days_default)
    return {"days": days, "used": min(allowed, days)}


def remember_term(config: Any, policy: Any) -> None:
    """Keep what ``results.json`` says of the term: the policy's assignment and budget (`results_about`)."""
    about: dict[str, Any] = {}
    if policy.assignment:
        about["assignment"] = policy.assignment
    if policy.late_days_term is not None:
        about["late_days"] = {"term": policy.late_days_term}
    config.stash[_ABOUT] = about


def results_about(config: Any) -> dict[str, Any]:
    """The keys ``results.json`` has after ``spec_hash``: ``course`` (the pack's id), and the term's.

    Returns
    -------
    dict
        ``course``; ``assignment`` and ``late_days`` when the policy names them.
    """
    try:
        course = {"course": config.pack.id}
    except Exception:  # noqa: BLE001 - no pack (a plugin's own run): the file says nothing of its course
        course = {}
    return {**course, **config.stash.get(_ABOUT, {})}


# --- the ledger -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    """One assignment's results, as read: its id, file, course, budget and submissions by student id."""

    id: str
    path: str
    course: str
    budget: int | None
    submissions: dict[str, dict[str, Any]]


@dataclass
class Ledger:
    """The term: assignments in order, students, each one's charges, and the days left before each assignment.

    Attributes
    ----------
    course : str
    budget : int
        Late days per student for the term.
    assignments : list of Assignment
    rows : dict
        Student id -> assignment id -> ``{score, max_score, raw_score, days_late, late_days_used, missing}``.
    left_before : dict
        Assignment id -> student id -> late days left before it.
    left : dict
        Student id -> late days left after the last assignment.
    """

    course: str
    budget: int
    assignments: list[Assignment]
    rows: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    lms: dict[str, dict[str, str]] = field(default_factory=dict)
    left_before: dict[str, dict[str, int]] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)


def load_assignment(source: str) -> Assignment:
    """Read one assignment's results: a ``grade --out`` folder or a ``results.json``.

    Raises
    ------
    grader.errors.UsageError
        If it cannot be read or is not a grader results file (one line, with the fix).
    """
    path = Path(source)
    if path.is_dir():
        path = path / "results.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        subs = {str(s["id"]): s for s in data["submissions"]}
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot read the results ({exc.strerror}); give a 'grader grade --out' folder or its results.json"
        ) from None
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{path}: not a grader results file; give the results.json of 'grader grade'") from None
    budget = (data.get("late_days") or {}).get("term")
    ident = str(data.get("assignment") or path.resolve().parent.name)
    return Assignment(ident, str(path), str(data.get("course", "")), budget, subs)


def build_ledger(assignments: Sequence[Assignment], missing: str = "error") -> Ledger:
    """Charge each student's late days from the term's budget, assignment by assignment, in order.

    Parameters
    ----------
    assignments : sequence of Assignment
        In the term's order.
    missing : {"error", "zero"}
        What a student absent from an assignment gets: an error, or 0 points.

    Returns
    -------
    Ledger

    Raises
    ------
    grader.errors.UsageError
        Another course's results, an assignment id twice, a student missing
        (with ``missing="error"``), budgets that differ, or results charged
        from another balance than the ledger's (graded before the ledger
        knew the earlier assignments).
    """
    first = assignments[0]
    seen: dict[str, str] = {}
    for a in assignments:
        if a.course and first.course and a.course != first.course:
            raise UsageError(
                f"{a.path}: results of course {a.course!r}, not {first.course!r} like {first.path}; "
                "leave it out: a term ledger holds one course's assignments"
            )
        if a.id in seen:
            raise UsageError(
                f"{a.path}: assignment id {a.id!r} again (also {seen[a.id]}); give each assignment's policy its own "
                "'assignment:' id and grade it again, or pass each assignment's results once"
            )
        seen[a.id] = a.path
    budgets = {a.budget for a in assignments if a.budget is not None}
    if len(budgets) > 1:
        odd = next(a for a in assignments if a.budget is not None and a.budget != assignments[0].budget)
        raise UsageError(
            f"{odd.path}: late_days.term {odd.budget}, but another assignment has {sorted(budgets)}; "
            "give every assignment's policy the same term budget and grade again"
        )
    budget = budgets.pop() if budgets else 0
    students: list[str] = []
    for a in assignments:
        students += [s for s in a.submissions if s not in students]
    if missing == "error":
        for a in assignments:
            for student in students:
                if student not in a.submissions:
                    other = next(b.path for b in assignments if student in b.submissions)
                    raise UsageError(
                        f"{a.path}: no result for student {student!r} (in {other}); grade their submission for "
                        f"{a.id} (an empty one scores 0), or pass --missing zero"
                    )
    ledger = Ledger(first.course, budget, list(assignments))
    left = dict.fromkeys(students, budget)
    for a in assignments:
        ledger.left_before[a.id] = dict(left)
        for student in students:
            sub = a.submissions.get(student)
            row: dict[str, Any]
            if sub is None:
                row = {"score": 0.0, "max_score": _max_of(a), "raw_score": 0.0, "days_late": 0, "late_days_used": 0}
                row["missing"] = True
            else:
                late = sub.get("late") or {}
                days = int(late.get("days", 0))
                used = min(left[student], days)
                if late and int(late.get("used", 0)) != used:
                    raise UsageError(
                        f"{a.path}: {student!r} was charged {late.get('used')} late day(s) for {days} day(s) late, "
                        f"but had {left[student]} left after the earlier assignments; grade {a.id} again with its "
                        f"policy's late_days.ledger naming this term's {LEDGER_FILE}"
                    )
                row = {
                    "score": float(sub["score"]),
                    "max_score": float(sub["max_score"]),
                    "raw_score": float(sub.get("raw_score", sub["score"])),
                    "days_late": days,
                    "late_days_used": used,
                    "adjustments": [x for x in sub.get("adjustments", ()) if x.get("kind") == "late"],
                }
                left[student] -= used
                if sub.get("lms"):  # the latest assignment's LMS identity, for the LMS files
                    ledger.lms[student] = {str(k): str(v) for k, v in sub["lms"].items()}
            ledger.rows.setdefault(student, {})[a.id] = row
    ledger.left = left
    return ledger


def _max_of(a: Assignment) -> float:
    return max((float(s["max_score"]) for s in a.submissions.values()), default=0.0)


def ledger_json(ledger: Ledger) -> str:
    """The ledger as JSON text (sorted keys, a student per line of its list).

    Returns
    -------
    str
        ``course``, ``late_days`` (``{"term": budget}``), ``assignments``
        (id, results file, maximum), ``students`` (id, per assignment
        score / max_score / raw_score / days_late / late_days_used, then
        late_days_used, late_days_left, total, max_score) and
        ``left_before`` (assignment -> student -> days left before it).
    """
    students = []
    for student, per in ledger.rows.items():
        used = sum(r["late_days_used"] for r in per.values())
        students.append(
            {
                "id": student,
                "assignments": {a: {k: v for k, v in r.items() if k != "adjustments"} for a, r in per.items()},
                "late_days_used": used,
                "late_days_left": ledger.left[student],
                "total": round(sum(r["score"] for r in per.values()), 6),
                "max_score": round(sum(r["max_score"] for r in per.values()), 6),
            }
        )
    data = {
        "course": ledger.course,
        "late_days": {"term": ledger.budget},
        "assignments": [{"id": a.id, "results": a.path, "max_score": _max_of(a)} for a in ledger.assignments],
        "students": students,
        "left_before": ledger.left_before,
    }
    return json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"


def term_report(ledger: Ledger) -> Any:
    """The ledger as a `grader.models.GradingReport` whose exercises are the assignments.

    So that the CSV gradebook's own writer (`grader.builtin.csv_gradebook`)
    writes the term's gradebook: a column per assignment, ``total`` the
    term's final score, ``raw_score`` its automatic one, and
    ``adjustments`` each late penalty (``A3: ...``) and the late days
    (``late days: 5 used of 5 (A1 3, A2 2, A3 0), 0 left``).
    """
    from grader.models import Adjustment, ExerciseResult, GradingReport, SubmissionResult

    subs = []
    for student, per in ledger.rows.items():
        exercises = tuple(ExerciseResult(a, a, "", r["score"], r["max_score"], ()) for a, r in per.items())
        adjustments = [
            Adjustment("late", float(x.get("points", 0.0)), f"{a}: {x.get('reason', '')}")
            for a, r in per.items()
            for x in r.get("adjustments", ())
        ]
        if ledger.budget:
            used = sum(r["late_days_used"] for r in per.values())
            spent = ", ".join(f"{a} {r['late_days_used']}" for a, r in per.items())
            adjustments.append(
                Adjustment(
                    "late", 0.0, f"late days: {used} used of {ledger.budget} ({spent}), {ledger.left[student]} left"
                )
            )
        missing = [a for a, r in per.items() if r.get("missing")]
        adjustments += [Adjustment("manual", 0.0, f"{a}: no result, counted 0") for a in missing]
        score = round(sum(r["score"] for r in per.values()), 6)
        raw = round(sum(r["raw_score"] for r in per.values()), 6)
        subs.append(
            SubmissionResult(
                student,
                "",
                "",
                "graded",
                score,
                round(sum(r["max_score"] for r in per.values()), 6),
                exercises,
                raw_score=raw if adjustments else None,
                adjustments=tuple(adjustments),
                lms=ledger.lms.get(student, {}),
            )
        )
    return GradingReport("", "", "term", tuple(subs))


# --- the subcommand ---------------------------------------------------------------------------
