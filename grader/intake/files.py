"""A student's file as a submission: examined without following links or blocking, hashed, refused with a reason.

Notebooks become a scratch submission file of their code cells (`notebook_submission`), removed when
the process ends. Every intake (folders, zips, LMS exports) builds its submissions here.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from grader.fileio import MAX_SOURCE_BYTES, scratch_prefix
from grader.intake.naming import display_name, what_it_holds
from grader.models import Submission
from grader.safetext import display

__all__ = [
    "FILE_KINDS",
    "NB_LOCK",
    "NOTEBOOKS",
    "folder_entries",
    "make_submission",
    "missing_file",
    "notebook_submission",
    "remove_scratch",
    "resolves_to",
    "shown_path",
]

NOTEBOOKS: dict[str, Any] = {}
"""Scratch file of each converted notebook -> its `grader.intake.notebook.Notebook` (line map)."""
NB_LOCK = threading.Lock()


FILE_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
}
"""What a path that is not a regular file is, in words, by its ``stat`` file type."""


def shown_path(path: Path | str) -> str:
    """A path as valid text (bytes that are not UTF-8 shown as U+FFFD)."""
    return display_name(str(path))


def folder_entries(folder: Path, limit: int = 200) -> list[tuple[str, bool]]:
    """A folder's entries two levels deep, as (relative path, is a folder), at most ``limit``; [] if unreadable."""
    found: list[tuple[str, bool]] = []
    try:
        top = sorted(os.scandir(folder), key=lambda e: os.fsencode(e.name))
    except OSError:
        return found
    for entry in top[:limit]:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        found.append((entry.name, is_dir))
        if is_dir and not entry.name.startswith("."):
            try:
                below = sorted(os.listdir(entry.path), key=os.fsencode)[:limit]
            except OSError:
                continue
            found += [(f"{entry.name}/{name}", os.path.isdir(os.path.join(entry.path, name))) for name in below]
    return found[:limit]


def missing_file(shown: str, folder: Path, pack: Any) -> str:
    """The problem of a student folder without the file: what it holds instead, and what to do."""
    return f"no {pack.submission} in {shown}: {what_it_holds(folder_entries(folder), pack.submission, pack.notebook)}; the student folder must hold {pack.submission}"


def resolves_to(folder: Path, name: str, target: Path, folder_resolved: Path) -> bool:
    """Whether ``(folder / name).resolve() == target``, without resolving every entry of a class folder.

    An entry that is no symbolic link resolves to its name in the resolved folder: one ``lstat``
    instead of one per component of the path; a link (or an entry that cannot be read) is resolved.

    Parameters
    ----------
    folder : pathlib.Path
        The folder listed.
    name : str
        An entry's name, as the listing gives it.
    target : pathlib.Path
        A resolved path (the output folder, say).
    folder_resolved : pathlib.Path
        ``folder.resolve()``.
    """
    path = folder / name
    try:
        if not stat.S_ISLNK(os.lstat(path).st_mode):
            return folder_resolved / name == target
    except OSError:
        pass
    return path.resolve() == target


