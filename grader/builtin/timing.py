"""Built-in plugin: how long each submission's calls took, for the exporters.

The JSON results hold no timings (the same inputs give the same bytes), and
`grader.models.CheckResult` has none either. Gradescope's ``execution_time``
and JUnit's ``time`` attributes do want one, so this plugin wraps
``grader_run_calls`` (whichever runner answers) and keeps the seconds of
every call in ``config.stash["timing"]``, keyed by submission id. The
seconds are what the child process measured around each call: the time the
student's code ran, without process start-up and import. A result taken
from the gradebook cache (``grader_cached_result``) ran no call here: its
time is unknown and counts as 0.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from grader.models import Call, RunOutcome, Submission
from grader.plugins import hookimpl

__all__ = ["check_seconds", "submission_seconds"]

STASH_KEY = "timing"


@hookimpl
def grader_configure(config: Any) -> None:
    """Create the record in the main thread (runners run in worker threads)."""
    config.stash[STASH_KEY] = {}


@hookimpl(wrapper=True, trylast=True)
def grader_run_calls(submission: Submission, calls: Sequence[Call], config: Any) -> Generator[None, Any, RunOutcome]:
    """Record the seconds of each call the runner reports; change nothing.

    Thread-safe: each submission id is written once, by one worker thread,
    into a dict created by `grader_configure`.
    """
    outcome = yield
    record = config.stash.get(STASH_KEY)
    if outcome is not None and record is not None:
        record[submission.id] = [max(float(r.seconds), 0.0) for r in outcome.results]
    return outcome


def submission_seconds(config: Any, sub_id: str) -> float:
    """Seconds the calls of one submission took, summed (0 when unknown).

    Parameters
    ----------
    config : grader.config.Config
    sub_id : str
        The submission's id.

    Returns
    -------
    float
        Rounded to milliseconds.
    """
    return round(sum(config.stash.get(STASH_KEY, {}).get(sub_id, ())), 3)


def check_seconds(config: Any, sub_id: str) -> dict[tuple[str, str], float]:
    """Seconds per check of one submission, keyed by (exercise id, check id).

    Each check owns the calls at its place in ``collected.slices`` (visible
    checks' calls are made first: see `grader.session.Collected.run_order`). Empty when the submission did
    not run or the counts do not match.

    Parameters
    ----------
    config : grader.config.Config
    sub_id : str

    Returns
    -------
    dict of (str, str) to float
    """
    seconds = config.stash.get(STASH_KEY, {}).get(sub_id)
    collected = config.stash.get("collected")
    if not seconds or collected is None:
        return {}
    if len(collected.calls) != len(seconds):
        return {}
    return {key: round(sum(seconds[where]), 3) for key, where in collected.slices.items()}
