"""``grader gradescope-bundle``: one zip an instructor uploads as a Gradescope programming assignment's autograder.

Gradescope unpacks the zip into ``/autograder/source/``, runs ``setup.sh`` once
to build the image, and for each submission copies ``run_autograder`` to
``/autograder/run_autograder`` and runs it with the student's files in
``/autograder/submission/``; it reads ``/autograder/results/results.json``
(Gradescope's "Autograder Specifications"). The zip holds::

    setup.sh            installs the grader's dependencies (requirements.txt) with pip
    run_autograder      grader grade /autograder/submission --gradescope /autograder/results/results.json
    requirements.txt    the grader's dependencies, at the versions installed where the zip was made
    lib/grader/...      this grader's code (run from here: nothing is installed from PyPI under its name)
    pack/...            the course: course.yaml and the folders its paths lie in (`course_parts`)
    course.key          the course secret (0600), when one is set (--secret-file, GRADER_COURSE_SECRET...)

``run_autograder`` grades in a private temporary folder (``umask 077``) and
writes only ``results.json``; ``GRADER_PYTHON`` names the Python it runs (default
``python3``), so a test can run the zip with a virtual environment's Python.
The pack's sample submissions are left out, and so is everything else of the course's folder
(which may be a repository: its ``.git``, ``.venv``, tests, reports, the harness itself). Entries are sorted and dated
1980-01-01, so the same grader, pack and secret give the same bytes.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grader
from grader.errors import UsageError

__all__ = ["arguments", "bundle_files", "course_parts", "run", "write_bundle"]

COMMAND = "gradescope-bundle"
DISTRIBUTION = "grader-harness"
"""The grader's own distribution: its requirements go to ``requirements.txt``."""

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (grader gradescope-bundle).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
    apt-get update -q && apt-get install -y -q python3 python3-pip
fi
python3 -m pip install --no-cache-dir -r requirements.txt || \\
    python3 -m pip install --no-cache-dir --break-system-packages -r requirements.txt
chmod -R go-rwx .
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission (grader gradescope-bundle): it grades /autograder/submission
# and writes /autograder/results/results.json, nothing else. GRADER_PYTHON: the Python to run (python3).
set -euo pipefail
umask 077
here="$(cd "$(dirname "$0")" && pwd)"
if [ -d "$here/source" ]; then root="$here"; else root="$(dirname "$here")"; fi  # /autograder
source="$root/source"
export PYTHONPATH="$source/lib${PYTHONPATH:+:$PYTHONPATH}"
if [ -f "$source/course.key" ]; then
    export GRADER_COURSE_SECRET_FILE="$source/course.key"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$root/results"
"${GRADER_PYTHON:-python3}" -m grader grade "$root/submission" --pack "$source/pack" \\
    --out "$work/out" -q --gradescope "$root/results/results.json"
"""

_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}
_EPOCH = (1980, 1, 1, 0, 0, 0)


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``gradescope-bundle``'s own arguments."""
    parser.add_argument(
        "--out",
        dest="bundle_out",
        default="autograder.zip",
        metavar="FILE",
        help="the zip to write (default: autograder.zip)",
    )
    parser.add_argument(
        "--secret-file",
        default=None,
        metavar="FILE",
        help="the course secret's key file, put in the zip (default: GRADER_COURSE_SECRET_FILE or GRADER_COURSE_SECRET)",
    )


def _tree(folder: Path, prefix: str, skip: set[Path]) -> Iterator[tuple[str, Path]]:
    """``(name in the zip, file)`` of every regular file under ``folder``, sorted; links, caches and hidden
    folders (``.git``, ``.venv``) left out."""
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        hidden = any(part in _SKIP_DIRS or part.startswith(".") for part in rel.parts)
        if hidden or any(path == s or s in path.parents for s in skip):
            continue
        if path.is_symlink() or not path.is_file() or path.suffix in (".pyc", ".pyo"):
            continue
        yield f"{prefix}/{rel.as_posix()}", path


def requirements() -> str:
    """``requirements.txt``: the grader's own requirements (no extras), pinned to the installed versions."""
    lines = []
    import importlib.metadata  # here: any command but this one never reads installed metadata (issue 29)

    for req in importlib.metadata.requires(DISTRIBUTION) or []:
        if "extra ==" in req:
            continue
        name = re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0]
        try:
            lines.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            lines.append(req.split(";")[0].strip())
    return "\n".join(sorted(lines, key=str.lower)) + "\n"


