"""Benchmark: the grader against the calls-only floor, interleaved in one process tree, CPU split by role.

Usage (from the repository root, as root, with the package installed)::

    python benchmarks/bench_floor.py --subs 1000 --rounds 3
    python benchmarks/bench_floor.py --quick            # 100 submissions, 1 round: for development

It writes N correct numpy submissions (the course's ``correct_numpy`` sample,
each file unique by a comment, `bench_limits.write_class`) and runs, in each
round, every contender once over them (in a rotated order, so that load
elsewhere on the machine falls on every contender alike):

``sandboxed``
    ``grader grade DIR --out OUT -q`` with every default output, as a user runs it: its own
    ``--jobs`` default (one per usable core, and one more); ``sandboxed@N`` adds ``--jobs N``;
``--insecure``
    the same with ``--insecure`` (``--insecure@N`` likewise);
``floor``
    the calls-only floor: ``J`` lanes, each a numpy-loaded process that
    ``os.fork()``\\ s a child per submission; the child imports it, makes the
    grader's own calls (``collected.calls``, the list the grader sends its jobs)
    and sends their values back as JSON on a pipe, which the lane decodes.
    No judging, no report, no isolation, no timeout;
``in-process``
    one process imports each submission and makes the same calls: no fork;
``pytest``
    one plain pytest session, a test per (submission, check), judged with the
    grader's check kinds (`bench_limits.PYTEST_FILE`);
``dask-1``, ``dask-2``, ``dask-2-judge``
    ``grader grade --dask ADDRESS`` on a ``distributed.LocalCluster`` of 1 and 2
    single-thread worker processes, started once (in a helper process of
    this one) and warmed with one small class, a submission per task, so that every worker has
    its runner and sandbox zygote started before the rounds; ``dask-2-judge`` adds
    ``--dask-judge`` (the workers judge and score); skipped, with a message,
    when ``distributed`` is not installed.

For each contender it prints submissions/s (median over the rounds), the
wall seconds of the rounds summed, CPU milliseconds per submission (median)
and their split by role, minor page faults per submission, and the ratios
against the floor and against the pytest session, in CPU per submission
(``× floor CPU`` = floor's CPU / contender's CPU) and in wall time (rounds
summed). CPU is read per role:

* the whole tree: ``getrusage(RUSAGE_CHILDREN)`` of this process, before and
  after the run (each run is one child, waited for; everything it forked is
  reaped inside it, so counted);
* ``parent``: the grader's (the floor's, the client's) own process, written by
  itself at exit (``RUSAGE_SELF``);
* ``zygote``: the sandbox's zygote or ``--insecure``'s fork server (the
  floor's lanes), read from ``/proc/PID/stat`` while it lives (every 0.1 s);
* ``jobs``: the rest of the tree, or the jobs' slot cgroups' ``usage_usec``
  (read while the zygote lives) where that is larger, so that jobs held in a
  cgroup but reaped elsewhere are counted;
* Dask: ``client`` (the ``grade`` process tree), ``scheduler`` (the helper
  process: the scheduler and the nannies) and ``workers`` (the helper's
  descendants: the workers, their zygotes and jobs), each as the CPU its
  processes and their reaped children gained during the run.

Before the rounds, the grader's own modules are byte-compiled (as ``pip install`` does: the
contenders' ``PYTHONDONTWRITEBYTECODE=1`` would otherwise make an editable checkout compile them in
every run). Every figure comes from this one run, on this machine: compare ratios, not
absolute rates, between machines or busy moments.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_limits import ENV as LIMITS_ENV
from bench_limits import (
    PYTEST_FILE,
    ROOT,
    _call_all,
    _collected,
    _full_marks_everywhere,
    _load,
    fork_calls,
    grade_command,
    write_class,
)

ENV = dict(LIMITS_ENV, PYTHONDONTWRITEBYTECODE="1")
"""Every contender's environment: no ``__pycache__`` is written beside the class's files, so that every
contender compiles each submission as the sandbox's jobs do (they get a fresh copy of the file)."""
CONTENDERS = ("sandboxed", "--insecure", "floor", "in-process", "pytest", "dask-1", "dask-2", "dask-2-judge")
TICK = os.sysconf("SC_CLK_TCK")


