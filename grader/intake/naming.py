"""The naming rule for students: ids kept verbatim, file names ("slugs") made safe.

A student's **id** is the folder name, the ``<id>.py`` file's stem, the
archive member's name or the roster cell, kept as it was (a name that is not
valid UTF-8 is shown with U+FFFD replacement characters). It is what
reports show (each writer escapes it for its format) and the ``id`` of
``results.json``. Two submissions of one batch never share an id
(`unique_ids`).

Every per-student file (``DIR/<slug>.html``, ``DIR/gradescope/<slug>.json``,
the links of ``index.html``) is named after the student's **slug**
(`assign_slugs`), which is:

* the id in Unicode NFC, with control, format and bidi characters (Unicode
  categories Cc, Cf, Cs, Co, Cn, Zl, Zp) removed, letters, marks and digits
  of any script and ``. _ -`` kept, every other character (path separators,
  spaces, ``:*?"<>|``, U+FFFD...) replaced by ``_``, no leading ``.`` or
  ``-`` and no trailing ``.`` (so never ``.``, ``..`` or a hidden file), and
  ``student`` when nothing is left;
* at most `MAX_SLUG_BYTES` bytes of UTF-8: a longer one is cut and ends
  in ``-`` and 8 hex digits of the SHA-256 of the name's bytes; so does the
  slug of a name that is not valid UTF-8 (its raw bytes are hashed), so two
  such names never share a slug;
* unique without regard to case (``Ann`` and ``ann`` get two pages, also on
  macOS and Windows) and never one of `RESERVED` (the class-level files of
  the output folder), compared case-insensitively, and never a Windows device
  name before its first dot (``con``, ``aux.py``, ``lpt1``: a leading ``_`` is added):
  a slug already taken gets ``-2``, ``-3``... the first suffix that is
  neither taken nor another student's own slug, in the batch's order.

Names that are equal after NFC (``José`` typed two ways) are two ids, since
they are two folders, with the same slug base, so the second gets ``-2``.

The batch's order is the command line's, then sorted names within a folder,
so the same folders give the same ids and slugs, byte for byte.
"""

from __future__ import annotations

import dataclasses
import hashlib
import unicodedata
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = [
    "DEVICES",
    "MAX_SLUG_BYTES",
    "RESERVED",
    "assign_slugs",
    "display_name",
    "name_bytes",
    "name_submissions",
    "slug_base",
    "slug_key",
    "slugs_of",
    "unique_ids",
    "what_it_holds",
]

MAX_SLUG_BYTES = 64
"""Longest slug base, in bytes of UTF-8 (a ``-N`` suffix for duplicates may follow)."""

RESERVED = (
    "index",
    "summary",
    "results",
    "gradebook",
    "junit",
    "gradescope",
    "similarity",
    "staff",
    "canvas",
    "moodle",
)
"""Slugs no student gets (case-insensitively): the stems of the files and folders the
writers make in the output folder (``index.html``, ``summary.html``, ``results.json``,
``gradebook.csv``, ``gradebook.sqlite``, ``junit.xml``, ``gradescope/``, ``similarity.html``,
``staff/``, ``canvas.csv``, ``moodle.csv``)."""

DEVICES = frozenset(
    (
        "con",
        "prn",
        "aux",
        "nul",
        "conin$",
        "conout$",
        *(f"com{i}" for i in range(10)),
        *(f"lpt{i}" for i in range(10)),
        "com¹",
        "com²",
        "com³",
        "lpt¹",
        "lpt²",
        "lpt³",
    )
)
"""Names Windows reserves for devices, with any extension (``con.py.html`` too): a slug
starting with one before its first dot gets a leading ``_``."""

_DROPPED = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))
_HASH_CHARS = 8


def name_bytes(name: str | bytes) -> bytes:
    """The bytes of a file name as the file system holds them.

    ``str`` names from ``os.listdir`` carry undecodable bytes as lone
    surrogates (``surrogateescape``); they are turned back into those bytes.
    """
    if isinstance(name, bytes):
        return name
    try:
        return name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no decoder made: keep its code point's bytes
        return name.encode("utf-8", "surrogatepass")


