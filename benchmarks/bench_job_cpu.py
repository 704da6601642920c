"""Benchmark: the CPU time one sandboxed job's set-up costs, in the zygote and in the job.

Usage (from the repository root, as root on Linux)::

    python benchmarks/bench_job_cpu.py --jobs 500

Starts a zygote, then launches ``--jobs`` jobs one after the other, each in
one of two slots, as ``grader grade`` does; each job sets up every layer
and, given no task (its stdin closed), exits. The zygote's own CPU time
and its reaped jobs' (``/proc/<zygote>/stat``: utime, stime, cutime,
cstime) are read after 20 jobs and after the rest, and printed per job in
milliseconds. CPU time, not wall-clock time: it holds on a loaded machine.

Beside it, the floor any fork-per-submission design pays here: a fresh
process loads what the zygote loads (numpy and the modules a submission may
import, `grader.child.worker.preimport`), freezes them out of the collector as the
zygote does, then forks as many children that exit at once, one after the
other; its own CPU (the forks) and its reaped children's (their exits) are
printed per fork. The difference between the two lines is what the layers,
the requests and the copy-on-write faults of a job's set-up in Python cost.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys

from grader.builtin.sandbox.handle import SandboxJob, Zygote
from grader.builtin.sandbox.slots import make_workdir
from grader.child.limits import DEFAULT_LIMITS


def _cpu(pid: int) -> list[float]:
    """utime, stime, cutime, cstime of ``pid``, in seconds, then its minor page faults and its reaped children's."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return [int(x) / tick for x in fields[11:15]] + [int(fields[7]), int(fields[8])]


def _run(zygote: Zygote, workdir: str, count: int) -> None:
    for i in range(count):
        job = SandboxJob(zygote, i % 2, workdir, DEFAULT_LIMITS, on_end=lambda slot: None)
        job.end_calls()  # no task: the job leaves once set up
        code = job.exit_code(10.0)
        if code != 0:
            raise SystemExit(f"a job ended with {code}: {job.setup_reason}")
        job.settle()


def bare_forks(count: int) -> str:
    """Fork ``count`` children that exit at once from this process, loaded as the zygote is; one line of CPU ms."""
    from grader.child import worker

    worker.preimport()
    import numpy  # noqa: F401 - loaded as the zygote loads it

    gc.collect()
    gc.freeze()

    before = _cpu(os.getpid())  # read as the zygote's are, so that the two lines compare alike
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    after = _cpu(os.getpid())
    user, system, children_user, children_system = (1000 * (b - a) / count for a, b in zip(before[:4], after[:4]))
    faults, children_faults = ((b - a) / count for a, b in zip(before[4:], after[4:]))
    parent, children = user + system, children_user + children_system
    return (
        f"bare fork and exit of the same numpy-loaded process: {parent + children:.2f} ms/fork "
        f"(parent {parent:.2f}, child {children:.2f}); faults/fork: parent {faults:.0f}, child {children_faults:.0f}"
    )


def main() -> None:
    """Print the zygote's and the jobs' CPU milliseconds per job, then a bare fork's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--bare-only", action="store_true", help=argparse.SUPPRESS)  # the fresh process of the floor
    args = parser.parse_args()
    if args.bare_only:
        print(bare_forks(args.jobs))
        return
    zygote, workdir = Zygote(), make_workdir()
    try:
        _run(zygote, workdir, 20)  # the slots' cgroups made, the zygote warm
        before = _cpu(zygote.proc.pid)
        _run(zygote, workdir, args.jobs)
        after = _cpu(zygote.proc.pid)
    finally:
        zygote.close()
        shutil.rmtree(workdir, ignore_errors=True)
    user, system, jobs_user, jobs_system = (1000 * (b - a) / args.jobs for a, b in zip(before[:4], after[:4]))
    faults, jobs_faults = ((b - a) / args.jobs for a, b in zip(before[4:], after[4:]))
    print(
        f"jobs={args.jobs}  zygote {user + system:.2f} ms/job (user {user:.2f}, system {system:.2f})  "
        f"jobs {jobs_user + jobs_system:.2f} ms/job (user {jobs_user:.2f}, system {jobs_system:.2f})  "
        f"total {user + system + jobs_user + jobs_system:.2f} ms/job; faults/job: zygote {faults:.0f}, jobs {jobs_faults:.0f}"
    )
    # A fresh process, so that nothing this one started (the zygote's socket, threads) is in its forks.
    bare = [sys.executable, os.path.abspath(__file__), "--bare-only", "--jobs", str(args.jobs)]
    print(subprocess.run(bare, check=True, capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
