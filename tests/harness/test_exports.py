"""Exports read back with the real consumers' own rules (issue 23, item 3).

Each consumer's reading is transcribed here, its source named beside it:

* Moodle's grading worksheet upload: ``mod/assign/feedback/offline/importgradeslib.php``
  (``init``, ``next``) and ``locallib.php`` (``process_import_grades``), moodle/moodle.
* Canvas's gradebook import: ``app/models/gradebook_importer.rb`` (``header?``,
  ``update_column_count``, ``process_custom_column_headers``, ``strip_custom_columns``,
  ``parse_assignments``, ``check_for_non_student_row``, ``process_pp``, ``process_student``,
  ``process_submissions``), instructure/canvas-lms.
* Jenkins' xunit plugin: ``junit-10.xsd`` (``tests/schemas/junit-10.xsd``), and Jenkins' junit
  plugin's split of a classname at its last dot into package and class.
* Gradescope's "Autograder Specifications" (``tests/harness/test_gradescope.py``'s schema) and its rule
  that anything printed in the top-level ``output`` is shown as is.
* CTRF: ``schema/ctrf.schema.json`` of ctrf-io/ctrf (`CTRF_SCHEMA` below, the parts we write).
"""

from __future__ import annotations

import csv
import dataclasses
import html.parser
import io
import json
import re
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest

from grader.builtin.ctrf import ctrf_report
from grader.builtin.gradescope import gradescope_results
from grader.builtin.junit import junit_xml
from grader.builtin.lms import canvas_assignment_column, canvas_csv, moodle_csv
from grader.models import Adjustment, CheckResult, ExerciseResult, GradingReport, SubmissionResult
from harness.test_gradescope import GRADESCOPE_RESULTS

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


# --- the results the writers get ------------------------------------------------------------


def _check(
    cid: str, status: str, score: float, top: float, visibility: str = "visible", message: str = ""
) -> CheckResult:
    return CheckResult(cid, "", status, score, top, visibility, message, "", visibility == "visible")


def _sub(sid: str, lms: dict[str, str], hidden_failed: bool = False, message: str = "") -> SubmissionResult:
    visible = _check("shape", "passed", 2.0, 2.0)
    hidden = _check(
        "big", "failed" if hidden_failed else "passed", 0.0 if hidden_failed else 3.0, 3.0, "hidden", message
    )
    other = _check("mask", "error", 0.0, 5.0, "visible", message or "softmax raised ValueError")
    ex1 = ExerciseResult("G14.01", "Scores", "s", visible.score + hidden.score, 5.0, (visible, hidden))
    ex2 = ExerciseResult("G14.02", "Softmax", "s", 0.0, 5.0, (other,))
    score = ex1.score + ex2.score
    return SubmissionResult(sid, sid, "", "graded", score, 10.0, (ex1, ex2), lms=lms)


def _late(sub: SubmissionResult) -> SubmissionResult:
    adj = Adjustment("late", -1.0, "marked LATE by the LMS: -10% of 10 per day", "", "")
    return SubmissionResult(
        sub.id, sub.path, sub.sha256, sub.status, sub.score - 1.0, sub.max_score, sub.exercises,
        raw_score=sub.score, adjustments=(adj,), lms=sub.lms,
    )  # fmt: skip


HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _report() -> GradingReport:
    subs = (
        _sub("smithbob", {"system": "canvas", "user": "340934", "name": "smithbob"}),
        _late(_sub("jonesann", {"system": "canvas", "user": "340935", "name": "jonesann", "late": "1"})),
        _sub("Bob Smith", {"system": "moodle", "user": "12345", "name": "Bob Smith"}, True, HOSTILE),
        _sub("Ann Lee", {"system": "moodle", "user": "12346", "name": "Ann Lee"}),
        SubmissionResult(
            "Cy Err",
            "p",
            "",
            "error",
            0.0,
            10.0,
            (),
            error=f"importing the file failed: ValueError: {HOSTILE}",
            lms={"system": "moodle", "user": "12347", "name": "Cy Err"},
        ),  # fmt: skip
        _sub("plain", {}),
    )
    return GradingReport("0", "h", "grade", subs)


