"""Safe reading of the zip archives that learning-management systems export.

The archive is read as a listing first: its students are the folders and
``.py`` files (and ``.ipynb`` ones, when a notebook name is given) under its root (the archive's single top-level folder, when it
has one, descended while it holds one folder and no submission file). Only
each student's submission file (the pack's, e.g. ``attention.py``, else its notebook
``attention.ipynb``; or the ``<id>.py`` file itself) is
extracted, each to a folder of its own with a name the grader makes
(``00003/attention.py``), so no member name, however long, odd or
case-folded, decides a path on disk.

Everything that is wrong with one student's part of the archive is that
student's problem, in words (`Student.problem`): too many files in the
folder (`MAX_STUDENT_FILES`), the file twice, a symbolic link, a special
file, more than `MAX_MEMBER_BYTES`, a member that cannot be decompressed.
Members with an absolute path or a ``..`` component are never extracted
(and reported in `Extracted.skipped`). The archive as a whole is refused
only when it is not a zip file, lists more than `MAX_MEMBERS` members, or
would extract more than `MAX_TOTAL_BYTES` (a zip bomb).
"""

from __future__ import annotations

import stat
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.intake.files import FILE_KINDS

__all__ = ["ArchiveError", "Extracted", "Student", "open_zip", "safe_extract"]

MAX_MEMBERS = 200_000
"""Most members listed by one archive; more and it is refused (its listing alone costs memory)."""
MAX_STUDENT_FILES = 1_000
"""Most files one student's folder in an archive may hold; more is that student's error."""
MAX_MEMBER_BYTES = 2 * 1024 * 1024
"""Largest extracted file, in bytes (2 MiB, the submission size limit)."""
MAX_TOTAL_BYTES = 512 * 1024 * 1024
"""Most bytes extracted from one archive (512 MiB)."""


class ArchiveError(Exception):
    """The archive cannot be used at all (not a zip, or over the whole-archive limits)."""


@dataclass
class Student:
    """One student found in an archive.

    Attributes
    ----------
    name : str
        The folder's or file's name under the archive's root, verbatim
        (``"alice"``, ``"bob.py"``); the archive's own stem for an archive
        that is one student's folder.
    is_file : bool
        Whether the student is a ``.py`` file rather than a folder.
    file : pathlib.Path or None
        Where the graded file was extracted; None when there is none.
    problem : str
        Why the student cannot be graded, in words; "" when they can (or
        when there simply is no submission file: ``file`` is then None).
    """

    name: str
    is_file: bool
    file: Path | None = None
    problem: str = ""
    holds: list[tuple[str, bool]] = field(default_factory=list)
    """For a folder without the submission file: its entries two levels deep, (relative path, is a folder)."""


@dataclass
class Extracted:
    """What `safe_extract` found.

    Attributes
    ----------
    students : list of Student
        In sorted order of their names.
    skipped : list of str
        ``"member: reason"`` for every member left out that the instructor
        should hear about (absolute paths, ``..``, links, oversized files).
    """

    students: list[Student] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _safe_parts(name: str) -> tuple[str, ...] | None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or any(p in ("..", "") for p in path.parts) or (path.parts and ":" in path.parts[0]):
        return None
    return path.parts


def _hidden(parts: tuple[str, ...]) -> bool:
    return bool(parts) and (parts[0] == "__MACOSX" or any(p.startswith(".") for p in parts))


def _member_count(archive: Path) -> int | None:
    """The member count the archive's end record states, read before the listing is parsed."""
    try:
        with open(archive, "rb") as fh:
            end = zipfile._EndRecData(fh)  # type: ignore[attr-defined]
    except (OSError, AttributeError, zipfile.BadZipFile):
        return None
    return int(end[zipfile._ECD_ENTRIES_TOTAL]) if end else None  # type: ignore[attr-defined]


def _times(n: int) -> str:
    return "twice" if n == 2 else f"{n} times"


def safe_extract(archive: Path, dest: Path, filename: str, notebook: str | None = None) -> Extracted:
    """List the students of ``archive`` and extract each one's file into ``dest``.

    Parameters
    ----------
    archive : pathlib.Path
        A zip file.
    dest : pathlib.Path
        An empty folder; student ``i`` (in sorted order) gets ``dest/<i>/<filename>``.
    filename : str
        The submission's file name (the course pack's, e.g. ``attention.py``).
    notebook : str, optional
        The notebook graded like it (the pack's, e.g. ``attention.ipynb``): a
        student folder holding it and no ``filename`` gets it extracted as
        ``dest/<i>/<notebook>``, and a top-level ``<id>.ipynb`` is a student too.

    Returns
    -------
    Extracted

    Raises
    ------
    ArchiveError
        If the file is not a readable zip archive, lists more than
        `MAX_MEMBERS` members, or would extract more than `MAX_TOTAL_BYTES`.
    """
    with open_zip(archive) as zf:
        return _extract(zf, zf.infolist(), archive, dest, filename, notebook)