def course_parts(pack: Any) -> list[Path]:
    """What of the course's folder the zip holds: its manifest, and each top-level folder (or file) its
    specs, reference, starter, mutants, public checks and plugin lie in, sorted.

    The course's folder may be a repository holding much else (``.git``, ``.venv``, tests, reports, the
    harness): only what the manifest names goes in, with the folders around it (the plugin may read a
    file beside the reference).

    Parameters
    ----------
    pack : grader.packs.Pack

    Returns
    -------
    list of pathlib.Path
    """
    root = Path(pack.root)
    named = [pack.specs, pack.reference, pack.starter, pack.mutants, pack.public, pack.plugin]
    tops = {root / Path(p).relative_to(root).parts[0] for p in named if p is not None and Path(p) != root}
    return sorted({root / "course.yaml", *(t for t in tops if t.exists())})


def bundle_files(pack: Any, secret: bytes | None) -> list[tuple[str, bytes, int]]:
    """What the zip holds: ``(name, bytes, mode)``, sorted by name.

    Parameters
    ----------
    pack : grader.packs.Pack
        The course pack (`course_parts` of its folder are copied to ``pack/``, its sample submissions left out).
    secret : bytes or None
        The course secret (``course.key``, mode 0600), or None.

    Returns
    -------
    list of (str, bytes, int)
    """
    files: list[tuple[str, bytes, int]] = [
        ("setup.sh", SETUP_SH.encode(), 0o755),
        ("run_autograder", RUN_AUTOGRADER.encode(), 0o755),
        ("requirements.txt", requirements().encode(), 0o644),
    ]
    code = Path(grader.__file__).resolve().parent
    files += [(name, path.read_bytes(), 0o644) for name, path in _tree(code, "lib/grader", set())]
    samples = getattr(pack, "samples", None)
    skip = {Path(samples).resolve()} if samples else set()
    root = Path(pack.root)
    for part in course_parts(pack):
        if part.is_dir():
            files += [(name, path.read_bytes(), 0o644) for name, path in _tree(part, f"pack/{part.name}", skip)]
        elif part.is_file() and not part.is_symlink():
            files.append((f"pack/{part.relative_to(root).as_posix()}", part.read_bytes(), 0o644))
    if secret is not None:
        files.append(("course.key", secret + b"\n", 0o600))
    return sorted(files)


def write_bundle(target: Path, files: list[tuple[str, bytes, int]]) -> None:
    """Write the zip through a temporary file and a rename: a failed write leaves nothing behind.

    Raises
    ------
    OSError
        If the folder cannot be written.
    """
    import zipfile  # here: any command but this one never writes a zip (issue 29)

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the zip may hold the course secret
        with os.fdopen(fd, "wb") as fh:
            fh.write(buf.getvalue())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def run(config: Any, write: Callable[[str], None]) -> int:
    """``grader gradescope-bundle``: write the zip, and say what it holds in two lines.

    Raises
    ------
    grader.errors.UsageError
        If ``--out`` is a folder or cannot be written, or the key file cannot be read.
    """
    from grader.config.secret import read_secret

    target = Path(config.option("bundle_out"))
    if target.is_dir():
        raise UsageError(f"--out {target}: is a folder; give the zip's file name, e.g. {target / 'autograder.zip'}")
    if not target.parent.is_dir():
        raise UsageError(f"--out {target}: the folder {target.parent} does not exist; make it first")
    secret = read_secret(config.option("secret_file"))
    files = bundle_files(config.pack, secret.key)
    try:
        write_bundle(target, files)
    except OSError as exc:
        raise UsageError(f"--out {target}: cannot write the zip ({exc.strerror or exc})") from None
    write(f"wrote {target}: {len(files)} files (setup.sh, run_autograder, the grader, pack {config.pack.id})")
    if secret.key is not None:
        write(f"the zip holds the course secret (from {secret.source}): keep it among staff, as the key file")
    else:
        write("no course secret set: Gradescope's hidden inputs are the specs' own (set GRADER_COURSE_SECRET)")
    return 0
