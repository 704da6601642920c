"""The installed entry points the grader reads, kept between runs until an installation changes.

The grader finds third-party plugins (group ``grader``) and course packs (group ``grader.packs``)
through `importlib.metadata`. Importing that module costs 15-30 ms (it brings ``email``,
``zipfile``, ``csv``...), a tenth of ``grader check attention.py``'s start (issue 16). So the
entry points of both groups are read with it once and kept in a small JSON file in the user's
cache folder (`grader.fileio.cache_dir`), under a key that changes whenever an installation on
``sys.path`` might have changed:

- every ``sys.path`` entry, and in each folder the name of every ``*.dist-info`` /
  ``*.egg-info`` folder (a package installed, upgraded or removed adds or removes one) with the
  modification and change times and the size of its ``entry_points.txt`` (a file edited in
  place; the change time moves even when a tool puts the modification time back); for an entry
  that is a file (a zip archive), its own times and size;
- the Python version.

What is read under a key with a time newer than a few seconds (`_SETTLE_NS`) is not kept, in the
file or in the process: a file system with coarse times could see a second change keep them all.
Nor is what is read while a finder on `sys.meta_path` other than the path finder lists
distributions (`importlib.metadata` asks it too, and nothing in the key would follow it).

A run whose key differs from the file's reads `importlib.metadata` again and rewrites the file; a
missing, unreadable or malformed file is the same as a different key (so is anything but a small
regular file: a FIFO or a link to ``/dev/zero`` in its place is not waited on or read), and a cache folder that
cannot be written only costs the next run the import. ``GRADER_CACHE_DIR=`` (empty) turns the
cache off.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import time
from typing import Any

from grader.fileio import cache_dir, read_regular, write_atomic

__all__ = ["GROUPS", "EntryPoint", "entry_points", "load"]

GROUPS = ("grader", "grader.packs")
"""The groups kept: the plugins' (`grader.config.plugins.ENTRY_POINT_GROUP`) and the packs'
(`grader.packs.ENTRY_POINT_GROUP`)."""

_FORMAT = 3
"""The cache file's layout version: a file of another version is read as a miss."""

_INFO_SUFFIXES = (".dist-info", ".egg-info")

_SETTLE_NS = 3 * 10**9
"""How old every time in the key must be for what was read under it to be kept: a file system may
keep times to the second (ext3, HFS+, some NFS servers) or two (FAT), so a change made within that
long of the last can leave every time equal (what git calls a racily clean index)."""

_MAX_BYTES = 4 << 20
"""The largest cache file read (a few kB for a few hundred distributions); a larger one is a miss."""

EntryPoint = tuple[str, str, str]
"""An entry point as kept: ``(name, value, distribution)``, e.g.
``("extras", "g14_extras", "g14-extras")``; ``value`` is ``module`` or ``module:attribute``."""

_READ: tuple[list[Any], dict[str, list[EntryPoint]]] | None = None
"""The last key and what was read under it, in this process."""


def entry_points(group: str) -> list[EntryPoint]:
    """The installed entry points of ``group``, in `importlib.metadata`'s order.

    Parameters
    ----------
    group : str
        One of `GROUPS`.

    Returns
    -------
    list of (str, str, str)
        ``(name, value, distribution)`` for each entry point of the group, the distributions
        in ``sys.path`` order, each distribution once (as `importlib.metadata.entry_points`).
        Read from the cache file when nothing installed has changed, and again in the same process
        only when ``sys.path`` or an installation on it has changed.

    Raises
    ------
    ValueError
        If ``group`` is not one of `GROUPS`.
    """
    global _READ
    if group not in GROUPS:
        raise ValueError(f"entry-point group {group!r} is not kept; use one of {', '.join(GROUPS)}")
    key, settled = _key()
    if settled and _READ is not None and _READ[0] == key:
        return list(_READ[1][group])
    groups = _kept_or_read(key, settled)
    _READ = (key, groups) if settled else None
    return list(groups[group])


def load(value: str) -> Any:
    """Import what an entry point's ``value`` names: ``module`` or ``module:attribute.path``.

    Parameters
    ----------
    value : str
        The entry point's value, as in ``entry_points.txt`` (extras in brackets are ignored, as
        `importlib.metadata.EntryPoint.load` does).

    Returns
    -------
    object
        The module, or the attribute found in it.

    Raises
    ------
    Exception
        Whatever importing the module raises (a plugin's own fault), or `AttributeError`.
    """
    module, _, attribute = value.split("[", 1)[0].partition(":")
    found: Any = importlib.import_module(module.strip())
    for part in filter(None, attribute.strip().split(".")):
        found = getattr(found, part)
    return found


