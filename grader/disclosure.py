"""What a student may see: the one rule, for every page, file and terminal line.

Hidden means hidden: no hidden input, expected value or exception text of a hidden call reaches a
student. Every part of the grader that decides what to show asks this module:

* **While grading** (`secret_while_grading`): a check that is not ``visible`` has secret
  inputs; the submission's output is kept only up to its first such call (the runner cuts it).
* **When judging** (`is_released`, `hidden_type`, `hidden_where`, `hidden_bad_return`):
  everything a job sends is written by the student's code, which during a hidden call holds the
  hidden arguments. For a check whose details are not released, a verdict names only the
  exception's type (a built-in or numpy class; any other class is "an exception of its own
  class") and its line, never the exception's message, and only the worker's own sentences
  about an unreadable result.
* **When scoring** (`is_shown`): a check's description, call, expected and got values are kept
  only for a check the student may see: ``visible``, or ``after_due_date`` / ``after_published``
  graded with ``--after-due-date`` / ``--published``.
* **When writing** (`student_message`, `message_shown`): a check that is not shown gives its
  status and hint, and its message only when the check did not return a value to judge (not
  attempted, timed out, error): that message names the student's own exception or the time
  limit, never an input or an expected value. The HTML page, Gradescope, JUnit and the GitHub
  annotations all follow it, so no file says more than the page.
"""

from __future__ import annotations

import builtins
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.models import CallResult, Check, CheckResult

__all__ = [
    "HIDDEN_NOTE",
    "MESSAGE_ALWAYS_SHOWN",
    "NUMPY_EXCEPTIONS",
    "PLAIN_TYPES",
    "hidden_bad_return",
    "hidden_type",
    "hidden_where",
    "is_public",
    "is_released",
    "is_shown",
    "message_shown",
    "secret_while_grading",
    "student_message",
]

HIDDEN_NOTE = "Hidden check: its inputs and expected values are not shown."
"""What a student reads instead of the message of a check that is not shown."""

MESSAGE_ALWAYS_SHOWN = ("not_attempted", "timeout", "error")
"""Statuses whose message a student reads on every check (it names no input or expected value)."""


def is_public(check: Check) -> bool:
    """Whether a check's inputs and expected values may be published: only a ``visible`` check's.

    The public checks (``grader publish``, the student package), ``grader check`` and a student's
    CI hold and run these only.
    """
    return check.visibility == "visible"


def secret_while_grading(check: Check) -> bool:
    """Whether a check's inputs are secret while grading (anything not `is_public`)."""
    return not is_public(check)


def is_shown(visibility: str, after_due_date: bool = False, published: bool = False) -> bool:
    """Whether a student may see a check's call, expected and got values.

    Parameters
    ----------
    visibility : str
        ``visible``, ``hidden``, ``after_due_date`` or ``after_published``.
    after_due_date, published : bool
        Whether the due date has passed / grades are published.
    """
    return (
        visibility == "visible"
        or (visibility == "after_due_date" and after_due_date)
        or (visibility == "after_published" and published)
    )


def is_released(check: Check, config: Any = None) -> bool:
    """Whether the student may read a check's details (`is_shown` with the run's options).

    Parameters
    ----------
    check : grader.models.Check
    config : grader.config.core.Config, optional
        Its ``--after-due-date`` and ``--published`` options release
        ``after_due_date`` and ``after_published`` checks; without a config
        only ``visible`` checks are released.
    """
    option = getattr(config, "option", None)
    after_due_date = bool(option("after_due_date", False)) if option else False
    published = bool(option("published", False)) if option else False
    return is_shown(check.visibility, after_due_date, published)


def message_shown(check: CheckResult) -> bool:
    """Whether a student may read a check's message (shown, or it did not return a value to judge)."""
    return check.shown or check.status in MESSAGE_ALWAYS_SHOWN


def student_message(check: CheckResult) -> str:
    """The sentence a student may read about why ``check`` did not pass.

    Parameters
    ----------
    check : grader.models.CheckResult

    Returns
    -------
    str
        Empty for a passed check; the verdict's message when the check is
        shown or did not return a value; otherwise `HIDDEN_NOTE`.
    """
    if check.status == "passed":
        return ""
    if message_shown(check):
        return check.message
    return HIDDEN_NOTE


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
_BAD_RETURN_FIXED = frozenset(
    {
        "the result is too large",
        "the result is nested too deeply",
        "the function returned None (is a return statement missing?)" + _RETURN_TAIL,
    }
)
_BAD_RETURN_DTYPE = re.compile(
    r"the result holds a numpy (?:array of dtype [A-Za-z0-9<>|=]{1,16}; return numbers"
    r"|[A-Za-z0-9<>|=]{1,16} scalar)"
)
_BAD_RETURN_TYPE = re.compile(r"the result holds a ([A-Za-z_][A-Za-z0-9_]{0,40})" + re.escape(_RETURN_TAIL))

PLAIN_TYPES = frozenset(
    {
        "generator",
        "map",
        "filter",
        "zip",
        "range",
        "dict",
        "set",
        "frozenset",
        "str",
        "bytes",
        "bytearray",
        "complex",
        "function",
        "builtin_function_or_method",
        "method",
        "module",
        "type",
        "object",
        "NoneType",
        "dict_keys",
        "dict_values",
        "dict_items",
        "enumerate",
        "reversed",
        "memoryview",
        "slice",
        "ellipsis",
        "coroutine",
        "async_generator",
        "list_iterator",
        "tuple_iterator",
        "Decimal",
        "Fraction",
        "matrix",
        "MaskedArray",
        "float128",
        "longdouble",
        "clongdouble",
        "str_",
        "bytes_",
        "void",
        "datetime64",
        "timedelta64",
    }
)
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
