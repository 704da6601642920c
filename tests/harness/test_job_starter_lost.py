"""The process that starts every job, killed mid-run from outside: one line, exit 3, and no student blamed.

A job cannot signal the sandbox's zygote (its own uid, pid namespace and seccomp filter), but the
out-of-memory killer or an administrator can. Every later submission used to become an "internal
error" with its own traceback (exit 4), and the one in flight was recorded in the gradebook as
"killed (SIGKILL): it used up its CPU time or memory", a false blame the next run resumed. Now the
run stops with one line naming the zygote (`grader.errors.JobStarterLost`), the gradebook keeps
only what was graded, and the same command grades the rest: every student full marks.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, SUBMISSIONS, processes


def _class(folder: Path, n: int) -> None:
    source = (SUBMISSIONS / "correct_numpy" / "attention.py").read_text()
    for i in range(n):
        (folder / f"s{i:03d}").mkdir(parents=True)
        (folder / f"s{i:03d}" / "attention.py").write_text(source + f"\n# student {i}\n")


def _zygotes(parent: int) -> list[int]:
    """Pids of the zygote processes ``parent`` started (their command line names child/zygote.py)."""
    return [p["pid"] for p in processes() if p["ppid"] == parent and "child/zygote.py" in p["cmdline"]]


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="the sandbox needs Linux and root")
def test_a_zygote_killed_mid_run_stops_the_run_in_one_line_and_blames_no_student(tmp_path: Path) -> None:
    folder, out = tmp_path / "class", tmp_path / "out"
    _class(folder, 300)
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "-q", "--jobs", "2"]
    env = {**os.environ, "GRADER_COURSE": str(ROOT)}
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    killed = False
    while run.poll() is None and time.monotonic() < deadline:
        pages = len(list(out.glob("s*.html"))) if out.is_dir() else 0
        zygotes = _zygotes(run.pid)
        if pages >= 5 and zygotes:
            os.kill(zygotes[0], signal.SIGKILL)
            killed = True
            break
        time.sleep(0.02)
    _, err = run.communicate(timeout=120)
    assert killed, "the run ended before the test could kill its zygote"
    lines = [line for line in err.splitlines() if not line.startswith("grader: warning:")]
    assert run.returncode == 3, err
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith(
        "grader: error: the sandbox's zygote (the process that starts every job) ended during the run"
    ), err
    assert "run the same command again to grade the rest" in lines[0]

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "result(s) reused" in again.stdout  # what was graded before the kill was kept
    results = json.loads((out / "results.json").read_text())["submissions"]
    assert len(results) == 300
    assert {(r["status"], r["score"], r["error"]) for r in results} == {("graded", 86.0, "")}


def test_a_status_pipe_closed_without_a_word_is_the_zygotes_end_not_the_students() -> None:
    """The zygote's files close before its jobs get their death signal and before it can be reaped: a job
    seen killed then, with the zygote not yet reaped, must stop the run, not be kept as the student's."""
    import queue
    from types import SimpleNamespace

    from grader.builtin.sandbox.handle import SandboxJob
    from grader.builtin.sandbox.slots import Pool
    from grader.errors import JobStarterLost

    zygote = SimpleNamespace(lost=False, proc=SimpleNamespace(poll=lambda: None))  # alive, as far as waitpid says
    job = object.__new__(SandboxJob)
    read, write = os.pipe()
    os.close(write)  # the zygote's end, closed as it ends
    job.status, job.status_fd, job.zygote = None, read, zygote
    assert job._read_status(0.0) == 128 + signal.SIGKILL
    assert zygote.lost

    pool = object.__new__(Pool)
    pool._slots = queue.SimpleQueue()
    pool._slots.put(SimpleNamespace(zygote=zygote, launch=None))
    with pytest.raises(JobStarterLost):
        with pool.slot():
            pass  # the submission's calls ran; its job died with the zygote
    zygote.lost = False
    with pool.slot():  # a zygote that answers: the slot is lent and given back as always
        pass
    assert pool._slots.qsize() == 1


