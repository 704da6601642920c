"""Benchmark: grade a generated class, and compare with a pytest-per-submission baseline.

Usage (from the repository root, with the package installed)::

    python benchmarks/bench_grade.py --n 1000 --jobs 2 --baseline 20

It generates N submissions (correct numpy, correct pure Python, wrong,
crashing and two hanging ones) as a zip export, and prints:

* throughput on N correct numpy submissions (``grader grade DIR --jobs J``);
* the mixed class zip: submissions per second and per-submission time,
  and what it wrote (CSV gradebook, Gradescope files, JUnit XML, summary
  page, feedback pages), checked to hold every student;
* the grader's peak RSS (MiB), from ``wait4`` on the grader process, which
  includes its children (zygote, jobs);
* the cost of a hanging submission (its grading time minus a correct
  submission's, medians of 5 runs) against the sum of its timeouts;
* the baseline: ``pytest benchmarks/pytest_baseline.py`` once per
  submission, 2 at a time, on ``--baseline`` correct numpy submissions.

Every figure comes from this one run, on this machine.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "submissions"
MIX = (  # (sample, share of the class)
    ("correct_numpy", 0.55),
    ("correct_lists", 0.15),
    ("mib_decimal", 0.05),
    ("no_sqrt_dk", 0.05),
    ("mask_after_softmax", 0.05),
    ("unnormalized_scores", 0.05),
    ("starter", 0.05),
    ("syntax_error", 0.05),
)


def write_class(folder: Path, n: int, mix: tuple[tuple[str, float], ...], hanging: int = 0) -> list[Path]:
    """Write n student folders (each file unique by a comment); return their files."""
    files = []
    names = [name for name, share in mix for _ in range(max(1, round(share * n)))][:n]
    names += [mix[0][0]] * (n - len(names))
    names = names[: n - hanging] + ["hangs"] * hanging
    for i, name in enumerate(names):
        student = folder / f"s{i:05d}-{name}"
        student.mkdir(parents=True)
        source = (SAMPLES / name / "attention.py").read_text()
        (student / "attention.py").write_text(source + f"\n# student {i}\n")
        files.append(student / "attention.py")
    return files


def run_grader(args: list[str]) -> tuple[float, float]:
    """Run ``grader`` (as ``python -m grader``); return (seconds, peak RSS in MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"grader {' '.join(args)} failed with status {status}")
    return seconds, usage.ru_maxrss / 1024


def outputs_written(out: Path, n: int) -> str:
    """Check what a graded class wrote for its n students; say it in one line.

    Raises
    ------
    AssertionError
        If an export is missing or does not hold every student.
    """
    with (out / "gradebook.csv").open(newline="") as fh:
        rows = list(csv.reader(fh))
    gradescope = list((out / "gradescope").glob("*.json"))
    junit = ET.parse(out / "junit.xml").getroot()
    cases = len(junit.findall("./testsuite/testcase"))
    charts = (out / "summary.html").read_text().count("<svg")
    pages = len(list(out.glob("*.html"))) - 2  # index.html and summary.html
    assert len(rows) == n + 1 and len(gradescope) == n and pages == n, (len(rows), len(gradescope), pages)
    assert cases == int(junit.get("tests")) and cases % n == 0 and charts >= 3, (cases, charts)
    return (
        f"wrote gradebook.csv ({len(rows) - 1} students), gradescope/ ({len(gradescope)} files), junit.xml "
        f"({cases} testcases), summary.html ({charts} charts), {pages} feedback pages"
    )


def baseline(files: list[Path], jobs: int = 2) -> float:
    """Seconds for one pytest process per submission, ``jobs`` at a time."""

    def one(path: Path) -> None:
        env = dict(os.environ, GRADER_BASELINE_SUBMISSION=str(path))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(ROOT / "benchmarks" / "pytest_baseline.py"),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )

    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, files))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="submissions in the class (default 1000)")
    parser.add_argument("--jobs", type=int, default=2, help="grader --jobs (default 2)")
    parser.add_argument("--baseline", type=int, default=20, help="submissions for the pytest baseline (default 20)")
    parser.add_argument("--extra", nargs="*", default=[], help="extra grader options, e.g. --insecure")
    a = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grader-bench-"))
    try:
        print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; n={a.n}, jobs={a.jobs}")
        numpy_files = write_class(work / "numpy", a.n, (("correct_numpy", 1.0),))
        secs, rss = run_grader(
            ["grade", str(work / "numpy"), "--out", str(work / "out-numpy"), "-q", "--jobs", str(a.jobs), *a.extra]
        )
        rate = a.n / secs
        print(
            f"correct numpy: {a.n} in {secs:.1f} s = {rate:.1f} submissions/s "
            f"({1000 * secs / a.n * a.jobs:.1f} ms per submission per worker); peak RSS {rss:.0f} MiB"
        )

        write_class(work / "mixed", a.n, MIX, hanging=2)
        archive = work / "class.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted((work / "mixed").rglob("attention.py")):
                zf.write(path, path.relative_to(work / "mixed"))
        secs_mixed, rss_mixed = run_grader(
            ["grade", str(archive), "--out", str(work / "out-mixed"), "-q", "--jobs", str(a.jobs), *a.extra]
        )
        print(
            f"mixed class zip (2 hanging): {a.n} in {secs_mixed:.1f} s = {a.n / secs_mixed:.1f} submissions/s; "
            f"peak RSS {rss_mixed:.0f} MiB"
        )
        print(f"  {outputs_written(work / 'out-mixed', a.n)}")

        write_class(work / "hang", 1, (("hangs", 1.0),), hanging=1)
        write_class(work / "nohang", 1, (("correct_numpy", 1.0),))
        t_hang, t_ok = [], []
        for i in range(5):  # interleaved; a fresh --out each time, so no result comes from the gradebook
            t_hang.append(run_grader(["grade", str(work / "hang"), "--out", str(work / f"h{i}"), "-q", *a.extra])[0])
            t_ok.append(run_grader(["grade", str(work / "nohang"), "--out", str(work / f"c{i}"), "-q", *a.extra])[0])
        hang, ok = statistics.median(t_hang), statistics.median(t_ok)
        print(
            f"one hanging submission: {hang:.2f} s against {ok:.2f} s for a correct one (medians of 5 runs): "
            f"it costs {hang - ok:.2f} s more, and its hanging checks have 4 x 2 s = 8 s of timeouts"
        )

        sample = numpy_files[: a.baseline]
        secs_base = baseline(sample)
        base_rate = len(sample) / secs_base
        print(
            f"baseline (pytest per submission, 2 at a time): {len(sample)} in {secs_base:.1f} s = "
            f"{base_rate:.2f} submissions/s"
        )
        print(f"speed-up on correct numpy submissions: {rate / base_rate:.0f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
