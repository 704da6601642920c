"""Benchmark: the grader against the limits of this machine, side by side in one process tree.

Usage (from the repository root, with the package installed)::

    python benchmarks/bench_limits.py --n 1000 --repeats 3 --rss 1000,5000,10000 --big 80

It writes N correct numpy submissions (each file unique by a comment) and
grades them, in interleaved repeats (each repeat runs every mode once, in a
rotated order, so load elsewhere on the machine falls on every mode alike):

``in-process``
    one process imports each submission and makes its calls itself, then
    judges them with the grader's own check kinds: no isolation at all (the
    rate of one process; the others use ``--jobs`` processes);
``bare fork``
    ``--jobs`` lanes, each a numpy-loaded process that ``os.fork()``\\ s a
    child per submission; the child imports it, makes the same calls and
    sends their values back as JSON on a pipe; the lane judges them;
``sandboxed``
    ``grader grade DIR --out OUT -q --jobs J``, as an instructor runs it
    (start-up, preflight, reports, exports and gradebook included);
``--insecure``
    the same with ``--insecure`` (no sandbox);
``pytest``
    one plain ``pytest`` session over the same checks, one test per
    (submission, check), importing every submission into the test process:
    no isolation, no per-call timeout, no reports.

It prints each mode's submissions/s (min / median / max over the repeats)
and the ratios of the medians; the grader's CPU per submission (its whole
process tree, from ``wait4``); with ``--rss``, the peak RSS of ``grader
grade`` (sandboxed) at each class size (``wait4``'s ``ru_maxrss``: the
largest process of the tree, the grader's own; started from a small process,
see `SPAWN`); with ``--big K``, what a
``compare`` check on 512x64 Q, K and V costs: its CPU per added submission
(the marginal cost) and per run (the fixed cost: preparing its expected
value and error bound), each split into the grader's own process and the
jobs (the sandbox's zygote and the jobs it forks), from runs of 1 and of K
submissions with and without the check, in ``--big-repeats`` interleaved rounds
(medians, and each round's figure for the spread: `big_cost`), and the floor under it: the student's
``attention`` alone on the same lists in a bare fork (`big_floor`).

Every mode is timed the same way: the wall-clock time of its own process
tree, from its start to its exit (the interpreter, imports, loading the specs
and preparing the reference values included, as they are in ``grader
grade`` and in the pytest session). Until 2026-12-01 the in-process and
bare-fork modes were timed from inside, after their start-up (about 0.5 s
on this machine), which favoured them by about 6% at n=1000.

Every figure comes from this one run, on this machine: compare ratios, not
absolute rates, between machines or busy moments.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, GRADER_COURSE_SECRET=os.environ.get("GRADER_COURSE_SECRET", "bench-limits-secret"))
MODES = ("in-process", "bare fork", "sandboxed", "--insecure", "pytest")


def sample_source(name: str = "correct_numpy") -> str:
    """The sample submission's text (wherever the course keeps its samples)."""
    for candidate in [ROOT / "submissions" / name / "attention.py", *sorted(ROOT.glob(f"**/{name}/attention.py"))]:
        if candidate.is_file() and ".venv" not in candidate.parts:
            return candidate.read_text()
    raise SystemExit(f"no sample {name}/attention.py under {ROOT}")


def write_class(folder: Path, n: int) -> list[Path]:
    """Write n student folders of correct numpy code, each file unique by a comment; return their files."""
    source = sample_source()
    files = []
    for i in range(n):
        student = folder / f"s{i:05d}"
        student.mkdir(parents=True)
        (student / "attention.py").write_text(source + f"\n# student {i}\n")
        files.append(student / "attention.py")
    return files


# --- the modes that run in a child of this script (python bench_limits.py --run MODE DIR) ---------------------------


def _collected(specs: str | None = None, reference: str | None = None):
    """The grader's prepared checks (every check, hidden ones included), as ``grade`` prepares them."""
    from grader.config.core import Config
    from grader.config.parser import build_parser
    from grader.config.plugins import get_plugin_manager
    from grader.grading import session

    pm = get_plugin_manager(load_entrypoints=False)
    argv = ["grade", "x.py", "--insecure"]
    argv += ["--specs", specs] if specs else []
    argv += ["--reference", reference] if reference else []
    config = Config("grade", build_parser(pm).parse_args(argv), pm)
    return session.collect(config)


