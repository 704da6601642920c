"""grader.serve.lti against a simulated LTI 1.3 platform: login, launch validation (every bad token
of issue 28), roles, deep linking and AGS score posts with retries."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from base64 import urlsafe_b64encode
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from grader.errors import ConfigError
from grader.serve import lti
from grader.serve.ags import _scores_url, _with_query
from grader.serve.lti import (
    AgsClient,
    JwksCache,
    LaunchError,
    Platform,
    ToolKey,
    deep_link_response,
    login_redirect,
    map_role,
    validate_launch,
)
from tests.serve.lti_platform import MEMBERSHIP, SimulatedPlatform, form_fields

TOOL = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def sim():
    with SimulatedPlatform(redirect_uris=[TOOL + "/lti/launch"]) as platform:
        platform.add_user("ada", role="student")
        platform.add_user("grace", role="instructor")
        platform.add_user("alan", role="ta")
        yield platform


@pytest.fixture(scope="module")
def tool_key(sim):
    key = ToolKey.generate()
    sim.tool_jwks = key.jwks()
    return key


@pytest.fixture
def reg(sim):
    return Platform.from_mapping(sim.registration(), "course.yaml: lti")


class Nonces:
    """The tool's nonce store: issued nonces, each usable once."""

    def __init__(self):
        self.issued: set[str] = set()

    def new(self) -> str:
        nonce = f"nonce-{len(self.issued)}-{time.monotonic_ns()}"
        self.issued.add(nonce)
        return nonce

    def __call__(self, nonce: str) -> bool:
        if nonce in self.issued:
            self.issued.remove(nonce)
            return True
        return False


def launch(reg, token, nonces=None, **kw):
    kw.setdefault("jwks_fetch", JwksCache(min_refresh=0))
    return validate_launch(reg, token, nonce_unused=nonces or (lambda n: True), **kw)


def refused(reg, token, **kw) -> str:
    with pytest.raises(LaunchError) as info:
        launch(reg, token, **kw)
    text = str(info.value)
    assert text.endswith(".") and "\n" not in text
    assert "eyJ" not in text and "sub-" not in text  # nothing of the token is echoed
    return text


# -- registration ------------------------------------------------------------------------------------------
def test_platform_from_mapping_reads_a_registration(sim):
    reg = Platform.from_mapping({**sim.registration(), "deployment_ids": "d-1"}, "course.yaml: lti")
    assert reg.issuer == sim.issuer and reg.client_id == "grader-tool"
    assert reg.deployment_ids == ("d-1",)
    assert reg.jwks_url == sim.base_url + "/jwks"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"jwks_url": None}, "course.yaml: lti: jwks_url: missing; give the value from the platform's registration."),
        (
            {"auth_token_url": "http://lms.example.edu/token"},
            "course.yaml: lti: auth_token_url: must be an https:// URL",
        ),
        ({"deployment_ids": []}, "course.yaml: lti: deployment_ids: must be a non-empty list"),
        ({"client_id": " "}, "course.yaml: lti: client_id: must be a non-empty string"),
        ({"jwks_uri": "https://x"}, "course.yaml: lti: unknown key 'jwks_uri'; the keys of a platform are issuer,"),
    ],
)
def test_platform_from_mapping_names_file_key_and_fix(sim, change, expected):
    data = {**sim.registration(), **change}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ConfigError) as info:
        Platform.from_mapping(data, "course.yaml: lti")
    assert str(info.value).startswith(expected)
    assert "\n" not in str(info.value)


def test_tool_key_round_trips_with_a_stable_kid_and_a_public_jwks():
    key = ToolKey.generate()
    again = ToolKey.from_pem(key.to_pem())
    assert again.kid == key.kid and len(key.kid) == 43
    (public,) = key.jwks()["keys"]
    assert public["kid"] == key.kid and public["alg"] == "RS256" and public["use"] == "sig"
    assert set(public) == {"kty", "n", "e", "kid", "alg", "use"}  # no private member ("d", "p", ...)
    token = key.sign({"x": 1})
    assert jwt.decode(token, jwt.PyJWK(public), algorithms=["RS256"]) == {"x": 1}


