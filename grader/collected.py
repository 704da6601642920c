"""What a run knows before its first submission is graded: the exercises and their prepared checks.

`Collected` is what ``grader_collection_finish`` and the writers receive; it is pure data (no IO)
with the views the batch loop needs (the calls in the order they are made, each check's slice).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from grader._version import __version__
from grader.disclosure import secret_while_grading
from grader.models import Call, Check, Exercise, GradingReport, Prepared
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.kinds import KindContext  # numpy: not imported by 'import grader.grading.session'

__all__ = ["COLLECTED", "Collected", "PreparedCheck"]

T = TypeVar("T")


@dataclass(frozen=True)
class PreparedCheck:
    """A check with its kind, context and prepared calls."""

    check: Check
    kind: Any
    context: KindContext
    prepared: Prepared


@dataclass(frozen=True)
class Collected:
    """Everything known before the first submission is graded."""

    exercises: tuple[Exercise, ...]
    checks: tuple[tuple[Exercise, tuple[PreparedCheck, ...]], ...]
    spec_hash: str
    unlisted_hidden: int = 0
    """Hidden checks known only by count (the public-checks file lists none)."""

    def header(self, command: str) -> GradingReport:
        """The session's report before any result: versions and exercises, no submissions.

        What a writer needs to render one submission's file while the
        batch still runs.
        """
        return GradingReport(__version__, self.spec_hash, command, (), self.exercises)

    @functools.cached_property
    def run_order(self) -> tuple[tuple[Exercise, PreparedCheck], ...]:
        """Every prepared check in the order its calls are made: visible checks first.

        A submission's output is shown only up to its first hidden call,
        and a job learns each call only when it is made: running every
        visible check before any hidden one keeps the most of what the
        student printed showable. Within each group, the specs' order.
        """
        pairs = [(exercise, pc) for exercise, items in self.checks for pc in items]
        return tuple(
            [p for p in pairs if not secret_while_grading(p[1].check)]
            + [p for p in pairs if secret_while_grading(p[1].check)]
        )

    @functools.cached_property
    def calls(self) -> tuple[Call, ...]:
        """The calls of a submission, in `run_order` (what ``grader_run_calls`` is given)."""
        return tuple(call for _, pc in self.run_order for call in pc.prepared.calls)

    @functools.cached_property
    def slices(self) -> dict[tuple[str, str], slice]:
        """Where each check's calls sit in `calls`, keyed by (exercise id, check id)."""
        out: dict[tuple[str, str], slice] = {}
        offset = 0
        for exercise, pc in self.run_order:
            n = len(pc.prepared.calls)
            out[(exercise.id, pc.check.id)] = slice(offset, offset + n)
            offset += n
        return out

    @functools.cached_property
    def check_slices(self) -> tuple[tuple[tuple[str, str], slice], ...]:
        """((exercise id, check id), where its calls sit in `calls`) of every check, in the specs' order."""
        return tuple(
            ((exercise.id, pc.check.id), self.slices[(exercise.id, pc.check.id)])
            for exercise, items in self.checks
            for pc in items
        )

    @functools.cached_property
    def exercise_check_slices(self) -> dict[str, tuple[tuple[tuple[str, str], slice], ...]]:
        """`check_slices` of each exercise, by exercise id."""
        out: dict[str, list[tuple[tuple[str, str], slice]]] = {}
        for key, where in self.check_slices:
            out.setdefault(key[0], []).append((key, where))
        return {ex_id: tuple(items) for ex_id, items in out.items()}

    def split(self, results: Sequence[T]) -> list[tuple[Exercise, PreparedCheck, list[T]]]:
        """Each prepared check with its own part of a submission's results, in the specs' order.

        Parameters
        ----------
        results : sequence
            One item per call of `calls`, in that order (`grader.models.CallResult`, or any
            per-call value such as its seconds); a shorter sequence gives the checks past its
            end fewer items (none).

        Returns
        -------
        list of (grader.models.Exercise, PreparedCheck, list)
            Every check of `checks`, exercise by exercise, with the items of its own calls.
        """
        return [
            (exercise, pc, list(results[self.slices[(exercise.id, pc.check.id)]]))
            for exercise, items in self.checks
            for pc in items
        ]

    @property
    def hidden_count(self) -> int:
        """Number of checks that are not ``visible``."""
        listed = sum(1 for ex in self.exercises for c in ex.checks if secret_while_grading(c))
        return listed + self.unlisted_hidden


COLLECTED: StashKey[Collected] = StashKey()
"""The run's `Collected`, once the checks are prepared."""