def _plain(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _load(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _call_all(module, calls) -> list:
    """Each call's outcome as plain data: ["returned", value] or ["raised", type, is ValueError]."""
    out = []
    for call in calls:
        try:
            value = getattr(module, call.function)(*json.loads(json.dumps(list(call.args))))
        except Exception as exc:  # noqa: BLE001 - judged like the grader judges
            out.append(["raised", type(exc).__name__, isinstance(exc, ValueError)])
            continue
        out.append(["returned", _plain(value)])
    return out


def fork_calls(path: Path, calls) -> tuple[int, list]:
    """One forked child loads ``path``, makes ``calls`` and sends their values as JSON over a pipe.

    Returns the child's wait status and the decoded values (the bare-fork floor's whole protocol).
    """
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_fd)
        data = json.dumps(_call_all(_load(path), calls)).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
        os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 1 << 20):
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(child, 0)
    return status, json.loads(b"".join(chunks))


def _judge_all(collected, outcomes: list) -> int:
    """Judge every check of one submission; return how many did not pass."""
    from grader.grading.judging import judge
    from grader.models import CallResult

    results = [
        CallResult("returned", value=o[1])
        if o[0] == "returned"
        else CallResult("raised", error_type=o[1], value_error=o[2])
        for o in outcomes
    ]
    failed = 0
    for _exercise, pc, mine in collected.split(results):
        verdict = judge(pc.check, pc.prepared, mine, pc.kind, pc.context)
        failed += verdict.status != "passed"
    return failed


def run_in_process(files: list[Path]) -> float:
    collected = _collected()
    calls = collected.calls
    start = time.perf_counter()
    for path in files:
        if _judge_all(collected, _call_all(_load(path), calls)):
            raise SystemExit(f"{path}: not every check passed in-process")
    return time.perf_counter() - start


def run_bare_fork(files: list[Path], jobs: int) -> float:
    collected = _collected()
    calls = collected.calls
    start = time.perf_counter()
    lanes = []
    for lane in range(jobs):
        pid = os.fork()
        if pid == 0:  # a lane: one child per submission, judged here
            code = 0
            try:
                for path in files[lane::jobs]:
                    _, values = fork_calls(path, calls)
                    if _judge_all(collected, values):
                        code = 3
            except BaseException:  # noqa: BLE001 - the lane's exit code says it failed
                code = 4
            os._exit(code)
        lanes.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in lanes]
    if any(codes):
        raise SystemExit(f"a bare-fork lane failed: exit codes {codes}")
    return time.perf_counter() - start


PYTEST_FILE = '''\
"""One plain pytest session over the grader's checks: a test per (submission, check), no isolation."""
import importlib.util
import json
import os
from pathlib import Path

import pytest

from bench_limits import _collected, _plain
from grader.grading.judging import judge
from grader.models import CallResult

FILES = sorted(Path(os.environ["BENCH_CLASS"]).glob("*/attention.py"))
COLLECTED = _collected()
CHECKS = [(exercise, pc) for exercise, items in COLLECTED.checks for pc in items]
_MODULES = {}


def _module(path):
    if path not in _MODULES:
        spec = importlib.util.spec_from_file_location("attention", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULES.clear()
        _MODULES[path] = module
    return _MODULES[path]


@pytest.mark.parametrize("path", FILES, ids=[p.parent.name for p in FILES])
@pytest.mark.parametrize("index", range(len(CHECKS)), ids=[f"{e.id}-{pc.check.id}" for e, pc in CHECKS])
def test_check(path, index):
    exercise, pc = CHECKS[index]
    module = _module(path)
    results = []
    for call in pc.prepared.calls:
        try:
            value = getattr(module, call.function)(*json.loads(json.dumps(list(call.args))))
        except Exception as exc:
            results.append(CallResult("raised", error_type=type(exc).__name__, value_error=isinstance(exc, ValueError)))
        else:
            results.append(CallResult("returned", value=_plain(value)))
    verdict = judge(pc.check, pc.prepared, results, pc.kind, pc.context)
    assert verdict.status == "passed", verdict.message
'''


