"""Built-in plugin: a CTRF report (``DIR/ctrf.json`` or ``--ctrf FILE``).

CTRF, the Common Test Report Format (https://github.com/ctrf-io/ctrf,
``schema/ctrf.schema.json``), is read by CI reporters (``github-actions-ctrf``
renders it in job summaries and pull requests). ``grader grade`` writes
``DIR/ctrf.json``; any command that grades (``grader check`` in a student's CI
too) writes ``--ctrf FILE``.

One test per check of every submission: ``name`` ``"<submission> <exercise>
<check>"``, ``suite`` ``[submission, exercise]``, ``status`` CTRF's word
(``passed``, ``failed``; ``error`` and ``timeout`` -> ``other`` with
``rawStatus``; ``not_attempted`` -> ``skipped``), ``duration`` the integer
milliseconds the check's calls took, ``message`` the feedback a student may
read (`grader.reporting.feedback.check_feedback`: a hidden check never carries inputs
or expected values), and ``extra`` the points, the visibility and the ids.
Student text goes through `grader.safetext.display` (no escape sequences,
no control characters) and lone surrogates become U+FFFD, so the file is
valid UTF-8 JSON. ``summary.start``/``stop`` are milliseconds since the
epoch: ``stop`` when the report was made (``SOURCE_DATE_EPOCH`` fixes it),
``start`` that less the checks' time.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader._version import __version__
from grader.errors import UsageError
from grader.execution.memo import IdentityTable
from grader.fileio import output_file, write_atomic
from grader.grading.timing import CheckTimes, check_times
from grader.markers import hookimpl
from grader.models import GradingReport
from grader.reporting.feedback import check_feedback
from grader.reporting.holes import NAME, NUMBER, Holed
from grader.safetext import display, unicode_safe

if TYPE_CHECKING:
    from grader.config.core import Config

__all__ = ["STATUS", "ctrf_report"]

FILENAME = "ctrf.json"
SPEC_VERSION = "1.0.0"
"""The CTRF specification version written (``specVersion``, SemVer)."""

STATUS = {
    "passed": "passed",
    "failed": "failed",
    "error": "other",
    "timeout": "other",
    "not_attempted": "skipped",
}
"""Our check status -> CTRF's ``status`` (an unknown one is ``other``)."""


def _text(text: str, newlines: bool = False) -> str:
    return unicode_safe(display(text, newlines=newlines))


def _tests(sub: Any, times: dict[tuple[str, str], float]) -> Iterator[dict[str, Any]]:
    """The CTRF tests of one submission: one per check."""
    for ex in sub.exercises:
        for c in ex.checks:
            status = STATUS.get(c.status, "other")
            test: dict[str, Any] = {
                "name": _text(f"{sub.id} {ex.id} {c.id}"),
                "status": status,
                "duration": int(round(times.get((ex.id, c.id), 0.0) * 1000)),
                "suite": [_text(sub.id), _text(ex.id)],
            }
            if status != c.status:
                test["rawStatus"] = c.status
            message = check_feedback(c)
            if message:
                test["message"] = _text(message, newlines=True)
            test["extra"] = {
                "submission": _text(sub.id),
                "exercise": ex.id,
                "check": c.id,
                "points": c.score,
                "max_points": c.max_score,
                "visibility": c.visibility,
            }
            yield test


def _test_texts(sub: Any, times: dict[tuple[str, str], float]) -> Iterator[str]:
    """`_tests`, each as ``json.dumps(test, allow_nan=False, ensure_ascii=False)``: the same text, made
    from the parts a check's result alone decides (`_check_parts`, once per distinct result) around the
    submission's id and the check's duration.

    `_text` leaves printable ASCII as it is, alone or in a name: the tests of a submission whose id is
    printable ASCII are put together from the parts; any other id's are made whole by `_tests`.
    """
    if not (sub.id.isascii() and sub.id.isprintable()):
        for test in _tests(sub, times):
            yield json.dumps(test, allow_nan=False, ensure_ascii=False)
        return
    sid = json.dumps(sub.id)
    for ex in sub.exercises:
        for key, c, plain, suite_ex, head, tail in _exercise_parts(ex):
            # printable ASCII is escaped character by character: the name's JSON is the id's, then the rest's
            name = f"{sid[:-1]} {plain}" if plain is not None else _name(f"{sub.id} {ex.id} {c.id}")
            duration = int(round(times.get(key, 0.0) * 1000))
            yield (
                f'{{"name": {name}, "status": {head[0]}, "duration": {duration}, '
                f'"suite": [{sid}, {suite_ex}]{head[1]}, "extra": {{"submission": {sid}, {tail}}}'
            )