# --- reading the CPU of process trees -----------------------------------------------------------------------------


def proc_stat(pid: int) -> tuple[int, float, float, int, int] | None:
    """(ppid, own CPU seconds, reaped children's CPU seconds, own minor faults, reaped children's) of ``pid``.

    None if it is gone.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (
        int(fields[1]),
        (int(fields[11]) + int(fields[12])) / TICK,
        (int(fields[13]) + int(fields[14])) / TICK,
        int(fields[7]),
        int(fields[8]),
    )


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def tree_cpu(root: int) -> dict[int, tuple[float, float]]:
    """Each live process of ``root``'s tree (``root`` included): (own CPU seconds, reaped children's)."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := proc_stat(int(name))) is not None:
            stats[int(name)] = st
    members, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, st in stats.items():
            if st[0] == parent and pid not in members:
                members.add(pid)
                frontier.append(pid)
    return {pid: (stats[pid][1], stats[pid][2]) for pid in members if pid in stats}


def gained(before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]]) -> float:
    """CPU seconds a tree gained between two `tree_cpu` readings (processes born or reaped in between included).

    A tree's CPU so far is the sum, over its live processes, of their own CPU and their reaped
    children's (every process of it is reaped by its parent, which is in the tree).
    """
    return sum(a + b for a, b in after.values()) - sum(a + b for a, b in before.values())


