"""Built-in plugin: JUnit XML for CI systems (``DIR/junit.xml`` or ``--junit FILE``).

``grader grade`` writes ``DIR/junit.xml``; any command (``grader check`` in
a student's CI too) writes ``--junit FILE``. The layout is the one pytest's
``--junitxml`` writes and CI systems read::

    <testsuites name="grader" tests= failures= errors= time=>
      <testsuite name="G14.02" tests= failures= errors= skipped= time=>
        <testcase classname="alice.G14_02" name="zero-scores" time="0.001">
          <failure type="failed" message="...">feedback</failure>

One ``testsuite`` per exercise, holding one ``testcase`` per check of every
submission (``classname`` is the submission id and the exercise, see `classname`). Statuses:
``failed`` -> ``<failure>``, ``error`` and ``timeout`` -> ``<error>`` (the
call did not return a value), ``not_attempted`` -> ``<skipped>``. Messages
follow `grader.reporting.feedback`: hidden checks never carry inputs or expected
values. Student text (ids, messages) loses escape sequences and control
characters (`grader.safetext.display`) and every character XML 1.0 cannot
hold (`grader.safetext.xml_text`: C0 controls but TAB/LF/CR, U+FFFE/FFFF,
lone surrogates); ElementTree escapes the rest. ``time`` is the seconds the check's calls took
(`grader.builtin.timing`), so two runs differ in those attributes only.

Valid against ``junit-10.xsd``, the schema Jenkins' xunit plugin validates with:
``<testsuites>`` carries ``name``, ``time``, ``tests``, ``failures`` and ``errors``
(no ``skipped``: that count is on each ``<testsuite>``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import UsageError
from grader.execution.memo import IdentityTable
from grader.fileio import output_file, write_atomic
from grader.grading.timing import CheckTimes, check_times
from grader.markers import hookimpl
from grader.models import GradingReport
from grader.reporting.feedback import STATUS_LABELS, adjustment_lines, check_feedback, student_message
from grader.reporting.holes import NAME, NUMBER, Holed
from grader.safetext import display, xml_text

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

    from grader.config.core import Config

__all__ = ["classname", "junit_pieces", "junit_xml"]

FILENAME = "junit.xml"

OUTCOME = {"failed": "failure", "error": "error", "timeout": "error", "not_attempted": "skipped"}
"""Our check status -> the JUnit child element (none for ``passed``)."""

_SURROGATES = re.compile("[\ud800-\udfff\ufffe\uffff]")


def _text(text: str, newlines: bool = False) -> str:
    """Student text as an XML attribute or element text: inert, and valid XML 1.0."""
    # Surrogates and U+FFFE/FFFF go first (display would make U+FFFD of them), escape sequences next.
    return xml_text(display(_SURROGATES.sub("", text), newlines=newlines))


@functools.lru_cache(maxsize=4096)
def _attribute(text: str) -> str:
    """``_text(text)`` as ElementTree writes it in an attribute's quotes (its own escaping, asked once)."""
    import xml.etree.ElementTree as ET

    escape = getattr(ET, "_escape_attrib", None)  # what ElementTree writes an attribute's value with
    if escape is not None:
        return str(escape(_text(text)))
    written = ET.tostring(ET.Element("a", v=_text(text)), encoding="unicode")
    return written[len('<a v="') : -len('" />')]


def _classname_attribute(sub_id: str, exercise_id: str) -> str:
    """``_attribute(classname(sub_id, exercise_id))``, the submission's part escaped on its own when it is printable
    ASCII (`_text` keeps such text as it is, and ElementTree escapes an attribute a character at a time): the
    whole is unique per submission and exercise, so `_attribute`'s table would never answer it."""
    sub_part = sub_id.replace(".", "_")
    if sub_part.isascii() and sub_part.isprintable():
        return f"{_plain_attribute(sub_part)}.{_attribute(exercise_id.replace('.', '_'))}"
    return _attribute(classname(sub_id, exercise_id))


def _plain_attribute(text: str) -> str:
    """Printable ASCII ``text`` as ElementTree writes it in an attribute's quotes (``_attribute(text)``, not kept)."""
    import xml.etree.ElementTree as ET

    escape = getattr(ET, "_escape_attrib", None)
    return str(escape(text)) if escape is not None else _attribute.__wrapped__(text)


