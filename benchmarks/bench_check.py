"""Benchmark: ``grader check attention.py`` cold, as a student runs it (issue 16: at most 200 ms median).

Usage (from the repository root)::

    python benchmarks/bench_check.py --runs 9
    python benchmarks/bench_check.py --runs 9 --grader /path/to/student-venv/bin/grader --file exercises/starter/attention.py

The file (default: the pack's ``correct_numpy`` sample) is copied into a fresh folder outside the
repository, and the command runs there ``--runs`` times, each a new process (cold, as a student
runs it; Python's own ``.pyc`` cache is warm, as after ``pip install``: one run first writes it).
For each run it takes the wall time and the user + system CPU time of the whole process tree (the
grader, the fork server, the job: ``os.wait4``), and prints the median, the minimum and the
maximum of both: on a shared machine the CPU time is the steadier figure. ``--grader`` is the
``grader`` command to time (default: the one beside this Python, else ``python -m grader``); a
student's own installation is the one that counts, since a development checkout also reads the
specs (``grader check`` there runs the pack's specs, not its public checks).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    """Parse the options, time the runs and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="cold runs to time (default: 9)")
    parser.add_argument("--file", default=str(ROOT / "submissions" / "correct_numpy" / "attention.py"), help="the file")
    parser.add_argument("--grader", default=None, help="the grader command (default: this Python's)")
    args = parser.parse_args()
    beside = Path(sys.executable).with_name("grader")
    command = [args.grader] if args.grader else [str(beside)] if beside.exists() else [sys.executable, "-m", "grader"]
    folder = Path(tempfile.mkdtemp(prefix="bench-check-"))
    try:
        shutil.copy(args.file, folder / "attention.py")
        argv = [*command, "check", "attention.py"]
        writes = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(argv, cwd=folder, env=writes, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls, cpus = [], []
        for _ in range(args.runs):
            start = time.perf_counter()
            proc = subprocess.Popen(argv, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, _, usage = os.wait4(proc.pid, 0)
            walls.append((time.perf_counter() - start) * 1000)
            cpus.append((usage.ru_utime + usage.ru_stime) * 1000)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{' '.join(argv)} ({args.runs} cold runs, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for name, values in (("wall", walls), ("user+sys", cpus)):
        print(f"{name}: median {statistics.median(values):.0f} ms (min {min(values):.0f}, max {max(values):.0f})")


if __name__ == "__main__":
    main()
