"""Built-in plugin: Gradescope ``results.json`` files.

Gradescope runs an autograder once per submission and reads
``/autograder/results/results.json`` (format: Gradescope's "Autograder
Specifications"). ``grader grade SUBMISSION --gradescope FILE`` writes that
file for a run with exactly one submission; every ``grader grade`` also
writes one such file per submission under ``DIR/gradescope/<slug>.json``
(the student's file name stem, see `grader.intake.naming` and ``results.json``),
as soon as that submission is graded.

Mapping of our result model:

* top level: ``score`` is the total (Gradescope hides it while a test is
  withheld); ``execution_time`` the seconds the student's calls took (see
  `grader.builtin.timing`); ``output`` (always shown) says the total per
  exercise, or, when any check is not ``visible``, each exercise's sum over its
  visible checks only (never a sum counting a withheld check), or why the file
  could not be graded, and what the code printed; ``output_format`` is ``text`` so nothing the student
  controls is rendered as HTML (Gradescope's default for the top level);
  ``stdout_visibility`` is ``hidden`` (the grader's own log is for staff);
* one test per check: ``name`` ``"G14.02 zero-scores: <description>"``,
  ``number`` ``"2.1"`` (exercise, then check, counted from 1), ``score``,
  ``max_score``, ``status`` ``passed`` or ``failed``, ``tags`` the exercise
  id, ``visibility`` ours (the four words are Gradescope's), and ``output``
  the feedback a student may read (`grader.reporting.feedback.check_feedback`):
  hidden checks never carry inputs or expected values.

Every text a student controls (what the code printed, exception messages,
the id) goes through `grader.safetext.display` (escape sequences, control
and bidi characters removed, the grader's line breaks kept) and lone
surrogates become U+FFFD, so the file is valid UTF-8 JSON. What the code
printed is ``RunOutcome.stdout`` / ``stderr``: only what it printed before
its first hidden call (the runner keeps no more), and a hidden check's
message names the exception's type and line only (`grader.builtin.judge`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from json.encoder import encode_basestring_ascii as _json_text
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import UsageError
from grader.fileio import output_file, write_atomic
from grader.grading.timing import submission_seconds
from grader.intake.naming import slugs_of
from grader.markers import hookimpl
from grader.models import GradingReport, Submission, SubmissionResult
from grader.packs import find_pack
from grader.reporting.feedback import adjustment_lines, check_feedback
from grader.reporting.files import SubmissionFiles
from grader.safetext import display, unicode_safe
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_FILES: StashKey[SubmissionFiles] = StashKey()
_LOCATED = StashKey[int]()

__all__ = ["VISIBILITY", "gradescope_results", "gradescope_tests"]

SUBFOLDER = "gradescope"

VISIBILITY = {
    "visible": "visible",
    "hidden": "hidden",
    "after_due_date": "after_due_date",
    "after_published": "after_published",
}
"""Our visibility -> Gradescope's. Gradescope itself withholds ``hidden``,
``after_due_date`` and ``after_published`` tests from students until the
due date / publication (``hidden``: always); an unknown word maps to
``hidden``."""


def gradescope_tests(sub: SubmissionResult) -> list[dict[str, Any]]:
    """The ``tests`` array of one submission, one test per check.

    Parameters
    ----------
    sub : grader.models.SubmissionResult

    Returns
    -------
    list of dict
        Each with ``name``, ``number``, ``score``, ``max_score``,
        ``status``, ``output``, ``tags`` and ``visibility``.
    """
    return [test for i, ex in enumerate(sub.exercises, start=1) for test in _exercise_tests(i, ex)]


def _exercise_tests(i: int, ex: Any) -> list[dict[str, Any]]:
    """The tests of one exercise, the ``i``-th of its submission (`gradescope_tests`)."""
    tests = []
    for j, c in enumerate(ex.checks, start=1):
        try:
            name, status, output, tag, visibility = _test_texts(ex.id, c)
        except TypeError:  # an unhashable field (a plugin's list in details): worked out each time
            name, status, output, tag, visibility = _test_texts.__wrapped__(ex.id, c)
        tests.append(
            {
                "name": name,
                "number": f"{i}.{j}",
                "score": c.score,
                "max_score": c.max_score,
                "status": status,
                "output": output,
                "tags": [tag],
                "visibility": visibility,
            }
        )
    return tests


@functools.lru_cache(maxsize=1024)
def _test_texts(exercise_id: str, c: Any) -> tuple[str, str, str, str, str]:
    """A test's texts: name, status, output, tag and visibility (once per distinct check result)."""
    return (
        display(f"{exercise_id} {c.id}" + (f": {c.description}" if c.description else "")),
        "passed" if c.status == "passed" else "failed",
        display(check_feedback(c), newlines=True),
        display(exercise_id),
        VISIBILITY.get(c.visibility, "hidden"),
    )


