"""The instructor's term (issue 14): LMS exports in, grades out, policy, manual scores, regrades, similarity.

Fixtures follow the documented export names: Canvas's "Download Submissions"
(``lastnamefirstname[_LATE]_userid_attemptid_filename``) and Moodle's
"Download all submissions" folders (``Full Name_participantid_assignsubmission_file_``).
"""

from __future__ import annotations

import csv
import json
import re
import zipfile
from pathlib import Path

import pytest

from grader.cli import main
from grader.term import load_policy, parse_lms_name

ROOT = Path(__file__).resolve().parents[2]

S = ROOT / "submissions"
NUMPY = (S / "correct_numpy" / "attention.py").read_text()
NO_SQRT = (S / "no_sqrt_dk" / "attention.py").read_text()


def _canvas(tmp: Path) -> Path:
    z = tmp / "canvas.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("smithbob_340934_208490284_attention.py", NUMPY)  # first attempt
        zf.writestr("smithbob_340934_208490299_attention-1.py", NO_SQRT)  # latest attempt: graded
        zf.writestr("jonesann_LATE_340935_208490300_attention.py", NUMPY)
    (tmp / "policy.yaml").write_text("due: 2026-03-01T23:59:00+00:00\npenalty: {per: day, percent: 10, cap: 50}\n")
    (tmp / "manual.csv").write_text(
        "student,check,points,comment,grader\n"
        'smithbob,G14.01,8,"partial credit after the dispute",ta-lee\n'
        'jonesann,G14.02/zero-scores,0,"copied from the notes",prof\n'
    )
    return z


def _grade(tmp: Path, *extra: str) -> int:
    return main(
        [
            "grade",
            str(tmp / "canvas.zip"),
            "--out",
            str(tmp / "out"),
            "--policy",
            str(tmp / "policy.yaml"),
            "--manual",
            str(tmp / "manual.csv"),
            "-j",
            "2",
            *extra,
        ]
    )


def _results(out: Path) -> dict:
    return {s["id"]: s for s in json.loads((out / "results.json").read_text())["submissions"]}


def test_lms_names() -> None:
    assert parse_lms_name("smithbob_LATE_340934_208490284_attention") == {
        "system": "canvas",
        "name": "smithbob",
        "user": "340934",
        "late": "1",
        "attempt": "208490284",
    }
    assert parse_lms_name("Bob Smith_12345_assignsubmission_file_") == {
        "system": "moodle",
        "name": "Bob Smith",
        "user": "12345",
        "late": "0",
    }
    assert parse_lms_name("alice") is None and parse_lms_name("smith_bob") is None


@pytest.mark.slow
def test_canvas_export_policy_manual_every_output(tmp_path: Path) -> None:
    _canvas(tmp_path)
    assert _grade(tmp_path, "--staff") == 0
    out = tmp_path / "out"
    r = _results(out)
    assert sorted(r) == ["jonesann", "smithbob"]  # the Canvas ids, not the whole file names
    bob, ann = r["smithbob"], r["jonesann"]
    assert bob["lms"]["attempts"] == "2" and bob["lms"]["attempt"] == "208490299"  # the latest attempt
    assert (bob["raw_score"], bob["score"]) == (66, 68)  # no_sqrt_dk's 66, G14.01 6 -> 8 by hand
    assert (ann["raw_score"], ann["score"]) == (86, 75.4)  # -2 by hand, then 10% of 86 for the LATE mark
    assert [a["kind"] for a in ann["adjustments"]] == ["manual", "late"]
    check = next(c for e in ann["exercises"] for c in e["checks"] if c["id"] == "zero-scores")
    assert (check["score"], check["automatic_score"]) == (0, 2)
    late_reason = ann["adjustments"][1]["reason"]
    assert "marked LATE" in late_reason and "-10% of 86 per day" in late_reason
    # every output: the same final score and the reasons
    gb = {row["student"]: row for row in csv.DictReader((out / "gradebook.csv").open())}
    assert (gb["jonesann"]["total"], gb["jonesann"]["raw_score"]) == ("75.4", "86")
    assert "marked LATE" in gb["jonesann"]["adjustments"] and "copied from the notes" in gb["jonesann"]["adjustments"]
    rows = list(csv.reader((out / "canvas.csv").open()))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Notes", "G14 attention"]
    canvas = {row[1]: row for row in rows[2:]}
    assert canvas["340935"][6] == "75.4" and canvas["340934"][6] == "68" and "marked LATE" in canvas["340935"][5]
    page = (out / "jonesann.html").read_text()
    assert "75.4 / 86" in page and "marked LATE" in page and "automatic 2" in page
    gs = json.loads((out / "gradescope" / "jonesann.json").read_text())
    assert gs["score"] == 75.4 and "marked LATE" in gs["output"] and gs["extra_data"]["raw_score"] == 86
    junit = (out / "junit.xml").read_text()
    assert re.search(r'property name="jonesann" value="Automatic score 86, final score 75.4 / 86 \| Late', junit)
    # a regrade keeps the manual scores; the same inputs give the same bytes
    first = (out / "results.json").read_bytes()
    assert _grade(tmp_path, "--regrade") == 0
    assert (out / "results.json").read_bytes() == first
    assert _grade(tmp_path) == 0  # from the gradebook, adjusted once, not twice
    assert (out / "results.json").read_bytes() == first


