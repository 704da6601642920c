"""Built-in plugin: how long each submission's calls took, for the exporters.

The JSON results hold no timings (the same inputs give the same bytes), and
`grader.models.CheckResult` has none either. Gradescope's ``execution_time``
and JUnit's ``time`` attributes do want one, so this plugin wraps
``grader_run_calls`` (whichever runner answers) and keeps the seconds of
every call under its own stash key, keyed by submission id (a catalogue's
reference run is left out: its name is no student's), and answers
``grader_call_seconds`` from it (the writers sum it with
`grader.grading.timing.submission_seconds` and `check_seconds`). The
seconds are what the grader measured around each call (from sending it to
the job to reading its answer): without process start-up and import. A result taken
from the gradebook cache (``grader_cached_result``) ran no call here: its
time is unknown and counts as 0.
"""

from __future__ import annotations

from array import array
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING

from grader.markers import hookimpl
from grader.models import Call, RunOutcome, Submission
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_SECONDS = StashKey[dict[str, Sequence[float]]]()
"""The seconds of each call of each submission, by submission id (in ``Collected.calls`` order)."""


@hookimpl
def grader_configure(config: Config) -> None:
    """Create the record in the main thread (runners run in worker threads)."""
    config.stash[_SECONDS] = {}


@hookimpl(wrapper=True, trylast=True)
def grader_run_calls(
    submission: Submission, calls: Sequence[Call], config: Config
) -> Generator[None, RunOutcome | None, RunOutcome | None]:
    """Record the seconds of each call the runner reports; change nothing.

    Thread-safe: each submission id is written once, by one worker thread,
    into a dict created by `grader_configure`. A reference run (a catalogue
    entry, `grader.models.Submission.reference`) is not a student's: its
    seconds are kept nowhere (its name may be a student's id).
    """
    outcome = yield
    record = config.stash.get(_SECONDS)
    if outcome is not None and record is not None and not submission.reference:
        # 4 bytes a call, allocated to size (a list of floats takes 32, an array filled from a generator
        # over-allocates): a single float keeps a call's seconds to within a microsecond below 16 s,
        # far finer than the milliseconds the exports show (issue 16: 10,000 submissions keep 4.5 MB less).
        seconds = [r.seconds for r in outcome.results]
        if min(seconds, default=0.0) < 0.0:  # a clock that stepped back: no call took less than nothing
            seconds = [max(float(s), 0.0) for s in seconds]
        record[submission.id] = array("f", seconds)
    return outcome


@hookimpl(trylast=True)
def grader_call_seconds(submission_id: str, config: Config) -> Sequence[float] | None:
    """The seconds recorded for this submission's calls; None when none ran here (a cached result)."""
    record = config.stash.get(_SECONDS)
    return None if record is None else record.get(submission_id)
