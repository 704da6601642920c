"""Benchmark: ``grader check attention.py`` cold, against Python's own start in the same run (issue 29).

Usage (from the repository root, with the package installed)::

    python benchmarks/bench_check_start.py --runs 15
    python benchmarks/bench_check_start.py --runs 15 --also /tmp/main-src   # another checkout's grader/

Each round runs, one after the other and in a new process each: ``python -c pass``, ``python -c
'import numpy'`` and ``python -m grader check attention.py`` in a fresh folder outside the
repository (the pack's ``correct_numpy`` sample, the course named by ``GRADER_COURSE``, as a staff
member runs it; Python's ``.pyc`` files and the grader's kept caches warm, as after one first run,
each contender with a cache folder of its own).
``--also DIR`` adds ``grader check`` run from another source tree (``DIR/grader``, first on
``PYTHONPATH``), so two versions are timed in the same rounds. Each figure is the user + system CPU
time of the whole process tree (the grader, its fork server, the job: ``os.wait4``), median over the
rounds, with the wall time beside it; the ratios to the baselines of the same rounds are the figures
to compare between machines or loads.
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


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(CPU ms of the process tree, wall ms) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed with status {status}")
    return (usage.ru_utime + usage.ru_stime) * 1000, wall


def main() -> None:
    """Parse the options, run the rounds, print the medians and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds (default: 15)")
    parser.add_argument("--also", metavar="DIR", action="append", default=[], help="another source tree to time")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-check-start-"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.setdefault("GRADER_COURSE", str(ROOT))
    check = [sys.executable, "-m", "grader", "check", "attention.py"]
    contenders: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], env),
        "python -c 'import numpy'": ([sys.executable, "-c", "import numpy"], env),
        "grader check": (check, env),
    }
    for other in args.also:
        contenders[f"grader check ({other})"] = (check, {**env, "PYTHONPATH": str(Path(other).resolve())})
    for number, (name, (argv, run_env)) in enumerate(contenders.items()):
        # A cache folder of its own (the kept entry points and specs): no other run, of another version or of
        # another user of the machine's cache, rewrites it between rounds.
        contenders[name] = (argv, {**run_env, "GRADER_CACHE_DIR": str(folder / f"cache-{number}")})
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    try:
        shutil.copy(ROOT / "submissions" / "correct_numpy" / "attention.py", folder / "attention.py")
        for argv, run_env in contenders.values():  # one first run each: .pyc files and kept caches written
            _run(argv, folder, run_env)
        for _ in range(args.runs):
            for name, (argv, run_env) in contenders.items():
                figures[name].append(_run(argv, folder, run_env))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    medians = {
        name: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for name, v in figures.items()
    }
    print(
        f"{args.runs} rounds, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; CPU of the process tree"
    )
    base = medians["python -c pass"][0]
    numpy_cpu = medians["python -c 'import numpy'"][0]
    for name, (cpu, wall) in medians.items():
        print(
            f"{name:<40} CPU median {cpu:6.0f} ms  (x{cpu / numpy_cpu:4.2f} import numpy, {cpu - base:+5.0f} ms over "
            f"python -c pass)  wall median {wall:6.0f} ms"
        )


if __name__ == "__main__":
    main()