def test_staff_pages_never_in_student_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _canvas(tmp_path)
    summary = tmp_path / "out" / "github-step-summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # the GitHub outputs too: annotations and the step summary
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert _grade(tmp_path, "--staff") == 0
    printed = capsys.readouterr()
    out = tmp_path / "out"
    assert summary.is_file() and "::error" in printed.out
    staff = (out / "staff" / "smithbob.html").read_text()
    hidden = re.search(r'<section class="hidden"><h2>(G14\.0\d \S+).*?args: (\[.*?\])</pre>', staff, re.DOTALL)
    assert hidden, "the staff page shows a hidden check's arguments"
    values = [v for v in re.findall(r"-?\d+\.\d{6,}", hidden[2].replace("&#34;", '"'))]
    assert values, hidden[2][:200]
    for f in out.rglob("*"):
        if f.is_file() and "staff" not in f.parts and f.suffix != ".sqlite":
            text = f.read_text(errors="replace")
            assert not any(v in text for v in values[:5]), f"{f} holds a hidden input"
    assert not any(v in printed.out + printed.err for v in values[:5])  # terminal and annotations


@pytest.mark.slow
def test_only_and_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _canvas(tmp_path)
    (tmp_path / "manual.csv").write_text("student,check,points\n")
    assert _grade(tmp_path) == 0
    old = tmp_path / "old.json"
    old.write_bytes((tmp_path / "out" / "results.json").read_bytes())
    (tmp_path / "manual.csv").write_text("student,check,points,comment,grader\nsmithbob,G14.03,10,dispute,prof\n")
    capsys.readouterr()
    assert _grade(tmp_path, "--only", "smithbob") == 0
    assert sorted(_results(tmp_path / "out")) == ["jonesann", "smithbob"]  # jonesann from the gradebook
    capsys.readouterr()
    assert main(["diff", str(old), str(tmp_path / "out" / "results.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["smithbob: 66 -> 67 (+1)", "1 of 2 student(s) changed"]
    assert main(["grade", str(tmp_path / "canvas.zip"), "--out", str(tmp_path / "o2"), "--only", "nobody"]) == 2


def test_moodle_export_with_worksheet_times(tmp_path: Path) -> None:
    for name in ("Bob Smith_12345_assignsubmission_file_", "Ann Lee_12346_assignsubmission_file_"):
        (tmp_path / "export" / name).mkdir(parents=True)
        (tmp_path / "export" / name / "attention.py").write_text(NUMPY)
    (tmp_path / "worksheet.csv").write_text(
        "Identifier,Full name,Status,Grade,Maximum Grade,Last modified (submission)\n"
        'Participant 12345,Bob Smith,Submitted,,86,"Sunday, 1 March 2026, 11:00 PM"\n'
        'Participant 12346,Ann Lee,Submitted,,86,"Tuesday, 3 March 2026, 10:00 AM"\n'
    )
    (tmp_path / "policy.yaml").write_text(
        "due: 2026-03-01T23:59:00Z\ngrace_minutes: 30\npenalty: {per: day, points: 5, cap: 20}\n"
        "late_days: {students: {Ann Lee: 1}}\n"
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "grade",
                str(tmp_path / "export"),
                "--out",
                str(out),
                "--policy",
                str(tmp_path / "policy.yaml"),
                "--lms-times",
                str(tmp_path / "worksheet.csv"),
                "-j",
                "2",
            ]
        )
        == 0
    )
    r = _results(out)
    assert r["Bob Smith"]["score"] == 86 and "adjustments" not in r["Bob Smith"]
    ann = r["Ann Lee"]  # 34 h late, 30 min grace, 1 late day used: 1 day charged
    assert (ann["raw_score"], ann["score"]) == (86, 81)
    assert "1 late day(s) used" in ann["adjustments"][0]["reason"]
    rows = list(csv.reader((out / "moodle.csv").open()))
    assert rows[0] == [
        "Identifier",
        "Full name",
        "Grade",
        "Maximum Grade",
        "Last modified (grade)",
        "Feedback comments",
    ]
    moodle = {row[0]: row for row in rows[1:]}
    assert moodle["Participant 12346"][1:4] == ["Ann Lee", "81", "86"] and "late day" in moodle["Participant 12346"][5]
    assert moodle["Participant 12345"][1:4] == ["Bob Smith", "86", "86"]


def test_policy_errors_are_one_line(tmp_path: Path) -> None:
    p = tmp_path / "policy.yaml"
    p.write_text("due: 2026-03-01T23:59:00Z\npenalty: {per: week, percent: 10}\n")
    with pytest.raises(Exception) as err:
        load_policy(str(p))
    assert str(err.value).startswith(f"{p}: penalty.per: ") and "per: day or per: hour" in str(err.value)
    p.write_text("due: 2026-03-01T23:59:00Z\ngrace: 5\n")
    with pytest.raises(Exception) as err:
        load_policy(str(p))
    assert "grace" in str(err.value) and "remove it or check its spelling" in str(err.value)


@pytest.mark.slow
def test_similarity_flags_exactly_the_copied_and_shared_wrong_pairs(tmp_path: Path) -> None:
    pytest.importorskip("copydetect")
    cls = tmp_path / "class"
    renamed = NUMPY
    for old, new in (("mask", "allowed_here"), ("shift", "top"), ("scores", "raw_scores"), ("E ", "ex ")):
        renamed = renamed.replace(old, new)
    wrong = {
        n: (ROOT / "reference" / "mutants" / n / "attention.py").read_text().replace("N * N * itemsize", "N * itemsize")
        for n in ("correct_batched", "correct_logsumexp")
    }
    files = {
        "alice": NUMPY,
        "bob": renamed,
        "carol": (S / "correct_lists" / "attention.py").read_text(),
        "dave": wrong["correct_batched"],
        "erin": wrong["correct_logsumexp"],
    }
    for sid, text in files.items():
        (cls / sid).mkdir(parents=True)
        (cls / sid / "attention.py").write_text(text)
    out = tmp_path / "out"
    assert main(["similarity", str(cls), "--out", str(out), "--similarity-threshold", "0.75", "-j", "2"]) == 0
    page = (out / "similarity.html").read_text()
    pairs = re.findall(
        r'<td><a href="\w+\.html">(\w+)</a></td><td><a href="\w+\.html">(\w+)</a></td>\s*<td>([^<]*)</td>'
        r"<td>([^<]*)</td>",
        page,
    )
    assert {(a, b) for a, b, _, _ in pairs} == {("alice", "bob"), ("dave", "erin")}
    by = {(a, b): (code, values) for a, b, code, values in pairs}
    assert by[("alice", "bob")][0].endswith("%") and by[("alice", "bob")][1] == ""
    assert by[("dave", "erin")][1].startswith("G14.05/")  # the same wrong number of bytes, hidden, uncatalogued
    assert 'href="similarity.html"' in (out / "summary.html").read_text()


@pytest.mark.slow
def test_arrival_times_from_the_gradebook(tmp_path: Path) -> None:
    """times: [arrival]: the grader's own first sight of the file, kept in the gradebook: a rerun gives the same bytes."""
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "attention.py").write_text(NUMPY)
    (tmp_path / "policy.yaml").write_text(
        "due: 2020-01-01T00:00:00Z\npenalty: {per: hour, percent: 5, cap: 40}\ntimes: [lms, arrival]\n"
    )
    out = tmp_path / "out"
    args = ["grade", str(tmp_path / "alice"), "--out", str(out), "--policy", str(tmp_path / "policy.yaml")]
    assert main(args) == 0
    alice = _results(out)["alice"]
    assert (alice["raw_score"], alice["score"]) == (86, 51.6)  # years late: the cap, 40% of 86
    assert "time the grader first saw the file" in alice["adjustments"][0]["reason"]
    first = (out / "results.json").read_bytes()
    assert main([*args, "--regrade"]) == 0
    assert (out / "results.json").read_bytes() == first