def _name(text: str) -> str:
    return json.dumps(_text(text), ensure_ascii=False)


def _exercise_parts(ex: Any) -> list[tuple[tuple[str, str], Any, str | None, str, tuple[str, str], str]]:
    """Each check of an exercise result with its `_check_parts` (the name's rest as JSON without its opening
    quote), worked out once per exercise-result object (a class's equal results are one, `shared`)."""
    parts: list[tuple[tuple[str, str], Any, str | None, str, tuple[str, str], str]] | None = _KEPT.get(ex, _PARTS)
    if parts is None:
        parts, keep = [], True
        for c in ex.checks:
            try:
                plain, suite_ex, head, tail = _check_parts(ex.id, c)
            except TypeError:  # an unhashable field (a plugin's list in details): made each time
                plain, suite_ex, head, tail = _check_parts.__wrapped__(ex.id, c)
                keep = False
            rest = json.dumps(plain, ensure_ascii=False)[1:] if plain is not None else None
            parts.append(((ex.id, c.id), c, rest, suite_ex, head, tail))
        if keep:
            _KEPT.put(ex, _PARTS, parts)
    return parts


_KEPT = IdentityTable(256)
"""`_exercise_parts` of each exercise result seen, by identity."""
_PARTS = object()


@functools.lru_cache(maxsize=1024)
def _check_parts(exercise_id: str, c: Any) -> tuple[str | None, str, tuple[str, str], str]:
    """The parts of a check's CTRF test that its result alone decides, as JSON text.

    ``"<exercise> <check>"`` when both are printable ASCII (None: the name is made whole), the suite's
    exercise, the status, then what follows the suite (``rawStatus``, ``message``), and the ``extra``
    keys after ``submission``.
    """
    status = STATUS.get(c.status, "other")
    after: dict[str, Any] = {}
    if status != c.status:
        after["rawStatus"] = c.status
    message = check_feedback(c)
    if message:
        after["message"] = _text(message, newlines=True)
    extra = {
        "exercise": exercise_id,
        "check": c.id,
        "points": c.score,
        "max_points": c.max_score,
        "visibility": c.visibility,
    }
    words = f"{exercise_id} {c.id}"
    return (
        words if words.isascii() and words.isprintable() else None,
        json.dumps(_text(exercise_id), ensure_ascii=False),
        (json.dumps(status), (", " + json.dumps(after, ensure_ascii=False)[1:-1]) if after else ""),
        json.dumps(extra, allow_nan=False, ensure_ascii=False)[1:],
    )


_HOLE = "\x00tests"
"""Where the tests go in the document's text (`ctrf_pieces` writes them one at a time)."""


