"""``grader term`` (grader/term/ledger.py): one gradebook over a term, late days from one budget.

Three assignments are graded for real (two students, the same correct file,
submission times from an LMS times CSV), each with a policy that reads the
ledger written after the previous ones. alice is 3 days late on A1, 2 on A2
(her 5 term days are gone) and 1 on A3, where she gets the penalty.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from grader.cli import main

pytestmark = pytest.mark.slow  # a term of three assignments graded once for the module

MAX = 86.0  # the G14 pack's maximum
DUE = {"A1": "2026-03-01T23:59:00+00:00", "A2": "2026-03-08T23:59:00+00:00", "A3": "2026-03-15T23:59:00+00:00"}
ALICE = {"A1": "2026-03-04T10:00:00+00:00", "A2": "2026-03-10T12:00:00+00:00", "A3": "2026-03-16T10:00:00+00:00"}
BOB = {"A1": "2026-03-01T12:00:00+00:00", "A2": "2026-03-08T12:00:00+00:00", "A3": "2026-03-15T12:00:00+00:00"}


def _grade(root: Path, assignment: str, ledger: bool = True, subs: Path | None = None) -> Path:
    policy = root / f"{assignment}-policy.yaml"
    policy.write_text(
        f"due: '{DUE[assignment]}'\n"
        "penalty: {per: day, percent: 10}\n"
        f"late_days: {{term: 5{', ledger: term/ledger.json' if ledger else ''}}}\n"
        f"assignment: {assignment}\n"
    )
    times = root / f"{assignment}-times.csv"
    times.write_text(f"id,submitted_at\nalice,{ALICE[assignment]}\nbob,{BOB[assignment]}\n")
    out = root / assignment.lower()
    code = main(
        ["grade", str(subs or root / "subs"), "--out", str(out), "--policy", str(policy), "--lms-times", str(times)]
        + ["--no-diagnosis", "-q"]
    )
    assert code == 0
    return out


@pytest.fixture(scope="module")
def term(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("term")
    for student in ("alice", "bob"):
        (root / "subs" / student).mkdir(parents=True)
        shutil.copy(ROOT / "reference" / "mutants" / "correct_numpy" / "attention.py", root / "subs" / student)
    outs = []
    for assignment in ("A1", "A2", "A3"):
        outs.append(_grade(root, assignment))
        assert main(["term", *map(str, outs), "--out", str(root / "term")]) == 0
    return {"root": root, "outs": outs}


def _results(out: Path) -> dict:
    return {s["id"]: s for s in json.loads((out / "results.json").read_text())["submissions"]}


def test_each_assignment_charges_the_days_the_ledger_left(term: dict) -> None:
    a1, a2, a3 = (_results(o) for o in term["outs"])
    assert a1["alice"]["late"] == {"days": 3, "used": 3} and a1["alice"]["score"] == MAX
    assert a2["alice"]["late"] == {"days": 2, "used": 2} and a2["alice"]["score"] == MAX
    # All five used on A1 and A2: one day late on A3 costs 10% of 86.
    assert a3["alice"]["late"] == {"days": 1, "used": 0}
    assert a3["alice"]["score"] == pytest.approx(MAX - 8.6) and a3["alice"]["raw_score"] == MAX
    assert [a["kind"] for a in a3["alice"]["adjustments"]] == ["late"]
    assert all("late" not in r["bob"] and r["bob"]["score"] == MAX for r in (a1, a2, a3))
    head = json.loads((term["outs"][2] / "results.json").read_text())
    assert (head["course"], head["assignment"], head["late_days"]) == ("g14", "A3", {"term": 5})


def test_ledger_and_gradebook_agree_with_the_results(term: dict) -> None:
    ledger = json.loads((term["root"] / "term" / "ledger.json").read_text())
    assert [a["id"] for a in ledger["assignments"]] == ["A1", "A2", "A3"]
    students = {s["id"]: s for s in ledger["students"]}
    alice, bob = students["alice"], students["bob"]
    assert [alice["assignments"][a]["late_days_used"] for a in ("A1", "A2", "A3")] == [3, 2, 0]
    assert (alice["late_days_used"], alice["late_days_left"]) == (5, 0)
    assert (bob["late_days_used"], bob["late_days_left"]) == (0, 5)
    assert ledger["left_before"] == {
        "A1": {"alice": 5, "bob": 5},
        "A2": {"alice": 2, "bob": 5},
        "A3": {"alice": 0, "bob": 5},
    }
    for out, a in zip(term["outs"], ("A1", "A2", "A3")):
        results = _results(out)
        for sid in ("alice", "bob"):
            assert students[sid]["assignments"][a]["score"] == results[sid]["score"]
    assert alice["total"] == pytest.approx(3 * MAX - 8.6) and alice["max_score"] == 3 * MAX
    with open(term["root"] / "term" / "gradebook.csv", newline="") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert list(rows["alice"])[:7] == ["student", "A1", "A2", "A3", "total", "max_score", "status"]
    assert (rows["alice"]["A3"], rows["alice"]["total"], rows["alice"]["raw_score"]) == ("77.4", "249.4", "258")
    assert "late days: 5 used of 5 (A1 3, A2 2, A3 0), 0 left" in rows["alice"]["adjustments"]
    assert "A3: 1 day(s) late" in rows["alice"]["adjustments"]
    assert (
        rows["bob"]["total"] == "258"
        and "late days: 0 used of 5 (A1 0, A2 0, A3 0), 5 left" in rows["bob"]["adjustments"]
    )


def test_a3_graded_without_the_ledger_is_refused(
    term: dict, tmp_path: Path, cli, capsys: pytest.CaptureFixture[str]
) -> None:
    """Graded from a fresh budget, A3 would forgive alice's day: the ledger refuses, naming the fix."""
    root = term["root"]
    (tmp_path / "stale").mkdir()
    stale = _grade(tmp_path / "stale", "A3", ledger=False, subs=root / "subs")
    capsys.readouterr()
    out = tmp_path / "t"
    code, _, err = cli("term", *term["outs"][:2], stale, "--out", out)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(stale / "results.json") in err and "'alice' was charged 1 late day(s)" in err
    assert "late_days.ledger" in err and not out.exists()


