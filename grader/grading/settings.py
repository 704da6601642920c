"""The run settings a result depends on: part of its cache key, and what shards of one run must share."""

from __future__ import annotations

from typing import Any

from grader import packs
from grader.config.core import Config
from grader.config.secret import course_secret
from grader.stash import StashKey

__all__ = ["result_settings"]

_CATALOGUE_FINGERPRINT = StashKey[str]()


def result_settings(config: Config, with_secret: bool = True) -> dict[str, Any]:
    """The run settings a result depends on (part of `result_key`; a shard's manifest compares them).

    ``with_secret`` adds the course secret's fingerprint.
    """
    settings = {
        "import_timeout": config.option("import_timeout"),
        "submission_timeout": config.option("submission_timeout"),
        "insecure": config.option("insecure", False),
        "visible_only": config.command == "check",
        "after_due_date": config.option("after_due_date", False),
        "published": config.option("published", False),
        "diagnosis": _diagnosis_fingerprint(config),
    }
    if with_secret:  # hidden inputs derive from the course secret: another secret, other inputs, another result
        settings["course_secret"] = course_secret(config).fingerprint
    return settings


def _diagnosis_fingerprint(config: Config) -> str:
    """The catalogue behind diagnoses (its fingerprint), or "" when diagnosis is off; computed once."""
    if config.option("no_diagnosis", False) or config.pluginmanager.get_plugin("diagnosis") is None:
        return ""
    if _CATALOGUE_FINGERPRINT not in config.stash:
        from grader.packs.catalogue import fingerprint

        config.stash[_CATALOGUE_FINGERPRINT] = _catalogue_fingerprint(config, fingerprint)
    return config.stash[_CATALOGUE_FINGERPRINT]


def _catalogue_fingerprint(config: Config, fingerprint: Any) -> str:
    """The mutant catalogue's fingerprint ("" when the run has none)."""
    folder = packs.mutants_dir(config)[0]
    return fingerprint(folder, config.pack.submission) if folder is not None else ""
