"""Built-in plugin: find the submissions behind a command-line PATH.

A PATH may be

* a Python file (the pack's submission file, e.g. ``attention.py``, or
  ``alice.py``): one submission, named after its folder when the file has
  the submission's name, else after the file;
* a folder holding the submission file: one submission named after the folder;
* a folder of student folders (and/or ``<student>.py`` files): one
  submission each, named after the folder or file, in sorted order;
* a ``.zip`` archive of such folders or files, as learning-management
  systems export them: extracted safely (`grader.intake.archive`) to a temporary
  folder, then read as a folder.

With ``--roster FILE`` (a CSV whose first row names an ``id`` column, see
`ROSTER_COLUMNS`), every student on the roster without a submission is graded
"error" ("no submission"), and ids not on the roster are reported.

A student folder without the submission file still becomes a submission, graded
"error" with the reason, so that no student silently disappears.

A notebook (the pack's notebook name, or ``<student>.ipynb`` in a class
folder, or a student folder holding that notebook and no submission file)
is read with nbformat, never run in a kernel: its code cells are joined
into a submission file in a scratch folder (`grader.intake.notebook`), which is
graded; IPython lines are left out with a note on stderr, and every line
number in what the runner brings back names the cell and the line in it
(a ``grader_run_calls`` wrapper).
"""

from __future__ import annotations

import atexit
import dataclasses
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

from grader.errors import UsageError
from grader.fileio import MAX_SOURCE_BYTES, scratch_prefix
from grader.intake.archive import ArchiveError, safe_extract
from grader.intake.naming import display_name, what_it_holds
from grader.markers import hookimpl
from grader.models import CallResult, Submission
from grader.packs import find_pack
from grader.safetext import display
from grader.stash import StashKey

_TEMPDIRS = StashKey[list[str]]()


_NOTEBOOKS: dict[str, Any] = {}
"""Scratch file of each converted notebook -> its `grader.intake.notebook.Notebook` (line map)."""
_NB_LOCK = threading.Lock()


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
}


def _shown(path: Path | str) -> str:
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


