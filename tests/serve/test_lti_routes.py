"""The server's LTI routes against the simulated platform: a launch signs the user in with their role and line item;
a forged, expired, misaddressed or replayed launch gets a status and one sentence, is logged, and stores nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import func, select

from grader.serve.app import create_app
from grader.serve.db import Audit, LtiLink, Nonce, User
from grader.serve.keys import tool_key
from grader.serve.state import open_state
from grader.serve.views_lti import STATE_COOKIE

from .conftest import ROOT, Served, make_settings
from .lti_platform import SimulatedPlatform, form_fields

BASE = "http://testserver"


@pytest.fixture
def lti(db_url: str, tmp_path: Path, grading: Any) -> Iterator[tuple[Served, SimulatedPlatform]]:
    yield from _lti(db_url, tmp_path, grading)


@pytest.fixture
def lenient_lti(db_url: str, tmp_path: Path, grading: Any) -> Iterator[tuple[Served, SimulatedPlatform]]:
    """The server of a course whose serve.yaml says ``lti.allow_missing_state_cookie: true``."""
    yield from _lti(db_url, tmp_path, grading, allow_missing_state_cookie=True)


def _lti(db_url: str, tmp_path: Path, grading: Any, **changes: Any) -> Iterator[tuple[Served, SimulatedPlatform]]:
    with SimulatedPlatform(tool_jwks_url="") as platform:
        settings = make_settings(tmp_path, public_url=BASE, platforms=(platform.registration(),), **changes)
        state = open_state(ROOT, db_url, settings.state, settings=settings)
        served = Served(state, create_app(ROOT, state=state), grading)
        platform.tool_jwks = tool_key(settings.state).jwks()  # what the platform reads at the tool's /lti/jwks
        for name, role in (("alice", "student"), ("ines", "instructor"), ("tom", "ta")):
            platform.add_user(name, role=role)
        yield served, platform
        for client in served.clients:
            client.close()
        state.engine.dispose()


def start_login(served: Served, platform: SimulatedPlatform, who: str, **extra: str) -> tuple[Any, dict[str, str]]:
    """A browser's login initiation: the client and the platform's authorization request (state, nonce...)."""
    client = served.client()
    params = platform.login_initiation_params(BASE + "/lti/launch", who, **extra)
    start = client.get("/lti/login?" + urlencode(params), follow_redirects=False)
    assert start.status_code == 302, start.text
    query = {k: v[0] for k, v in parse_qs(urlsplit(start.headers["location"]).query).items()}
    return client, query


def platform_post(platform: SimulatedPlatform, query: dict[str, str]) -> dict[str, str]:
    """What the platform's authorization endpoint auto-posts back (id_token, state)."""
    answer = httpx.get(platform.base_url + "/auth?" + urlencode(query), timeout=30)
    assert answer.status_code == 200, answer.text
    return form_fields(answer.text)[1]


def counts(served: Served) -> tuple[int, int, int]:
    with served.state.db() as db:
        return tuple(
            int(db.execute(select(func.count()).select_from(table)).scalar() or 0) for table in (User, LtiLink, Nonce)
        )  # type: ignore[return-value]


def refused_launches(served: Served) -> list[str]:
    with served.state.db() as db:
        return [a.detail for a in db.execute(select(Audit).where(Audit.action == "refused: launch")).scalars()]


@pytest.mark.parametrize("who, role", [("alice", "student"), ("ines", "instructor"), ("tom", "ta")])
def test_a_launch_signs_in_with_the_role_and_keeps_the_line_item(lti, who: str, role: str) -> None:
    served, platform = lti
    client, query = start_login(served, platform, who)
    landed = client.post("/lti/launch", data=platform_post(platform, query))
    assert landed.status_code == 200 and "Sign out" in landed.text
    assert ("Submit your attention.py" in landed.text) == (role == "student")
    assert STATE_COOKIE not in client.cookies  # used once: the launch clears it
    with served.state.db() as db:
        user = db.execute(select(User)).scalar_one()
        link = db.execute(select(LtiLink)).scalar_one()
    assert (user.role, user.subject, user.login) == (role, f"sub-{who}", f"{who}@example.edu")
    assert link.lineitem_url == platform.lineitem_url("1")