# --- Moodle ------------------------------------------------------------------------------------


def moodle_import(text: str, participants: dict[str, int], grades: dict[int, dict], max_grade: float = 100) -> dict:
    """Moodle's "Upload grading worksheet", transcribed (moodle/moodle,
    mod/assign/feedback/offline/importgradeslib.php and locallib.php).

    ``participants``: unique id (the number after "Participant ") -> user id
    (``get_user_id_for_uniqueid``); ``grades``: user id -> the grade Moodle holds
    (``grade``, ``timemodified``); ``max_grade``: the assignment's maximum grade. Returns what
    Moodle stores: user id -> grade, feedback.
    """
    rows = list(csv.reader(io.StringIO(text)))  # csv_import_reader, 'comma'
    columns = rows[0]
    # init(): get_string('grade'), get_string('recordid', 'assign'), get_string('lastmodifiedgrade', 'assign')
    # in English; the feedback comments plugin's editor field's description.
    index = {name: columns.index(name) for name in ("Grade", "Identifier", "Last modified (grade)") if name in columns}
    if len(index) < 3:
        raise ValueError("invalidgradeimport: Moodle could not read the uploaded worksheet")
    feedback_index = columns.index("Feedback comments") if "Feedback comments" in columns else None
    stored: dict[int, dict] = {}
    for record in rows[1:]:  # next()
        idstr = record[index["Identifier"]]
        uid = idstr[len("Participant ") :]  # substr($idstr, strlen(get_string('hiddenuser', 'assign')))
        if uid not in participants:
            continue
        user = participants[uid]
        grade = float(record[index["Grade"]])  # unformat_float
        modified = datetime.fromisoformat(record[index["Last modified (grade)"]]).timestamp()  # strtotime
        held = grades.get(user)
        stale = held is not None and held["timemodified"] > modified + 60
        result: dict = {}
        if not (held and held["grade"] == grade) and grade >= 0 and not stale and grade <= max_grade:
            result["grade"] = grade
        # `if (!empty($details['index']))`: a feedback column at index 0 is never read.
        if not stale and feedback_index:
            result["feedback"] = record[feedback_index]
        stored[user] = result
    return stored


