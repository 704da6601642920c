"""LMS exports read from the LMS's structure, never from the student's text; a late policy that means what it says.

Issue 23, items 1 and 2. The export names follow the LMSs' own code:

* Canvas, instructure/canvas-lms ``lib/content_zipper.rb``: ``get_filename`` joins the
  sanitised sortable name, ``LATE`` when late, and the user id with ``_``;
  ``add_upload_submission`` appends ``_<attachment id>_<display name>``; a text entry is
  ``<prefix>_text.html``.
* Moodle, moodle/moodle ``mod/assign/classes/downloader.php`` (``get_student_prefix``,
  ``load_submissionplugin_filelist``): the full name with ``_`` made spaces, ``_<participant id>``,
  then ``_assignsubmission_file`` and the file's path in a folder (``_/attention.py``; Moodle 4.1
  and later write no last ``_``), or flat ``_assignsubmission_file_<file name>``.

Every student's file is a different G14 sample (scores 86, 66, 65, 78, 81...), so a file graded
for the wrong student, or a row written for the wrong user id, shows in the scores.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader.cli import main
from grader.errors import UsageError
from grader.intake.lms import Entry, decide, parse_canvas, parse_moodle

ROOT = Path(__file__).resolve().parents[2]
S = ROOT / "submissions"


def _src(sample: str) -> str:
    return (S / sample / "attention.py").read_text()


def _notebook(sample: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# My attention"), nbformat.v4.new_code_cell(_src(sample))]
    return nbformat.writes(nb)


TEST_FILE = "from attention import softmax\n\n\ndef test_softmax():\n    assert softmax([0.0]) == [1.0]\n"


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


def _results(out: Path) -> dict[str, dict]:
    return {s["id"]: s for s in json.loads((out / "results.json").read_text())["submissions"]}


def _by_user(out: Path) -> dict[str, dict]:
    return {s["lms"]["user"]: s for s in _results(out).values() if s.get("lms", {}).get("user")}


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# --- the names: the LMS-written prefix only -----------------------------------------------------------------


def test_the_student_part_of_a_name_is_opaque() -> None:
    hostile = parse_canvas("smithbob_340934_208490284_jonesann_LATE_340935_1_Bob Smith_7_assignsubmission_file_a.py")
    assert hostile == {
        "name": "smithbob",
        "user": "340934",
        "late": "0",
        "file": "208490284",
        "upload": "jonesann_LATE_340935_1_Bob Smith_7_assignsubmission_file_a.py",
    }
    assert parse_canvas("o_neilbob_LATE_12_34_attention.py") == {
        "name": "o_neilbob",
        "user": "12",
        "late": "1",
        "file": "34",
        "upload": "attention.py",
    }
    assert parse_canvas("LATE_anon_x7Kq2_99_attention.py")["user"] == "anon_x7Kq2"  # anonymised grading
    assert parse_canvas("_1001_5001_attention.py")["user"] == "1001"  # a name with no word character left
    assert parse_canvas("parkjo_1006_text.html") == {"name": "parkjo", "user": "1006", "late": "0", "entry": "text"}
    assert parse_canvas("Bob Smith_12345_assignsubmission_file_attention.py") is None
    flat = parse_moodle("Ann Lee_2003_assignsubmission_file_Bob Smith_2002_assignsubmission_file_attention.py", False)
    assert flat == {
        "name": "Ann Lee",
        "user": "2003",
        "plugin": "file",
        "upload": "Bob Smith_2002_assignsubmission_file_attention.py",
    }
    assert parse_moodle("Dan Wu_2006_assignsubmission_file", True)["user"] == "2006"  # Moodle 4.1+: no last _
    assert parse_moodle("smithbob_1_2_x_3_assignsubmission_file_", True) is None
    # The layout is decided once, from every entry: one upload cannot turn a Canvas export into a Moodle one.
    canvas = [Entry(n, False) for n in ("a_1_2_attention.py", "b_3_4_x_5_assignsubmission_file_y.py")]
    assert decide(canvas, "c.zip", None) == "canvas"
    with pytest.raises(
        UsageError,
        match=r"c\.zip: an export of an unknown layout: 2 entries .* and 1 as Moodle does; give --lms canvas or",
    ):
        decide([*canvas, Entry("Bob Smith_1_assignsubmission_file_", True)], "c.zip", None)
    assert decide([Entry("alice", True), Entry("bob.py", False)], "class", None) is None


# --- Canvas: hostile uploads, same-name students, a test file, a notebook, a LATE mark ------------------------


def _canvas_zip(tmp: Path) -> Path:
    return _zip(
        tmp / "canvas.zip",
        {
            "smithbob_1001_5001_attention.py": _src("correct_numpy"),  # 86
            "smithbob_1001_5002_test_attention.py": TEST_FILE,  # a later attachment, not the submission file
            "smithbob_LATE_1002_5003_attention.py": _src("no_sqrt_dk"),  # the other smithbob: 66, LATE
            "jonesann_1003_5004_attention.ipynb": _notebook("mask_after_softmax"),  # 65, from a notebook
            "leeann_1004_5005_attention.py": _src("no_max_subtraction"),  # 78
            "leeann_1004_5006_smithbob_LATE_1001_9999_attention.py": _src("starter"),  # hostile names: data only
            "leeann_1004_5007_Bob Smith_2001_assignsubmission_file_attention.py": _src("starter"),
            "kimbo_1005_5008_Attention.PY": _src("correct_numpy"),
            "parkjo_1006_text.html": "<p>my answer is in the text box</p>",
            "README.txt": "instructor's notes dropped into the export",
        },
    )


def test_canvas_export_every_student_under_their_own_user_id(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _canvas_zip(tmp_path)
    (tmp_path / "manual.csv").write_text(
        "student,check,points,comment,grader\n1001,G14.01,10,first smithbob,ta\n1002,G14.01,2,second smithbob,ta\n"
    )
    (tmp_path / "policy.yaml").write_text(
        "due: 2026-03-01T23:59:00Z\npenalty: {per: day, percent: 10}\nlate_flag_units: 2\n"
        "late_days: {students: {1002: 1}}\n"  # an unquoted user id: YAML reads a number
    )
    out = tmp_path / "out"
    args = ["grade", str(tmp_path / "canvas.zip"), "--out", str(out), "-j", "2"]
    assert main([*args, "--manual", str(tmp_path / "manual.csv"), "--policy", str(tmp_path / "policy.yaml")]) == 0
    printed = capsys.readouterr()
    r = _results(out)
    assert sorted(r) == sorted(
        ["smithbob (1001)", "smithbob (1002)", "jonesann", "leeann", "kimbo", "parkjo", "README.txt"]
    )
    u = _by_user(out)
    assert sorted(u) == ["1001", "1002", "1003", "1004", "1005", "1006"]  # no row for 9999 or 2001
    # (file graded, LATE, automatic score, final score) per Canvas user
    got = {
        k: (s["lms"].get("file"), s["lms"]["late"], s.get("raw_score", s["score"]), s["score"]) for k, s in u.items()
    }
    assert got == {
        "1001": ("attention.py", "0", 86, 82),  # G14.01 14 -> 10 by hand; the test file beside it not graded
        "1002": ("attention.py", "1", 66, 53.4),  # 6 -> 2 by hand; LATE: 2 days, 1 late day, 1 day charged (-8.6)
        "1003": ("attention.ipynb", "0", 65, 65),
        "1004": ("attention.py", "0", 78, 78),
        "1005": (None, "0", 0, 0),
        "1006": (None, "0", 0, 0),
    }
    assert r["smithbob (1001)"]["lms"]["intake"] == "graded attention.py; also handed in, not graded: test_attention.py"
    assert [a["kind"] for a in r["smithbob (1001)"]["adjustments"]] == ["manual"]  # not LATE: no penalty
    assert "1 late day(s) used" in r["smithbob (1002)"]["adjustments"][1]["reason"]
    assert "rename it attention.py" in r["kimbo"]["error"]
    assert "a text entry" in r["parkjo"]["error"]
    assert r["README.txt"]["status"] == "error" and "belongs to no Canvas user" in r["README.txt"]["error"]
    page = (out / f"{r['smithbob (1001)']['slug']}.html").read_text()
    assert "also handed in, not graded: test_attention.py" in page
    # canvas.csv: one row per Canvas user id, with that user's own final score
    rows = {row["ID"]: row for row in _csv(out / "canvas.csv") if row["ID"]}
    fixed = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Notes")  # Notes: a custom column, before
    score_col = next(c for c in rows["1001"] if c not in fixed)
    assert {k: rows[k][score_col] for k in sorted(rows)} == {
        "1001": "82",
        "1002": "53.4",
        "1003": "65",
        "1004": "78",
        "1005": "0",
        "1006": "0",
    }
    gradebook = {row["student"]: row for row in _csv(out / "gradebook.csv")}
    assert "README.txt" in gradebook  # the entry no user owns stays, with its reason
    # the terminal names every penalty; what was graded is said on stderr
    assert re.search(r"smithbob \(1002\): -8\.6: 1 day\(s\) late", printed.out)
    assert "smithbob (1001) (canvas user 1001): graded attention.py; also handed in" in printed.err


# --- Moodle: folders (both forms) and flat ------------------------------------------------------------------

MOODLE = {  # participant: (full name, sample, automatic score, the file graded)
    "2001": ("Bob Smith", "correct_lists", 86, "attention.py"),
    "2002": ("Bob Smith", "masked_row_nan", 85, "attention.ipynb"),
    "2003": ("Ann Lee", "mib_decimal", 81, "attention.py"),
}


def _moodle_folders(tmp: Path) -> Path:
    return _zip(
        tmp / "moodle.zip",
        {
            "Bob Smith_2001_assignsubmission_file_/attention.py": _src("correct_lists"),
            "Bob Smith_2001_assignsubmission_file_/test_attention.py": TEST_FILE,
            "Bob Smith_2002_assignsubmission_file_/attention.ipynb": _notebook("masked_row_nan"),
            "Ann Lee_2003_assignsubmission_file_/attention.py": _src("mib_decimal"),
            # a folder the student made, named as another participant's: data inside Ann's folder
            "Ann Lee_2003_assignsubmission_file_/Ann Lee_2004_assignsubmission_file_/attention.py": _src("starter"),
            "Cara Diaz_2005_assignsubmission_file_/attention.py": _src("unnormalized_scores"),
            "Cara Diaz_2005_assignsubmission_onlinetext_/onlinetext.html": "<p>see my file</p>",
            "Dan Wu_2006_assignsubmission_file/attention.py": _src("transposed_shapes"),  # Moodle 4.1+
            "notes/readme.txt": "not a participant's folder",
        },
    )


def _moodle_flat(tmp: Path) -> Path:
    return _zip(
        tmp / "moodle-flat.zip",
        {
            "Bob Smith_2001_assignsubmission_file_attention.py": _src("correct_lists"),
            "Bob Smith_2001_assignsubmission_file_test_attention.py": TEST_FILE,
            "Bob Smith_2002_assignsubmission_file_attention.ipynb": _notebook("masked_row_nan"),
            "Ann Lee_2003_assignsubmission_file_Bob Smith_2002_assignsubmission_file_attention.py": _src("starter"),
            "Ann Lee_2003_assignsubmission_file_attention.py": _src("mib_decimal"),
        },
    )


@pytest.mark.parametrize("layout", ["folders", "flat"])
def test_moodle_export_every_participant_under_their_own_id(tmp_path: Path, layout: str) -> None:
    export = _moodle_folders(tmp_path) if layout == "folders" else _moodle_flat(tmp_path)
    (tmp_path / "manual.csv").write_text("student,check,points\n2002,G14.01,0\n")
    out = tmp_path / "out"
    args = ["grade", str(export), "--out", str(out), "-j", "2", "--manual", str(tmp_path / "manual.csv")]
    assert main(args) == 0
    u = _by_user(out)
    expected = dict(MOODLE)
    if layout == "folders":
        expected["2005"] = ("Cara Diaz", "unnormalized_scores", 55, "attention.py")
        expected["2006"] = ("Dan Wu", "transposed_shapes", 46, "attention.py")
    assert sorted(u) == sorted(expected)  # no participant 2004: a name inside Ann's folder is hers
    for user, (name, _sample, score, file) in expected.items():
        s = u[user]
        assert (s["lms"]["name"], s["lms"]["file"], s["lms"]["late"], s["lms"]["system"]) == (name, file, "0", "moodle")
        assert s.get("raw_score", s["score"]) == score, user
    assert u["2002"]["score"] == 85 - 14 and u["2001"]["score"] == 86  # the manual row is the one user's
    assert u["2001"]["id"] == "Bob Smith (2001)" and u["2003"]["id"] == "Ann Lee"
    every = _csv(out / "moodle.csv")
    rows = {row["Identifier"]: row for row in every if row["Identifier"] != "Participant "}
    unplaced = [row["Full name"] for row in every if row["Identifier"] == "Participant "]
    assert unplaced == (["notes"] if layout == "folders" else [])  # its row stays, under no participant's id
    want = {f"Participant {k}": expected[k][2] - (14 if k == "2002" else 0) for k in expected}
    assert {k: float(v["Grade"]) for k, v in rows.items()} == want
    assert {k: v["Full name"] for k, v in rows.items()} == {f"Participant {k}": v[0] for k, v in expected.items()}
    if layout == "folders":
        r = _results(out)
        assert r["notes"]["status"] == "error" and "belongs to no Moodle user" in r["notes"]["error"]
        assert "Ann Lee_2004_assignsubmission_file_/attention.py" in u["2003"]["lms"]["intake"]


# --- the README's policy, a month after the due date --------------------------------------------------------


def _readme_policy() -> str:
    """The example policy of the README (or of the docs it was moved to): the YAML block with ``times:``."""
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if not doc.is_file():
            continue
        for block in re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.DOTALL):
            if "times: [lms, arrival]" in block:
                return "\n".join(line.strip() for line in block.splitlines())
    raise AssertionError("no example policy with 'times: [lms, arrival]' in README.md or docs/")


def test_readme_policy_a_month_after_the_due_date(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import yaml

    policy = yaml.safe_load(_readme_policy())
    assert policy["times"] == ["lms", "arrival"] and policy["late_flag_units"] == 1
    policy["due"] = (dt.datetime.now(dt.UTC) - dt.timedelta(days=30)).replace(microsecond=0).isoformat()
    policy["late_days"]["students"]["2002"] = 2  # keyed by the Canvas user id
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    _zip(
        tmp_path / "canvas.zip",
        {
            "smithbob_2001_1_attention.py": _src("correct_numpy"),  # on time
            "jonesann_LATE_2002_2_attention.py": _src("correct_numpy"),  # LATE, 2 late days
            "leeann_LATE_2003_3_attention.py": _src("correct_numpy"),  # LATE, no late days
        },
    )
    out = tmp_path / "out"
    args = ["grade", str(tmp_path / "canvas.zip"), "--out", str(out), "--policy", str(tmp_path / "policy.yaml")]
    assert main([*args, "-j", "2"]) == 0
    printed = capsys.readouterr().out
    u = _by_user(out)
    assert {k: s["score"] for k, s in u.items()} == {"2001": 86, "2002": 86, "2003": 77.4}
    assert "adjustments" not in u["2001"]  # the grader saw the file 30 days late: not a time it trusts for Canvas
    assert u["2002"]["adjustments"][0]["points"] == 0 and "1 late day(s) used" in u["2002"]["adjustments"][0]["reason"]
    assert "time the grader first saw the file" not in json.dumps(u)
    assert printed.count("late penalties") == 1 and "leeann: -8.6: 1 day(s) late: marked LATE by the Canvas" in printed
    assert (
        "smithbob" not in printed.split("late penalties")[1] and "jonesann:" not in printed.split("late penalties")[1]
    )
    # a LATE mark counted as 2 days: the 2 late days cover both
    policy["late_flag_units"] = 2
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    assert main([*args, "-j", "2"]) == 0
    u = _by_user(out)
    assert {k: s["score"] for k, s in u.items()} == {"2001": 86, "2002": 86, "2003": 68.8}
    assert "2 late day(s) used" in u["2002"]["adjustments"][0]["reason"]


def test_no_trusted_time_charges_nothing_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    export = tmp_path / "export"
    for name, sample in (("Bob Smith_12345", "correct_numpy"), ("Ann Lee_12346", "correct_numpy")):
        (export / f"{name}_assignsubmission_file_").mkdir(parents=True)
        (export / f"{name}_assignsubmission_file_" / "attention.py").write_text(_src(sample))
    (tmp_path / "worksheet.csv").write_text(  # Moodle gives Bob's time, not Ann's
        'Identifier,Full name,Last modified (submission)\nParticipant 12345,Bob Smith,"Tuesday, 3 March 2026, 10:00 AM"\n'
    )
    (tmp_path / "policy.yaml").write_text(
        "due: 2026-03-01T23:59:00Z\npenalty: {per: day, points: 5}\ntimes: [lms, arrival]\n"
    )
    out = tmp_path / "out"
    args = ["grade", str(export), "--out", str(out), "--policy", str(tmp_path / "policy.yaml"), "-j", "2"]
    assert main([*args, "--lms-times", str(tmp_path / "worksheet.csv")]) == 0
    printed = capsys.readouterr().out
    r = _results(out)
    assert (r["Bob Smith"]["score"], r["Ann Lee"]["score"]) == (76, 86)  # 2 days late by Moodle's time; Ann: no time
    lines = [line for line in printed.splitlines() if "no trusted time" in line]
    assert lines == [
        "late policy: no trusted time for 1 student(s), nothing charged: Ann Lee; give --lms-times with the LMS's times"
    ]


# --- bad inputs: one line naming the file, the key and the fix; nothing left behind --------------------------


def _refused(argv: list[str], code: int, capsys: pytest.CaptureFixture, tmp: Path) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert not (tmp / "out").exists()
    assert not [p for p in (tmp / "scratch").iterdir() if p.name.startswith("grader-")]
    return err[-1]


def test_bad_inputs_are_one_line_and_leave_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "scratch"))
    canvas = _canvas_zip(tmp_path)
    grade = ["grade", str(canvas), "--out", str(tmp_path / "out")]
    mixed = _zip(
        tmp_path / "mixed.zip", {"a_1_2_attention.py": "", "Bob Smith_3_assignsubmission_file_/attention.py": ""}
    )
    line = _refused(["grade", str(mixed), "--out", str(tmp_path / "out")], 2, capsys, tmp_path)
    assert line.startswith(f"grader: error: {mixed}: an export of an unknown layout") and "--lms canvas" in line
    line = _refused([*grade, "--lms", "moodle"], 2, capsys, tmp_path)
    assert f"{canvas}: --lms moodle: no entry is named as Moodle's" in line and "leave out --lms" in line
    # a manual row for an LMS id the export does not have; a display name two students share
    manual = tmp_path / "manual.csv"
    manual.write_text("student,check,points\n1003,G14.01,1\n9999,G14.01,1\n")
    line = _refused([*grade, "--manual", str(manual)], 3, capsys, tmp_path)
    assert line == (
        f"grader: error: --manual {manual}: line 3: student: no student of this run has the id or LMS user id "
        "'9999'; give an id or lms.user from results.json"
    )
    manual.write_text("student,check,points\nsmithbob,G14.01,1\n")
    line = _refused([*grade, "--manual", str(manual)], 3, capsys, tmp_path)
    assert f"--manual {manual}: line 2: student: 'smithbob' is the name of 2 students (Canvas user 1001" in line
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "due: 2026-03-01T23:59:00Z\npenalty: {per: day, percent: 10}\nlate_days: {students: {smithbob: 2}}\n"
    )
    line = _refused([*grade, "--policy", str(policy)], 3, capsys, tmp_path)
    assert f"{policy}: late_days.students.smithbob: 'smithbob' is the name of 2 students" in line
    # a policy that can date no one: a Moodle export carries no times, arrival never dates it
    moodle = _moodle_flat(tmp_path)
    policy.write_text("due: 2026-03-01T23:59:00Z\npenalty: {per: day, percent: 10}\ntimes: [lms, arrival]\n")
    line = _refused(
        ["grade", str(moodle), "--out", str(tmp_path / "out"), "--policy", str(policy)], 3, capsys, tmp_path
    )
    assert line == (
        f"grader: error: {policy}: times: [lms, arrival]: no trusted time for any submission of this run (a Moodle "
        "export's file names carry no times and arrival never dates an LMS export); give --lms-times with the "
        "LMS's times (Moodle's grading worksheet), or remove penalty"
    )


@pytest.mark.slow
def test_notebooks_go_through_every_intake(tmp_path: Path) -> None:
    """A zip of student folders (no LMS) and a Canvas export zipped inside a folder: notebooks graded like .py files."""
    plain = _zip(
        tmp_path / "class.zip",
        {
            "class/alice/attention.ipynb": _notebook("mask_after_softmax"),  # 65
            "class/bob.ipynb": _notebook("no_sqrt_dk"),  # 66
            "class/carol/attention.py": _src("correct_numpy"),  # 86
        },
    )
    assert main(["grade", str(plain), "--out", str(tmp_path / "out1"), "-j", "2"]) == 0
    r = _results(tmp_path / "out1")
    assert {k: (s["status"], s["score"]) for k, s in r.items()} == {
        "alice": ("graded", 65),
        "bob": ("graded", 66),
        "carol": ("graded", 86),
    }
    canvas = _zip(
        tmp_path / "wrapped.zip",
        {
            "submissions/jonesann_LATE_1003_5004_attention.ipynb": _notebook("mask_after_softmax"),
            "submissions/leeann_1004_5005_attention.py": _src("no_sqrt_dk"),
        },
    )
    assert main(["grade", str(canvas), "--out", str(tmp_path / "out2"), "-j", "2"]) == 0
    u = _by_user(tmp_path / "out2")
    assert {k: (s["id"], s["lms"]["file"], s["lms"]["late"], s["score"]) for k, s in u.items()} == {
        "1003": ("jonesann", "attention.ipynb", "1", 65),
        "1004": ("leeann", "attention.py", "0", 66),
    }