def classname(sub_id: str, exercise_id: str) -> str:
    """A test case's ``classname``: ``<submission>.<exercise>``, each one's own dots made ``_``.

    Jenkins' junit plugin splits a classname at its last dot into package and class; the
    only dot left is the one between the two, so Jenkins shows the submission as the
    package and the exercise as the class (``alice.G14_02``, never package ``alice.G14``,
    class ``02``).

    Parameters
    ----------
    sub_id, exercise_id : str

    Returns
    -------
    str
    """
    return f"{sub_id.replace('.', '_')}.{exercise_id.replace('.', '_')}"


def _passed_case(classname: str, name: str, time: str) -> str:
    """A test case with no child, as ElementTree writes it (``test_perf`` holds them to the same bytes)."""
    return f'<testcase classname="{_attribute(classname)}" name="{_attribute(name)}" time="{time}" />'


def _seconds(value: float) -> str:
    return f"{value:.3f}"


Seconds = Callable[[str], dict[tuple[str, str], float]]
"""Per submission id, the seconds of each (exercise id, check id), as `grader.grading.timing.check_seconds` gives."""

_COUNTS = ("tests", "failures", "errors", "skipped")
_ROOT_COUNTS = ("tests", "failures", "errors")
"""``<testsuites>``'s counts in junit-10.xsd (it has no ``skipped``)."""
_KEY = {"failure": "failures", "error": "errors", "skipped": "skipped"}
_MARK = "@@grader-junit-children@@"
_INDENT = "  "


def junit_xml(report: GradingReport, seconds: dict[str, dict[tuple[str, str], float]] | Seconds | None = None) -> str:
    """The JUnit XML document of a session.

    Parameters
    ----------
    report : grader.models.GradingReport
    seconds : dict or callable, optional
        Per submission id, the seconds of each (exercise id, check id), as
        `grader.grading.timing.check_seconds` gives (a dict, or a function of the
        id); missing ones are 0. A `grader.grading.timing.CheckTimes` gives the same
        text with less work.

    Returns
    -------
    str
        UTF-8 XML text with an XML declaration, ending in a newline.
    """
    return "".join(junit_pieces(report, seconds))


def _tags(element: ET.Element) -> tuple[str, str]:
    """The start and end tags of an element, as ElementTree writes them (its attributes in their order)."""
    import xml.etree.ElementTree as ET  # here: 'grader check' without --junit never needs it (issue 16)

    element.text = _MARK
    start, end = ET.tostring(element, encoding="unicode").split(_MARK)
    element.text = None
    return start, end