def _child(mode: str, folder: Path, jobs: int) -> None:
    files = sorted(folder.glob("*/attention.py"))
    seconds = run_in_process(files) if mode == "in-process" else run_bare_fork(files, jobs)
    print(json.dumps({"seconds": seconds}))


# --- the parent ---------------------------------------------------------------------------------------------------


def _wait(proc: subprocess.Popen) -> tuple[float, float, float, int]:
    """(seconds, CPU seconds of the tree, peak RSS in MiB, exit code) of a process started just now."""
    start = time.perf_counter()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


SPAWN = """\
import json, os, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
seconds = time.perf_counter() - start
print(json.dumps([os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, seconds]))
"""
"""Runs a command from a small process and prints its exit code, CPU seconds, peak RSS (MiB) and wall seconds.

The wall time is the command's own, from its start to its exit, as the other modes are timed (not
this small process's start-up, about 30 ms).

A process's ``ru_maxrss`` keeps the high-water mark of the memory it had before its ``exec``: the
copy of the process that forked it. Forked from this script, which by then may hold a large class's
``results.json``, ``grader grade`` would be charged this script's memory; forked from this small
process, it is charged its own."""


def grade(folder: Path, out: Path, jobs: int, extra: list[str]) -> tuple[float, float, float]:
    """Run ``grader grade``; return (seconds, CPU seconds, peak RSS MiB); check every submission got full marks."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "-q", "--jobs", str(jobs)]
    proc = subprocess.Popen(
        [sys.executable, "-c", SPAWN, *command, *extra],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _wait(proc)
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code, cpu, rss, seconds = (
        json.loads(proc.stdout.read().decode().strip().splitlines()[-1]) if proc.stdout else (1, 0, 0, 0)
    )
    if code != 0:
        raise SystemExit(f"grader grade {' '.join(extra)} exited {code}: {stderr[-2000:]}")
    _full_marks_everywhere(out, extra)
    return seconds, cpu, rss


def _full_marks_everywhere(out: Path, extra: list[str]) -> None:
    """Stop unless every submission in ``out/results.json`` got full marks."""
    with (out / "results.json").open() as fh:
        subs = json.load(fh)["submissions"]
    short = [s["id"] for s in subs if s["score"] != s["max_score"]]
    if short:
        raise SystemExit(f"grader grade {' '.join(extra)}: {len(short)} submissions without full marks ({short[:3]})")


def run_mode(mode: str, folder: Path, work: Path, jobs: int) -> tuple[float, float]:
    """One run of one mode over the class: (seconds, CPU seconds of its process tree)."""
    if mode in ("sandboxed", "--insecure"):
        seconds, cpu, _ = grade(folder, work / "out", jobs, ["--insecure"] if mode == "--insecure" else [])
        return seconds, cpu
    if mode == "pytest":
        test = work / "test_bench_class.py"
        test.write_text(PYTEST_FILE)
        env = dict(
            ENV,
            BENCH_CLASS=str(folder),
            PYTHONPATH=os.pathsep.join([str(ROOT / "benchmarks"), ENV.get("PYTHONPATH", "")]),
        )
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:grader",
                "--rootdir",
                str(work),
                str(test),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        seconds, cpu, _, code = _wait(proc)
        if code != 0:
            raise SystemExit(f"the pytest session failed ({code}): {proc.stdout.read().decode()[-2000:]}")
        return seconds, cpu
    proc = subprocess.Popen(
        [sys.executable, __file__, "--run", mode, str(folder), "--jobs", str(jobs)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
    )
    seconds, cpu, _, code = _wait(proc)
    if code != 0:
        raise SystemExit(f"{mode} failed ({code})")
    json.loads(proc.stdout.read())  # the child's own figure; the process's wall time is what counts (see above)
    return seconds, cpu


BIG_SPEC = """\
exercise: BIG.01
title: One large attention call
section: "benchmark"
seed: 9901
returns:
  softmax: [weights]
  attention: [outputs, weights]