def test_a_zygote_started_from_a_thread_outlives_the_thread() -> None:
    """The zygote's parent-death signal follows the thread that forked it: a Dask client starting its
    sandbox in a grading thread (for a chunk its cluster could not take) lost it when that thread
    ended, and the run stopped with exit 3 instead of grading the chunk here."""
    from grader.builtin.sandbox.handle import Zygote

    started: list[Zygote] = []
    thread = threading.Thread(target=lambda: started.append(Zygote()))  # returns once the zygote is ready
    thread.start()
    thread.join()
    zygote = started[0]
    try:
        time.sleep(0.5)  # the death signal, had it been sent, has arrived
        assert zygote.proc.poll() is None
    finally:
        zygote.close()
    assert zygote.proc.returncode is not None and zygote.proc.returncode != -signal.SIGKILL


def test_a_start_up_error_raised_at_every_chunk_does_not_grow_its_traceback() -> None:
    """A Dask worker whose sandbox cannot start keeps its runner: each chunk sent there raised the one
    start-up error again, and each raise added its frames to that exception's traceback. After a few
    dozen chunks the worker could not pickle the error for the client (excessively deep recursion), and
    the traceback held every failed chunk's frames, their submissions included, for the worker's life."""
    import traceback
    from types import SimpleNamespace

    from grader.builtin.sandbox.slots import Pool, Starting
    from grader.errors import ConfigError

    def wait_started() -> None:
        raise ConfigError("the sandbox's zygote did not start: no reason given")

    zygote = SimpleNamespace(wait_started=wait_started, lost=False, proc=SimpleNamespace(poll=lambda: 2))
    pool = Pool(Starting(zygote, 1, "attention.py"))
    depths = []
    for _ in range(30):
        with pytest.raises(ConfigError) as caught:
            with pool.slot():
                pass
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert depths[-1] == depths[0], depths


def test_a_process_forked_after_a_server_was_started_from_a_thread_starts_servers_from_threads(
    tmp_path: Path,
) -> None:
    """The lasting thread that forks control servers for other threads is not in a forked child (only the
    forking thread is), but the child kept its queue: a server asked for from a thread there waited for
    ever (multiprocessing's default on Linux is fork: a Dask LocalCluster set to fork, a notebook's Pool)."""
    script = tmp_path / "server.py"
    script.write_text("import sys\nsys.stdin.read()\n")
    code = f"""
import os, sys, threading
from grader.execution.servers import start_server, stop_server

def start():
    proc, sock = start_server({str(script)!r})
    stop_server(sock, proc)

thread = threading.Thread(target=start)
thread.start()
thread.join()
pid = os.fork()
if pid == 0:
    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(20)
    os._exit(1 if thread.is_alive() else 0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_run_stopped_while_a_grading_thread_starts_the_lazy_sandbox_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Dask client starts its sandbox in a grading thread, for a chunk its cluster could not take. Ctrl-C
    meanwhile: the run's clean-up found no zygote yet and did nothing, the grading thread went on and made
    the sandbox's folder and its jobs' uids' folders, and the folder stayed in the temporary folder."""
    import grader.builtin.sandbox as sandbox
    from grader.config.parser import for_command
    from grader.execution.keys import JOB_LAUNCHERS

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    real_zygote = sandbox.Zygote
    asked, stopping = threading.Event(), threading.Event()

    def slow_zygote(*args, **kwargs):
        asked.set()
        stopping.wait(10)  # the run is being stopped: the clean-up has begun
        time.sleep(0.3)
        return real_zygote(*args, **kwargs)

    monkeypatch.setattr(sandbox, "Zygote", slow_zygote)
    config = for_command("grade", ["-", "--dask", "tcp://127.0.0.1:9", "--jobs", "1"])
    sandbox.grader_configure(config)
    pool = config.stash[JOB_LAUNCHERS]
    assert pool.lazy
    failed: list[BaseException] = []

    def grading_thread() -> None:
        try:
            pool.ready()
        except BaseException as exc:  # noqa: BLE001 - a stopped run's start may fail: not what is tested
            failed.append(exc)

    thread = threading.Thread(target=grading_thread)
    thread.start()
    assert asked.wait(10)
    stopping.set()
    sandbox.grader_unconfigure(config)
    thread.join(60)
    assert not thread.is_alive()
    zygote, workdir = getattr(pool._starting, "zygote", None), getattr(pool._starting, "workdir", None)
    try:
        assert workdir is None or not os.path.exists(workdir)  # no sandbox folder left
        assert zygote is None or zygote.proc.poll() is not None  # nor a zygote running
    finally:
        if zygote is not None:
            zygote.close()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def test_a_run_stopped_while_a_grading_thread_starts_the_insecure_fork_server_leaves_nothing_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """grade --insecure starts its fork server in the first grading thread that needs it. A Ctrl-C meanwhile
    (0.5-0.7 s into the run, 4 runs in 6 here): the clean-up found no server yet and closed nothing, the
    thread then made it and ran a submission that hangs, and the command waited for that call's timeout
    (11-18 s from the Ctrl-C to the exit) before it could end."""
    import grader.builtin.runner as runner
    from grader.config.parser import for_command
    from grader.errors import JobStarterLost

    asked, stopping = threading.Event(), threading.Event()
    made: list[object] = []

    class SlowServer:
        available = staticmethod(lambda: True)

        def __init__(self) -> None:
            asked.set()
            stopping.wait(10)  # the run is being stopped: the clean-up has begun
            time.sleep(0.3)
            self.closed = False
            made.append(self)

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(runner, "ForkServer", SlowServer)
    config = for_command("grade", ["-", "--insecure", "--jobs", "1"])
    asked_again: list[BaseException] = []

    def grading_thread() -> None:
        runner._fork_server(config)

    thread = threading.Thread(target=grading_thread)
    thread.start()
    assert asked.wait(10)
    stopping.set()
    runner.grader_unconfigure(config)
    thread.join(20)
    assert not thread.is_alive()
    assert [server.closed for server in made] == [True]  # the server the thread made is stopped with the run
    try:
        runner._fork_server(config)  # a grading thread asking after the clean-up starts none
    except JobStarterLost as exc:
        asked_again.append(exc)
    assert len(made) == 1 and len(asked_again) == 1


