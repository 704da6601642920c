"""A simulated LMS speaking LTI 1.3, for the tests of ``grader serve`` (library, end-to-end, browser).

`SimulatedPlatform` serves on 127.0.0.1 in a thread (the standard library's ThreadingHTTPServer, so
it needs nothing the tool does not) and plays every part of the platform:

- ``GET /course?login_hint=...``: the course page a user's browser opens; it auto-posts the login
  initiation to the tool's ``tool_login_url`` (`course_page_url`), so a browser test starts where a
  student does;
- ``GET /jwks``: its public keys (it has its own RSA keys; `rotate` adds a new one);
- ``GET /auth``: the OIDC authorization endpoint. It checks the tool's authorization request
  (client id, registered redirect URI, response type and mode, scope, prompt, nonce, state) and
  answers with an HTML form that auto-posts a real signed ``id_token`` and the ``state`` to the
  tool's launch URL (a browser submits it; `form_fields` reads it for an HTTP client);
- ``POST /token``: the OAuth 2 token endpoint. It verifies the tool's RFC 7523 client assertion
  against the tool's JWKS (fetched from ``tool_jwks_url``, or set as ``tool_jwks``) and grants a
  bearer token for the scopes asked;
- ``GET/POST /lineitems``, ``GET /lineitems/<id>`` and ``POST /lineitems/<id>/scores``: AGS line
  items and the score service, recording every score posted (`scores`), with scripted failures
  (`fail_next_scores`) for retry tests.

`login_initiation_params` gives the parameters a platform sends to the tool's login URL (with
``lti_message_hint="deep-link"`` the launch that follows is a deep linking request), and
`id_token` builds a launch token directly (any user, role, deployment, nonce; forged variants by
keyword), for tests that drive the tool's library without a browser.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
ROLES = {
    "student": [MEMBERSHIP + "#Learner"],
    "instructor": [MEMBERSHIP + "#Instructor"],
    "ta": [MEMBERSHIP + "#Instructor", MEMBERSHIP + "/Instructor#TeachingAssistant"],
}
SCORE_MEDIA_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_FILTERS = {"resource_link_id": "resourceLinkId", "resource_id": "resourceId", "tag": "tag"}


@dataclass
class User:
    """A platform user: ``login_hint`` is what the platform sends at login, ``sub`` what the id_token names."""

    login_hint: str
    sub: str
    name: str
    email: str
    role: str = "student"


@dataclass
class ScorePost:
    """One score the tool posted: the line item's id, the JSON body and the content type it came with."""

    lineitem_id: str
    body: dict[str, Any]
    content_type: str
    at: float = field(default_factory=time.time)