# -- OIDC login initiation --------------------------------------------------------------------------------------
def test_login_redirect_builds_the_authorization_request(sim, reg):
    params = sim.login_initiation_params(TOOL + "/lti/launch", "ada")
    url = login_redirect(reg, params, TOOL + "/lti/launch", state="st-1", nonce="n-1")
    assert url.startswith(sim.base_url + "/auth?")
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert query == {
        "scope": "openid",
        "response_type": "id_token",
        "response_mode": "form_post",
        "prompt": "none",
        "client_id": "grader-tool",
        "redirect_uri": TOOL + "/lti/launch",
        "login_hint": "ada",
        "state": "st-1",
        "nonce": "n-1",
        "lti_message_hint": "link-1",
    }


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        ({"iss": "https://other.example.edu"}, "The login request names an issuer this tool is not registered with."),
        ({"login_hint": ""}, "The login request has no login_hint."),
        (
            {"target_link_uri": "https://evil.example.com/lti/launch"},
            "The login request's target_link_uri is not a URL of this tool.",
        ),
        ({"client_id": "another-tool"}, "The login request names a client_id this tool is not registered with."),
        ({"lti_deployment_id": "d-unknown"}, "The login request names a deployment this tool is not registered for."),
        ({"lti_message_hint": "x" * 5000}, "The login parameter 'lti_message_hint' is too long or not text."),
    ],
)
def test_login_redirect_refuses_a_bad_initiation(sim, reg, change, sentence):
    params = {**sim.login_initiation_params(TOOL + "/lti/launch", "ada"), **change}
    with pytest.raises(LaunchError) as info:
        login_redirect(reg, params, TOOL + "/lti/launch", state="s", nonce="n")
    assert str(info.value) == sentence


def test_full_login_and_launch_through_the_platform(sim, reg):
    nonces = Nonces()
    params = sim.login_initiation_params(TOOL + "/lti/launch", "ada")
    url = login_redirect(reg, params, TOOL + "/lti/launch", state="state-42", nonce=nonces.new())
    page = httpx.get(url)
    assert page.status_code == 200
    action, fields = form_fields(page.text)
    assert action == TOOL + "/lti/launch" and fields["state"] == "state-42"
    got = launch(reg, fields["id_token"], nonces)
    assert got.subject == "sub-ada" and got.name == "Ada" and got.email == "ada@example.edu"
    assert got.role == "student" and got.message_type == "LtiResourceLinkRequest"
    assert got.deployment_id == "deployment-1" and got.context_id == "course-g14"
    assert got.resource_link_id == "link-1" and got.target_link_uri == TOOL + "/lti/launch"
    assert got.lineitem_url == sim.lineitem_url("1") and got.lineitems_url == sim.base_url + "/lineitems"
    assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in got.ags_scopes
    assert got.deep_link_return_url is None and got.deep_link_data is None
    # the same form posted again is a replay
    assert refused(reg, fields["id_token"], nonces=nonces) == (
        "The id_token's nonce was already used or never issued (a replayed launch)."
    )


def test_the_course_page_starts_a_launch_in_the_browser(sim):
    sim.tool_login_url = TOOL + "/lti/login"
    try:
        page = httpx.get(sim.course_page_url("ada"))
        assert page.status_code == 200 and 'onload="document.forms[0].submit()"' in page.text
        action, fields = form_fields(page.text)
        assert action == TOOL + "/lti/login"
        assert fields == sim.login_initiation_params(TOOL + "/lti/launch", "ada")
        assert httpx.get(sim.course_page_url("nobody")).status_code == 404
    finally:
        sim.tool_login_url = ""