class _Elements(html.parser.HTMLParser):
    """The HTML elements in a text, as a browser showing Moodle's feedback would build them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_moodle_worksheet_is_read_by_moodles_importer() -> None:
    text = moodle_csv(_report(), "G14", modified="2026-12-05T09:10:00+00:00")
    assert next(csv.reader(io.StringIO(text))) == [
        "Identifier",
        "Full name",
        "Grade",
        "Maximum Grade",
        "Last modified (grade)",
        "Feedback comments",
    ]
    stored = moodle_import(text, {"12345": 501, "12346": 502, "12347": 503}, {})
    assert stored[501]["grade"] == 2.0 and stored[502]["grade"] == 5.0  # Bob: 2 + 0 (hidden failed) + 0
    assert stored[503]["grade"] == 0.0
    assert set(stored) == {501, 502, 503}  # the Canvas and plain students are not in Moodle's worksheet
    # A grade Moodle holds from before the grading is replaced; one given by hand after it is kept (stale).
    held = {501: {"grade": 1.0, "timemodified": datetime.fromisoformat("2026-12-05T08:00:00+00:00").timestamp()}}
    assert moodle_import(text, {"12345": 501}, held)[501]["grade"] == 2.0
    held[501]["timemodified"] = datetime.fromisoformat("2026-12-05T09:30:00+00:00").timestamp()
    assert "grade" not in moodle_import(text, {"12345": 501}, held)[501]
    # Without the column, Moodle refuses the whole file (the bug of issue 23).
    old = "\n".join(",".join(c for i, c in enumerate(row.split(",")) if i != 4) for row in text.splitlines())
    with pytest.raises(ValueError, match="invalidgradeimport"):
        moodle_import(old, {"12345": 501}, {})


def test_moodle_feedback_is_escaped_html() -> None:
    stored = moodle_import(moodle_csv(_report(), "G14", modified="2026-12-05T09:10:00+00:00"), {"12347": 503}, {})
    feedback = stored[503]["feedback"]
    page = _Elements()
    page.feed(feedback)  # Moodle stores and shows Feedback comments as HTML (FORMAT_HTML)
    assert set(page.tags) == {"br"}  # the student's markup is text, never an element
    shown = "".join(page.text)
    assert '<script>alert("x")</script>' in shown and "G14: 0 / 10" in shown
    assert "<script" not in feedback and "&lt;script&gt;" in feedback


def test_moodle_time_is_fixed_by_source_date_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764925800")
    text = moodle_csv(_report(), "G14")
    assert list(csv.reader(io.StringIO(text)))[1][4] == "2025-12-05T09:10:00+00:00"


# --- Canvas ------------------------------------------------------------------------------------


def canvas_import(text: str, assignments: dict[int, str], students: dict[int, str], custom: set[str]) -> dict:
    """Canvas's gradebook import, transcribed (instructure/canvas-lms, app/models/gradebook_importer.rb).

    ``assignments``: id -> title; ``students``: user id -> name; ``custom``: the course's custom
    gradebook columns' titles. Returns the assignments read (id, or "new: title"), their points
    possible, each student's grades and custom column data.
    """
    reserved = {"Student", "LastName", "FirstName", "ID", "SIS User ID", "SIS Login ID", "Section",
                "Integration ID", "Root Account"}  # fmt: skip
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    # header?: row_has_student_headers?
    if not (len(header) > 3 and "Student" in header[0] and "ID" in header[1]):
        raise ValueError("Invalid header row")
    # process_custom_column_headers
    custom_cols = {title: i for i, title in enumerate(header) if title not in reserved and title in custom}
    # update_column_count
    student_columns = 3
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        student_columns += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        student_columns += 2
    student_columns += len(custom_cols)
    # last_student_info_column: "Custom Columns are between section and assignments"
    if "Section" not in header[student_columns - (1 + len(custom_cols))]:
        raise ValueError("Invalid header row")
    # process_header: strip_non_assignment_columns, strip_custom_columns, parse_assignments
    non_assignment = re.compile("|".join(["Current Score", "Current Points", "Current Grade", "Final Score",
                                          "Final Points", "Final Grade", "Override Score", "Override Grade",
                                          "Override Status"]))  # fmt: skip
    rest = [c for c in header[student_columns:] if not non_assignment.search(c)]
    rest = [c for c in rest if c not in custom_cols]
    found = []
    for name_and_id in rest:
        m = re.match(r"\A(.*)\s+\((\d+)\)\Z", name_and_id)  # Assignment.title_and_id
        key: int | str | None = int(m[2]) if m and int(m[2]) in assignments else None
        if key is None:  # backward compat: the exact title, else a new assignment
            key = next((i for i, t in assignments.items() if t == name_and_id), f"new: {name_and_id}")
        found.append((key, header.index(name_and_id)))
    points: dict = {}
    grades: dict = {}
    notes: dict = {}
    for row in rows[1:]:  # check_for_non_student_row
        if "Points Possible" in row[0]:
            points = {key: row[i] for key, i in found}  # process_pp
            continue
        student = int(row[1]) if row[1].isdigit() and int(row[1]) in students else f"new: {row[0]}"
        grades[student] = {key: row[i].strip() for key, i in found}  # process_submissions
        notes[student] = {title: row[i] for title, i in custom_cols.items()}
    return {"assignments": [k for k, _ in found], "points": points, "grades": grades, "notes": notes}


def test_canvas_import_reads_scores_into_the_assignment_and_notes_into_its_column() -> None:
    text = canvas_csv(_report(), "G14 attention (77)")
    header = next(csv.reader(io.StringIO(text)))
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Notes", "G14 attention (77)"]
    read = canvas_import(text, {77: "G14 attention", 78: "G15"}, {340934: "Bob", 340935: "Ann"}, {"Notes"})
    assert read["assignments"] == [77]  # matched by its id: no new assignment, Notes is no assignment
    assert read["points"] == {77: "10"}
    assert read["grades"] == {340934: {77: "5"}, 340935: {77: "4"}}  # Ann: 5, -1 for the LATE mark
    assert "marked LATE" in read["notes"][340935]["Notes"] and read["notes"][340934]["Notes"] == ""


def test_canvas_title_without_an_id_would_create_an_assignment() -> None:
    column, warning = canvas_assignment_column(None, "G14 attention", None)
    assert column == "G14 attention" and warning is not None and "--canvas-assignment 'G14 attention (ID)'" in warning
    read = canvas_import(canvas_csv(_report(), column), {77: "G14 Attention"}, {340934: "Bob"}, {"Notes"})
    assert read["assignments"] == ["new: G14 attention"]  # what the warning says
    # The push's address gives the id; a given 'Title (id)' is kept as it is.
    assert canvas_assignment_column(None, "G14 attention", "https://c.edu/courses/1/assignments/77") == (
        "G14 attention (77)",
        None,
    )
    assert canvas_assignment_column("Attention HW (12)", "x", None) == ("Attention HW (12)", None)


# --- JUnit: junit-10.xsd and Jenkins' classname split ------------------------------------------


def jenkins_split(classname: str) -> tuple[str, str]:
    """Jenkins' junit plugin (``CaseResult``): package and class, split at the classname's last dot."""
    i = classname.rfind(".")
    return ("(root)", classname) if i < 0 else (classname[:i], classname[i + 1 :])


def test_junit_is_valid_against_xunits_schema_and_classnames_split_between_ids(graded: dict) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    schema = xmlschema.XMLSchema(str(SCHEMAS / "junit-10.xsd"))
    text = (graded["out"] / "junit.xml").read_text()
    schema.validate(io.StringIO(text))
    report = _report()
    dotted = SubmissionResult("j.smith", "p", "", "graded", 0.0, 10.0, report.submissions[0].exercises)
    mine = junit_xml(GradingReport("0", "h", "grade", (dotted, _late(report.submissions[0]))))
    schema.validate(io.StringIO(mine))  # with the final scores' suite of properties too
    names = re.findall(r'classname="([^"]+)"', mine)
    assert jenkins_split(names[0]) == ("j_smith", "G14_01")  # not package "j.smith.G14", class "01"
    assert {jenkins_split(n)[1] for n in names} == {"G14_01", "G14_02"}
    assert "skipped" not in re.search(r"<testsuites[^>]*>", mine)[0]


# --- Gradescope: no hidden-inclusive sum anywhere visible ---------------------------------------


def _visible_text(data: dict) -> str:
    """Everything Gradescope shows a student before release: the top-level output and visible tests."""
    parts = [data["output"]] if data.get("visibility", "visible") == "visible" else []
    parts += [f"{t['name']}\n{t.get('output', '')}" for t in data["tests"] if t.get("visibility") == "visible"]
    return "\n".join(parts)


def test_gradescope_file_with_hidden_failures_shows_no_hidden_inclusive_sum() -> None:
    sub = _late(_sub("eve", {}, hidden_failed=False))
    failed = _late(_sub("eve", {}, hidden_failed=True))
    for one in (sub, failed):
        data = gradescope_results(GradingReport("0", "h", "grade", (one,)), one)
        jsonschema.validate(data, GRADESCOPE_RESULTS)
        shown = _visible_text(data)
        # The totals, raw or final, and G14.01's sum with its hidden check: none printed.
        assert "Total:" in shown and "Total: 4" not in shown and "final score" not in shown
        assert not re.search(r"G14\.01 Scores: [0-9.]+ / 5", shown)
        assert "G14.01 Scores: visible checks 2 / 2 (and hidden checks)" in shown
        assert "G14.02 Softmax: visible checks 0 / 5" in shown
        assert "marked LATE" in shown  # the reason stays; the sums it changed do not
    # The two files' visible text is the same: nothing tells a hidden pass from a hidden failure.
    a = gradescope_results(GradingReport("0", "h", "grade", (sub,)), sub)
    b = gradescope_results(GradingReport("0", "h", "grade", (failed,)), failed)
    assert a["output"] == b["output"]


def test_gradescope_without_hidden_checks_keeps_the_totals() -> None:
    visible = _check("shape", "passed", 2.0, 2.0)
    ex = ExerciseResult("G14.01", "Scores", "s", 2.0, 2.0, (visible,))
    sub = SubmissionResult("al", "al", "", "graded", 2.0, 2.0, (ex,))
    out = gradescope_results(GradingReport("0", "h", "grade", (sub,)), sub)["output"]
    assert out.splitlines()[:2] == ["Total: 2 / 2", "G14.01 Scores: 2 / 2"]


def test_sample_gradescope_files_show_no_hidden_inclusive_exercise_sum(graded: dict) -> None:
    for path in sorted((graded["out"] / "gradescope").glob("*.json")):
        data = json.loads(path.read_text())
        sub = graded["by_id"][path.stem]
        assert f"Total: {sub['score']:g}" not in data["output"]
        for e in sub["exercises"]:
            if any(c["visibility"] != "visible" for c in e["checks"]):
                assert not re.search(rf"{re.escape(e['id'])} [^\n]*: {e['score']:g} / {e['max_score']:g}$",
                                     data["output"], re.M), (path.name, e["id"])  # fmt: skip


# --- CTRF ---------------------------------------------------------------------------------------

_STATUS = {"enum": ["passed", "failed", "skipped", "pending", "other"]}
CTRF_SCHEMA = {
    # Transcribed from ctrf-io/ctrf, schema/ctrf.schema.json (draft-07, MIT): the top level, results,
    # tool, summary and a test as the schema defines them; properties of a test we never write
    # (steps, attachments, retryAttempts, ...) are left out and refused.
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["results", "reportFormat", "specVersion"],
    "properties": {
        "reportFormat": {"const": "CTRF"},
        "specVersion": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+\.[0-9]+$"},
        "reportId": {"type": "string", "format": "uuid"},
        "timestamp": {"type": "string", "format": "date-time"},
        "generatedBy": {"type": "string"},
        "extra": {"type": "object"},
        "results": {
            "type": "object",
            "required": ["tool", "summary", "tests"],
            "properties": {
                "tool": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "version": {"type": "string"},
                        "extra": {"type": "object"},
                    },
                    "additionalProperties": False,
                },
                "summary": {
                    "type": "object",
                    "required": ["tests", "passed", "failed", "skipped", "pending", "other", "start", "stop"],
                    "properties": {
                        **{k: {"type": "integer"} for k in ("tests", "passed", "failed", "skipped", "pending")},
                        **{k: {"type": "integer"} for k in ("other", "flaky", "suites", "start", "stop", "duration")},
                        "extra": {"type": "object"},
                    },
                    "additionalProperties": False,
                },
                "tests": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "status", "duration"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "status": _STATUS,
                            "duration": {"type": "integer"},
                            "start": {"type": "integer"},
                            "stop": {"type": "integer"},
                            "suite": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                            "message": {"type": "string"},
                            "trace": {"type": "string"},
                            "rawStatus": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "filePath": {"type": "string"},
                            "extra": {"type": "object"},
                        },
                        "additionalProperties": False,
                    },
                },
                "environment": {"type": "object"},
                "extra": {"type": "object"},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}


def test_ctrf_report_of_the_samples_is_valid_and_true(graded: dict) -> None:
    data = json.loads((graded["out"] / "ctrf.json").read_text())
    jsonschema.Draft7Validator(CTRF_SCHEMA).validate(data)
    tests = data["results"]["tests"]
    summary = data["results"]["summary"]
    checks = [
        (s["id"], e["id"], c) for s in graded["results"]["submissions"] for e in s["exercises"] for c in e["checks"]
    ]
    assert summary["tests"] == len(tests) == len(checks)
    want = {"passed": "passed", "failed": "failed", "error": "other", "timeout": "other", "not_attempted": "skipped"}
    for key in ("passed", "failed", "skipped", "other"):
        assert summary[key] == sum(1 for _, _, c in checks if want[c["status"]] == key), key
    assert summary["pending"] == 0 and summary["stop"] - summary["start"] == summary["duration"] >= 0
    for test, (sid, eid, c) in zip(tests, checks):
        assert test["suite"] == [sid, eid] and test["name"] == f"{sid} {eid} {c['id']}"
        assert test["status"] == want[c["status"]] and test["extra"]["points"] == c["score"]
        assert test["extra"]["visibility"] == c["visibility"]
        assert ("rawStatus" in test) == (c["status"] in ("error", "timeout", "not_attempted"))
    hidden = [t for t in tests if t["extra"]["visibility"] == "hidden" and t["status"] == "failed"]
    assert hidden and all("expected:" not in t.get("message", "") for t in hidden)


def test_ctrf_of_hostile_text_is_valid() -> None:
    sub = _sub("eve\x1b]0;x\x07\ud800", {}, True, "bad \x1b[2J\ud800")
    data = ctrf_report(GradingReport("0", "h", "grade", (sub,)), now_ms=1_000)
    jsonschema.Draft7Validator(CTRF_SCHEMA).validate(data)
    text = json.dumps(data, ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogate
    assert "\\u001b" not in text and data["results"]["summary"]["stop"] == 1_000
    assert data["results"]["tests"][0]["name"] == "eve\ufffd G14.01 shape"


def test_files_of_a_graded_lms_export_are_read_by_canvas_and_moodle(tmp_path: Path) -> None:
    """The whole road: a Canvas zip and a Moodle folder graded, their files read by the importers."""
    from grader.cli import main
    from harness.test_term import NO_SQRT, NUMPY, _canvas, _grade

    _canvas(tmp_path)
    url = "https://canvas.example.edu/courses/1/assignments/77"
    assert _grade(tmp_path, "--canvas-assignment", "G14 attention (77)") == 0
    read = canvas_import(
        (tmp_path / "out" / "canvas.csv").read_text(), {77: "G14 attention"}, {340934: "b", 340935: "a"}, {"Notes"}
    )
    assert read["assignments"] == [77] and read["points"] == {77: "86"}
    assert read["grades"] == {340934: {77: "68"}, 340935: {77: "75.4"}}
    assert "marked LATE" in read["notes"][340935]["Notes"]
    assert canvas_assignment_column(None, "G14 attention", url)[0] == "G14 attention (77)"

    export = tmp_path / "moodle"
    for folder, text in (
        ("Bob Smith_12345_assignsubmission_file_", NUMPY),
        ("Ann Lee_12346_assignsubmission_file_", NO_SQRT),
    ):
        (export / folder).mkdir(parents=True)
        (export / folder / "attention.py").write_text(text)
    assert main(["grade", str(export), "--out", str(tmp_path / "mout"), "-q"]) == 0
    stored = moodle_import((tmp_path / "mout" / "moodle.csv").read_text(), {"12345": 1, "12346": 2}, {})
    assert {u: s["grade"] for u, s in stored.items()} == {1: 86.0, 2: 66.0}
    assert stored[2]["feedback"].startswith("G14: 66 / 86<br>G14.01 ")


@pytest.mark.parametrize(
    "sid",
    ["smithbob", "eve\x1b]0;x\x07\ud800", "zoë", "tab\there", "bidi\u202ename"],
)
def test_ctrf_text_made_from_kept_check_parts_is_the_whole_document_encoded(sid: str) -> None:
    """`ctrf_pieces` makes each test from parts kept per distinct check result (issue 29): the text is
    still ``json.dumps`` of the document, each test the one `_tests` makes, for any id."""
    from grader.builtin.ctrf import _tests, ctrf_pieces

    sub = _sub(sid, {}, True, "bad \x1b[2J\ud800")
    odd = dataclasses.replace(sub.exercises[1].checks[0], id="mask é\x1b[1m", details=[("got", "x")])  # unhashable
    sub = dataclasses.replace(sub, exercises=(sub.exercises[0], dataclasses.replace(sub.exercises[1], checks=(odd,))))
    report = GradingReport("0", "h", "grade", (sub, _sub("plain", {})))
    times = {("G14.01", "shape"): 0.0126, ("G14.01", "big"): 1.5}
    for _ in range(2):  # the second time from the kept parts
        text = "".join(ctrf_pieces(report, lambda _id: times, now_ms=5_000))
        data = json.loads(text)
        assert text == json.dumps(data, allow_nan=False, ensure_ascii=False)
        assert data["results"]["tests"] == [t for s in report.submissions for t in _tests(s, times)]
    assert data["results"]["summary"]["duration"] == 2 * (13 + 1500)


def test_junit_and_ctrf_from_kept_check_times_are_the_text_made_check_by_check() -> None:
    """The end writers read each submission's check seconds once (`CheckTimes`, issue 29) and fill a form kept
    per exercise result: the text is the one made check by check from `check_seconds`' dicts, for odd ids, an
    unhashable detail, an exercise with no check, a check the run has no seconds for, a submission with none,
    and seconds that round either way."""
    import types

    from grader.builtin.ctrf import ctrf_pieces
    from grader.builtin.junit import junit_pieces
    from grader.collected import COLLECTED
    from grader.grading.timing import CheckTimes
    from grader.stash import Stash

    subs = [_sub(sid, {}, hidden) for sid, hidden in (("smithbob", False), ("zoë", True), ("a.b", True), ("none", 0))]
    odd = dataclasses.replace(subs[1].exercises[1].checks[0], details=[("got", "x")])  # unhashable
    subs[1] = dataclasses.replace(
        subs[1], exercises=(subs[1].exercises[0], dataclasses.replace(subs[1].exercises[1], checks=(odd,)))
    )
    empty = ExerciseResult("G14.03", "Empty", "s", 0.0, 0.0, ())
    subs[2] = dataclasses.replace(subs[2], exercises=(empty, *subs[2].exercises))
    subs.append(dataclasses.replace(subs[0], id="twin"))  # the very same exercise results, other seconds
    report = GradingReport("0", "h", "grade", tuple(subs))
    # calls: shape 2, big 1, (no 'mask' seconds: another check id), extra 1
    slices = ((("G14.01", "shape"), slice(0, 2)), (("G14.01", "big"), slice(2, 3)), (("G14.02", "other"), slice(3, 4)))
    seconds = {
        "smithbob": [0.0005, 0.001, 1.2345, 0.25],
        "zoë": [0.0015, 0.0, 2.0005, 0.1],
        "a.b": [0.1, 0.2, 0.3, 0.4],
        "twin": [0.0025, 0.0, 0.5, 0.0135],
    }
    collected = types.SimpleNamespace(check_slices=slices, calls=[None] * 4)
    config = types.SimpleNamespace(stash=Stash())
    config.stash[COLLECTED] = collected
    config.hooks = types.SimpleNamespace(call_seconds=lambda submission_id, config: seconds.get(submission_id))

    def by_dict(sub_id: str) -> dict:
        known = seconds.get(sub_id)
        return {} if known is None else {key: round(sum(known[where]), 3) for key, where in slices}

    times = CheckTimes(config)
    assert times("smithbob") == by_dict("smithbob") and times("none") == {}
    for _ in range(2):  # the second time from the kept forms
        fast, slow = (
            "".join(ctrf_pieces(report, times, now_ms=9_000)),
            "".join(ctrf_pieces(report, by_dict, now_ms=9_000)),
        )
        assert fast == slow, [(a, b) for a, b in zip(fast.split(", "), slow.split(", ")) if a != b]
        assert "".join(junit_pieces(report, times)) == "".join(junit_pieces(report, by_dict))
    assert '"duration": 1234' in "".join(ctrf_pieces(report, times, now_ms=9_000))
