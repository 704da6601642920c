"""Built-in plugin: what classroom tools read from a student's CI run of ``grader check``.

``--points-notice`` (``check``, in GitHub Actions): the two notice
annotations GitHub Classroom's grading reporter emitted
(``classroom-resources/autograding-grading-reporter``,
``src/notify-classroom.js``), with the same titles. GitHub Classroom was
retired on 2026-08-28; the notices are kept for the platforms that still
read this format::

    ::notice title=Autograding complete::Points 26/30
    ::notice title=Autograding report::{"totalPoints":26,"maxPoints":30}

``--classroom50 FILE`` (``check``): Classroom 50's ``result.json`` v1
(``"schema": "classroom50/result/v1"``): one test per visible check with
integer scores, the totals, and the fields its runner documents, taken
from the environment it sets (``CLASSROOM``, ``ASSIGNMENT``,
``ASSIGNMENT_TYPE``, ``OWNER``/``USERNAME``, ``SUBMISSION_TAG``,
``COMMIT_URL``, ``RELEASE_URL``, ``REVIEW_URL``). ``datetime`` is the graded
commit's committer date, as the contract defines it; the author of the
commit sets that date, so the grader never uses it for lateness (late
policy belongs to ``grader grade`` with the LMS's own submission times).

Both count the visible checks only: the grade comes from ``grader grade``
with the hidden checks. Points are rounded to integers per check (the
contract's scores are integers); totals are the sums of the rounded
points.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import UsageError
from grader.fileio import output_file, write_atomic
from grader.markers import hookimpl
from grader.models import GradingReport
from grader.safetext import display, in_github_actions

if TYPE_CHECKING:
    from grader.config.core import Config

__all__ = ["SCHEMA", "classroom50_result", "points_notices"]

SCHEMA = "classroom50/result/v1"

RUNNER_FIELDS = {
    "classroom": "CLASSROOM",
    "assignment": "ASSIGNMENT",
    "assignment_type": "ASSIGNMENT_TYPE",
    "submission": "SUBMISSION_TAG",
    "commit": "COMMIT_URL",
    "release": "RELEASE_URL",
    "review": "REVIEW_URL",
}
"""result.json field -> the environment variable Classroom 50's runner sets for it."""


def _int(points: float) -> int:
    return round(points)


def points_notices(report: GradingReport) -> list[str]:
    """The two ``Points X/Y`` notice lines (GitHub Classroom's retired format) for a ``check`` report (integer totals)."""
    total = sum(_int(c.score) for s in report.submissions for e in s.exercises for c in e.checks)
    most = sum(_int(c.max_score) for s in report.submissions for e in s.exercises for c in e.checks)
    payload = json.dumps({"totalPoints": total, "maxPoints": most}, separators=(",", ":"))
    return [
        f"::notice title=Autograding complete::Points {total}/{most}",
        f"::notice title=Autograding report::{payload}",
    ]


def _commit_date(folder: Path) -> str:
    """The HEAD commit's committer date in UTC ISO 8601, or "" outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ct"], cwd=folder, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    if out.returncode != 0 or not out.stdout.strip().isdigit():
        return ""
    return datetime.fromtimestamp(int(out.stdout.strip()), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def classroom50_result(
    report: GradingReport, env: dict[str, str] | None = None, folder: Path | None = None
) -> dict[str, Any]:
    """Classroom 50's ``result.json`` v1 for a ``check`` report of one submission.

    Parameters
    ----------
    report : grader.models.GradingReport
    env : dict, optional
        The environment (default ``os.environ``): the runner's variables.
    folder : pathlib.Path, optional
        The student checkout, for the commit date (default: the current folder).

    Returns
    -------
    dict
        ``schema``, the runner's fields, ``datetime``, integer ``score`` and
        ``max-score``, and ``tests`` (``test-name``, ``passed``, integer
        ``score`` and ``max-score``, plus ``exercise``, ``status`` and
        ``message``).
    """
    env = dict(os.environ if env is None else env)
    tests = []
    for sub in report.submissions[:1]:
        for ex in sub.exercises:
            for c in ex.checks:
                test = {
                    "test-name": display(f"{ex.id} {c.id}"),
                    "passed": c.status == "passed",
                    "score": _int(c.score),
                    "max-score": _int(c.max_score),
                    "exercise": display(ex.id),
                    "status": c.status,
                }
                if c.status != "passed":
                    test["message"] = display(c.message)[:500]
                tests.append(test)
    result: dict[str, Any] = {"schema": SCHEMA}
    for key, var in RUNNER_FIELDS.items():
        if env.get(var):
            result[key] = env[var]
    owner = env.get("OWNER") or env.get("USERNAME")
    if owner:
        result["owner"] = owner
    when = _commit_date(folder or Path.cwd())
    if when:
        result["datetime"] = when  # the contract's field; never used for lateness (the author sets it)
    result["score"] = sum(t["score"] for t in tests)
    result["max-score"] = sum(t["max-score"] for t in tests)
    result["tests"] = tests
    return result


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command != "check":
        return
    group = parser.add_argument_group("classroom tools (check)")
    group.add_argument(
        "--points-notice",
        action="store_true",
        help="in GitHub Actions, print the 'Points X/Y' and JSON notices (the format of the retired GitHub "
        "Classroom, for platforms that read it; visible checks only)",
    )
    group.add_argument(
        "--classroom50",
        metavar="FILE",
        type=output_file,
        help="write Classroom 50's result.json v1 here (visible checks only)",
    )


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    if config.command != "check":
        return
    if config.option("points_notice") and in_github_actions():
        for line in points_notices(report):
            print(line, file=sys.stdout, flush=True)
    target = config.option("classroom50")
    if target:
        text = json.dumps(classroom50_result(report), indent=1, sort_keys=False) + "\n"
        try:
            write_atomic(Path(target), text)
        except OSError as exc:
            raise UsageError(f"--classroom50 {target}: cannot write the file ({exc.strerror})") from None