def test_a_replayed_launch_is_refused_and_changes_nothing(lti) -> None:
    served, platform = lti
    client, query = start_login(served, platform, "alice")
    fields = platform_post(platform, query)
    assert client.post("/lti/launch", data=fields).status_code == 200
    before = counts(served)
    thief = served.client()
    thief.cookies.set(STATE_COOKIE, fields["state"], path="/lti/")  # even with the state cookie copied
    again = thief.post("/lti/launch", data=fields)
    assert again.status_code == 400 and "state is unknown or expired" in again.text
    assert counts(served) == before
    assert refused_launches(served)


def test_a_launch_without_the_state_cookie_is_refused_logged_and_stores_nothing(lti) -> None:
    """Login CSRF: an attacker starts a launch in their own browser and makes the victim's browser post the
    attacker's id_token and state; the victim's browser never got the state cookie, so the launch is refused."""
    served, platform = lti
    _, query = start_login(served, platform, "alice")
    fields = platform_post(platform, query)
    victim = served.client()
    answer = victim.post("/lti/launch", data=fields)
    assert answer.status_code == 403 and "open the assignment in a new window" in answer.text, answer.text[-600:]
    assert counts(served) == (0, 0, 0)
    assert "Sign out" not in victim.get("/").text
    (logged,) = refused_launches(served)
    assert "new window" in logged


def test_a_launch_with_another_browsers_state_cookie_is_refused(lti) -> None:
    served, platform = lti
    _, query = start_login(served, platform, "alice")
    victim, _ = start_login(served, platform, "tom")  # the victim's own login in progress: its own state cookie
    answer = victim.post("/lti/launch", data=platform_post(platform, query))
    assert answer.status_code == 403 and "open the assignment in a new window" in answer.text
    assert counts(served) == (0, 0, 0)


@pytest.mark.parametrize("public_url, attributes", [(BASE, "samesite=lax"), ("https://tool.example", "samesite=none")])
def test_the_state_cookie_is_http_only_on_the_lti_path_and_cross_site_only_over_https(
    db_url: str, tmp_path: Path, grading: Any, public_url: str, attributes: str
) -> None:
    with SimulatedPlatform(tool_jwks_url="") as platform:
        settings = make_settings(tmp_path, public_url=public_url, platforms=(platform.registration(),))
        state = open_state(ROOT, db_url, settings.state, settings=settings)
        served = Served(state, create_app(ROOT, state=state), grading)
        try:
            params = platform.login_initiation_params(public_url + "/lti/launch", "alice")
            start = served.client().get("/lti/login?" + urlencode(params), follow_redirects=False)
            cookie = start.headers["set-cookie"].lower()
            assert start.status_code == 302 and cookie.startswith(STATE_COOKIE + "=")
            assert "httponly" in cookie and "path=/lti/" in cookie and attributes in cookie
            assert ("secure" in cookie) == public_url.startswith("https://")
        finally:
            for client in served.clients:
                client.close()
            state.engine.dispose()


def test_allow_missing_state_cookie_accepts_a_launch_without_it_but_never_a_mismatching_one(lenient_lti) -> None:
    """For an LMS that embeds the tool in an iframe where the browser drops third-party cookies."""
    served, platform = lenient_lti
    _, query = start_login(served, platform, "alice")
    embedded = served.client()
    landed = embedded.post("/lti/launch", data=platform_post(platform, query))
    assert landed.status_code == 200 and "Sign out" in landed.text
    _, query = start_login(served, platform, "tom")
    other, _ = start_login(served, platform, "ines")
    answer = other.post("/lti/launch", data=platform_post(platform, query))
    assert answer.status_code == 403 and "open the assignment in a new window" in answer.text