def open_zip(archive: Path) -> zipfile.ZipFile:
    """Open a zip archive within the whole-archive limits, its members' names decoded (`member_name`).

    Raises
    ------
    ArchiveError
        If the file is not a readable zip archive or lists more than `MAX_MEMBERS` members.
    """
    stated = _member_count(archive)
    if stated is not None and stated > MAX_MEMBERS:
        raise ArchiveError(f"{archive}: {stated:,} members; an archive may list at most {MAX_MEMBERS:,}")
    try:
        zf = zipfile.ZipFile(archive)
    except Exception as exc:  # noqa: BLE001 -- BadZipFile, OSError, a name flagged UTF-8 that is not
        raise ArchiveError(f"{archive}: not a readable zip archive ({exc})") from None
    members = zf.infolist()
    if len(members) > MAX_MEMBERS:
        zf.close()
        raise ArchiveError(f"{archive}: {len(members):,} members; an archive may list at most {MAX_MEMBERS:,}")
    for info in members:
        info.filename = member_name(info)
    return zf


def member_name(info: zipfile.ZipInfo) -> str:
    """A member's name as its maker meant it.

    A name flagged UTF-8 (bit 11) was decoded as UTF-8 by `zipfile`. An
    unflagged one was decoded as code page 437; but Info-ZIP's ``zip`` on
    Linux writes the UTF-8 bytes of the name without the flag. So the name
    is taken back to its bytes and decoded as UTF-8 when they are valid
    UTF-8 (``José``, not ``Jos├⌐``), else kept as code page 437 (the legacy
    DOS code page that Windows tools write).
    """
    if info.flag_bits & 0x800:
        return info.filename
    try:
        raw = info.orig_filename.encode("cp437")
    except UnicodeEncodeError:  # decoded with another metadata_encoding: keep it
        return info.filename
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        return info.filename
    return name


def _extract(
    zf: zipfile.ZipFile,
    members: list[zipfile.ZipInfo],
    archive: Path,
    dest: Path,
    filename: str,
    notebook: str | None = None,
) -> Extracted:
    kinds = (".py", ".ipynb") if notebook else (".py",)
    skipped: list[str] = []
    files: dict[tuple[str, ...], list[zipfile.ZipInfo]] = defaultdict(list)  # kept file members by path
    folders: set[tuple[str, ...]] = set()  # every folder the kept members imply
    counted: list[tuple[str, ...]] = []  # the parts of every file member, hidden or not, for the per-folder count
    for info in members:
        name = info.filename
        parts = _safe_parts(name.rstrip("/"))
        if parts is None:
            if name.endswith(kinds):
                skipped.append(f"{name}: an absolute path or one with '..', refused (it may lead outside)")
            continue
        if info.is_dir():
            if not _hidden(parts):
                folders.update(parts[:i] for i in range(1, len(parts) + 1))
            continue
        counted.append(parts)
        if _hidden(parts):
            continue
        folders.update(parts[:i] for i in range(1, len(parts)))
        if name.endswith(kinds):
            files[parts].append(info)

    # The root: descend while it holds a single folder, no .py file and no submission file.
    root: tuple[str, ...] = ()
    while True:
        children = {p[len(root)] for p in folders | set(files) if len(p) > len(root) and p[: len(root)] == root}
        if len(children) != 1:
            break
        (child,) = children
        below = (*root, child)
        if below not in folders or below in files or (*below, filename) in files or (*below, notebook) in files:
            break
        root = below

    extracted = Extracted(skipped=skipped)
    total = [0]
    for own in (filename, notebook):
        if own and (*root, own) in files:  # the archive is one student's folder
            name = root[-1] if root else archive.stem
            student = Student(name, False)
            extracted.students.append(student)
            _take(zf, files[(*root, own)], student, dest / "00000", archive, total, skipped, own)
            return extracted

    sizes: dict[str, int] = defaultdict(int)
    for parts in counted:
        if len(parts) > len(root) + 1 and parts[: len(root)] == root:
            sizes[parts[len(root)]] += 1
    names = sorted(
        {p[len(root)] for p in folders if len(p) > len(root) and p[: len(root)] == root}
        | {p[len(root)] for p in files if len(p) == len(root) + 1 and p[: len(root)] == root},
        key=lambda n: n.encode("utf-8", "surrogatepass"),
    )
    for index, name in enumerate(n for n in names if not n.startswith(("_", "."))):
        folder = (*root, name)
        student = Student(name, folder not in folders)
        extracted.students.append(student)
        where = dest / f"{index:05d}"
        if student.is_file:
            own = notebook if notebook and name.endswith(".ipynb") else filename
            _take(zf, files[folder], student, where, archive, total, skipped, own)
        elif sizes[name] > MAX_STUDENT_FILES:
            student.problem = (
                f"your folder {name} in {archive} holds {sizes[name]:,} files; the grader reads at most "
                f"{MAX_STUDENT_FILES:,} per student: send {filename} without the rest"
            )
        elif (*folder, filename) in files:
            _take(zf, files[(*folder, filename)], student, where, archive, total, skipped, filename)
        elif notebook and (*folder, notebook) in files and (*folder, filename) not in folders:
            _take(zf, files[(*folder, notebook)], student, where, archive, total, skipped, notebook)
        elif (*folder, filename) in folders:
            student.problem = (
                f"{filename} in {archive} is a folder, not a file: the student folder must hold {filename}"
            )
        else:
            student.holds = _holds(folder, counted, folders)
    return extracted


