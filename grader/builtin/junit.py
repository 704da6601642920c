"""Built-in plugin: JUnit XML for CI systems (``DIR/junit.xml`` or ``--junit FILE``).

``grader grade`` writes ``DIR/junit.xml``; any command (``grader check`` in
a student's CI too) writes ``--junit FILE``. The layout is the one pytest's
``--junitxml`` writes and CI systems read::

    <testsuites name="grader" tests= failures= errors= skipped= time=>
      <testsuite name="G14.02" tests= failures= errors= skipped= time=>
        <testcase classname="alice.G14.02" name="zero-scores" time="0.001">
          <failure type="failed" message="...">feedback</failure>

One ``testsuite`` per exercise, holding one ``testcase`` per check of every
submission (``classname`` is the submission id and the exercise). Statuses:
``failed`` -> ``<failure>``, ``error`` and ``timeout`` -> ``<error>`` (the
call did not return a value), ``not_attempted`` -> ``<skipped>``. Messages
follow `grader.feedback`: hidden checks never carry inputs or expected
values. Student text (ids, messages) loses escape sequences and control
characters (`grader.safetext.display`) and every character XML 1.0 cannot
hold (`grader.safetext.xml_text`: C0 controls but TAB/LF/CR, U+FFFE/FFFF,
lone surrogates); ElementTree escapes the rest. ``time`` is the seconds the check's calls took
(`grader.builtin.timing`), so two runs differ in those attributes only.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from grader.errors import UsageError
from grader.feedback import STATUS_LABELS, check_feedback, student_message
from grader.fileio import output_file, write_atomic
from grader.models import GradingReport
from grader.plugins import hookimpl
from grader.safetext import display, xml_text
from grader.stash import check_seconds
from grader.term import adjustment_lines

__all__ = ["junit_xml"]

FILENAME = "junit.xml"

OUTCOME = {"failed": "failure", "error": "error", "timeout": "error", "not_attempted": "skipped"}
"""Our check status -> the JUnit child element (none for ``passed``)."""

_SURROGATES = re.compile("[\ud800-\udfff\ufffe\uffff]")


def _text(text: str, newlines: bool = False) -> str:
    """Student text as an XML attribute or element text: inert, and valid XML 1.0."""
    # Surrogates and U+FFFE/FFFF go first (display would make U+FFFD of them), escape sequences next.
    return xml_text(display(_SURROGATES.sub("", text), newlines=newlines))


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def junit_xml(report: GradingReport, seconds: dict[str, dict[tuple[str, str], float]] | None = None) -> str:
    """The JUnit XML document of a session.

    Parameters
    ----------
    report : grader.models.GradingReport
    seconds : dict, optional
        Per submission id, the seconds of each (exercise id, check id), as
        `grader.stash.check_seconds` gives; missing ones are 0.

    Returns
    -------
    str
        UTF-8 XML text with an XML declaration, ending in a newline.
    """
    seconds = seconds or {}
    root = ET.Element("testsuites", name="grader")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    total_time = 0.0
    exercise_ids = [e.id for e in report.exercises] or [e.id for s in report.submissions[:1] for e in s.exercises]
    for ex_id in exercise_ids:
        suite = ET.SubElement(root, "testsuite", name=_text(ex_id))
        counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
        suite_time = 0.0
        for sub in report.submissions:
            for ex in sub.exercises:
                if ex.id != ex_id:
                    continue
                for c in ex.checks:
                    t = seconds.get(sub.id, {}).get((ex.id, c.id), 0.0)
                    suite_time += t
                    case = ET.SubElement(
                        suite, "testcase", classname=_text(f"{sub.id}.{ex.id}"), name=_text(c.id), time=_seconds(t)
                    )
                    counts["tests"] += 1
                    element = OUTCOME.get(c.status)
                    if element is None:
                        continue
                    counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[element]] += 1
                    first_line = (student_message(c) or STATUS_LABELS.get(c.status, c.status)).splitlines()[0]
                    child = ET.SubElement(case, element, type=c.status, message=_text(first_line))
                    child.text = _text(check_feedback(c), newlines=True)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", _seconds(suite_time))
        total_time += suite_time
    adjusted = [sub for sub in report.submissions if sub.adjustments]
    if adjusted:  # final scores and reasons: properties of a suite of no test, so the counts stay the checks'
        suite = ET.SubElement(root, "testsuite", name="final scores", tests="0", failures="0", errors="0",
                              skipped="0", time="0.000")
        props = ET.SubElement(suite, "properties")
        for sub in adjusted:
            ET.SubElement(props, "property", name=_text(sub.id),
                          value=_text(" | ".join(adjustment_lines(sub)[::-1])))
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _seconds(total_time))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=False).join(
        ('<?xml version="1.0" encoding="utf-8"?>\n', "\n")
    )


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity", "check", "merge"):
        return
    parser.add_argument(
        "--junit", metavar="FILE", type=output_file, help=f"write JUnit XML here, for CI (any command; default for grade: DIR/{FILENAME})"
    )


@hookimpl
def grader_write_reports(report: GradingReport, config: Any) -> None:
    """Write ``--junit FILE``, or ``DIR/junit.xml`` when the command writes files."""
    out = config.out_dir
    target = config.option("junit") or (out / FILENAME if out else None)
    if target is None:
        return
    seconds = {s.id: check_seconds(config.stash, s.id) for s in report.submissions}
    try:
        write_atomic(Path(target), junit_xml(report, seconds))
    except OSError as exc:
        raise UsageError(f"--junit {target}: cannot write the file ({exc.strerror})") from None
