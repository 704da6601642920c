"""``grader init-ci github|gitlab|classroom50``: CI files for a student template repository.

Each target writes what its CI needs to run the *visible* checks on a
student's push (``grader check``) and to hand the result to the tool that
reads it. CI never runs a hidden check and never gives the grade: the grade
comes from ``grader grade`` on the instructor's side. Every file says so.

``github``
    ``.github/workflows/<pack id>-checks.yml``: annotations on the student's
    file, the step summary, ``junit.xml`` as an artifact, and the two
    notices GitHub Classroom reads (``Points X/Y`` and
    ``{"totalPoints": X, "maxPoints": Y}``, ``--points-notice``).
``gitlab``
    ``.gitlab-ci.yml``: a job whose JUnit report GitLab shows in the merge
    request and pipeline (``artifacts:reports:junit``).
``classroom50``
    ``autograder.py``, Classroom 50's autograder entry (copy it to
    ``CLASSROOM/autograders/ASSIGNMENT/autograder.py`` in the classroom
    repository): it runs the checks in the student checkout and writes
    ``result.json`` (``classroom50/result/v1``, integer scores), exiting 0
    whenever the file is written (a non-zero exit is an infrastructure
    error to Classroom 50).

``--package SPEC`` is what ``pip install`` installs: the course's student
wheel (a URL or a path in the repository, see ``grader
build-student-package``); default: the pack's ``distribution``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.errors import UsageError
from grader.packs import find_pack

__all__ = ["TARGETS", "init_ci", "templates"]

TARGETS = ("github", "gitlab", "classroom50")

NOTE = (
    "CI runs the VISIBLE checks only (grader check); hidden checks run only at grading, "
    "and the grade comes from 'grader grade', not from this run."
)

GITHUB = """\
# {chapter} visible checks on every push (written by 'grader init-ci github').
# {note}
name: {chapter} checks
on: [push, pull_request, workflow_dispatch]
permissions:
  contents: read
  checks: write
jobs:
  {id}-checks:
    runs-on: ubuntu-latest
    if: github.actor != 'github-classroom[bot]'
    timeout-minutes: 10
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - name: Install the grader
        run: python -m pip install "{package}"
      - name: Visible checks
        # Annotations, the step summary and GitHub Classroom's two notices
        # ("Points X/Y" and {{"totalPoints", "maxPoints"}}): visible points only.
        run: grader check {file} --junit junit.xml --points-notice
      - name: Keep junit.xml
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: {id}-junit
          path: junit.xml
"""

GITLAB = """\
# {chapter} visible checks on every push (written by 'grader init-ci gitlab').
# {note}
{id}-checks:
  image: python:3.12
  script:
    - python -m pip install "{package}"
    - grader check {file} --junit junit.xml
  artifacts:
    when: always
    reports:
      junit: junit.xml
"""

CLASSROOM50 = '''\
"""Classroom 50 autograder for {chapter} (written by 'grader init-ci classroom50').

Copy to CLASSROOM/autograders/ASSIGNMENT/autograder.py in the classroom
repository. Classroom 50's runner starts it in the student checkout with
CLASSROOM, ASSIGNMENT, SUBMISSION_TAG, OWNER, COMMIT_URL, ... set; it writes
./result.json ("schema": "classroom50/result/v1", integer scores).

{note}
The result's "datetime" is the commit's committer date, as the contract
defines it: the student sets that date, so it is never used for lateness.
"""

import subprocess
import sys
from pathlib import Path

PACKAGE = "{package}"  # the course's student wheel (a URL, a path, or an index name)


def main() -> int:
    try:
        import grader  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", PACKAGE], check=True)
    submission = "{file}" if Path("{file}").exists() else "{notebook}"
    code = subprocess.run([sys.executable, "-m", "grader", "check", submission, "-q",
                           "--classroom50", "result.json"]).returncode
    # 0: every visible check passed; 1: some did not. Both are grades, written to result.json.
    return 0 if code in (0, 1) and Path("result.json").is_file() else code or 1


if __name__ == "__main__":
    sys.exit(main())
'''

FILES = {
    "github": (".github/workflows/{id}-checks.yml", GITHUB),
    "gitlab": (".gitlab-ci.yml", GITLAB),
    "classroom50": ("autograder.py", CLASSROOM50),
}


def templates(target: str, package: str | None = None, pack: Any = None) -> dict[str, str]:
    """The files of one target: relative path -> text.

    ``pack`` (default: the installed course pack) gives the chapter's name,
    the submission file and, when ``package`` is None, the student
    package's name (its ``distribution``).

    Raises
    ------
    grader.errors.UsageError
        For an unknown target.
    """
    if target not in FILES:
        raise UsageError(f"init-ci {target}: unknown target; choose one of {', '.join(TARGETS)}")
    pack = pack or find_pack()
    package = pack.distribution if package is None else package
    if any(c in package for c in "\"'\n\r\\") or not package.strip():
        raise UsageError(f"--package {package!r}: give a pip requirement, URL or path without quotes")
    path, text = FILES[target]
    fields = {
        "note": NOTE,
        "package": package,
        "chapter": pack.chapter,
        "id": pack.id,
        "file": pack.submission,
        "notebook": pack.notebook,
    }
    return {path.format(**fields): text.format(**fields)}


def init_ci(target: str, folder: Path, package: str | None = None, force: bool = False, pack: Any = None) -> list[Path]:
    """Write a target's files under ``folder``; refuse to overwrite unless ``force``.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    grader.errors.UsageError
        For an unknown target, or a file that exists (without ``force``).
    """
    written = []
    files = templates(target, package, pack)
    for rel in files:
        if (folder / rel).is_symlink():  # --force or not: writing would go wherever the link points
            raise UsageError(f"{folder / rel}: a symbolic link; remove it (init-ci writes only files of its own)")
        if (folder / rel).exists() and not force:
            raise UsageError(f"{folder / rel}: exists; remove it or pass --force")
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