def _overall_output(sub: SubmissionResult, filename: str) -> str:
    """The top-level ``output`` (always shown): no sum that counts a check Gradescope withholds.

    While a test is ``hidden`` (or ``after_due_date``/``after_published`` before release)
    Gradescope hides the total, but prints this text as it is: with such checks, it gives
    each exercise's sum over its visible checks only, and no total or raw score.
    """
    withheld = any(c.visibility != "visible" for e in sub.exercises for c in e.checks)
    lines = []
    if sub.status == "error":
        lines += [
            f"Your file could not be graded: {display(sub.error)}",
            f"Fix this first, then run 'grader check {filename}'.",
            "",
        ]
    adjustments = adjustment_lines(sub)
    if not withheld:
        lines.append(f"Total: {sub.score:g} / {sub.max_score:g}")
        lines += [display(line) for line in adjustments]
        lines += [f"{display(e.id)} {display(e.title)}: {e.score:g} / {e.max_score:g}" for e in sub.exercises]
    else:
        lines.append("Total: shown by Gradescope once the hidden checks are released.")
        lines += [display(line) for line in adjustments[:-1]]  # the last line sums every check
        for e in sub.exercises:
            shown = [c for c in e.checks if c.visibility == "visible"]
            if shown:
                score, top = sum(c.score for c in shown), sum(c.max_score for c in shown)
                more = " (and hidden checks)" if len(shown) < len(e.checks) else ""
                lines.append(f"{display(e.id)} {display(e.title)}: visible checks {score:g} / {top:g}{more}")
            else:
                lines.append(f"{display(e.id)} {display(e.title)}: hidden checks only")
    for label, text in (("stdout", sub.stdout), ("stderr", sub.stderr)):
        shown_text = display(text or "", newlines=True).rstrip("\n")
        if shown_text.strip():
            lines += ["", f"What your code printed ({label}):", shown_text]
    return "\n".join(lines)


def gradescope_results(
    report: GradingReport,
    sub: SubmissionResult,
    execution_time: float = 0.0,
    pack: Any = None,
    tests: bool = True,
    output: str | None = None,
) -> dict[str, Any]:
    """The Gradescope ``results.json`` of one submission, as plain data.

    Parameters
    ----------
    report : grader.models.GradingReport
        The session (its version and spec hash go to ``extra_data``).
    sub : grader.models.SubmissionResult
    execution_time : float
        Seconds, a number (Gradescope shows it to staff).
    pack : grader.packs.Pack, optional
        The course pack (its submission file); default: the installed one.
    tests : bool
        With the ``"tests"`` key (`gradescope_tests`); without it for a caller that encodes them apart.
    output : str, optional
        The top-level ``output``, when the caller made it already (`_overall_output` of ``sub``).

    Returns
    -------
    dict
        Ready for ``json.dumps``.
    """
    data = {
        "score": sub.score,
        "execution_time": execution_time,
        "output": _overall_output(sub, (pack or find_pack()).submission) if output is None else output,
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            "id": unicode_safe(sub.id),
            "status": sub.status,
            "max_score": sub.max_score,
            "sha256": sub.sha256,
            "grader_version": report.grader_version,
            "spec_hash": report.spec_hash,
            **(
                {
                    "raw_score": sub.raw_score if sub.raw_score is not None else sub.score,
                    "adjustments": [
                        {"kind": a.kind, "points": a.points, "reason": display(a.reason)} for a in sub.adjustments
                    ],
                }
                if sub.adjustments
                else {}
            ),
        },
    }
    if tests:
        data["tests"] = gradescope_tests(sub)
    return data


