"""JUnit XML (junit), read back by a real JUnit consumer (junitparser) and
compared with the structure pytest's own ``--junitxml`` writes."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import SUBMISSIONS
from junitparser import Error, Failure, JUnitXml, Skipped

from grader.builtin.junit import classname, junit_xml
from grader.models import CheckResult, ExerciseResult, GradingReport, SubmissionResult
from grader.reporting.feedback import HIDDEN_NOTE

KIND = {Failure: "failure", Error: "error", Skipped: "skipped"}
EXPECTED_KIND = {"passed": None, "failed": "failure", "error": "error", "timeout": "error", "not_attempted": "skipped"}


def _outcome(case) -> str | None:  # noqa: ANN001
    results = case.result
    assert len(results) <= 1
    return KIND[type(results[0])] if results else None


def test_a_consumer_reads_every_check_with_the_right_outcome(graded: dict) -> None:
    xml = JUnitXml.fromfile(str(graded["out"] / "junit.xml"))
    subs = graded["results"]["submissions"]
    suites = list(xml)
    assert [s.name for s in suites] == [e["id"] for e in subs[0]["exercises"]]
    statuses = {
        (classname(s["id"], e["id"]), c["id"]): c["status"] for s in subs for e in s["exercises"] for c in e["checks"]
    }
    seen = {}
    for suite in suites:
        counts = {"failure": 0, "error": 0, "skipped": 0}
        cases = list(suite)
        for case in cases:
            assert case.classname.endswith("." + suite.name.replace(".", "_"))  # one dot: Jenkins' package split
            kind = _outcome(case)
            seen[(case.classname, case.name)] = kind
            if kind:
                counts[kind] += 1
            assert case.time >= 0
        # The counts the suite declares are the counts of its cases.
        assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (
            len(cases),
            counts["failure"],
            counts["error"],
            counts["skipped"],
        ), suite.name
    assert seen == {key: EXPECTED_KIND[status] for key, status in statuses.items()}
    root = ET.parse(graded["out"] / "junit.xml").getroot()
    assert int(root.get("tests")) == len(statuses) == sum(s.tests for s in suites)
    assert int(root.get("failures")) == sum(1 for st in statuses.values() if st == "failed")
    assert int(root.get("errors")) == sum(1 for st in statuses.values() if st in ("error", "timeout"))
    assert root.get("skipped") is None  # junit-10.xsd: <testsuites> has no skipped (each suite has its own)
    assert sum(s.skipped for s in suites) == sum(1 for st in statuses.values() if st == "not_attempted")


def test_messages_and_hidden_checks(graded: dict) -> None:
    xml = JUnitXml.fromfile(str(graded["out"] / "junit.xml"))
    cases = {(c.classname, c.name): c for suite in xml for c in suite}
    visible = cases[("unnormalized_scores.G14_02", "zero-scores")].result[0]
    assert visible.message == (
        "outputs differs from the expected value by up to 5 (at outputs[0][0]); asked: within rtol=1e-06, "
        "atol=1e-09 (float64 code is accurate to about 1e-13 here; float16 or a wrong formula is not)"
    )
    assert "expected: [[5.0]]" in visible.text and "Hint: Normalize the scores" in visible.text
    hidden = cases[("no_sqrt_dk.G14_01", "unequal-counts-and-widths")].result[0]
    assert hidden.message == HIDDEN_NOTE
    assert "differs" not in hidden.text and "Hint: Write the inner dimensions" in hidden.text
    timeout = cases[("hangs.G14_04", "chapter-example")].result[0]
    assert isinstance(timeout, Error) and timeout.type == "timeout"
    assert timeout.message == "softmax_backward did not finish: the call used more than 2 s of CPU time"
    skipped = cases[("starter.G14_02", "zero-scores")].result[0]
    assert isinstance(skipped, Skipped)
    assert skipped.message == "not attempted: attention still raises NotImplementedError"


def _pytest_reference(tmp_path: Path) -> ET.Element:
    """The JUnit XML pytest itself writes for a pass, a failure, an error and a skip."""
    (tmp_path / "test_ref.py").write_text(
        "import pytest\n"
        "def test_pass():\n    pass\n"
        "def test_fail():\n    assert 0\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('x')\n"
        "def test_error(broken):\n    pass\n"
        "def test_skip():\n    pytest.skip('later')\n"
    )
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_ref.py", "--junitxml=ref.xml"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    return ET.parse(tmp_path / "ref.xml").getroot()


def _shape(root: ET.Element) -> tuple[dict[tuple[str, ...], set[str]], set[tuple[str, ...]]]:
    """Attribute names per element path, and the element paths."""
    attrs: dict[tuple[str, ...], set[str]] = {}

    def walk(el: ET.Element, path: tuple[str, ...]) -> None:
        path = (*path, el.tag)
        attrs.setdefault(path, set()).update(el.attrib)
        for child in el:
            walk(child, path)

    walk(root, ())
    return attrs, set(attrs)


# Attributes the common JUnit schema (Jenkins, Surefire) defines that pytest does not write.
SCHEMA_EXTRAS = {
    ("testsuites",): {"tests", "failures", "errors", "time"},
    ("testsuites", "testsuite", "testcase", "failure"): {"type"},
    ("testsuites", "testsuite", "testcase", "error"): {"type"},
}


def test_same_structure_as_pytests_junitxml(graded: dict, tmp_path: Path) -> None:
    ref_attrs, ref_paths = _shape(_pytest_reference(tmp_path))
    ours_attrs, ours_paths = _shape(ET.parse(graded["out"] / "junit.xml").getroot())
    assert ours_paths == ref_paths  # testsuites > testsuite > testcase > failure | error | skipped
    for path, names in ours_attrs.items():
        assert names <= ref_attrs[path] | SCHEMA_EXTRAS.get(path, set()), (path, names - ref_attrs[path])
    # What a consumer needs is there: the counts of a suite, the identity and time of a case.
    assert {"name", "tests", "failures", "errors", "skipped", "time"} <= ours_attrs[("testsuites", "testsuite")]
    assert ours_attrs[("testsuites", "testsuite", "testcase")] == {"classname", "name", "time"}


def test_control_characters_a_student_prints_stay_well_formed() -> None:
    check = CheckResult(
        "c1",
        "",
        "error",
        0.0,
        1.0,
        "visible",
        "attention raised ValueError: \x1b[31mred\x00\x08",
        "hint",
        True,
        (("got", "\x0c"),),
    )
    sub = SubmissionResult("s\x01", "s", "", "graded", 0.0, 1.0, (ExerciseResult("E1", "t", "s", 0.0, 1.0, (check,)),))
    text = junit_xml(GradingReport("0", "h", "check", (sub,)))
    root = ET.fromstring(text.encode())
    error = root.find("testsuite/testcase/error")
    assert error is not None and error.get("message") == "attention raised ValueError: red"
    assert root.find("testsuite/testcase").get("classname") == "s.E1"


def test_characters_xml_cannot_hold_are_removed_and_junitparser_reads_it(tmp_path: Path) -> None:
    message = "attention raised ValueError: a\x00b\x0bc\ud800d\ufffee\uffff<&>\"'\x1b]0;pwn\x07"
    check = CheckResult("c1", "", "failed", 0.0, 1.0, "visible", message, "h\x00int", True, (("got", "\ud800x\ty"),))
    sub = SubmissionResult(
        "\x00eve\ud800<x>", "s", "", "graded", 0.0, 1.0, (ExerciseResult("E1", "t", "s", 0.0, 1.0, (check,)),)
    )
    target = tmp_path / "junit.xml"
    target.write_text(junit_xml(GradingReport("0", "h", "check", (sub,))), encoding="utf-8")
    [suite] = list(JUnitXml.fromfile(str(target)))
    [case] = list(suite)
    assert case.classname == "eve<x>.E1"
    [failure] = case.result
    # VT is a line break (str.splitlines): the message attribute is the first line.
    assert failure.message == "attention raised ValueError: ab"
    assert failure.text == "attention raised ValueError: ab\ncde<&>\"'\ngot: x y\nHint: hint"


def test_junit_from_grader_check_for_students_ci(cli, graded: dict, tmp_path: Path) -> None:
    target = tmp_path / "junit.xml"
    code, _, err = cli("check", SUBMISSIONS / "mib_decimal" / "attention.py", "--junit", target)
    assert code == 1, err
    xml = JUnitXml.fromfile(str(target))
    visible = [
        (e["id"], c)
        for e in graded["by_id"]["mib_decimal"]["exercises"]
        for c in e["checks"]
        if c["visibility"] == "visible"
    ]
    cases = [(suite.name, case) for suite in xml for case in suite]
    assert [(ex, case.name) for ex, case in cases] == [(ex, c["id"]) for ex, c in visible]
    failing = [f"{ex} {case.name}" for ex, case in cases if _outcome(case)]
    assert failing == [f"{ex} {c['id']}" for ex, c in visible if c["status"] != "passed"]
    assert "G14.05 mib-n1024" in failing


def test_a_case_classname_escaped_in_two_parts_is_the_whole_escaped() -> None:
    """`_classname_attribute` escapes a printable-ASCII submission id on its own (per-case speed): the same text
    as escaping the whole classname, for ids that take the fast way and ids that do not."""
    from grader.builtin.junit import _attribute, _classname_attribute

    ids = ["alice", "a.b.c", "x&y<z>\"q'", "  spaced  ", "tab\there", "new\nline", "esc\x1b[31mred", "é.ü", "\ud800"]
    exercises = ["G14.02", "ex&<>\"'", "bidi\u202eoops", "e\x1b]8;;x\x07"]
    for sid in ids:
        for ex in exercises:
            assert _classname_attribute(sid, ex) == _attribute.__wrapped__(classname(sid, ex))
    assert _classname_attribute('x&y<z>"q', "G14.02") == "x&amp;y&lt;z&gt;&quot;q.G14_02"
