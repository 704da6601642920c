"""The class at a glance (issue 27): what to reteach, item analysis, the staff page.

A small real class (five catalogued mutants and one correct file, each a
student) is graded once, sandboxed; a synthetic class of 300 is then made
of copies of those six results in known proportions, so the true count of
each misconception is known. Item statistics are checked against
scipy.stats (point-biserial) and a hand computation (Cronbach's alpha),
never against the module's own code.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import statistics
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import ROOT, run_chromium
from PIL import Image

from grader.builtin.class_insight import render_staff_class
from grader.builtin.json_report import report_json
from grader.builtin.summary_page import render_summary
from grader.cli import main
from grader.models import CheckResult, ExerciseResult, GradingReport
from grader.reporting.insight import MIN_CLASS, item_analysis, misconceptions

# How many students of the synthetic class hand in each file (300 in all).
PROPORTIONS = {
    "correct_numpy": 120,
    "mask_after_softmax": 60,
    "no_sqrt_dk": 45,
    "no_max_subtraction": 30,
    "anti_causal": 30,
    "mib_decimal": 15,
}
STUDENTS = {name: f"learner{i:02d}" for i, name in enumerate(PROPORTIONS, start=1)}
CATALOGUE = {
    e["name"]: e for e in yaml.safe_load((ROOT / "reference" / "mutants" / "catalogue.yaml").read_text())["entries"]
}


def _sentence(name: str) -> str:
    return " ".join(CATALOGUE[name]["misconception"].split())


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade the six files once (sandboxed, with --staff): the real class."""
    root = tmp_path_factory.mktemp("small")
    subs = root / "subs"
    for name, student in STUDENTS.items():
        (subs / student).mkdir(parents=True)
        shutil.copy(ROOT / "reference" / "mutants" / name / "attention.py", subs / student / "attention.py")
    out = root / "out"
    assert main(["grade", str(subs), "--out", str(out), "--staff", "-q"]) == 0
    results = json.loads((out / "results.json").read_text())
    return {"out": out, "results": results}


def _report(small: dict) -> GradingReport:
    """The small class's results as models (from results.json, as an instructor's tool would read them)."""
    from grader.models import Diagnosis

    subs = []
    for s in small["results"]["submissions"]:
        exercises = tuple(
            ExerciseResult(
                e["id"],
                e["id"],
                "",
                e["score"],
                e["max_score"],
                tuple(
                    CheckResult(
                        c["id"],
                        "",
                        c["status"],
                        c["score"],
                        c["max_score"],
                        c["visibility"],
                        c["message"],
                        "",
                        True,
                        diagnosis=tuple(
                            Diagnosis(d["mistake"], d["misconception"], d["section"]) for d in c.get("diagnosis", ())
                        ),
                    )
                    for c in e["checks"]
                ),
            )
            for e in s["exercises"]
        )
        from grader.models import SubmissionResult

        subs.append(
            SubmissionResult(s["id"], s["path"], s["sha256"], s["status"], s["score"], s["max_score"], exercises)
        )
    return GradingReport(small["results"]["grader_version"], small["results"]["spec_hash"], "grade", tuple(subs))


def _synthetic(small: dict, plant: bool = False) -> GradingReport:
    """300 students: PROPORTIONS copies of each graded file, each with its own id.

    With ``plant``, an exercise PLANT is added: ``everyone`` is passed by every
    student, ``best-fail`` is failed by the correct files only (the best students).
    """
    base = {s.id: s for s in _report(small).submissions}
    subs = []
    for name, copies in PROPORTIONS.items():
        s = base[STUDENTS[name]]
        for i in range(copies):
            copy = dataclasses.replace(s, id=f"{name}-{i:03d}", path=f"{name}-{i:03d}")
            if plant:
                best = name == "correct_numpy"
                checks = (
                    CheckResult("everyone", "", "passed", 1.0, 1.0, "visible", "", "", True),
                    CheckResult(
                        "best-fail",
                        "",
                        "failed" if best else "passed",
                        0.0 if best else 1.0,
                        1.0,
                        "visible",
                        "",
                        "",
                        True,
                    ),
                )
                plant_ex = ExerciseResult("PLANT", "planted", "", sum(c.score for c in checks), 2.0, checks)
                copy = dataclasses.replace(
                    copy,
                    exercises=(*copy.exercises, plant_ex),
                    score=copy.score + plant_ex.score,
                    max_score=copy.max_score + 2,
                )
            subs.append(copy)
    return GradingReport("test", "0" * 64, "grade", tuple(subs))


def test_the_real_class_is_diagnosed_with_each_files_own_misconception(small: dict) -> None:
    """The premise of the counts: each mutant is named with its catalogued misconception, and no other file is."""
    named = {
        s["id"]: {d["misconception"] for e in s["exercises"] for c in e["checks"] for d in c.get("diagnosis", ())}
        for s in small["results"]["submissions"]
    }
    for name, student in STUDENTS.items():
        if name == "correct_numpy":
            assert named[student] == set()
        else:
            assert _sentence(name) in named[student], name
            others = {_sentence(n) for n in PROPORTIONS if n not in ("correct_numpy", name)}
            assert not named[student] & others