def test_a_fork_server_whose_grader_leaves_before_a_launch_s_reply_still_kills_that_job(tmp_path: Path) -> None:
    """grade --insecure stopped (Ctrl-C) as a grading thread asked for a job: the fork server forked it, its
    reply found the socket shut, and the BrokenPipeError ended the server before it killed its jobs. The
    job ran on, orphaned, until its CPU limit (3 runs in ~30 with the signal 0.75-1.15 s into grade)."""
    import socket

    from grader.execution.jobs import CHILD_ENV, ForkServer

    if not ForkServer.available():
        pytest.skip("no os.fork here: --insecure starts a fresh worker per submission")
    path = tmp_path / "attention.py"
    path.write_text("while True:\n    pass\n")
    server = ForkServer()
    pipes = [os.pipe() for _ in range(5)]  # result, stdout, stderr, call, status
    theirs = [pipes[0][1], pipes[1][1], pipes[2][1], pipes[3][0], pipes[4][1]]
    request = {"op": "launch", "file": str(path), "cpu_seconds": 20.0, "cwd": str(tmp_path)}
    request.update(env=dict(CHILD_ENV, HOME=str(tmp_path), TMPDIR=str(tmp_path)), walls=False)
    try:
        socket.send_fds(server.sock, [json.dumps(request).encode() + b"\n"], theirs)
        for fd in theirs:
            os.close(fd)
        server.sock.shutdown(socket.SHUT_RDWR)  # gone before the reply, as the interrupted grader's clean-up does
        server.sock.close()
        server.proc.wait(30)
        stdout = pipes[1][0]
        os.set_blocking(stdout, False)
        deadline = time.monotonic() + 10
        ended = False
        while time.monotonic() < deadline and not ended:
            try:
                ended = os.read(stdout, 1 << 16) == b""  # every write end closed: the job is gone
            except BlockingIOError:
                time.sleep(0.05)
        assert ended, "the job outlived its fork server"
    finally:
        for fd in (pipes[0][0], pipes[1][0], pipes[2][0], pipes[3][1], pipes[4][0]):
            os.close(fd)
        server.proc.kill()


def test_a_zygote_killed_while_it_starts_is_lost_not_a_sandbox_that_cannot_start() -> None:
    """Killed from outside before it was ready (the out-of-memory killer while it imports numpy), the zygote
    was "did not start: no reason given", as a sandbox that can never start here: a Dask worker kept that
    runner and its error, and sent every later chunk back to the client for the rest of its life."""
    from grader.builtin.sandbox.handle import Zygote
    from grader.errors import JobStarterLost

    zygote = Zygote(wait=False)
    os.kill(zygote.proc.pid, signal.SIGKILL)
    with pytest.raises(JobStarterLost):
        zygote.wait_started()
    assert zygote.proc.returncode == -signal.SIGKILL


