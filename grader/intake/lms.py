"""LMS exports read from the LMS's structure, never from the student's text (issue 23).

A Canvas or Moodle "download submissions" export names each entry with a
prefix the LMS writes (who, which user id, LATE) followed by the name the
student gave their file. Only the prefix is parsed; the student's part is
opaque data, so no upload name can change whose row a file lands in, mark
it late or make a Canvas export read as a Moodle one.

* `decide` looks at the whole export's top-level entries once and says
  ``canvas``, ``moodle`` or None (an ordinary class folder); ``--lms``
  overrides it, and an export of no clear layout is refused in one line.
* `parse_canvas` / `parse_moodle` read one entry's LMS-written prefix.
* `place` groups the entries by the LMS's user id (display names collide)
  and `choose` picks, within one student's files, the one named exactly as
  the pack's submission file (``attention.py``, or ``attention.ipynb``),
  listing the others and saying truthfully what was chosen.
* `locate_export` does all of it for a zip or an unpacked folder: every
  student becomes one submission keyed by LMS user id; an entry the intake
  cannot place is that entry's one-line error, kept in every output.

The formats, as the LMSs write them (read from their source):

* Canvas, ``lib/content_zipper.rb`` (instructure/canvas-lms): ``get_filename``
  joins the sanitised sortable name (lower case, word characters only, every
  ``_digits_`` run collapsed so the name never holds one), ``LATE`` when the
  submission is late, and the user id (``anon_<id>`` when anonymised) with
  ``_``; ``add_upload_submission`` appends ``_<attachment id>_<display name>``;
  text and URL entries are ``<prefix>_text.html`` / ``<prefix>_link.html``; a second
  upload of one name is ``attention-1.py`` (``Attachment.make_unique_filename``).
  Canvas itself reads the leftmost ``_digits_`` as the user id, as here.
* Moodle, ``mod/assign/classes/downloader.php`` (and ``locallib.php`` before
  4.1): the prefix is the full name with ``_`` replaced by spaces, ``_`` and
  the participant id; then ``_assignsubmission_<plugin>`` and, in folders
  (the default since 3.1), ``_/`` or ``/`` and the file's path, or flat,
  ``_`` and the file name.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import UsageError
from grader.intake import LOCATED as _LOCATED
from grader.intake.files import resolves_to
from grader.intake.naming import display_name, what_it_holds
from grader.models import Submission
from grader.safetext import display

if TYPE_CHECKING:
    import zipfile  # the archives are opened by grader.intake.archive, when there is one (issue 29)

__all__ = [
    "LMS_CHOICES",
    "LOCATED",
    "Entry",
    "Item",
    "Placed",
    "choose",
    "decide",
    "locate_export",
    "parse_canvas",
    "parse_moodle",
    "place",
    "shared_name",
    "student_problem",
]

LMS_CHOICES = ("canvas", "moodle", "none")
"""The values of ``--lms``: the export's system, or ``none`` for an ordinary class folder."""

LOCATED = _LOCATED
"""Every submission located in this run, before the grader's naming (`grader.intake.LOCATED`)."""

_WHO = r"(?:(?P<name>[^\W_]\w*?|)_)?(?P<late>LATE_)?(?P<user>\d+|anon_[A-Za-z0-9]+)"  # a name may sanitise to ""
_CANVAS_FILE = re.compile(_WHO + r"_(?P<file>\d+)_(?P<upload>.+)", re.DOTALL)
_CANVAS_ENTRY = re.compile(_WHO + r"_(?P<kind>text|link)\.html")
_MOODLE_FOLDER = re.compile(r"(?P<name>[^_/]+)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z0-9]+)_?")
_MOODLE_FLAT = re.compile(
    r"(?P<name>[^_/]+)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z0-9]+)_(?P<upload>.+)", re.DOTALL
)