def test_results_json_of_the_real_class_adds_up_misconceptions_with_who(small: dict) -> None:
    found = {m["misconception"]: m for m in small["results"]["misconceptions"]}
    for name, student in STUDENTS.items():
        if name == "correct_numpy":
            continue
        m = found[_sentence(name)]
        assert m["count"] == 1 and m["share"] == pytest.approx(1 / 6, abs=1e-6) and m["students"] == [student]
        assert m["section"] == CATALOGUE[name]["section"]
        assert {e["id"] for e in m["exercises"]} <= set(CATALOGUE[name]["exercises"])


def test_synthetic_class_of_300_counts_each_misconception_by_its_true_proportion(small: dict) -> None:
    report = _synthetic(small)
    assert len(report.submissions) == 300
    found = {m.misconception: m for m in misconceptions(report.submissions)}
    for name, copies in PROPORTIONS.items():
        if name == "correct_numpy":
            continue
        m = found[_sentence(name)]
        assert m.count == copies, name
        assert m.share == pytest.approx(copies / 300)
        assert set(m.students) == {f"{name}-{i:03d}" for i in range(copies)}
        assert all(n == copies for _, n in m.exercises)  # once per student and exercise
    counts = [m.count for m in misconceptions(report.submissions)]
    assert counts == sorted(counts, reverse=True)  # sorted by reach
    data = json.loads(report_json(report))
    assert {m["misconception"]: m["count"] for m in data["misconceptions"]} == {k: v.count for k, v in found.items()}
    # The summary page shows each count and share, and no student's id.
    html = render_summary(report)
    reteach = html.split('id="reteach"')[1].split("</section>")[0]
    for name, copies in PROPORTIONS.items():
        if name != "correct_numpy":
            row = next(r for r in reteach.split("<tr>") if _sentence(name)[:40] in r)
            assert f'<td class="num">{copies}</td>' in row and f"{100 * copies / 300:.0f}%" in row
    assert not re.search(r"(correct_numpy|mask_after_softmax|no_sqrt_dk|anti_causal|mib_decimal)-\d{3}", html)


def test_a_diagnosis_on_two_checks_of_one_exercise_counts_once() -> None:
    from grader.models import Diagnosis, SubmissionResult

    d = Diagnosis("m", "the mistake", "Section")
    checks = tuple(CheckResult(f"c{i}", "", "failed", 0, 1, "visible", "", "", True, diagnosis=(d,)) for i in range(3))
    subs = [
        SubmissionResult(
            "a",
            "a",
            "",
            "graded",
            0,
            6,
            (ExerciseResult("E1", "", "", 0, 3, checks), ExerciseResult("E2", "", "", 0, 3, checks)),
        ),
        SubmissionResult("b", "b", "", "graded", 0, 6, (ExerciseResult("E1", "", "", 0, 3, checks),)),
    ]
    [m] = misconceptions(subs)
    assert (m.count, m.exercises, m.students) == (2, (("E1", 2), ("E2", 1)), ("a", "b"))


def _hand_alpha(rows: list[list[float]]) -> float:
    """Cronbach's alpha by its textbook formula, in plain Python (statistics.variance)."""
    k = len(rows[0])
    items = sum(statistics.variance([r[j] for r in rows]) for j in range(k))
    return k / (k - 1) * (1 - items / statistics.variance([sum(r) for r in rows]))


def test_item_analysis_flags_the_planted_checks_and_agrees_with_scipy(small: dict) -> None:
    stats = pytest.importorskip("scipy.stats")
    report = _synthetic(small, plant=True)
    analysis = item_analysis(report)
    assert analysis.shown and analysis.size == 300
    items = {(i.exercise, i.check): i for i in analysis.items}
    everyone, best_fail = items["PLANT", "everyone"], items["PLANT", "best-fail"]
    assert everyone.difficulty == 1.0 and "constant" in everyone.flags and everyone.discrimination is None
    assert best_fail.difficulty == pytest.approx(180 / 300) and "negative" in best_fail.flags
    assert best_fail.discrimination < -0.5
    # Every check flagged negative is failed by students whose other checks score higher, on average,
    # than those who pass it (G14.05's, failed only by mib_decimal, whose file passes everything else).
    negative = {k for k, i in items.items() if "negative" in i.flags}
    assert ("G14.05", "mib-n1024") in negative
    for key in negative:
        rest = {
            s.id: s.score - next(c.score for e in s.exercises for c in e.checks if (e.id, c.id) == key)
            for s in report.submissions
        }
        ok = [
            s.id
            for s in report.submissions
            for e in s.exercises
            for c in e.checks
            if (e.id, c.id) == key and c.status == "passed"
        ]
        ko = set(rest) - set(ok)
        assert statistics.fmean(rest[i] for i in ko) > statistics.fmean(rest[i] for i in ok), key
    subs = report.submissions
    keys = list(items)
    score = {(s.id, e.id, c.id): c for s in subs for e in s.exercises for c in e.checks}
    for key in keys:
        passed = [1.0 if score[s.id, *key].status == "passed" else 0.0 for s in subs]
        rest = [sum(c.score for e in s.exercises for c in e.checks) - score[s.id, *key].score for s in subs]
        if len(set(passed)) > 1:
            r = stats.pointbiserialr(passed, rest).statistic
            assert items[key].discrimination == pytest.approx(r, abs=1e-9), key
    for ex, alpha in analysis.alpha:
        rows = [[c.score for e in s.exercises if e.id == ex for c in e.checks] for s in subs]
        if statistics.variance([sum(r) for r in rows]) > 0:
            assert alpha == pytest.approx(_hand_alpha(rows), abs=1e-9), ex
        else:
            assert alpha is None
    # An exercise's alpha by hand on a tiny matrix (numbers worked out on paper):
    # items var 1/3 each (ddof=1); totals 3,2,1,0 -> var 5/3; alpha = 3/2 * (1 - 1/(5/3)) = 0.6.
    from grader.reporting.insight import cronbach_alpha

    assert cronbach_alpha(np.array([[1, 1, 1], [1, 1, 0], [0, 0, 1], [0, 0, 0]])) == pytest.approx(0.6)


