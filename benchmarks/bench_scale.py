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
  thread each), three times: a cold run (each worker starts its sandbox zygote),
  a warm one (``--regrade``: the zygotes are kept), and a warm one with
  ``--dask-judge`` (the workers judge and score; result records come back).

Each mode's ``results.json`` must be the local run's, byte for byte (the
benchmark fails otherwise). Prints seconds, submissions per second and CPU
milliseconds per submission by role: the grader's process tree (for Dask: the
client, which starts no job), the Dask scheduler (this process) and the workers
(each worker process with its sandbox zygote and jobs); ``--json FILE`` also
writes them. Every figure comes from this one run, on this machine: on a shared
machine, say so when quoting them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _tree_cpu(pids: list[int]) -> float:
    """CPU seconds of these processes and their descendants (those reaped by a live one included)."""
    import psutil  # type: ignore[import-untyped]  # installed with distributed (the dask extra)

    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for p in [proc, *proc.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def timed(*commands: list[str], workers: list[int] | None = None) -> tuple[float, dict[str, float]]:
    """Run the commands side by side from the repository root; the wall-clock seconds until all succeeded,
    and the CPU seconds by role: ``grader`` (the commands' process trees), ``scheduler`` (this process,
    which hosts a LocalCluster's scheduler), ``workers`` (the processes ``workers`` names, and theirs)."""
    cpu0, own0, workers0 = _children_cpu(), _own_cpu(), _tree_cpu(workers or [])
    start = time.perf_counter()
    procs = [
        subprocess.Popen(c, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in commands
    ]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"failed ({proc.returncode}): {' '.join(proc.args)}\n{err[-2000:]}")
    seconds = time.perf_counter() - start
    cpu = {"grader": _children_cpu() - cpu0}
    if workers is not None:
        cpu["scheduler"] = _own_cpu() - own0
        cpu["workers"] = _tree_cpu(workers) - workers0
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=96, help="submissions in the class (default 96)")
    parser.add_argument("--shards", type=int, default=2, help="shards run side by side (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes (default 2)")
    parser.add_argument("--chunk", type=int, default=8, help="--dask-chunk (default 8)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures here")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    rows: list[tuple[str, float, int, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        base = Path(tmp)
        klass = make_class(base / "class", args.n)
        seconds, cpu = timed(grader("grade", klass, "--out", base / "local", "-q"))
        rows.append((f"local, --jobs {cores}", seconds, args.n, cpu))
        reference = (base / "local" / "results.json").read_bytes()

        per = max(1, cores // args.shards)
        shards = [base / f"shard{k}" for k in range(1, args.shards + 1)]
        seconds, cpu = timed(
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
        rows.append((f"{args.shards} shards side by side, --jobs {per} each", seconds, args.n, cpu))
        merge, merge_cpu = timed(grader("merge", *shards, "--out", base / "merged", "-q"))
        rows.append(("  merge of the shards (no student code)", merge, args.n, merge_cpu))
        rows.append(("  shards + merge", seconds + merge, args.n, {}))
        assert (base / "merged" / "results.json").read_bytes() == reference, "the merge differs from the local run"

        try:
            import psutil  # type: ignore[import-untyped]  # installed with distributed
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
                pids = [p.pid for p in psutil.Process().children() if p.name().startswith("python")]
                for label, extra in (
                    ("cold", []),
                    ("warm", ["--regrade"]),
                    ("warm, --dask-judge", ["--regrade", "--dask-judge"]),
                ):
                    seconds, cpu = timed(
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
                        ),
                        workers=pids,
                    )
                    rows.append(
                        (
                            f"Dask LocalCluster, {args.workers} workers x 1 thread, {label}",
                            seconds,
                            args.n,
                            {"client" if k == "grader" else k: v for k, v in cpu.items()},
                        )
                    )
                    assert (base / "dask" / "results.json").read_bytes() == reference, "Dask differs from local"
    print(f"{args.n} submissions, {cores} cores; results.json byte-identical in every mode")
    print(f"{'mode':58} {'seconds':>8} {'subs/s':>8}  CPU ms/sub by role")
    for label, seconds, n, cpu in rows:
        roles = ", ".join(f"{role} {1000 * value / n:.1f}" for role, value in cpu.items())
        print(f"{label:58} {seconds:8.2f} {n / seconds:8.1f}  {roles}")
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
                            "cpu_ms_per_submission": {role: round(1000 * v / n, 2) for role, v in cpu.items()},
                        }
                        for m, s, n, cpu in rows
                    ],
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
