"""The staff's pages: a student is refused on each of them; release, manual scores kept across a regrade, the diff, exports."""

from __future__ import annotations

import io
import json
import re
import zipfile

from sqlalchemy import func, select

from grader.serve.db import Audit, Manual, Setting, Submission

from .conftest import Served, csrf
from .test_student import text_of

STAFF_GETS = ["/staff", "/staff/students/1", "/staff/regrades/1", "/staff/export.zip", "/staff/audit"]
STAFF_POSTS = ["/staff/students/1/manual", "/staff/students/1/push", "/staff/release", "/staff/regrade"]


def test_a_student_on_every_staff_url_gets_403_one_sentence_logged_nothing_changed(served: Served) -> None:
    student = served.client("alice")
    served.submit(student, "no_sqrt_dk")
    served.drain()
    token = csrf(student.get("/").text)
    for url in STAFF_GETS:
        page = student.get(url)
        assert page.status_code == 403 and "This page is for the course staff only." in page.text, url
    for url in STAFF_POSTS:
        page = student.post(
            url, data={"csrf": token, "released": "yes", "who": "all", "target": "G14.01", "points": "0"}
        )
        assert page.status_code == 403, url
    with served.state.db() as db:
        refused = db.execute(
            select(func.count()).select_from(Audit).where(Audit.action == "refused: staff page")
        ).scalar()
        assert refused == len(STAFF_GETS) + len(STAFF_POSTS)
        assert db.execute(select(func.count()).select_from(Manual)).scalar() == 0
        assert db.execute(select(Setting)).scalars().all() == []
        assert db.execute(select(Submission.state)).scalars().all() == ["done"]


def test_release_shows_hidden_tallies_and_final_grade_to_the_student(served: Served) -> None:
    student = served.client("bob")
    served.submit(student, "no_sqrt_dk")
    served.drain()
    before = text_of(student.get("/submissions/1").text)
    assert "Visible checks:" in before and "Hidden checks:" not in before and "Final score" not in before
    ta = served.client("tina", role="ta")
    done = ta.post("/staff/release", data={"csrf": csrf(ta.get("/staff").text), "released": "yes"})
    assert done.status_code == 200 and "released" in done.text
    with served.state.db() as db:
        sub = db.execute(select(Submission)).scalar_one()
    after = text_of(student.get("/submissions/1").text)
    assert f"Final score: {sub.score:g} / {sub.max_score:g}" in after
    hidden = re.findall(r"Hidden checks: (\d+) of (\d+) passed", after)
    assert hidden and sum(int(total) for _, total in hidden) == sum(
        1 for e in sub.full["exercises"] for c in e["checks"] if c["visibility"] != "visible"
    )
    with served.state.db() as db:
        assert "release" in [a.action for a in db.execute(select(Audit)).scalars()]


def test_manual_score_is_stored_kept_across_a_regrade_and_in_the_exports(served: Served) -> None:
    student = served.client("carol")
    served.submit(student, "no_sqrt_dk")
    served.drain()
    teacher = served.client("ines", role="instructor")
    page = teacher.get("/staff/students/1")
    assert page.status_code == 200 and "no_sqrt_dk" not in page.text
    sent = teacher.post(
        "/staff/students/1/manual",
        data={"csrf": csrf(page.text), "target": "G14.01", "points": "1", "comment": "see my note"},
    )
    assert sent.status_code == 200
    with served.state.db() as db:
        sub = db.execute(select(Submission)).scalar_one()
        automatic = sub.score
        g1 = next(e for e in sub.full["exercises"] if e["id"] == "G14.01")
    expected = automatic - g1["score"] + 1
    assert f"Final {expected:g} / {sub.max_score:g}" in text_of(sent.text)
    # A regrade of everyone: the automatic result is graded again, the manual score stays.
    regrade = teacher.post("/staff/regrade", data={"csrf": csrf(sent.text), "who": "all"})
    assert regrade.status_code == 200 and "still grading" in regrade.text
    assert served.drain() == 1
    diff = teacher.get(regrade.url.path)
    assert "0 of 1 student(s) changed" in diff.text
    page = teacher.get("/staff/students/1")
    assert f"Final {expected:g} / {sub.max_score:g}" in text_of(page.text)
    archive = zipfile.ZipFile(io.BytesIO(teacher.get("/staff/export.zip").content))
    results = json.loads(archive.read("reports/results.json"))
    (row,) = results["submissions"]
    assert row["id"] == "carol" and row["score"] == expected
    assert any(a["kind"] == "manual" and "see my note" in a["reason"] for a in row["adjustments"])
    names = archive.namelist()
    assert any(n.endswith(".csv") for n in names) and any(n.endswith(".html") for n in names)


def test_manual_score_above_the_target_is_refused_and_not_stored(served: Served) -> None:
    student = served.client("dan")
    served.submit(student, "no_sqrt_dk")
    served.drain()
    teacher = served.client("ines", role="instructor")
    page = teacher.get("/staff/students/1")
    sent = teacher.post("/staff/students/1/manual", data={"csrf": csrf(page.text), "target": "G14.01", "points": "999"})
    assert sent.status_code == 400 and "more than G14.01 is worth" in sent.text
    with served.state.db() as db:
        assert db.execute(select(func.count()).select_from(Manual)).scalar() == 0


def test_regrade_after_a_spec_fix_shows_the_diff(served: Served, tmp_path) -> None:
    student = served.client("erin")
    served.submit(student, "no_sqrt_dk")
    served.drain()
    with served.state.db() as db:
        sub = db.execute(select(Submission)).scalar_one()
        # What a spec fix does to a stored result: the regrade finds it different from the new one.
        changed = json.loads(json.dumps(sub.full))
        changed["score"] -= 2
        changed["exercises"][0]["checks"][0]["status"] = "failed"
        sub.full = changed
        db.commit()
    teacher = served.client("ines", role="instructor")
    page = teacher.get("/staff")
    regrade = teacher.post("/staff/regrade", data={"csrf": csrf(page.text), "who": "some", "student": "1"})
    served.drain()
    diff = text_of(teacher.get(regrade.url.path).text)
    assert "erin" in diff and "+2" in diff


def test_a_manual_score_that_no_longer_fits_after_a_regrade_is_left_out_and_shown(served: Served) -> None:
    student = served.client("fay")
    served.submit(student, "no_sqrt_dk")
    served.drain()
    teacher = served.client("ines", role="instructor")
    page = teacher.get("/staff/students/1")
    with served.state.db() as db:
        sub = db.execute(select(Submission)).scalar_one()
        check = sub.full["exercises"][0]["checks"][0]
    target = f"{sub.full['exercises'][0]['id']}/{check['id']}"
    teacher.post("/staff/students/1/manual", data={"csrf": csrf(page.text), "target": target, "points": "0"})
    with served.state.db() as db:  # a spec fix renamed the check: the stored result no longer has it
        sub = db.execute(select(Submission)).scalar_one()
        renamed = json.loads(json.dumps(sub.full))
        renamed["exercises"][0]["checks"][0]["id"] = "renamed-check"
        sub.full = renamed
        db.commit()
    page = teacher.get("/staff/students/1")
    assert page.status_code == 200 and "(not applied: the latest result has no such target" in page.text
    assert f"Final {sub.score:g} / {sub.max_score:g}" in text_of(page.text)  # the automatic score stands
    assert teacher.get("/staff").status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(teacher.get("/staff/export.zip").content))
    assert json.loads(archive.read("reports/results.json"))["submissions"][0]["score"] == sub.score
