"""grader: an auto-grading harness and plugin system for course packs (`grader.packs`).

Public API: the ``hookimpl`` marker for plugins, ``StashKey`` for their state, the data models, and the
errors. See ``grader.hookspecs`` for every hook.
"""

from __future__ import annotations

import os as _os

__version__ = "0.1.0"

# The grader's own numpy work is on small arrays. Unless told otherwise, OpenBLAS starts a thread
# per core when numpy is imported, and those threads spin while they wait: about 60 ms of CPU
# per start-up on two cores, taken from the job running the student's code (issue 16: 'grader
# check' start-up). One thread, as the jobs have (grader.jobs.CHILD_ENV); a value already set wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

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
