"""The server's course settings: ``serve.yaml`` beside ``course.yaml`` (optional; every key has a default).

::

    public_url: https://grader.example.edu   # how students reach the server (LTI redirect URIs, secure cookies);
                                             # a path (https://grader.example.edu/g14) puts the course under it
    upload_max_kib: 512                      # the largest attention.py / attention.ipynb accepted
    upload_seconds: 60                       # a request's whole body must arrive within this (else 408)
    limits:
      per_window: 5                          # graded submissions per student per window
      window_minutes: 60
      cooldown_seconds: 30                   # between two submissions of one student
      details_for_first: 20                  # visible details only for a student's first K submissions
      waiting: 2                             # a student's submissions queued or being graded at once
    grading:
      submission_seconds: 60                 # CPU budget of one submission (wall-clock backstop 4 times that)
    policy: policy.yaml                      # late penalty from the server's receipt time (grader.term)
    probing:
      min_steps: 3                           # one-hidden-check flips that flag a student for the staff
    invites:
      days: 14                               # a login link of `grader serve invite` works this many days
    rate:
      per_minute: 120                        # requests per signed-in user
      per_address_per_minute: 1200           # requests per address (a lab behind one NAT address shares it)
    lti:
      allow_missing_state_cookie: false      # true: accept a launch whose browser dropped the state cookie (login CSRF risk)
      platforms:
        - {issuer: ..., client_id: ..., deployment_ids: [...], auth_login_url: ..., auth_token_url: ..., jwks_url: ...}

The server's own files (database, uploads, the tool's private key, the session secret) live in
``.grader-serve/`` beside ``course.yaml``, never in the repository.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from grader.errors import ConfigError

__all__ = [
    "SETTINGS_FILE",
    "SETTINGS_SCHEMA",
    "STATE_DIR",
    "INVITE_DAYS",
    "SUBMISSION_SECONDS",
    "UPLOAD_SECONDS",
    "Limits",
    "ServeSettings",
    "load_settings",
]

SETTINGS_FILE = "serve.yaml"
"""The settings file's name, beside ``course.yaml``."""

STATE_DIR = ".grader-serve"
"""The folder beside ``course.yaml`` holding the database, the uploads and the keys (git-ignored)."""

_COUNT = {"type": "integer", "minimum": 0, "maximum": 1_000_000}

SETTINGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "public_url": {
            "type": "string",
            "pattern": "^https?://[^/?#]+(/[A-Za-z0-9._~-]+)*/?$",
            "description": "give the address students use, e.g. https://grader.example.edu or "
            "https://grader.example.edu/g14 (a path of letters, digits, '.', '_', '~', '-')",
        },
        "upload_max_kib": {"type": "integer", "minimum": 1, "maximum": 65536, "description": "give KiB, 1 to 65536"},
        "upload_seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 3600,
            "description": "give seconds, more than 0 and at most 3600",
        },
        "limits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "per_window": {**_COUNT, "description": "give a whole number of submissions (0: no limit)"},
                "window_minutes": {"type": "integer", "minimum": 1, "maximum": 100000, "description": "give minutes"},
                "cooldown_seconds": {**_COUNT, "description": "give seconds (0: none)"},
                "details_for_first": {**_COUNT, "description": "give a whole number (0: details always)"},
                "waiting": {**_COUNT, "description": "give a whole number of submissions (0: no limit)"},
            },
        },
        "grading": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "submission_seconds": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": 3600,
                    "description": "give CPU seconds, more than 0 and at most 3600",
                },
            },
        },
        "policy": {"type": "string", "description": "give the policy.yaml file, relative to course.yaml"},
        "probing": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"min_steps": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "1 to 1000"}},
        },
        "invites": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "days": {"type": "integer", "minimum": 1, "maximum": 366, "description": "give 1 to 366 days"}
            },
        },
        "rate": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "per_minute": {"type": "integer", "minimum": 1, "maximum": 1000000, "description": "1 or more"},
                "per_address_per_minute": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10000000,
                    "description": "1 or more",
                },
            },
        },
        "lti": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "platforms": {"type": "array", "items": {"type": "object"}, "description": "a list"},
                "allow_missing_state_cookie": {"type": "boolean", "description": "give true or false"},
            },
        },
    },
}
"""JSON Schema of ``serve.yaml``; each ``description`` is the fix an error names."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Submission limits, enforced server-side when a file is uploaded.

    Attributes
    ----------
    per_window : int
        Graded submissions a student may make per window (0: no limit).
    window_minutes : int
    cooldown_seconds : int
        Seconds between two submissions of one student.
    details_for_first : int
        The visible checks' details are shown for a student's first K submissions only (0: always).
    waiting : int
        A student's submissions queued or being graded at once (0: no limit; `WAITING` when
        ``serve.yaml`` does not say). One student's burst of
        slow submissions would otherwise hold every worker while the other students wait.
    """

    per_window: int = 0
    window_minutes: int = 60
    cooldown_seconds: int = 0
    details_for_first: int = 0
    waiting: int = 0


WAITING = 2
"""``limits.waiting`` when ``serve.yaml`` does not say (the one limit in force by default)."""

SUBMISSION_SECONDS = 60.0
"""``grading.submission_seconds`` when ``serve.yaml`` does not say: the CPU budget of one submission in the server.

Shorter than ``grade``'s ``--submission-timeout`` (120 s): a submission that hangs every call holds a
server worker until the budget's wall-clock backstop (`grader.execution.calls.WALL_BACKSTOP_FACTOR`
times the budget, 4 minutes here, not 8), while the other students wait for their feedback."""


