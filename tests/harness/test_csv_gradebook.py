"""The CSV gradebook (csv_gradebook): one row per student, read back with csv."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from conftest import SUBMISSIONS
from course.test_samples import EXERCISES, EXPECTED

from grader.builtin.csv_gradebook import gradebook_csv
from grader.models import ExerciseResult, GradingReport, SubmissionResult


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.slow
def test_header_and_one_row_per_student(graded: dict) -> None:
    text = (graded["out"] / "gradebook.csv").read_text()
    # Every field quoted, numbers included (LMS importers read "7.5" as a number).
    assert text.splitlines()[0] == ",".join(f'"{h}"' for h in ["student", *EXERCISES, "total", "max_score", "status"])
    assert text.splitlines()[1].startswith('"')
    rows = _rows(text)
    assert [r["student"] for r in rows] == sorted(EXPECTED)  # the order of the report: sorted folders
    max_score = graded["by_id"]["correct_numpy"]["max_score"]
    for row in rows:
        points = EXPECTED[row["student"]]
        assert [float(row[e]) for e in EXERCISES] == [float(p) for p in points], row
        assert float(row["total"]) == sum(points)
        assert float(row["max_score"]) == max_score
        assert row["status"] == ("error" if row["student"] == "syntax_error" else "graded")


def test_real_values(graded: dict) -> None:
    rows = {r["student"]: r for r in _rows((graded["out"] / "gradebook.csv").read_text())}
    assert rows["correct_numpy"]["total"] == rows["correct_numpy"]["max_score"]
    assert rows["mib_decimal"]["G14.05"] == "5"
    assert rows["no_sqrt_dk"]["G14.01"] == "6"
    assert rows["starter"]["total"] == "0" and rows["starter"]["status"] == "graded"
    assert rows["syntax_error"]["status"] == "error"


def _sub(sid: str, scores: list[float]) -> SubmissionResult:
    exercises = tuple(ExerciseResult(f"E{i}", "t", "s", score, 10.0, ()) for i, score in enumerate(scores, start=1))
    return SubmissionResult(sid, sid, "", "graded", sum(scores), 10.0 * len(scores), exercises)


def test_partial_points_and_formula_like_ids() -> None:
    report = GradingReport("0", "h", "grade", (_sub("=HYPERLINK(1)", [7.5, 2.0]), _sub("bob,jr", [0.25, 10.0])))
    rows = _rows(gradebook_csv(report))
    assert rows[0]["student"] == "'=HYPERLINK(1)"
    assert (rows[0]["E1"], rows[0]["E2"], rows[0]["total"]) == ("7.5", "2", "9.5")
    assert rows[1]["student"] == "bob,jr"  # quoted by the csv module, read back whole
    assert rows[1]["total"] == "10.25"


def test_csv_option_writes_elsewhere_and_check_writes_none(cli, tmp_path: Path) -> None:
    code, _, err = cli(
        "grade", SUBMISSIONS / "mib_decimal", "--out", tmp_path / "o", "--csv", tmp_path / "book.csv", "-q"
    )
    assert code == 0, err
    assert not (tmp_path / "o" / "gradebook.csv").exists()
    [row] = _rows((tmp_path / "book.csv").read_text())
    assert row["student"] == "mib_decimal" and row["G14.05"] == "5"
    code, _, err = cli("check", SUBMISSIONS / "mib_decimal" / "attention.py", "--csv", tmp_path / "c.csv")
    assert code == 2 and "unrecognized arguments: --csv" in err  # check has no --csv: refused, not ignored
    assert not (tmp_path / "c.csv").exists()


def test_student_ids_cannot_forge_formulas_or_rows() -> None:
    ids = ['=HYPERLINK("x")', " +1", '"-2', "a\r\nb", "@SUM(A1)", "\tx", "-", "'=1", "plain"]
    report = GradingReport("0", "h", "grade", tuple(_sub(i, [7.5]) for i in ids))
    text = gradebook_csv(report)
    # One physical line per row: no CR or LF inside a field.
    assert len(text.split("\n")) == len(ids) + 2 and "\r" not in text
    assert text.splitlines()[4] == '"a b","7.5","7.5","10","graded"'
    rows = list(csv.reader(io.StringIO(text)))
    assert [r[0] for r in rows[1:]] == [
        '\'=HYPERLINK("x")',
        "' +1",
        "'\"-2",
        "a b",
        "'@SUM(A1)",
        "'\tx",
        "'-",
        "''=1",
        "plain",
    ]
    assert rows[1] == ['\'=HYPERLINK("x")', "7.5", "7.5", "10", "graded"]
