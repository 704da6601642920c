"""grader: an auto-grading harness and plugin system for course packs (`grader.packs`).

Public API: the ``hookimpl`` marker for plugins, ``StashKey`` for their state, the data models, and the
errors. See ``grader.hookspecs`` for every hook.
"""

from __future__ import annotations

import os as _os

from grader._version import __version__

# The grader's own numpy work is on small arrays. Unless told otherwise, OpenBLAS starts a thread
# per core when numpy is imported, and those threads spin while they wait: about 60 ms of CPU
# per start-up on two cores, taken from the job running the student's code (issue 16: 'grader
# check' start-up). One thread, as the jobs have (grader.execution.jobs.CHILD_ENV); a value already set wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.errors import ConfigError, GraderError, PluginError, SpecError, UsageError
    from grader.markers import hookimpl
    from grader.models import (
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
    from grader.stash import StashKey

_HOME = {
    **dict.fromkeys(("ConfigError", "GraderError", "PluginError", "SpecError", "UsageError"), "grader.errors"),
    **dict.fromkeys(
        (
            "Call",
            "CallResult",
            "Check",
            "CheckResult",
            "Diagnosis",
            "Exercise",
            "ExerciseResult",
            "GradingReport",
            "Prepared",
            "RunOutcome",
            "Submission",
            "SubmissionResult",
            "Verdict",
        ),
        "grader.models",
    ),
    "hookimpl": "grader.markers",
    "StashKey": "grader.stash",
}
"""Where each name of the API lives: imported on first use (PEP 562), so that ``grader``'s command line
starts its fork server before anything heavy is imported (`grader.cli.launch`, issue 16)."""


def __getattr__(name: str) -> Any:
    if name in _HOME:
        import importlib

        value = getattr(importlib.import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'grader' has no attribute {name!r}")


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
