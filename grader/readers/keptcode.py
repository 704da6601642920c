"""The methods `dataclasses` writes, compiled once and kept between runs (issue 29).

`dataclasses` makes each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` by writing their source text and compiling it with ``exec``:
about 0.1 ms per method, some 300 methods on ``grader check``'s way to its first job (about a
tenth of its start). `install` makes `dataclasses` compile through a table of code objects kept in
the grader's cache folder (`grader.fileio.cache_dir`, ``code/``), one file per Python bytecode
version, under the exact source text: the same text compiles to the same code, so a class made
from a kept entry is the class ``exec`` would have made.

The file is read only if it is a regular file of this user's that no one else may write (it holds
code the grader runs, as Python's own ``.pyc`` files do), whose bytes match the CRC-32 written with
them (a byte changed on disk in a code object's bytecode crashed every run with a segmentation
fault; one in its structure raised `SystemError` from `marshal`), and only a table of text to code
objects is used from it; anything else, or a missing file, compiles every method as before. When a run
compiled a method the file did not hold, `save` writes the table with the run's methods added (up to
`MAX_KEPT`, past which only the run's own), best effort: a read-only cache folder compiles every time.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import marshal
import os
import sys
import zlib
from types import CodeType
from typing import Any

from grader.fileio import cache_dir, read_regular

__all__ = ["install", "save"]

MAX_BYTES = 4 << 20
"""The largest table read back (the grader's classes take about 200 KB)."""

MAX_KEPT = 4000
"""Methods a table holds at most: the run's own, and those of the runs before while they fit (another
command, another version of the grader sharing the cache folder)."""

_kept: dict[str, CodeType] = {}
"""The table read from the file: source text to code."""
_used: dict[str, CodeType] = {}
"""The methods this run compiled or took from `_kept`, by source text."""
_state = {"installed": False, "missed": False}
_HEADER = b"kept-code\n"
"""The file's first bytes, followed by the CRC-32 of the marshalled table (4 bytes, little-endian), then the table."""


def _path() -> str | None:
    folder = cache_dir()
    if folder is None:
        return None
    tag = f"{sys.implementation.cache_tag}-{importlib.util.MAGIC_NUMBER.hex()}"
    return os.path.join(folder, "code", f"dataclasses-2-{tag}.marshal")


def _read(path: str) -> dict[str, CodeType]:
    """The table in ``path``: {} unless it is this user's file, written by no one else, intact, holding text to code."""
    try:
        data = read_regular(path, MAX_BYTES, private=True)
    except OSError:
        return {}
    start = len(_HEADER) + 4
    if data[: len(_HEADER)] != _HEADER or int.from_bytes(data[len(_HEADER) : start], "little") != zlib.crc32(
        memoryview(data)[start:]
    ):
        return {}
    try:
        table = marshal.loads(memoryview(data)[start:])
    except Exception:  # noqa: BLE001 - marshal raises SystemError, MemoryError, ... on bytes it did not write
        return {}
    if type(table) is not dict or not all(type(k) is str and type(v) is CodeType for k, v in table.items()):
        return {}
    return table


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:  # noqa: A002 - exec's own names
    """``exec`` as `dataclasses` calls it, with the source text's kept code when there is one."""
    if type(source) is str:
        code = _kept.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)  # as exec compiles it there: no __future__
            _state["missed"] = True
        _used[source] = code
        source = code
    if globals is None:  # exec's default: the caller's globals, which were dataclasses' own
        globals = vars(dataclasses)  # noqa: A001
    exec(source, globals, locals)  # noqa: S102 - dataclasses' own call, on its own text


def install() -> None:
    """Make `dataclasses` compile its methods through the kept table (once per process)."""
    if _state["installed"] or not callable(getattr(dataclasses, "_create_fn", None)):
        return  # a Python whose dataclasses builds its methods otherwise: nothing changes
    _state["installed"] = True
    path = _path()
    if path is not None:
        _kept.update(_read(path))
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # its module global, before the builtin


def save() -> None:
    """Write the methods this run used, if it compiled one the table did not hold (best effort)."""
    path = _path()
    if not _state["missed"] or path is None:
        return
    _state["missed"] = False
    folder = os.path.dirname(path)
    temporary = f"{path}.{os.getpid()}.tmp"
    created = False
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        created = True
        with os.fdopen(fd, "wb") as fh:
            kept = {**_kept, **_used} if len(_kept) + len(_used) <= MAX_KEPT else _used
            table = marshal.dumps(kept)
            fh.write(_HEADER + zlib.crc32(table).to_bytes(4, "little") + table)
        os.replace(temporary, path)
    except (OSError, ValueError):
        if created:  # not a file of the same name another process (same pid, another namespace) is writing
            try:
                os.unlink(temporary)
            except OSError:
                pass