CANVAS_FORM = "lastfirst_[LATE_]userid_fileid_filename"
MOODLE_FORM = "Full Name_participantid_assignsubmission_file_"
_SKIPPED = ("__MACOSX", "__pycache__")
_MAX_FILES = 1_000  # as grader.intake.archive.MAX_STUDENT_FILES


def parse_canvas(name: str) -> dict[str, str] | None:
    """The LMS-written part of a Canvas export's file name.

    Parameters
    ----------
    name : str
        A top-level file name (``smithbob_LATE_340934_208490284_attention.py``).

    Returns
    -------
    dict of str to str or None
        ``name`` (the sanitised sortable name, "" when anonymised), ``user``
        (digits, or ``anon_...``), ``late`` (``"1"``/``"0"``), and either
        ``file`` (the attachment id) and ``upload`` (the student's own file
        name, never parsed further) or ``entry`` (``text`` or ``link``);
        None when Canvas writes no such name.
    """
    m = _CANVAS_FILE.fullmatch(name)
    if m is not None:
        return {
            "name": m["name"] or "",
            "user": m["user"],
            "late": "1" if m["late"] else "0",
            "file": m["file"],
            "upload": m["upload"],
        }
    m = _CANVAS_ENTRY.fullmatch(name)
    if m is not None:
        return {"name": m["name"] or "", "user": m["user"], "late": "1" if m["late"] else "0", "entry": m["kind"]}
    return None


def parse_moodle(name: str, folder: bool) -> dict[str, str] | None:
    """The LMS-written part of a Moodle export's entry name.

    Parameters
    ----------
    name : str
        A top-level folder name (``Bob Smith_12345_assignsubmission_file_``,
        or without the last ``_`` as Moodle 4.1 and later write it) or, for a
        flat export, a file name (``Bob Smith_12345_assignsubmission_file_attention.py``).
    folder : bool
        Whether ``name`` is a folder.

    Returns
    -------
    dict of str to str or None
        ``name`` (the full name; Moodle writes it without ``_``), ``user``
        (the participant id), ``plugin`` (``file``, ``onlinetext``...) and,
        for a flat file, ``upload`` (the student's file name); None when
        Moodle writes no such name.
    """
    m = (_MOODLE_FOLDER if folder else _MOODLE_FLAT).fullmatch(name)
    if m is None:
        return None
    found = {"name": m["name"], "user": m["user"], "plugin": m["plugin"]}
    if not folder:
        found["upload"] = m["upload"]
    return found


@dataclass
class Item:
    """One file a student handed in: the student's own name for it, and where to read it.

    Attributes
    ----------
    upload : str
        The uploaded file's name (Canvas, flat Moodle) or its path inside the
        participant's folder (Moodle); opaque, shown as it is.
    handle : zipfile.ZipInfo, pathlib.Path or None
        The archive member or the file on disk; None for what is not a file
        to grade (a Canvas text entry, a Moodle online text).
    file_id : int
        Canvas's attachment id (larger is later); 0 elsewhere.
    """

    upload: str
    handle: Any
    file_id: int = 0


@dataclass
class Entry:
    """One top-level entry of an export: a file, or a folder and the files below it."""

    name: str
    is_dir: bool
    files: list[tuple[str, Any]] = field(default_factory=list)
    """(path below the entry, handle) of a folder's files; ``[("", handle)]`` for a file."""
    problem: str = ""


@dataclass
class Placed:
    """One student of an export, keyed by the LMS's user id."""

    system: str
    user: str
    name: str
    late: bool
    entries: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    problem: str = ""