# -- bad id_tokens -----------------------------------------------------------------------------------------------
def test_forged_token_signed_by_another_key_is_refused(sim, reg):
    claims = sim.claims(sim.users["ada"], nonce="n")
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = sim.sign(claims, key=other)  # the platform's current kid, someone else's key
    assert refused(reg, forged) == "The id_token's signature does not match the platform's key."


def test_tampered_payload_is_refused(sim, reg):
    header, payload, signature = sim.id_token("ada", nonce="n").split(".")
    claims = json.loads(jwt.utils.base64url_decode(payload))
    claims["sub"] = "sub-grace"
    tampered = ".".join([header, jwt.utils.base64url_encode(json.dumps(claims).encode()).decode(), signature])
    assert refused(reg, tampered) == "The id_token's signature does not match the platform's key."


def test_expired_token_is_refused_beyond_the_leeway(sim, reg):
    issued = time.time() - 1000
    token = sim.sign(sim.claims(sim.users["ada"], nonce="n", now=issued))  # exp = issued + 300
    assert refused(reg, token) == "The id_token has expired."
    assert launch(reg, token, now=issued + 300 + lti.LEEWAY - 1).subject == "sub-ada"
    assert refused(reg, token, now=issued + 300 + lti.LEEWAY + 1) == "The id_token has expired."


def test_token_from_the_future_is_refused(sim, reg):
    token = sim.sign(sim.claims(sim.users["ada"], nonce="n", now=time.time() + 600))
    assert refused(reg, token) == "The id_token is dated in the future (iat)."


def test_wrong_audience_is_refused(sim, reg):
    claims = {**sim.claims(sim.users["ada"], nonce="n"), "aud": "another-tool"}
    assert refused(reg, sim.sign(claims)) == (
        "The id_token is addressed to another tool (its audience is not this client id)."
    )


def test_audience_list_follows_the_azp_rule(sim, reg):
    claims = sim.claims(sim.users["ada"], nonce="n")
    assert launch(reg, sim.sign({**claims, "aud": ["grader-tool"]})).subject == "sub-ada"
    several = {**claims, "aud": ["grader-tool", "another-tool"]}
    assert refused(reg, sim.sign(several)) == "The id_token names several audiences but no authorized party (azp)."
    assert launch(reg, sim.sign({**several, "azp": "grader-tool"})).subject == "sub-ada"
    assert refused(reg, sim.sign({**several, "azp": "another-tool"})) == (
        "The id_token's authorized party (azp) is another tool."
    )


def test_wrong_issuer_is_refused(sim, reg):
    claims = {**sim.claims(sim.users["ada"], nonce="n"), "iss": "https://other.example.edu"}
    assert refused(reg, sim.sign(claims)) == "The id_token comes from an issuer this tool is not registered with."


def test_replayed_and_unknown_nonces_are_refused(sim, reg):
    nonces = Nonces()
    nonce = nonces.new()
    token = sim.id_token("ada", nonce=nonce)
    assert launch(reg, token, nonces).subject == "sub-ada"
    assert refused(reg, token, nonces=nonces).endswith("(a replayed launch).")
    assert refused(reg, sim.id_token("ada", nonce="never-issued"), nonces=nonces).endswith("(a replayed launch).")


def test_bad_token_does_not_use_up_its_nonce(sim, reg):
    nonces = Nonces()
    nonce = nonces.new()
    bad = sim.sign({**sim.claims(sim.users["ada"], nonce=nonce), "aud": "another-tool"})
    refused(reg, bad, nonces=nonces)
    assert nonce in nonces.issued


def test_unknown_deployment_is_refused(sim, reg):
    claims = sim.claims(sim.users["ada"], nonce="n")
    claims["https://purl.imsglobal.org/spec/lti/claim/deployment_id"] = "deployment-other"
    assert refused(reg, sim.sign(claims)) == "The launch comes from a deployment this tool is not registered for."