def test_stopping_the_zygote_wakes_a_thread_waiting_for_its_reply() -> None:
    """Ctrl-C while the sandbox's start-up thread waits for a reply: the main thread stops the zygote, and
    the waiting thread must see it gone at once. Closing the socket under it did not wake it: it waited
    until the zygote was killed (here 5 s later, stopped as it is), then failed with a bare OSError
    ("Bad file descriptor"); in a run whose other threads opened files meanwhile, the closed descriptor's
    number was reused and it slept out the socket's 60 s timeout, ``grade`` ignoring Ctrl-C (seen under
    load: still running 15 s after one Ctrl-C)."""
    from grader.builtin.sandbox.handle import Zygote
    from grader.errors import JobStarterLost

    zygote = Zygote()
    os.kill(zygote.proc.pid, signal.SIGSTOP)  # it answers nothing from now on, and cannot end by itself
    said: list[tuple[BaseException, float]] = []

    def ask() -> None:
        try:
            zygote.request({"op": "kill", "job": 999})  # never answered: the zygote is stopped
        except BaseException as exc:  # noqa: BLE001 - what it raised is the test's subject
            said.append((exc, time.monotonic()))

    waiting = threading.Thread(target=ask)
    waiting.start()
    time.sleep(0.2)  # it waits for the reply now
    began = time.monotonic()
    zygote.close()
    waiting.join(timeout=10.0)
    assert not waiting.is_alive()
    assert zygote.proc.returncode == -signal.SIGKILL  # stopped, it was killed after 5 s
    ((exc, when),) = said
    assert isinstance(exc, JobStarterLost)
    assert when - began < 1.0  # woken as the zygote was being stopped, not when it was killed


def test_a_zygote_killed_during_the_preflight_is_lost_not_a_sandbox_that_cannot_run_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed while the start-up's preflight job ran, the zygote took that job with it, and the start-up
    said "the sandbox cannot run a job here": a Dask worker kept that runner and its error for ever."""
    import grader.builtin.sandbox.slots as slots
    from grader.builtin.sandbox.handle import Zygote
    from grader.errors import JobStarterLost

    def preflight(workers, workdir):
        os.kill(workers[0].zygote.proc.pid, signal.SIGKILL)
        workers[0].zygote.proc.wait()
        return "the sandbox cannot run a job here (the process was killed (SIGKILL): it used up its CPU time or memory)"

    monkeypatch.setattr(slots, "preflight", preflight)
    zygote = Zygote(wait=False)
    starting = slots.Starting(zygote, 1, "attention.py")
    try:
        with pytest.raises(JobStarterLost):
            starting.wait()
    finally:
        for worker in starting.workers:
            worker.close()
        zygote.close()
        if starting.workdir is not None:
            shutil.rmtree(starting.workdir, ignore_errors=True)


def test_a_chunk_waiting_on_a_dropped_runners_start_runs_again_on_a_fresh_one() -> None:
    """Two chunks on one Dask worker: one drops the runner whose zygote died (its pool closes) while the
    other waits for that pool's start. The waiting one is told its zygote is lost, so the worker runs it
    again on a fresh runner; a plain error sent its chunk back to the client."""
    from grader.builtin.sandbox.slots import Pool
    from grader.errors import JobStarterLost

    pool = Pool(lambda: pytest.fail("a closed pool starts nothing"), lazy=True)
    pool.close()
    with pytest.raises(JobStarterLost):
        pool.ready()


def test_a_zygote_that_cannot_be_forked_is_one_line_not_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter could not be started (fork's EAGAIN on a machine out of processes, ENOMEM): the OSError
    left the sandbox as it was, and grade (a Dask client's fallback in a grading thread too) stopped with a
    traceback and exit 4, "a bug in the grader"."""
    import errno

    import grader.builtin.sandbox.handle as handle
    from grader.errors import ConfigError

    def start_zygote(script: str):
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr(handle, "start_zygote", start_zygote)
    with pytest.raises(ConfigError, match="the sandbox's zygote could not be started: .*Resource temporarily"):
        handle.Zygote()
