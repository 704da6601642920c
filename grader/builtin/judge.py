"""Built-in plugin: decide a check from its call results.

Calls that did not return a value are judged here, the same way for every
kind: a stub is "not attempted", a timeout is "timeout", a crash, an
unexpected exception or a result that is not plain numbers is "error". Calls that returned are judged by the
check's kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grader.builtin.runner import explain_error
from grader.models import CallResult, Check, Prepared, Verdict
from grader.plugins import hookimpl


def _where(result: CallResult) -> str:
    return f" ({result.where})" if result.where else ""


def judge(check: Check, prepared: Prepared, results: Sequence[CallResult], kind: Any, context: Any) -> Verdict:
    """Judge one check; see the module docstring.

    Parameters
    ----------
    check : grader.models.Check
    prepared : grader.models.Prepared
    results : sequence of grader.models.CallResult
        One per call of ``prepared``.
    kind : check kind
        Asked when every call returned (or raised, for kinds that expect it).
    context : grader.builtin.checks.KindContext

    Returns
    -------
    grader.models.Verdict
    """
    fn = check.function
    for r in results:
        if r.status == "skipped":
            return Verdict("error", f"not run: {r.message}")
    for r in results:
        if r.status == "not_implemented":
            said = r.message if r.message and r.message != fn else f"{fn} still raises NotImplementedError"
            return Verdict("not_attempted", f"not attempted: {said}")
    for r in results:
        if r.status == "timeout":
            return Verdict("timeout", f"{fn} did not finish: {r.message}")
    for r in results:
        if r.status == "crashed":
            return Verdict("error", f"{fn} crashed: {r.message}")
    for r in results:
        if r.status == "bad_return":
            # "error", not "failed": the code broke the contract (return numbers), and the
            # message names no expected value, so students see it on hidden checks too.
            return Verdict("error", f"{fn} returned something the grader cannot read: {r.message}")
    if not getattr(kind, "expects_raise", False):
        for r in results:
            if r.status == "raised":
                return Verdict(
                    "error",
                    f"{fn} raised {r.error_type} on valid input{_where(r)}: {r.message}"
                    f"{explain_error(r.error_type, r.message)}",
                    (("exception", f"{r.error_type}: {r.message}"),),
                )
    return kind.judge(check, prepared, results, context)


@hookimpl(trylast=True)
def grader_judge_check(
    check: Check, prepared: Prepared, results: Sequence[CallResult], kind: Any, context: Any
) -> Verdict:
    """Judge with `judge`."""
    return judge(check, prepared, results, kind, context)