def _dumps(data: dict[str, Any]) -> str:
    # Compact: json's C encoder is used only without indent, and is 5x faster.
    return json.dumps(data, allow_nan=False) + "\n"


def results_text(report: GradingReport, sub: SubmissionResult, execution_time: float = 0.0, pack: Any = None) -> str:
    """``_dumps(gradescope_results(...))``: the file's text, each exercise's tests encoded once per distinct result.

    A class's equal exercise results are one object (`grader.grading.session.shared`); their tests'
    JSON is kept (`_exercise_tests_json`) instead of encoded again for every student. The same bytes
    as the whole dict encoded (``tests/harness/test_gradescope.py``).
    """
    data = gradescope_results(report, sub, execution_time, pack, tests=False)
    return f'{json.dumps(data, allow_nan=False)[:-1]}, "tests": [{_tests_json(sub)}]}}\n'


def _tests_json(sub: SubmissionResult) -> str:
    """The ``tests`` of ``sub`` as JSON text without the brackets (`results_text`)."""
    parts = []
    for i, ex in enumerate(sub.exercises, start=1):
        try:
            part = _exercise_tests_json(i, ex)
        except TypeError:  # an unhashable field (a plugin's list in details): encoded each time
            part = _exercise_tests_json.__wrapped__(i, ex)
        if part:
            parts.append(part)
    return ", ".join(parts)


class _Results:
    """`results_text` for one run's files, its parts that do not name the student made once per distinct result.

    A file's top-level ``output`` and its ``tests`` depend on the result's exercise results (by
    identity: `grader.grading.session.shared` keeps equal ones once), status, error, printed
    output, scores and adjustments, never on the student's id, hash or time: they are kept per
    distinct such result, with the file's text around the student's id, hash and seconds (made
    once with stand-ins in their places): each student's file is that text with the three values
    encoded as ``json.dumps`` encodes them. The same bytes as `results_text`
    (``tests/harness/test_gradescope.py``).
    """

    MOST = 256
    """Distinct results whose parts are kept (past that the table starts again)."""

    def __init__(self, header: GradingReport, config: Any) -> None:
        import secrets

        self.header = header
        self.config = config
        self.kept: dict[tuple[Any, ...], tuple[Any, list[str] | None, str, str]] = {}
        # Stand-ins for the student's id, hash and seconds in a kept file's text (`_around`).
        self.tokens = tuple(f"gs{secrets.token_hex(8)}" for _ in range(3))

    def __call__(self, sub: SubmissionResult) -> str:
        seconds = submission_seconds(self.config, sub.id)
        pack = self.config.pack
        key: tuple[Any, ...] = (id(sub.exercises), sub.status, sub.error, sub.stdout, sub.stderr, sub.score)
        key += (sub.max_score, sub.raw_score, sub.adjustments)
        key += (repr((sub.score, sub.raw_score, sub.adjustments)),)  # -0.0 equals 0.0, but shows as "-0"
        try:
            kept = self.kept.get(key)
        except TypeError:  # an unhashable field (a plugin's list in an adjustment): made in full
            return results_text(self.header, sub, seconds, pack)
        if kept is None or kept[0] is not sub.exercises:
            try:
                hash(sub.exercises)
            except TypeError:  # a plugin's list in details (which could change): made in full every time
                return results_text(self.header, sub, seconds, pack)
            output = _overall_output(sub, (pack or find_pack()).submission)
            kept = (sub.exercises, self._around(sub, pack, output), output, _tests_json(sub))
            if len(self.kept) >= self.MOST:
                self.kept.clear()
            self.kept[key] = kept
        around = kept[1]
        if around is None or type(seconds) not in (int, float) or seconds != seconds or abs(seconds) == _INF:
            data = gradescope_results(self.header, sub, seconds, pack, tests=False, output=kept[2])
            return f'{json.dumps(data, allow_nan=False)[:-1]}, "tests": [{kept[3]}]}}\n'
        # The text around the three values, kept; each value encoded as json.dumps encodes it.
        number = float.__repr__(seconds) if type(seconds) is float else int.__repr__(seconds)
        shown_id = _json_text(unicode_safe(sub.id))
        return f"{around[0]}{number}{around[1]}{shown_id}{around[2]}{_json_text(sub.sha256)}{around[3]}{kept[3]}]}}\n"

    def _around(self, sub: SubmissionResult, pack: Any, output: str) -> list[str] | None:
        """The file's text of this kind of result in the four pieces around its seconds, id and hash (in that
        order), up to its tests' text; None when a stand-in would not be found once each (then made whole)."""
        seconds, sid, sha = self.tokens
        sample = replace(sub, id=sid, sha256=sha)
        data = gradescope_results(self.header, sample, 0.0, pack, tests=False, output=output)
        data["execution_time"] = seconds  # a string stand-in for the number
        text = f'{json.dumps(data, allow_nan=False)[:-1]}, "tests": ['
        pieces = re.split(f'"({seconds}|{sid}|{sha})"', text)
        if pieces[1::2] != [seconds, sid, sha]:
            return None
        return pieces[0::2]