class ZygoteWatch(threading.Thread):
    """While a run lives, the last-seen own CPU of its zygote-like processes and their slot cgroups' usage.

    Every 0.1 s: new processes of the run's tree are classified once by their command line (a
    ``zygote.py`` or ``forkserver.py`` script), each such process's own CPU is read from
    ``/proc/PID/stat``, and the v2 slot cgroups the zygote made (``grader-ZYGOTEPID-slot*``)
    have their ``usage_usec`` read; the largest reading of each is kept.
    """

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.stop = threading.Event()
        self.ppid: dict[int, int] = {}
        self.zygotes: dict[int, float] = {}
        self.faults: dict[int, tuple[int, int]] = {}
        self.cgroups: dict[str, float] = {}
        self._cgroup_dirs: dict[int, str] = {}

    def run(self) -> None:
        while not self.stop.wait(0.1):
            self.poll()

    def poll(self) -> None:
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in self.ppid:
                continue
            pid = int(name)
            st = proc_stat(pid)
            self.ppid[pid] = st[0] if st else 0
            if not st or st[0] in self.zygotes or not self._in_tree(pid):  # a zygote's job has its command line
                continue
            if "zygote.py" in (cmd := _cmdline(pid)) or "forkserver.py" in cmd:
                self.zygotes[pid] = st[1]
                self._cgroup_dirs[pid] = _unified_dir(pid)
        for pid in self.zygotes:
            if (st := proc_stat(pid)) is not None:
                self.zygotes[pid] = max(self.zygotes[pid], st[1])
                self.faults[pid] = st[3], st[4]
            base = self._cgroup_dirs.get(pid)
            if not base:
                continue
            try:
                names = [n for n in os.listdir(base) if n.startswith(f"grader-{pid}-slot")]
            except OSError:
                continue
            for n in names:
                try:
                    with open(os.path.join(base, n, "cpu.stat"), "rb") as fh:
                        usec = int(fh.readline().split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                self.cgroups[n] = max(self.cgroups.get(n, 0.0), usec / 1e6)

    def _in_tree(self, pid: int) -> bool:
        for _ in range(64):
            if pid == self.root:
                return True
            pid = self.ppid.get(pid, 0)
            if pid <= 1:
                return False
        return False


def _unified_dir(pid: int) -> str:
    """The cgroup-v2 folder ``pid`` is in (where the zygote makes its slots' v2 cgroups), or ''."""
    unified = "/sys/fs/cgroup/unified"
    if not os.path.isfile(os.path.join(unified, "cgroup.procs")):
        unified = "/sys/fs/cgroup"
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    return unified + line[3:].strip().rstrip("/")
    except OSError:
        pass
    return ""


def _children_usage() -> tuple[float, int]:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime, u.ru_minflt


def machine_busy() -> float:
    """The CPU seconds every CPU of the machine has been busy so far (``/proc/stat``: all but idle and iowait).

    Every process counts, and the kernel's own threads: work the kernel defers to them (a job's
    namespaces and mounts torn down, its memory freed) is charged to no process of the run.
    """
    with open("/proc/stat") as fh:
        ticks = [int(v) for v in fh.readline().split()[1:8]]
    user, nice, system, idle, iowait, irq, softirq = ticks
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def run_tree(command: list[str], env: dict[str, str], watch: bool = False) -> dict[str, float]:
    """Run ``command`` from the repository root; its wall seconds, the tree's CPU and faults, and its roles' CPU.

    The command writes its own roles' CPU seconds as a JSON object to the file named by
    ``BENCH_RUSAGE``; with ``watch``, a `ZygoteWatch` reads the zygote's and the slot cgroups'.
    """
    with tempfile.NamedTemporaryFile(prefix="bench-floor-", suffix=".json", delete=False) as fh:
        usage_file = fh.name
    cpu0, faults0 = _children_usage()
    busy0 = machine_busy()
    start = time.perf_counter()
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=dict(env, BENCH_RUSAGE=usage_file),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    watcher = ZygoteWatch(proc.pid) if watch else None
    if watcher:
        watcher.start()
    _, err = proc.communicate()
    seconds = time.perf_counter() - start
    busy1 = machine_busy()
    if watcher:
        watcher.stop.set()
        watcher.join()
    cpu1, faults1 = _children_usage()
    try:
        if proc.returncode != 0:
            raise SystemExit(
                f"{' '.join(command[-8:])} exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}"
            )
        with open(usage_file) as fh:
            roles = json.load(fh) if os.path.getsize(usage_file) else {}
    finally:
        os.unlink(usage_file)
    figures = {"seconds": seconds, "cpu": cpu1 - cpu0, "faults": float(faults1 - faults0), **roles}
    figures["machine"] = busy1 - busy0
    if "children faults" in roles:  # the floor: its lanes said their own CPU; the rest is their children's
        figures["jobs"] = figures["cpu"] - figures.get("parent", 0.0) - roles["zygote"]
    if watcher:
        figures["zygote"] = sum(watcher.zygotes.values())
        rest = figures["cpu"] - figures.get("parent", 0.0) - figures["zygote"]
        figures["jobs_cgroups"] = sum(watcher.cgroups.values())
        figures["jobs"] = max(rest, figures["jobs_cgroups"])
        figures["zygote faults"] = float(sum(f[0] for f in watcher.faults.values()))
        figures["jobs faults"] = float(sum(f[1] for f in watcher.faults.values()))
    return figures


# --- the contenders that run in a child of this script (python bench_floor.py --run MODE DIR) ---------------------


def _self_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _write_roles(roles: dict[str, float]) -> None:
    with open(os.environ["BENCH_RUSAGE"], "w") as fh:
        json.dump(roles, fh)


def run_calls_in_process(files: list[Path]) -> None:
    """Import each submission and make the grader's calls in this one process."""
    calls = _collected().calls
    for path in files:
        _call_all(_load(path), calls)
    _write_roles({"parent": _self_cpu()})


def _lane(files: list[Path], calls: list, report: int) -> int:
    """One floor lane: a child per submission makes the calls and sends their values; the lane decodes them."""
    for path in files:
        status, values = fork_calls(path, calls)
        if status != 0 or len(values) != len(calls):
            return 3
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    os.write(report, json.dumps([_self_cpu(), faults]).encode() + b"\n")
    return 0


def run_floor(files: list[Path], jobs: int) -> None:
    """The calls-only floor: ``jobs`` lanes forking a child per submission (see the module's docstring)."""
    calls = _collected().calls
    read_fd, write_fd = os.pipe()
    lanes = []
    for lane in range(jobs):
        pid = os.fork()
        if pid == 0:
            code = 4
            try:
                os.close(read_fd)
                code = _lane(files[lane::jobs], calls, write_fd)
            finally:
                os._exit(code)
        lanes.append(pid)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as fh:
        lanes_said = [json.loads(line) for line in fh]
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in lanes]
    if any(codes) or len(lanes_said) != jobs:
        raise SystemExit(f"a floor lane failed: exit codes {codes}")
    roles = {"parent": _self_cpu(), "zygote": sum(cpu for cpu, _ in lanes_said)}
    _write_roles(roles | {"children faults": sum(faults for _, faults in lanes_said)})