def decide(entries: Sequence[Entry], where: str, option: str | None) -> str | None:
    """Which LMS wrote the export, decided once from all its top-level entries.

    Parameters
    ----------
    entries : sequence of Entry
        The export's top-level entries.
    where : str
        The export's path (for the error).
    option : str or None
        ``--lms`` (`LMS_CHOICES`), or None to decide from the names.

    Returns
    -------
    str or None
        ``canvas``, ``moodle``, or None for an ordinary class folder.

    Raises
    ------
    grader.errors.UsageError
        If ``--lms`` names a system that wrote none of the entries, or the
        names mix both systems, or only a few entries are named as one writes them.
    """
    if option == "none":
        return None
    canvas = sum(1 for e in entries if not e.is_dir and parse_canvas(e.name) is not None)
    moodle = sum(1 for e in entries if parse_moodle(e.name, e.is_dir) is not None)
    total = len(entries)
    if option in ("canvas", "moodle"):
        if (canvas if option == "canvas" else moodle) == 0:
            form = CANVAS_FORM if option == "canvas" else MOODLE_FORM
            raise UsageError(
                f"{where}: --lms {option}: no entry is named as {option.capitalize()}'s submissions export "
                f"names them ({form}); give the export as {option.capitalize()} made it, or leave out --lms"
            )
        return option
    if canvas and moodle:
        raise UsageError(
            f"{where}: an export of an unknown layout: {canvas} entries are named as Canvas names them and "
            f"{moodle} as Moodle does; give --lms canvas or --lms moodle (the other entries become errors)"
        )
    if not canvas and not moodle:
        return None
    system, hits = ("canvas", canvas) if canvas else ("moodle", moodle)
    if 2 * hits >= total:
        return system
    raise UsageError(
        f"{where}: an export of an unknown layout: only {hits} of its {total} entries are named as "
        f"{system.capitalize()} names them; give --lms {system} to grade it as {system.capitalize()}'s export "
        "(the other entries become errors) or --lms none to grade it as a class folder"
    )


def place(entries: Sequence[Entry], system: str, where: str) -> list[Placed | Entry]:
    """Group an export's entries by the LMS's user id; an entry that names no user is kept apart.

    Parameters
    ----------
    entries : sequence of Entry
        In the export's order.
    system : str
        ``canvas`` or ``moodle`` (`decide`).
    where : str
        The export's path (for the reasons).

    Returns
    -------
    list of Placed or Entry
        One `Placed` per user id, at its first entry's place; each entry
        that cannot be placed, as it is, with ``problem`` set.
    """
    out: list[Placed | Entry] = []
    users: dict[str, Placed] = {}
    for entry in entries:
        info = None
        if entry.problem:
            pass
        elif system == "canvas" and not entry.is_dir:
            info = parse_canvas(entry.name)
        elif system == "moodle":
            info = parse_moodle(entry.name, entry.is_dir)
        if info is None:
            if not entry.problem:
                kind = "folder" if entry.is_dir else "file"
                form = CANVAS_FORM if system == "canvas" else MOODLE_FORM
                entry.problem = (
                    f"the {kind} {entry.name} in {where} is not named as {system.capitalize()}'s submissions "
                    f"export names them ({form}), so it belongs to no {system.capitalize()} user; "
                    "download the submissions again, or grade it on its own"
                )
            out.append(entry)
            continue
        student = users.get(info["user"])
        if student is None:
            student = users[info["user"]] = Placed(system, info["user"], info["name"], False)
            out.append(student)
        student.entries.append(entry.name)
        if system == "canvas":
            student.late = student.late or info["late"] == "1"
            if "entry" in info:
                student.items.append(Item(f"({'a text entry' if info['entry'] == 'text' else 'a website URL'})", None))
            else:
                student.items.append(Item(info["upload"], entry.files[0][1], int(info["file"])))
        elif not entry.is_dir:
            student.items.append(Item(info["upload"], entry.files[0][1] if info["plugin"] == "file" else None))
        else:
            for rel, handle in entry.files:
                shown = rel if info["plugin"] == "file" else f"{rel} ({info['plugin']})"
                student.items.append(Item(shown, handle if info["plugin"] == "file" else None))
    for student in users.values():
        if len(student.items) > _MAX_FILES:
            student.problem = (
                f"your files in {where} number {len(student.items):,}; the grader reads at most "
                f"{_MAX_FILES:,} per student: hand in the submission file without the rest"
            )
    return out


