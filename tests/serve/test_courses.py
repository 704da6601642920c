"""Several course folders in one ``grader serve``: each course on its own host name or path (its ``public_url``),
with its own database, uploads, sessions and LTI registration; a request for another host name or path finds no
course, and a course's cookie is neither sent to nor accepted by another."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import yaml

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

from sqlalchemy import func, select  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from grader.errors import ConfigError  # noqa: E402
from grader.serve.app import create_courses_app  # noqa: E402
from grader.serve.db import Submission  # noqa: E402
from grader.serve.invites import RosterEntry, invite  # noqa: E402

from .conftest import SAMPLES, csrf  # noqa: E402
from .test_cli import course_copy  # noqa: E402


def two_copies(tmp_path: Path, names: tuple[str, str]) -> list[Path]:
    folders = []
    for name in names:
        (tmp_path / name).mkdir()
        folders.append(course_copy(tmp_path / name))
    return folders


def test_two_courses_are_served_each_on_its_own_host_name(tmp_path: Path) -> None:
    courses = two_copies(tmp_path, ("g14a", "g14b"))
    for name, course in zip(("g14a", "g14b"), courses, strict=True):
        (course / "serve.yaml").write_text(f"public_url: http://{name}.test\n")
    app = create_courses_app(courses)
    states = {host: sub.state.server for host, sub in app.state.courses.items()}
    assert sorted(states) == ["g14a.test", "g14b.test"]
    with TestClient(app, base_url="http://g14a.test") as alice:
        (link,) = invite(states["g14a.test"], [RosterEntry("alice", name="Alice")], "http://g14a.test")
        page = alice.get(link.url)
        assert alice.post(link.url, data={"csrf": csrf(page.text)}).status_code == 200
        data = (SAMPLES / "correct_numpy" / "attention.py").read_bytes()
        token = csrf(alice.get("/").text)
        assert alice.post("/submit", data={"csrf": token}, files={"file": ("attention.py", data)}).status_code == 200
        same_link_elsewhere = TestClient(app, base_url="http://g14b.test").get(urlpath(link.url))
        assert same_link_elsewhere.status_code == 403  # the one-time link is course A's, unknown to course B
        assert TestClient(app, base_url="http://other.test").get("/").status_code == 404
    counts = {}
    for host, state in states.items():
        with state.db() as db:
            counts[host] = db.execute(select(func.count()).select_from(Submission)).scalar()
    assert counts == {"g14a.test": 1, "g14b.test": 0}


def urlpath(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path


def test_several_courses_need_distinct_public_urls(tmp_path: Path) -> None:
    from grader.errors import UsageError

    courses = two_copies(tmp_path, ("a", "b"))
    (courses[0] / "serve.yaml").write_text("public_url: http://same.test\n")
    with pytest.raises(UsageError, match=r"b/course: serve.yaml: public_url: missing; give each course its own"):
        create_courses_app(courses)
    assert not (courses[0] / ".grader-serve").exists()  # nothing left behind
    (courses[1] / "serve.yaml").write_text("public_url: http://same.test\n")
    with pytest.raises(UsageError, match=r"public_url: same.test is another course's; give each course its own"):
        create_courses_app(courses)


def test_several_courses_refuse_one_db_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grader.cli import main

    a, b = two_copies(tmp_path, ("a", "b"))
    assert main(["serve", "--course", str(a), "--course", str(b), "--db", "sqlite:///x.db"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "with several --course, give no --db" in err[0]
    assert not (a / ".grader-serve").exists() and not (b / ".grader-serve").exists()


REGISTRATION = {
    "issuer": "https://lms.example.edu",
    "client_id": "tool-1",
    "deployment_ids": ["d1"],
    "auth_login_url": "https://lms.example.edu/auth",
    "auth_token_url": "https://lms.example.edu/token",
    "jwks_url": "https://lms.example.edu/jwks",
}

LINK = re.compile(r'(?:href|action)="([^"]*)"')


def sign_in(app: Any, state: Any, login: str, prefix: str) -> tuple[TestClient, Any]:
    """A browser signed in to the course at ``prefix`` by its one-time link; and the sign-in's answer."""
    browser = TestClient(app, base_url="http://grader.test", follow_redirects=False)
    (link,) = invite(state, [RosterEntry(login, name=login.title())], f"http://grader.test{prefix}")
    assert urlpath(link.url).startswith(f"{prefix}/login/")
    page = browser.get(link.url)
    assert page.status_code == 200
    assert all(found.startswith(f"{prefix}/") for found in LINK.findall(page.text))  # the form posts back here
    done = browser.post(link.url, data={"csrf": csrf(page.text)})
    assert done.status_code == 303 and done.headers["location"] == f"{prefix}/"
    return browser, done


