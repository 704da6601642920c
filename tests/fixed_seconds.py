"""A test plugin (``-p fixed_seconds``): every call took a fixed time, so the exports that show times are reproducible.

`grader.builtin.timing` records what the grader measured around each call; this wrapper, outside it,
replaces that record with ``(1 + i % 5)`` milliseconds for call ``i``, so ``junit.xml``, ``ctrf.json`` and
the Gradescope files of two runs are the same bytes (with ``SOURCE_DATE_EPOCH`` set for CTRF's ``stop``).
"""

from __future__ import annotations

from array import array
from collections.abc import Generator, Sequence
from typing import Any

from grader.execution.keys import CALL_SECONDS
from grader.markers import hookimpl


@hookimpl(wrapper=True)
def grader_run_calls(submission: Any, calls: Sequence[Any], config: Any) -> Generator[None, Any, Any]:
    outcome = yield
    record = config.stash.get(CALL_SECONDS)
    if record is not None and submission.id in record:
        record[submission.id] = array("f", [0.001 * (1 + i % 5) for i in range(len(record[submission.id]))])
    return outcome