def _candidate(upload: str, wanted: str, system: str) -> bool:
    if upload == wanted:
        return True
    if system != "canvas":
        return False
    # Canvas's Attachment.make_unique_filename names a second file of one name attention-1.py (attention-<uuid>.py
    # after 7 tries)
    stem, dot, ext = wanted.rpartition(".")
    return re.fullmatch(re.escape(stem) + r"-(?:\d+|[0-9a-f-]{36})" + re.escape(dot + ext), upload) is not None


def choose(student: Placed, submission: str, notebook: str, which: str = "latest") -> tuple[Item | None, int, str]:
    """The file graded of one student's files, and what is said of the choice.

    Parameters
    ----------
    student : Placed
    submission, notebook : str
        The pack's file names (``attention.py``, ``attention.ipynb``).
    which : str
        ``latest`` or ``first``: of several files of the submission's name
        (Canvas names a second ``attention-1.py``), the one with the
        largest or the smallest attachment id.

    Returns
    -------
    (Item or None, int, str)
        The chosen file (a ``.py`` one before a notebook), how many files
        were candidates, and one sentence: what was graded and which other
        files were handed in but not graded ("" when there is nothing to
        say), or, with no chosen file, what the files are and what to do.
    """
    for wanted in (submission, notebook):
        found = [i for i in student.items if i.handle is not None and _candidate(i.upload, wanted, student.system)]
        if found:
            found.sort(key=lambda i: (i.file_id, i.upload))
            chosen = found[-1] if which == "latest" else found[0]
            others = [i.upload for i in student.items if i is not chosen]
            words = f"graded {chosen.upload}"
            if len(found) > 1:
                words += f" (attachment {chosen.file_id}, the {which} of {len(found)} files named {wanted})"
            if others:
                words += f"; also handed in, not graded: {', '.join(others[:10])}"
                words += f" and {len(others) - 10} more" if len(others) > 10 else ""
            return chosen, len(found), words if (others or len(found) > 1 or chosen.upload != wanted) else ""
    held = [(i.upload, False) for i in student.items]
    return None, 0, f"no {submission} among your files: {what_it_holds(held, submission, notebook)}"


# --- reading an export: a zip archive or its unpacked folder ----------------------------------------


def _zip_entries(zf: zipfile.ZipFile, skipped: list[str]) -> list[Entry]:
    from grader.intake.archive import _hidden, _safe_parts

    paths: list[tuple[tuple[str, ...], zipfile.ZipInfo]] = []
    for info in zf.infolist():
        parts = _safe_parts(info.filename.rstrip("/"))
        if parts is None:
            skipped.append(f"{info.filename}: an absolute path or one with '..', refused (it may lead outside)")
            continue
        if info.is_dir() or not parts or _hidden(parts) or parts[0] in _SKIPPED:
            continue
        paths.append((parts, info))
    root: tuple[str, ...] = ()
    while paths:  # a zip of the unpacked export: descend its single top folder
        firsts = {p[len(root)] for p, _ in paths}
        if len(firsts) != 1 or any(len(p) <= len(root) + 1 for p, _ in paths):
            break
        (only,) = firsts
        if parse_moodle(only, True) is not None:
            break
        root = (*root, only)
    entries: dict[tuple[str, bool], Entry] = {}
    for parts, info in paths:
        rest = parts[len(root) :]
        is_dir = len(rest) > 1
        entry = entries.setdefault((rest[0], is_dir), Entry(rest[0], is_dir))
        entry.files.append(("/".join(rest[1:]), info))
    return sorted(entries.values(), key=lambda e: (e.name.encode("utf-8", "surrogatepass"), e.is_dir))


