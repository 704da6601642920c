"""Reading an instructor's JSON file, bounded: ``diff``'s results, ``check --public``, shard manifests.

`read_json` reads at most `MAX_JSON_BYTES` (or the caller's limit), refuses a file that is not
UTF-8 JSON, holds ``NaN``/``Infinity`` (not JSON), or nests deeper than `MAX_JSON_DEPTH`, each in
one line naming the file, what was found and the fix, raised as the caller's error class (a
`grader.errors.UsageError` for a file named on the command line, a `grader.errors.ConfigError`
for a pack's own). The depth is measured before parsing (one pass over the text, strings skipped),
so a deeply nested file never reaches the recursive parser.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from grader.errors import GraderError, UsageError
from grader.readers import read_bounded

__all__ = ["MAX_JSON_BYTES", "MAX_JSON_DEPTH", "json_depth", "read_json"]

MAX_JSON_BYTES = 256 << 20
"""Largest JSON file read by default, in bytes (256 MiB: a results.json of a very large class)."""

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects accepted (the grader's own files use at most 8)."""

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings skipped; no recursion).

    Parameters
    ----------
    text : str
        JSON text (not necessarily valid).

    Returns
    -------
    int
        0 for a scalar, 1 for ``[]`` or ``{}``, and so on.
    """
    depth = deepest = 0
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth = max(depth - 1, 0)
    return deepest


def read_json(
    path: str | os.PathLike[str],
    what: str,
    fix: str,
    error: type[GraderError] = UsageError,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
    nonfinite: bool = False,
) -> Any:
    """Read one JSON file strictly and within bounds.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    what : str
        How the message names the file, e.g. ``"--public public.json"`` or the path itself.
    fix : str
        What to do about a file that is not what was expected (ends every message).
    error : type of GraderError
        The exception raised (`grader.errors.UsageError`, exit 2, by default).
    max_bytes : int
        Largest size read, in bytes.
    max_depth : int
        Deepest nesting of arrays and objects.
    nonfinite : bool
        Accept ``NaN``, ``Infinity`` and ``-Infinity`` (Python's own JSON extension, which
        ``grader publish`` writes for non-finite expected values); refused by default.

    Returns
    -------
    object
        The data: dicts, lists, str, int, float (finite), bool, None.

    Raises
    ------
    GraderError
        Of class ``error``, in one line naming ``what``, the problem and ``fix``.
    """
    raw = read_bounded(
        path,
        max_bytes,
        error,
        folder=f"{what}: is a folder, not a JSON file; {fix}",
        unreadable=lambda why: f"{what}: cannot read the file ({why}); {fix}",
        too_large=f"{what}: larger than {max_bytes} bytes; not a file the grader wrote; {fix}",
    )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{what}: not UTF-8 text (byte {exc.start}); not a JSON file; {fix}") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise error(f"{what}: nested {depth} levels deep, more than the {max_depth} a grader file has; {fix}")

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text) if nonfinite else json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        problem = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc) or "too deep"
        raise error(f"{what}: not valid JSON{where}: {problem}; {fix}") from None