def forged(platform: SimulatedPlatform, query: dict[str, str], **changes: Any) -> dict[str, str]:
    claims = platform.claims(platform.users[query["login_hint"]], nonce=query["nonce"], target_link_uri=BASE)
    key = changes.pop("key", None)
    claims.update(changes)
    return {"id_token": platform.sign(claims, key=key), "state": query["state"]}


@pytest.mark.parametrize(
    "changes, status, sentence",
    [
        ({"key": rsa.generate_private_key(public_exponent=65537, key_size=2048)}, 401, "signature"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, 401, "expired"),
        ({"aud": "another-tool"}, 401, "addressed to another tool"),
        ({"nonce": "not-the-one-issued"}, 401, "nonce"),
        ({"https://purl.imsglobal.org/spec/lti/claim/deployment_id": "deployment-x"}, 401, "deployment"),
    ],
    ids=["forged", "expired", "wrong-audience", "wrong-nonce", "unknown-deployment"],
)
def test_a_bad_id_token_is_refused_logged_and_stores_nothing(lti, changes: dict, status: int, sentence: str) -> None:
    served, platform = lti
    client, query = start_login(served, platform, "alice")
    answer = client.post("/lti/launch", data=forged(platform, query, **changes))
    assert answer.status_code == status and sentence in answer.text.lower(), answer.text[-600:]
    assert counts(served) == (0, 0, 0)
    assert client.get("/").text.count("Sign out") == 0
    (logged,) = refused_launches(served)
    assert sentence in logged.lower()


def test_a_login_from_an_unregistered_platform_is_refused(lti) -> None:
    served, platform = lti
    params = platform.login_initiation_params(BASE + "/lti/launch", "alice", iss="https://evil.example")
    answer = served.client().get("/lti/login?" + urlencode(params), follow_redirects=False)
    assert answer.status_code == 400 and "not registered" in answer.text


def test_deep_linking_answers_the_staff_with_a_signed_response_and_refuses_a_student(lti) -> None:
    import jwt

    served, platform = lti
    client, query = start_login(served, platform, "ines", lti_message_hint="deep-link")
    page = client.post("/lti/launch", data=platform_post(platform, query))
    assert page.status_code == 200 and 'action="' + platform.base_url + '/deep_link_return"' in page.text
    token = page.text.split('name="JWT" value="')[1].split('"')[0]
    claims = jwt.decode(token, options={"verify_signature": False})
    (item,) = claims["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"]
    course_points = sum(e.max_score for e in served.grading.collected.exercises)
    assert item["url"] == BASE + "/lti/launch" and item["lineItem"]["scoreMaximum"] == course_points
    client, query = start_login(served, platform, "alice", lti_message_hint="deep-link")
    refused = client.post("/lti/launch", data=platform_post(platform, query))
    assert refused.status_code == 403 and "Only the course staff" in refused.text


def test_the_tool_serves_its_public_key_set(lti) -> None:
    served, _ = lti
    keys = served.client().get("/lti/jwks").json()["keys"]
    assert len(keys) == 1 and keys[0]["kty"] == "RSA" and "d" not in keys[0]
    assert (served.state.settings.state / "tool-key.pem").stat().st_mode & 0o077 == 0