@functools.lru_cache(maxsize=256)
def _exercise_tests_json(number: int, ex: Any) -> str:
    """The tests of exercise ``number`` (counted from 1) of a submission, as JSON text without the brackets."""
    return ", ".join(json.dumps(t, allow_nan=False) for t in _exercise_tests(number, ex))


_INF = float("inf")


def file_names(report: GradingReport) -> dict[str, str]:
    """``<slug>.json`` per submission id (`grader.intake.naming`): unique without regard to case."""
    return {sid: f"{slug}.json" for sid, slug in slugs_of(report.submissions).items()}


def _files(out: Path, items: Sequence[Any], header: GradingReport, config: Any) -> SubmissionFiles:
    return SubmissionFiles(
        out / SUBFOLDER, items, ".json", _Results(header, config), f"--out {out}: cannot write {SUBFOLDER}/"
    )


@hookimpl
def grader_collection_finish(submissions: list[Submission], collected: Any, config: Config) -> None:
    """Fix every file name, so each file can be written as its result comes."""
    if config.command != "grade" or config.out_dir is None:
        return
    header = collected.header(config.command)
    config.stash[_FILES] = _files(config.out_dir, submissions, header, config)


@hookimpl
def grader_submission_graded(result: SubmissionResult, config: Config) -> None:
    files: SubmissionFiles | None = config.stash.get(_FILES)
    if files is not None and result.id in files.names:
        files.write(result)


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    parser.add_argument(
        "--gradescope",
        metavar="FILE",
        type=output_file,
        help="write Gradescope's results.json for a run of one submission here "
        "(on Gradescope: /autograder/results/results.json)",
    )


@hookimpl(wrapper=True)
def grader_locate_submissions(path: str, config: Config) -> Any:
    """Refuse ``--gradescope FILE`` as soon as a second submission is located, before grading."""
    found = yield
    if config.option("gradescope") and config.command == "grade" and found:
        count = config.stash[_LOCATED] = config.stash.get(_LOCATED, 0) + len(found)
        if count > 1:
            raise UsageError(
                f"--gradescope {config.option('gradescope')}: Gradescope grades one submission per run, "
                f"and this run has more than one ({count} found so far); use DIR/{SUBFOLDER}/<id>.json instead"
            )
    return found


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write ``--gradescope FILE`` and ``DIR/gradescope/<id>.json`` for ``grader grade``.

    Raises
    ------
    grader.errors.UsageError
        If ``--gradescope`` is given for a run of more than one submission,
        or a file cannot be written.
    """
    if config.command != "grade":
        return
    target = config.option("gradescope")
    if target:
        if len(report.submissions) != 1:
            raise UsageError(
                f"--gradescope {target}: Gradescope grades one submission per run, this run graded "
                f"{len(report.submissions)}; use DIR/{SUBFOLDER}/<id>.json instead"
            )
        sub = report.submissions[0]
        try:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            write_atomic(
                Path(target),
                results_text(report, sub, submission_seconds(config, sub.id), config.pack),
            )
        except OSError as exc:
            raise UsageError(f"--gradescope {target}: cannot write the file ({exc.strerror})") from None
    out = config.out_dir
    if out is None:
        return
    files: SubmissionFiles | None = config.stash.get(_FILES)
    if files is None or not files.covers(report.submissions):
        files = _files(out, report.submissions, report, config)
    files.write_missing(report.submissions)
