"""Benchmark: one class graded locally, as N shards side by side then merged, and on a local Dask cluster.

Usage (from the repository root, with the ``dask`` extra installed)::

    python benchmarks/bench_scale.py --n 96 --shards 2 --workers 2

It generates N distinct submissions (mostly correct, some wrong, one in twelve
not importing) and grades them

* locally: ``grader grade CLASS --out local`` (``--jobs``: one per core);
* as ``--shards`` shards side by side: that many ``grade --shard K/N`` processes
  at once, each with ``--jobs`` = cores / shards (at least 1), then
  ``grader merge`` (its own cost is reported apart: it runs no student code);
* on a ``dask.distributed`` LocalCluster of ``--workers`` worker processes (one
  thread each), twice: a cold run (each worker starts its sandbox zygote) and a
  warm one (``--regrade``: the zygotes are kept).

Each mode's ``results.json`` must be the local run's, byte for byte (the
benchmark fails otherwise). Prints seconds and submissions per second per
mode; ``--json FILE`` also writes them. Every figure comes from this one run,
on this machine: on a shared machine, say so when quoting them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "submissions"  # the G14 pack's samples
MIX = (
    "correct_numpy",
    "correct_lists",
    "correct_numpy",
    "mib_decimal",
    "correct_numpy",
    "no_sqrt_dk",
    "correct_lists",
    "mask_after_softmax",
    "correct_numpy",
    "transposed_shapes",
    "starter",
    "syntax_error",
)


def make_class(folder: Path, n: int) -> Path:
    """``n`` students cycling through `MIX`, each file made distinct by a comment."""
    for i in range(n):
        name = MIX[i % len(MIX)]
        student = folder / f"s{i:05d}-{name}"
        student.mkdir(parents=True)
        (student / "attention.py").write_text((SAMPLES / name / "attention.py").read_text() + f"\n# {i}\n")
    return folder


def grader(*args: object) -> list[str]:
    return [sys.executable, "-m", "grader", *map(str, args)]


def timed(*commands: list[str]) -> float:
    """Run the commands side by side from the repository root; the wall-clock seconds until all succeeded."""
    start = time.perf_counter()
    procs = [
        subprocess.Popen(c, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in commands
    ]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"failed ({proc.returncode}): {' '.join(proc.args)}\n{err[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=96, help="submissions in the class (default 96)")
    parser.add_argument("--shards", type=int, default=2, help="shards run side by side (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes (default 2)")
    parser.add_argument("--chunk", type=int, default=8, help="--dask-chunk (default 8)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures here")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    rows: list[tuple[str, float, int]] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        base = Path(tmp)
        klass = make_class(base / "class", args.n)
        seconds = timed(grader("grade", klass, "--out", base / "local", "-q"))
        rows.append((f"local, --jobs {cores}", seconds, args.n))
        reference = (base / "local" / "results.json").read_bytes()

        per = max(1, cores // args.shards)
        shards = [base / f"shard{k}" for k in range(1, args.shards + 1)]
        seconds = timed(
            *[
                grader(
                    "grade",
                    klass,
                    "--out",
                    out,
                    "--shard",
                    f"{k}/{args.shards}",
                    "--jobs",
                    per,
                    "-q",
                )
                for k, out in enumerate(shards, start=1)
            ]
        )
        rows.append((f"{args.shards} shards side by side, --jobs {per} each", seconds, args.n))
        merge = timed(grader("merge", *shards, "--out", base / "merged", "-q"))
        rows.append(("  merge of the shards (no student code)", merge, args.n))
        rows.append(("  shards + merge", seconds + merge, args.n))
        assert (base / "merged" / "results.json").read_bytes() == reference, "the merge differs from the local run"

        try:
            from distributed import LocalCluster
        except ImportError:
            print(
                "dask.distributed is not installed (pip install '.[dask]'): no Dask figures",
                file=sys.stderr,
            )
        else:
            with LocalCluster(
                n_workers=args.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            ) as cluster:
                address = cluster.scheduler_address
                for label, extra in (("cold", []), ("warm", ["--regrade"])):
                    seconds = timed(
                        grader(
                            "grade",
                            klass,
                            "--out",
                            base / "dask",
                            "--dask",
                            address,
                            "--dask-chunk",
                            args.chunk,
                            "-q",
                            *extra,
                        )
                    )
                    rows.append(
                        (
                            f"Dask LocalCluster, {args.workers} workers x 1 thread, {label}",
                            seconds,
                            args.n,
                        )
                    )
                    assert (base / "dask" / "results.json").read_bytes() == reference, "Dask differs from local"
    print(f"{args.n} submissions, {cores} cores; results.json byte-identical in every mode")
    print(f"{'mode':58} {'seconds':>8} {'subs/s':>8}")
    for label, seconds, n in rows:
        print(f"{label:58} {seconds:8.2f} {n / seconds:8.1f}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "n": args.n,
                    "cores": cores,
                    "rows": [
                        {
                            "mode": m,
                            "seconds": round(s, 3),
                            "per_second": round(n / s, 2),
                        }
                        for m, s, n in rows
                    ],
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