def _folder_entries(folder: Path, skip: Path | None) -> list[Entry]:
    try:
        names = sorted(os.listdir(folder), key=os.fsencode)
    except OSError as exc:
        raise UsageError(f"{display_name(str(folder))}: cannot list the folder ({exc.strerror})") from None
    skipped = skip.resolve() if skip is not None else None
    resolved = folder.resolve() if skipped is not None else folder
    entries = []
    for name in names:
        if name.startswith(".") or name in _SKIPPED:
            continue
        path = folder / name
        if skipped is not None and resolves_to(folder, name, skipped, resolved):
            continue
        shown = display_name(name)
        try:
            info = os.lstat(path)
        except OSError as exc:
            entries.append(Entry(shown, False, [], f"{shown}: cannot read it ({exc.strerror})"))
            continue
        if stat.S_ISLNK(info.st_mode):
            entries.append(Entry(shown, False, [], f"{shown} is a symbolic link; give the export's own files"))
        elif stat.S_ISDIR(info.st_mode):
            entries.append(Entry(shown, True, [("", path)]))  # its files are listed once the layout is known
        else:
            entries.append(Entry(shown, False, [("", path)]))
    return entries


def _list_folder(entry: Entry) -> None:
    """List the files below a folder entry of an unpacked export (at most one more than a student may hold)."""
    path = entry.files[0][1]
    entry.files = []
    for top, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED)
        rel = os.path.relpath(top, path)
        for f in sorted(files, key=os.fsencode):
            if f.startswith("."):
                continue
            entry.files.append((display_name(f if rel == "." else f"{rel}/{f}"), Path(top) / f))
            if len(entry.files) > _MAX_FILES:
                return


def locate_export(path: str, config: Any, scratch: Callable[[], Path]) -> list[Submission] | None:
    """The submissions of a Canvas or Moodle export (zip or folder), or None when ``path`` is not one.

    Parameters
    ----------
    path : str
        A ``.zip`` file or a folder, as given on the command line.
    config : grader.config.core.Config
        ``--lms`` and ``--attempt`` are read from it, and the pack.
    scratch : callable
        Makes a temporary folder removed at the end of the run (for a zip's extracted files).

    Returns
    -------
    list of Submission or None
        One per LMS user (id: the LMS's name for them, made unique with the
        user id when two share it; ``lms`` holds the system, user id, name,
        LATE mark, the chosen file and what was said of the choice), and one
        per entry that cannot be placed (its error); None for anything else.

    Raises
    ------
    grader.errors.UsageError
        For an export of an unknown layout (see `decide`), or a zip unusable as a whole.
    """
    option = config.option("lms")
    p = Path(path)
    is_zip = path.lower().endswith(".zip") and p.is_file()
    if option == "none" or not (is_zip or p.is_dir()):
        return None
    skipped: list[str] = []
    if is_zip:
        from grader.intake.archive import ArchiveError, open_zip

        try:
            zf = open_zip(p)
        except ArchiveError as exc:
            raise UsageError(f"{exc}; export the submissions again") from None
        with zf:
            entries = _zip_entries(zf, skipped)
            system = decide(entries, path, option)
            if system is None:
                return None
            return _submissions(entries, system, path, config, zf, scratch, skipped)
    entries = _folder_entries(p, config.out_dir)
    system = decide(entries, path, option)
    if system is None:
        return None
    for entry in entries:
        if entry.is_dir and not entry.problem:
            _list_folder(entry)
    return _submissions(entries, system, path, config, None, scratch, skipped)