def display_name(name: str | bytes) -> str:
    """A file name as valid text: bytes that are not UTF-8 become U+FFFD.

    Parameters
    ----------
    name : str or bytes
        A name from the file system (``str`` with surrogate escapes, or bytes).

    Returns
    -------
    str
        Valid Unicode (no lone surrogates), otherwise the name unchanged.
    """
    return name_bytes(name).decode("utf-8", "replace") if isinstance(name, bytes) or _has_surrogates(name) else name


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:_HASH_CHARS]


def slug_base(sid: str, raw: bytes | None = None) -> str:
    """The file-name-safe form of one id, before duplicates are told apart.

    Parameters
    ----------
    sid : str
        The student id (any text; lone surrogates are treated as undecodable bytes).
    raw : bytes, optional
        The name's bytes on disk, when it came from the file system; a name
        whose bytes are not UTF-8 gets a hash of them as a suffix.

    Returns
    -------
    str
        Non-empty, at most `MAX_SLUG_BYTES` bytes of UTF-8, made only of
        letters, marks, digits and ``._-``; never ``.``/``..``-like.
    """
    if raw is None:
        raw = name_bytes(sid)
    try:
        raw.decode("utf-8")
        valid = not _has_surrogates(sid)
    except UnicodeDecodeError:
        valid = False
    text = unicodedata.normalize("NFC", display_name(sid))
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if category in _DROPPED:
            continue
        kept.append(ch if ch in "._-" or category[0] in "LMN" else "_")
    slug = "".join(kept).lstrip(".-").rstrip(".") or "student"
    if slug.split(".")[0].casefold() in DEVICES:
        slug = f"_{slug}"
    room = MAX_SLUG_BYTES - 1 - _HASH_CHARS
    if not valid or len(slug.encode("utf-8")) > MAX_SLUG_BYTES:
        cut = slug.encode("utf-8")[:room].decode("utf-8", "ignore").rstrip(".") or "student"
        slug = f"{cut}-{_digest(raw)}"
    return slug


def slug_key(slug: str) -> str:
    """What two slugs are compared by: case-folded, NFC (as case-insensitive file systems do)."""
    return unicodedata.normalize("NFC", slug.casefold())


def assign_slugs(
    ids: Sequence[str], raws: Sequence[bytes | None] | None = None, reserved: Sequence[str] = RESERVED
) -> list[str]:
    """One slug per id, unique without regard to case and never reserved.

    Parameters
    ----------
    ids : sequence of str
        The batch's ids, in its order.
    raws : sequence of bytes or None, optional
        Each id's name bytes on disk (see `slug_base`); None for none.
    reserved : sequence of str
        Slugs never given out, compared case-insensitively.

    Returns
    -------
    list of str
        Same length and order as ``ids``. A taken slug gets the first
        ``-2``, ``-3``... that is neither taken nor another id's own slug.
    """
    raws = list(raws) if raws is not None else [None] * len(ids)
    bases = [slug_base(sid, raw) for sid, raw in zip(ids, raws)]
    own = {slug_key(b) for b in bases}
    taken = {slug_key(r) for r in reserved}
    slugs = []
    for base in bases:
        slug = base
        if slug_key(slug) in taken:
            n = 2
            while slug_key(f"{base}-{n}") in taken or slug_key(f"{base}-{n}") in own:
                n += 1
            slug = f"{base}-{n}"
        taken.add(slug_key(slug))
        slugs.append(slug)
    return slugs


def unique_ids(ids: Sequence[str], alternatives: Sequence[str] | None = None) -> list[str]:
    """Tell apart the submissions of a batch that share an id.

    Parameters
    ----------
    ids : sequence of str
        Ids in the batch's order.
    alternatives : sequence of str, optional
        A second name for each (the file name ``frank.py`` beside the folder
        ``frank``), or "" for none.

    Returns
    -------
    list of str
        The first submission with an id keeps it; a later one takes its
        alternative when no other submission has that id, else the first
        ``<id>-2``, ``<id>-3``... that no other submission has (so ``frank``,
        ``frank-2`` and ``frank.py`` stay three ids).
    """
    alternatives = list(alternatives) if alternatives is not None else [""] * len(ids)
    every = set(ids)
    taken: set[str] = set()
    chosen = []
    for sid, alt in zip(ids, alternatives):
        new = sid
        if new in taken:
            if alt and alt not in taken and alt not in every:
                new = alt
            else:
                n = 2
                while f"{sid}-{n}" in taken or f"{sid}-{n}" in every:
                    n += 1
                new = f"{sid}-{n}"
        taken.add(new)
        chosen.append(new)
    return chosen


