"""Built-in plugin: the JSON results file (``DIR/results.json`` or ``--json``).

The file is for instructors and tools. It holds no timings and no absolute
temporary paths, so the same submissions and specs give the same bytes.

Each submission's line is made as soon as it is graded and kept in a spool
file (`_Spool`), not in memory; the results file is then written from the
spool a line at a time, so the grader's memory does not grow with the class.
"""

from __future__ import annotations

import functools
import json
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from grader.errors import UsageError
from grader.execution.memo import IdentityTable
from grader.fileio import write_atomic
from grader.intake.naming import slug_base, slugs_of
from grader.markers import hookimpl
from grader.models import CheckResult, GradingReport, SubmissionResult
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config


class _Spool:
    """Submissions' lines of the results, in an anonymous temporary file: where each is, by id."""

    def __init__(self) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="grader-results-")
        self.where: dict[str, tuple[int, int]] = {}
        self.lock = threading.Lock()
        self.end: int | None = 0
        """The file's size while its offset is there (lines written one after the other: no seek, no
        ``lseek`` per line); None once a line was read (the next line seeks to the end)."""

    def put(self, sub_id: str, line: str) -> None:
        data = line.encode("utf-8", "surrogatepass")
        with self.lock:
            offset = self.file.seek(0, 2) if self.end is None else self.end
            self.file.write(data)
            self.end = offset + len(data)
            self.where[sub_id] = (offset, len(data))

    def get(self, sub_id: str) -> str | None:
        with self.lock:
            place = self.where.get(sub_id)
            if place is None:
                return None
            self.end = None
            self.file.seek(place[0])
            return self.file.read(place[1]).decode("utf-8", "surrogatepass")

    def close(self) -> None:
        self.file.close()


_PIECES = StashKey[_Spool]()


def check_to_dict(c: CheckResult) -> dict[str, Any]:
    """One check's JSON: id, status, score, max_score, visibility, message,
    and ``diagnosis`` (the known mistakes it matches) only when there is one."""
    data: dict[str, Any] = {
        "id": c.id,
        "status": c.status,
        "score": c.score,
        "max_score": c.max_score,
        "visibility": c.visibility,
        "message": c.message,
    }
    if c.automatic_score is not None:
        data["automatic_score"] = c.automatic_score
    if c.diagnosis:
        data["diagnosis"] = [
            {"mistake": d.mistake, "misconception": d.misconception, "section": d.section} for d in c.diagnosis
        ]
    return data


def submission_to_dict(s: SubmissionResult, slug: str = "") -> dict[str, Any]:
    """One submission's entry in the JSON results, as plain data.

    ``id`` is the student id verbatim; ``slug`` the stem of the student's
    files (``DIR/<slug>.html``, ``DIR/gradescope/<slug>.json``; see
    `grader.intake.naming`): ``slug`` when given, else the result's own.
    ``score`` is the final score; when manual scores or a late penalty
    changed it, ``raw_score`` is the automatic one and ``adjustments`` lists
    each change (kind, points, reason, target, grader); ``lms`` is what the
    LMS export said (system, user, late, attempt...), when there is one.
    """
    head, tail = _around_exercises(s, slug)
    head["exercises"] = [
        {
            "id": e.id,
            "score": e.score,
            "max_score": e.max_score,
            "checks": [check_to_dict(c) for c in e.checks],
        }
        for e in s.exercises
    ]
    head.update(tail)
    return head


