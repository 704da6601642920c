"""Scores pushed to the LMS by the grading workers: each push sent once however many workers race for it,
one access token reused across pushes."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import select

from grader.serve.db import LtiLink, Push, User
from grader.serve.invites import RosterEntry, invite
from grader.serve.keys import tool_key
from grader.serve.pushes import send_pending
from grader.serve.state import open_state
from grader.serve.worker import Grading, work

from .conftest import SAMPLES, make_settings
from .lti_platform import SimulatedPlatform


def test_racing_workers_send_each_push_once_with_one_token(db_url: str, tmp_path: Path, grading: Grading) -> None:
    with SimulatedPlatform() as platform:
        settings = make_settings(tmp_path, platforms=(platform.registration(),))
        state = open_state(settings.course, db_url, settings.state, settings=settings)
        platform.tool_jwks = tool_key(settings.state).jwks()
        invite(state, [RosterEntry(name, name=name.title()) for name in ("ada", "bob")], "http://testserver")
        with state.db() as db:
            users = {u.login: u for u in db.execute(select(User)).scalars()}
            for login, user in users.items():
                db.add(LtiLink(user_id=user.id, issuer=platform.issuer, client_id=platform.client_id,
                               lineitem_url=platform.lineitem_url(), subject=f"sub-{login}"))  # fmt: skip
            db.commit()
        _submit_graded(state, grading, users, {"ada": "correct_numpy", "bob": "no_sqrt_dk"})
        with state.db() as db:
            db.add_all(Push(user_id=user.id, reason="released", state="pending") for user in users.values())
            db.commit()
        start = threading.Barrier(8)

        def worker() -> None:
            start.wait()
            while send_pending(state):
                pass

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        with state.db() as db:
            pushes = db.execute(select(Push).order_by(Push.id)).scalars().all()
        state.engine.dispose()
    assert sorted(post.body["userId"] for post in platform.scores) == ["sub-ada", "sub-bob"]
    assert [(p.state, p.status, p.attempts) for p in pushes] == [("sent", 200, 1)] * 2
    logins = {user.id: login for login, user in users.items()}
    sent = {f"sub-{logins[p.user_id]}": p.score for p in pushes}
    assert {p.body["userId"]: p.body["scoreGiven"] for p in platform.scores} == sent
    assert sent["sub-ada"] == pushes[0].max_score and sent["sub-bob"] < sent["sub-ada"]
    assert len(platform.token_requests) == 1  # this process's client kept its token for the second push


def _submit_graded(state, grading: Grading, users: dict, samples: dict[str, str]) -> None:
    """Each user's sample stored and graded, as an upload and a worker would."""
    from grader.serve.db import Submission, now
    from grader.serve.store import store_upload

    with state.db() as db:
        for login, sample in samples.items():
            stored = store_upload(state.uploads, "attention.py", (SAMPLES / sample / "attention.py").read_bytes())
            db.add(Submission(user_id=users[login].id, number=1, filename=stored.filename, sha256=stored.sha256,
                              size=stored.size, received=now(), state="queued", details=True))  # fmt: skip
        db.commit()
    assert work(state, once=True, grading=grading) == 2
