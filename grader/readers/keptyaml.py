"""YAML files read once per content: what `grader.readers.yamlfile.parse_yaml` returned, kept between runs.

``grader check`` with the pack's specs reads six YAML files each run; importing PyYAML and
parsing them is about a tenth of the command's CPU time (issue 29). The plain data a file
gave is kept in the grader's cache folder (`grader.fileio.cache_dir`, ``yaml/``) as
`marshal` data, under the SHA-256 of the file's bytes, the grader's version and the source of
`grader.readers.yamlfile` (its rules), and read back instead of parsing the same bytes again.

A file that is missing, too large, not parsed before, or whose kept entry is unreadable or holds
anything but plain data (dicts, lists, str, int, float, bool, None) is parsed by `parse_yaml`,
which raises exactly as it always has; a kept entry is written best effort (a read-only cache
folder only parses every time).
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import os
from pathlib import Path
from typing import Any

from grader._version import __version__
from grader.fileio import cache_dir, read_regular

__all__ = ["parse_yaml_kept"]

MAX_BYTES = 1 << 20
"""The largest file `grader.readers.yamlfile.parse_yaml` reads (its ``MAX_SPEC_BYTES``)."""

MAX_KEPT_BYTES = 8 << 20
"""The largest kept entry read back (a spec's plain data is a few times smaller than its text)."""

_PLAIN_LEAVES = (str, int, float, bool, type(None))


def parse_yaml_kept(path: str) -> Any:
    """`grader.readers.yamlfile.parse_yaml` of ``path``, from the cache when these bytes were parsed before.

    Parameters
    ----------
    path : str
        The file.

    Returns
    -------
    object
        Plain data (dicts, lists, str, int, float, bool, None).

    Raises
    ------
    grader.errors.SpecError
        As `grader.readers.yamlfile.parse_yaml` does.
    """
    folder = cache_dir()
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError:
        data = b""
    if folder is None or not data or len(data) > MAX_BYTES:
        return _parse(path)
    entry = folder / "yaml" / f"{hashlib.sha256(_salt() + data).hexdigest()}.marshal"
    try:
        kept = marshal.loads(read_regular(entry, MAX_KEPT_BYTES))  # a small regular file of this user's only
        if _plain(kept):
            return kept
    except Exception:  # noqa: BLE001, S110 - marshal raises SystemError, MemoryError, ... on a damaged entry
        pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _parse(path)  # its error, as parse_yaml words it
    from grader.readers.yamlfile import parse_yaml_text  # here: a file parsed before needs no PyYAML

    value = parse_yaml_text(text, path)  # the bytes the key names, not the file read again
    try:
        _keep(entry, marshal.dumps(value))
    except (OSError, ValueError):
        pass  # a cache folder that cannot be written: parsed every time
    return value


def _parse(path: str) -> Any:
    from grader.readers.yamlfile import parse_yaml

    return parse_yaml(path)


def _keep(entry: Path, data: bytes) -> None:
    """Write a kept entry whole (a temporary file renamed), or not at all."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    # A new file of this process's (never through a link someone left under its name), renamed whole.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, entry)
    finally:
        tmp.unlink(missing_ok=True)


@functools.cache
def _salt() -> bytes:
    """What a kept entry's key holds besides the file: the grader's version and the rules' source."""
    rules = Path(__file__).with_name("yamlfile.py")
    try:
        source = rules.read_bytes()
    except OSError:
        source = os.urandom(16)  # no source to name the rules by: nothing kept is ever found
    return f"grader-yaml-1\0{__version__}\0".encode() + hashlib.sha256(source).digest()


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is plain data, as a YAML file gives (no tuple, bytes, set or code object)."""
    if depth > 64:
        return False
    if isinstance(value, dict):
        return all(type(k) in _PLAIN_LEAVES and _plain(v, depth + 1) for k, v in value.items())
    if type(value) is list:
        return all(_plain(v, depth + 1) for v in value)
    return type(value) in _PLAIN_LEAVES
