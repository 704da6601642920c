"""Built-in plugin: manual scores (``--manual manual.csv``) merged into every output.

``manual.csv`` has a header row naming ``student``, ``check`` (or
``exercise``), ``points``, ``comment`` and ``grader``, then one row per
score a teaching assistant gave by hand::

    student,check,points,comment,grader
    alice,G14.02/zero-scores,1,"right idea, wrong axis: half credit",ta-lee
    bob,G14.05,4,"regraded after the dispute",prof

A row naming ``EXERCISE/CHECK`` overrides that check's points (the automatic
score is kept beside it, ``automatic_score``); a row naming ``EXERCISE``
overrides the exercise's points. Each override is an adjustment with its
reason, shown on every output (`grader.term.apply_manual`). The file is read
on every run and applied after the gradebook, so ``--regrade`` keeps every
manual score. Rows are checked against the specs before grading starts.

``student`` is the student's id or, for a Canvas or Moodle export, their
LMS user id (display names collide; user ids do not). In a run with an LMS
export, a row naming no student, or a display name two students share, is
refused before grading, in one line.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from grader.errors import ConfigError
from grader.markers import hookimpl
from grader.models import Submission, SubmissionResult
from grader.safetext import display
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_ROWS = StashKey[Any]()


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    parser.add_argument(
        "--manual",
        metavar="CSV",
        help="manual scores (student, check or exercise, points, comment, grader), merged into every "
        "output and kept by --regrade",
    )


@hookimpl
def grader_configure(config: Config) -> None:
    if config.option("manual") and config.command == "grade":
        from grader.term import read_manual  # here: a run without --manual never needs the term's module

        config.stash[_ROWS] = read_manual(config.option("manual"))


@hookimpl
def grader_collection_finish(submissions: Any, collected: Any, config: Config) -> None:
    """Refuse a row naming an exercise or check the specs lack, or worth more than it; warn of unknown students."""
    rows = config.stash.get(_ROWS)
    if not rows:
        return
    path = config.option("manual")
    by_id = {e.id: e for e in collected.exercises}
    for r in rows:
        ex_id, _, check_id = r.target.partition("/")
        if ex_id not in by_id:
            raise ConfigError(
                f"--manual {path}: line {r.line}: check: no exercise {ex_id!r}; give one of "
                f"{', '.join(by_id)} (or EXERCISE/CHECK)"
            )
        ex = by_id[ex_id]
        worth = ex.max_score
        if check_id:
            check = next((c for c in ex.checks if c.id == check_id), None)
            if check is None:
                raise ConfigError(
                    f"--manual {path}: line {r.line}: check: {ex_id} has no check {check_id!r}; give one "
                    f"of {', '.join(c.id for c in ex.checks)}"
                )
            worth = check.points
        if r.points > worth:
            raise ConfigError(
                f"--manual {path}: line {r.line}: points: {r.points:g} is more than {r.target} is worth "
                f"({worth:g}); give at most {worth:g}"
            )
    ids = {s.id for s in submissions} | {s.lms["user"] for s in submissions if s.lms.get("user")}
    unknown = sorted({r.student for r in rows} - ids)
    if unknown and not any(s.lms.get("system") for s in submissions):  # an LMS batch: refused before grading
        print(
            f"grader: warning: --manual {display(path)}: no submission in this run for {display(', '.join(unknown))}",
            file=sys.stderr,
        )


@hookimpl
def grader_grading_ready(config: Config) -> None:
    """Refuse, before the output folder is made, a row naming no one student of an LMS export.

    Raises
    ------
    grader.errors.ConfigError
        In one line naming the file, the line, the column and the fix.
    """
    rows = config.stash.get(_ROWS)
    if not rows:
        return
    from grader.intake.lms import LOCATED, student_problem  # here: only --manual needs them

    located = config.stash.get(LOCATED)
    if not located:
        return
    for r in rows:
        problem = student_problem(r.student, located)
        if problem:
            raise ConfigError(f"--manual {config.option('manual')}: line {r.line}: student: {problem}")


@hookimpl(tryfirst=True)
def grader_adjust_result(result: SubmissionResult, submission: Submission, config: Config) -> SubmissionResult | None:
    rows = config.stash.get(_ROWS)
    if not rows:
        return None
    from grader.term import apply_manual

    return apply_manual(result, rows, config.option("manual"))