def test_moodle_participant_with_an_onlinetext_folder_too(tmp_path: Path) -> None:
    export = tmp_path / "export"
    (export / "Bob Smith_12345_assignsubmission_file_").mkdir(parents=True)
    (export / "Bob Smith_12345_assignsubmission_file_" / "attention.py").write_text(NUMPY)
    (export / "Bob Smith_12345_assignsubmission_onlinetext_").mkdir()
    (export / "Bob Smith_12345_assignsubmission_onlinetext_" / "onlinetext.html").write_text("<p>see file</p>")
    assert main(["grade", str(export), "--out", str(tmp_path / "out")]) == 0
    r = _results(tmp_path / "out")
    assert list(r) == ["Bob Smith"] and r["Bob Smith"]["score"] == 86 and r["Bob Smith"]["lms"]["user"] == "12345"


def test_manual_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _canvas(tmp_path)
    (tmp_path / "manual.csv").write_text("student,check,points\nsmithbob,G14.02/no-such-check,1\n")
    assert _grade(tmp_path) == 3
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("grader: error: --manual ") and "line 2: check: G14.02 has no check 'no-such-check'" in err
    (tmp_path / "manual.csv").write_text("student,check,points\nsmithbob,G14.01,15\n")
    assert _grade(tmp_path) == 3
    assert "line 2: points: 15 is more than G14.01 is worth (14); give at most 14" in capsys.readouterr().err