def _around_exercises(s: SubmissionResult, slug: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """`submission_to_dict`'s keys before ``"exercises"`` and after it, in their order."""
    head = {
        "id": s.id,
        "slug": slug or s.slug or slug_base(s.id),
        "path": s.path,
        "sha256": s.sha256,
        "score": s.score,
        "max_score": s.max_score,
        "status": s.status,
        "error": s.error,
    }
    data: dict[str, Any] = {}
    if s.adjustments or s.raw_score is not None:
        data["raw_score"] = s.raw_score if s.raw_score is not None else s.score
        data["adjustments"] = [
            {"kind": a.kind, "points": a.points, "reason": a.reason, "target": a.target, "grader": a.grader}
            for a in s.adjustments
        ]
    if s.lms:
        data["lms"] = {k: s.lms[k] for k in sorted(s.lms)}
    if s.late:  # a term's late days (grader.term.ledger)
        data["late"] = {k: s.late[k] for k in sorted(s.late)}
    return head, data


def report_to_dict(report: GradingReport) -> dict[str, Any]:
    """The JSON results as plain data (see README, "JSON results")."""
    slugs = slugs_of(report.submissions)
    return {
        "grader_version": report.grader_version,
        "spec_hash": report.spec_hash,
        "submissions": [submission_to_dict(s, slugs[s.id]) for s in report.submissions],
        "misconceptions": _misconceptions(report),
    }


def _misconceptions(report: GradingReport) -> list[dict[str, Any]]:
    """What to reteach (`grader.reporting.insight.misconceptions`), with who: this file is for instructors."""
    from grader.reporting.insight import misconceptions

    return [m.to_dict(who=True) for m in misconceptions(report.submissions)]


def _submission_json(s: SubmissionResult, slug: str = "") -> str:
    """``json.dumps(submission_to_dict(s, slug), allow_nan=False)``, each exercise's part encoded once.

    A class's equal exercise results (kept once, `grader.grading.session.shared`) have equal JSON: the
    text around them is encoded here, their part taken from `_exercise_json`. Equal, byte for byte,
    to encoding the whole dict (`tests/harness/test_throughput.py`).
    """
    around, tail = _around_exercises(s, slug)
    head = json.dumps(around, allow_nan=False)[:-1]
    exercises = _KEPT.get(s.exercises, _EXERCISES)  # a class's equal results: the very same tuple
    if exercises is None:
        try:
            exercises = ", ".join([_exercise_json(e) for e in s.exercises])
        except TypeError:  # an unhashable field (a plugin's list in details): encoded each time
            exercises = ", ".join([_exercise_json.__wrapped__(e) for e in s.exercises])
        else:
            _KEPT.put(s.exercises, _EXERCISES, exercises)
    rest = ", " + json.dumps(tail, allow_nan=False)[1:] if tail else "}"
    return f'{head}, "exercises": [{exercises}]{rest}'


_KEPT = IdentityTable(256)
"""The ``"exercises"`` JSON of each tuple of exercise results seen (`_submission_json`), by identity."""
_EXERCISES = object()
"""`_KEPT`'s second key."""


@functools.lru_cache(maxsize=256)
def _exercise_json(e: Any) -> str:
    """One exercise's part of a submission's JSON (see `_submission_json`)."""
    return json.dumps(
        {"id": e.id, "score": e.score, "max_score": e.max_score, "checks": [check_to_dict(c) for c in e.checks]},
        allow_nan=False,
    )


def report_json(report: GradingReport, pieces: dict[str, str] | None = None) -> str:
    """The JSON results file's text: one submission per line.

    ``pieces`` holds submissions' lines already made (by id); the others are
    made here. json's C encoder, used only without indentation, is 5x faster
    than an indented dump, and a line per submission still reads and diffs well.
    """
    return "".join(report_json_pieces(report, (pieces or {}).get))


def report_json_pieces(
    report: GradingReport, piece: Callable[[str], str | None], about: dict[str, Any] | None = None
) -> Iterator[str]:
    """The JSON results file's text (as `report_json` makes it), a submission's line at a time.

    ``piece(id)`` gives a submission's line already made, or None (it is made here); ``about``
    adds keys after ``spec_hash`` (the course and the term's assignment, `grader.term.ledger.results_about`).
    """
    head = json.dumps({"grader_version": report.grader_version, "spec_hash": report.spec_hash, **(about or {})})[:-1]
    slugs = slugs_of(report.submissions)  # the submissions' own, unless a result lacks one (as the writers do)
    yield f'{head}, "submissions": '
    tail = f', "misconceptions": {json.dumps(_misconceptions(report))}}}\n'  # issue 27: what to reteach
    if not report.submissions:
        yield "[]" + tail
        return
    for i, s in enumerate(report.submissions):
        line = (piece(s.id) if slugs[s.id] == s.slug else None) or _submission_json(s, slugs[s.id])
        yield ("[\n" if i == 0 else ",\n") + line
    yield "\n]" + tail


@hookimpl
def grader_submission_graded(result: SubmissionResult, config: Config) -> None:
    """Make the submission's line of the results now, while later submissions run."""
    if config.option("out") or config.option("json"):  # config.out_dir is not None, without a Path per student
        if _PIECES not in config.stash:
            config.stash[_PIECES] = _Spool()
        config.stash[_PIECES].put(result.id, _submission_json(result))


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write the results JSON when the command writes files."""
    out = config.out_dir
    target = config.option("json") or (out / "results.json" if out else None)
    if target is None:
        return
    spool = config.stash.get(_PIECES)
    from grader.term.ledger import results_about

    try:
        pieces = report_json_pieces(report, spool.get if spool is not None else lambda _id: None, results_about(config))
        write_atomic(Path(target), pieces)
    except OSError as exc:
        raise UsageError(f"--json {target}: cannot write the file ({exc.strerror})") from None


@hookimpl
def grader_unconfigure(config: Config) -> None:
    """Remove the spool of lines (an anonymous file: closing it frees its space)."""
    spool = config.stash.get(_PIECES)
    if spool is not None:
        spool.close()