class SimulatedPlatform:
    """An LTI 1.3 platform on 127.0.0.1 (see the module's docstring). Use as a context manager.

    Parameters
    ----------
    client_id : str
        The tool's client id at this platform.
    deployment_id : str
        The deployment launches come from.
    redirect_uris : list of str, optional
        The tool's registered launch URLs (the authorization endpoint refuses others); any when empty.
    tool_jwks_url : str, optional
        Where the token endpoint fetches the tool's public keys.
    """

    def __init__(
        self,
        *,
        client_id: str = "grader-tool",
        deployment_id: str = "deployment-1",
        redirect_uris: list[str] | None = None,
        tool_jwks_url: str = "",
    ) -> None:
        self.client_id = client_id
        self.deployment_id = deployment_id
        self.redirect_uris = list(redirect_uris or [])
        self.tool_jwks_url = tool_jwks_url
        self.tool_login_url = ""
        """The tool's login initiation URL, where ``GET /course`` sends a user's browser (browser tests)."""
        self.tool_jwks: dict[str, Any] | None = None
        self.jwks_body: bytes | None = None
        """When set, ``GET /jwks`` answers these bytes instead of the key set (tests of bad key sets)."""
        self.keys: list[tuple[str, rsa.RSAPrivateKey]] = []
        self.rotate()
        self.users: dict[str, User] = {}
        self.context = {"id": "course-g14", "label": "G14", "title": "Attention (G14)"}
        self.resource_link = {"id": "link-1", "title": "G14 lab"}
        self.lineitems: dict[str, dict[str, Any]] = {}
        self.scores: list[ScorePost] = []
        self.token_requests: list[dict[str, str]] = []
        self.refusals: list[tuple[str, int, str]] = []
        self.deep_link_returns: list[str] = []
        self.access_tokens: dict[str, tuple[set[str], float]] = {}
        self._scripted: list[tuple[int, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> SimulatedPlatform:
        """Serve on 127.0.0.1, a free port, in a daemon thread."""
        platform = self

        class Handler(_Handler):
            owner = platform

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="lti-platform", daemon=True)
        self._thread.start()
        self.add_lineitem("1", label="G14 lab", score_maximum=100.0, resource_link_id=self.resource_link["id"])
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> SimulatedPlatform:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the tool's registration holds --------------------------------------------------------------
    @property
    def issuer(self) -> str:
        return self.base_url

    def registration(self) -> dict[str, Any]:
        """The mapping `grader.serve.lti.Platform.from_mapping` reads (the tool's configuration)."""
        return {
            "issuer": self.issuer,
            "client_id": self.client_id,
            "deployment_ids": [self.deployment_id],
            "auth_login_url": self.base_url + "/auth",
            "auth_token_url": self.base_url + "/token",
            "jwks_url": self.base_url + "/jwks",
        }

    def lineitem_url(self, lineitem_id: str = "1") -> str:
        return f"{self.base_url}/lineitems/{lineitem_id}"

    # -- keys ----------------------------------------------------------------------------------------------
    def rotate(self, *, keep_old: bool = True) -> str:
        """Make a new signing key current (it signs from now on); return its kid."""
        kid = f"platform-key-{len(self.keys) + 1}-{secrets.token_hex(4)}"
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.keys = ([*self.keys] if keep_old else []) + [(kid, key)]
        return kid

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, key in self.keys:
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            keys.append({**jwk, "kid": kid, "alg": "RS256", "use": "sig"})
        return {"keys": keys}

    # -- users and launches --------------------------------------------------------------------------------
    def add_user(self, login_hint: str, *, role: str = "student", name: str = "", sub: str = "") -> User:
        """Register a user; ``role`` is 'student', 'instructor' or 'ta' (see ``ROLES``)."""
        user = User(
            login_hint, sub or f"sub-{login_hint}", name or login_hint.title(), f"{login_hint}@example.edu", role
        )
        self.users[login_hint] = user
        return user

    def login_initiation_params(self, target_link_uri: str, login_hint: str, **extra: str) -> dict[str, str]:
        """What the platform sends to the tool's login initiation URL when a user clicks the link."""
        params = {
            "iss": self.issuer,
            "login_hint": login_hint,
            "target_link_uri": target_link_uri,
            "lti_message_hint": self.resource_link["id"],
            "client_id": self.client_id,
            "lti_deployment_id": self.deployment_id,
        }
        params.update(extra)
        return params

    def course_page_url(self, login_hint: str, target_link_uri: str = "") -> str:
        """The LMS page a browser opens to start a launch: it auto-posts the login initiation to ``tool_login_url``.

        A browser test navigates here (as the user would click the assignment in the course) and lands on
        the tool's page once the login, the authorization and the launch have been posted in turn.
        """
        query = {"login_hint": login_hint, "target_link_uri": target_link_uri}
        return f"{self.base_url}/course?{urlencode({k: v for k, v in query.items() if v})}"

    def claims(
        self,
        user: User,
        *,
        nonce: str,
        message_type: str = "LtiResourceLinkRequest",
        target_link_uri: str = "",
        lineitem_id: str = "1",
        now: float | None = None,
    ) -> dict[str, Any]:
        """The claims of a launch for ``user`` (edit them and sign with `sign` for bad-token tests)."""
        issued = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.client_id,
            "sub": user.sub,
            "iat": issued,
            "exp": issued + 300,
            "nonce": nonce,
            "name": user.name,
            "email": user.email,
            LTI + "message_type": message_type,
            LTI + "version": "1.3.0",
            LTI + "deployment_id": self.deployment_id,
            LTI + "target_link_uri": target_link_uri,
            LTI + "roles": list(ROLES.get(user.role, [user.role])),
            LTI + "context": dict(self.context),
            AGS + "claim/endpoint": {
                "scope": [AGS + "scope/lineitem", AGS + "scope/score", AGS + "scope/result.readonly"],
                "lineitems": self.base_url + "/lineitems",
                "lineitem": self.lineitem_url(lineitem_id),
            },
        }
        if message_type == "LtiResourceLinkRequest":
            claims[LTI + "resource_link"] = dict(self.resource_link)
        else:
            claims[DL + "deep_linking_settings"] = {
                "deep_link_return_url": self.base_url + "/deep_link_return",
                "accept_types": ["ltiResourceLink"],
                "accept_presentation_document_targets": ["iframe", "window"],
                "accept_multiple": False,
                "data": "platform-opaque-data",
            }
        return claims

    def sign(
        self,
        claims: Mapping[str, Any],
        *,
        key: rsa.RSAPrivateKey | None = None,
        kid: str | None = None,
        alg: str = "RS256",
    ) -> str:
        """Sign ``claims`` with the current key (or ``key``/``kid``), as the platform does."""
        current_kid, current_key = self.keys[-1]
        return jwt.encode(
            dict(claims), key or current_key, algorithm=alg, headers={"kid": kid if kid is not None else current_kid}
        )

    def id_token(self, login_hint: str, *, nonce: str, **options: Any) -> str:
        """A real signed id_token launching ``login_hint``'s user (options as for `claims`)."""
        return self.sign(self.claims(self.users[login_hint], nonce=nonce, **options))

    # -- AGS -------------------------------------------------------------------------------------------------
    def add_lineitem(
        self, lineitem_id: str, *, label: str, score_maximum: float, resource_link_id: str = "", resource_id: str = ""
    ) -> dict[str, Any]:
        """Add a line item to the gradebook (the one made at start is for the resource link, id '1')."""
        item: dict[str, Any] = {"id": self.lineitem_url(lineitem_id), "label": label, "scoreMaximum": score_maximum}
        if resource_link_id:
            item["resourceLinkId"] = resource_link_id
        if resource_id:
            item["resourceId"] = resource_id
        with self._lock:
            self.lineitems[lineitem_id] = item
        return item

    def authorized(self, authorization: str, scope: str) -> bool:
        """Whether the bearer token in ``authorization`` was granted the AGS ``scope`` (e.g. 'score')."""
        granted = self.access_tokens.get(authorization.removeprefix("Bearer ").strip())
        return granted is not None and AGS + "scope/" + scope in granted[0]

    def fail_next_scores(self, *answers: tuple[int, Mapping[str, str]]) -> None:
        """Answer the next score posts with these (status, headers) before accepting again."""
        with self._lock:
            self._scripted.extend((status, dict(headers)) for status, headers in answers)

    def wait_for_scores(self, count: int, timeout: float = 60.0) -> list[ScorePost]:
        """The scores posted, once there are at least ``count`` (AssertionError after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.scores) >= count:
                    return list(self.scores)
            time.sleep(0.05)
        raise AssertionError(f"{len(self.scores)} score post(s) arrived in {timeout} s, {count} expected")

    # -- request handling (called by the handler thread) ---------------------------------------------------
    def authorize(self, query: Mapping[str, str]) -> tuple[int, str]:
        """The authorization endpoint: (status, HTML) auto-posting the id_token, or a refusal."""
        expected = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none"}
        for name, value in expected.items():
            if query.get(name) != value:
                return 400, f"bad {name}"
        if query.get("client_id") != self.client_id:
            return 400, "unknown client_id"
        redirect_uri = query.get("redirect_uri", "")
        if self.redirect_uris and redirect_uri not in self.redirect_uris:
            return 400, "redirect_uri not registered"
        if not query.get("nonce") or not query.get("state"):
            return 400, "nonce and state are required"
        user = self.users.get(query.get("login_hint", ""))
        if user is None:
            return 403, "unknown login_hint"
        message_type = (
            "LtiDeepLinkingRequest" if query.get("lti_message_hint") == "deep-link" else "LtiResourceLinkRequest"
        )
        token = self.sign(
            self.claims(user, nonce=query["nonce"], message_type=message_type, target_link_uri=redirect_uri)
        )
        return 200, auto_post_form(redirect_uri, {"id_token": token, "state": query["state"]})

    def grant_token(self, form: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """The token endpoint: verify the tool's client assertion, grant a bearer token."""
        self.token_requests.append(dict(form))
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        if form.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return 400, {"error": "invalid_client"}
        assertion = form.get("client_assertion", "")
        try:
            kid = jwt.get_unverified_header(assertion).get("kid")
            tool_keys = self.tool_jwks or httpx.get(self.tool_jwks_url, timeout=5).json()
            jwk = next(k for k in tool_keys["keys"] if k.get("kid") == kid)
            claims = jwt.decode(
                assertion,
                jwt.PyJWK(jwk, algorithm="RS256"),
                algorithms=["RS256"],
                audience=self.base_url + "/token",
                issuer=self.client_id,
                options={"require": ["iss", "sub", "aud", "exp", "iat", "jti"]},
            )
        except (jwt.PyJWTError, StopIteration, KeyError, ValueError, httpx.HTTPError) as exc:
            self.refusals.append(("token", 401, repr(exc)))
            return 401, {"error": "invalid_client", "error_description": type(exc).__name__}
        if claims["sub"] != self.client_id:
            return 401, {"error": "invalid_client"}
        scopes = set(form.get("scope", "").split())
        token = secrets.token_urlsafe(24)
        with self._lock:
            self.access_tokens[token] = (scopes, time.time() + 3600)
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": 3600,
            "scope": " ".join(sorted(scopes)),
        }

    def post_score(
        self, lineitem_id: str, authorization: str, content_type: str, body: bytes
    ) -> tuple[int, dict[str, str], str]:
        """The score service: check the bearer token's scope and the media type, record the score."""
        token = authorization.removeprefix("Bearer ").strip()
        with self._lock:
            if self._scripted:
                status, headers = self._scripted.pop(0)
                self.refusals.append((lineitem_id, status, "scripted"))
                return status, headers, "scripted failure"
            granted = self.access_tokens.get(token)
        if granted is None or AGS + "scope/score" not in granted[0]:
            return 401, {}, "no valid token with the score scope"
        if lineitem_id not in self.lineitems:
            return 404, {}, "no such line item"
        if content_type.split(";")[0].strip() != SCORE_MEDIA_TYPE:
            return 415, {}, "scores are application/vnd.ims.lis.v1.score+json"
        try:
            score = json.loads(body)
        except ValueError:
            return 400, {}, "not JSON"
        required = {"userId", "activityProgress", "gradingProgress", "timestamp"}
        if not isinstance(score, dict) or not required <= set(score):
            return 400, {}, "a score needs userId, activityProgress, gradingProgress and timestamp"
        with self._lock:
            self.scores.append(ScorePost(lineitem_id, score, content_type))
        return 200, {}, ""


