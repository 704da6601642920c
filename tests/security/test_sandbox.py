"""The sandbox plugin: layers, the uid a job runs as, refusal without Landlock."""

from __future__ import annotations

import json
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, load_stretch

from grader.builtin import sandbox
from grader.builtin.sandbox import LAYERS, handle, probe_layers, slots

pytestmark = pytest.mark.sandbox  # grades in the Linux sandbox, or tests it

PROBE = """
import os

def score_array_bytes(B, H, N, itemsize=4):
    return os.geteuid()

def bytes_to_mib(nbytes):
    return float(os.getpid())

def softmax(scores, allowed=None):
    return [float(len(os.listdir("/proc")) > 0)] * len(scores)
"""


def test_doctor_shows_every_layer_active(cli) -> None:
    code, out, err = cli("doctor")
    lines = out.splitlines()
    assert code == 0, out
    assert lines[-1] == f"{len(LAYERS)} of {len(LAYERS)} layers active"
    assert all(line.startswith("active") for line in lines[:-1])
    assert "Landlock filesystem allow-list (stdlib, numpy, the job folder) (ABI " in out


def test_probe_reports_each_layer() -> None:
    layers = probe_layers()
    for key, _ in LAYERS:
        assert layers[key] is True or str(layers[key]).startswith("ABI"), (key, layers[key])
    assert set(layers["setup_ms"]) == {"cgroups", "namespaces", "proc", "landlock", "uid", "seccomp"}


def _grade(cli, tmp_path: Path, *extra: str) -> dict:
    student = tmp_path / "class" / "probe"
    student.mkdir(parents=True)
    (student / "attention.py").write_text(PROBE)
    out = tmp_path / "out"
    code, _, err = cli("grade", tmp_path / "class", "--out", out, "-q", *extra)
    assert code == 0, err
    html = (out / "probe.html").read_text()
    return {"html": html, "json": json.loads((out / "results.json").read_text())}


def test_grade_runs_jobs_as_a_non_root_uid_as_pid_1(cli, tmp_path: Path) -> None:
    html = _grade(cli, tmp_path)["html"]
    # bytes-n1024 is visible: its details show what the job returned.
    block = html[html.index("bytes-n1024</span>") :]
    assert "<dt>got</dt><dd><pre>61000</pre></dd>" in block[: block.index('<div class="check">')]
    block = html[html.index("mib-n1024</span>") :]
    assert "<dt>got</dt><dd><pre>1.0</pre></dd>" in block[: block.index('<div class="check">')]


def test_insecure_runs_plain_children(cli, tmp_path: Path) -> None:
    html = _grade(cli, tmp_path, "--insecure")["html"]
    block = html[html.index("bytes-n1024</span>") :]
    assert "<dt>got</dt><dd><pre>0</pre></dd>" in block[: block.index('<div class="check">')]


