"""A sandbox job's resource limits: CPU, address space, file size, open files, processes, no core.

Set once while the job sets up (`set_rlimits`, from the limits the grader
sends with the launch, CPU at `limits.CEILING_CPU_SECONDS`), then the CPU
limit is lowered to the task's own when the task arrives (`lower_cpu`:
lowering a limit needs no privilege, so it works after the uid drop). The
CPU pair comes from `limits.cpu_rlimit`, as in the plain-child worker.

Part of the sandbox child (``grader/child``), loaded by path by the zygote
(see the package's docstring): it imports only the standard library.
"""

from __future__ import annotations

import resource

from .limits import cpu_rlimit


def set_rlimits(limits: dict[str, int]) -> None:
    """Apply a job's rlimits from ``limits``: CPU seconds, address space, file size, open files, processes; no core."""
    for res, value in (
        (resource.RLIMIT_CPU, cpu_rlimit(limits["cpu_seconds"])),  # pid 1 ignores SIGXCPU: the hard limit ends it
        (resource.RLIMIT_AS, (limits["address_space_bytes"],) * 2),
        (resource.RLIMIT_FSIZE, (limits["file_bytes"],) * 2),
        (resource.RLIMIT_NOFILE, (limits["open_files"],) * 2),
        (resource.RLIMIT_NPROC, (limits["processes"],) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(res, value)


def lower_cpu(seconds: float) -> int:
    """Lower the CPU rlimit to ``seconds`` (at least 1; hard limit one more); return the soft limit."""
    pair = cpu_rlimit(seconds)
    resource.setrlimit(resource.RLIMIT_CPU, pair)
    return pair[0]