defaults:
  timeout: 10
  visibility: hidden
  points: 1
  hint: the benchmark's check
checks:
  - id: tiny
    kind: compare
    function: softmax
    args:
      scores: [1.0, 2.0, 3.0]
{big}"""
BIG_CHECK = """\
  - id: big-512x64
    kind: compare
    function: attention
    args:
      Q: {normal: [512, 64]}
      K: {normal: [512, 64]}
      V: {normal: [512, 64]}
"""


RUSAGE_WRAPPER = """\
import atexit, json, os, resource, sys
def _write():
    u = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["BENCH_RUSAGE"], "w") as fh:
        json.dump({"parent": u.ru_utime + u.ru_stime}, fh)
atexit.register(_write)
sys.argv = ["grader", *sys.argv[1:]]
from grader.cli.launch import console_main
console_main()
"""
"""Runs ``grader`` as its script does (`grader.cli.launch`: the zygote started first, the collector paused during
start-up, the fast exit) and writes the CPU seconds of its own process at exit, as ``{"parent": seconds}`` in the
file ``BENCH_RUSAGE`` names (the rest of the tree: the jobs)."""


def grade_command(folder: Path, out: Path, jobs: int | None, extra: list[str]) -> list[str]:
    """``grader grade FOLDER --out OUT -q --jobs JOBS EXTRA...`` run through `RUSAGE_WRAPPER` (``jobs``
    None: no ``--jobs``, the grader's default)."""
    return [
        sys.executable,
        "-c",
        RUSAGE_WRAPPER,
        "grade",
        str(folder),
        "--out",
        str(out),
        "-q",
        *(["--jobs", str(jobs)] if jobs is not None else []),
        *extra,
    ]


def grade_split(folder: Path, out: Path, jobs: int, extra: list[str], work: Path) -> tuple[float, float]:
    """Run ``grader grade`` (every submission must get full marks); return (CPU seconds of the whole
    process tree, of the grader's own process)."""
    shutil.rmtree(out, ignore_errors=True)
    usage = work / "rusage.txt"
    proc = subprocess.Popen(
        grade_command(folder, out, jobs, extra),
        cwd=ROOT,
        env=dict(ENV, BENCH_RUSAGE=str(usage)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, cpu, _, code = _wait(proc)
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if code != 0:
        raise SystemExit(f"grader grade {' '.join(extra)} exited {code}: {stderr[-2000:]}")
    _full_marks_everywhere(out, extra)
    return cpu, float(json.loads(usage.read_text())["parent"])


def big_cost(work: Path, n: int, jobs: int, repeats: int = 9) -> dict[str, Any]:
    """What one 512x64 compare check costs, from runs of 1 and ``n`` submissions with and without it.

    Each of ``repeats`` rounds runs the four configurations (with and without the check, 1 and
    ``n`` submissions) once, in an order rotated from round to round, so that load elsewhere on the
    machine falls on every configuration alike. Each round gives its own marginal cost, the check's
    added CPU per added submission, ``((with_n - with_1) - (without_n - without_1)) / (n - 1)``; its
    fixed cost, what it adds to a run beyond that, ``(with_1 - without_1) - marginal``; and its cost
    per submission over the run of ``n``, ``(with_n - without_n) / n``. Each figure returned is the
    median of the rounds' (each round's four runs are paired: a slow minute moves them together).

    Returns
    -------
    dict
        ``marginal`` (ms per submission) and ``fixed`` (s per run), each as (whole tree, grader
        process, jobs), medians of the rounds; ``at_n`` (ms per submission of the run of ``n``,
        fixed cost included), likewise; ``rounds``: each round's marginal cost of the whole tree
        (ms per submission, in the order run), for the spread.
    """
    if n < 2:
        raise SystemExit("--big needs at least 2 submissions (the marginal cost is from runs of 1 and of K)")
    reference = next(
        p
        for p in [ROOT / "reference" / "attention.py", *sorted(ROOT.glob("**/reference/attention.py"))]
        if p.is_file() and ".venv" not in p.parts
    )
    folders = {1: work / "big-class-1", n: work / f"big-class-{n}"}
    for size, folder in folders.items():
        write_class(folder, size)
    extras = {}
    for label, big in (("without", ""), ("with", BIG_CHECK)):
        specs = work / f"big-specs-{label}"
        specs.mkdir()
        (specs / "BIG.01.yaml").write_text(BIG_SPEC.format(big=big))
        extras[label] = ["--specs", str(specs), "--reference", str(reference), "--no-diagnosis"]
    configs = [(label, size) for label in ("without", "with") for size in (1, n)]
    marginal: list[list[float]] = []
    fixed: list[list[float]] = []
    at_n: list[list[float]] = []
    for r in range(repeats):
        cpu: dict[tuple[str, int], tuple[float, float, float]] = {}
        for label, size in configs[r % 4 :] + configs[: r % 4]:
            total, own = grade_split(folders[size], work / "big-out", jobs, extras[label], work)
            cpu[label, size] = (total, own, total - own)
        m = [
            ((cpu["with", n][i] - cpu["with", 1][i]) - (cpu["without", n][i] - cpu["without", 1][i])) / (n - 1)
            for i in range(3)
        ]
        marginal.append([1000 * x for x in m])
        fixed.append([(cpu["with", 1][i] - cpu["without", 1][i]) - m[i] for i in range(3)])
        at_n.append([1000 * (cpu["with", n][i] - cpu["without", n][i]) / n for i in range(3)])

    def medians(rows: list[list[float]]) -> tuple[float, ...]:
        return tuple(statistics.median(column) for column in zip(*rows))

    return {
        "marginal": medians(marginal),
        "fixed": medians(fixed),
        "at_n": medians(at_n),
        "rounds": [row[0] for row in marginal],
    }


BIG_FLOOR = """\
import importlib.util, json, os, statistics, sys
import numpy as np
rng = np.random.default_rng(9901)
Q, K, V = (rng.standard_normal((512, 64)).tolist() for _ in range(3))
path, runs = sys.argv[1], int(sys.argv[2])
def fork(call):
    pid = os.fork()
    if pid == 0:
        spec = importlib.util.spec_from_file_location("attention", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if call:
            module.attention(Q, K, V)
        os._exit(0)
    _, _, usage = os.wait4(pid, 0)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt
pairs = [(fork(False), fork(True)) for _ in range(runs)]
print(json.dumps([statistics.median(b[0] - a[0] for a, b in pairs), statistics.median(b[1] - a[1] for a, b in pairs)]))
"""
"""The student-only floor of the 512x64 check: a numpy-loaded process that already holds Q, K and V as
lists forks ``runs`` times a child that imports the sample and calls its ``attention``, and as many a
child that only imports it; prints the medians of the differences (CPU seconds, minor page faults)."""


def big_floor(runs: int = 30) -> dict[str, tuple[float, float]]:
    """The student's own ``attention(Q, K, V)`` on 512x64 lists in a bare fork (`BIG_FLOOR`): (CPU ms, faults),
    in a plain environment (``plain``) and in the jobs' (``jobs``: ``grader.execution.servers.CHILD_ENV``)."""
    from grader.execution.servers import CHILD_ENV

    source = ROOT / "submissions" / "correct_numpy" / "attention.py"
    if not source.is_file():
        source = next(p for p in sorted(ROOT.glob("**/correct_numpy/attention.py")) if ".venv" not in p.parts)
    floors = {}
    for label, env in (("plain", {"OPENBLAS_NUM_THREADS": "1"}), ("jobs", CHILD_ENV)):
        out = subprocess.run(
            [sys.executable, "-c", BIG_FLOOR, str(source), str(runs)],
            env=dict(env, PATH=os.environ.get("PATH", "")),
            capture_output=True,
            check=True,
        )
        seconds, faults = json.loads(out.stdout)
        floors[label] = (1000 * seconds, faults)
    return floors


def _spread(values: list[float]) -> str:
    return f"{min(values):7.1f} / {statistics.median(values):7.1f} / {max(values):7.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="submissions in the class (default 1000)")
    parser.add_argument("--jobs", type=int, default=2, help="grader --jobs and bare-fork lanes (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats of every mode (default 3)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of: {', '.join(MODES)}")
    parser.add_argument("--rss", default="", help="class sizes for the sandboxed peak RSS, e.g. 1000,5000,10000")
    parser.add_argument(
        "--big", type=int, default=0, help="submissions (at least 2) for the 512x64 compare check's cost (0: skip)"
    )
    parser.add_argument(
        "--big-repeats", type=int, default=9, help="rounds of the --big runs, each round its four runs (default 9)"
    )
    parser.add_argument("--run", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.run:
        _child(a.run[0], Path(a.run[1]), a.jobs)
        return
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}")
    work = Path(tempfile.mkdtemp(prefix="grader-limits-"))
    try:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(
            f"machine: {os.cpu_count()} cores, load average {load:.1f}; python {sys.version.split()[0]}; "
            f"n={a.n}, jobs={a.jobs}, repeats={a.repeats}"
        )
        folder = work / "class"
        write_class(folder, a.n)
        rates: dict[str, list[float]] = {m: [] for m in modes}
        cpu_ms: dict[str, list[float]] = {m: [] for m in modes}
        for r in range(a.repeats):
            order = modes[r % len(modes) :] + modes[: r % len(modes)]
            for mode in order:
                seconds, cpu = run_mode(mode, folder, work, a.jobs)
                rates[mode].append(a.n / seconds)
                cpu_ms[mode].append(1000 * cpu / a.n)
        print(f"{'mode':<12} {'subs/s min / median / max':>27}   CPU ms/sub (median, whole process tree)")
        for mode in modes:
            print(f"{mode:<12} {_spread(rates[mode]):>27}   {statistics.median(cpu_ms[mode]):6.1f}")
        med = {m: statistics.median(v) for m, v in rates.items()}
        pairs = [
            ("sandboxed", "bare fork"),
            ("sandboxed", "pytest"),
            ("--insecure", "sandboxed"),
            ("--insecure", "pytest"),
            ("sandboxed", "in-process"),
        ]
        shown = [f"{x} / {y} = {med[x] / med[y]:.2f}x" for x, y in pairs if x in med and y in med]
        if shown:
            print("ratios of the medians: " + "; ".join(shown))
        if a.rss:
            sizes = [int(s) for s in a.rss.split(",") if s.strip()]
            figures = []
            for size in sizes:
                big = work / f"rss-{size}"
                write_class(big, size)
                seconds, _, rss = grade(big, work / "rss-out", a.jobs, [])
                figures.append(f"{size}: {rss:.0f} MiB ({size / seconds:.0f}/s)")
                shutil.rmtree(big, ignore_errors=True)
            print("peak RSS of grader grade (sandboxed): " + "; ".join(figures))
        if a.big:
            big = big_cost(work, a.big, a.jobs, a.big_repeats)
            m, f, at = big["marginal"], big["fixed"], big["at_n"]
            print(
                f"a compare check on 512x64 Q, K, V: {m[0]:.1f} ms of CPU per added submission "
                f"(grader {m[1]:.1f}, jobs {m[2]:.1f}) and {f[0]:.2f} s per run (grader {f[1]:.2f}, jobs {f[2]:.2f}); "
                f"{at[0]:.1f} ms per submission over a run of {a.big} (medians of {a.big_repeats} rounds, each "
                f"of runs of 1 and {a.big} submissions with and without it; per added submission, each round: "
                f"{', '.join(f'{x:.1f}' for x in big['rounds'])}; min / median / max {_spread(big['rounds']).strip()})"
            )
            floor = big_floor()
            print(
                f"the student's attention alone on those lists, in a bare fork of a numpy-loaded process that holds "
                f"them: {floor['plain'][0]:.1f} ms of CPU and {floor['plain'][1]:.0f} page faults "
                f"({floor['jobs'][0]:.1f} ms and {floor['jobs'][1]:.0f} with the jobs' environment, malloc settings "
                "included; medians of 30 forks)"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
