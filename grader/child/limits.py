"""What the grader and the sandbox child must agree on: uids, exit codes, per-job limits.

One module read by both sides. The grader imports it normally
(``grader.child.limits``: `grader.builtin.sandbox`, `grader.builtin.runner`);
the zygote loads it by path with the rest of ``grader/child`` (see the
package's docstring), and the plain-child worker (``grader/child/worker.py``) by
path too. So it imports nothing but the standard library, and holds only
constants and pure functions: no state, nothing a job could use.
"""

from __future__ import annotations

UID_BASE = 61000
"""Worker slot k runs as uid and gid ``UID_BASE + k``."""

SETUP_FAILED = 70
"""A job's exit code when its set-up failed (the zygote reports the reason on the status pipe)."""

JOB_NICE = 10
"""Jobs run at this nice value: when every core is busy, the grader and the zygote (which read
results, kill hung jobs and start the next ones) still get the CPU at once."""

SLOT_CPU_PERIOD_US = 100_000
"""cpu.max period of a slot's cgroup (v2), in microseconds; the quota equals it (one CPU)."""

SLOT_CPU_SHARES = 110
"""cpu.shares of a slot's cpu cgroup: the weight of one task at nice 10 (the kernel's table)."""

CEILING_CPU_SECONDS = 3600
"""CPU seconds a sandbox job may use before its task arrives (each task then lowers it)."""

CPU_RLIMIT_MARGIN_SECONDS = 5.0
"""The CPU rlimit of a worker is its import timeout plus its calls' timeouts plus this margin: a
backstop behind the grader's own timeouts, which count the same CPU time and end a call first."""

DEFAULT_LIMITS: dict[str, int] = {
    "address_space_bytes": 4 << 30,
    "memory_bytes": 1 << 30,
    "file_bytes": 64 << 20,
    "open_files": 256,
    "processes": 64,
    "pids": 64,
}
"""Per-job limits: address space 4 GiB, memory (cgroup) 1 GiB, files 64 MiB,
256 open files, 64 processes."""


def slot_uid(slot: int) -> int:
    """The uid (and gid) a job of worker slot ``slot`` runs as: ``UID_BASE + slot``."""
    return UID_BASE + int(slot)


def cpu_rlimit(seconds: float) -> tuple[int, int]:
    """The ``RLIMIT_CPU`` (soft, hard) pair for ``seconds`` of CPU time (at least 1 s).

    The hard limit is one second above the soft one: a job that is pid 1 of
    its pid namespace ignores the soft limit's SIGXCPU (it has no handler),
    so only the hard limit's SIGKILL ends it.
    """
    soft = max(1, int(seconds))
    return soft, soft + 1
