"""Built-in plugin: decide a check from its call results (`grader.grading.judging.judge`).

Calls that did not return are judged the same way for every kind (a stub is
"not attempted", a timeout "timeout", a crash or an unexpected exception
"error"); calls that returned are judged by the check's kind. What the
student may read follows `grader.disclosure` and ``--after-due-date`` /
``--published``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from grader.disclosure import is_released
from grader.grading.judging import VerdictCache
from grader.markers import hookimpl
from grader.models import CallResult, Check, Prepared, Verdict

if TYPE_CHECKING:
    from grader.config.core import Config


@hookimpl(trylast=True)
def grader_judge_check(
    check: Check, prepared: Prepared, results: Sequence[CallResult], kind: Any, context: Any, config: Config
) -> Verdict:
    """Judge with `judge`; what the student may read follows ``--after-due-date`` / ``--published``.

    An answer already judged in this run (the same bytes from the job for
    the same check) gets its verdict again from `grader.grading.judging.VerdictCache`.
    """
    return VerdictCache.of(config.stash).judge(check, prepared, results, kind, context, is_released(check, config))
