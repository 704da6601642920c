"""grader: an auto-grading harness and plugin system for course packs (`grader.packs`).

Public API: the ``hookimpl`` marker for plugins, ``StashKey`` for their state, the data models, and the
errors. See ``grader.hookspecs`` for every hook.
"""

from __future__ import annotations

__version__ = "0.1.0"

from grader.errors import ConfigError, GraderError, PluginError, SpecError, UsageError  # noqa: E402
from grader.models import (  # noqa: E402
    Call,
    CallResult,
    Check,
    CheckResult,
    Diagnosis,
    Exercise,
    ExerciseResult,
    GradingReport,
    Prepared,
    RunOutcome,
    Submission,
    SubmissionResult,
    Verdict,
)
from grader.plugins import hookimpl  # noqa: E402
from grader.stash import StashKey  # noqa: E402

__all__ = [
    "Call",
    "CallResult",
    "Check",
    "CheckResult",
    "ConfigError",
    "Diagnosis",
    "Exercise",
    "ExerciseResult",
    "GraderError",
    "GradingReport",
    "PluginError",
    "Prepared",
    "RunOutcome",
    "SpecError",
    "StashKey",
    "Submission",
    "SubmissionResult",
    "UsageError",
    "Verdict",
    "__version__",
    "hookimpl",
]