def junit_pieces(
    report: GradingReport, seconds: dict[str, dict[tuple[str, str], float]] | Seconds | None = None
) -> Iterator[str]:
    """`junit_xml`'s text, a test case at a time: the same bytes, never the whole tree in memory.

    A first pass counts each suite's statuses and seconds (its attributes
    come before its test cases); the second makes and writes one test case
    at a time, indented as ``ElementTree.indent`` indents the whole tree.
    """
    import xml.etree.ElementTree as ET

    if seconds is None:
        seconds_of: Seconds = lambda _id: {}  # noqa: E731
    elif isinstance(seconds, dict):
        table = seconds
        seconds_of = lambda sub_id: table.get(sub_id, {})  # noqa: E731
    else:
        seconds_of = seconds
    # A writer's seconds may also answer for one exercise (`grader.grading.timing.check_seconds` does): the
    # second pass, suite by suite, then works out each submission's seconds once in all.
    exercise_seconds: Callable[[str, str], dict[tuple[str, str], float]] | None = getattr(seconds, "for_exercise", None)
    exercise_ids = [e.id for e in report.exercises] or [e.id for s in report.submissions[:1] for e in s.exercises]
    suites = []
    totals = dict.fromkeys(_COUNTS, 0)
    total_time = 0.0
    suite_counts, suite_times = _suite_totals(report, exercise_ids, seconds_of)
    for ex_id in exercise_ids:  # in the order the tree has them
        counts = suite_counts[ex_id]
        suite_time = suite_times[ex_id]
        suite = ET.Element("testsuite", name=_text(ex_id))
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", _seconds(suite_time))
        total_time += suite_time
        suites.append((ex_id, suite, counts["tests"]))
    adjusted = [sub for sub in report.submissions if sub.adjustments]
    root = ET.Element("testsuites", name="grader")
    for key in _ROOT_COUNTS:
        root.set(key, str(totals[key]))
    root.set("time", _seconds(total_time))
    yield '<?xml version="1.0" encoding="utf-8"?>\n'
    if not suites and not adjusted:
        yield ET.tostring(root, encoding="unicode") + "\n"
        return
    root_start, root_end = _tags(root)
    yield root_start
    level1, level2, level3 = ("\n" + _INDENT * n for n in (1, 2, 3))
    for number, (ex_id, suite, cases) in enumerate(suites):
        last_suite = number == len(suites) - 1 and not adjusted
        yield level1
        if not cases:
            yield ET.tostring(suite, encoding="unicode")
        else:
            start, end = _tags(suite)
            yield start
            yield from _suite_cases(report, ex_id, seconds_of, exercise_seconds)
            yield level1 + end
        if last_suite:
            yield "\n"
    if adjusted:  # final scores and reasons: properties of a suite of no test, so the counts stay the checks'
        wrapper = ET.Element("testsuites")
        suite = ET.SubElement(
            wrapper, "testsuite", name="final scores", tests="0", failures="0", errors="0", skipped="0", time="0.000"
        )
        props = ET.SubElement(suite, "properties")
        for sub in adjusted:
            ET.SubElement(props, "property", name=_text(sub.id), value=_text(" | ".join(adjustment_lines(sub)[::-1])))
        ET.indent(wrapper)
        suite.tail = None
        yield level1 + ET.tostring(suite, encoding="unicode") + "\n"
    yield root_end + "\n"


def _suite_totals(
    report: GradingReport, exercise_ids: list[str], seconds_of: Seconds
) -> tuple[dict[str, dict[str, int]], dict[str, float]]:
    """`junit_pieces`'s first pass: each suite's counts of statuses and its seconds (they come before its cases)."""
    suite_counts: dict[str, dict[str, int]] = {ex_id: dict.fromkeys(_COUNTS, 0) for ex_id in exercise_ids}
    suite_times = dict.fromkeys(exercise_ids, 0.0)
    if isinstance(seconds_of, CheckTimes):  # the same sums, in the same order, from each result's kept form
        for sub in report.submissions:
            row = None
            for ex in sub.exercises:
                if ex.id not in suite_counts:
                    continue
                row = seconds_of.padded(sub.id) if row is None else row
                found, places, _ = _exercise_form(ex, seconds_of)
                counts = suite_counts[ex.id]
                for key, value in zip(_COUNTS, found):
                    counts[key] += value
                suite_time = suite_times[ex.id]
                for i in places:
                    suite_time += row[i]
                suite_times[ex.id] = suite_time
        return suite_counts, suite_times
    for sub in report.submissions:  # first pass: the suites' attributes (they come before their cases)
        times = None
        for ex in sub.exercises:
            if ex.id not in suite_counts:
                continue
            times = seconds_of(sub.id) if times is None else times
            counts = suite_counts[ex.id]
            suite_time = suite_times[ex.id]
            for c in ex.checks:
                suite_time += times.get((ex.id, c.id), 0.0)
                counts["tests"] += 1
                element = OUTCOME.get(c.status)
                if element is not None:
                    counts[_KEY[element]] += 1
            suite_times[ex.id] = suite_time
    return suite_counts, suite_times