def test_grading_without_landlock_is_refused(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = sandbox.Zygote

    class NoLandlock(real):
        def wait_started(self) -> None:
            super().wait_started()
            self.landlock_abi = 0

    monkeypatch.setattr(sandbox, "Zygote", NoLandlock)
    monkeypatch.setenv("GRADER_COURSE_SECRET", "sandbox-test-secret-2026")  # as instructors run it: no warning
    code, out, err = cli("grade", ROOT / "submissions" / "correct_numpy", "--out", tmp_path)
    assert code == 3
    assert err.strip().splitlines() == [
        "grader: error: no filesystem isolation here (Landlock needs Linux 5.13 or newer, enabled); grading "
        "hidden checks would let submissions read them. Run 'grader doctor', or pass --insecure to grade anyway"
    ]
    assert not (tmp_path / "results.json").exists()
    code, out, err = cli("grade", ROOT / "submissions" / "correct_numpy", "--out", tmp_path, "--insecure", "-q")
    assert code == 0


def test_check_and_validate_start_no_zygote(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> None:
        raise AssertionError("the zygote must not start")

    monkeypatch.setattr(sandbox, "Zygote", boom)
    assert cli("check", ROOT / "submissions" / "correct_numpy" / "attention.py")[0] == 0
    assert cli("validate")[0] == 0


def test_each_worker_sets_up_its_next_job_while_the_current_one_runs(tmp_path: Path) -> None:
    """A worker's next job waits, isolated, in the worker's other slot; each task reaches its own job."""
    import time

    from grader.child.cgroups import slot_processes
    from grader.child.limits import JOB_NICE, UID_BASE
    from grader.execution.channel import JobChannel
    from grader.models import Call

    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text("import os\ndef who():\n    return [os.geteuid(), 1, os.nice(0)]\n")
    second.write_text("import os\ndef who():\n    return [os.geteuid(), 2, os.nice(0)]\n")
    zygote = sandbox.Zygote()
    workdir = Path(tempfile.mkdtemp(prefix="grader-sandbox-"))  # as the plugin makes it: jobs' uids reach it
    workdir.chmod(0o711)
    worker = slots.Worker(zygote, (0, 5), str(workdir), "attention.py")
    sent_to_zygote: list = []
    ask = zygote.send  # every request goes through it (`request` too)
    zygote.send = lambda message, fds=(): sent_to_zygote.append(message) or ask(message, fds)
    try:
        answers = []
        for path, ready_slot in ((first, 5), (second, 0)):
            job = worker.launch(path.read_bytes(), "", 10.0)
            assert worker.ready is None and job.chores is not None  # started by the chores, while the job runs
            deadline = time.monotonic() + 10.0
            while not job.chores() and time.monotonic() < deadline:  # as run_calls does them, in its pauses
                time.sleep(0.001)
            assert worker.ready is not None and worker.ready.slot == ready_slot  # started ahead, other slot
            child = JobChannel(job)
            sink = {"stdout": bytearray(), "stderr": bytearray()}
            frames = [child.read_frame(time.monotonic() + 10.0, sink, "import")]
            assert child.send(Call("who", (), 2.0), time.monotonic() + 10.0) == "sent"  # a call, once imported
            frames.append(child.read_frame(time.monotonic() + 10.0, sink))
            child.finished = True
            child.kill()
            assert frames[0]["ok"] is True, sink
            answers.append(frames[1]["value"])
        # Slot 0 ran the first submission, slot 5 (set up during it) the second; each got its own file.
        # Jobs run at a lower priority than the grader and the zygote.
        assert answers == [[UID_BASE + 0, 1, JOB_NICE], [UID_BASE + 5, 2, JOB_NICE]]
        # Jobs are launched blank: the zygote never sees a submission or a call.
        launches = [m for m in sent_to_zygote if m["op"] == "launch"]
        assert len(launches) == 3 and not any("calls" in m or "who" in json.dumps(m) for m in launches)
        worker.close()
        assert slot_processes(0, zygote.proc.pid) == set() and slot_processes(5, zygote.proc.pid) == set()
        # one folder per slot, kept for the slot's next job, and left empty by each job
        assert sorted(p.name for p in workdir.iterdir()) == ["slot0", "slot5"]
        assert all(list(p.iterdir()) == [] for p in workdir.iterdir())
    finally:
        worker.close()
        zygote.close()
        shutil.rmtree(workdir)


def test_a_slot_s_folder_is_emptied_before_its_next_job_if_a_job_left_something_there() -> None:
    """A job that worked in the grader's folder itself (no mount namespace) leaves nothing to the slot's next job."""
    import os

    from grader.child.limits import DEFAULT_LIMITS, slot_uid

    zygote = sandbox.Zygote()
    workdir = Path(tempfile.mkdtemp(prefix="grader-sandbox-"))
    workdir.chmod(0o711)
    try:
        job = handle.SandboxJob(zygote, 3, str(workdir), DEFAULT_LIMITS, on_end=lambda slot: None)
        folder = Path(job.jobdir)
        assert folder == workdir / "slot3" and folder.is_dir() and list(folder.iterdir()) == []
        (folder / "left.txt").write_text("a classmate's file")  # as a job without its own tmpfs would
        job.end_calls()
        assert job.exit_code(10.0) == 0 and job.settle()
        assert not folder.exists()
        again = handle.SandboxJob(zygote, 3, str(workdir), DEFAULT_LIMITS, on_end=lambda slot: None)
        assert Path(again.jobdir) == folder and list(folder.iterdir()) == []
        assert folder.stat().st_uid == (slot_uid(3) if os.geteuid() == 0 else os.geteuid())  # made for its slot again
        again.end_calls()
        assert again.exit_code(10.0) == 0 and again.settle() and list(folder.iterdir()) == []
    finally:
        zygote.close()
        shutil.rmtree(workdir)


def test_a_hanging_call_hands_over_to_the_standby_in_the_other_slot(tmp_path: Path) -> None:
    """The job after a timeout is the standby (other slot, other uid); the hung job is ended without waiting."""
    from grader.child.cgroups import slot_processes
    from grader.child.limits import UID_BASE
    from grader.execution.calls import run_calls
    from grader.models import Call

    path = tmp_path / "attention.py"
    path.write_text("import os\ndef spin():\n    while True:\n        pass\ndef who():\n    return os.geteuid()\n")
    zygote = sandbox.Zygote()
    workdir = Path(tempfile.mkdtemp(prefix="grader-sandbox-"))
    workdir.chmod(0o711)
    worker = slots.Worker(zygote, (0, 5), str(workdir), "attention.py")
    try:
        out = run_calls(
            str(path), [Call("who", (), 2.0), Call("spin", (), 0.5), Call("who", (), 2.0)], launch=worker.launch
        )
        assert [r.status for r in out.results] == ["returned", "timeout", "returned"]
        assert [out.results[0].value, out.results[2].value] == [UID_BASE + 0, UID_BASE + 5]
        assert worker.unsettled <= 2  # the hung job and the finished one, killed without waiting, settled apart
        worker.close()
        assert worker.unsettled == 0 and worker.free == {0, 5}
        assert slot_processes(0, zygote.proc.pid) == set() and slot_processes(5, zygote.proc.pid) == set()
    finally:
        worker.close()
        zygote.close()
        shutil.rmtree(workdir)


# --- the per-call hand-over, CPU-time timeouts and true messages in the sandbox (issue 9) ----------

import contextlib
import os
import threading
import time

from grader.execution.calls import run_calls
from grader.execution.channel import JobChannel
from grader.execution.jobs import CHANNEL_LOST
from grader.models import Call


@contextlib.contextmanager
def _sandbox(*slot_pairs: tuple[int, int]):
    """A zygote and one `_Worker` per pair of slots, all stopped and cleaned afterwards."""
    zygote = sandbox.Zygote()
    workdir = Path(tempfile.mkdtemp(prefix="grader-sandbox-"))
    workdir.chmod(0o711)
    workers = [slots.Worker(zygote, pair, str(workdir), "attention.py") for pair in slot_pairs]
    try:
        yield zygote, workers
    finally:
        for worker in workers:
            worker.close()
        zygote.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _run(worker, path: Path, *calls: Call):
    return run_calls(str(path), list(calls), launch=worker.launch, scratch=False)


BUSY = '''
import os, time

def busy(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return seconds

def spin_for(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return seconds

def nap(seconds):
    time.sleep(seconds)
    return seconds

def two_processes(seconds):
    """Spin in this process and a forked one for `seconds` of wall time; return the wall time."""
    start = time.monotonic()
    pid = os.fork()
    while time.monotonic() < start + seconds:
        pass
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return time.monotonic() - start
'''


def test_a_sandboxed_job_holds_no_hidden_call_before_the_hidden_phase(tmp_path: Path) -> None:
    from harness.test_runner import SCANNER

    path = tmp_path / "attention.py"
    path.write_text(textwrap.dedent(SCANNER))
    with _sandbox((0, 1)) as (_, (worker,)):
        out = _run(worker, path, Call("found", (), 5.0), Call("take", ([271828.1828, 1.0],), 5.0, hidden=True))
    assert [r.value for r in out.results] == [[[False, False], [False, False]], [True, False]]


def test_a_slot_is_capped_at_one_cpu_and_its_cpu_time_is_read(tmp_path: Path) -> None:
    path = tmp_path / "attention.py"
    path.write_text(BUSY)
    with _sandbox((0, 1)) as (zygote, (worker,)):
        job = worker.launch(path.read_bytes(), "", 30.0)
        child = JobChannel(job)
        sink = {"stdout": bytearray(), "stderr": bytearray()}
        assert child.read_frame(time.monotonic() + 10.0, sink, "import")["ok"] is True, sink
        before = job.cpu_seconds()
        assert child.send(Call("busy", (0.3,), 5.0), time.monotonic() + 5.0) == "sent"
        assert child.read_frame(time.monotonic() + 10.0, sink)["value"] == 0.3
        middle = job.cpu_seconds()
        assert child.send(Call("two_processes", (1.0,), 5.0), time.monotonic() + 5.0) == "sent"
        wall = child.read_frame(time.monotonic() + 10.0, sink)["value"]
        after = job.cpu_seconds()
        child.finished = True
        child.kill()
        slot_dir = Path(job.cpu_stat).parent
        assert slot_dir.name == f"grader-{zygote.proc.pid}-slot0"
        cpu_dir = Path("/sys/fs/cgroup/cpu") / slot_dir.name  # the zygote runs in the root cpu cgroup here
        quota, period = ((cpu_dir / name).read_text().strip() for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us"))
    assert quota == period == "100000"
    assert 0.3 <= middle - before < 0.5  # the call's CPU time, read from the slot's cpu.stat
    # Two processes spinning for a second on a 2-core machine: one CPU's worth at most, not two.
    assert wall >= 1.0 and after - middle <= wall * 1.1 + 0.05


def test_the_slot_weight_is_the_instructors_choice(tmp_path: Path) -> None:
    """``--cpu-weight W``: each slot's cgroup weighs W (v2's scale; v1's cpu.shares W x 10.24); by default
    what one task at nice 10 weighs (110 shares), so the grader's own process comes first."""
    from grader.child.limits import DEFAULT_LIMITS

    path = tmp_path / "attention.py"
    path.write_text(BUSY)
    shares = {}
    for weight in (None, 50, 400):
        limits = None if weight is None else dict(DEFAULT_LIMITS, cpu_weight=weight)
        zygote = sandbox.Zygote()
        workdir = slots.make_workdir()
        worker = slots.Worker(zygote, (0, 1), workdir, "attention.py", limits)
        try:
            out = _run(worker, path, Call("busy", (0.01,), 5.0))
            assert out.results[0].value == 0.01
            cpu_dir = Path("/sys/fs/cgroup/cpu") / f"grader-{zygote.proc.pid}-slot0"
            shares[weight] = (cpu_dir / "cpu.shares").read_text().strip()
        finally:
            worker.close()
            zygote.close()
            shutil.rmtree(workdir)
    assert shares == {None: "110", 50: "512", 400: "4096"}


@pytest.mark.slow
@pytest.mark.timing
def test_a_slow_correct_job_passes_beside_classmates_hogging_its_core(tmp_path: Path) -> None:
    """0.5 s of CPU, 1 s timeout, on one core with two classmates' spinning jobs: about 1.5 s of wall time."""
    honest, hog = tmp_path / "honest.py", tmp_path / "hog.py"
    honest.write_text(BUSY)
    hog.write_text(BUSY)
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(own)})  # the zygote, and every job it forks, inherit it
    try:
        with _sandbox((0, 1), (2, 3), (4, 5)) as (_, (mine, *hogs)):
            threads = [threading.Thread(target=_run, args=(w, hog, Call("spin_for", (5.0,), 10.0))) for w in hogs]
            for thread in threads:
                thread.start()
            time.sleep(0.5)
            out = _run(mine, honest, Call("busy", (0.5,), 1.0), Call("busy", (0.05,), 1.0))
            for thread in threads:
                thread.join()
    finally:
        os.sched_setaffinity(0, own)
    assert [(r.status, r.value) for r in out.results] == [("returned", 0.5), ("returned", 0.05)]
    assert out.results[0].seconds > 1.0  # longer than its timeout by the clock, yet within it by CPU time


@pytest.mark.slow
@pytest.mark.timing
def test_sandboxed_timeouts_count_cpu_time_with_a_wall_clock_backstop(tmp_path: Path) -> None:
    path = tmp_path / "attention.py"
    path.write_text(BUSY)
    with _sandbox((0, 1)) as (_, (worker,)):
        out = _run(worker, path, Call("busy", (30.0,), 0.5), Call("nap", (30.0,), 0.5), Call("busy", (0.01,), 1.0))
    spin, nap, after = out.results
    # Durations are the clock's: on a machine busier than its CPUs they stretch by its load (the spin's
    # 0.5 s of CPU take longer to get; the grader's polling of the nap wakes later), not otherwise.
    stretch = load_stretch()
    assert (spin.status, spin.message) == ("timeout", "the call used more than 0.5 s of CPU time")
    assert 0.5 <= spin.seconds < 2.0 * stretch
    assert (nap.status, nap.message) == ("timeout", "the call took longer than 2 s of wall-clock time")
    assert 2.0 <= nap.seconds < 3.5 * stretch
    assert after.status == "returned"


@pytest.mark.slow
@pytest.mark.timing
def test_a_job_that_closes_or_replaces_fd_3_is_told_so(tmp_path: Path) -> None:
    path = tmp_path / "attention.py"
    path.write_text(
        "import os, time\n"
        "def close(wait):\n    os.close(3)\n    time.sleep(wait)\n    return 1.0\n"
        "def replace(wait):\n    os.dup2(os.open('/dev/null', os.O_WRONLY), 3)\n    time.sleep(wait)\n    return 1.0\n"
        "def ok():\n    return 2.0\n"
    )
    calls = [Call(name, (wait,), 30.0) for name in ("close", "replace") for wait in (0.0, 30.0)]
    with _sandbox((0, 1)) as (_, (worker,)):
        started = time.monotonic()
        out = _run(worker, path, *calls, Call("ok", (), 5.0))
        elapsed = time.monotonic() - started
    assert [(r.status, r.message) for r in out.results[:4]] == [("crashed", CHANNEL_LOST)] * 4
    assert out.results[4].value == 2.0
    assert elapsed < 15.0  # the grader notices the lost channel; it does not wait for the call's timeout


SYSCALLS = """
import ctypes
import fcntl
import os
import sys
import threading

import numpy

_libc = ctypes.CDLL(None, use_errno=True)


def _errno(result):
    return ctypes.get_errno() if result == -1 else 0


def mount_table():
    # listmount (458) and statmount (457): the host's mount table, were they allowed
    return [_errno(_libc.syscall(458, None, None, 0, 0)), _errno(_libc.syscall(457, None, None, 0, 0))]


def locks():
    answers = []
    with open(numpy.__file__, "rb") as fh:  # a file every job may read
        for lock in (lambda: fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB),
                     lambda: fcntl.lockf(fh, fcntl.LOCK_SH | fcntl.LOCK_NB),
                     lambda: fcntl.fcntl(fh, fcntl.F_SETLEASE, fcntl.F_RDLCK)):
            try:
                lock()
                answers.append(0)
            except OSError as exc:
                answers.append(exc.errno)
    return answers


def others():
    # inotify_init (253): a watch on a shared file is a channel too; 1000: no such system call
    return [_errno(_libc.syscall(253)), _errno(_libc.syscall(1000))]


def honest():
    # what honest code does: threads, numpy's linear algebra, files in its own folder, fcntl flags
    box = []
    thread = threading.Thread(target=lambda: box.append(float((numpy.eye(3) * 2 @ numpy.ones(3)).sum())))
    thread.start()
    thread.join()
    with open("scratch.txt", "w") as fh:
        fh.write("x")
        flags = fcntl.fcntl(fh, fcntl.F_GETFL)
    os.remove("scratch.txt")
    return [box[0], float(flags >= 0), float(numpy.fft.fft(numpy.ones(4))[0].real)]


def where(folder):
    return [float(os.getcwd() == folder), float(__file__ == folder + "/attention.py"),
            float(os.environ["HOME"] == os.environ["TMPDIR"] == folder), float(os.listdir(".") == ["attention.py"]),
            float(sys.argv == [folder + "/attention.py"])]


def fails():
    raise ValueError(os.getcwd())


def exits():
    os._exit(70)


def reboot():
    # reboot (169) with bad magic numbers: harmless even if it ran; the filter kills the job
    return _libc.syscall(169, 0, 0, 0, 0)
"""


def _sandboxed(tmp_path: Path, source: str, calls: list) -> object:
    from grader.execution.calls import run_calls

    path = tmp_path / "attention.py"
    path.write_text(source)
    zygote = sandbox.Zygote()
    workdir = slots.make_workdir()
    worker = slots.Worker(zygote, (0, 1), workdir, "attention.py")
    try:
        return run_calls(str(path), calls, launch=worker.launch, scratch=False)
    finally:
        worker.close()
        zygote.close()
        shutil.rmtree(workdir)


def test_seccomp_allow_list_denies_mount_table_locks_and_unknown_calls(tmp_path: Path) -> None:
    import errno

    from grader.models import Call

    out = _sandboxed(tmp_path, SYSCALLS, [Call(name, (), 5.0) for name in ("mount_table", "locks", "others", "honest")])
    assert [r.status for r in out.results] == ["returned"] * 4, out.results
    assert out.results[0].value == [errno.EPERM, errno.EPERM]
    assert out.results[1].value == [errno.EPERM, errno.EPERM, errno.EPERM]  # flock, lockf, a lease
    assert out.results[2].value == [errno.EPERM, errno.ENOSYS]  # default deny: ENOSYS
    assert out.results[3].value == [6.0, 1.0, 4.0]
    out = _sandboxed(tmp_path, SYSCALLS, [Call("reboot", (), 5.0), Call("others", (), 5.0)])
    assert [(r.status, r.message) for r in out.results] == [
        ("crashed", "the process was killed by signal SIGSYS"),
        ("returned", ""),
    ]


def test_seccomp_tables_are_disjoint() -> None:
    from grader.child import seccomp

    tables = [
        set(seccomp.ALLOWED_SYSCALLS_X86_64),
        set(seccomp.DENIED_SYSCALLS_X86_64),
        set(seccomp.KILLED_SYSCALLS_X86_64),
        set(seccomp.ARGUMENT_CHECKED),
    ]
    assert sum(map(len, tables)) == len(set().union(*tables))
    assert {457, 458, 73, 253, 254, 294} <= tables[1]  # statmount, listmount, flock, inotify


def test_a_job_sees_a_fixed_working_folder(tmp_path: Path) -> None:
    """getcwd(), __file__, HOME and TMPDIR are the fixed folder, whatever the grader's TMPDIR; tracebacks stay right.

    The folder is /tmp, or the next of `JOB_FOLDER_CHOICES` when numpy lies under /tmp (a checkout
    there); the test computes it as the zygote does.
    """
    import numpy

    from grader.child.jobsetup import choose_job_folder
    from grader.child.landlock import allowed_paths
    from grader.models import Call

    folder = choose_job_folder(allowed_paths(numpy))
    assert folder in ("/tmp", "/mnt", "/srv", "/media")
    out = _sandboxed(tmp_path, SYSCALLS, [Call("where", (folder,), 5.0), Call("fails", (), 5.0)])
    assert out.results[0].value == [1.0, 1.0, 1.0, 1.0, 1.0]  # sys.argv too: not the zygote's installed path
    failed = out.results[1]
    line = SYSCALLS.splitlines().index("def fails():") + 2
    assert (failed.status, failed.error_type, failed.message, failed.where) == (
        "raised",
        "ValueError",
        folder,
        f"attention.py, line {line}",
    )


def test_the_fixed_folder_moves_off_tmp_when_jobs_read_something_there() -> None:
    from grader.child.jobsetup import choose_job_folder, fixed_folder_clash

    fresh = ["/usr/lib/python3.11/json", "/tmp/fresh/.venv/lib/python3.11/site-packages/numpy"]
    assert fixed_folder_clash(fresh, "/tmp") == (
        "/tmp/fresh/.venv/lib/python3.11/site-packages/numpy (read by jobs) lies under /tmp"
    )
    assert choose_job_folder(fresh, ("/tmp", "/mnt")) == "/mnt"
    assert choose_job_folder(["/usr/lib/python3.11/json"], ("/tmp", "/mnt")) == "/tmp"
    assert choose_job_folder(fresh, ("/tmp", "/no/such/folder")) == ""


def test_a_set_up_failure_says_why_and_student_code_cannot_claim_one(tmp_path: Path) -> None:
    from grader.execution.channel import JobChannel
    from grader.models import Call

    zygote = sandbox.Zygote()
    workdir = slots.make_workdir()
    try:  # an open-files limit no kernel allows: setrlimit fails while the job sets up
        job = handle.SandboxJob(zygote, 0, workdir, dict(sandbox.DEFAULT_LIMITS, open_files=1 << 40))
        child = JobChannel(job)
        assert child.read_frame(time_now() + 10.0, {"stdout": bytearray(), "stderr": bytearray()}) == "eof"
        why = child.exit_description()
        child.kill()
        assert why.startswith("the sandbox could not set up the job: ValueError: ")
        assert "(rlimits.py, line " in why  # where the set-up failed: the module setting the rlimits
    finally:
        zygote.close()
        shutil.rmtree(workdir)
    out = _sandboxed(tmp_path, SYSCALLS, [Call("exits", (), 5.0)])
    assert out.results[0].message == "the process exited with code 70 before answering"


def time_now() -> float:
    import time

    return time.monotonic()


def test_correct_samples_score_full_marks_in_the_sandbox(cli, tmp_path: Path) -> None:
    code, out, err = cli(
        "grade",
        ROOT / "submissions" / "correct_numpy",
        ROOT / "submissions" / "correct_lists",
        "--out",
        tmp_path,
        "-q",
    )
    assert code == 0, err
    results = json.loads((tmp_path / "results.json").read_text())
    assert {s["id"]: (s["score"], s["max_score"]) for s in results["submissions"]} == {
        "correct_numpy": (86.0, 86.0),
        "correct_lists": (86.0, 86.0),
    }


@pytest.mark.slow
def test_tmpdir_inside_a_0700_folder_grades_correctly_never_zeros(tmp_path: Path) -> None:
    """As ``mktemp -d`` makes it: the job uids cannot enter tmp_path. Jobs see their folder at /tmp
    (a tmpfs in their own mount namespace), so grading works; doctor says so too."""
    import os
    import subprocess
    import sys

    tmp_path.chmod(0o700)
    tmpdir = tmp_path / "deeper"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    run = [sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main(sys.argv[1:]))"]
    out = tmp_path / "out"
    proc = subprocess.run(
        run + ["grade", "submissions/correct_numpy", "submissions/correct_lists", "--out", str(out), "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    assert sorted((s["id"], s["score"], s["error"]) for s in results["submissions"]) == [
        ("correct_lists", 86.0, ""),
        ("correct_numpy", 86.0, ""),
    ]
    proc = subprocess.run(run + ["doctor"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout
    assert f"{len(LAYERS)} of {len(LAYERS)} layers active" in proc.stdout
    assert list(tmpdir.iterdir()) == []  # the sandbox's folders are gone


def test_check_as_root_under_a_0700_tmpdir_says_so_in_one_line_never_zeros(tmp_path: Path) -> None:
    """``check`` started as root runs the student's code as ``nobody``, in a folder in TMPDIR: behind a
    private folder every check failed, the student's own file "forbidden by the sandbox" (0/35)."""
    import os
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("only root's check runs the code as another user (nobody)")
    student = tmp_path / "student"
    student.mkdir()
    (student / "attention.py").write_bytes((ROOT / "submissions" / "correct_numpy" / "attention.py").read_bytes())
    top = Path(tempfile.mkdtemp(dir="/tmp"))  # as `mktemp -d` makes it (the test's own folders are 0700 too)
    try:
        env = dict(os.environ, TMPDIR=str(top), GRADER_COURSE=str(ROOT))
        check = [sys.executable, "-m", "grader", "check", "attention.py"]
        proc = subprocess.run(check, cwd=student, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert proc.stderr.strip().splitlines() == [
            f"grader: error: grader check runs the code as the 'nobody' user when started as root, and {top} "
            f"(mode 0700) lets no other user into the temporary folder {top}: set TMPDIR to a folder such as "
            "/tmp, or run grader check as yourself, not root"
        ]
        assert proc.stdout == "" and list(top.iterdir()) == []
        top.chmod(0o711)  # others may pass through: the same check runs, at full marks
        proc = subprocess.run(check, cwd=student, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "visible checks: 35/35 points" in proc.stdout, proc.stdout + proc.stderr
        assert list(top.iterdir()) == []
    finally:
        shutil.rmtree(top)


def test_grade_stops_in_one_line_when_a_real_job_cannot_run(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the preflight job fails, grade exits 3 before grading anything: never a class of zeros."""
    monkeypatch.setattr(slots, "PREFLIGHT_SOURCE", b"import os\nos._exit(9)\n")
    # Under a private TMPDIR (mode 0700) the same failure is rightly blamed on the folder (next test):
    # here the job folder is one the job uids can reach, whatever TMPDIR the suite runs with.
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    monkeypatch.setenv("GRADER_COURSE_SECRET", "sandbox-test-secret-2026")  # as instructors run it: no warning
    code, out, err = cli("grade", ROOT / "submissions" / "correct_numpy", "--out", tmp_path / "out")
    assert code == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "grader: error: the sandbox cannot run a job here (importing the "
        "file failed: the process exited with code 9 before answering)"
    )
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_job_folder_the_job_uids_cannot_reach_is_named_with_the_fix() -> None:
    """Where the job folder cannot be mounted at /tmp, a failing preflight names the folder at fault."""
    top = Path(tempfile.mkdtemp(dir="/tmp"))  # /tmp itself is 1777: the first folder that blocks is `locked`
    try:
        top.chmod(0o755)
        locked = top / "locked"
        (locked / "deeper").mkdir(parents=True)
        locked.chmod(0o700)
        problem = slots._preflight_problem(str(locked / "deeper"), "PermissionError:  denied\n")
        assert problem == (
            f"the sandbox's job folder {locked / 'deeper'} is not reachable by the job uids (61000+): {locked} is "
            "mode 0700; set TMPDIR to a folder such as /tmp, or pass --insecure (PermissionError: denied)"
        )
        locked.chmod(0o711)
        assert slots._preflight_problem(str(locked / "deeper"), "it answered None") == (
            "the sandbox cannot run a job here (it answered None); run 'grader doctor' to see each layer, "
            "or pass --insecure to grade without the sandbox"
        )
    finally:
        shutil.rmtree(top)


def test_the_zygote_the_command_line_starts_is_the_one_grade_uses_or_it_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """grader.cli.launch execs grade's zygote before loading anything (grader.execution.servers.grade_zygote): the
    sandbox adopts it (no second one is started); a run that stops first, or needs none, stops it."""
    from grader.cli import main
    from grader.execution.servers import grade_zygote

    monkeypatch.setenv("GRADER_COURSE_SECRET", "sandbox-test-secret-2026")
    assert grade_zygote(["check", "attention.py"]) is None
    assert grade_zygote(["grade", "x", "--insecure"]) is None and grade_zygote(["grade", "--help"]) is None

    def no_second(*args: object, **kwargs: object) -> None:
        raise AssertionError("a second zygote was started")

    started = grade_zygote(["grade", "x"])
    assert started is not None
    monkeypatch.setattr(handle, "start_zygote", no_second)
    sample = ROOT / "submissions" / "correct_numpy"
    assert main(["grade", str(sample), "--out", str(tmp_path / "out"), "-q"], zygote=started) == 0
    assert json.loads((tmp_path / "out" / "results.json").read_text())["submissions"][0]["score"] == 86
    assert started[0].poll() is not None  # stopped with the run
    for argv in (
        ["grade", str(tmp_path / "missing")],
        ["grade", str(sample), "--out", str(tmp_path / "o2"), "--insec"],
    ):
        started = grade_zygote(["grade", "x"])
        assert started is not None
        main(argv, zygote=started)
        assert started[0].poll() is not None, argv
    capsys.readouterr()


def test_a_second_ctrl_c_while_the_jobs_end_still_removes_the_job_folder(tmp_path: Path) -> None:
    # timeout -s INT (and a user pressing Ctrl-C twice) interrupts grader_unconfigure while a worker
    # waits for its jobs to end: the zygote is stopped and the jobs' folder removed all the same.
    import threading
    from types import SimpleNamespace

    from grader.builtin import sandbox
    from grader.stash import Stash

    class Interrupted:
        def close(self) -> None:
            raise KeyboardInterrupt

    closed: list[str] = []
    workdir = tmp_path / "grader-sandbox-x"
    (workdir / "job").mkdir(parents=True)
    done = threading.Thread(target=lambda: None)
    done.start()
    done.join()
    starting = SimpleNamespace(thread=done, workers=[Interrupted()], workdir=str(workdir))
    config = SimpleNamespace(stash=Stash())
    config.stash[sandbox._ZYGOTE] = SimpleNamespace(close=lambda: closed.append("zygote"))
    config.stash[sandbox._STARTING] = starting
    with pytest.raises(KeyboardInterrupt):
        sandbox.grader_unconfigure(config)
    assert closed == ["zygote"]
    assert not workdir.exists()


def test_a_worker_closed_by_a_stop_starts_no_job_and_makes_no_folder_again(tmp_path: Path) -> None:
    # Ctrl-C: grader_unconfigure closes the workers and removes the jobs' folder while grading threads
    # are still in flight; one that asks for its next job must not make the folder again (it was left
    # in TMPDIR, with a job folder in it, after one run in three interrupted at 0.8-0.9 s).
    import itertools
    from types import SimpleNamespace

    from grader.builtin.sandbox import slots
    from grader.errors import ConfigError

    workdir = tmp_path / "grader-sandbox-x"
    worker = slots.Worker(SimpleNamespace(ids=itertools.count(1)), (0, 1), str(workdir))  # type: ignore[arg-type]
    worker.close()
    with pytest.raises(ConfigError, match="stopping"):
        worker.launch(b"", str(workdir), 1.0)
    assert not workdir.exists()


@pytest.mark.parametrize(
    "source",
    [
        "import random\n\ndef draw():\n    return random.getrandbits(62)\n",
        "import numpy as np\n\ndef draw():\n    return int(np.random.randint(0, 2**62))\n",
    ],
    ids=["random", "numpy"],
)
def test_each_sandbox_job_draws_its_own_random_numbers(source: str, tmp_path: Path) -> None:
    """The zygote forks without the interpreter's after-fork hooks and imported numpy.random (seeded once
    there): without a reseed per job, one submission could predict what another's unseeded draw gives."""
    path = tmp_path / "attention.py"
    path.write_text(source)
    with _sandbox((0, 1)) as (_, (worker,)):
        draws = [_run(worker, path, Call("draw", (), 5.0)).results[0] for _ in range(3)]
    assert [r.status for r in draws] == ["returned"] * 3
    assert len({r.value for r in draws}) == 3  # three jobs, three seeds (2**-62 odds of a false alarm)


def test_the_zygote_sends_each_job_s_schedstat_with_its_pidfd(tmp_path: Path) -> None:
    """The grader opens no /proc file per job: the zygote opened the job's schedstat before it could reap it."""
    path = tmp_path / "attention.py"
    path.write_text(BUSY)
    with _sandbox((0, 1)) as (_, (worker,)):
        job = worker.launch(path.read_bytes(), "", 10.0)
        fd = job._schedstat_fd
        assert fd is not None and os.readlink(f"/proc/self/fd/{fd}") == f"/proc/{job.pid}/schedstat"
        child = JobChannel(job)
        sink = {"stdout": bytearray(), "stderr": bytearray()}
        assert child.read_frame(time.monotonic() + 10.0, sink, "import")["ok"] is True, sink
        wait = job.wait_seconds()
        assert isinstance(wait, float) and 0.0 <= wait < 10.0
        child.finished = True
        child.kill()
        job.settle()
    assert job._schedstat_fd is None  # closed with the job's other descriptors
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        target = ""
    assert target != f"/proc/{job.pid}/schedstat"


def test_a_dask_client_starts_its_sandbox_only_for_a_chunk_it_grades_itself(tmp_path: Path) -> None:
    """``grade --dask``: no zygote at start-up (the command line's early one, or configure's); the first
    local job starts the sandbox, which grades it as any run does, and stops with the run."""
    from grader.config.parser import for_command
    from grader.execution.keys import JOB_LAUNCHERS
    from grader.execution.servers import grade_zygote

    argv = ["grade", str(tmp_path), "--dask", "tcp://127.0.0.1:9", "--jobs", "1"]
    assert grade_zygote(argv) is None
    assert grade_zygote(["grade", str(tmp_path), "--dask=tcp://127.0.0.1:9"]) is None
    config = for_command("grade", argv[1:])
    sandbox.grader_configure(config)  # the sandbox plugin's part of configure (the scheduler is not asked)
    try:
        pool = config.stash[JOB_LAUNCHERS]
        assert isinstance(pool, slots.Pool) and pool.lazy
        assert sandbox._ZYGOTE not in config.stash  # nothing started
        sandbox.grader_grading_ready(config)  # a lazy pool is not waited for
        assert sandbox._ZYGOTE not in config.stash
        path = tmp_path / "attention.py"
        path.write_text("def double(x):\n    return 2 * x\n")
        with pool.slot() as launch:
            out = run_calls(str(path), [Call("double", (21.0,), 5.0)], launch=launch, scratch=False)
        assert [(r.status, r.value) for r in out.results] == [("returned", 42.0)]
        zygote = config.stash[sandbox._ZYGOTE]
    finally:
        sandbox.grader_unconfigure(config)
    assert sandbox._ZYGOTE not in config.stash and zygote.proc.poll() is not None  # stopped with the run


def test_the_preflight_runs_the_workers_side_by_side_and_tells_the_first_workers_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start-up waits for the slowest worker's two preflight jobs, not for every job in turn (issue 29): the
    workers' first jobs run at the same time; a worker's failure is told (the first worker's first), and a
    worker's exception is raised in the caller."""
    import threading
    import types

    from grader.models import CallResult, RunOutcome

    meeting = threading.Barrier(2, timeout=10)  # broken (an error) unless both workers' first jobs meet
    answers = {"a": [41 + 1, 42], "b": [42, 42]}
    seen: list[str] = []

    def run_calls(path, calls, launch, **_):  # noqa: ANN001, ANN202
        name = launch()
        assert Path(path).read_bytes() == slots.PREFLIGHT_SOURCE
        if name not in seen:
            seen.append(name)
            meeting.wait()
        value = answers[name].pop(0)
        if isinstance(value, BaseException):
            raise value
        return RunOutcome((CallResult("returned", value=value),))

    monkeypatch.setattr(slots, "run_calls", run_calls)
    workers = [types.SimpleNamespace(launch=lambda n=n: n) for n in ("a", "b")]
    assert slots.preflight(workers, str(tmp_path)) == ""
    assert sorted(seen) == ["a", "b"] and answers == {"a": [], "b": []}
    assert list(tmp_path.iterdir()) == []  # the preflight's file is removed

    meeting.reset()
    seen.clear()
    answers.update(a=[42, 42], b=[42, 7])
    assert "it answered 7" in slots.preflight(workers, str(tmp_path))
    meeting.reset()
    seen.clear()
    answers.update(a=[42, 5], b=[6, 42])
    assert "it answered 5" in slots.preflight(workers, str(tmp_path))  # the first worker's, though b failed first
    meeting.reset()
    seen.clear()
    answers.update(a=[42, 42], b=[OSError("zygote gone")])
    with pytest.raises(OSError, match="zygote gone"):
        slots.preflight(workers, str(tmp_path))