def launch_through(
    client: httpx.Client,
    platform: SimulatedPlatform,
    login_url: str,
    target_link_uri: str,
    login_hint: str,
    **extra: str,
) -> httpx.Response:
    """A user's whole LTI 1.3 launch, as their browser makes it, with ``client`` as the browser.

    The platform's login initiation is posted to the tool's ``login_url``; the tool's redirect is
    followed to the platform's authorization endpoint; the page it answers (a signed id_token and the
    state, auto-posted) is posted to the tool's launch URL, and the tool's answer is returned (its
    redirects followed). ``client`` keeps the tool's cookies: it is the user's session afterwards.
    """
    params = platform.login_initiation_params(target_link_uri, login_hint, **extra)
    answer = client.post(login_url, data=params, follow_redirects=False)
    if answer.status_code not in (302, 303, 307):
        raise AssertionError(f"the tool's login answered {answer.status_code}, not a redirect: {answer.text[:300]}")
    location = answer.headers["location"]
    if not location.startswith(platform.base_url + "/auth?"):
        raise AssertionError(f"the tool's login redirected elsewhere than the platform: {location[:200]}")
    page = client.get(location)
    if page.status_code != 200:
        raise AssertionError(f"the platform refused the authorization request: {page.status_code} {page.text}")
    action, fields = form_fields(page.text)
    return client.post(action, data=fields, follow_redirects=True)