def test_release_and_manual_change_push_the_final_score_each_push_recorded(lti) -> None:
    from grader.serve.db import Push, Submission

    from .conftest import csrf

    served, platform = lti
    student, query = start_login(served, platform, "alice")
    student.post("/lti/launch", data=platform_post(platform, query))
    served.submit(student, "no_sqrt_dk")
    served.drain()
    assert platform.scores == []  # graded before release: nothing leaves for the gradebook
    teacher, query = start_login(served, platform, "ines")
    teacher.post("/lti/launch", data=platform_post(platform, query))
    platform.fail_next_scores((503, {"Retry-After": "0"}))
    teacher.post("/staff/release", data={"csrf": csrf(teacher.get("/staff").text), "released": "yes"})
    served.drain()
    with served.state.db() as db:
        sub = db.execute(select(Submission)).scalar_one()
        uid = sub.user_id
    (first,) = platform.wait_for_scores(1)
    assert (first.body["userId"], first.body["scoreGiven"], first.body["scoreMaximum"]) == (
        "sub-alice",
        sub.score,
        sub.max_score,
    )
    assert first.body["comment"].startswith(f"G14: {sub.score:g} / {sub.max_score:g}")
    page = teacher.get(f"/staff/students/{uid}")
    teacher.post(f"/staff/students/{uid}/manual", data={"csrf": csrf(page.text), "target": "G14.01", "points": "0"})
    served.drain()
    second = platform.wait_for_scores(2)[1]
    g1 = next(e for e in sub.full["exercises"] if e["id"] == "G14.01")
    assert second.body["scoreGiven"] == sub.score - g1["score"]
    assert "manual score for G14.01: 0" in second.body["comment"]
    with served.state.db() as db:
        pushes = [
            (p.reason, p.state, p.status, p.attempts) for p in db.execute(select(Push).order_by(Push.id)).scalars()
        ]
    assert pushes == [("released", "sent", 200, 2), ("manual", "sent", 200, 1)]
    shown = teacher.get(f"/staff/students/{uid}").text
    assert "released: sent" in shown and "2 attempt(s)" in shown
    teacher.post(f"/staff/students/{uid}/push", data={"csrf": csrf(shown)})
    served.drain()
    third = platform.wait_for_scores(3)[2]
    assert third.body["scoreGiven"] == second.body["scoreGiven"]
    with served.state.db() as db:
        assert db.execute(select(Push.reason).order_by(Push.id.desc()).limit(1)).scalar() == "staff"


def test_without_a_coupled_line_item_the_push_finds_the_resource_links_one(lti) -> None:
    from .conftest import csrf

    served, platform = lti
    student, query = start_login(served, platform, "alice")
    endpoint = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
    claims = platform.claims(platform.users["alice"], nonce=query["nonce"], target_link_uri=BASE)
    claims[endpoint] = {k: v for k, v in claims[endpoint].items() if k != "lineitem"}
    landed = student.post("/lti/launch", data={"id_token": platform.sign(claims), "state": query["state"]})
    assert landed.status_code == 200
    with served.state.db() as db:
        link = db.execute(select(LtiLink)).scalar_one()
        assert link.lineitem_url is None and link.lineitems_url == platform.base_url + "/lineitems"
    served.submit(student, "correct_numpy")
    teacher, query = start_login(served, platform, "ines")
    teacher.post("/lti/launch", data=platform_post(platform, query))
    teacher.post("/staff/release", data={"csrf": csrf(teacher.get("/staff").text), "released": "yes"})
    served.drain()
    (score,) = platform.wait_for_scores(1)
    assert score.lineitem_id == "1" and score.body["scoreGiven"] == score.body["scoreMaximum"]
    with served.state.db() as db:
        alice = db.execute(select(LtiLink).where(LtiLink.subject == "sub-alice")).scalar_one()
        assert alice.lineitem_url == platform.lineitem_url("1")


def test_serve_yaml_says_whether_a_missing_state_cookie_is_allowed(tmp_path: Path) -> None:
    from grader.errors import ConfigError
    from grader.serve.settings import load_settings

    assert load_settings(tmp_path).allow_missing_state_cookie is False
    (tmp_path / "serve.yaml").write_text("lti: {allow_missing_state_cookie: true}\n")
    assert load_settings(tmp_path).allow_missing_state_cookie is True
    (tmp_path / "serve.yaml").write_text("lti: {allow_missing_state_cookie: 'yes please'}\n")
    with pytest.raises(ConfigError, match=r"serve.yaml: lti.allow_missing_state_cookie: .*give true or false"):
        load_settings(tmp_path)