@pytest.mark.parametrize(
    ("claim", "value", "sentence"),
    [
        ("version", "1.1", "The launch is not an LTI 1.3.0 message."),
        ("message_type", "LtiSubmissionReviewRequest", "The launch's message type is not one this tool handles."),
        ("resource_link", {"title": "no id"}, "The resource link launch names no resource link (resource_link.id)."),
        ("roles", "Learner", "The launch's roles claim is not a list of role URIs."),
    ],
)
def test_lti_claims_are_checked(sim, reg, claim, value, sentence):
    claims = sim.claims(sim.users["ada"], nonce="n")
    claims["https://purl.imsglobal.org/spec/lti/claim/" + claim] = value
    assert refused(reg, sim.sign(claims)) == sentence


def test_overlong_subject_is_refused(sim, reg):
    claims = {**sim.claims(sim.users["ada"], nonce="n"), "sub": "s" * 256}
    assert refused(reg, sim.sign(claims)) == (
        "The launch names no user, or one longer than OpenID Connect allows (sub)."
    )


def test_deep_link_data_is_returned_whole(sim, reg, tool_key):
    claims = sim.claims(sim.users["grace"], nonce="n", message_type="LtiDeepLinkingRequest")
    opaque = "d" * 5000
    claims["https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"]["data"] = opaque
    request = launch(reg, sim.sign(claims))
    answer = deep_link_response(reg, tool_key, request, title="t", url=TOOL + "/lti/launch")
    assert (
        jwt.decode(answer, options={"verify_signature": False})["https://purl.imsglobal.org/spec/lti-dl/claim/data"]
        == opaque
    )


def test_missing_nonce_or_sub_is_refused(sim, reg):
    claims = sim.claims(sim.users["ada"], nonce="n")
    del claims["nonce"]
    assert refused(reg, sim.sign(claims)).startswith("The id_token lacks a required claim")


def test_alg_none_is_refused(sim, reg):
    claims = sim.claims(sim.users["ada"], nonce="n")
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": sim.keys[-1][0]})
    assert refused(reg, unsigned) == "The id_token is signed with an algorithm other than RS256."


def test_hs256_with_the_platform_public_key_as_secret_is_refused(sim, reg):
    """The key-confusion attack: an HMAC 'signed' with the public key anyone can fetch."""
    kid, key = sim.keys[-1]
    secret = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def b64(data: bytes) -> str:
        return urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    payload = b64(json.dumps(sim.claims(sim.users["ada"], nonce="n")).encode())
    signature = b64(hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest())
    assert (
        refused(reg, f"{header}.{payload}.{signature}") == "The id_token is signed with an algorithm other than RS256."
    )


@pytest.mark.parametrize("token", ["", "not-a-jwt", "a.b.c", "x" * (lti.MAX_TOKEN_CHARS + 1)])
def test_garbage_is_refused(reg, token):
    assert refused(reg, token).startswith(("The launch carries no id_token", "The id_token is not a well-formed"))


def test_unknown_kid_is_refused_and_refetches_are_rate_limited(sim, reg):
    clock = [1000.0]
    cache = JwksCache(min_refresh=5.0, clock=lambda: clock[0])
    claims = sim.claims(sim.users["ada"], nonce="n")
    assert launch(reg, sim.sign(claims), jwks_fetch=cache).subject == "sub-ada"
    assert cache.fetches == 1
    unknown = sim.sign(claims, kid="no-such-kid")
    sentence = "The id_token is signed with a key the platform's key set does not hold."
    assert refused(reg, unknown, jwks_fetch=cache) == sentence
    assert refused(reg, unknown, jwks_fetch=cache) == sentence
    assert cache.fetches == 1  # within min_refresh of the last fetch: no new fetch
    clock[0] += 6
    assert refused(reg, unknown, jwks_fetch=cache) == sentence
    assert cache.fetches == 2


