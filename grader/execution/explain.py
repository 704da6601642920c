"""What a job's failure means, in a student's words: the sandbox's rules and its limits named."""

from __future__ import annotations

__all__ = ["SANDBOX_RULES", "explain_error"]


SANDBOX_RULES = (
    "the grader's sandbox does not allow this: while grading, your code may read only its own file, "
    "the standard library and numpy, and may not use the network, write outside its own folder, "
    "or start, stop or inspect other programs"
)
"""What the sandbox forbids, in a student's words (appended to errors it caused)."""


def explain_error(error_type: str, message: str) -> str:
    """Words to append to an exception a submission raised, when the sandbox or a limit caused it.

    Parameters
    ----------
    error_type, message : str
        The exception's class name and message, as the worker reported them.

    Returns
    -------
    str
        ``" (...)"``, words for a student, or ``""`` for an ordinary error.
    """
    if error_type == "PermissionError" or message.startswith(("[Errno 1]", "[Errno 13]")):
        return f" ({SANDBOX_RULES})"
    if message.startswith("[Errno 97]"):  # EAFNOSUPPORT: a network socket
        return f" (no network: {SANDBOX_RULES})"
    if error_type in ("ModuleNotFoundError", "ImportError"):
        return (
            " (while grading, only numpy and the standard library's common modules can be imported:"
            ' the student package\'s README lists them, under "What your file may import")'
        )
    if message.startswith(("[Errno 27]", "[Errno 28]")):  # EFBIG, ENOSPC
        return " (while grading, your code may write at most 64 MiB of files)"
    if error_type == "MemoryError":
        return " (your code asked for more memory than the grader allows)"
    if error_type == "SyntaxError" and "codec can't decode" in message:
        return " (save the file as UTF-8 text: it holds a character in another encoding)"
    return ""
