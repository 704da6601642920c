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

import dataclasses
import os
import shutil
import stat
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import UsageError
from grader.fileio import scratch_prefix
from grader.intake.files import (
    NB_LOCK,
    NOTEBOOKS,
    folder_entries,
    make_submission,
    notebook_submission,
    remove_scratch,
    resolves_to,
    shown_path,
)
from grader.intake.naming import display_name, what_it_holds
from grader.markers import hookimpl
from grader.models import CallResult, Submission
from grader.packs import find_pack
from grader.safetext import display
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_TEMPDIRS = StashKey[list[Path]]()


def _child(child: Path, pack: Any) -> Submission | None:
    """The submission of one entry of a class folder, or None when it is not one."""
    raw = os.fsencode(child.name)
    name = display_name(child.name)
    try:
        info = os.lstat(child)
    except OSError as exc:
        sid = name.removesuffix(".py")
        return Submission(sid, shown_path(child), None, "", f"{name}: cannot read it ({exc.strerror})", raw_name=raw)
    if stat.S_ISLNK(info.st_mode):
        if child.suffix == ".py" or child.is_dir():
            sid = name.removesuffix(".py")
            return Submission(
                sid,
                shown_path(child),
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
    shown = shown_path(path)
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
    resolved = p.resolve() if skipped is not None else p
    for name in children:
        if name.startswith((".", "_")):
            continue
        if skipped is not None and resolves_to(p, name, skipped, resolved):
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
    from grader.intake.archive import ArchiveError, safe_extract  # here: zipfile only for an archive (issue 29)

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
def grader_locate_submissions(path: str, config: Config) -> list[Submission]:
    """Locate submissions on the filesystem: an LMS export by `grader.intake.lms.locate_export`, else
    with `locate` (zip archives: `locate_archive`)."""

    def scratch() -> Path:
        dest = Path(tempfile.mkdtemp(prefix=scratch_prefix("zip")))
        config.stash.setdefault(_TEMPDIRS, []).append(dest)
        return dest

    p = Path(path)
    if (path.lower().endswith(".zip") and p.is_file()) or p.is_dir():  # what an export can be: a single file is not
        from grader.intake.lms import locate_export

        exported = locate_export(path, config, scratch)
        if exported is not None:
            return exported
    if path.lower().endswith(".zip"):
        return locate_archive(path, config)
    return locate(path, skip=config.out_dir, pack=config.pack)


@hookimpl
def grader_unconfigure(config: Config) -> None:
    for folder in config.stash.pop(_TEMPDIRS, []):
        shutil.rmtree(folder, ignore_errors=True)
    remove_scratch()
    with NB_LOCK:
        NOTEBOOKS.clear()


def _relocated(result: CallResult, nb: Any) -> CallResult:
    return dataclasses.replace(result, where=nb.relocate(result.where), message=nb.relocate(result.message))


@hookimpl(wrapper=True, trylast=True)
def grader_run_calls(submission: Submission, calls: Any, config: Config) -> Any:
    """For a notebook, point every line number the runner brings back at the cell and the line in it.

    ``trylast``: the innermost wrapper, so timing and third-party wrappers see the relocated results.
    """
    outcome = yield
    with NB_LOCK:
        nb = NOTEBOOKS.get(submission.file or "")
    if nb is None or outcome is None:
        return outcome
    return dataclasses.replace(
        outcome,
        results=tuple(_relocated(r, nb) for r in outcome.results),
        import_error=nb.relocate(outcome.import_error),
        stdout=outcome.stdout,
        stderr=nb.relocate(outcome.stderr),
    )
