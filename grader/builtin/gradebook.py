"""Built-in plugin: the SQLite gradebook that makes batches resumable.

Every result is written to ``DIR/gradebook.sqlite`` (or ``--gradebook
FILE``) as soon as it is produced, keyed by `grader.grading.session.result_key`
(the file's SHA-256, the spec hash, the grader version and the settings
that change a result), and committed a few at a time (`Gradebook.put`).
Running the same command again, even after ``kill -9``, takes the committed
results from the gradebook instead of grading them again (a kill costs the
rows not committed yet, which are graded again); ``--regrade`` grades
everything anew. ``grader check`` keeps no gradebook.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import threading
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader._version import __version__
from grader.collected import COLLECTED
from grader.errors import UsageError
from grader.execution.memo import IdentityTable
from grader.fileio import output_file
from grader.markers import hookimpl
from grader.models import (
    ExerciseResult,
    Submission,
    SubmissionResult,
    exercise_from_dict,
    exercise_to_dict,
    result_from_dict,
    result_to_dict,
)
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_BOOK: StashKey[Gradebook] = StashKey()
_KEYS = StashKey[dict[str, tuple[str, str]]]()
_REUSED = StashKey[set[str]]()

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,          -- grader.grading.session.result_key
    sha256 TEXT NOT NULL,          -- the submission file's SHA-256
    spec_hash TEXT NOT NULL,
    grader_version TEXT NOT NULL,
    student TEXT NOT NULL,         -- the id it was first graded under
    result BLOB NOT NULL           -- SubmissionResult as JSON, automatic (no adjustment), zlib-compressed
                                   -- (a TEXT of plain JSON in gradebooks written before; both are read);
                                   -- under the key PARTS_MARK ends, "exercises" holds the parts' hashes
);
CREATE TABLE IF NOT EXISTS parts (
    hash TEXT PRIMARY KEY,         -- the SHA-256 of the exercise result's JSON
    part BLOB NOT NULL             -- one ExerciseResult as JSON, zlib-compressed: stored once, however many rows name it
);
CREATE TABLE IF NOT EXISTS arrivals (
    student TEXT NOT NULL,         -- the id
    sha256 TEXT NOT NULL,          -- the file's SHA-256
    first_seen TEXT NOT NULL,      -- ISO 8601 UTC: when the grader first saw these bytes for this student
    PRIMARY KEY (student, sha256)
);
"""


PARTS_MARK = "+parts"
"""The end of a row's key whose ``"exercises"`` are hashes of rows of ``parts`` (a grader that does not
know parts looks the plain key up, finds nothing and grades again, never misreads a row)."""

KEPT_PARTS = 1024
"""Exercise results a gradebook keeps decoded (a resume's class shares most of them)."""

COMMIT_ROWS = 64
"""Rows committed together at most (`Gradebook.put`)."""

COMMIT_SECONDS = 0.5
"""A row waits at most this long for its commit, counted from the first row of its transaction
(`Gradebook.put`): another run on the same gradebook waits for the write lock no longer."""

CACHE_KIB = 256
"""SQLite's page cache of the gradebook, in KiB (``PRAGMA cache_size``; SQLite's default is 2,000)."""