def test_two_courses_under_one_host_name_each_under_its_own_path(tmp_path: Path) -> None:
    courses = two_copies(tmp_path, ("g14", "g15"))
    for name, course in zip(("g14", "g15"), courses, strict=True):
        settings = {"public_url": f"http://grader.test/{name}", "lti": {"platforms": [REGISTRATION]}}
        (course / "serve.yaml").write_text(yaml.safe_dump(settings))
    app = create_courses_app(courses)
    states = {place: sub.state.server for place, sub in app.state.courses.items()}
    assert sorted(states) == ["grader.test/g14", "grader.test/g15"]
    with TestClient(app, base_url="http://grader.test") as anyone:
        alice, signed = sign_in(app, states["grader.test/g14"], "alice", "/g14")
        bob, _ = sign_in(app, states["grader.test/g15"], "bob", "/g15")
        cookie = signed.headers["set-cookie"]
        assert "grader_session=" in cookie and "; path=/g14;" in cookie.lower() and "httponly" in cookie.lower()
        # every page's links, forms and redirects stay under the course's path
        home = alice.get("/g14/")
        assert home.status_code == 200 and "Sign out" in home.text
        links = LINK.findall(home.text)
        assert "/g14/submit" in links and "/g14/logout" in links and "/g14/history" in links
        assert all(link.startswith("/g14/") for link in links), links
        data = (SAMPLES / "no_sqrt_dk" / "attention.py").read_bytes()
        sent = alice.post("/g14/submit", data={"csrf": csrf(home.text)}, files={"file": ("attention.py", data)})
        assert sent.status_code == 303 and sent.headers["location"] == "/g14/submissions/1"
        for path in ("/g14/submissions/1", "/g14/history"):
            page = alice.get(path)
            assert page.status_code == 200
            assert all(link.startswith("/g14/") for link in LINK.findall(page.text)), path
        bobs = bob.post(
            "/g15/submit", data={"csrf": csrf(bob.get("/g15/").text)}, files={"file": ("attention.py", data)}
        )
        assert bobs.headers["location"] == "/g15/submissions/1"
        # a student of one course sees none of the other's pages: the browser sends no cookie there ...
        for path in ("/g15/", "/g15/history", "/g15/submissions/1", "/g15/staff"):
            page = alice.get(path)
            assert "Sign out" not in page.text and "no_sqrt" not in page.text, path
        assert alice.get("/g15/submissions/1").status_code in (401, 403)
        # ... and one course's cookie, sent to the other by hand, is not accepted there
        value = alice.cookies.get("grader_session", path="/g14")  # (alice now holds /g15 one too, signed in to nothing)
        stolen = TestClient(app, base_url="http://grader.test", follow_redirects=False)
        stolen.headers["cookie"] = f"grader_session={value}"
        assert "Sign out" in stolen.get("/g14/").text  # the cookie itself is good ...
        for path in ("/g15/", "/g15/history", "/g15/submissions/1"):
            assert "Sign out" not in stolen.get(path).text, path  # ... for its own course only
        assert stolen.get("/g15/submissions/1").status_code in (401, 403)
        # outside both paths there is no course
        for path in ("/", "/submit", "/g16/", "/g14x/", "/lti/jwks"):
            assert anyone.get(path).status_code == 404, path
        # LTI: the redirect URI, the state cookie and the JWKS are the course's, under its path
        kids = {}
        for prefix in ("/g14", "/g15"):
            params = {"iss": REGISTRATION["issuer"], "login_hint": "x", "client_id": "tool-1"}
            params["target_link_uri"] = f"http://grader.test{prefix}/lti/launch"
            start = anyone.get(f"{prefix}/lti/login?" + urlencode(params), follow_redirects=False)
            assert start.status_code == 302
            query = parse_qs(urlsplit(start.headers["location"]).query)
            assert query["redirect_uri"] == [f"http://grader.test{prefix}/lti/launch"]
            assert f"path={prefix}/lti/" in start.headers["set-cookie"].lower()
            keys = anyone.get(f"{prefix}/lti/jwks")
            assert keys.status_code == 200
            kids[prefix] = keys.json()["keys"][0]["kid"]
        assert kids["/g14"] != kids["/g15"]  # each course its own tool key
    with states["grader.test/g14"].db() as db:
        assert db.execute(select(func.count()).select_from(Submission)).scalar() == 1


def test_courses_on_one_host_need_paths_none_of_which_holds_another(tmp_path: Path) -> None:
    from grader.errors import UsageError

    courses = two_copies(tmp_path, ("a", "b"))
    for first, second, expected in (
        (
            "http://h.test/g14",
            "http://h.test/g14/",
            "h.test/g14 is another course's; give each course its own host or path",
        ),
        ("http://h.test", "http://h.test/g15", "h.test/g15 holds or is held by another course's h.test/"),
        ("http://h.test/g1", "http://h.test/g1/a", "h.test/g1/a holds or is held by another course's h.test/g1"),
    ):
        (courses[0] / "serve.yaml").write_text(f"public_url: {first}\n")
        (courses[1] / "serve.yaml").write_text(f"public_url: {second}\n")
        with pytest.raises(UsageError, match=re.escape(f"b/course: serve.yaml: public_url: {expected}")):
            create_courses_app(courses)
    assert not (courses[0] / ".grader-serve").exists() and not (courses[1] / ".grader-serve").exists()
    (courses[0] / "serve.yaml").write_text("public_url: http://h.test/g 14\n")
    with pytest.raises(ConfigError, match=r"serve.yaml: public_url: .* does not match .*a path of letters, digits"):
        create_courses_app(courses)


def test_one_course_with_a_path_in_its_public_url_is_served_under_it(tmp_path: Path) -> None:
    from grader.serve.app import create_app

    course = course_copy(tmp_path)
    (course / "serve.yaml").write_text("public_url: https://grader.example.edu/g14\n")
    app = create_app(course)
    with TestClient(app, base_url="https://grader.example.edu", follow_redirects=False) as browser:
        (link,) = invite(app.state.server, [RosterEntry("alice")], "https://grader.example.edu/g14")
        assert urlpath(link.url).startswith("/g14/login/")
        page = browser.get(link.url)
        done = browser.post(link.url, data={"csrf": csrf(page.text)})
        assert done.headers["location"] == "/g14/" and "; path=/g14;" in done.headers["set-cookie"].lower()
        assert "; secure" in done.headers["set-cookie"].lower()
        assert browser.get("/g14/").status_code == 200 and browser.get("/").status_code == 404
