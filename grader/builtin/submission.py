"""Built-in plugin: find the submissions behind a command-line PATH.

A PATH may be

* a Python file (``attention.py`` or ``alice.py``): one submission, named
  after its folder when the file is ``attention.py``, else after the file;
* a folder holding ``attention.py``: one submission named after the folder;
* a folder of student folders (and/or ``<student>.py`` files): one
  submission each, named after the folder or file, in sorted order;
* a ``.zip`` archive of such folders or files, as learning-management
  systems export them: extracted safely (`grader.archive`) to a temporary
  folder, then read as a folder.

With ``--roster FILE`` (a CSV whose first row names an ``id`` column, see
`ROSTER_COLUMNS`), every student on the roster without a submission is graded
"error" ("no submission"), and ids not on the roster are reported.

A student folder without ``attention.py`` still becomes a submission, graded
"error" with the reason, so that no student silently disappears.
"""

from __future__ import annotations

import csv
import hashlib
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from grader.archive import ArchiveError, safe_extract

from grader.errors import UsageError
from grader.fileio import scratch_prefix
from grader.models import Submission
from grader.plugins import hookimpl

FILENAME = "attention.py"
MAX_SOURCE_BYTES = 2 * 1024 * 1024
"""Largest submission file graded, in bytes (2 MiB)."""


def make_submission(sid: str, path: Path, file: Path | None) -> Submission:
    """Build a `Submission`, hashing the file and noting why it cannot run.

    Parameters
    ----------
    sid : str
        Student id.
    path : pathlib.Path
        What the instructor pointed at (folder or file).
    file : pathlib.Path or None
        The Python file to grade, if one exists.
    """
    if file is not None and file.is_symlink():  # it may point at the reference, or at another student's file
        return Submission(sid, str(path), None, "", f"{file.name} is a symbolic link; submit the file itself, not a link to it")
    if file is None or not file.is_file():
        return Submission(sid, str(path), None, "", f"no {FILENAME} in {path}: the student folder must hold {FILENAME}")
    try:
        data = file.read_bytes()
    except OSError as exc:
        return Submission(sid, str(path), None, "", f"{file}: cannot read the file ({exc.strerror})")
    digest = hashlib.sha256(data).hexdigest()
    if len(data) > MAX_SOURCE_BYTES:
        return Submission(sid, str(path), None, digest,
                          f"{file.name} is {len(data):,} bytes; the grader reads files of at most "
                          f"{MAX_SOURCE_BYTES >> 20} MiB ({MAX_SOURCE_BYTES:,} bytes): leave data out of the file")
    return Submission(sid, str(path), str(file), digest)


def locate(path: str) -> list[Submission]:
    """Return the submissions behind one PATH (see the module docstring).

    Raises
    ------
    grader.errors.UsageError
        If PATH does not exist, or is a folder with nothing to grade.
    """
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file or folder; give an {FILENAME}, a student folder or a folder of them")
    if p.is_file():
        if p.suffix != ".py":
            raise UsageError(f"{path}: not a Python file; give an {FILENAME}, a student folder or a folder of them")
        sid = p.resolve().parent.name if p.name == FILENAME else p.stem
        return [make_submission(sid, p, p)]
    if (p / FILENAME).exists():
        return [make_submission(p.resolve().name, p, p / FILENAME)]
    found: list[Submission] = []
    for child in sorted(p.iterdir()):
        if child.name.startswith((".", "_")):
            continue
        if child.is_symlink() and (child.is_dir() or child.suffix == ".py"):
            sid = child.stem if child.suffix == ".py" else child.name
            found.append(Submission(sid, str(child), None, "",
                                    f"{child.name} is a symbolic link; submit the folder or file itself, not a link to it"))
            continue
        if child.is_dir():
            found.append(make_submission(child.name, child, child / FILENAME))
        elif child.suffix == ".py":
            found.append(make_submission(child.stem, child, child))
    if not found:
        raise UsageError(f"{path}: holds no {FILENAME}, no student folders and no .py files")
    return found