def ctrf_pieces(report: GradingReport, seconds: Any = None, now_ms: int | None = None) -> Iterator[str]:
    """The CTRF document of a session, as pieces of its JSON text (a class is never held whole).

    Two passes over ``report.submissions``: the summary's counts first, then each submission's
    tests, written as they are made. Joined, the pieces are ``json.dumps`` of `ctrf_report`.

    Parameters
    ----------
    report : grader.models.GradingReport
    seconds : callable, optional
        Per submission id, the seconds of each (exercise id, check id), as
        `grader.grading.timing.check_seconds` gives; missing ones are 0. A
        `grader.grading.timing.CheckTimes` gives the same text with less work.
    now_ms : int, optional
        ``summary.stop``, milliseconds since the epoch (default: now, or
        ``SOURCE_DATE_EPOCH``).

    Yields
    ------
    str
        Valid against CTRF's ``ctrf.schema.json`` once joined.
    """
    if now_ms is None:
        epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
        now_ms = int(epoch) * 1000 if epoch.isdigit() else int(time.time() * 1000)
    counts = dict.fromkeys(("passed", "failed", "skipped", "pending", "other"), 0)
    total_ms = n_tests = suites = 0
    submissions = []
    fast = seconds if isinstance(seconds, CheckTimes) else None
    for sub in report.submissions:
        suites += 1
        whole = _submission_form(sub.exercises, fast) if fast is not None else None
        if fast is not None and whole is not None:  # the same sums, from the statuses and places kept for them
            row = fast.padded(sub.id)
            for status, number in whole[0]:
                counts[status] += number
            for i in whole[1]:
                total_ms += round(row[i] * 1000)
            n_tests += len(whole[1])
        elif fast is not None:  # the same sums, from each exercise result's statuses and places, kept
            row = fast.padded(sub.id)
            for ex in sub.exercises:
                statuses, places, _ = _exercise_form(ex, fast)
                for status in statuses:
                    counts[status] += 1
                for i in places:
                    total_ms += round(row[i] * 1000)
                n_tests += len(places)
        else:
            times = seconds(sub.id) if seconds is not None else {}
            for ex in sub.exercises:  # the summary's counts: each test's status and duration, nothing else
                for c in ex.checks:
                    counts[STATUS.get(c.status, "other")] += 1
                    total_ms += int(round(times.get((ex.id, c.id), 0.0) * 1000))
                    n_tests += 1
        submissions.append({"id": _text(sub.id), "score": sub.score, "max_score": sub.max_score, "status": sub.status})
    frame = {
        "reportFormat": "CTRF",
        "specVersion": SPEC_VERSION,
        "generatedBy": "grader",
        "results": {
            "tool": {"name": "grader", "version": __version__},
            "summary": {
                "tests": n_tests,
                **counts,
                "suites": suites,
                "start": now_ms - total_ms,
                "stop": now_ms,
                "duration": total_ms,
            },
            "tests": _HOLE,
            "extra": {
                "grader_version": report.grader_version,
                "spec_hash": report.spec_hash,
                "submissions": submissions,
            },
        },
    }
    text = json.dumps(frame, allow_nan=False, ensure_ascii=False)
    hole = json.dumps(_HOLE, ensure_ascii=False)
    before, after = text.split(hole, 1)
    yield before + "["
    first = True
    for sub in report.submissions:
        if fast is not None and sub.id.isascii() and sub.id.isprintable():
            for text in _fast_texts(sub, fast):
                yield text[2:] if first else text
                first = False
            continue
        times = seconds(sub.id) if seconds is not None else {}
        for test in _test_texts(sub, times):
            yield ("" if first else ", ") + test
            first = False
    yield "]" + after


def _fast_texts(sub: Any, times: CheckTimes) -> Iterator[str]:
    """`_test_texts` of a submission whose id is printable ASCII, each exercise's tests at once, each test
    after ``", "``: each exercise result's form (`_exercise_form`) filled with the id and the durations."""
    sid_open = json.dumps(sub.id)[:-1]
    row = times.padded(sub.id)
    whole = _submission_form(sub.exercises, times)
    if whole is not None:  # every exercise's tests in one fill
        if whole[1]:  # no check: no test (the first test of the document has no ", ")
            yield whole[2].fill(sid_open, [str(round(row[place] * 1000)) for place in whole[1]])
        return
    for ex in sub.exercises:
        _, places, form = _exercise_form(ex, times)
        if form is None:  # a name that is not printable ASCII: each test made as `_test_texts` makes it
            for test in _test_texts(_One(sub.id, ex), times(sub.id)):
                yield ", " + test
            continue
        if not places:  # no check: no test (the first test of the document has no ", ")
            continue
        yield form.fill(sid_open, [str(round(row[place] * 1000)) for place in places])


