"""Built-in plugin: the course policy (``--policy policy.yaml``): due date and late penalty.

The policy (`grader.term.POLICY_SCHEMA`; README, "Your term") gives the due
date, the penalty per day or per hour (a percent of the maximum score or
points), its cap, a grace period and late days per student. The submission
time comes only from a trusted source (``grader_submission_time``): the LMS's
export, or the grader's record of the file's arrival (``times: [lms,
arrival]``); a Canvas export's ``LATE`` mark without a time charges
``late_flag_units``. The penalty is an adjustment with its reason, after the
manual scores; results keep the raw score (``raw_score``) and the final one.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

from grader.models import Submission, SubmissionResult
from grader.plugins import hookimpl
from grader.safetext import display
from grader.stash import StashKey
from grader.term import apply_penalty, late_penalty, load_policy

_POLICY = StashKey[Any]()

SOURCES = {"lms": "time from the LMS export", "arrival": "time the grader first saw the file"}


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    parser.add_argument(
        "--policy", metavar="YAML", help="course policy: due date, late penalty per day or hour, cap, grace, late days"
    )


@hookimpl
def grader_configure(config: Any) -> None:
    if config.option("policy") and config.command != "check":
        config.stash[_POLICY] = load_policy(config.option("policy"))


@hookimpl
def grader_collection_finish(submissions: Any, collected: Any, config: Any) -> None:
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
    """The first trusted (source, time) the policy accepts, or None."""
    policy = config.stash[_POLICY]
    offered: dict[str, str] = {}
    for answer in config.hook.grader_submission_time(submission=submission, config=config):
        for source, when in answer or ():
            offered.setdefault(source, when)
    for source in policy.times:
        if source in offered:
            when = dt.datetime.fromisoformat(offered[source])
            if when.tzinfo is None:  # an LMS time written without an offset: in the policy's time zone
                when = when.replace(tzinfo=policy.tz)
            return source, when.astimezone(dt.UTC)
    return None


@hookimpl(trylast=True)
def grader_adjust_result(result: SubmissionResult, submission: Submission, config: Any) -> SubmissionResult | None:
    policy = config.stash.get(_POLICY)
    if policy is None or result.status == "error" and submission.file is None:
        return None
    found = submission_time(submission, config)
    system = submission.lms.get("system", "")
    source = (f"{system.capitalize()} " if system else "") + SOURCES[found[0]] if found else system.capitalize()
    penalty = late_penalty(
        policy,
        result.id,
        result.max_score,
        result.score,
        found[1] if found else None,
        source,
        late_flag=submission.lms.get("late") == "1",
    )
    return apply_penalty(result, penalty)
