"""Safe extraction of the zip archives that learning-management systems export.

Only ``.py`` files are extracted. A member with an absolute path, a ``..``
component, a symbolic link, or more bytes than allowed is skipped and
reported; the archive as a whole is refused only when it is not a zip file
or exceeds the total limits (a zip bomb).
"""

from __future__ import annotations

import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

__all__ = ["ArchiveError", "Extracted", "safe_extract"]

MAX_MEMBERS = 20_000
"""Most members read from one archive."""
MAX_MEMBER_BYTES = 2 * 1024 * 1024
"""Largest extracted file, in bytes (2 MiB, the submission size limit)."""
MAX_TOTAL_BYTES = 512 * 1024 * 1024
"""Most bytes extracted from one archive (512 MiB)."""


class ArchiveError(Exception):
    """The archive cannot be used at all (not a zip, or over the total limits)."""


@dataclass
class Extracted:
    """What `safe_extract` did.

    Attributes
    ----------
    root : pathlib.Path
        The folder to locate submissions in (the archive's single top-level
        folder when it has one).
    skipped : list of str
        ``"member: reason"`` for every member left out.
    left_out : dict of pathlib.Path to str
        Where a member that was left out would have been extracted, and
        why (so its student is still listed, with the reason).
    """

    root: Path
    skipped: list[str] = field(default_factory=list)
    left_out: dict[Path, str] = field(default_factory=dict)


def _safe_parts(name: str) -> tuple[str, ...] | None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or any(p in ("..", "") for p in path.parts) or (path.parts and ":" in path.parts[0]):
        return None
    return path.parts


def safe_extract(archive: Path, dest: Path) -> Extracted:
    """Extract the ``.py`` members of ``archive`` into ``dest``, safely.

    Parameters
    ----------
    archive : pathlib.Path
        A zip file.
    dest : pathlib.Path
        An empty folder.

    Returns
    -------
    Extracted

    Raises
    ------
    ArchiveError
        If the file is not a zip archive, has more than `MAX_MEMBERS`
        members, or would extract more than `MAX_TOTAL_BYTES`.
    """
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArchiveError(f"{archive}: not a readable zip archive ({exc})") from None
    skipped: list[str] = []
    left_out: dict[Path, str] = {}
    total = 0
    with zf:
        members = zf.infolist()
        if len(members) > MAX_MEMBERS:
            raise ArchiveError(f"{archive}: {len(members)} members; the limit is {MAX_MEMBERS}")
        for info in members:
            if info.is_dir() or not info.filename.endswith(".py"):
                parts = _safe_parts(info.filename.rstrip("/"))
                if parts and len(parts) > 1 and not any(p.startswith((".", "__MACOSX")) for p in parts):
                    # Keep the folder, so a student who sent no .py file is still listed.
                    dest.joinpath(*parts[:-1] if not info.is_dir() else parts).mkdir(parents=True, exist_ok=True)
                continue
            parts = _safe_parts(info.filename)
            if parts is None:
                skipped.append(f"{info.filename}: an absolute path or one with '..', refused (it may lead outside)")
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                skipped.append(f"{info.filename}: a symbolic link")
                left_out[dest.joinpath(*parts)] = "it is a symbolic link"
                dest.joinpath(*parts).parent.mkdir(parents=True, exist_ok=True)
                continue
            if parts[0] in ("__MACOSX",) or any(p.startswith(".") for p in parts):
                continue
            target = dest.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            with zf.open(info) as src, open(target, "wb") as out:
                while chunk := src.read(1 << 16):
                    written += len(chunk)
                    total += len(chunk)
                    if total > MAX_TOTAL_BYTES:
                        raise ArchiveError(f"{archive}: extracts to more than {MAX_TOTAL_BYTES >> 20} MiB (a zip bomb?)")
                    if written > MAX_MEMBER_BYTES:
                        break
                    out.write(chunk)
            if written > MAX_MEMBER_BYTES:
                target.unlink()
                skipped.append(f"{info.filename}: larger than {MAX_MEMBER_BYTES >> 20} MiB")
                left_out[target] = f"it is larger than {MAX_MEMBER_BYTES >> 20} MiB"
    root = dest
    entries = [p for p in dest.iterdir()]
    while len(entries) == 1 and entries[0].is_dir() and not (entries[0] / "attention.py").exists():
        root = entries[0]
        entries = list(root.iterdir())
    return Extracted(root, skipped, left_out)
