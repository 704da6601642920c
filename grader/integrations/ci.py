"""``grader init-ci github|gitlab|classroom50``: CI files for a student template repository.

Each target writes what its CI needs to run the *visible* checks on a
student's push (``grader check``) and to hand the result to the tool that
reads it. CI never runs a hidden check and never gives the grade: the grade
comes from ``grader grade`` on the instructor's side. Every file says so.

``classroom50``
    ``autograder.py``, Classroom 50's autograder entry (copy it to
    ``CLASSROOM/autograders/ASSIGNMENT/autograder.py`` in the classroom
    repository): it runs the checks in the student checkout and writes
    ``result.json`` (``classroom50/result/v1``, integer scores), exiting 0
    whenever the file is written (a non-zero exit is an infrastructure
    error to Classroom 50).
``gitlab``
    ``.gitlab-ci.yml``: a job whose JUnit report GitLab shows in the merge
    request and pipeline (``artifacts:reports:junit``).
``github``
    ``.github/workflows/<pack id>-checks.yml``: annotations on the student's
    file, the step summary, ``junit.xml`` as an artifact, and the two
    ``Points X/Y`` notices (``--points-notice``; the format GitHub
    Classroom read until it was retired on 2026-08-28, kept for the
    platforms that still read it).

``--package SPEC`` (required) is the one thing ``pip install`` installs: the
course's student wheel (see ``grader build-student-package``) as a path
inside the template repository (``dist/g14_grader-0.1.0-py3-none-any.whl``),
an ``https://`` URL, or the name the course publishes it under on its
package index (``g14-grader`` or ``g14-grader==0.1.0``). There is no
default: a name nobody published is free for anyone to register on a public
index, and CI would install whatever they put there (`package_spec`).

The jobs that run student code hold no secret: the GitHub job has
``permissions: contents: read`` only and its checkout keeps no token
(``persist-credentials: false``); the GitLab job unsets the job token
variables before it installs or runs anything.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from grader.errors import UsageError
from grader.packs import find_pack

__all__ = ["TARGETS", "init_ci", "package_spec", "templates"]

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
# The job runs the student's code: it may read the repository and nothing else, and holds no secret.
permissions:
  contents: read
jobs:
  {id}-checks:
    runs-on: ubuntu-latest
    permissions:
      contents: read
    timeout-minutes: 10
    steps:
      - uses: actions/checkout@v4
        with:
          persist-credentials: false
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - name: Install the grader
        run: python -m pip install "{package}"
      - name: Visible checks
        # Annotations, the step summary and the two "Points X/Y" notices (the format GitHub Classroom
        # read until its retirement on 2026-08-28, kept for platforms that read it): visible points only.
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
    # The job runs the student's code: it keeps no token of the pipeline's.
    - unset CI_JOB_TOKEN CI_REPOSITORY_URL CI_REGISTRY_PASSWORD CI_DEPENDENCY_PROXY_PASSWORD
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

PACKAGE = "{package}"  # the course's student wheel (a path in the repository, a URL, or the course's index name)


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


PACKAGE_HELP = (
    "the course's student wheel as a path in the template repository (dist/NAME.whl), an https:// URL, "
    "or the name the course publishes it under on its package index (NAME or NAME==VERSION)"
)

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:==[A-Za-z0-9][A-Za-z0-9.+!_-]*)?")
"""A project name (PEP 508), optionally pinned to one version."""
_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]+)?/[A-Za-z0-9._~/%+=@!,;:#?&-]*")
"""An https URL made of characters that are inert in a shell's double quotes, YAML and a Python string."""
_PATH_PART = re.compile(r"[A-Za-z0-9._+-]+")


def package_spec(text: str | None) -> str:
    """Check ``--package``: one thing for ``pip install`` to install, inert in every file it is written into.

    Parameters
    ----------
    text : str or None
        A wheel's path relative to the template repository (``dist/x.whl``;
        no ``..``, no absolute path), an ``https://`` URL, or a project
        name with an optional ``==VERSION``.

    Returns
    -------
    str
        ``text``, unchanged.

    Raises
    ------
    grader.errors.UsageError
        Without a value, or for anything else (a space, a quote, a shell
        character, two requirements, an option).
    """
    if text is None:
        raise UsageError(f"init-ci: --package is required: {PACKAGE_HELP}")
    if _URL.fullmatch(text) or _NAME.fullmatch(text):
        return text
    parts = PurePosixPath(text).parts
    if (
        text.endswith(".whl")
        and not text.startswith("/")
        and all(_PATH_PART.fullmatch(part) and part not in (".", "..") for part in parts)
    ):
        return text
    raise UsageError(f"--package {text!r}: not one package; give {PACKAGE_HELP}")


def templates(target: str, package: str | None, pack: Any = None) -> dict[str, str]:
    """The files of one target: relative path -> text.

    Parameters
    ----------
    target : str
        One of `TARGETS`.
    package : str
        What CI installs (checked by `package_spec`).
    pack : grader.packs.Pack, optional
        The course pack (default: the installed one): the chapter's name
        and the submission file.

    Returns
    -------
    dict of str to str

    Raises
    ------
    grader.errors.UsageError
        For an unknown target, or a missing or malformed ``package``.
    """
    if target not in FILES:
        raise UsageError(f"init-ci {target}: unknown target; choose one of {', '.join(TARGETS)}")
    package = package_spec(package)
    pack = pack or find_pack()
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


def init_ci(target: str, folder: Path, package: str | None, force: bool = False, pack: Any = None) -> list[Path]:
    """Write a target's files under ``folder``; refuse to overwrite unless ``force``.

    ``package`` is what CI installs (required; see `package_spec`).

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    grader.errors.UsageError
        For an unknown target, a missing or malformed ``package``, or a file that exists (without ``force``).
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