def make_submission(sid: str, path: Path, file: Path | None, raw_name: bytes = b"", pack: Any = None) -> Submission:
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
    pack : grader.packs.Pack, optional
        The course pack (its submission file name); default: the installed one.
    """
    pack = pack or find_pack()
    shown = _shown(path)

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
        return problem(f"{_shown(file)}: cannot read the file ({exc.strerror})")
    if stat.S_ISLNK(info.st_mode):  # it may point at the reference, or at another student's file
        return problem(f"{name} is a symbolic link; submit the file itself, not a link to it")
    if not stat.S_ISREG(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "a special file")
        return problem(f"{name} is not a regular file ({kind}); submit the file itself")
    digest = hashlib.sha256()
    size = 0
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            opened = os.fstat(fh.fileno())
            if not stat.S_ISREG(opened.st_mode):  # swapped after the lstat
                kind = _KINDS.get(stat.S_IFMT(opened.st_mode), "a special file")
                return problem(f"{name} is not a regular file ({kind}); submit the file itself")
            while chunk := fh.read(1 << 20):
                size += len(chunk)
                digest.update(chunk)
    except OSError as exc:
        return problem(f"{_shown(file)}: cannot read the file ({exc.strerror})")
    if size > MAX_SOURCE_BYTES:
        return problem(
            f"{name} is {size:,} bytes; the grader reads files of at most "
            f"{MAX_SOURCE_BYTES >> 20} MiB ({MAX_SOURCE_BYTES:,} bytes): leave data out of the file",
            digest.hexdigest(),
        )
    return Submission(sid, shown, str(file), digest.hexdigest(), raw_name=raw_name)


def notebook_submission(sid: str, path: Path, notebook: Path, raw_name: bytes = b"", pack: Any = None) -> Submission:
    """A notebook's submission: the notebook checked like a file, then its code cells as a scratch submission file.

    The scratch folder is removed when the process ends (``atexit``) or by
    ``grader_unconfigure``.
    """
    from grader.intake.notebook import NotebookError, convert

    pack = pack or find_pack()
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
    with _NB_LOCK:
        _NOTEBOOKS[str(target)] = nb
    return replace(sub, file=str(target), sha256=hashlib.sha256(data).hexdigest())


_scratch_folders: list[Path] = []


def _remove_scratch() -> None:
    while _scratch_folders:
        shutil.rmtree(_scratch_folders.pop(), ignore_errors=True)


atexit.register(_remove_scratch)


def _child(child: Path, pack: Any) -> Submission | None:
    """The submission of one entry of a class folder, or None when it is not one."""
    raw = os.fsencode(child.name)
    name = display_name(child.name)
    try:
        info = os.lstat(child)
    except OSError as exc:
        sid = name.removesuffix(".py")
        return Submission(sid, _shown(child), None, "", f"{name}: cannot read it ({exc.strerror})", raw_name=raw)
    if stat.S_ISLNK(info.st_mode):
        if child.suffix == ".py" or child.is_dir():
            sid = name.removesuffix(".py")
            return Submission(
                sid,
                _shown(child),
                None,
                "",
                f"{name} is a symbolic link; submit the folder or file itself, not a link to it",
                raw_name=raw,
            )
        return None
    if stat.S_ISDIR(info.st_mode):
        if not os.path.lexists(child / pack.submission) and os.path.lexists(child / pack.notebook):
            return notebook_submission(name, child, child / pack.notebook, raw, pack)
        return make_submission(name, child, child / pack.submission, raw, pack)
    if name.endswith(".py"):
        return make_submission(name[:-3], child, child, raw, pack)
    if name.endswith(".ipynb"):
        return notebook_submission(name[:-6], child, child, raw, pack)
    return None


def locate(path: str, skip: Path | None = None, pack: Any = None) -> list[Submission]:
    """Return the submissions behind one PATH (see the module docstring).

    A folder's entries are taken in the order of their names' bytes, so
    the same folder gives the same list whatever order the file system
    lists it in. An entry that cannot be read is that student's error.
    ``skip`` (the output folder, when it lies in a class folder) is never a
    student: ``grade CLASS --out CLASS/reports`` twice grades the same class.
    ``pack`` gives the submission's file name (default: the installed pack).

    Raises
    ------
    grader.errors.UsageError
        If PATH does not exist, or is a folder with nothing to grade.
    """
    pack = pack or find_pack()
    p = Path(path)
    shown = _shown(path)
    try:
        info = os.stat(p)
    except OSError:
        info = None
    if info is None or not os.path.lexists(p):
        raise UsageError(
            f"{shown}: no such file or folder; give an {pack.submission}, a student folder or a folder of them"
        )
    if not stat.S_ISDIR(info.st_mode):
        if p.suffix == ".ipynb":
            folder = p.resolve().parent.name if p.name == pack.notebook else p.name[:-6]
            return [notebook_submission(display_name(folder), p, p, os.fsencode(folder), pack)]
        if p.suffix != ".py":
            raise UsageError(
                f"{shown}: not a Python file; give an {pack.submission}, a student folder or a folder of them"
            )
        folder = p.resolve().parent.name if p.name == pack.submission else p.name
        sid = display_name(folder)
        return [make_submission(sid[:-3] if p.name != pack.submission else sid, p, p, os.fsencode(folder), pack)]
    if os.path.lexists(p / pack.submission):
        folder = p.resolve().name
        return [make_submission(display_name(folder), p, p / pack.submission, os.fsencode(folder), pack)]
    if os.path.lexists(p / pack.notebook):
        folder = p.resolve().name
        return [notebook_submission(display_name(folder), p, p / pack.notebook, os.fsencode(folder), pack)]
    found: list[Submission] = []
    try:
        children = sorted(os.listdir(p), key=os.fsencode)
    except OSError as exc:
        raise UsageError(f"{shown}: cannot list the folder ({exc.strerror})") from None
    skipped = skip.resolve() if skip is not None else None
    for name in children:
        if name.startswith((".", "_")):
            continue
        if skipped is not None and (p / name).resolve() == skipped:
            continue  # the grader's own output folder
        sub = _child(p / name, pack)
        if sub is not None:
            found.append(sub)
    if not found:
        raise UsageError(
            f"{shown}: holds no {pack.submission}, no student folders and no .py files; "
            f"{what_it_holds(folder_entries(p), pack.submission, pack.notebook)}"
        )
    return found


def locate_archive(path: str, config: Any) -> list[Submission]:
    """Read a zip archive's students (`grader.intake.archive.safe_extract`) into a temporary folder.

    Each student's problems with the archive (too many files, the file
    twice, a link, a special or oversized file) are that student's error.

    Raises
    ------
    grader.errors.UsageError
        If the archive is unusable as a whole (see `grader.intake.archive.safe_extract`).
    """
    pack = config.pack
    if not Path(path).is_file():
        raise UsageError(
            f"{path}: no such file or folder; give an {pack.submission}, a student folder or a folder of them"
        )
    dest = Path(tempfile.mkdtemp(prefix=scratch_prefix("zip")))
    config.stash.setdefault(_TEMPDIRS, []).append(dest)
    try:
        extracted = safe_extract(Path(path), dest, pack.submission, pack.notebook)
    except ArchiveError as exc:
        raise UsageError(f"{exc}; export the submissions again") from None
    for problem in extracted.skipped:
        print(f"grader: warning: {display(str(path))}: skipped {display(problem)}", file=sys.stderr)
    if not extracted.students:
        raise UsageError(f"{path}: holds no {pack.submission}, no student folders and no .py files")
    found = []
    for student in extracted.students:
        sid = student.name.rsplit(".", 1)[0] if student.is_file else student.name
        shown = f"{path}:{student.name}"
        raw = student.name.encode("utf-8", "surrogatepass")
        if student.problem:
            found.append(Submission(sid, shown, None, "", student.problem, raw_name=raw))
        elif student.file is None:
            found.append(
                Submission(
                    sid,
                    shown,
                    None,
                    "",
                    f"no {pack.submission} in {shown}: {what_it_holds(student.holds, pack.submission, pack.notebook)}; "
                    f"the student folder must hold {pack.submission}",
                    raw_name=raw,
                )
            )
        else:
            if student.file.name == pack.notebook:  # a notebook goes through the zip like a .py file
                sub = notebook_submission(sid, student.file.parent, student.file, raw, pack)
            else:
                sub = make_submission(sid, student.file.parent, student.file, raw, pack)
            found.append(replace(sub, path=shown, problem=sub.problem.replace(str(student.file.parent), shown)))
    return found


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    parser.add_argument(
        "--roster",
        metavar="CSV",
        help="class list (an 'id' column): students without a submission are graded 'error'; an id listed "
        "twice is refused",
    )
    parser.add_argument(
        "--roster-ignore-case",
        action="store_true",
        help="match roster ids to folder names without regard to case (Alice is alice)",
    )


@hookimpl(trylast=True)
def grader_locate_submissions(path: str, config: Any) -> list[Submission]:
    """Locate submissions on the filesystem: an LMS export by `grader.intake.lms.locate_export`, else
    with `locate` (zip archives: `locate_archive`)."""
    from grader.intake.lms import locate_export

    def scratch() -> Path:
        dest = Path(tempfile.mkdtemp(prefix=scratch_prefix("zip")))
        config.stash.setdefault(_TEMPDIRS, []).append(dest)
        return dest

    exported = locate_export(path, config, scratch)
    if exported is not None:
        return exported
    if path.lower().endswith(".zip"):
        return locate_archive(path, config)
    return locate(path, skip=config.out_dir, pack=config.pack)


@hookimpl
def grader_unconfigure(config: Any) -> None:
    for folder in config.stash.pop(_TEMPDIRS, []):
        shutil.rmtree(folder, ignore_errors=True)
    _remove_scratch()
    with _NB_LOCK:
        _NOTEBOOKS.clear()


def _relocated(result: CallResult, nb: Any) -> CallResult:
    return dataclasses.replace(result, where=nb.relocate(result.where), message=nb.relocate(result.message))


@hookimpl(wrapper=True, trylast=True)
def grader_run_calls(submission: Submission, calls: Any, config: Any) -> Any:
    """For a notebook, point every line number the runner brings back at the cell and the line in it.

    ``trylast``: the innermost wrapper, so timing and third-party wrappers see the relocated results.
    """
    outcome = yield
    with _NB_LOCK:
        nb = _NOTEBOOKS.get(submission.file or "")
    if nb is None or outcome is None:
        return outcome
    return dataclasses.replace(
        outcome,
        results=tuple(_relocated(r, nb) for r in outcome.results),
        import_error=nb.relocate(outcome.import_error),
        stdout=outcome.stdout,
        stderr=nb.relocate(outcome.stderr),
    )