def _edited(src: Path, dest: Path, change) -> Path:
    data = json.loads((src / "results.json").read_text())
    change(data)
    dest.mkdir()
    (dest / "results.json").write_text(json.dumps(data))
    return dest


def test_bad_input_gets_one_line_naming_the_file_and_the_fix(term: dict, tmp_path: Path, cli) -> None:
    a1, a2, a3 = term["outs"]
    other = _edited(a3, tmp_path / "other", lambda d: d.update(course="g15"))
    out = tmp_path / "t"
    code, _, err = cli("term", a1, a2, other, "--out", out)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(other / "results.json") in err and "course 'g15'" in err and "leave it out" in err

    code, _, err = cli("term", a1, a2, a1, "--out", out)
    assert code == 2 and "assignment id 'A1' again" in err and "'assignment:'" in err

    gone = _edited(
        a2, tmp_path / "gone", lambda d: d.update(submissions=[s for s in d["submissions"] if s["id"] != "bob"])
    )
    code, _, err = cli("term", a1, gone, a3, "--out", out)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(gone / "results.json") in err and "no result for student 'bob'" in err and "--missing zero" in err
    assert not out.exists()  # nothing half-written

    code, _, err = cli("term", a1, gone, a3, "--out", out, "--missing", "zero")
    assert code == 0, err
    bob = next(s for s in json.loads((out / "ledger.json").read_text())["students"] if s["id"] == "bob")
    assert bob["assignments"]["A2"]["score"] == 0 and bob["total"] == 2 * MAX

    code, _, err = cli("term", tmp_path / "nowhere", "--out", out)
    assert code == 2 and "nowhere" in err


def test_a_policy_with_term_and_students_is_refused_in_one_line(tmp_path: Path, cli) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("due: '2026-03-01T23:59:00+00:00'\nlate_days: {term: 5, students: {alice: 2}}\n")
    code, _, err = cli("grade", ROOT / "submissions" / "correct_numpy", "--policy", policy, "--out", tmp_path / "o")
    assert code == 3 and str(policy) in err and "remove 'students'" in err
    assert not (tmp_path / "o").exists()


def test_the_term_total_goes_to_the_lms_files_of_the_students_an_lms_named(term: dict, tmp_path: Path, cli) -> None:
    """Canvas's import (header, Points Possible row, a row per Canvas student by ID, as test_term reads it)."""

    def canvas(d: dict) -> None:
        for s in d["submissions"]:
            s["lms"] = {"system": "canvas", "user": {"alice": "340934", "bob": "340935"}[s["id"]], "name": s["id"]}

    outs = [_edited(o, tmp_path / f"c{i}", canvas) for i, o in enumerate(term["outs"])]
    out = tmp_path / "t"
    code, stdout, err = cli("term", *outs, "--out", out, "--canvas-assignment", "Term (12)")
    assert code == 0, err
    rows = list(csv.reader((out / "canvas.csv").open()))
    # Notes, a custom column, before the assignment: the order Canvas's importer reads (docs/exports.md).
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Notes", "Term (12)"]
    assert rows[1][0].strip() == "Points Possible" and rows[1][6] == f"{3 * MAX:g}"
    by_id = {r[1]: r for r in rows[2:]}
    assert by_id["340934"][6] == "249.4" and "late days: 5 used of 5 (A1 3, A2 2, A3 0), 0 left" in by_id["340934"][5]
    assert by_id["340935"][6] == "258"
    assert "alice: A1 86/86 A2 86/86 A3 77.4/86; total 249.4; late days used 5, left 0" in stdout


def test_a_policy_with_a_ledger_names_its_assignment(tmp_path: Path) -> None:
    from grader.errors import ConfigError
    from grader.term import load_policy

    policy = tmp_path / "p.yaml"
    policy.write_text("due: '2026-03-01T23:59:00+00:00'\nlate_days: {term: 5, ledger: term/ledger.json}\n")
    with pytest.raises(ConfigError, match=r"p.yaml: late_days.ledger without 'assignment'; add 'assignment: A2'"):
        load_policy(str(policy))
    (tmp_path / "term").mkdir()
    (tmp_path / "term" / "ledger.json").write_text("{}")
    policy.write_text(
        "due: '2026-03-01T23:59:00+00:00'\nassignment: A1\nlate_days: {term: 5, ledger: term/ledger.json}\n"
    )
    with pytest.raises(ConfigError, match=r"is not a ledger; give the ledger.json 'grader term' wrote"):
        load_policy(str(policy))
