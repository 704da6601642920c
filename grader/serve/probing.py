"""Who uses the grader as a probe of the hidden checks: resubmissions that flip one hidden check at a time.

A student who fixes their code changes what the visible checks see too, and usually several checks
at once. A student who probes sends small variations that leave every visible result as it was and
turn exactly one hidden check from one status to another, again and again, to learn what it tests.
`probing_steps` finds those steps in a student's history; `flagged` says whether there are at least
``min_steps`` of them (``serve.yaml``: ``probing.min_steps``). The staff read the steps as the evidence.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grader.serve.grades import hidden_statuses, visible_statuses

__all__ = ["Attempt", "ProbeStep", "flagged", "probing_steps"]


@dataclass(frozen=True)
class Attempt:
    """One graded submission of a student's history: its number, receipt time and stored full result."""

    number: int
    received: dt.datetime
    full: dict[str, Any]


@dataclass(frozen=True)
class ProbeStep:
    """Two consecutive attempts with the same visible results and exactly one hidden check changed."""

    before: int
    after: int
    received: dt.datetime
    check: str
    was: str
    became: str

    def describe(self) -> str:
        """One line of evidence for the staff."""
        return (
            f"submission {self.before} -> {self.after} ({self.received:%Y-%m-%d %H:%M:%S} UTC): visible results "
            f"unchanged, hidden check {self.check} {self.was} -> {self.became}"
        )


def probing_steps(history: Sequence[Attempt]) -> list[ProbeStep]:
    """The probe-like steps of a student's graded history (in submission order).

    Parameters
    ----------
    history : sequence of Attempt
        The student's graded submissions; sorted here by number.

    Returns
    -------
    list of ProbeStep
    """
    attempts = sorted(history, key=lambda a: a.number)
    steps = []
    for old, new in zip(attempts, attempts[1:]):
        if visible_statuses(old.full) != visible_statuses(new.full):
            continue
        before, after = hidden_statuses(old.full), hidden_statuses(new.full)
        changed = [key for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]
        if len(changed) == 1:
            key = changed[0]
            steps.append(
                ProbeStep(old.number, new.number, new.received, key, before.get(key, "-"), after.get(key, "-"))
            )
    return steps


def flagged(history: Sequence[Attempt], min_steps: int) -> list[ProbeStep]:
    """The evidence when ``history`` holds at least ``min_steps`` probe steps, else []."""
    steps = probing_steps(history)
    return steps if len(steps) >= min_steps else []