def test_key_rotation_is_followed(sim, reg):
    clock = [1000.0]
    cache = JwksCache(min_refresh=5.0, clock=lambda: clock[0])
    assert launch(reg, sim.id_token("ada", nonce="n"), jwks_fetch=cache).subject == "sub-ada"
    old_kid, old_key = sim.keys[-1]
    new_kid = sim.rotate(keep_old=False)
    clock[0] += 10
    token = sim.id_token("grace", nonce="n")
    assert jwt.get_unverified_header(token)["kid"] == new_kid != old_kid
    assert launch(reg, token, jwks_fetch=cache).role == "instructor"
    assert cache.fetches == 2
    assert launch(reg, sim.id_token("ada", nonce="n"), jwks_fetch=cache).subject == "sub-ada"
    assert cache.fetches == 2  # the new key is cached
    clock[0] += 10
    retired = sim.sign(sim.claims(sim.users["ada"], nonce="n"), key=old_key, kid=old_kid)
    assert (
        refused(reg, retired, jwks_fetch=cache)
        == "The id_token is signed with a key the platform's key set does not hold."
    )


def test_a_known_key_outlives_an_outage_of_the_key_set(sim, reg):
    clock = [1000.0]
    cache = JwksCache(max_age=60.0, clock=lambda: clock[0])
    token = sim.id_token("ada", nonce="n")
    assert launch(reg, token, jwks_fetch=cache).subject == "sub-ada"
    sim.jwks_body = b"<html>503 Service Unavailable</html>"
    try:
        clock[0] += 120  # the set is stale and its endpoint is down
        assert launch(reg, token, jwks_fetch=cache).subject == "sub-ada"
        assert cache.fetches == 2
        unknown = sim.sign(sim.claims(sim.users["ada"], nonce="n"), kid="another-kid")
        assert refused(reg, unknown, jwks_fetch=cache) == "The platform's key set is not a JSON Web Key Set."
    finally:
        sim.jwks_body = None