def _submissions(
    entries: list[Entry],
    system: str,
    path: str,
    config: Any,
    zf: zipfile.ZipFile | None,
    scratch: Callable[[], Path],
    skipped: list[str],
) -> list[Submission]:
    from grader.intake.archive import ArchiveError, Student, _take
    from grader.intake.files import make_submission, notebook_submission

    pack = config.pack
    which = config.option("attempt") or "latest"
    placed = place(entries, system, path)
    names: dict[str, int] = {}
    for s in placed:
        if isinstance(s, Placed):
            names[s.name] = names.get(s.name, 0) + 1
    dest = scratch() if zf is not None else None
    total = [0]
    found: list[Submission] = []
    for index, s in enumerate(placed):
        if isinstance(s, Entry):
            raw = s.name.encode("utf-8", "surrogatepass")
            lms = {"system": system, "user": "", "name": s.name}
            found.append(Submission(s.name, f"{path}:{s.name}", None, "", s.problem, raw_name=raw, lms=lms))
            continue
        label = s.name or s.user
        sid = label if names.get(s.name, 0) == 1 and s.name else f"{label} ({s.user})" if s.name else s.user
        shown = f"{path}:{s.entries[0]}"
        raw = s.entries[0].encode("utf-8", "surrogatepass")
        lms = {"system": system, "user": s.user, "name": s.name, "late": "1" if s.late else "0"}
        chosen, count, words = (None, 0, "") if s.problem else choose(s, pack.submission, pack.notebook, which)
        if chosen is None:
            lms["intake"] = s.problem or words
            found.append(Submission(sid, shown, None, "", s.problem or f"{words} ({shown})", raw_name=raw, lms=lms))
            continue
        lms["file"] = chosen.upload
        if system == "canvas":
            lms["attempt"], lms["attempts"] = str(chosen.file_id), str(count)
        if words:
            lms["intake"] = words
            print(f"grader: {display(sid)} ({system} user {display(s.user)}): {display(words)}", file=sys.stderr)
        target = pack.notebook if chosen.upload.endswith(".ipynb") else pack.submission
        if zf is not None:
            assert dest is not None
            where = dest / f"{index:05d}"
            student = Student(s.entries[0], True)
            try:
                _take(zf, [chosen.handle], student, where, Path(path), total, skipped, target)
            except ArchiveError as exc:
                raise UsageError(f"{exc}; export the submissions again") from None
            if student.problem or student.file is None:
                problem = student.problem or f"{chosen.upload} could not be extracted from {path}"
                found.append(Submission(sid, shown, None, "", problem, raw_name=raw, lms=lms))
                continue
            folder, file = where, student.file
        else:
            file = chosen.handle
            folder = file.parent
        if target == pack.notebook:
            sub = notebook_submission(sid, folder, file, raw, pack)
        else:
            sub = make_submission(sid, folder, file, raw, pack)
        problem = sub.problem.replace(str(folder), shown) if zf is not None else sub.problem
        found.append(replace(sub, path=shown, problem=problem, lms=lms))
    for problem in skipped:
        print(f"grader: warning: {display(path)}: skipped {display(problem)}", file=sys.stderr)
    return found


# --- who a key names: manual rows, late days -------------------------------------------------------


def shared_name(key: str, located: Sequence[Submission]) -> str:
    """Why ``key`` names no one student: "" unless it is the display name of several LMS students.

    Parameters
    ----------
    key : str
        A ``manual.csv`` student or a policy's ``late_days.students`` key.
    located : sequence of grader.models.Submission
        The run's submissions as located.

    Returns
    -------
    str
        "" or the reason and the fix (give the LMS user id).
    """
    if any(key == s.id or key == s.lms.get("user") for s in located):
        return ""
    named = [s for s in located if s.lms.get("name") == key and s.lms.get("user")]
    if len(named) < 2:
        return ""
    users = ", ".join(f"{s.lms['system'].capitalize()} user {s.lms['user']}" for s in named)
    return f"{key!r} is the name of {len(named)} students ({users}); give the LMS user id of the one meant"


def student_problem(key: str, located: Sequence[Submission]) -> str:
    """Why ``key`` names no one student of a run with an LMS export; "" when it names one, or the run has none.

    Parameters
    ----------
    key : str
        A ``manual.csv`` student: an id or an LMS user id.
    located : sequence of grader.models.Submission
        The run's submissions as located.

    Returns
    -------
    str
        "" or the reason and the fix.
    """
    if not any(s.lms.get("system") for s in located):
        return ""
    shared = shared_name(key, located)
    if shared:
        return shared
    if any(key == s.id or key == s.lms.get("user") for s in located):
        return ""
    return f"no student of this run has the id or LMS user id {key!r}; give an id or lms.user from results.json"