def auto_post_form(action: str, fields: Mapping[str, str]) -> str:
    """An HTML page that posts ``fields`` to ``action`` on load (and has a button without JavaScript)."""
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items()
    )
    return (
        '<!doctype html><html><body onload="document.forms[0].submit()">'
        f'<form method="post" action="{html.escape(action)}">{inputs}<button type="submit">Continue</button></form>'
        "</body></html>"
    )


def form_fields(page: str) -> tuple[str, dict[str, str]]:
    """Read `auto_post_form`'s page back: (action, fields), as a browser would submit them."""
    from html.parser import HTMLParser

    found: dict[str, Any] = {"action": "", "fields": {}}

    class Reader(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            values = {k: v or "" for k, v in attrs}
            if tag == "form":
                found["action"] = values.get("action", "")
            elif tag == "input" and values.get("name"):
                found["fields"][values["name"]] = values.get("value", "")

    Reader().feed(page)
    return found["action"], found["fields"]


class _Handler(BaseHTTPRequestHandler):
    owner: SimulatedPlatform

    def log_message(self, format: str, *args: Any) -> None:  # the tests' output stays quiet
        pass

    def _answer(self, status: int, body: str | bytes, content_type: str, headers: Mapping[str, str] = {}) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, data: Any, headers: Mapping[str, str] = {}) -> None:
        self._answer(status, json.dumps(data), "application/json", headers)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        parts = urlsplit(self.path)
        platform = self.owner
        if parts.path == "/jwks":
            if platform.jwks_body is not None:
                return self._answer(200, platform.jwks_body, "application/json")
            return self._json(200, platform.jwks())
        if parts.path == "/auth":
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            status, page = platform.authorize(query)
            return self._answer(status, page, "text/html; charset=utf-8")
        if parts.path == "/course":
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if not platform.tool_login_url or query.get("login_hint") not in platform.users:
                return self._answer(404, "no tool registered or no such user", "text/plain")
            target = query.get("target_link_uri") or platform.tool_login_url.rsplit("/", 1)[0] + "/launch"
            params = platform.login_initiation_params(target, query["login_hint"])
            return self._answer(200, auto_post_form(platform.tool_login_url, params), "text/html; charset=utf-8")
        if parts.path == "/lineitems":
            if not platform.authorized(self.headers.get("Authorization", ""), "lineitem"):
                return self._json(401, {"error": "no valid token with the lineitem scope"})
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            items = [
                item
                for item in platform.lineitems.values()
                if all(item.get(key) == query[name] for name, key in LINEITEM_FILTERS.items() if name in query)
            ]
            return self._json(200, items)
        if parts.path.startswith("/lineitems/"):
            item = platform.lineitems.get(parts.path.split("/")[2])
            return self._json(200, item) if item else self._json(404, {"error": "no such line item"})
        return self._json(404, {"error": "not found"})

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        parts = urlsplit(self.path)
        platform = self.owner
        body = self._body()
        if parts.path == "/token":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            status, answer = platform.grant_token(form)
            return self._json(status, answer)
        segments = parts.path.strip("/").split("/")
        if len(segments) == 3 and segments[0] == "lineitems" and segments[2] == "scores":
            status, headers, text = platform.post_score(
                segments[1], self.headers.get("Authorization", ""), self.headers.get("Content-Type", ""), body
            )
            return self._answer(status, text, "text/plain", headers)
        if parts.path == "/lineitems":
            if not platform.authorized(self.headers.get("Authorization", ""), "lineitem"):
                return self._json(401, {"error": "no valid token with the lineitem scope"})
            data = json.loads(body or b"{}")
            item = platform.add_lineitem(
                uuid.uuid4().hex[:8],
                label=str(data.get("label", "")),
                score_maximum=float(data.get("scoreMaximum", 0)),
                resource_link_id=str(data.get("resourceLinkId", "")),
                resource_id=str(data.get("resourceId", "")),
            )
            return self._json(201, item)
        if parts.path == "/deep_link_return":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            platform.deep_link_returns.append(form.get("JWT", ""))
            return self._answer(200, "content item received", "text/plain")
        return self._json(404, {"error": "not found"})


__all__ = ["ROLES", "ScorePost", "SimulatedPlatform", "User", "auto_post_form", "form_fields", "launch_through"]
