"""A test plugin (``-p fixed_seconds``): every call took a fixed time, so the exports that show times are reproducible.

`grader.builtin.timing` answers ``grader_call_seconds`` with what the grader measured around each call;
this wrapper replaces each answer with ``(1 + i % 5)`` milliseconds for call ``i``, so ``junit.xml``,
``ctrf.json`` and the Gradescope files of two runs are the same bytes (with ``SOURCE_DATE_EPOCH`` set for
CTRF's ``stop``).
"""

from __future__ import annotations

from array import array
from collections.abc import Generator, Sequence
from typing import Any

from grader.markers import hookimpl


@hookimpl(wrapper=True)
def grader_call_seconds(submission_id: str, config: Any) -> Generator[None, Any, Any]:
    seconds: Sequence[float] | None = yield
    if seconds is None:
        return None
    return array("f", [0.001 * (1 + i % 5) for i in range(len(seconds))])
