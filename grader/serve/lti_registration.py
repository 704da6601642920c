"""The registration of an LTI 1.3 tool at a platform: the platform's URLs and ids, the tool's own key.

Shared by the launch side (`grader.serve.lti`) and the grades side (`grader.serve.ags`); both
re-export what they need, so callers import from `grader.serve.lti`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from grader.errors import ConfigError

__all__ = ["Platform", "ToolKey", "url_problem"]

# -- The claim names, spelled as the specifications spell them ------------------------------------------
LTI = "https://purl.imsglobal.org/spec/lti/claim/"
CLAIM_MESSAGE_TYPE = LTI + "message_type"
CLAIM_VERSION = LTI + "version"
CLAIM_DEPLOYMENT_ID = LTI + "deployment_id"
CLAIM_TARGET_LINK_URI = LTI + "target_link_uri"
CLAIM_RESOURCE_LINK = LTI + "resource_link"
CLAIM_ROLES = LTI + "roles"
CLAIM_CONTEXT = LTI + "context"
CLAIM_AGS_ENDPOINT = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
CLAIM_DL_SETTINGS = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
CLAIM_DL_CONTENT_ITEMS = "https://purl.imsglobal.org/spec/lti-dl/claim/content_items"
CLAIM_DL_DATA = "https://purl.imsglobal.org/spec/lti-dl/claim/data"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCORE_MEDIA_TYPE = "application/vnd.ims.lis.v1.score+json"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
MESSAGE_TYPES = ("LtiResourceLinkRequest", "LtiDeepLinkingRequest")

MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
ROLE_INSTRUCTOR = MEMBERSHIP + "#Instructor"
ROLE_LEARNER = MEMBERSHIP + "#Learner"
ROLE_TEACHING_ASSISTANT = MEMBERSHIP + "/Instructor#TeachingAssistant"


# -- The platform's registration ------------------------------------------------------------------------
@dataclass(frozen=True)
class Platform:
    """One LMS registration: what the platform's administrator gives the tool.

    Parameters
    ----------
    issuer : str
        The platform's ``iss`` (e.g. ``https://canvas.instructure.com``).
    client_id : str
        The tool's client id at that platform (the ``aud`` of its id_tokens).
    deployment_ids : tuple of str
        The deployments of the tool the platform may launch from.
    auth_login_url : str
        The platform's OIDC authorization endpoint (where ``login_redirect`` sends the browser).
    auth_token_url : str
        The platform's OAuth 2 token endpoint (for AGS access tokens).
    jwks_url : str
        The platform's public key set.
    """

    issuer: str
    client_id: str
    deployment_ids: tuple[str, ...]
    auth_login_url: str
    auth_token_url: str
    jwks_url: str

    _URL_KEYS = ("auth_login_url", "auth_token_url", "jwks_url")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> Platform:
        """Read a registration from configuration, refusing bad values in one line.

        Parameters
        ----------
        data : Mapping
            The keys ``issuer``, ``client_id``, ``deployment_ids`` (a list of strings, or one string),
            ``auth_login_url``, ``auth_token_url`` and ``jwks_url``; no others.
        source : str
            Where it was read, named in errors: the file, and the key holding the mapping,
            e.g. ``"course.yaml: lti.platforms[0]"``.

        Returns
        -------
        Platform

        Raises
        ------
        grader.errors.ConfigError
            One line naming ``source``, the key and the fix.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: must be a mapping with the keys {', '.join(_PLATFORM_KEYS)}.")
        unknown = sorted(str(k) for k in data if k not in _PLATFORM_KEYS)
        if unknown:
            raise ConfigError(
                f"{source}: unknown key {unknown[0]!r}; the keys of a platform are {', '.join(_PLATFORM_KEYS)}."
            )
        values: dict[str, Any] = {}
        for key in _PLATFORM_KEYS:
            if key not in data:
                raise ConfigError(f"{source}: {key}: missing; give the value from the platform's registration.")
            values[key] = data[key]
        raw_ids = values["deployment_ids"]
        ids = [raw_ids] if isinstance(raw_ids, str) else raw_ids
        if not isinstance(ids, list | tuple) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
            raise ConfigError(
                f"{source}: deployment_ids: must be a non-empty list of deployment id strings (as the platform shows them)."
            )
        values["deployment_ids"] = tuple(ids)
        for key in ("issuer", "client_id"):
            if not isinstance(values[key], str) or not values[key].strip():
                raise ConfigError(
                    f"{source}: {key}: must be a non-empty string, as the platform's registration shows it."
                )
        for key in cls._URL_KEYS:
            problem = url_problem(values[key])
            if problem:
                raise ConfigError(f"{source}: {key}: {problem}")
        return cls(**values)


_PLATFORM_KEYS = ("issuer", "client_id", "deployment_ids", "auth_login_url", "auth_token_url", "jwks_url")


def url_problem(value: object) -> str:
    """Why ``value`` is not a URL the tool may call ('' when it is): https, or http on loopback only."""
    if not isinstance(value, str) or not value:
        return "must be a URL (https://...)."
    parts = urlsplit(value)
    if parts.scheme == "https" and parts.hostname:
        return ""
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return ""
    return "must be an https:// URL (plain http is accepted for 127.0.0.1 and localhost only)."


# -- The tool's own key ----------------------------------------------------------------------------------
class ToolKey:
    """The tool's RSA key: signs AGS client assertions and deep-linking responses.

    Parameters
    ----------
    private_key : cryptography RSAPrivateKey
        The key; use `generate` or `from_pem` rather than the constructor.
    """

    def __init__(self, private_key: rsa.RSAPrivateKey) -> None:
        self._key = private_key
        full = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private_key.public_key()))
        self._public_jwk: dict[str, Any] = {k: full[k] for k in ("kty", "n", "e")}  # RFC 7517: "use", not "key_ops"
        self.kid = _thumbprint(self._public_jwk)
        """The key id: the key's RFC 7638 thumbprint, the same every time the key is loaded."""

    @classmethod
    def generate(cls) -> ToolKey:
        """A new 2048-bit RSA key."""
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def from_pem(cls, pem: bytes) -> ToolKey:
        """Load a key written by `to_pem` (PKCS #8, unencrypted).

        Raises
        ------
        ValueError
            Not a PEM RSA private key.
        """
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError("the tool key must be an RSA private key")
        return cls(key)

    def to_pem(self) -> bytes:
        """The private key as PKCS #8 PEM (store it readable by the server only)."""
        return self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def jwks(self) -> dict[str, Any]:
        """The public key set the tool serves at ``/lti/jwks``: ``{"keys": [{kty, n, e, kid, alg, use}]}``."""
        return {"keys": [{**self._public_jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def sign(self, claims: Mapping[str, Any]) -> str:
        """``claims`` as a compact JWS, RS256, with this key's ``kid`` in the header.

        Parameters
        ----------
        claims : Mapping
            The JWT's claims (JSON-serialisable).

        Returns
        -------
        str
            ``header.payload.signature``, base64url.
        """
        return jwt.encode(dict(claims), self._key, algorithm="RS256", headers={"kid": self.kid})


def _thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638 thumbprint of an RSA JWK (SHA-256 of its required members, sorted, no spaces)."""
    canonical = json.dumps({k: jwk[k] for k in ("e", "kty", "n")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()
