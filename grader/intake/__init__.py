"""From files to submissions: archives, LMS export layouts, student naming, notebooks and rosters."""

from __future__ import annotations

from grader.models import Submission
from grader.stash import StashKey

__all__ = ["LOCATED"]

LOCATED = StashKey[list[Submission]]()
"""Every submission located in this run, before the grader's naming (for checks made before grading).

Here rather than in `grader.intake.lms` (which names it too): every run keeps it, and only an LMS
export needs the rest of that module."""
