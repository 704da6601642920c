"""Built-in plugin: the course policy (``--policy policy.yaml``): due date and late penalty.

The policy (`grader.term.POLICY_SCHEMA`; README, "Your term") gives the due
date, the penalty per day or per hour (a percent of the maximum score or
points), its cap, a grace period and late days per student. The submission
time comes only from a trusted source (``grader_submission_time``): the LMS's
export, or the grader's record of the file's arrival (``times: [lms,
arrival]``), never for a file from an LMS export (the grader first saw it
when the export was downloaded); a Canvas export's ``LATE`` mark without a
time counts ``late_flag_units``, the student's late days spent first, and a
Canvas student without one is on time. A student no trusted source can date
is charged nothing and named in one line of the terminal summary; a policy
that can date no submission of an LMS export is refused before grading. The
penalty is an adjustment with its reason, after the manual scores; results
keep the raw score (``raw_score``) and the final one; every penalty is
listed in the terminal summary.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from typing import TYPE_CHECKING, Any

from grader.errors import ConfigError
from grader.markers import hookimpl
from grader.models import Submission, SubmissionResult
from grader.safetext import display
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_POLICY = StashKey[Any]()
_UNDATED = StashKey[list[str]]()

SOURCES = {"lms": "time from the LMS export", "arrival": "time the grader first saw the file"}


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    parser.add_argument(
        "--policy", metavar="YAML", help="course policy: due date, late penalty per day or hour, cap, grace, late days"
    )


@hookimpl
def grader_configure(config: Config) -> None:
    if config.option("policy") and config.command != "check":
        from grader.term import load_policy  # here: a run without --policy never needs the term's module

        policy = load_policy(config.option("policy"))
        # late_days keyed by LMS user id: YAML reads an unquoted 340934 as a number, the id is text
        config.stash[_POLICY] = dataclasses.replace(policy, late_days={str(k): v for k, v in policy.late_days.items()})
        from grader.term.ledger import remember_term

        remember_term(config, config.stash[_POLICY])  # results.json names the assignment and the term's days


@hookimpl
def grader_collection_finish(submissions: Any, collected: Any, config: Config) -> None:
    """Warn of ``late_days.students`` naming no student of this run (a typo gives nobody their days)."""
    policy = config.stash.get(_POLICY)
    if policy is None or not policy.late_days:
        return
    unknown = sorted(set(policy.late_days) - {s.id for s in submissions})
    if unknown:
        print(
            f"grader: warning: --policy {display(policy.path)}: late_days.students: no submission in this run for "
            f"{display(', '.join(unknown[:10]))}{' ...' if len(unknown) > 10 else ''}; give ids as results.json lists them",
            file=sys.stderr,
        )


def submission_time(submission: Submission, config: Any) -> tuple[str, dt.datetime] | None:
    """The first trusted (source, time) the policy accepts, or None.

    ``arrival`` never dates a submission from an LMS export: the grader first
    saw the file when the export was downloaded, not when it was handed in.
    """
    policy = config.stash[_POLICY]
    offered: dict[str, str] = {}
    for answer in config.hooks.submission_time(submission=submission, config=config):
        for source, when in answer or ():
            offered.setdefault(source, when)
    for source in policy.times:
        if source == "arrival" and submission.lms.get("system"):
            continue
        if source in offered:
            when = dt.datetime.fromisoformat(offered[source])
            if when.tzinfo is None:  # an LMS time written without an offset: in the policy's time zone
                when = when.replace(tzinfo=policy.tz)
            return source, when.astimezone(dt.UTC)
    return None


def _late_days_key(policy: Any, result: SubmissionResult, submission: Submission) -> str:
    """Whose late days: the LMS user id when ``late_days.students`` names it, else the student id."""
    user = submission.lms.get("user", "")
    return user if user and user in policy.late_days else result.id


@hookimpl(trylast=True)
def grader_adjust_result(result: SubmissionResult, submission: Submission, config: Config) -> SubmissionResult | None:
    policy = config.stash.get(_POLICY)
    if policy is None or result.status == "error" and submission.file is None:
        return None
    if policy.percent is None and policy.points is None:
        return None
    found = submission_time(submission, config)
    system = submission.lms.get("system", "")
    # A LATE mark is the LMS's word: trusted with the LMS's times. A Canvas export without one says "on time".
    late_flag = "lms" in policy.times and submission.lms.get("late") == "1"
    if found is None and not late_flag:
        if not ("lms" in policy.times and system == "canvas" and submission.lms.get("user")):
            config.stash.setdefault(_UNDATED, []).append(result.id)
        return None
    source = (
        (f"{system.capitalize()} " if system else "") + SOURCES[found[0]] if found else f"{system.capitalize()} export"
    )
    from grader.term import apply_penalty, late_penalty

    penalty = late_penalty(
        policy,
        _late_days_key(policy, result, submission),
        result.max_score,
        result.score,
        found[1] if found else None,
        source,
        late_flag=late_flag,
    )
    from grader.term.ledger import late_record  # a term's late days: what this assignment charged

    return apply_penalty(
        dataclasses.replace(
            result, late=late_record(policy, _late_days_key(policy, result, submission), found[1] if found else None)
        ),
        penalty,
    )


def _datable(submission: Submission, policy: Any, config: Any) -> bool:
    """Whether any trusted source the policy accepts can date this submission."""
    lms = submission.lms
    if "lms" in policy.times and (lms.get("submitted_at") or (lms.get("system") == "canvas" and lms.get("user"))):
        return True
    has_book = bool(config.option("gradebook") or config.out_dir)
    return "arrival" in policy.times and not lms.get("system") and has_book


@hookimpl
def grader_grading_ready(config: Config) -> None:
    """Refuse a policy that can date none of an LMS export's submissions (before the output folder is made).

    Raises
    ------
    grader.errors.ConfigError
        In one line naming the policy file, ``times`` and the fix.
    """
    policy = config.stash.get(_POLICY)
    if policy is None:
        return
    from grader.intake.lms import LOCATED, shared_name  # here: only --policy needs them

    located = config.stash.get(LOCATED)
    if not located:
        return
    for key in policy.late_days:
        shared = shared_name(key, located)
        if shared:
            raise ConfigError(f"{policy.path}: late_days.students.{key}: {shared}")
    if policy.percent is None and policy.points is None:
        return
    gradable = [s for s in located if s.file is not None and not s.problem]
    if not gradable or any(_datable(s, policy, config) for s in gradable):
        return
    sources = {impl.plugin_name for impl in config.hooks.implementations("grader_submission_time")}
    if sources - {"lms", "gradebook"} or not all(s.lms.get("system") for s in gradable):
        return  # another plugin may date them; a class folder's undated students are named after grading
    systems = sorted({s.lms["system"] for s in gradable})
    why = f"a {' and '.join(s.capitalize() for s in systems)} export's file names carry no times" + (
        " and arrival never dates an LMS export" if "arrival" in policy.times else ""
    )
    fix = "give --lms-times with the LMS's times (Moodle's grading worksheet)"
    if "lms" not in policy.times:
        fix = "add lms to times and " + fix
    raise ConfigError(
        f"{policy.path}: times: [{', '.join(policy.times)}]: no trusted time for any submission of this run "
        f"({why}); {fix}, or remove penalty"
    )


@hookimpl
def grader_terminal_summary(report: Any, config: Config, write: Any) -> None:
    """Every late penalty, and the students no trusted time could date (nothing charged to them)."""
    policy = config.stash.get(_POLICY)
    if policy is None or config.command != "grade":
        return
    charged = [(s, a) for s in report.submissions for a in s.adjustments if a.kind == "late" and a.points < 0]
    if charged:
        write(display(f"late penalties ({policy.path}): {len(charged)}"))
        for s, a in charged:
            write(display(f"  {s.id}: {a.points:+g}: {a.reason}"))
    undated = sorted(set(config.stash.get(_UNDATED) or ()))
    if undated:
        shown = ", ".join(undated[:10]) + (f" and {len(undated) - 10} more" if len(undated) > 10 else "")
        write(
            display(
                f"late policy: no trusted time for {len(undated)} student(s), nothing charged: {shown}; "
                "give --lms-times with the LMS's times"
                + ("" if "arrival" in policy.times else ", or add arrival to times for files handed to the grader")
            )
        )
