"""Uploads: checked (name, size, type) and stored under their SHA-256, outside any served folder.

Nothing here parses Python or runs it: a ``.py`` upload must be UTF-8 text without NUL bytes, an
``.ipynb`` upload a JSON object with a ``cells`` list. The stored file's name is its hash; the
name the student chose is never a path.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Refused", "StoredUpload", "check_upload", "store_upload", "upload_path"]


class Refused(Exception):
    """An upload or request refused: ``status`` and one sentence for the user."""

    def __init__(self, status: int, sentence: str) -> None:
        super().__init__(sentence)
        self.status = status
        self.sentence = sentence


@dataclass(frozen=True)
class StoredUpload:
    """An accepted upload: the course's file name (``attention.py``), its hash and size."""

    filename: str
    sha256: str
    size: int


def check_upload(name: str, data: bytes, allowed: tuple[str, str], max_bytes: int) -> str:
    """The course's file name for an upload, or `Refused` (413 too big, 415 wrong type).

    Parameters
    ----------
    name : str
        The name the browser sent (only its suffix is read).
    data : bytes
    allowed : (str, str)
        The course's submission and notebook names (``attention.py``, ``attention.ipynb``).
    max_bytes : int
    """
    if len(data) > max_bytes:
        raise Refused(413, f"The file is larger than {max_bytes // 1024} KiB; upload your {allowed[0]} only.")
    suffix = Path(name.replace("\\", "/")).suffix.lower()
    by_suffix = {Path(n).suffix.lower(): n for n in allowed}
    if suffix not in by_suffix:
        raise Refused(415, f"Upload {allowed[0]} or {allowed[1]}; other kinds of file are not graded.")
    if not data.strip():
        raise Refused(400, "The file is empty; upload your work.")
    if b"\0" in data:
        raise Refused(415, f"The file is not text; upload {allowed[0]} or {allowed[1]}.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(415, "The file is not UTF-8 text; save it as UTF-8 and upload it again.") from None
    if suffix == ".ipynb":
        try:
            notebook = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested too deep for the decoder (a JSON bomb)
            raise Refused(415, "The notebook is not valid JSON; save it from Jupyter and upload it again.") from None
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            raise Refused(415, "The file is not a Jupyter notebook (no cells); upload your attention.ipynb.")
    return by_suffix[suffix]


def upload_path(root: Path, sha256: str, filename: str) -> Path:
    """Where the upload with this hash is kept: ``root/ab/<sha256><suffix>``."""
    return root / sha256[:2] / (sha256 + Path(filename).suffix)


def store_upload(root: Path, filename: str, data: bytes) -> StoredUpload:
    """Write ``data`` under its hash (atomically; an identical upload is stored once)."""
    sha256 = hashlib.sha256(data).hexdigest()
    path = upload_path(root, sha256, filename)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    return StoredUpload(filename, sha256, len(data))