INVITE_DAYS = 14
"""``invites.days`` when ``serve.yaml`` does not say: how long a login link of ``grader serve invite`` works.

A link is a password sent by mail: one never used (a student who dropped the course, a mail read
by the wrong person months later) should not open an account for the rest of the term."""


UPLOAD_SECONDS = 60.0
"""``upload_seconds`` when ``serve.yaml`` does not say: the time a request's whole body may take to arrive.

A 512 KiB upload needs 70 kbit/s to arrive in time; a client that sends a byte at a time gets 408
and its connection is closed, instead of holding it until the reverse proxy's own timeout."""


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """What ``serve.yaml`` says, with defaults, and where the course and the server's files are."""

    course: Path
    state: Path
    public_url: str = ""
    upload_max_bytes: int = 512 * 1024
    upload_seconds: float = UPLOAD_SECONDS
    limits: Limits = Limits(waiting=WAITING)
    policy: Path | None = None
    probing_min_steps: int = 3
    invite_days: int = INVITE_DAYS
    submission_seconds: float = SUBMISSION_SECONDS
    rate_per_minute: int = 120
    rate_per_address_per_minute: int = 1200
    platforms: tuple[dict[str, Any], ...] = ()
    allow_missing_state_cookie: bool = False
    source: str = ""

    @property
    def prefix(self) -> str:
        """The path of ``public_url`` (``/g14``; "" for none): every page, link, redirect and cookie of the
        course is under it, so several courses share one host name."""
        from urllib.parse import urlsplit

        return urlsplit(self.public_url).path.rstrip("/")

    @property
    def secure(self) -> bool:
        """Whether students reach the server over HTTPS (then cookies are ``Secure``)."""
        return self.public_url.startswith("https://")


def load_settings(course: Path, state: Path | None = None, path: Path | None = None) -> ServeSettings:
    """Read ``serve.yaml`` beside ``course.yaml`` in ``course`` (defaults when absent).

    Parameters
    ----------
    course : pathlib.Path
        The course folder.
    state : pathlib.Path, optional
        The server's own folder (default ``course/.grader-serve``).
    path : pathlib.Path, optional
        The settings file (default ``course/serve.yaml``; ``policy`` stays relative to the course).

    Raises
    ------
    grader.errors.ConfigError
        In one line naming the file, the key and the fix.
    """
    from grader.errors import SpecError
    from grader.readers.yamlfile import parse_yaml

    path = path if path is not None else course / SETTINGS_FILE
    state = state if state is not None else course / STATE_DIR
    if not path.is_file():
        return ServeSettings(course=course, state=state)
    try:
        data = parse_yaml(str(path))
    except SpecError as exc:
        raise ConfigError(f"{exc}; fix the file (plain YAML: no aliases, no tags, each key once)") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: (top level): not a mapping; give keys such as 'limits:' (see docs/serve.md)")
    _validate(data, str(path))
    limits = data.get("limits") or {}
    platforms = tuple((data.get("lti") or {}).get("platforms") or ())
    _check_platforms(platforms, str(path))
    policy = data.get("policy")
    if policy is not None and not (course / policy).is_file():
        raise ConfigError(
            f"{path}: policy: no such file {policy!r}; give the policy.yaml file, relative to course.yaml"
        )
    return ServeSettings(
        course=course,
        state=state,
        public_url=str(data.get("public_url", "")).rstrip("/"),
        upload_max_bytes=int(data.get("upload_max_kib", 512)) * 1024,
        upload_seconds=float(data.get("upload_seconds", UPLOAD_SECONDS)),
        limits=Limits(**{"waiting": WAITING, **{k: int(v) for k, v in limits.items()}}),
        policy=(course / policy) if policy is not None else None,
        probing_min_steps=int((data.get("probing") or {}).get("min_steps", 3)),
        invite_days=int((data.get("invites") or {}).get("days", INVITE_DAYS)),
        submission_seconds=float((data.get("grading") or {}).get("submission_seconds", SUBMISSION_SECONDS)),
        rate_per_minute=int((data.get("rate") or {}).get("per_minute", 120)),
        rate_per_address_per_minute=int((data.get("rate") or {}).get("per_address_per_minute", 1200)),
        platforms=platforms,
        allow_missing_state_cookie=bool((data.get("lti") or {}).get("allow_missing_state_cookie", False)),
        source=str(path),
    )


def _check_platforms(platforms: tuple[Any, ...], path: str) -> None:
    """Each LMS registration read as `grader.serve.lti.Platform` reads it, so a bad one stops the start (not a launch)."""
    from grader.serve.lti import Platform

    seen: set[tuple[str, str]] = set()
    for index, data in enumerate(platforms):
        where = f"{path}: lti.platforms[{index}]"
        platform = Platform.from_mapping(data, where)
        if (platform.issuer, platform.client_id) in seen:
            raise ConfigError(f"{where}: issuer and client_id: registered twice; keep one entry per registration")
        seen.add((platform.issuer, platform.client_id))


def _validate(data: dict[str, Any], path: str) -> None:
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SETTINGS_SCHEMA).iter_errors(data))
    if error is None:
        return
    key = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    fix = error.schema.get("description") if isinstance(error.schema, dict) else None
    if error.validator == "additionalProperties":
        fix = "remove it or check its spelling; the keys are " + ", ".join(
            sorted((error.schema.get("properties") or {}).keys())
        )
    message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
    raise ConfigError(f"{path}: {key}: {message}; {fix or 'see docs/serve.md'}")
