"""Benchmark: what the sandbox costs per job, against an unsandboxed child.

Usage (from the repository root, as root on Linux)::

    python benchmarks/bench_sandbox.py --runs 40

Both sides run the same job through the same runner (`run_calls`): import
``submissions/correct_numpy/attention.py`` and make one call. "plain" starts
a fresh ``python -I`` child per job (the runner used by ``grader check``);
"sandbox" forks the job from the warm zygote with every isolation layer
(namespaces, cgroups, rlimits, Landlock, uid drop, seccomp) when the job is
asked for; "sandbox, started ahead" is what ``grader grade`` does: each
worker's next job is set up while the current one runs. Medians of the
same run are printed, and the difference: the target is at most +15 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from grader.builtin.sandbox.handle import SandboxJob, Zygote
from grader.builtin.sandbox.slots import Worker
from grader.child.limits import DEFAULT_LIMITS
from grader.execution.calls import run_calls
from grader.execution.jobs import PlainJob
from grader.models import Call

ROOT = Path(__file__).resolve().parent.parent
FILE = str(ROOT / "submissions" / "correct_numpy" / "attention.py")
CALLS = [Call("softmax", ([0.0, 1.0, 2.0],), 5.0)]


def timed(launch, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        outcome = run_calls(FILE, CALLS, launch=launch)
        times.append(time.perf_counter() - start)
        assert outcome.results[0].status == "returned", outcome
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    runs = parser.parse_args().runs
    zygote = Zygote()
    jobs = tempfile.mkdtemp(prefix="grader-sandbox-")
    os.chmod(jobs, 0o711)  # as the sandbox plugin makes it: the jobs' uids reach their folders
    worker = Worker(zygote, (0, 1), jobs, "attention.py")
    try:

        def sandboxed(source, workdir, cpu, standby=False):
            job = SandboxJob(zygote, 2, jobs, DEFAULT_LIMITS)
            job.assign(source, cpu)
            return job

        timed(sandboxed, 3)  # warm-up: the slots' cgroups are made once
        timed(worker.launch, 3)
        plain, sandbox, ahead = [], [], []
        for _ in range(runs):  # interleaved, so load changes hit every side alike
            plain += timed(PlainJob, 1)
            sandbox += timed(sandboxed, 1)
            ahead += timed(worker.launch, 1)
    finally:
        worker.close()
        zygote.close()
        shutil.rmtree(jobs, ignore_errors=True)
    p, s, a = (statistics.median(t) * 1000 for t in (plain, sandbox, ahead))
    print(f"runs: {runs} each, interleaved")
    print(f"plain child (fresh python -I): median {p:.1f} ms per job")
    print(f"sandboxed job (zygote fork, all layers, when asked for): median {s:.1f} ms per job")
    print(f"sandboxed job, started ahead (as grader grade runs them): median {a:.1f} ms per job")
    print(f"sandbox overhead: {s - p:+.1f} ms per job, {a - p:+.1f} ms started ahead (target: at most +15 ms)")


if __name__ == "__main__":
    main()
