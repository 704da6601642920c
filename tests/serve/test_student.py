"""A student signs in by a one-time link, uploads, reads the visible feedback and the history; refusals change nothing."""

from __future__ import annotations

import html
import re

from sqlalchemy import func, select

from grader.serve.db import Audit, Submission

from .conftest import Served, csrf


def text_of(page: str) -> str:
    """A page's text as a reader sees it: tags dropped, entities decoded, spaces collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_invite_login_upload_and_visible_feedback(served: Served) -> None:
    client = served.client("alice")
    sent = served.submit(client, "no_sqrt_dk")
    assert sent.status_code == 200 and sent.url.path == "/submissions/1"
    assert 'http-equiv="refresh"' in sent.text and "queued" in sent.text  # progress while queued, no JS
    assert served.drain() == 1
    page = client.get("/submissions/1")
    assert 'http-equiv="refresh"' not in page.text
    with served.state.db() as db:
        sub = db.execute(select(Submission)).scalar_one()
        assert sub.state == "done" and sub.visible is not None and sub.full is not None
        hidden = [c for e in sub.full["exercises"] for c in e["checks"] if c["visibility"] != "visible"]
        visible_max = sub.visible_max
    assert hidden, "the course has hidden checks"
    shown = text_of(page.text)
    assert f"Visible checks: {sub.visible_score:g} / {visible_max:g}" in shown
    assert sub.visible_score < visible_max  # no_sqrt_dk fails visible checks
    assert "Hint:" in shown
    for check in hidden:
        assert check["id"] not in page.text


def test_history_lists_each_attempt_with_its_visible_result(served: Served) -> None:
    client = served.client("bob")
    served.submit(client, "no_sqrt_dk")
    served.drain()
    served.submit(client, "correct_numpy")
    served.drain()
    with served.state.db() as db:
        scores = [(s.number, s.visible_score, s.visible_max) for s in db.execute(select(Submission)).scalars()]
    assert scores[1][1] == scores[1][2] and scores[0][1] < scores[0][2]
    page = text_of(client.get("/history").text)
    for number, score, top in scores:
        assert f"{number} " in page and f"{score:g} / {top:g} (visible)" in page


def test_a_login_link_works_once(served: Served) -> None:
    from grader.serve.invites import RosterEntry, invite

    (link,) = invite(served.state, [RosterEntry("carol")], "http://testserver")
    first = served.client()
    token = csrf(first.get(link.url).text)
    assert "Sign out" in first.post(link.url, data={"csrf": token}).text
    second = served.client()
    again = second.get(link.url)
    assert again.status_code == 403 and "has been used" in again.text


def test_a_login_link_expires_after_the_days_serve_yaml_gives(served: Served) -> None:
    import datetime as dt

    from grader.serve.db import Invite
    from grader.serve.invites import RosterEntry, invite

    assert served.state.settings.invite_days == 14  # the default
    (old, fresh) = invite(served.state, [RosterEntry("olga"), RosterEntry("pete")], "http://testserver")
    with served.state.db() as db:  # olga's link was sent 14 days and a minute ago, pete's 13 days ago
        for row, age in zip(db.execute(select(Invite).order_by(Invite.id)).scalars(), (14 * 24 * 60 + 1, 13 * 24 * 60)):
            row.created = row.created - dt.timedelta(minutes=age)
        db.commit()
        sent = db.execute(select(Invite.created).order_by(Invite.id)).scalars().all()
    client = served.client()
    page = client.get(old.url)
    expired_on = f"{sent[0] + dt.timedelta(days=14):%Y-%m-%d}"
    assert page.status_code == 403 and f"This login link expired on {expired_on}" in page.text
    fresh_page = client.get(fresh.url)
    assert fresh_page.status_code == 200
    refused = client.post(old.url, data={"csrf": csrf(fresh_page.text)})
    assert refused.status_code == 403 and "expired" in refused.text
    assert "Sign out" in client.post(fresh.url, data={"csrf": csrf(fresh_page.text)}).text


def test_upload_too_big_or_of_the_wrong_type_is_refused_and_nothing_stored(served: Served) -> None:
    client = served.client("dave")
    big = b"x = 1\n" * (served.state.settings.upload_max_bytes // 6 + 10)
    too_big = served.submit(client, big)
    assert too_big.status_code == 413 and "larger than 512 KiB" in too_big.text
    huge = served.submit(client, b"x" * (4 * 1024 * 1024))  # refused from its Content-Length, before it is read
    assert huge.status_code == 413 and "larger than 512 KiB" in huge.text
    wrong = served.submit(client, b"\x89PNG\r\n", name="attention.png")
    assert wrong.status_code == 415 and "attention.py or attention.ipynb" in wrong.text
    binary = served.submit(client, b"import os\0\0", name="attention.py")
    assert binary.status_code == 415
    not_notebook = served.submit(client, b'{"a": 1}', name="attention.ipynb")
    assert not_notebook.status_code == 415 and "no cells" in not_notebook.text
    with served.state.db() as db:
        assert db.execute(select(func.count()).select_from(Submission)).scalar() == 0
        actions = [a.action for a in db.execute(select(Audit)).scalars()]
    assert actions.count("refused: upload") == 4 and actions.count("refused: upload too big") == 1
    assert not any(served.state.uploads.rglob("*.py"))


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(served: Served) -> None:
    client = served.client("erin")
    data = (served.state.settings.course / "submissions" / "correct_numpy" / "attention.py").read_bytes()
    response = client.post("/submit", files={"file": ("attention.py", data)})
    assert response.status_code == 403 and "did not come from this site" in response.text
    forged = client.post("/submit", data={"csrf": "forged"}, files={"file": ("attention.py", data)})
    assert forged.status_code == 403
    with served.state.db() as db:
        assert db.execute(select(func.count()).select_from(Submission)).scalar() == 0
        assert [a.action for a in db.execute(select(Audit)).scalars()].count("refused: no CSRF token") == 2


def test_signed_out_visitor_cannot_submit(served: Served) -> None:
    client = served.client()
    response = client.post("/submit", data={"csrf": "x"}, files={"file": ("attention.py", b"x = 1\n")})
    assert response.status_code == 401 and "Sign in first" in response.text


def test_session_cookie_is_http_only_and_same_site(served: Served) -> None:
    client = served.client("frank")
    from grader.serve.invites import RosterEntry, invite

    (link,) = invite(served.state, [RosterEntry("gina")], "http://testserver")
    token = csrf(client.get(link.url).text)
    response = client.post(link.url, data={"csrf": token}, follow_redirects=False)
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie
    assert "secure" not in cookie  # http://: the proxy's https sets public_url and then Secure


def test_a_student_reads_only_their_own_submissions(served: Served) -> None:
    alice = served.client("alice")
    served.submit(alice, "no_sqrt_dk")
    bob = served.client("bob")
    other = bob.get("/submissions/1")
    assert other.status_code == 404 and "You have no submission with that number." in other.text


def test_a_grader_failure_is_the_submissions_not_the_workers(served: Served) -> None:
    client = served.client("alice")
    served.submit(client, "no_sqrt_dk")
    for path in served.state.uploads.rglob("*.py"):
        path.unlink()  # the stored upload is gone: grading it fails inside the grader
    served.submit(client, b"def softmax(x):\n    return x\n")
    assert served.drain() == 2
    first = text_of(client.get("/submissions/1").text)
    assert "the grader failed on this submission (not your code's fault)" in first
    with served.state.db() as db:
        states = [s.state for s in db.execute(select(Submission).order_by(Submission.number)).scalars()]
    assert states == ["error", "done"]


def test_a_notebook_upload_is_graded_from_its_code_cells(served: Served) -> None:
    import nbformat

    code = (served.state.settings.course / "submissions" / "correct_numpy" / "attention.py").read_text()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# G14"), nbformat.v4.new_code_cell(code)])
    client = served.client("nora")
    sent = served.submit(client, nbformat.writes(notebook).encode(), name="attention.ipynb")
    assert sent.status_code == 200
    served.drain()
    with served.state.db() as db:
        sub = db.execute(select(Submission)).scalar_one()
    assert sub.filename == "attention.ipynb" and sub.state == "done"
    assert sub.visible_score == sub.visible_max and sub.score == sub.max_score


def test_the_likely_mistake_is_named_once_per_exercise_as_grader_check_does(served: Served) -> None:
    client = served.client("mia")
    served.submit(client, "mask_after_softmax")
    served.drain()
    page = text_of(client.get("/submissions/1").text)
    assert "Likely mistake (all 3 failing checks fail as it does): The mask is applied after softmax" in page
    assert page.count("Likely mistake") == 2  # two exercises fail the same way: named under each, once


def test_under_an_https_public_url_the_session_cookie_is_secure(db_url: str, tmp_path, grading) -> None:
    from starlette.testclient import TestClient

    from grader.serve.app import create_app
    from grader.serve.invites import RosterEntry, invite
    from grader.serve.state import open_state

    from .conftest import ROOT, make_settings

    settings = make_settings(tmp_path, public_url="https://grader.example.edu")
    state = open_state(ROOT, db_url, settings.state, settings=settings)
    (link,) = invite(state, [RosterEntry("hana")], "https://testserver")
    with TestClient(create_app(ROOT, state=state), base_url="https://testserver") as client:
        token = csrf(client.get(link.url).text)
        response = client.post(link.url, data={"csrf": token}, follow_redirects=False)
        cookie = response.headers["set-cookie"].lower()
        assert "secure" in cookie and "httponly" in cookie and "samesite=lax" in cookie
        assert "Sign out" in client.get("/").text
    state.engine.dispose()
