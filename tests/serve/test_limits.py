"""Submission limits enforced by the server (direct requests try to exceed them), late policy from the receipt
time, and the probing flag on fixture histories."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from grader.serve.db import Audit, Submission, User
from grader.serve.probing import Attempt, flagged, probing_steps
from grader.serve.settings import Limits

from .conftest import ROOT, Served, csrf
from .test_student import text_of


def count(served: Served) -> int:
    with served.state.db() as db:
        return int(db.execute(select(func.count()).select_from(Submission)).scalar() or 0)


@pytest.mark.serve_settings(limits=Limits(per_window=2, window_minutes=60))
def test_at_most_n_submissions_per_window(served: Served) -> None:
    client = served.client("alice")
    assert served.submit(client, "no_sqrt_dk").status_code == 200
    assert served.submit(client, "correct_numpy").status_code == 200
    third = served.submit(client, "correct_numpy")
    assert third.status_code == 429
    assert "You have made 2 submissions in the last 60 min; the next one is possible in 60 min." in third.text
    assert count(served) == 2
    with served.state.db() as db:
        assert [a.actor for a in db.execute(select(Audit).where(Audit.action == "refused: limit")).scalars()] == [
            "alice"
        ]
    other = served.client("bob")  # the limit is each student's own
    assert served.submit(other, "correct_numpy").status_code == 200
    # An hour later by the server's clock, the window has moved on.
    with served.state.db() as db:
        for sub in db.execute(select(Submission)).scalars():
            sub.received -= dt.timedelta(minutes=61)
        db.commit()
    assert served.submit(client, "correct_numpy").status_code == 200


@pytest.mark.serve_settings(limits=Limits(cooldown_seconds=300))
def test_cool_down_between_two_submissions(served: Served) -> None:
    client = served.client("carol")
    assert served.submit(client, "no_sqrt_dk").status_code == 200
    again = served.submit(client, "correct_numpy")
    assert again.status_code == 429 and "before your next submission (cool-down)" in again.text
    assert count(served) == 1
    with served.state.db() as db:
        sub = db.execute(select(Submission)).scalar_one()
        sub.received -= dt.timedelta(seconds=301)
        db.commit()
    assert served.submit(client, "correct_numpy").status_code == 200


@pytest.mark.serve_settings(limits=Limits(details_for_first=1))
def test_visible_details_only_for_the_first_k_submissions(served: Served) -> None:
    client = served.client("dave")
    served.submit(client, "no_sqrt_dk")
    served.submit(client, "no_sqrt_dk")
    served.drain()
    first, second = (text_of(client.get(f"/submissions/{n}").text) for n in (1, 2))
    assert "Hint:" in first and "expected:" in first
    assert "Hint:" not in second and "expected:" not in second
    assert "Details are shown for your first submissions only" in second
    with served.state.db() as db:  # the scores are the same: only the details are withheld
        scores = db.execute(select(Submission.visible_score).order_by(Submission.number)).scalars().all()
    assert scores[0] == scores[1]
    assert f"Visible checks: {scores[1]:g}" in second


def test_late_penalty_from_the_servers_receipt_time(db_url: str, tmp_path: Path, grading) -> None:
    from grader.serve.app import create_app
    from grader.serve.state import open_state

    from .conftest import Served, make_settings

    policy = tmp_path / "policy.yaml"
    policy.write_text("due: 2026-03-01T23:59:00+00:00\npenalty: {percent: 10, per: day}\n")
    settings = make_settings(tmp_path, policy=policy)
    state = open_state(ROOT, db_url, settings.state, settings=settings)
    served = Served(state, create_app(ROOT, state=state), grading)
    client = served.client("erin")
    served.submit(client, "correct_numpy")
    served.drain()
    with state.db() as db:
        sub = db.execute(select(Submission)).scalar_one()
        sub.received = dt.datetime(2026, 3, 3, 10, 0, tzinfo=dt.UTC)  # received 2 days late by the server's clock
        db.commit()
        top = sub.max_score
    teacher = served.client("ines", role="instructor")
    teacher.post("/staff/release", data={"csrf": csrf(teacher.get("/staff").text), "released": "yes"})
    page = text_of(client.get("/submissions/1").text)
    assert f"Final score: {top * 0.8:g} / {top:g}" in page
    assert "the server's receipt time" in page and "2 day(s) late" in page
    for c in served.clients:
        c.close()
    state.engine.dispose()


# --- probing -----------------------------------------------------------------------------------------------


def result(visible: dict[str, str], hidden: dict[str, str]) -> dict:
    """A stored result (`grader.models.result_to_dict`'s shape) with these checks' statuses, one point each."""

    def check(name: str, visibility: str, status: str) -> dict:
        score = 1.0 if status == "passed" else 0.0
        return {
            "id": name,
            "description": "",
            "status": status,
            "score": score,
            "max_score": 1.0,
            "visibility": visibility,
            "message": "",
            "hint": "",
            "shown": visibility == "visible",
        }

    checks = [check(k, "visible", v) for k, v in visible.items()] + [check(k, "hidden", v) for k, v in hidden.items()]
    score = sum(c["score"] for c in checks)
    exercise = {
        "id": "G14.02",
        "title": "Scores",
        "section": "",
        "score": score,
        "max_score": len(checks),
        "checks": checks,
    }
    return {
        "id": "s",
        "path": "attention.py",
        "sha256": "0" * 64,
        "status": "graded",
        "score": score,
        "max_score": float(len(checks)),
        "exercises": [exercise],
    }


def history(rows: list[tuple[dict[str, str], dict[str, str]]]) -> list[Attempt]:
    start = dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.UTC)
    return [Attempt(i + 1, start + dt.timedelta(minutes=5 * i), result(v, h)) for i, (v, h) in enumerate(rows)]


VISIBLE_OK = {"v1": "passed", "v2": "passed"}

PROBING = history(
    [
        (VISIBLE_OK, {"h1": "failed", "h2": "failed", "h3": "failed", "h4": "failed"}),
        (VISIBLE_OK, {"h1": "passed", "h2": "failed", "h3": "failed", "h4": "failed"}),
        (VISIBLE_OK, {"h1": "passed", "h2": "failed", "h3": "passed", "h4": "failed"}),
        (VISIBLE_OK, {"h1": "passed", "h2": "failed", "h3": "failed", "h4": "failed"}),
        (VISIBLE_OK, {"h1": "passed", "h2": "failed", "h3": "failed", "h4": "passed"}),
    ]
)
"""Same visible results every time; each resubmission turns one hidden check (and back)."""

HONEST = history(
    [
        ({"v1": "failed", "v2": "failed"}, {"h1": "failed", "h2": "failed", "h3": "failed", "h4": "failed"}),
        ({"v1": "passed", "v2": "failed"}, {"h1": "passed", "h2": "passed", "h3": "failed", "h4": "failed"}),
        ({"v1": "passed", "v2": "failed"}, {"h1": "passed", "h2": "passed", "h3": "failed", "h4": "failed"}),
        ({"v1": "passed", "v2": "passed"}, {"h1": "passed", "h2": "passed", "h3": "passed", "h4": "failed"}),
        (VISIBLE_OK, {"h1": "passed", "h2": "passed", "h3": "passed", "h4": "passed"}),
    ]
)
"""Fixes that move visible and hidden checks together (and one resubmission of the same file)."""


def test_a_probing_history_is_flagged_with_the_evidence() -> None:
    steps = flagged(PROBING, min_steps=3)
    assert [(s.before, s.after, s.check, s.was, s.became) for s in steps] == [
        (1, 2, "G14.02/h1", "failed", "passed"),
        (2, 3, "G14.02/h3", "failed", "passed"),
        (3, 4, "G14.02/h3", "passed", "failed"),
        (4, 5, "G14.02/h4", "failed", "passed"),
    ]
    assert "visible results unchanged, hidden check G14.02/h3 passed -> failed" in steps[2].describe()


def test_an_honest_history_is_not_flagged() -> None:
    assert flagged(HONEST, min_steps=3) == []
    assert len(probing_steps(HONEST)) == 1  # the last fix turned one hidden check with visible ones already passing
    assert flagged(PROBING, min_steps=5) == []  # four steps are not five


def test_the_staff_see_the_flag_and_the_evidence(served: Served) -> None:
    served.client("frank")
    served.client("gina")
    with served.state.db() as db:
        users = {u.login: u for u in db.execute(select(User)).scalars()}
        for login, fixture in (("frank", PROBING), ("gina", HONEST)):
            for attempt in fixture:
                db.add(
                    Submission(
                        user_id=users[login].id,
                        number=attempt.number,
                        filename="attention.py",
                        sha256="0" * 64,
                        size=1,
                        received=attempt.received,
                        state="done",
                        full=json.loads(json.dumps(attempt.full)),
                    )
                )
        db.commit()
    teacher = served.client("ines", role="instructor")
    summary = teacher.get("/staff").text
    rows = {
        line.split("</a>")[0].rsplit(">", 1)[-1]: line for line in summary.split("<tr>") if "/staff/students/" in line
    }
    assert "probing" in rows["frank"] and "probing" not in rows["gina"]
    page = text_of(teacher.get(f"/staff/students/{users['frank'].id}").text)
    assert "Probing: 4 resubmissions flipped one hidden check each" in page
    assert "submission 3 -> 4" in page
    with served.state.db() as db:
        assert db.execute(select(func.count()).select_from(Audit).where(Audit.action.like("refused%"))).scalar() == 0