def test_redundant_checks_are_those_failed_by_exactly_the_same_students(small: dict) -> None:
    analysis = item_analysis(_synthetic(small))
    fails: dict[str, set[str]] = {}
    for s in _synthetic(small).submissions:
        for e in s.exercises:
            for c in e.checks:
                fails.setdefault(f"{e.id} {c.id}", set())
                if c.status != "passed":
                    fails[f"{e.id} {c.id}"].add(s.id)
    for item in analysis.items:
        mine = fails[item.name]
        twins = {n for n, f in fails.items() if n != item.name and f == mine and 0 < len(mine) < 300}
        assert set(item.twins) == twins
        assert ("redundant" in item.flags) == bool(twins)


def test_a_small_class_gets_no_item_statistics(small: dict) -> None:
    analysis = item_analysis(_report(small))
    assert not analysis.shown and analysis.size == 6 and analysis.items == ()
    page = (small["out"] / "staff" / "class" / "index.html").read_text()
    assert f"fewer than {MIN_CLASS}" in page and "item-plot" not in page


class _Shapes(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.points: list[str] = []
        self.titles: list[str] = []
        self._in_point = False

    def handle_starttag(self, tag: str, attrs: list) -> None:  # noqa: D102
        cls = dict(attrs).get("class", "") or ""
        if tag == "g" and cls.startswith("point "):
            self.points.append(cls.split()[1])
            self._in_point = True

    def handle_data(self, data: str) -> None:  # noqa: D102
        if self._in_point:
            self.titles.append(data)
            self._in_point = False


@pytest.mark.browser
def test_staff_page_draws_each_flag_as_a_shape_and_renders_in_chromium(small: dict, tmp_path: Path) -> None:
    report = _synthetic(small, plant=True)
    html = render_staff_class(report)
    shapes = _Shapes()
    shapes.feed(html)
    analysis = item_analysis(report)
    assert len(shapes.points) == len(analysis.items)
    by_title = dict(zip((t.split(":")[0].split(". ", 1)[1] for t in shapes.titles), shapes.points))
    assert by_title["PLANT everyone"] == "square" and by_title["PLANT best-fail"] == "triangle"
    page = tmp_path / "staff.html"
    page.write_text(html)
    png = tmp_path / "staff.png"
    proc = run_chromium(f"--screenshot={png}", "--window-size=1280,2600", page.as_uri())
    assert png.exists(), proc.stderr
    grey = np.asarray(Image.open(png).convert("L"))
    # The plot is drawn in dark strokes: many near-black pixels survive the loss of colour.
    assert (grey < 80).sum() > 2000


def test_no_student_file_names_another_student_or_shows_item_statistics(small: dict) -> None:
    out = small["out"]
    ids = set(STUDENTS.values())
    student_files = [p for p in out.rglob("*") if p.is_file() and "staff" not in p.relative_to(out).parts]
    student_files = [p for p in student_files if any(i in p.name for i in ids)]
    assert len(student_files) >= len(ids)  # each student's page (and Gradescope file)
    for p in student_files:
        text = p.read_text(errors="replace")
        own = next(i for i in ids if i in p.name)
        assert not (ids - {own}) & set(re.findall(r"learner\d\d", text)), p
        assert not re.search(r"discrimination|difficulty|cronbach|point-biserial|what to reteach", text, re.I), p
    summary = (out / "summary.html").read_text()
    assert not re.findall(r"learner\d\d", summary) and "What to reteach" in summary
    assert "staff/class/index.html" in summary  # the link, written only with --staff
    staff = (out / "staff" / "class" / "index.html").read_text()
    assert all(i in staff for i in ids - {STUDENTS["correct_numpy"]})
