"""Slices of a class: which submissions a run grades when it is one shard of many (``--shard K/N``).

A submission's slice depends on its id only (`shard_of`: a keyed hash), so every shard of a run
agrees on it without talking to the others. ``--shard auto/N`` takes ``K`` from the scheduler
(`SCHEDULER_VARIABLES`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grader.errors import UsageError
from grader.models import Submission
from grader.stash import StashKey

__all__ = [
    "CLASS_IDS",
    "CLASS_LISTING",
    "SCHEDULER_VARIABLES",
    "STASH_KEY",
    "ShardSpec",
    "parse_shard",
    "select",
    "shard_of",
]

_KEY = b"grader shard v1\0"
MAX_SHARDS = 100_000


@dataclass(frozen=True)
class ShardSpec:
    """Which slice of the class a run grades.

    Attributes
    ----------
    k : int
        The slice, 1-based (``1 <= k <= n``).
    n : int
        How many slices the class is cut into.
    source : str
        Where ``k`` came from (``--shard`` or a scheduler's variable), for messages.
    """

    k: int
    n: int
    source: str = "--shard"

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


def _digits(text: str) -> bool:
    """Whether ``text`` (stripped) is ASCII digits only: ``str.isdigit`` also takes "²" (which ``int`` refuses)
    and "١" (which it reads as 1)."""
    return re.fullmatch(r"[0-9]+", text.strip()) is not None


def parse_shard(text: str, environ: Mapping[str, str] | None = None) -> ShardSpec:
    """Read ``--shard K/N`` (``K`` 1-based) or ``--shard auto/N`` (``K`` from the scheduler).

    Parameters
    ----------
    text : str
        ``"2/4"`` or ``"auto/4"``.
    environ : mapping, optional
        The environment (default ``os.environ``). For a Slurm array,
        ``SLURM_ARRAY_TASK_MIN`` (default 0) is subtracted from the task id
        and ``SLURM_ARRAY_TASK_COUNT``, when set, must equal ``N``.

    Returns
    -------
    ShardSpec

    Raises
    ------
    grader.errors.UsageError
        If the text is not ``K/N`` with ``1 <= K <= N``, or ``auto`` finds
        no scheduler variable or an index outside ``0 .. N-1``.
    """
    env = os.environ if environ is None else environ
    k_text, sep, n_text = text.partition("/")
    if not sep or not _digits(n_text) or not (1 <= int(n_text) <= MAX_SHARDS):
        raise UsageError(
            f"--shard {text}: give K/N, the K-th of N shards (e.g. 2/4, K from 1), or auto/N to take "
            "K from the scheduler"
        )
    n = int(n_text)
    if k_text.strip().lower() != "auto":
        if not _digits(k_text) or not 1 <= int(k_text) <= n:
            raise UsageError(f"--shard {text}: K must be a whole number from 1 to {n} (shards are counted from 1)")
        return ShardSpec(int(k_text), n)
    found: list[tuple[str, int]] = []
    for name, what in SCHEDULER_VARIABLES:
        value = env.get(name, "").strip()
        if not value:
            continue
        if not _digits(value):
            raise UsageError(f"--shard {text}: {name}={value!r} ({what}) is not a whole number")
        index = int(value)
        if name == "SLURM_ARRAY_TASK_ID":
            low = env.get("SLURM_ARRAY_TASK_MIN", "0").strip() or "0"
            count = env.get("SLURM_ARRAY_TASK_COUNT", "").strip()
            if not _digits(low):
                raise UsageError(f"--shard {text}: SLURM_ARRAY_TASK_MIN={low!r} is not a whole number")
            if count and count != str(n):
                raise UsageError(
                    f"--shard {text}: the Slurm array has {count} tasks (SLURM_ARRAY_TASK_COUNT) but "
                    f"--shard says {n}; use '#SBATCH --array=0-{n - 1}' or --shard auto/{count}"
                )
            index -= int(low)
        if not 0 <= index < n:
            raise UsageError(
                f"--shard {text}: {name}={value} ({what}) is outside 0..{n - 1}; the scheduler's "
                f"indices must count the {n} shards from 0"
            )
        found.append((name, index))
    if len({index for _, index in found}) > 1:  # two schedulers' variables that disagree: neither is trusted
        said = " but ".join(f"{name} says shard {index + 1}" for name, index in found)
        raise UsageError(f"--shard {text}: {said}; unset the variable that is not this job's, or give K/N")
    if found:
        return ShardSpec(found[0][1] + 1, n, found[0][0])
    names = ", ".join(name for name, _ in SCHEDULER_VARIABLES)
    raise UsageError(f"--shard {text}: no scheduler index in the environment (looked for {names}); give K/N instead")


def shard_of(sub_id: str, n: int) -> int:
    """The 1-based shard of a submission id among ``n``: a keyed SHA-256 of the id, modulo ``n``.

    It depends on the id alone: adding or removing other students never
    moves a student to another shard.
    """
    digest = hashlib.sha256(_KEY + sub_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def select(submissions: Sequence[Submission], config: Any) -> list[Submission]:
    """The submissions this run grades: all of them, or its shard's (``--shard``), in the class's order.

    Called once every submission is located and named (so slugs are the
    whole class's). Keeps the class's ids in ``config.stash`` for the
    shard's manifest.
    """
    text = config.option("shard")
    if not text:
        return list(submissions)
    spec = text if isinstance(text, ShardSpec) else parse_shard(str(text))
    config.stash[STASH_KEY] = spec
    config.stash[CLASS_IDS] = [s.id for s in submissions]
    config.stash[CLASS_LISTING] = [[s.id, s.sha256] for s in submissions]
    return [s for s in submissions if shard_of(s.id, spec.n) == spec.k]


STASH_KEY: StashKey[ShardSpec] = StashKey()
"""``config.stash`` key: the run's `ShardSpec`, when it grades a shard."""
CLASS_IDS = StashKey[list[str]]()
"""``config.stash`` key: every submission id of the class, when the run grades one shard of it."""
CLASS_LISTING = StashKey[list[list[str]]]()
"""``config.stash`` key: the class listing, ``[id, SHA-256 of its file ('' for none)]`` per submission,
when the run grades one shard of it (`run_of`)."""

SCHEDULER_VARIABLES = (
    ("JOB_COMPLETION_INDEX", "a Kubernetes Indexed Job"),
    ("SLURM_ARRAY_TASK_ID", "a Slurm job array"),
    (
        "GRADER_SHARD_INDEX",
        "GRADER_SHARD_INDEX (e.g. GitHub Actions' strategy.job-index)",
    ),
)
"""Environment variables ``--shard auto/N`` reads, first set wins; each holds a 0-based index."""
