"""Issue 16's structural guarantees: what ``grader check`` imports, and the manifest's fast check.

Rates and memory are measured by ``benchmarks/bench_limits.py`` (their figures depend on the
machine); these tests pin what makes them possible and does not depend on load.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from grader.packs import _SCHEMA, _plainly_valid, find_pack

HEAVY = ("jsonschema", "jinja2", "sqlite3")


def test_grader_check_imports_no_plugin_library_it_does_not_use(tmp_path: Path) -> None:
    pack = find_pack()
    shutil.copy(pack.starter, tmp_path / pack.submission)
    script = (
        "import sys\n"
        "from grader.cli import main\n"
        f"code = main(['check', {pack.submission!r}, '-q', '--public', {str(pack.public)!r}])\n"
        f"print(json.dumps([code, sorted(m for m in {list(HEAVY)!r} if m in sys.modules)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    code, imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert code == 1, out.stderr  # the untouched starter: its visible checks are not attempted
    assert imported == []


def _manifest() -> dict:
    import yaml

    return yaml.safe_load((find_pack().root / "course.yaml").read_text())


def _variants() -> list[dict]:
    base = _manifest()
    out = []
    for key, value in [
        ("id", "bad id!"),
        ("title", ""),
        ("functions", []),
        ("functions", ["a", "a"]),
        ("functions", ["1x"]),
        ("submission", {"file": "x.txt"}),
        ("submission", {"module": "m"}),
        ("unknown_key", 1),
        ("sections", {"G14.01": 3}),
        ("specs", 7),
        ("plugin", "kinds.txt"),
    ]:
        data = copy.deepcopy(base)
        data[key] = value
        out.append(data)
    missing = copy.deepcopy(base)
    del missing["title"]
    out += [missing, [], "text", {1: "x"}]
    return out


def test_the_manifest_s_fast_check_accepts_the_real_manifest() -> None:
    assert _plainly_valid(_manifest(), _SCHEMA)


@pytest.mark.parametrize("data", _variants())
def test_the_manifest_s_fast_check_never_accepts_what_jsonschema_refuses(data: object) -> None:
    valid = not list(jsonschema.Draft202012Validator(_SCHEMA).iter_errors(data))
    assert not valid
    assert not _plainly_valid(data, _SCHEMA)


# --- junit.xml streamed: the same bytes as the whole tree ------------------------------------------


def _junit_by_tree(report, seconds):
    """The tree-based writer junit.py had before it streamed (the oracle)."""
    import xml.etree.ElementTree as ET

    from grader.builtin.junit import OUTCOME, _seconds, _text
    from grader.feedback import STATUS_LABELS, check_feedback, student_message
    from grader.term import adjustment_lines

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
                    case = ET.SubElement(suite, "testcase", classname=_text(f"{sub.id}.{ex.id}"), name=_text(c.id),
                                         time=_seconds(t))
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
    if adjusted:
        suite = ET.SubElement(root, "testsuite", name="final scores", tests="0", failures="0", errors="0",
                              skipped="0", time="0.000")
        props = ET.SubElement(suite, "properties")
        for sub in adjusted:
            ET.SubElement(props, "property", name=_text(sub.id), value=_text(" | ".join(adjustment_lines(sub)[::-1])))
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _seconds(total_time))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=False).join(
        ('<?xml version="1.0" encoding="utf-8"?>\n', "\n"))


def _reports():
    from grader.models import Adjustment, CheckResult, Exercise, ExerciseResult, GradingReport, SubmissionResult

    def check(cid, status, message=""):
        return CheckResult(id=cid, description="d", status=status, score=1.0 if status == "passed" else 0.0,
                           max_score=1.0, visibility="visible", message=message, hint="h <&> \"q\"", shown=True)

    ex1 = ExerciseResult("E1", "One", "s", 1.0, 3.0, (check("a", "passed"), check("b", "failed", "wrong <b>\nmore"),
                                                       check("c", "timeout", "slow")))
    ex2 = ExerciseResult("E2", "Two", "s", 0.0, 2.0, (check("d", "not_attempted"), check("e", "error", "\x1b[31mx")))
    empty = ExerciseResult("E3", "Three", "s", 0.0, 0.0, ())
    subs = tuple(SubmissionResult(id=name, path=name, sha256="", status="graded", score=1.0, max_score=5.0,
                                  exercises=(ex1, ex2, empty), slug=name) for name in ("ann", "bob & co", "c\u202ed"))
    late = SubmissionResult(id="late", path="late", sha256="", status="graded", score=0.5, max_score=5.0,
                            exercises=(ex1, ex2), slug="late", raw_score=1.0,
                            adjustments=(Adjustment(kind="late", points=-0.5, reason="1 day late"),))
    exercises = tuple(Exercise(id=i, title=i, section="s", path="", checks=()) for i in ("E1", "E2", "E3"))
    return [
        GradingReport("0", "h", "grade", subs, exercises),
        GradingReport("0", "h", "grade", (*subs, late), exercises),
        GradingReport("0", "h", "grade", (), exercises),
        GradingReport("0", "h", "grade", (), ()),
        GradingReport("0", "h", "grade", subs[:1], ()),
        GradingReport("0", "h", "grade", (late,), ()),
    ]


@pytest.mark.parametrize("index", range(6))
def test_junit_streamed_is_byte_identical_to_the_whole_tree(index: int) -> None:
    from grader.builtin.junit import junit_pieces, junit_xml

    report = _reports()[index]
    seconds = {"ann": {("E1", "a"): 0.0125, ("E2", "e"): 1.5}, "late": {("E1", "b"): 0.25}}
    expected = _junit_by_tree(report, seconds)
    assert junit_xml(report, seconds) == expected
    assert "".join(junit_pieces(report, lambda sub_id: seconds.get(sub_id, {}))) == expected
