"""One strict reader per kind of input file: YAML, JSON, CSV tables, installed entry points."""

from __future__ import annotations

import os
from collections.abc import Callable


def read_bounded(
    path: str | os.PathLike[str],
    max_bytes: int,
    fail: Callable[[str], Exception],
    *,
    folder: str,
    unreadable: Callable[[str], str],
    too_large: str,
) -> bytes:
    """The bytes of an instructor's input file, refused in one line when it is a folder, unreadable or too large.

    Parameters
    ----------
    path : str or os.PathLike
        The file (`grader.fileio.read_input` opens it: a FIFO or a device is unreadable).
    max_bytes : int
        Largest size read, in bytes.
    fail : callable
        Makes the exception raised from its one-line message (a `grader.errors.GraderError` class).
    folder : str
        The message when ``path`` is a folder.
    unreadable : callable
        The message when it cannot be read, from the reason (``strerror``).
    too_large : str
        The message when it holds more than ``max_bytes`` bytes.

    Returns
    -------
    bytes
        At most ``max_bytes`` bytes.

    Raises
    ------
    Exception
        What ``fail`` makes, for each refusal above.
    """
    from grader.fileio import read_input

    try:
        raw = read_input(path, max_bytes)
    except IsADirectoryError:
        raise fail(folder) from None
    except OSError as exc:
        raise fail(unreadable(exc.strerror or type(exc).__name__)) from None
    if len(raw) > max_bytes:
        raise fail(too_large)
    return raw