def _key() -> tuple[list[Any], bool]:
    """What the kept entry points depend on (the module docstring lists it), and whether it is settled.

    Settled: every time in it is older than `_SETTLE_NS`; a later change could otherwise leave
    every time as it was, on a file system that keeps coarse times.
    """
    key: list[Any] = [_FORMAT, sys.version]
    newest = 0
    for entry in sys.path:
        try:
            folder = os.fspath(entry) or "."
        except TypeError:  # not a path: importlib.metadata skips it too
            key.append([repr(entry), None])
            continue
        if not isinstance(folder, str):  # bytes: importlib.metadata itself fails on it
            key.append([repr(entry), None])
            continue
        try:
            with os.scandir(folder) as listing:
                infos = sorted(item.name for item in listing if item.name.lower().endswith(_INFO_SUFFIXES))
        except NotADirectoryError:  # a file, such as a zip archive: its times stand for what it holds
            try:
                info = os.stat(folder)
            except OSError:
                key.append([folder, None])
                continue
            key.append([folder, *_stamps(info)])
            newest = max(newest, info.st_mtime_ns, info.st_ctime_ns)
            continue
        except (OSError, ValueError):  # not there (yet), unreadable, or no path at all (a NUL in it)
            key.append([folder, None])
            continue
        # A folder: the names of its distributions stand for it, not its times, which every file
        # made there moves (a student's folder, first on sys.path under python -m grader).
        key.append([folder, len(infos)])
        for name in infos:
            try:
                info = os.stat(os.path.join(folder, name, "entry_points.txt"))
            except OSError:
                key.append([name, None])
                continue
            key.append([name, *_stamps(info)])
            newest = max(newest, info.st_mtime_ns, info.st_ctime_ns)
    return key, newest < time.time_ns() - _SETTLE_NS and not _other_finders()


def _other_finders() -> bool:
    """Whether a finder on `sys.meta_path` besides the path finder lists distributions of its own.

    `importlib.metadata` asks each one; what such a finder lists (a test's distributions made in
    memory, a frozen application's) has no time in the key, so nothing read with one is kept.
    """
    from importlib.machinery import PathFinder

    return any(finder is not PathFinder and hasattr(finder, "find_distributions") for finder in sys.meta_path)


def _stamps(info: os.stat_result) -> list[int]:
    """A file's modification and change times and size: the change time (ctime) moves with any write.

    So a tool that puts back the modification time it found (``tar``, ``cp -p``, ``rsync -a``, an
    archive with fixed times, as reproducible wheels have) still changes the key.
    """
    return [info.st_mtime_ns, info.st_ctime_ns, info.st_size]


def _cache_file() -> str | None:
    """The cache file of this Python installation (`sys.prefix`), or None when caching is off."""
    folder = cache_dir()
    if folder is None:
        return None
    prefix = hashlib.sha256(sys.prefix.encode("utf-8", "surrogatepass")).hexdigest()
    return os.path.join(folder, f"entry-points-{prefix[:16]}.json")


def _kept_or_read(key: list[Any], settled: bool = True) -> dict[str, list[EntryPoint]]:
    """The cache file's entry points if its key is ``key``, else `_read` (and the file rewritten, if ``settled``)."""
    path = _cache_file() if settled else None
    if path is not None:
        try:
            kept = json.loads(read_regular(path, _MAX_BYTES))
            if kept["key"] == key:
                return _checked(kept["groups"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # missing, damaged, too deep: a miss
            pass
    groups = _read()
    if path is not None:
        try:
            write_atomic(path, json.dumps({"key": key, "groups": groups}))
        except OSError:  # an unwritable cache folder: the next run reads importlib.metadata again
            pass
    return groups


def _checked(groups: Any) -> dict[str, list[EntryPoint]]:
    """``groups`` as read from the file, every group present and every entry three strings.

    Raises
    ------
    ValueError
        If anything is missing or of another type (the file is then read as a miss).
    """
    if not isinstance(groups, dict) or set(groups) != set(GROUPS):
        raise ValueError("not the kept groups")
    checked: dict[str, list[EntryPoint]] = {}
    for group in GROUPS:
        rows = groups[group]
        if not isinstance(rows, list) or not all(
            isinstance(row, list) and len(row) == 3 and all(isinstance(part, str) for part in row) for row in rows
        ):
            raise ValueError(f"group {group}: not a list of [name, value, distribution]")
        checked[group] = [(name, value, dist) for name, value, dist in rows]
    return checked


def _read() -> dict[str, list[EntryPoint]]:
    """The entry points of `GROUPS`, read through `importlib.metadata`."""
    from importlib.metadata import entry_points as installed

    every = installed()  # one pass over the distributions for both groups
    groups: dict[str, list[EntryPoint]] = {}
    for group in GROUPS:
        groups[group] = [(ep.name, ep.value, ep.dist.name if ep.dist else "") for ep in every.select(group=group)]
    return groups