def name_submissions(submissions: Sequence[T]) -> list[T]:
    """Give a batch's submissions unique ids and their slugs (the module's rule).

    Parameters
    ----------
    submissions : sequence of grader.models.Submission
        In the batch's order; ``raw_name`` (when set) supplies the
        alternative id (``frank.py``) and the bytes hashed into slugs.

    Returns
    -------
    list of grader.models.Submission
        The same submissions with ``id`` made unique and ``slug`` set.
    """
    ids = []
    alternatives = []
    raws: list[bytes | None] = []
    for sub in submissions:
        sid = display_name(sub.id)  # type: ignore[attr-defined]
        raw = sub.raw_name or None  # type: ignore[attr-defined]
        alt = display_name(raw) if raw else ""
        ids.append(sid)
        alternatives.append(alt if alt != sid else "")
        raws.append(raw)
    ids = unique_ids(ids, alternatives)
    slugs = assign_slugs(ids, raws)
    return [
        dataclasses.replace(sub, id=sid, slug=slug)  # type: ignore[type-var]
        for sub, sid, slug in zip(submissions, ids, slugs)
    ]


def slugs_of(items: Sequence[Any]) -> dict[str, str]:
    """Each item's slug by id: its own ``slug`` when every item has a distinct one, else made from the ids.

    Parameters
    ----------
    items : sequence
        Objects with ``id`` and (maybe) ``slug`` attributes: submissions or results.

    Returns
    -------
    dict of str to str
    """
    own = [getattr(item, "slug", "") for item in items]
    keys = {slug_key(s) for s in own}
    if all(own) and len(keys) == len(own) and not keys & {slug_key(r) for r in RESERVED}:
        return {item.id: slug for item, slug in zip(items, own)}
    ids = [item.id for item in items]
    return dict(zip(ids, assign_slugs(ids)))


def what_it_holds(entries: Sequence[tuple[str, bool]], filename: str, notebook: str | None = None) -> str:
    """Say, for a student folder without ``filename``, what it holds and what to do.

    Parameters
    ----------
    entries : sequence of (str, bool)
        The folder's entries as paths relative to it (``"lab/attention.py"``)
        and whether each is a folder; hidden ones and ``__pycache__`` are skipped.
    filename : str
        The file the folder should hold (the course pack's submission file).
    notebook : str, optional
        The notebook graded like it (default: ``filename``'s stem and ``.ipynb``).

    Returns
    -------
    str
        E.g. ``"it holds Attention.PY: rename it attention.py"``, ``"it holds
        lab/attention.py: move it up into the student folder"``, ``"it holds a
        notebook, lab.ipynb: rename it attention.ipynb (notebooks are graded
        too) or save it as attention.py"``, ``"it holds util.py, notes.txt"`` or ``"it is empty"``.
    """
    shown = [
        (display_name(p), d)
        for p, d in entries
        if not any(part.startswith(".") or part == "__pycache__" for part in p.split("/"))
    ]
    files = [p for p, d in shown if not d]
    stem = filename.rsplit(".", 1)[0].lower()
    top = [p for p in files if "/" not in p]
    near = [p for p in top if p.lower() == filename.lower() or (p.lower().startswith(stem) and ".py" in p.lower())]
    if near:
        return f"it holds {', '.join(sorted(near)[:3])}: rename it {filename}"
    nested = [p for p in files if p.rsplit("/", 1)[-1] == filename and "/" in p]
    if nested:
        return f"it holds {min(nested, key=len)}: move it up into the student folder"
    books = [p for p in files if p.lower().endswith(".ipynb")]
    if books:
        notebook = notebook or filename.rsplit(".", 1)[0] + ".ipynb"
        return (
            f"it holds a notebook, {min(books)}: rename it {notebook} (notebooks are graded too) "
            f"or save it as {filename}"
        )
    if not shown:
        return "it is empty"
    listed = sorted(top or files, key=lambda p: (not p.endswith(".py"), p))
    more = f" and {len(shown) - 4} more" if len(shown) > 4 else ""
    return f"it holds {', '.join(listed[:4])}{more}, no {filename}"