class Gradebook:
    """A SQLite file of results, written as they are produced and committed in batches (`put`).

    Parameters
    ----------
    path : pathlib.Path
        The database file; created when missing.

    Raises
    ------
    grader.errors.UsageError
        If the file cannot be opened as a SQLite database.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        import sqlite3  # here, not at the top: 'grader check' keeps no gradebook (issue 16)

        try:
            self.db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            # Each result is written once and read once (a resume's lookup): SQLite's default 2 MB page cache
            # would only hold pages of results already written, in the grader's memory (issue 16); the
            # operating system's file cache serves the few pages read again.
            self.db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            self.db.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise UsageError(
                f"--gradebook {path}: not a usable SQLite file ({exc}); remove it or choose another"
            ) from None
        self.reused = 0
        self.pending = 0  # rows written since the last commit
        self.since = 0.0  # when the first of them was (time.monotonic)
        self.timer: threading.Timer | None = None  # commits the open batch COMMIT_SECONDS after its first row
        self.closed = False
        self.parts: dict[str, ExerciseResult] = {}  # decoded, by hash (at most KEPT_PARTS)
        self.parts_stored: set[str] = set()  # hashes this gradebook holds, as far as this run knows
        self.kept_parts = IdentityTable(256)  # each exercise-results tuple's parts (`_part`) and their hashes' JSON

    def get(self, key: str) -> SubmissionResult | None:
        """The stored result for ``key``, or None."""
        with self.lock:
            row = self.db.execute("SELECT result FROM results WHERE key = ?", (key + PARTS_MARK,)).fetchone()
            if not row:  # a row of a gradebook written before parts: the whole result in it
                row = self.db.execute("SELECT result FROM results WHERE key = ?", (key,)).fetchone()
                if not row:
                    return None
                data = row[0]
                return result_from_dict(json.loads(zlib.decompress(data) if isinstance(data, bytes) else data))
            data = json.loads(zlib.decompress(row[0]))
            hashes = data["exercises"]
            data["exercises"] = []
            exercises = tuple(self._part(h) for h in hashes)
        return dataclasses.replace(result_from_dict(data), exercises=exercises)

    def _part(self, digest: str) -> ExerciseResult:
        """The exercise result stored under ``digest`` (decoded once; the caller holds the lock)."""
        part = self.parts.get(digest)
        if part is None:
            row = self.db.execute("SELECT part FROM parts WHERE hash = ?", (digest,)).fetchone()
            if row is None:
                raise KeyError(f"{self.path}: a result names an exercise part it does not hold ({digest})")
            part = exercise_from_dict(json.loads(zlib.decompress(row[0])))
            if len(self.parts) >= KEPT_PARTS:
                self.parts.clear()
            self.parts[digest] = part
        return part

    def arrival(self, student: str, sha256: str, now: str) -> str:
        """When these bytes of this student were first seen: recorded as ``now`` the first time, ISO 8601 UTC."""
        with self.lock:
            inserted = self.db.execute("INSERT OR IGNORE INTO arrivals VALUES (?, ?, ?)", (student, sha256, now))
            if inserted.rowcount and self.db.in_transaction:
                self._commit()  # a first arrival is never lost to a kill: the next run would record a later one
            first_seen: str = self.db.execute(
                "SELECT first_seen FROM arrivals WHERE student = ? AND sha256 = ?", (student, sha256)
            ).fetchone()[0]
            return first_seen

    def put(self, key: str, spec_hash: str, result: SubmissionResult) -> None:
        """Store a result, committed with the rows around it.

        A transaction holds at most `COMMIT_ROWS` rows, and is committed by the first row that comes
        `COMMIT_SECONDS` or more after the first of them, by a first `arrival`, or by `close` (the
        run's end). A kill (``kill -9``, a crash) loses the rows not committed
        yet, whose submissions the next run grades again. One commit per row cost a WAL frame and
        four file locks per submission.

        The automatic result is stored (`grader.term.strip_adjustments`):
        manual scores and penalties are applied again on every run.
        """
        from grader.term import strip_adjustments

        result = strip_adjustments(result)
        # Each exercise result once (a class shares most: 31 KB of JSON a submission, a few hundred bytes
        # a row), compressed: the same messages and hints repeat in every check. Level 1: half level 6's
        # time, for a blob 17% larger.
        kept = self.kept_parts.get(result.exercises, _PARTS)  # a class's equal results: the very same tuple
        if kept is None:
            try:
                parts = [_part(e) for e in result.exercises]
            except TypeError:  # an unhashable field (a plugin's list in details): encoded each time
                parts = [_part_of(_dumps(exercise_to_dict(e))) for e in result.exercises]
                kept = (parts, _dumps([h for h, _ in parts]))
            else:
                kept = (parts, _dumps([h for h, _ in parts]))
                self.kept_parts.put(result.exercises, _PARTS, kept)
        parts, hashes = kept
        data = result_to_dict(result, exercises=False)
        text = f'{{"exercises":{hashes},{_dumps(data)[1:]}'
        blob = zlib.compress(text.encode("utf-8", "surrogatepass"), 1)
        with self.lock:
            if not self.db.in_transaction:
                self.db.execute("BEGIN")
                self.since = time.monotonic()
                # Committed by then even if no row follows (a slow submission, the run's tail): an open
                # batch holds SQLite's write lock, and another run on this gradebook waits only 5 s for it.
                self.timer = threading.Timer(COMMIT_SECONDS, self.commit)
                self.timer.daemon = True
                self.timer.start()
            for digest, part in parts:
                if digest not in self.parts_stored:
                    self.db.execute("INSERT OR IGNORE INTO parts VALUES (?, ?)", (digest, zlib.compress(part, 1)))
                    self.parts_stored.add(digest)
            self.db.execute(
                "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?)",
                (key + PARTS_MARK, result.sha256, spec_hash, __version__, result.id, blob),
            )
            self.pending += 1
            if self.pending >= COMMIT_ROWS or time.monotonic() - self.since >= COMMIT_SECONDS:
                self._commit()

    def _commit(self) -> None:
        """Commit the rows written since the last commit (the caller holds the lock)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.closed and self.db.in_transaction:
            self.db.execute("COMMIT")
        self.pending = 0

    def commit(self) -> None:
        """Commit every row written so far (the open batch's timer calls it)."""
        with self.lock:
            self._commit()

    def close(self) -> None:
        """Commit the rows not committed yet and close the database.

        Raises
        ------
        grader.errors.UsageError
            If the last commit fails (a full disk): the rows not committed are rolled back, and the
            next run grades their submissions again.
        """
        import sqlite3  # imported by __init__ already

        with self.lock:
            try:
                self._commit()
            except sqlite3.Error as exc:
                try:
                    self.db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                raise UsageError(
                    f"--gradebook {self.path}: cannot save the last results ({exc}); grade again to grade them"
                ) from None
            finally:
                self.closed = True
                self.db.close()


_PARTS = object()
"""`Gradebook.kept_parts`'s second key."""


@functools.lru_cache(maxsize=256)
def _part(exercise: ExerciseResult) -> tuple[str, bytes]:
    """An exercise result's SHA-256 and JSON (UTF-8), as ``parts`` stores it (worked out once per distinct result)."""
    return _part_of(_exercise_json(exercise))


def _part_of(text: str) -> tuple[str, bytes]:
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest(), data


def _dumps(data: Any) -> str:
    return json.dumps(data, allow_nan=False, separators=(",", ":"))


@functools.lru_cache(maxsize=256)
def _exercise_json(exercise: ExerciseResult) -> str:
    return _dumps(exercise_to_dict(exercise))


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    group = parser.add_argument_group("gradebook")
    group.add_argument(
        "--gradebook", metavar="FILE", type=output_file, help="SQLite gradebook (default: DIR/gradebook.sqlite)"
    )
    group.add_argument("--regrade", action="store_true", help="grade every submission again, ignoring stored results")


def _open(config: Config) -> Gradebook | None:
    """The run's gradebook, opened on first use (so a usage error creates no file)."""
    if _BOOK not in config.stash:
        path = config.option("gradebook") or (config.out_dir / "gradebook.sqlite" if config.out_dir else None)
        if config.command != "grade" or path is None:
            return None
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--gradebook {path}: cannot create its folder ({exc.strerror})") from None
        config.stash[_BOOK] = Gradebook(Path(path))
        config.stash[_KEYS] = {}
    return config.stash[_BOOK]


@hookimpl(trylast=True)
def grader_cached_result(submission: Submission, key: str, config: Config) -> SubmissionResult | None:
    book = _open(config)
    if book is None:
        return None
    config.stash[_KEYS][submission.id] = (key, submission.sha256)
    if config.option("regrade") or submission.id in (config.option("only") or ()):
        return None  # --only ID: that student is graded again
    result = book.get(key)
    if result is not None:
        book.reused += 1
        config.stash.setdefault(_REUSED, set()).add(submission.id)
    return result


@hookimpl
def grader_submission_graded(result: SubmissionResult, config: Config) -> None:
    book: Gradebook | None = config.stash.get(_BOOK)
    key, sha256 = config.stash.get(_KEYS, {}).get(result.id, (None, None))
    if book is None or key is None or result.id in config.stash.get(_REUSED, ()):
        return
    if result.sha256 != sha256:
        return  # the file changed after it was located: this result is not that content's to keep
    book.put(key, config.stash[COLLECTED].spec_hash, result)


@hookimpl
def grader_submission_time(submission: Submission, config: Config) -> list[tuple[str, str]] | None:
    """The file's first arrival, recorded the first time the grader sees these bytes for this student."""
    book = _open(config)
    if book is None or not submission.sha256:
        return None
    import datetime as dt

    now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    return [("arrival", book.arrival(submission.id, submission.sha256, now))]


@hookimpl(trylast=True)
def grader_terminal_summary(report: Any, config: Config, write: Any) -> None:
    book: Gradebook | None = config.stash.get(_BOOK)
    if book is not None and book.reused:
        write(f"gradebook: {book.reused} result(s) reused from {book.path}; --regrade grades them again")
    elif book is not None:
        write(f"gradebook: {book.path}")


@hookimpl
def grader_unconfigure(config: Config) -> None:
    book = config.stash.pop(_BOOK, None)
    if book is not None:
        book.close()
