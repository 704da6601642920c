"""Benchmark: what the sandbox costs per job, against an unsandboxed child.

Usage (from the repository root, as root on Linux)::

    python benchmarks/bench_sandbox.py --runs 40

Both sides run the same job through the same runner (`run_calls`): import
``submissions/correct_numpy/attention.py`` and make one call. "plain" starts
a fresh ``python -I`` child per job (the runner used by ``grader check``);
"sandbox" forks the job from the warm zygote with every isolation layer
(namespaces, cgroups, rlimits, Landlock, uid drop, seccomp). Medians of the
same run are printed, and the difference: the target is at most +15 ms.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from grader.builtin.runner import PlainJob, run_calls
from grader.builtin.sandbox import DEFAULT_LIMITS, SandboxJob, Zygote
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
    try:
        def sandboxed(file, calls, workdir, cpu):
            return SandboxJob(zygote, 0, file, calls, workdir, cpu, DEFAULT_LIMITS)

        timed(sandboxed, 3)  # warm-up: the slot's cgroups are made once
        plain, sandbox = [], []
        for _ in range(runs):  # interleaved, so load changes hit both sides alike
            plain += timed(PlainJob, 1)
            sandbox += timed(sandboxed, 1)
    finally:
        zygote.close()
    p, s = statistics.median(plain) * 1000, statistics.median(sandbox) * 1000
    print(f"runs: {runs} each, interleaved")
    print(f"plain child (fresh python -I): median {p:.1f} ms per job")
    print(f"sandboxed job (zygote fork, all layers): median {s:.1f} ms per job")
    print(f"sandbox overhead: {s - p:+.1f} ms per job (target: at most +15 ms)")


if __name__ == "__main__":
    main()
