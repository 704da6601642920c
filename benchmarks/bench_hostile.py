"""Benchmark: the grader's own memory and CPU under hostile jobs, and fairness on a loaded machine.

Usage (from the repository root, as root, with the package installed)::

    python benchmarks/bench_hostile.py --n 40 --runs 20

Three measures, each printed with what it is compared with:

* **Flood.** A class of ``--n`` hostile submissions, each of which sends
  the grader the largest frames it can on every call (results of millions
  of numbers, forged frames with a length prefix near the 64 MiB cap,
  deep and wide junk), graded beside one honest classmate. Printed: the
  grader process's own peak RSS (``VmHWM`` of that process alone, not
  of the zygote and jobs) and its CPU seconds per submission, against the
  same figures for ``--n`` honest submissions. Bounded means: the flood's
  peak RSS stays within a fixed margin of the honest class's, whatever
  ``--n`` is, and its CPU per submission stays within a small multiple.
* **Fairness under load.** ``--runs`` times, a slow but correct
  submission (it burns 0.3 s of CPU in each G14.04 call, whose timeout is
  2 s) is graded beside a job-side CPU hog (threads spinning at import and
  in every call) while two outside processes keep both cores busy. The
  correct submission must keep full marks every time.
* The honest sibling of the flood keeps full marks.

Every figure comes from this one run, on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORRECT = (ROOT / "submissions" / "correct_numpy" / "attention.py").read_text()

FLOOD = '''
import os as _os

def _forge(n_bytes, deep=False):
    """Write one forged frame of about n_bytes on the result channel (fd 3 in the sandbox)."""
    if deep:
        body = b"[" * (n_bytes // 2) + b"]" * (n_bytes // 2)
    else:
        body = b"[" + b"0," * (n_bytes // 2 - 1) + b"0]"
    data = len(body).to_bytes(4, "big") + body
    try:
        view = memoryview(data)
        while view:
            view = view[_os.write(3, view):]
    except OSError:
        pass

import numpy as _np
_calls = [0]

def _huge(*args, **kwargs):
    """Each call: one forged frame near the 64 MiB cap (wide or deep junk), then two million numbers."""
    _calls[0] += 1
    _forge(60 << 20, deep=_calls[0] % 2 == 0)
    return _np.zeros((1414, 1414))

attention = scaled_scores = softmax = causal_mask = softmax_backward = _huge
score_array_bytes = bytes_to_mib = _huge
'''

HOG = """
import threading as _threading

def _spin():
    while True:
        pass

for _ in range(8):
    _threading.Thread(target=_spin, daemon=True).start()
"""

SLOW = """
import time as _time
_fast_backward = softmax_backward

def softmax_backward(p, u):
    end = _time.process_time() + 0.3
    while _time.process_time() < end:
        pass
    return _fast_backward(p, u)
"""

MEASURE = """
import json, sys, time
from grader.cli import main
start = time.process_time()
code = main(sys.argv[1:])
with open("/proc/self/status") as fh:  # this process's own peak (ru_maxrss may hold the parent's, after vfork)
    hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
print(json.dumps({"code": code, "cpu": time.process_time() - start, "maxrss_mib": hwm / 1024}))
"""


def write_class(folder: Path, sources: dict[str, str]) -> None:
    for name, source in sources.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "attention.py").write_text(source)


def grade(folder: Path, out: Path, jobs: int) -> dict:
    """Run ``grader grade`` in a fresh process; return its exit code, CPU seconds, peak RSS and results."""
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, "grade", str(folder), "--out", str(out), "-q", "--jobs", str(jobs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        figures = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise SystemExit(f"grader failed:\n{proc.stdout}\n{proc.stderr}") from None
    results = json.loads((out / "results.json").read_text())["submissions"]
    figures["scores"] = {s["id"]: s["score"] for s in results}
    figures["max_score"] = max((s["max_score"] for s in results), default=0.0)
    figures["errors"] = {s["id"]: s["error"] for s in results}
    return figures


def flood(base: Path, n: int, jobs: int) -> None:
    honest = base / "honest"
    write_class(honest, {f"h{i:03d}": CORRECT + f"\n# {i}\n" for i in range(n)})
    hostile = base / "flood"
    write_class(hostile, {**{f"f{i:03d}": CORRECT + FLOOD + f"\n# {i}\n" for i in range(n)}, "sibling": CORRECT})
    a = grade(honest, base / "out-honest", jobs)
    b = grade(hostile, base / "out-flood", jobs)
    print(
        f"honest class: {n} submissions; grader peak RSS {a['maxrss_mib']:.0f} MiB, "
        f"{1000 * a['cpu'] / n:.1f} ms of grader CPU per submission"
    )
    print(
        f"flood class: {n} hostile + 1 honest; grader peak RSS {b['maxrss_mib']:.0f} MiB, "
        f"{1000 * b['cpu'] / (n + 1):.1f} ms of grader CPU per submission; "
        f"the honest sibling scored {b['scores']['sibling']:g}/{b['max_score']:g}"
    )
    sample = b["errors"].get("f000", "")
    print(f"  a flooder's result: score {b['scores']['f000']:g}; error {sample!r}")


def fairness(base: Path, runs: int, jobs: int) -> None:
    folder = base / "fair"
    write_class(
        folder,
        {"slow_correct": CORRECT + SLOW, "hog": CORRECT.replace("import numpy as np", "import numpy as np" + HOG, 1)},
    )
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    scores, full_marks = [], 0.0
    try:
        for run in range(runs):
            out = base / f"out-fair-{run}"
            figures = grade(folder, out, jobs)
            scores.append(figures["scores"]["slow_correct"])
            full_marks = figures["max_score"]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    full = sum(1 for s in scores if s == full_marks)
    print(
        f"fairness under load ({len(hogs)} outside CPU hogs, a job-side hog graded beside): the slow but correct "
        f"submission scored {full_marks:g}/{full_marks:g} in {full} of {runs} runs (scores: {sorted(set(scores))})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=40, help="submissions per class (default: 40)")
    parser.add_argument("--runs", type=int, default=20, help="fairness runs (default: 20)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; n={args.n}, jobs={args.jobs}")
    base = Path(tempfile.mkdtemp(prefix="bench-hostile-", dir="/tmp"))
    os.chmod(base, 0o755)
    try:
        flood(base, args.n, args.jobs)
        if args.runs:
            fairness(base, args.runs, args.jobs)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