# --- Dask --------------------------------------------------------------------------------------------------------


def serve_cluster(workers: int) -> None:
    """Run a LocalCluster of ``workers`` single-thread worker processes; print its address; stop at stdin's end."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        worker_dashboard_address=None,
    ) as cluster:
        print(cluster.scheduler_address, flush=True)
        sys.stdin.read()


class Cluster:
    """A `serve_cluster` helper process of this one, and the CPU of its parts."""

    def __init__(self, workers: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--cluster", str(workers)],
            cwd=ROOT,
            env=dict(ENV, PYTHONPATH=str(ROOT)),  # this tree's grader in the workers too
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        self.address = self.proc.stdout.readline().decode().strip()
        if not self.address:
            raise SystemExit(f"the Dask cluster of {workers} workers did not start")

    def reading(self) -> tuple[float, dict[int, tuple[float, float]]]:
        """(the helper's own CPU seconds, its descendants' `tree_cpu`)."""
        tree = tree_cpu(self.proc.pid)
        own = tree.pop(self.proc.pid)
        return own[0], tree

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- the parent ---------------------------------------------------------------------------------------------------


_OUT_NUMBERS = itertools.count()


def run_contender(
    name: str, folder: Path, work: Path, jobs: int, clusters: dict[str, Cluster], extra: tuple[str, ...] = ()
) -> dict[str, float]:
    """One run of one contender over the class: seconds, CPU seconds (whole tree and by role), faults.

    ``extra``: more ``grade`` options for a Dask contender (the warm-up's ``--dask-chunk 1``)."""
    # A folder of its own per run, all removed after the rounds: removing the last run's 3,000 files just
    # before this one made every file this run creates cost 100-400 us of kernel time on an ext4 without
    # a journal (this machine's), whose inode allocator skips, one by one, inodes freed in the last 30 s.
    out = work / f"out-{next(_OUT_NUMBERS)}"
    base, _, slots = name.partition("@")
    if base in ("sandboxed", "--insecure"):
        command = grade_command(folder, out, int(slots) if slots else None, ["--insecure"] * (base == "--insecure"))
        figures = run_tree(command, ENV, watch=True)
        _full_marks_everywhere(out, [base])
        return figures
    if name in ("floor", "in-process"):
        return run_tree([sys.executable, __file__, "--run", name, str(folder), "--jobs", str(jobs)], ENV)
    if name == "pytest":
        test = work / "test_bench_class.py"
        test.write_text(PYTEST_FILE)
        env = dict(ENV, BENCH_CLASS=str(folder), PYTHONPATH=os.pathsep.join([str(ROOT / "benchmarks"), str(ROOT)]))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:grader"]
        figures = run_tree([*command, "--rootdir", str(work), str(test)], env)
        figures["parent"] = figures["cpu"]
        return figures
    cluster = clusters[name]
    own0, tree0 = cluster.reading()
    judge = ["--dask-judge"] * name.endswith("-judge")  # the workers judge and score too
    figures = run_tree(grade_command(folder, out, jobs, ["--dask", cluster.address, *judge, *extra]), ENV)
    own1, tree1 = cluster.reading()
    _full_marks_everywhere(out, [name])
    figures["client"] = figures.pop("cpu")
    figures.pop("parent", None)
    figures["scheduler"] = own1 - own0
    figures["workers"] = gained(tree0, tree1)
    figures["cpu"] = figures["client"] + figures["scheduler"] + figures["workers"]
    return figures


ROLES = {"sandboxed": ("parent", "zygote", "jobs"), "--insecure": ("parent", "zygote", "jobs")}
ROLES |= {"floor": ("parent", "zygote", "jobs"), "dask-1": ("client", "scheduler", "workers")}
ROLES |= {"dask-2": ROLES["dask-1"], "dask-2-judge": ROLES["dask-1"], "in-process": ("parent",), "pytest": ("parent",)}


def report(contenders: list[str], runs: dict[str, list[dict[str, float]]], subs: int) -> list[str]:
    """The table: one line per contender, then the ratios that issue 29 names."""
    cpu = {c: statistics.median(1000 * r["cpu"] / subs for r in runs[c]) for c in contenders}
    wall = {c: sum(r["seconds"] for r in runs[c]) for c in contenders}
    lines = [
        f"{'contender':<12} {'subs/s':>7} {'wall s':>7} {'CPU ms/sub':>10}  {'split by role (ms/sub)':<42} "
        f"{'faults/sub':>10} {'x floor CPU':>11} {'x floor wall':>12} {'x pytest CPU':>12} {'x pytest wall':>13}"
    ]
    for c in contenders:
        rate = statistics.median(subs / r["seconds"] for r in runs[c])
        roles = ROLES[c.partition("@")[0]]
        names = ("parent", "lanes", "children") if c == "floor" else roles  # the floor's lanes: its "zygote"
        split = ", ".join(
            f"{label} {statistics.median(1000 * r.get(role, 0.0) / subs for r in runs[c]):.1f}"
            for label, role in zip(names, roles, strict=True)
        )
        faults = statistics.median(r["faults"] / subs for r in runs[c]) if not c.startswith("dask") else float("nan")

        def ratio(base: str, table: dict[str, float], c: str = c) -> str:
            return f"{table[base] / table[c]:.2f}" if base in table else "-"

        lines.append(
            f"{c:<12} {rate:7.1f} {wall[c]:7.1f} {cpu[c]:10.1f}  {split:<42} {faults:10.0f} "
            f"{ratio('floor', cpu):>11} {ratio('floor', wall):>12} {ratio('pytest', cpu):>12} {ratio('pytest', wall):>13}"
        )
    for c in runs:
        if c.partition("@")[0] not in ("sandboxed", "--insecure", "floor"):
            continue
        median = {
            k: statistics.median(r.get(k, 0.0) / subs for r in runs[c])
            for k in ("faults", "zygote faults", "jobs faults")
        }
        if c == "floor":
            median["jobs faults"] = statistics.median(r["children faults"] / subs for r in runs[c])
        lines.append(
            f"minor page faults per submission, {c}: {median['faults']:.0f} in the whole tree, "
            + (
                f"{median['jobs faults']:.0f} in the children"
                if c == "floor"
                else f"zygote {median['zygote faults']:.0f}, jobs {median['jobs faults']:.0f}"
            )
        )
    for c in contenders:
        if c.startswith("dask"):
            continue
        busy = statistics.median(1000 * r["machine"] / subs for r in runs[c])
        outside = statistics.median(1000 * (r["machine"] - r["cpu"]) / subs for r in runs[c])
        lines.append(
            f"machine busy per submission, {c}: {busy:.1f} ms, {outside:.1f} of it outside the run's "
            "processes (the kernel's threads, and any other load)"
        )
    lines += ceilings(contenders, runs, subs)
    if "sandboxed" in cpu and "--insecure" in cpu:
        lines.append(
            f"--insecure / sandboxed: {cpu['sandboxed'] / cpu['--insecure']:.2f}x in CPU, "
            f"{wall['sandboxed'] / wall['--insecure']:.2f}x in wall time"
        )
    return lines


def ceilings(contenders: list[str], runs: dict[str, list[dict[str, float]]], subs: int) -> list[str]:
    """For each Dask contender, the throughput bound of N machines of C cores from its measured split.

    Workers add up; the client and the scheduler do not: with ``w``, ``c`` and ``s`` ms of CPU per
    submission in the workers, the client and the scheduler, N machines of C worker cores grade at
    most ``min(N x C x 1000 / w, 1000 / c, 1000 / s)`` submissions per second, so N machines give
    about N times one machine's rate while ``N x C`` stays under ``w / max(c, s)``.
    """
    lines = []
    for c in contenders:
        if not c.startswith("dask"):
            continue
        w, client, sched = (
            statistics.median(1000 * r[role] / subs for r in runs[c]) for role in ("workers", "client", "scheduler")
        )
        worker_rate, client_rate, sched_rate = 1000 / w, 1000 / client, 1000 / sched
        cores = min(client_rate, sched_rate) / worker_rate
        lines.append(
            f"{c}: a worker core grades {worker_rate:.0f} subs/s (workers {w:.1f} ms/sub); the client caps any "
            f"cluster at {client_rate:.0f}/s ({client:.1f} ms/sub), the scheduler at {sched_rate:.0f}/s "
            f"({sched:.1f} ms/sub): N machines of C cores grade min(N*C*{worker_rate:.0f}, "
            f"{min(client_rate, sched_rate):.0f}) subs/s, N x one machine's rate up to {cores:.1f} worker cores in all"
        )
    return lines


def _compile_grader() -> None:
    """Byte-compile the grader that the contenders import, as ``pip install`` does.

    The contenders run with ``PYTHONDONTWRITEBYTECODE=1`` (each compiles the submissions, as the
    sandbox's jobs do); in an editable checkout whose ``.pyc`` files are stale, that would also make
    every run compile the grader's own modules again, which an installed grader never does.
    """
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("grader")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(folder, quiet=1)


def _grader_jobs() -> int:
    """The grader's ``--jobs`` default here (`grader.grading.session.default_jobs`)."""
    from grader.grading.session import default_jobs

    return default_jobs()


def _known(contender: str) -> bool:
    """A contender of `CONTENDERS`, or the grader's with its ``--jobs`` (``sandboxed@3``, ``--insecure@2``)."""
    base, at, slots = contender.partition("@")
    if not at:
        return base in CONTENDERS
    return base in ("sandboxed", "--insecure") and slots.isdigit() and int(slots) > 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subs", type=int, default=1000, help="correct numpy submissions (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every contender (default 3)")
    parser.add_argument(
        "--jobs", type=int, default=2, help="floor lanes, and the Dask contenders' grader --jobs (default 2)"
    )
    parser.add_argument("--only", default=",".join(CONTENDERS), help=f"comma-separated, of: {', '.join(CONTENDERS)}")
    parser.add_argument("--quick", action="store_true", help="100 submissions, 1 round (for development)")
    parser.add_argument("--run", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--cluster", type=int, help=argparse.SUPPRESS)
    a = parser.parse_args(argv)
    if a.cluster:
        serve_cluster(a.cluster)
        return
    if a.run:
        files = sorted(Path(a.run[1]).glob("*/attention.py"))
        run_floor(files, a.jobs) if a.run[0] == "floor" else run_calls_in_process(files)
        return
    if a.quick:
        a.subs, a.rounds = 100, 1
    contenders = [c.strip() for c in a.only.split(",") if c.strip()]
    if unknown := sorted(c for c in contenders if not _known(c)):
        parser.error(f"unknown contenders {unknown}")
    command = "python benchmarks/bench_floor.py " + " ".join(argv if argv is not None else sys.argv[1:])
    work = Path(tempfile.mkdtemp(prefix="grader-floor-"))
    clusters: dict[str, Cluster] = {}
    try:
        load = os.getloadavg()[0]
        print(
            f"machine: {os.cpu_count()} cores, load average {load:.1f}; python {sys.version.split()[0]}; "
            f"subs={a.subs}, rounds={a.rounds}, floor lanes={a.jobs}, grader --jobs by default={_grader_jobs()}",
            flush=True,
        )
        folder = work / "class"
        write_class(folder, a.subs)
        _compile_grader()
        if any(c.startswith("dask") for c in contenders):
            try:
                import distributed  # noqa: F401 - only whether it is installed
            except ImportError:
                print("dask.distributed is not installed (pip install '.[dask]'): no Dask contenders", flush=True)
                contenders = [c for c in contenders if not c.startswith("dask")]
            else:
                warm = work / "warm"
                write_class(warm, 8)
                for c in [c for c in contenders if c.startswith("dask")]:
                    clusters[c] = Cluster(int(c.split("-")[1]))
                    # a submission per task, 8 tasks: every worker's runner and zygote started (one chunk of
                    # 4 reached one worker, and the other started its own in the first round)
                    run_contender(c, warm, work, a.jobs, clusters, ("--dask-chunk", "1"))
        runs: dict[str, list[dict[str, float]]] = {c: [] for c in contenders}
        for r in range(a.rounds):
            for c in contenders[r % len(contenders) :] + contenders[: r % len(contenders)]:
                runs[c].append(run_contender(c, folder, work, a.jobs, clusters))
        for line in report(contenders, runs, a.subs):
            print(line)
        print(f"reproduce: {command}")
    finally:
        for cluster in clusters.values():
            cluster.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
