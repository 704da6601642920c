"""Built-in plugin: find the submissions behind a command-line PATH.

A PATH may be

* a Python file (``attention.py`` or ``alice.py``): one submission, named
  after its folder when the file is ``attention.py``, else after the file;
* a folder holding ``attention.py``: one submission named after the folder;
* a folder of student folders (and/or ``<student>.py`` files): one
  submission each, named after the folder or file, in sorted order.

A student folder without ``attention.py`` still becomes a submission, graded
"error" with the reason, so that no student silently disappears.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from grader.errors import UsageError
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
    if file is None or not file.is_file():
        return Submission(sid, str(path), None, "", f"no {FILENAME} in {path}: the student folder must hold {FILENAME}")
    try:
        data = file.read_bytes()
    except OSError as exc:
        return Submission(sid, str(path), None, "", f"{file}: cannot read the file ({exc.strerror})")
    digest = hashlib.sha256(data).hexdigest()
    if len(data) > MAX_SOURCE_BYTES:
        return Submission(sid, str(path), None, digest, f"{file.name} is {len(data)} bytes; the limit is {MAX_SOURCE_BYTES}")
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
        if child.is_dir():
            found.append(make_submission(child.name, child, child / FILENAME))
        elif child.suffix == ".py":
            found.append(make_submission(child.stem, child, child))
    if not found:
        raise UsageError(f"{path}: holds no {FILENAME}, no student folders and no .py files")
    return found


@hookimpl(trylast=True)
def grader_locate_submissions(path: str, config: Any) -> list[Submission]:
    """Locate submissions on the filesystem with `locate`."""
    return locate(path)
