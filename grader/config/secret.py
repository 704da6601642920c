"""The course secret: what makes hidden inputs unpredictable from the specs alone.

The specs live in a repository that students may one day see (a leaked
fork, a published template, last year's copy). If a hidden check's random
inputs came from its spec seed alone, anyone who saw the specs once could
draw the same inputs and precompute every answer. So a hidden check's seed
is derived from the spec seed **and** a course secret kept outside the
repository::

    seed = first 8 bytes, big-endian, of
           HMAC-SHA256(secret, "<exercise id>/<check id>/<spec seed>")

Visible checks keep the spec seed (students run them with ``grader check``
and the published checks must match).

Where the secret comes from, first found wins:

1. ``--secret-file FILE`` (an option of every command);
2. the environment variable ``GRADER_COURSE_SECRET_FILE`` naming a key file;
3. the environment variable ``GRADER_COURSE_SECRET`` holding the secret.

A key file holds the secret as text (surrounding white space, such as the
final newline, is ignored); make one with
``python -c "import secrets; print(secrets.token_hex(32))" > course.key``
and ``chmod 600 course.key``. A secret has at least `MIN_LENGTH`
characters.

Without a secret the grader uses the documented default, **no secret**: a
hidden check's seed is its spec seed, as before the course secret existed
(the test suite runs this way), and ``grader grade`` prints one warning
line, `WARNING`. The same secret always gives the same seeds, so the same
submission, specs and secret give byte-identical results.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.errors import UsageError
from grader.stash import StashKey

__all__ = [
    "DEFAULT_FINGERPRINT",
    "ENV_FILE",
    "ENV_SECRET",
    "MIN_LENGTH",
    "WARNING",
    "CourseSecret",
    "course_secret",
    "read_secret",
]

ENV_SECRET = "GRADER_COURSE_SECRET"
ENV_FILE = "GRADER_COURSE_SECRET_FILE"
MIN_LENGTH = 16
"""Fewest characters of a course secret."""

WARNING = "no course secret set: hidden inputs are reproducible from the specs; set GRADER_COURSE_SECRET"
"""The line ``grader grade`` prints (after ``grader: warning: ``) when no secret is set."""

DEFAULT_FINGERPRINT = "default"
"""`CourseSecret.fingerprint` of the default (no secret)."""

_FINGERPRINT_LABEL = b"grader course secret fingerprint v1"
_DEFAULT_SEAL_KEY = b"grader default seal v1 (no course secret: detects edits, not forgery)"


@dataclass(frozen=True)
class CourseSecret:
    """A course secret, or the default (``key is None``).

    Attributes
    ----------
    key : bytes or None
        The secret's bytes (UTF-8 of its text); None for the default.
    source : str
        Where it came from, for messages: ``"--secret-file FILE"``,
        ``"GRADER_COURSE_SECRET_FILE=FILE"``, ``"GRADER_COURSE_SECRET"`` or
        ``"default"``. Never the secret itself.
    """

    key: bytes | None = None
    source: str = "default"

    def __repr__(self) -> str:  # never print the key
        return f"CourseSecret(source={self.source!r}, fingerprint={self.fingerprint!r})"

    @property
    def is_default(self) -> bool:
        """Whether no secret was set."""
        return self.key is None

    @functools.cached_property
    def fingerprint(self) -> str:
        """16 hex digits naming the secret without revealing it (`DEFAULT_FINGERPRINT` for none).

        SHA-256 of HMAC-SHA256(secret, a fixed label), first 16 hex digits:
        two runs with the same fingerprint drew the same hidden inputs, so a
        stored result can be keyed on it. Worked out once (every submission's result key names it).
        """
        if self.key is None:
            return DEFAULT_FINGERPRINT
        mac = hmac.new(self.key, _FINGERPRINT_LABEL, hashlib.sha256).digest()
        return hashlib.sha256(mac).hexdigest()[:16]

    def seal(self, label: bytes, *parts: bytes) -> str:
        """A keyed digest of ``parts``: HMAC-SHA256 under the secret, as 64 hex digits.

        Parameters
        ----------
        label : bytes
            What is sealed (e.g. ``b"grader shard v1"``), so a seal of one
            kind is never accepted for another.
        *parts : bytes
            The sealed bytes; each is length-prefixed, so no two sequences
            of parts give the same message.

        Returns
        -------
        str
            The seal. Only a holder of the secret can make a seal that
            `hmac.compare_digest` accepts; with the default (no secret) the
            key is public, so a seal then detects an edit, not a forgery.
        """
        mac = hmac.new(self.key if self.key is not None else _DEFAULT_SEAL_KEY, label, hashlib.sha256)
        for part in parts:
            mac.update(len(part).to_bytes(8, "big"))
            mac.update(part)
        return mac.hexdigest()

    def hidden_seed(self, exercise: str, check_id: str, seed: int) -> int:
        """The seed of a hidden check's random inputs.

        Parameters
        ----------
        exercise : str
            The exercise id, e.g. ``"G14.02"``.
        check_id : str
            The check id within the exercise.
        seed : int
            The check's seed from the spec.

        Returns
        -------
        int
            ``seed`` itself for the default; else a 64-bit integer (0 to
            2**64 - 1) from HMAC-SHA256 of ``"exercise/check_id/seed"``.
        """
        if self.key is None:
            return seed
        message = f"{exercise}/{check_id}/{seed}".encode()
        return int.from_bytes(hmac.new(self.key, message, hashlib.sha256).digest()[:8], "big")


def _checked(text: str, source: str) -> CourseSecret:
    text = text.strip()
    if len(text) < MIN_LENGTH:
        raise UsageError(
            f"{source}: the course secret has {len(text)} characters, at least {MIN_LENGTH} are needed "
            '(make one with: python -c "import secrets; print(secrets.token_hex(32))")'
        )
    return CourseSecret(text.encode("utf-8", "surrogateescape"), source)


def _from_file(path: str, source: str, warn: Any = None) -> CourseSecret:
    try:
        with open(path, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UsageError(f"{source}: not a regular file")
            data = fh.read(1 << 16)
    except OSError as exc:
        raise UsageError(f"{source}: cannot read the key file ({exc.strerror})") from None
    if warn is not None and info.st_mode & 0o077:
        warn(f"{source}: the key file can be read by other users; chmod 600 {path}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{source}: the key file is not UTF-8 text") from None
    return _checked(text, source)


def read_secret(
    secret_file: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None, warn: Any = None
) -> CourseSecret:
    """Find the course secret (see the module docstring for the order).

    Parameters
    ----------
    secret_file : path, optional
        The ``--secret-file`` option.
    environ : mapping, optional
        The environment (default: ``os.environ``).
    warn : callable, optional
        Called with one line when a key file is readable by other users.

    Returns
    -------
    CourseSecret
        The default (``key is None``) when nothing is set.

    Raises
    ------
    grader.errors.UsageError
        If a named key file cannot be read, or a secret is shorter than
        `MIN_LENGTH` characters.
    """
    env = os.environ if environ is None else environ
    if secret_file:
        return _from_file(os.fspath(secret_file), f"--secret-file {secret_file}", warn)
    if env.get(ENV_FILE):
        return _from_file(env[ENV_FILE], f"{ENV_FILE}={env[ENV_FILE]}", warn)
    if env.get(ENV_SECRET):
        return _checked(env[ENV_SECRET], ENV_SECRET)
    return CourseSecret()


_SECRET: StashKey[CourseSecret] = StashKey()
"""The session's course secret, once read."""


def course_secret(config: Any) -> CourseSecret:
    """The course secret of a session, read once (cached in ``config.stash``).

    Parameters
    ----------
    config : grader.config.core.Config
        Its ``--secret-file`` option, if any, is used.

    Returns
    -------
    CourseSecret
    """
    stash = getattr(config, "stash", None)
    if stash is not None and _SECRET in stash:
        cached: CourseSecret = stash[_SECRET]
        return cached
    option = getattr(config, "option", None)
    path = option("secret_file") if option else None

    def warn(line: str) -> None:
        import sys

        print(f"grader: warning: {line}", file=sys.stderr)

    secret = read_secret(Path(path) if path else None, warn=warn)
    if stash is not None:
        stash[_SECRET] = secret
    return secret