def locate_archive(path: str, config: Any) -> list[Submission]:
    """Extract a zip archive to a temporary folder and locate its submissions.

    Raises
    ------
    grader.errors.UsageError
        If the archive is unusable (see `grader.archive.safe_extract`).
    """
    if not Path(path).is_file():
        raise UsageError(f"{path}: no such file or folder; give an {FILENAME}, a student folder or a folder of them")
    dest = Path(tempfile.mkdtemp(prefix=scratch_prefix("zip")))
    config.stash.setdefault("submission.tempdirs", []).append(dest)
    try:
        extracted = safe_extract(Path(path), dest)
    except ArchiveError as exc:
        raise UsageError(f"{exc}; export the submissions again") from None
    for problem in extracted.skipped:
        print(f"grader: warning: {path}: skipped {problem}", file=sys.stderr)
    try:
        located = locate(str(extracted.root))
    except UsageError:
        raise UsageError(f"{path}: holds no {FILENAME}, no student folders and no .py files") from None
    found = []
    for sub in located:
        shown = f"{path}:{Path(sub.path).relative_to(extracted.root)}"
        problem = sub.problem
        expected = Path(sub.path) / FILENAME if Path(sub.path).is_dir() else Path(sub.path)
        if expected in extracted.left_out:
            problem = f"{FILENAME} was left out of {path}: {extracted.left_out[expected]}"
        found.append(replace(sub, path=shown, problem=problem.replace(str(sub.path), shown)))
    return found


ROSTER_COLUMNS = ("id", "student", "student_id", "username", "login", "sis_user_id")
"""Column names a roster's student ids may stand under (case-insensitive)."""


def read_roster(path: str) -> list[str]:
    """Student ids of a roster CSV: the column named in `ROSTER_COLUMNS` (first match).

    Raises
    ------
    grader.errors.UsageError
        If the file cannot be read or holds no ids.
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = [row for row in csv.reader(fh) if row and any(cell.strip() for cell in row)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"--roster {path}: cannot read the CSV file ({exc})") from None
    if not rows:
        raise UsageError(f"--roster {path}: the file holds no student ids")
    header = [cell.strip().lower() for cell in rows[0]]
    column = next((header.index(name) for name in ROSTER_COLUMNS if name in header), None)
    if column is None:
        raise UsageError(
            f"--roster {path}: no student id column; the first row must name the columns, "
            f"one of them {', '.join(repr(c) for c in ROSTER_COLUMNS)}"
        )
    ids = [row[column].strip() for row in rows[1:] if len(row) > column and row[column].strip()]
    if not ids:
        raise UsageError(f"--roster {path}: the file holds no student ids")
    return ids


def apply_roster(found: list[Submission], roster: list[str]) -> list[Submission]:
    """Add a "no submission" entry for each roster id without one; warn about ids not on it."""
    have = {s.id for s in found}
    missing = [sid for sid in roster if sid not in have]
    unknown = sorted(have - set(roster))
    if unknown:
        print(f"grader: warning: not on the roster: {', '.join(unknown)}", file=sys.stderr)
    if missing:
        print(f"grader: warning: {len(missing)} student(s) on the roster sent nothing: {', '.join(missing)}", file=sys.stderr)
    return found + [Submission(sid, "", None, "", "no submission from this student") for sid in missing]


@hookimpl
def grader_addoption(parser: Any) -> None:
    parser.add_argument(
        "--roster", metavar="CSV",
        help="class list (an 'id' column): students without a submission are graded 'error'",
    )


@hookimpl(trylast=True)
def grader_locate_submissions(path: str, config: Any) -> list[Submission]:
    """Locate submissions on the filesystem with `locate` (zip archives: `locate_archive`)."""
    if path.lower().endswith(".zip"):
        return locate_archive(path, config)
    return locate(path)


@hookimpl
def grader_unconfigure(config: Any) -> None:
    for folder in config.stash.pop("submission.tempdirs", []):
        shutil.rmtree(folder, ignore_errors=True)