def _suite_cases(
    report: GradingReport,
    ex_id: str,
    seconds_of: Seconds,
    exercise_seconds: Callable[[str, str], dict[tuple[str, str], float]] | None,
) -> Iterator[str]:
    """The test cases of exercise ``ex_id``'s suite, each indented as ``ElementTree.indent`` indents it."""
    level2, level3 = ("\n" + _INDENT * n for n in (2, 3))
    if isinstance(seconds_of, CheckTimes):  # each exercise's cases at once, from its result's kept form
        for sub in report.submissions:
            for ex in sub.exercises:
                if ex.id == ex_id:
                    _, places, form = _exercise_form(ex, seconds_of)
                    row = seconds_of.padded(sub.id)
                    yield form.fill(_classname_attribute(sub.id, ex.id), [f"{row[place]:.3f}" for place in places])
        return
    for sub in report.submissions:
        times = None
        for ex in sub.exercises:
            if ex.id != ex_id:
                continue
            if times is None:
                times = exercise_seconds(sub.id, ex_id) if exercise_seconds else seconds_of(sub.id)
            head = f'{level2}<testcase classname="{_attribute(classname(sub.id, ex.id))}" name="'
            for c in ex.checks:
                case = f'{head}{_attribute(c.id)}" time="{_seconds(times.get((ex.id, c.id), 0.0))}"'
                element = OUTCOME.get(c.status)
                if element is None:  # most cases: no child (as `_passed_case` writes them)
                    yield case + " />"
                    continue
                try:
                    child = _outcome_child(element, c)
                except TypeError:  # an unhashable field (a plugin's list in details): made each time
                    child = _outcome_child.__wrapped__(element, c)
                yield f"{case}>{level3}{child}{level2}</testcase>"


_KEPT = IdentityTable(256)
"""`_exercise_form` of each exercise result seen, by identity (and `CheckTimes`)."""


def _exercise_form(ex: Any, times: CheckTimes) -> tuple[tuple[int, ...], tuple[int, ...], Holed]:
    """An exercise result's counts (`_COUNTS`), its checks' places in a `CheckTimes` row, and its test cases
    as `_suite_cases` writes them, as a `grader.reporting.holes.Holed` (the name hole takes the classname
    attribute, a number hole a check's seconds); kept per exercise result and `CheckTimes.keys` (what the places follow; no row is held)."""
    kept: tuple[tuple[int, ...], tuple[int, ...], Holed] | None = _KEPT.get(ex, times.keys)
    if kept is not None:
        return kept
    level2, level3 = ("\n" + _INDENT * n for n in (2, 3))
    counts = dict.fromkeys(_COUNTS, 0)
    form = Holed()
    keep = True
    for c in ex.checks:
        counts["tests"] += 1
        end = " />"
        element = OUTCOME.get(c.status)
        if element is not None:
            counts[_KEY[element]] += 1
            try:
                child = _outcome_child(element, c)
            except TypeError:  # an unhashable field (a plugin's list in details): the form is not kept
                child, keep = _outcome_child.__wrapped__(element, c), False
            end = f">{level3}{child}{level2}</testcase>"
        form.add(f'{level2}<testcase classname="', NAME, f'" name="{_attribute(c.id)}" time="', NUMBER, f'"{end}')
    made = (tuple(counts.values()), times.places((ex.id, c.id) for c in ex.checks), form)
    if keep:
        _KEPT.put(ex, times.keys, made)
    return made


@functools.lru_cache(maxsize=1024)
def _outcome_child(element: str, c: Any) -> str:
    """A test case's ``<failure>``, ``<error>`` or ``<skipped>``, as ElementTree writes it (once per distinct result).

    The case around it is written as ElementTree writes a case whose text and child's tail are the
    indents (``test_perf`` holds the two to the same bytes).
    """
    import xml.etree.ElementTree as ET

    first_line = (student_message(c) or STATUS_LABELS.get(c.status, c.status)).splitlines()[0]
    child = ET.Element(element, type=c.status, message=_text(first_line))
    child.text = _text(check_feedback(c), newlines=True)
    return ET.tostring(child, encoding="unicode")


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity", "check", "merge"):
        return
    parser.add_argument(
        "--junit",
        metavar="FILE",
        type=output_file,
        help=f"write JUnit XML here, for CI (any command; default for grade: DIR/{FILENAME})",
    )


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write ``--junit FILE``, or ``DIR/junit.xml`` when the command writes files."""
    out = config.out_dir
    target = config.option("junit") or (out / FILENAME if out else None)
    if target is None:
        return
    try:
        write_atomic(Path(target), junit_pieces(report, check_times(config, report)))
    except OSError as exc:
        raise UsageError(f"--junit {target}: cannot write the file ({exc.strerror})") from None
