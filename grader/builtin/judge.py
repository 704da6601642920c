"""Built-in plugin: decide a check from its call results.

Calls that did not return a value are judged here, the same way for every
kind: a stub is "not attempted", a timeout is "timeout", a crash, an
unexpected exception or a result that is not plain numbers is "error". Calls that returned are judged by the
check's kind.

Hidden stays hidden: everything the job sends is written by the student's
code, which during a hidden call holds the hidden arguments. So for a check
whose details the student may not see (``hidden``, or ``after_due_date`` /
``after_published`` not released with ``--after-due-date`` /
``--published``), the message names only the exception's type (a built-in
or numpy exception class; any other class is "an exception of its own
class") and its line, never the exception's message, e.g. ``softmax raised
TypeError (attention.py, line 12)``; a not-implemented result gets a fixed
sentence, an unreadable one the worker's own sentence only when it has that
form and names no class of the submission's own (`hidden_bad_return`); no
detail carries the exception text. Visible
checks keep the student's message.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Sequence
from typing import Any

from grader.builtin.runner import explain_error
from grader.models import CallResult, Check, Prepared, Verdict
from grader.plugins import hookimpl


def _where(result: CallResult) -> str:
    return f" ({result.where})" if result.where else ""


_WHERE = re.compile(r"[A-Za-z0-9_.-]{1,100}, line [0-9]{1,9}")

NUMPY_EXCEPTIONS = frozenset({"LinAlgError", "AxisError", "ComplexWarning", "RankWarning", "TooHardError"})
"""Exception classes of numpy a hidden check may name (their names say nothing of the inputs)."""

_BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)


def hidden_type(error_type: str) -> str:
    """An exception class name a hidden check may show: a built-in or numpy one, else a fixed phrase.

    Parameters
    ----------
    error_type : str
        The class name the job reported (the student's code chooses it, and a
        class of its own could be named after the hidden arguments).

    Returns
    -------
    str
        ``error_type`` when it names a built-in exception or one in
        `NUMPY_EXCEPTIONS`, else ``"an exception of its own class"``.
    """
    if error_type in _BUILTIN_EXCEPTIONS or error_type in NUMPY_EXCEPTIONS:
        return error_type
    return "an exception of its own class"


def hidden_where(result: CallResult) -> str:
    """`` (attention.py, line 12)`` when the job's ``where`` has exactly that form, else ``""``."""
    return f" ({result.where})" if _WHERE.fullmatch(result.where or "") else ""


_RETURN_TAIL = "; return numbers, lists, tuples or numpy arrays"
_BAD_RETURN_FIXED = frozenset({
    "the result is too large",
    "the result is nested too deeply",
    "the function returned None (is a return statement missing?)" + _RETURN_TAIL,
})
_BAD_RETURN_DTYPE = re.compile(r"the result holds a numpy (?:array of dtype [A-Za-z0-9<>|=]{1,16}; return numbers"
                               r"|[A-Za-z0-9<>|=]{1,16} scalar)")
_BAD_RETURN_TYPE = re.compile(r"the result holds a ([A-Za-z_][A-Za-z0-9_]{0,40})" + re.escape(_RETURN_TAIL))

PLAIN_TYPES = frozenset({
    "generator", "map", "filter", "zip", "range", "dict", "set", "frozenset", "str", "bytes", "bytearray",
    "complex", "function", "builtin_function_or_method", "method", "module", "type", "object", "NoneType",
    "dict_keys", "dict_values", "dict_items", "enumerate", "reversed", "memoryview", "slice", "ellipsis",
    "coroutine", "async_generator", "list_iterator", "tuple_iterator", "Decimal", "Fraction", "matrix",
    "MaskedArray", "float128", "longdouble", "clongdouble", "str_", "bytes_", "void", "datetime64", "timedelta64",
})
"""Type names a hidden check's "cannot read" message may name (they say nothing of the inputs)."""


def hidden_bad_return(message: str) -> str:
    """What a hidden check may say about a result the grader cannot read.

    The job wrote ``message``; it is kept only when it is one of the
    worker's own sentences with a dtype or a well-known type name in it
    (`PLAIN_TYPES`); a class of the submission's own is not named.

    Returns
    -------
    str
        ``": the result holds a generator; return numbers, ..."``-style
        text to append, or a fixed advice.
    """
    if message in _BAD_RETURN_FIXED or _BAD_RETURN_DTYPE.fullmatch(message):
        return f": {message}"
    m = _BAD_RETURN_TYPE.fullmatch(message)
    if m and m.group(1) in PLAIN_TYPES:
        return f": {message}"
    if m:
        return ": the result holds an object of a class of its own" + _RETURN_TAIL
    return " (return plain numbers, lists of them or numpy arrays)"


def is_released(check: Check, config: Any = None) -> bool:
    """Whether the student may read a check's details (the rule of `grader.builtin.scoring.is_shown`).

    Parameters
    ----------
    check : grader.models.Check
    config : grader.config.Config, optional
        Its ``--after-due-date`` and ``--published`` options release
        ``after_due_date`` and ``after_published`` checks; without a config
        only ``visible`` checks are released.
    """
    option = getattr(config, "option", None)
    after_due_date = bool(option("after_due_date", False)) if option else False
    published = bool(option("published", False)) if option else False
    return (
        check.visibility == "visible"
        or (check.visibility == "after_due_date" and after_due_date)
        or (check.visibility == "after_published" and published)
    )


def judge(
    check: Check,
    prepared: Prepared,
    results: Sequence[CallResult],
    kind: Any,
    context: Any,
    shown: bool | None = None,
) -> Verdict:
    """Judge one check; see the module docstring.

    Parameters
    ----------
    check : grader.models.Check
    prepared : grader.models.Prepared
    results : sequence of grader.models.CallResult
        One per call of ``prepared``.
    kind : check kind
        Asked when every call returned (or raised, for kinds that expect it).
    context : grader.kinds.KindContext
    shown : bool, optional
        Whether the student may read the check's details (see
        `is_released`); by default, only for a ``visible`` check. When
        False, no text the job sent reaches the message (see the module
        docstring).

    Returns
    -------
    grader.models.Verdict
    """
    fn = check.function
    if shown is None:
        shown = check.visibility == "visible"
    for r in results:
        if r.status == "skipped":
            return Verdict("error", f"not run: {r.message}")
    for r in results:
        if r.status == "not_implemented":
            if not shown:
                return Verdict("not_attempted", f"not attempted: {fn} still raises NotImplementedError or is not defined")
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
            # message names no expected value, so students see it on hidden checks too;
            # but the job wrote r.message, so a hidden check keeps only the worker's own sentences.
            if not shown:
                return Verdict("error", f"{fn} returned something the grader cannot read{hidden_bad_return(r.message)}")
            return Verdict("error", f"{fn} returned something the grader cannot read: {r.message}")
    if not getattr(kind, "expects_raise", False):
        for r in results:
            if r.status == "raised" and not shown:
                return Verdict(
                    "error", f"{fn} raised {hidden_type(r.error_type)}{hidden_where(r)}{explain_error(r.error_type, r.message)}"
                )
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
    check: Check, prepared: Prepared, results: Sequence[CallResult], kind: Any, context: Any, config: Any
) -> Verdict:
    """Judge with `judge`; what the student may read follows ``--after-due-date`` / ``--published``."""
    return judge(check, prepared, results, kind, context, shown=is_released(check, config))