def make_submission(sid: str, path: Path, file: Path | None, raw_name: bytes, pack: Any) -> Submission:
    """Build a `Submission`, hashing the file and noting why it cannot run.

    The file is examined with ``lstat`` before it is opened, and opened
    without following links and without blocking, so a FIFO, socket or
    device named like the submission file is reported as what it is, never read.

    Parameters
    ----------
    sid : str
        Student id (valid text: `grader.intake.naming.display_name` of the name).
    path : pathlib.Path
        What the instructor pointed at (folder or file).
    file : pathlib.Path or None
        The Python file to grade, if one exists.
    raw_name : bytes
        The folder's or file's name as the file system holds it (see
        `grader.models.Submission.raw_name`).
    pack : grader.packs.Pack
        The course (its submission file name).
    """
    shown = shown_path(path)

    def problem(text: str, digest: str = "") -> Submission:
        return Submission(sid, shown, None, digest, text, raw_name=raw_name)

    if file is None or not os.path.lexists(file):
        return problem(
            missing_file(shown, path, pack)
            if path.is_dir()
            else f"no {pack.submission} in {shown}: the student folder must hold {pack.submission}"
        )
    name = display_name(file.name)
    try:
        info = os.lstat(file)
    except FileNotFoundError:
        return problem(f"no {pack.submission} in {shown}: the student folder must hold {pack.submission}")
    except OSError as exc:
        return problem(f"{shown_path(file)}: cannot read the file ({exc.strerror})")
    if stat.S_ISLNK(info.st_mode):  # it may point at the reference, or at another student's file
        return problem(f"{name} is a symbolic link; submit the file itself, not a link to it")
    if not stat.S_ISREG(info.st_mode):
        kind = FILE_KINDS.get(stat.S_IFMT(info.st_mode), "a special file")
        return problem(f"{name} is not a regular file ({kind}); submit the file itself")
    digest = hashlib.sha256()
    size = 0
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            opened = os.fstat(fh.fileno())
            if not stat.S_ISREG(opened.st_mode):  # swapped after the lstat
                kind = FILE_KINDS.get(stat.S_IFMT(opened.st_mode), "a special file")
                return problem(f"{name} is not a regular file ({kind}); submit the file itself")
            # chunks of the file's size (at most 1 MiB): a read of 1 MiB allocates that much for an 8 KB file
            want = min(1 << 20, max(opened.st_size, 0) + 1)
            while chunk := fh.read(want):
                size += len(chunk)
                digest.update(chunk)
    except OSError as exc:
        return problem(f"{shown_path(file)}: cannot read the file ({exc.strerror})")
    if size > MAX_SOURCE_BYTES:
        return problem(
            f"{name} is {size:,} bytes; the grader reads files of at most "
            f"{MAX_SOURCE_BYTES >> 20} MiB ({MAX_SOURCE_BYTES:,} bytes): leave data out of the file",
            digest.hexdigest(),
        )
    return Submission(sid, shown, str(file), digest.hexdigest(), raw_name=raw_name)


def notebook_submission(sid: str, path: Path, notebook: Path, raw_name: bytes, pack: Any) -> Submission:
    """A notebook's submission: the notebook checked like a file, then its code cells as a scratch submission file.

    The scratch folder is removed when the process ends (``atexit``) or by
    ``grader_unconfigure``.
    """
    from grader.intake.notebook import NotebookError, convert

    sub = make_submission(sid, path, notebook, raw_name, pack)
    if sub.problem:
        return sub
    try:
        nb = convert(notebook, pack.submission)
    except NotebookError as exc:
        return replace(sub, file=None, problem=str(exc))
    for note in nb.notes:  # at most grader.intake.notebook.MAX_NOTES + 1 lines
        print(f"grader: note: {display(note)}", file=sys.stderr)
    data = nb.source.encode("utf-8", "surrogatepass")
    if len(data) > MAX_SOURCE_BYTES:
        return replace(
            sub,
            file=None,
            problem=f"{display(notebook.name)}'s code cells make {len(data):,} bytes of Python; the grader reads "
            f"at most {MAX_SOURCE_BYTES >> 20} MiB ({MAX_SOURCE_BYTES:,} bytes): leave data out of the notebook",
        )
    folder = Path(tempfile.mkdtemp(prefix=scratch_prefix("nb")))
    _scratch_folders.append(folder)
    target = folder / pack.submission
    target.write_bytes(data)
    with NB_LOCK:
        NOTEBOOKS[str(target)] = nb
    return replace(sub, file=str(target), sha256=hashlib.sha256(data).hexdigest())


_scratch_folders: list[Path] = []


def remove_scratch() -> None:
    while _scratch_folders:
        shutil.rmtree(_scratch_folders.pop(), ignore_errors=True)


atexit.register(remove_scratch)
