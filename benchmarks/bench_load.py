"""Benchmark: does load move a score? The samples graded beside CPU hogs and on a Dask cluster.

Usage (from the repository root, with the package and its ``dask`` extra installed)::

    python benchmarks/bench_load.py --rounds 10 --parallel 10

First it grades, on the machine as it is (no hog of its own), the course's
samples (``submissions``, the ``hangs`` sample among them) and the
``hangs`` sample alone: the *quiet* runs. Then it starts ``--hogs`` CPU hogs
(processes spinning, each in a session of its own, so that the scheduler's
autogroups give each a full share) and a Dask ``LocalCluster``
(``--dask-workers`` worker processes of one thread each), and grades
``--rounds`` times each of these modes, beside the hogs:

``local``
    the samples, ``grader grade`` as an instructor runs it (sandboxed);
``hangs``
    the ``hangs`` sample alone (only ``softmax_backward`` hangs: every
    other function must keep its points);
``dask1``, ``dask2``
    the samples on the Dask cluster, ``--dask-chunk 1`` and ``2``.

Up to ``--parallel`` gradings run at once (each is load for the others
too). Every run's ``results.json`` must be byte-identical to the quiet run
of the same input. It prints each run that differs (its mode, round and the
first submission whose score or a check's status differs), then the number
of differing results out of all runs (target: 0), the wall-clock time, and
the command that reproduces it. Exit code: 0 when none differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = "submissions"
HANGS = "submissions/hangs"
HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
MODES = ("local", "hangs", "dask1", "dask2")
BENCH_SECRET = "bench-load-course-secret-0123456789abcdef"
"""The course secret of every run (the environment's, if it sets one): the same for quiet and loaded runs."""


def grade(path: str, out: Path, extra: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``grader grade PATH --out OUT -q EXTRA``; return its exit code and the tail of its stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "grade", path, "--out", str(out), "-q", *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    return proc.returncode, proc.stderr.strip()[-400:]


def first_difference(quiet: dict[str, Any], loaded: dict[str, Any]) -> str:
    """The first submission whose score, or a check's status or message, differs; or what else differs."""
    runs = {s["id"]: s for s in loaded.get("submissions", [])}
    for sub in quiet.get("submissions", []):
        other = runs.get(sub["id"])
        if other is None:
            return f"{sub['id']}: missing"
        if other == sub:
            continue
        for ex, ex2 in zip(sub["exercises"], other["exercises"], strict=False):
            for check, check2 in zip(ex["checks"], ex2["checks"], strict=False):
                if check != check2:
                    return (
                        f"{sub['id']} {ex['id']} {check['id']}: {check['status']} -> {check2['status']} "
                        f"({check2['message'][:120]!r}); total {sub['score']:g} -> {other['score']:g}"
                    )
        return f"{sub['id']}: total {sub['score']:g} -> {other['score']:g}"
    return "the files differ outside the submissions' results"


def start_hogs(n: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    """``n`` busy processes, each in a session of its own (`tests/harness/test_runner.py`'s ``_hogs``)."""
    return [
        subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)], start_new_session=True) for _ in range(n)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="runs of each mode (default: 10)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--hogs", type=int, default=4, help="CPU hogs beside the runs (default: 4)")
    parser.add_argument("--parallel", type=int, default=10, help="gradings at once (default: 10)")
    parser.add_argument("--dask-workers", type=int, default=4, help="LocalCluster worker processes (default: 4)")
    parser.add_argument("--keep", metavar="DIR", help="keep every run's output folder under DIR")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown or args.rounds < 1 or args.parallel < 1:
        parser.error(f"unknown modes {unknown}" if unknown else "--rounds and --parallel must be at least 1")
    command = "python benchmarks/bench_load.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    env = dict(os.environ)
    env.setdefault("GRADER_COURSE_SECRET", BENCH_SECRET)
    # This tree's grader, in the gradings and in the Dask workers (spawned with this sys.path).
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH", "")])])
    sys.path.insert(0, str(ROOT))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-load-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    # The quiet runs: no hog of ours.
    quiet: dict[str, bytes] = {}
    with ThreadPoolExecutor(2) as pool:
        futures = {
            pool.submit(grade, path, work / f"quiet-{name}", [], env): (name, path)
            for name, path in (("samples", SAMPLES), ("hangs", HANGS))
        }
        for future in as_completed(futures):
            name, _ = futures[future]
            code, err = future.result()
            file = work / f"quiet-{name}" / "results.json"
            if not file.is_file():
                print(f"the quiet run of {name} wrote no results.json (exit {code}): {err}", file=sys.stderr)
                return 2
            quiet[name] = file.read_bytes()
    print(f"quiet runs done in {time.monotonic() - started:.0f} s", flush=True)

    cluster = None
    address = ""
    if any(m.startswith("dask") for m in modes):
        import distributed

        cluster = distributed.LocalCluster(
            n_workers=args.dask_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            worker_dashboard_address=None,
        )
        address = cluster.scheduler_address
    hogs = start_hogs(args.hogs, 24 * 3600.0)
    runs = [(mode, r) for r in range(args.rounds) for mode in modes]
    differing: list[str] = []
    failed = 0
    try:
        time.sleep(0.5)

        def one(mode: str, r: int) -> tuple[str, int, str]:
            out = work / f"{mode}-{r}"
            path = HANGS if mode == "hangs" else SAMPLES
            extra = ["--dask", address, "--dask-chunk", mode[-1]] if mode.startswith("dask") else []
            t0 = time.monotonic()
            code, err = grade(path, out, extra, env)
            file = out / "results.json"
            if not file.is_file():
                return mode, r, f"no results.json (exit {code}): {err}"
            data = file.read_bytes()
            want = quiet["hangs" if mode == "hangs" else "samples"]
            took = time.monotonic() - t0
            if data == want:
                return mode, r, f"same ({took:.0f} s)"
            return mode, r, "DIFFERS: " + first_difference(json.loads(want), json.loads(data))

        with ThreadPoolExecutor(args.parallel) as pool:
            futures = [pool.submit(one, mode, r) for mode, r in runs]
            for future in as_completed(futures):
                mode, r, verdict = future.result()
                print(f"{mode} round {r + 1}: {verdict}", flush=True)
                if not verdict.startswith("same"):
                    differing.append(f"{mode} round {r + 1}: {verdict}")
                    failed += verdict.startswith("no results")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        if cluster is not None:
            cluster.close()
    elapsed = time.monotonic() - started
    print()
    for line in sorted(differing):
        print(line)
    per_mode = ", ".join(f"{m} {sum(1 for d in differing if d.startswith(m + ' '))}/{args.rounds}" for m in modes)
    print(
        f"{len(differing)} differing results out of {len(runs)} runs ({per_mode}; beside {args.hogs} CPU hogs, "
        f"{args.parallel} at once; {elapsed:.0f} s)"
    )
    print(f"reproduce: {command}")
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0 if not differing else 1


if __name__ == "__main__":
    sys.exit(main())
