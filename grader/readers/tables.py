"""Reading an instructor's CSV table: ``manual.csv``, rosters, LMS worksheets (``--lms-times``).

`read_table` sniffs what spreadsheets save: the encoding (UTF-8 with or without a byte-order
mark, UTF-16 with one: Excel's "Unicode Text") and the delimiter (comma, semicolon: Excel's
European default, tab), and refuses in one line, naming what it found and how to save the file
right, a file that is not a CSV text (an Excel workbook renamed ``.csv``, Latin-1 text, binary).
Each row keeps its line number, so every error a reader raises names the file, the line, the
column and the fix (`Table.problem`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os

from grader.errors import GraderError
from grader.readers import read_bounded

__all__ = ["MAX_TABLE_BYTES", "SAVE_AS", "Table", "read_table"]

MAX_TABLE_BYTES = 64 << 20
"""Largest CSV file read, in bytes (64 MiB: a class's worksheet is a few hundred KiB)."""

SAVE_AS = "save it as 'CSV UTF-8 (Comma delimited)' (Excel: File > Save As; LibreOffice: Text CSV, UTF-8)"
"""The fix every encoding or format refusal ends with."""

_DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab"}


@dataclasses.dataclass(frozen=True)
class Table:
    """A CSV file's rows, each with the line it starts on.

    Attributes
    ----------
    path : str
        The file.
    option : str
        The command-line option that named it (``--manual``), or "" for a pack's file.
    header : list of str
        The first non-empty row's cells, stripped and lower-cased.
    rows : list of (int, list of str)
        The rows after the header (blank rows left out), with their line numbers (from 1).
    delimiter : str
        The delimiter found (``,``, ``;`` or a tab).
    encoding : str
        The encoding found (``utf-8``, ``utf-8-sig``, ``utf-16``).
    header_line : int
        The header's line number.
    """

    path: str
    option: str
    header: list[str]
    rows: list[tuple[int, list[str]]]
    delimiter: str = ","
    encoding: str = "utf-8"
    header_line: int = 1

    @property
    def name(self) -> str:
        """How messages name the file: ``--manual manual.csv``."""
        return f"{self.option} {self.path}" if self.option else self.path

    def problem(self, line: int, column: str, what: str, fix: str) -> str:
        """One error line: ``--manual m.csv: line 3: points: 'x' is not a number; give ...``."""
        where = f"line {line}: {column}: " if column else f"line {line}: "
        return f"{self.name}: {where}{what}; {fix}"

    def column(self, *names: str) -> int | None:
        """The index of the first of ``names`` (lower case) in the header, or None."""
        return next((self.header.index(n) for n in names if n in self.header), None)


def _describe(raw: bytes) -> str | None:
    """What a file that is no CSV text is, by its first bytes, or None."""
    if raw.startswith(b"PK\x03\x04"):
        return "an Excel workbook (.xlsx) or another zip file, not a CSV file"
    if raw.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "an old Excel workbook (.xls), not a CSV file"
    if raw.startswith(b"%PDF"):
        return "a PDF document, not a CSV file"
    if raw.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "UTF-32 text, which the grader does not read"
    return None


def _decode(raw: bytes, name: str, error: type[GraderError]) -> tuple[str, str]:
    kind = _describe(raw)
    if kind is not None:
        raise error(f"{name}: {kind}; {SAVE_AS}")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    elif raw.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    else:
        encoding = "utf-8"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        found = f"byte 0x{raw[exc.start]:02x} at offset {exc.start}" if exc.start < len(raw) else "a cut-off character"
        guess = "" if encoding == "utf-16" else ", likely Latin-1 or Windows-1252 (Excel's 'CSV (Comma delimited)')"
        what = "UTF-16 text with a broken character" if encoding == "utf-16" else f"not UTF-8 text{guess}"
        raise error(f"{name}: {what} ({found}); {SAVE_AS}") from None
    if "\x00" in text:
        raise error(f"{name}: holds NUL characters (UTF-16 without a byte-order mark, or a binary file); {SAVE_AS}")
    return text, encoding


def _sniff(text: str) -> str:
    """The delimiter of the first non-empty line: the most frequent of comma, semicolon and tab (outside quotes)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    outside = "".join(part for i, part in enumerate(first.split('"')) if i % 2 == 0)
    counts = {d: outside.count(d) for d in _DELIMITERS}
    best = max(counts, key=lambda d: (counts[d], d == ","))
    return best if counts[best] else ","


def read_table(
    path: str | os.PathLike[str], option: str, error: type[GraderError], max_bytes: int = MAX_TABLE_BYTES
) -> Table:
    """Read a CSV file: encoding and delimiter sniffed, rows with their line numbers.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    option : str
        The option that named it (``--roster``), for messages; "" for none.
    error : type of GraderError
        Raised for every refusal (`grader.errors.UsageError` for exit 2, `grader.errors.ConfigError` for 3).
    max_bytes : int
        Largest file read.

    Returns
    -------
    Table
        Empty ``header`` and ``rows`` for a file with no non-empty row.

    Raises
    ------
    GraderError
        Of class ``error``, in one line naming the file, what was found and the fix: unreadable,
        a folder, too large, an Excel workbook or another binary file, an encoding other than
        UTF-8 or UTF-16 with a byte-order mark, or a CSV syntax error (with its line).
    """
    name = f"{option} {path}" if option else str(path)
    raw = read_bounded(
        path,
        max_bytes,
        error,
        folder=f"{name}: is a folder; give the CSV file",
        unreadable=lambda why: f"{name}: cannot read the CSV file ({why})",
        too_large=f"{name}: larger than {max_bytes >> 20} MiB; not a table the grader reads",
    )
    text, encoding = _decode(raw, name, error)
    delimiter = _sniff(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    rows: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for row in reader:
            if row and any(cell.strip() for cell in row):
                rows.append((start, row))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise error(
            f"{name}: line {reader.line_num + 1}: not valid CSV ({exc}); close every quoted cell, or {SAVE_AS}"
        ) from None
    if not rows:
        return Table(str(path), option, [], [], delimiter, encoding)
    header_line, header = rows[0]
    return Table(
        str(path),
        option,
        [c.strip().lstrip("\ufeff").lower() for c in header],
        rows[1:],
        delimiter,
        encoding,
        header_line,
    )


def delimiter_name(delimiter: str) -> str:
    """``comma``, ``semicolon`` or ``tab``."""
    return _DELIMITERS.get(delimiter, repr(delimiter))