def _submission_form(
    exercises: Any, times: CheckTimes
) -> tuple[tuple[tuple[str, int], ...], tuple[int, ...], Holed] | None:
    """A submission's exercise results as one: how many of its tests have each CTRF status, their places in a
    `CheckTimes` row, and their tests as one `grader.reporting.holes.Holed` (each exercise's `_exercise_form`
    one after the other), kept per tuple of exercise results (a class's equal results are one tuple,
    `grader.grading.session.shared`); None when an exercise's form is not kept or not made (its tests are
    then made exercise by exercise)."""
    kept: tuple[tuple[tuple[str, int], ...], tuple[int, ...], Holed] | None = _KEPT.get(exercises, times.keys)
    if kept is not None:
        return kept
    statuses: dict[str, int] = {}
    places: list[int] = []
    form = Holed()
    for ex in exercises:
        counted, where, part = _exercise_form(ex, times)
        if part is None or _KEPT.get(ex, times.keys) is None:
            return None
        for status in counted:
            statuses[status] = statuses.get(status, 0) + 1
        places += where
        form.extend(part)
    made = (tuple(statuses.items()), tuple(places), form)
    _KEPT.put(exercises, times.keys, made)
    return made


class _One:
    """A submission of one exercise (the id and that exercise's result), for `_test_texts`."""

    def __init__(self, sub_id: str, ex: Any) -> None:
        self.id = sub_id
        self.exercises = (ex,)


def _exercise_form(ex: Any, times: CheckTimes) -> tuple[list[str], tuple[int, ...], Holed | None]:
    """An exercise result's CTRF statuses, its checks' places in a `CheckTimes` row, and its tests as a
    `grader.reporting.holes.Holed` (each test after ``", "``; the name hole takes the id's JSON without
    its closing quote, a number hole a check's milliseconds), or None when a name is not printable ASCII; kept per exercise result and
    `CheckTimes.keys` (what the places follow; no row is held)."""
    kept: tuple[list[str], tuple[int, ...], Holed | None] | None = _KEPT.get(ex, times.keys)
    if kept is not None:
        return kept
    parts = _exercise_parts(ex)
    statuses = [STATUS.get(c.status, "other") for c in ex.checks]
    places = times.places(key for key, *_ in parts)
    form: Holed | None = None
    if all(rest is not None for _, _, rest, *_ in parts):
        form = Holed()
        for _, _, rest, suite_ex, head, tail in parts:
            form.add(
                ', {"name": ', NAME, f' {rest}, "status": {head[0]}, "duration": ', NUMBER,
                ', "suite": [', NAME, f'", {suite_ex}]{head[1]}, "extra": {{"submission": ', NAME, f'", {tail}}}',
            )  # fmt: skip
    if _KEPT.get(ex, _PARTS) is parts:  # its parts are kept (every field hashable): so is its form
        _KEPT.put(ex, times.keys, (statuses, places, form))
    return statuses, places, form


def ctrf_report(report: GradingReport, seconds: Any = None, now_ms: int | None = None) -> dict[str, Any]:
    """The CTRF document of a session, as plain data (`ctrf_pieces`, parsed).

    Returns
    -------
    dict
        Valid against CTRF's ``ctrf.schema.json``.
    """
    data: dict[str, Any] = json.loads("".join(ctrf_pieces(report, seconds, now_ms)))
    return data


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity", "check", "merge"):
        return
    parser.add_argument(
        "--ctrf",
        metavar="FILE",
        type=output_file,
        help=f"write a CTRF JSON report here, for CI (any command; default for grade: DIR/{FILENAME})",
    )


def _with_newline(pieces: Iterator[str]) -> Iterator[str]:
    yield from pieces
    yield "\n"


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write ``--ctrf FILE``, or ``DIR/ctrf.json`` when the command writes files."""
    out = config.out_dir
    target = config.option("ctrf") or (out / FILENAME if out else None)
    if target is None:
        return
    pieces = ctrf_pieces(report, check_times(config, report))
    try:
        write_atomic(Path(target), _with_newline(pieces))
    except OSError as exc:
        raise UsageError(f"--ctrf {target}: cannot write the file ({exc.strerror})") from None
