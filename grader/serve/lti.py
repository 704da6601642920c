"""The tool side of LTI 1.3: login initiation, launch validation, deep linking and grades back (AGS).

What this module does not do: store anything. The web application keeps the state and nonce of each
login (``login_redirect`` is given them, ``validate_launch`` asks ``nonce_unused``), the tool's key
(``ToolKey.to_pem``) and the record of each score pushed (``PushResult``).

The JOSE parts (signatures, JWK sets) are PyJWT's and the RSA keys are ``cryptography``'s; HTTP is
``httpx``'s. Every refusal is a `LaunchError` whose text is one sentence naming what is wrong,
never echoing the token's contents.

References: IMS LTI 1.3 core (message claims), IMS Security Framework 1.0 (OIDC third-party login,
client-credentials grant with a JWT client assertion, RFC 7523) and LTI AGS 2.0 (score service).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard
from urllib.parse import urlencode, urlsplit

import httpx
import jwt

from grader.serve.ags import AgsClient, PushResult
from grader.serve.lti_registration import (
    CLAIM_AGS_ENDPOINT,
    CLAIM_CONTEXT,
    CLAIM_DEPLOYMENT_ID,
    CLAIM_DL_CONTENT_ITEMS,
    CLAIM_DL_DATA,
    CLAIM_DL_SETTINGS,
    CLAIM_MESSAGE_TYPE,
    CLAIM_RESOURCE_LINK,
    CLAIM_ROLES,
    CLAIM_TARGET_LINK_URI,
    CLAIM_VERSION,
    MEMBERSHIP,
    MESSAGE_TYPES,
    Platform,
    ToolKey,
    url_problem,
)

__all__ = [
    "AgsClient",
    "JwksCache",
    "Launch",
    "LaunchError",
    "Platform",
    "PushResult",
    "ToolKey",
    "deep_link_response",
    "fetch_jwks",
    "login_redirect",
    "map_role",
    "validate_launch",
]

LEEWAY = 60.0
"""Seconds of clock skew allowed on ``exp`` and ``iat`` (the platform's clock and ours)."""
MAX_TOKEN_CHARS = 64 * 1024
"""An id_token longer than this is refused before it is parsed."""
MAX_JWKS_BYTES = 256 * 1024
"""A platform's key set larger than this is refused."""
MAX_HINT_CHARS = 2048
"""login_hint, lti_message_hint and other login parameters longer than this are refused."""


class LaunchError(Exception):
    """A login or launch the tool refuses; ``str()`` is one sentence that may be shown to the user."""


# -- OIDC third-party initiated login --------------------------------------------------------------------
def login_redirect(platform: Platform, params: Mapping[str, str], redirect_uri: str, state: str, nonce: str) -> str:
    """Answer the platform's login initiation: the URL of its authorization endpoint to redirect to.

    Parameters
    ----------
    platform : Platform
        The registration whose ``issuer`` the request names.
    params : Mapping of str to str
        The login initiation's parameters (query or form): ``iss``, ``login_hint`` and
        ``target_link_uri`` required; ``lti_message_hint``, ``client_id`` and ``lti_deployment_id``
        checked when present.
    redirect_uri : str
        The tool's launch URL (where the platform posts the id_token).
    state, nonce : str
        Fresh random values the caller stores (state in the browser's cookie, nonce server-side).

    Returns
    -------
    str
        The authorization request URL (response_type id_token, form_post, prompt none).

    Raises
    ------
    LaunchError
        A missing or mismatched parameter.
    """
    for name, value in params.items():
        if not isinstance(value, str) or len(value) > MAX_HINT_CHARS:
            raise LaunchError(f"The login parameter {_safe_name(name)} is too long or not text.")
    if params.get("iss") != platform.issuer:
        raise LaunchError("The login request names an issuer this tool is not registered with.")
    if not params.get("login_hint"):
        raise LaunchError("The login request has no login_hint.")
    target = params.get("target_link_uri", "")
    if not target or _origin(target) != _origin(redirect_uri):
        raise LaunchError("The login request's target_link_uri is not a URL of this tool.")
    if "client_id" in params and params["client_id"] != platform.client_id:
        raise LaunchError("The login request names a client_id this tool is not registered with.")
    if "lti_deployment_id" in params and params["lti_deployment_id"] not in platform.deployment_ids:
        raise LaunchError("The login request names a deployment this tool is not registered for.")
    query = {
        "scope": "openid",
        "response_type": "id_token",
        "response_mode": "form_post",
        "prompt": "none",
        "client_id": platform.client_id,
        "redirect_uri": redirect_uri,
        "login_hint": params["login_hint"],
        "state": state,
        "nonce": nonce,
    }
    if params.get("lti_message_hint"):
        query["lti_message_hint"] = params["lti_message_hint"]
    separator = "&" if urlsplit(platform.auth_login_url).query else "?"
    return platform.auth_login_url + separator + urlencode(query)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return ("", "", None)
    return (parts.scheme, (parts.hostname or "").lower(), port)


def _safe_name(name: object) -> str:
    text = str(name)
    return repr(text) if len(text) <= 40 and text.isascii() and text.isprintable() else "(unnamed)"


# -- The platform's keys ---------------------------------------------------------------------------------
def fetch_jwks(url: str, *, timeout: float = 5.0, max_bytes: int = MAX_JWKS_BYTES) -> dict[str, Any]:
    """GET a JSON Web Key Set, bounded in time and size.

    Parameters
    ----------
    url : str
        The platform's ``jwks_url`` (redirects are not followed).
    timeout : float
        Seconds for each of connecting and reading.
    max_bytes : int
        The largest set accepted.

    Returns
    -------
    dict
        The set: ``{"keys": [...]}``.

    Raises
    ------
    LaunchError
        The set could not be fetched, is larger than ``max_bytes`` or is not a JSON object.
    """
    try:
        with httpx.stream("GET", url, timeout=timeout, follow_redirects=False) as response:
            if response.status_code != 200:
                raise LaunchError(f"The platform's key set could not be fetched (HTTP {response.status_code}).")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise LaunchError("The platform's key set is larger than the tool accepts.")
    except httpx.HTTPError as exc:
        raise LaunchError(f"The platform's key set could not be fetched ({type(exc).__name__}).") from None
    try:
        data = json.loads(bytes(body))
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise LaunchError("The platform's key set is not a JSON Web Key Set.")
    return data


class JwksCache:
    """Platforms' public keys by URL and ``kid``, fetched once and again when a new ``kid`` appears.

    Parameters
    ----------
    fetch : callable, optional
        ``fetch(url) -> dict`` returning a JWK set; `fetch_jwks` by default.
    max_age : float
        Seconds a fetched set is used before it is fetched again.
    min_refresh : float
        At least this many seconds between two fetches of one URL prompted by an unknown ``kid``
        (a key rotation), so that forged tokens with made-up kids cannot make the tool hammer the platform.
    clock : callable
        Monotonic seconds.
    """

    def __init__(
        self,
        fetch: Callable[[str], Mapping[str, Any]] = fetch_jwks,
        *,
        max_age: float = 3600.0,
        min_refresh: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._max_age = max_age
        self._min_refresh = min_refresh
        self._clock = clock
        self._sets: dict[str, tuple[float, dict[str, jwt.PyJWK]]] = {}
        self._lock = threading.Lock()
        self.fetches = 0
        """How many times a set was fetched (for tests and logs)."""

    def key(self, url: str, kid: str) -> jwt.PyJWK | None:
        """The RS256 key ``kid`` of the set at ``url``, or None when the set (even refreshed) lacks it.

        Parameters
        ----------
        url : str
            The platform's ``jwks_url``.
        kid : str
            The key id an id_token's header names.

        A set older than ``max_age`` that cannot be fetched again still serves the keys it holds, so an
        outage of the platform's key endpoint does not stop launches signed with a known key.

        Raises
        ------
        LaunchError
            The set could not be fetched, and no fetched set holds ``kid``.
        """
        with self._lock:
            now = self._clock()
            cached = self._sets.get(url)
            if cached is not None and now - cached[0] <= self._max_age:
                if kid in cached[1]:
                    return cached[1][kid]
                if now - cached[0] < self._min_refresh:
                    return None
            try:
                keys = self._load(url)
            except LaunchError:
                if cached is not None and kid in cached[1]:
                    return cached[1][kid]
                raise
            self._sets[url] = (self._clock(), keys)
            return keys.get(kid)

    def _load(self, url: str) -> dict[str, jwt.PyJWK]:
        self.fetches += 1
        data = self._fetch(url)
        keys: dict[str, jwt.PyJWK] = {}
        entries = data.get("keys") if isinstance(data, Mapping) else None
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or entry.get("kty") != "RSA" or not isinstance(entry.get("kid"), str):
                continue
            if entry.get("use", "sig") != "sig" or entry.get("alg", "RS256") != "RS256":
                continue
            try:
                keys[entry["kid"]] = jwt.PyJWK(entry, algorithm="RS256")
            except jwt.PyJWTError:
                continue
        return keys


_DEFAULT_JWKS = JwksCache()


# -- The launch ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Launch:
    """A validated LTI launch: who, in which role, from where, and where grades go.

    Attributes
    ----------
    subject : str
        The platform's stable user id (``sub``); AGS scores are posted for it.
    name, email : str
        As the platform sent them ('' when it did not).
    role : {'student', 'instructor', 'ta'}
        See `map_role`.
    deployment_id, context_id, resource_link_id : str
        Where the launch came from (``resource_link_id`` is '' for deep linking).
    message_type : {'LtiResourceLinkRequest', 'LtiDeepLinkingRequest'}
    lineitem_url, lineitems_url : str or None
        The AGS endpoints, when the platform grants them.
    deep_link_return_url : str or None
        Where a deep-linking response is posted.
    deep_link_data : str or None
        The opaque ``data`` to return with it.
    ags_scopes : tuple of str
        The AGS scopes the platform granted.
    roles : tuple of str
        The role URIs as sent.
    context_title, resource_link_title, target_link_uri : str
        For pages and routing ('' when absent).
    """

    subject: str
    name: str
    email: str
    role: str
    deployment_id: str
    context_id: str
    resource_link_id: str
    message_type: str
    lineitem_url: str | None
    lineitems_url: str | None
    deep_link_return_url: str | None
    deep_link_data: str | None
    ags_scopes: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    context_title: str = ""
    resource_link_title: str = ""
    target_link_uri: str = ""


_INSTRUCTOR_PRINCIPALS = {"Instructor", "Administrator", "ContentDeveloper"}
_TA_SUB_ROLES = {"TeachingAssistant", "TeachingAssistantSection", "TeachingAssistantOffering", "Grader"}


def map_role(roles: tuple[str, ...] | list[str]) -> str:
    """The tool's role from the launch's role URIs: 'ta', 'instructor' or 'student'.

    Context (membership) roles decide; institution and system roles are ignored, since an institution's
    instructor is not thereby an instructor of this course. A teaching-assistant or grader sub-role of
    Instructor gives 'ta' even beside the principal Instructor role (platforms send both, as LTI's best
    practice asks); Instructor, Administrator or ContentDeveloper otherwise give 'instructor'; anything
    else, Learner and unknown roles included, gives 'student'. The simple names LTI allows for context
    roles (``Instructor``, ``Learner``) count like their URIs.

    Parameters
    ----------
    roles : sequence of str
        The ``https://purl.imsglobal.org/spec/lti/claim/roles`` claim.

    Returns
    -------
    {'ta', 'instructor', 'student'}
    """
    principals: set[str] = set()
    subs: set[str] = set()
    for uri in roles:
        if not isinstance(uri, str):
            continue
        if uri.startswith(MEMBERSHIP + "#"):
            principals.add(uri[len(MEMBERSHIP) + 1 :])
        elif uri.startswith(MEMBERSHIP + "/"):
            principal, _, sub = uri[len(MEMBERSHIP) + 1 :].partition("#")
            if principal == "Instructor" and sub in _TA_SUB_ROLES:
                subs.add("ta")
            elif principal in _INSTRUCTOR_PRINCIPALS:
                principals.add(principal)
        elif "/" not in uri and "#" not in uri:
            principals.add(uri)
    if "ta" in subs or "TeachingAssistant" in principals:
        return "ta"
    if principals & _INSTRUCTOR_PRINCIPALS:
        return "instructor"
    return "student"


def validate_launch(
    platform: Platform,
    id_token: str,
    *,
    nonce_unused: Callable[[str], bool],
    now: float | None = None,
    jwks_fetch: JwksCache | Callable[[str], Mapping[str, Any]] | None = None,
) -> Launch:
    """Validate a launch's id_token and read it.

    Checks, in order: the token's form and size; ``alg`` is RS256 (``none`` and HS256 are refused
    before any key is looked at); the signature against the platform's key ``kid`` (the key set is
    fetched again once when a new kid appears: key rotation); ``iss``; ``aud`` (a string or a list
    holding the client id; with several audiences ``azp`` must be the client id); ``exp`` and ``iat``
    within `LEEWAY` seconds; the LTI version 1.3.0; the message type; the deployment id; the claims
    the message type needs; last, the nonce (so a bad token never uses up a good nonce).

    Parameters
    ----------
    platform : Platform
    id_token : str
        The ``id_token`` form field the platform posted.
    nonce_unused : callable
        ``nonce_unused(nonce)``: True when the tool issued ``nonce`` and it was not used yet (the
        caller marks it used); False refuses the launch as a replay.
    now : float, optional
        Unix time (for tests); the clock by default.
    jwks_fetch : JwksCache or callable, optional
        Where keys come from: a `JwksCache`, or ``fetch(url) -> dict`` used through a fresh cache;
        a process-wide cache over `fetch_jwks` by default.

    Returns
    -------
    Launch

    Raises
    ------
    LaunchError
        One sentence saying what is wrong; the token's contents are not echoed.
    """
    cache = _DEFAULT_JWKS if jwks_fetch is None else jwks_fetch
    if not isinstance(cache, JwksCache):
        cache = JwksCache(cache)
    claims = _verified_claims(platform, id_token, cache, time.time() if now is None else now)
    launch = _read_launch(platform, claims)
    nonce = claims.get("nonce")
    if not isinstance(nonce, str) or not nonce or len(nonce) > MAX_HINT_CHARS:
        raise LaunchError("The id_token has no nonce.")
    if not nonce_unused(nonce):
        raise LaunchError("The id_token's nonce was already used or never issued (a replayed launch).")
    return launch


_JWT_REFUSALS: tuple[tuple[type[Exception], str], ...] = (
    (jwt.InvalidSignatureError, "The id_token's signature does not match the platform's key."),
    (jwt.InvalidAudienceError, "The id_token is addressed to another tool (its audience is not this client id)."),
    (jwt.InvalidIssuerError, "The id_token comes from an issuer this tool is not registered with."),
    (jwt.MissingRequiredClaimError, "The id_token lacks a required claim (iss, aud, exp, iat, sub or nonce)."),
    (jwt.InvalidAlgorithmError, "The id_token is signed with an algorithm other than RS256."),
)


def _verified_claims(platform: Platform, token: str, cache: JwksCache, now: float) -> dict[str, Any]:
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
        raise LaunchError("The launch carries no id_token, or one too long to be a launch.")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise LaunchError("The id_token is not a well-formed signed JWT.") from None
    if header.get("alg") != "RS256":
        raise LaunchError("The id_token is signed with an algorithm other than RS256.")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise LaunchError("The id_token's header names no key (kid).")
    key = cache.key(platform.jwks_url, kid)
    if key is None:
        raise LaunchError("The id_token is signed with a key the platform's key set does not hold.")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=["RS256"],
            audience=platform.client_id,
            issuer=platform.issuer,
            options={
                "require": ["iss", "aud", "exp", "iat", "sub", "nonce"],
                "verify_exp": False,
                "verify_iat": False,
                "verify_nbf": False,
            },
        )
    except jwt.PyJWTError as exc:
        for kind, sentence in _JWT_REFUSALS:
            if isinstance(exc, kind):
                raise LaunchError(sentence) from None
        raise LaunchError("The id_token could not be verified.") from None
    exp, iat = claims.get("exp"), claims.get("iat")
    if not _is_number(exp) or not _is_number(iat):
        raise LaunchError("The id_token's exp or iat is not a number.")
    if exp < now - LEEWAY:
        raise LaunchError("The id_token has expired.")
    if iat > now + LEEWAY:
        raise LaunchError("The id_token is dated in the future (iat).")
    aud = claims.get("aud")
    azp = claims.get("azp")
    if isinstance(aud, list) and len(aud) > 1 and azp is None:
        raise LaunchError("The id_token names several audiences but no authorized party (azp).")
    if azp is not None and azp != platform.client_id:
        raise LaunchError("The id_token's authorized party (azp) is another tool.")
    return claims


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _read_launch(platform: Platform, claims: Mapping[str, Any]) -> Launch:
    if claims.get(CLAIM_VERSION) != "1.3.0":
        raise LaunchError("The launch is not an LTI 1.3.0 message.")
    message_type = claims.get(CLAIM_MESSAGE_TYPE)
    if message_type not in MESSAGE_TYPES:
        raise LaunchError("The launch's message type is not one this tool handles.")
    deployment_id = claims.get(CLAIM_DEPLOYMENT_ID)
    if not isinstance(deployment_id, str) or deployment_id not in platform.deployment_ids:
        raise LaunchError("The launch comes from a deployment this tool is not registered for.")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > 255:
        raise LaunchError("The launch names no user, or one longer than OpenID Connect allows (sub).")
    raw_roles = claims.get(CLAIM_ROLES, [])
    if not isinstance(raw_roles, list) or not all(isinstance(r, str) for r in raw_roles):
        raise LaunchError("The launch's roles claim is not a list of role URIs.")
    context = _object(claims, CLAIM_CONTEXT)
    link = _object(claims, CLAIM_RESOURCE_LINK)
    ags = _object(claims, CLAIM_AGS_ENDPOINT)
    settings = _object(claims, CLAIM_DL_SETTINGS)
    resource_link_id = _text(link.get("id"))
    if message_type == "LtiResourceLinkRequest" and not resource_link_id:
        raise LaunchError("The resource link launch names no resource link (resource_link.id).")
    return_url = _url_or_none(settings.get("deep_link_return_url"))
    if message_type == "LtiDeepLinkingRequest" and return_url is None:
        raise LaunchError("The deep linking request has no deep_link_return_url.")
    scopes = ags.get("scope", [])
    return Launch(
        subject=subject,
        name=_text(claims.get("name")),
        email=_text(claims.get("email")),
        role=map_role(raw_roles),
        deployment_id=deployment_id,
        context_id=_text(context.get("id")),
        resource_link_id=resource_link_id,
        message_type=message_type,
        lineitem_url=_url_or_none(ags.get("lineitem")),
        lineitems_url=_url_or_none(ags.get("lineitems")),
        deep_link_return_url=return_url if message_type == "LtiDeepLinkingRequest" else None,
        deep_link_data=_text(settings.get("data"), MAX_TOKEN_CHARS) or None
        if message_type == "LtiDeepLinkingRequest"
        else None,
        ags_scopes=tuple(s for s in scopes if isinstance(s, str)) if isinstance(scopes, list) else (),
        roles=tuple(raw_roles),
        context_title=_text(context.get("title")),
        resource_link_title=_text(link.get("title")),
        target_link_uri=_text(claims.get(CLAIM_TARGET_LINK_URI)),
    )


def _object(claims: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = claims.get(name, {})
    if not isinstance(value, dict):
        raise LaunchError(f"The launch's claim {name.rsplit('/', 1)[-1]} is not an object.")
    return value


def _text(value: object, limit: int = 1024) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _url_or_none(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if url_problem(value):
        raise LaunchError("The launch names a service URL that is neither https nor loopback.")
    return value


# -- Deep linking ----------------------------------------------------------------------------------------
def deep_link_response(
    platform: Platform,
    tool_key: ToolKey,
    launch: Launch,
    *,
    title: str,
    url: str,
    score_maximum: float = 100.0,
    resource_id: str = "",
    tag: str = "",
    now: float | None = None,
) -> str:
    """The signed ``LtiDeepLinkingResponse`` adding one graded assignment to the course.

    Parameters
    ----------
    platform : Platform
    tool_key : ToolKey
    launch : Launch
        A validated ``LtiDeepLinkingRequest``.
    title : str
        The assignment's title in the LMS.
    url : str
        The resource link's launch URL (the tool's).
    score_maximum : float
        The line item's maximum (the assignment's points).
    resource_id, tag : str
        The line item's ``resourceId`` and ``tag`` (e.g. the assignment's id), when given.
    now : float, optional
        Unix time (for tests).

    Returns
    -------
    str
        The JWT to post as the ``JWT`` form field to ``launch.deep_link_return_url``.

    Raises
    ------
    ValueError
        ``launch`` is not a deep-linking request.
    """
    if launch.message_type != "LtiDeepLinkingRequest":
        raise ValueError("a deep linking response answers a deep linking request")
    issued = int(time.time() if now is None else now)
    line_item: dict[str, Any] = {"scoreMaximum": score_maximum, "label": title}
    if resource_id:
        line_item["resourceId"] = resource_id
    if tag:
        line_item["tag"] = tag
    claims: dict[str, Any] = {
        "iss": platform.client_id,
        "aud": platform.issuer,
        "iat": issued,
        "exp": issued + 600,
        "nonce": secrets.token_urlsafe(16),
        CLAIM_MESSAGE_TYPE: "LtiDeepLinkingResponse",
        CLAIM_VERSION: "1.3.0",
        CLAIM_DEPLOYMENT_ID: launch.deployment_id,
        CLAIM_DL_CONTENT_ITEMS: [{"type": "ltiResourceLink", "title": title, "url": url, "lineItem": line_item}],
    }
    if launch.deep_link_data is not None:
        claims[CLAIM_DL_DATA] = launch.deep_link_data
    return tool_key.sign(claims)