def _holds(
    folder: tuple[str, ...], counted: list[tuple[str, ...]], folders: set[tuple[str, ...]], limit: int = 200
) -> list[tuple[str, bool]]:
    """What a student folder of the archive holds, two levels deep: (relative path, is a folder)."""
    n = len(folder)
    found = {"/".join(p[n:]): False for p in counted if len(p) in (n + 1, n + 2) and p[:n] == folder}
    found.update({"/".join(p[n:]): True for p in folders if len(p) in (n + 1, n + 2) and p[:n] == folder})
    return sorted(found.items())[:limit]


def _take(
    zf: zipfile.ZipFile,
    infos: list[zipfile.ZipInfo],
    student: Student,
    where: Path,
    archive: Path,
    total: list[int],
    skipped: list[str],
    filename: str,
) -> None:
    """Extract a student's one file to ``where/<filename>``, or set the student's problem."""
    shown = (_safe_parts(infos[0].filename) or (filename,))[-1]  # the file's own name, also for "a\\b.py"
    if len(infos) > 1:
        none = "neither was graded" if len(infos) == 2 else "none of them was graded"
        student.problem = (
            f"{shown} appears {_times(len(infos))} in {archive} ({infos[0].filename}); {none}: "
            "export the submissions again with one file per student"
        )
        return
    info = infos[0]
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        skipped.append(f"{info.filename}: a symbolic link")
        student.problem = f"{shown} was left out of {archive}: it is a symbolic link"
        return
    if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
        student.problem = (
            f"{shown} was left out of {archive}: it is not a regular file "
            f"({FILE_KINDS.get(stat.S_IFMT(mode), 'a special file')})"
        )
        return
    if info.file_size > MAX_MEMBER_BYTES:
        skipped.append(f"{info.filename}: larger than {MAX_MEMBER_BYTES >> 20} MiB")
        student.problem = f"{shown} was left out of {archive}: it is larger than {MAX_MEMBER_BYTES >> 20} MiB"
        return
    where.mkdir(parents=True, exist_ok=True)
    target = where / filename
    written = 0
    try:
        with zf.open(info) as src, open(target, "wb") as out:
            while chunk := src.read(1 << 16):
                written += len(chunk)
                total[0] += len(chunk)
                if total[0] > MAX_TOTAL_BYTES:
                    raise ArchiveError(f"{archive}: extracts to more than {MAX_TOTAL_BYTES >> 20} MiB (a zip bomb?)")
                if written > MAX_MEMBER_BYTES:
                    break
                out.write(chunk)
    except ArchiveError:
        raise
    except Exception as exc:  # noqa: BLE001 -- bad CRC, encrypted, an unknown compression method
        target.unlink(missing_ok=True)
        student.problem = f"{shown} could not be extracted from {archive} ({type(exc).__name__}: {exc})"
        return
    if written > MAX_MEMBER_BYTES:
        target.unlink()
        skipped.append(f"{info.filename}: larger than {MAX_MEMBER_BYTES >> 20} MiB")
        student.problem = f"{shown} was left out of {archive}: it is larger than {MAX_MEMBER_BYTES >> 20} MiB"
        return
    student.file = target
