"""Built-in plugin: how long each submission's calls took, for the exporters.

The JSON results hold no timings (the same inputs give the same bytes), and
`grader.models.CheckResult` has none either. Gradescope's ``execution_time``
and JUnit's ``time`` attributes do want one, so this plugin wraps
``grader_run_calls`` (whichever runner answers) and keeps the seconds of
every call in ``config.stash[CALL_SECONDS]``, keyed by submission id
(read with `submission_seconds` and `check_seconds`). The
seconds are what the grader measured around each call (from sending it to
the job to reading its answer): without process start-up and import. A result taken
from the gradebook cache (``grader_cached_result``) ran no call here: its
time is unknown and counts as 0.
"""

from __future__ import annotations

from array import array
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

from grader.execution.keys import CALL_SECONDS
from grader.markers import hookimpl
from grader.models import Call, RunOutcome, Submission

if TYPE_CHECKING:
    from grader.config.core import Config


@hookimpl
def grader_configure(config: Config) -> None:
    """Create the record in the main thread (runners run in worker threads)."""
    config.stash[CALL_SECONDS] = {}


@hookimpl(wrapper=True, trylast=True)
def grader_run_calls(submission: Submission, calls: Sequence[Call], config: Config) -> Generator[None, Any, RunOutcome]:
    """Record the seconds of each call the runner reports; change nothing.

    Thread-safe: each submission id is written once, by one worker thread,
    into a dict created by `grader_configure`.
    """
    outcome = yield
    record = config.stash.get(CALL_SECONDS)
    if outcome is not None and record is not None:
        # 4 bytes a call, allocated to size (a list of floats takes 32, an array filled from a generator
        # over-allocates): a single float keeps a call's seconds to within a microsecond below 16 s,
        # far finer than the milliseconds the exports show (issue 16: 10,000 submissions keep 4.5 MB less).
        record[submission.id] = array("f", [max(float(r.seconds), 0.0) for r in outcome.results])
    return outcome