def test_unreachable_key_set_is_a_refusal(reg):
    dead = Platform.from_mapping(
        {
            **{f: getattr(reg, f) for f in ("issuer", "client_id", "auth_login_url", "auth_token_url")},
            "deployment_ids": list(reg.deployment_ids),
            "jwks_url": "http://127.0.0.1:9/jwks",
        },
        "test",
    )
    token = jwt.encode({"x": 1}, rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256", {"kid": "k"})
    assert refused(dead, token, jwks_fetch=JwksCache()).startswith("The platform's key set could not be fetched")


@pytest.mark.parametrize(
    ("body", "sentence"),
    [
        (b'{"keys": []}' + b" " * lti.MAX_JWKS_BYTES, "The platform's key set is larger than the tool accepts."),
        (b"<html>", "The platform's key set is not a JSON Web Key Set."),
        (b'{"keys": {}}', "The platform's key set is not a JSON Web Key Set."),
    ],
)
def test_bad_key_sets_are_refused(sim, reg, body, sentence):
    sim.jwks_body = body
    try:
        assert refused(reg, sim.id_token("ada", nonce="n")) == sentence
    finally:
        sim.jwks_body = None


def test_key_set_entries_of_other_kinds_are_ignored(sim, reg):
    kid, key = sim.keys[-1]
    good = sim.jwks()["keys"]
    sim.jwks_body = json.dumps(
        {
            "keys": [
                {**good[-1], "use": "enc"},
                {"kty": "oct", "kid": kid, "k": "c2VjcmV0"},
                {**good[-1], "alg": "RS512"},
            ]
        }
    ).encode()
    try:
        assert refused(reg, sim.id_token("ada", nonce="n")) == (
            "The id_token is signed with a key the platform's key set does not hold."
        )
    finally:
        sim.jwks_body = None


# -- roles ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("roles", "role"),
    [
        ([MEMBERSHIP + "#Learner"], "student"),
        ([MEMBERSHIP + "#Instructor"], "instructor"),
        ([MEMBERSHIP + "#Instructor", MEMBERSHIP + "/Instructor#TeachingAssistant"], "ta"),
        ([MEMBERSHIP + "/Instructor#TeachingAssistant"], "ta"),
        ([MEMBERSHIP + "/Instructor#Grader", MEMBERSHIP + "#Instructor"], "ta"),
        ([MEMBERSHIP + "/Instructor#PrimaryInstructor"], "instructor"),
        ([MEMBERSHIP + "#Administrator"], "instructor"),
        ([MEMBERSHIP + "#ContentDeveloper", MEMBERSHIP + "#Learner"], "instructor"),
        (["Instructor"], "instructor"),
        (["Learner"], "student"),
        (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor"], "student"),
        (["http://purl.imsglobal.org/vocab/lis/v2/system/person#Administrator", MEMBERSHIP + "#Learner"], "student"),
        ([MEMBERSHIP + "#Mentor"], "student"),
        ([], "student"),
        (["http://example.com/custom#Boss"], "student"),
    ],
)
def test_roles_map_to_student_instructor_or_ta(roles, role):
    assert map_role(roles) == role


def test_launch_carries_the_mapped_role(sim, reg):
    assert launch(reg, sim.id_token("alan", nonce="n")).role == "ta"
    assert launch(reg, sim.id_token("grace", nonce="n")).role == "instructor"


# -- deep linking --------------------------------------------------------------------------------------------------
def test_deep_link_response_verifies_with_the_tool_jwks_and_carries_the_item(sim, reg, tool_key):
    token = sim.id_token("grace", nonce="n", message_type="LtiDeepLinkingRequest")
    request = launch(reg, token)
    assert request.message_type == "LtiDeepLinkingRequest" and request.resource_link_id == ""
    assert request.deep_link_return_url == sim.base_url + "/deep_link_return"
    assert request.deep_link_data == "platform-opaque-data"
    answer = deep_link_response(
        reg,
        tool_key,
        request,
        title="G14 attention lab",
        url=TOOL + "/lti/launch",
        score_maximum=42.0,
        resource_id="g14",
    )
    header = jwt.get_unverified_header(answer)
    assert header["alg"] == "RS256" and header["kid"] == tool_key.kid
    (public,) = [k for k in tool_key.jwks()["keys"] if k["kid"] == header["kid"]]
    claims = jwt.decode(answer, jwt.PyJWK(public), algorithms=["RS256"], audience=sim.issuer, issuer="grader-tool")
    dl = "https://purl.imsglobal.org/spec/lti-dl/claim/"
    assert claims["https://purl.imsglobal.org/spec/lti/claim/message_type"] == "LtiDeepLinkingResponse"
    assert claims["https://purl.imsglobal.org/spec/lti/claim/version"] == "1.3.0"
    assert claims["https://purl.imsglobal.org/spec/lti/claim/deployment_id"] == "deployment-1"
    assert claims[dl + "data"] == "platform-opaque-data"
    assert claims[dl + "content_items"] == [
        {
            "type": "ltiResourceLink",
            "title": "G14 attention lab",
            "url": TOOL + "/lti/launch",
            "lineItem": {"scoreMaximum": 42.0, "label": "G14 attention lab", "resourceId": "g14"},
        }
    ]
    assert claims["exp"] > claims["iat"] and claims["nonce"]
    with pytest.raises(ValueError):
        deep_link_response(reg, tool_key, launch(reg, sim.id_token("grace", nonce="n")), title="t", url="u")


def test_deep_linking_request_without_return_url_is_refused(sim, reg):
    claims = sim.claims(sim.users["grace"], nonce="n", message_type="LtiDeepLinkingRequest")
    claims["https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"] = {"accept_types": ["ltiResourceLink"]}
    assert refused(reg, sim.sign(claims)) == "The deep linking request has no deep_link_return_url."


# -- AGS scores ----------------------------------------------------------------------------------------------------
@pytest.fixture
def ags(sim, reg, tool_key):
    sleeps: list[float] = []
    client = AgsClient(reg, tool_key, max_attempts=3, base_delay=0.5, sleep=sleeps.append)
    client.sleeps = sleeps
    with sim._lock:
        sim.scores.clear()
        sim._scripted.clear()
    yield client
    client.close()


def test_score_post_reaches_the_gradebook_with_one_cached_token(sim, ags):
    before = len(sim.token_requests)
    first = ags.post_score(sim.lineitem_url(), "sub-ada", 7.5, 10.0, "2 checks failed", "2026-12-05T12:00:00.000+00:00")
    second = ags.post_score(sim.lineitem_url(), "sub-grace", 10.0, 10.0, "")
    assert first.ok and first.status == 200 and first.attempts == 1 and not ags.sleeps
    assert second.ok
    assert ags.token_requests == 1 and len(sim.token_requests) == before + 1
    request = sim.token_requests[-1]
    assert request["scope"].split() == [
        "https://purl.imsglobal.org/spec/lti-ags/scope/score",
        "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
    ]
    posted = [s.body for s in sim.scores]
    assert posted[0] == {
        "userId": "sub-ada",
        "scoreGiven": 7.5,
        "scoreMaximum": 10.0,
        "comment": "2 checks failed",
        "activityProgress": "Completed",
        "gradingProgress": "FullyGraded",
        "timestamp": "2026-12-05T12:00:00.000+00:00",
    }
    assert "comment" not in posted[1] and posted[1]["timestamp"].endswith("+00:00")
    assert {s.content_type for s in sim.scores} == {"application/vnd.ims.lis.v1.score+json"}


def test_429_with_retry_after_is_honoured_then_the_score_goes_through(sim, ags):
    sim.fail_next_scores((429, {"Retry-After": "3"}), (503, {}))
    result = ags.post_score(sim.lineitem_url(), "sub-ada", 5.0, 10.0, "ok")
    assert result.ok and result.attempts == 3 and result.status == 200
    assert ags.sleeps == [3.0, 1.0]  # Retry-After, then base_delay * 2
    assert [s.body["scoreGiven"] for s in sim.scores] == [5.0]


def test_repeated_500_gives_up_without_raising(sim, ags):
    sim.fail_next_scores(*[(500, {})] * 5)
    result = ags.post_score(sim.lineitem_url(), "sub-ada", 5.0, 10.0, "")
    assert not result.ok and result.status == 500 and result.attempts == 3
    assert result.detail == "The platform answered the score post with HTTP 500. Gave up after 3 attempts."
    assert ags.sleeps == [0.5, 1.0] and sim.scores == []
    sim.fail_next_scores()  # leave no script behind
    with sim._lock:
        sim._scripted.clear()


def test_client_error_is_not_retried(sim, ags):
    result = ags.post_score(sim.lineitem_url("404"), "sub-ada", 5.0, 10.0, "")
    assert (result.ok, result.status, result.attempts) == (False, 404, 1)
    assert result.detail == "The platform refused the score post with HTTP 404."


def test_expired_access_token_is_fetched_again(sim, ags):
    assert ags.post_score(sim.lineitem_url(), "sub-ada", 1.0, 10.0, "").ok
    with sim._lock:
        sim.access_tokens.clear()  # the platform forgets the token
    result = ags.post_score(sim.lineitem_url(), "sub-ada", 2.0, 10.0, "")
    assert result.ok and result.attempts == 2 and ags.token_requests == 2


def test_token_is_refetched_after_its_lifetime(sim, reg, tool_key):
    clock = [0.0]
    client = AgsClient(reg, tool_key, clock=lambda: clock[0], sleep=lambda s: None)
    assert client.post_score(sim.lineitem_url(), "sub-ada", 1.0, 10.0, "").ok
    clock[0] = 3000.0
    assert client.post_score(sim.lineitem_url(), "sub-ada", 1.0, 10.0, "").ok
    assert client.token_requests == 1
    clock[0] = 3600.0  # expires_in 3600, renewed 30 s early
    assert client.post_score(sim.lineitem_url(), "sub-ada", 1.0, 10.0, "").ok
    assert client.token_requests == 2


def test_timeouts_are_retried_then_reported(reg, tool_key):
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        raise httpx.ReadTimeout("slow", request=request)

    sleeps: list[float] = []
    client = AgsClient(
        reg, tool_key, http=httpx.Client(transport=httpx.MockTransport(handler)), max_attempts=4, sleep=sleeps.append
    )
    result = client.post_score("https://lms.example.edu/lineitems/1?type_id=3", "u", 1.0, 2.0, "")
    assert (result.ok, result.status, result.attempts) == (False, None, 4)
    assert result.detail == "The platform did not answer in time. Gave up after 4 attempts."
    assert sleeps == [1.0, 2.0, 4.0] and calls == ["/token"] * 4


def test_token_endpoint_refusal_is_reported(reg, tool_key):
    client = AgsClient(
        reg,
        tool_key,
        http=httpx.Client(
            transport=httpx.MockTransport(lambda r: httpx.Response(400, json={"error": "invalid_client"}))
        ),
    )
    result = client.post_score("https://lms.example.edu/lineitems/1", "u", 1.0, 2.0, "")
    assert (result.ok, result.status, result.attempts) == (False, 400, 1)
    assert result.detail == "The platform refused the access token request with HTTP 400."


def test_ensure_lineitem_finds_the_resource_links_item_or_creates_one(sim, ags):
    url, result = ags.ensure_lineitem(
        sim.base_url + "/lineitems", label="G14 lab", score_maximum=86.0, resource_link_id="link-1"
    )
    assert url == sim.lineitem_url("1") and result.ok and result.detail == "The line item exists."
    url, result = ags.ensure_lineitem(
        sim.base_url + "/lineitems",
        label="G14 retake",
        score_maximum=86.0,
        resource_link_id="link-2",
        resource_id="g14",
    )
    assert result.ok and result.status == 201 and result.detail == "The line item was created."
    created = sim.lineitems[url.rsplit("/", 1)[-1]]
    assert created == {
        "id": url,
        "label": "G14 retake",
        "scoreMaximum": 86.0,
        "resourceLinkId": "link-2",
        "resourceId": "g14",
    }
    again, _ = ags.ensure_lineitem(sim.base_url + "/lineitems", label="x", score_maximum=1.0, resource_link_id="link-2")
    assert again == url
    assert ags.post_score(url, "sub-ada", 80.0, 86.0, "").ok
    assert sim.scores[-1].lineitem_id == url.rsplit("/", 1)[-1]


def test_ensure_lineitem_reports_a_failure(sim, ags):
    sim.fail_next_scores()  # (scripted failures are for score posts only)
    url, result = ags.ensure_lineitem(sim.base_url + "/nowhere", label="x", score_maximum=1.0)
    assert url is None and not result.ok and result.status == 404 and result.attempts == 1


def test_an_oversized_answer_is_not_read_whole(reg, tool_key):
    read = []

    def stream():
        for _ in range(100):
            read.append(1)
            yield b"x" * 65536

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=stream())

    client = AgsClient(reg, tool_key, http=httpx.Client(transport=httpx.MockTransport(handler)))
    result = client.post_score("https://lms.example.edu/lineitems/1", "u", 1.0, 2.0, "")
    assert (result.ok, result.status, result.attempts) == (False, 200, 1)
    assert result.detail == "The platform's answer is larger than the tool accepts."
    assert len(read) <= 5  # 256 KiB read, not 6.5 MB


def test_scores_url_keeps_the_line_item_query():
    assert _scores_url("https://lms.example.edu/mod/lti/services.php/2/lineitems/7/lineitem?type_id=3") == (
        "https://lms.example.edu/mod/lti/services.php/2/lineitems/7/lineitem/scores?type_id=3"
    )
    assert _scores_url("https://lms.example.edu/lineitems/7/") == "https://lms.example.edu/lineitems/7/scores"
    assert _with_query("https://lms.example.edu/lineitems?type_id=3", {"resource_link_id": "a b"}) == (
        "https://lms.example.edu/lineitems?type_id=3&resource_link_id=a+b"
    )
