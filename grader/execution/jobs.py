"""Running a submission's calls in child processes: the jobs, their channels, and `run_calls`.

The runner plugin (``grader.builtin.runner``) answers ``grader_run_calls`` with `run_calls` and
the launcher the configuration asks for: `PlainJob` (``--insecure``, and the commands that run
only visible checks), or the sandbox's jobs (``grader.builtin.sandbox``, which starts its own
workers through the same `Job` protocol and `JobChannel`).

The student's code never runs in the grader's process. Per submission, a
child ``python -I -B -u grader/child/worker.py`` starts in a fresh temporary
folder, with a scrubbed environment (BLAS threads pinned to 1), its own
session (process group), and rlimits on CPU time, core dumps and file size.
Its task (the request file) names only the submission's file: the child
imports it and reports on a dedicated result pipe, then gets its calls on
its stdin (the call pipe) in two hand-overs (`phases`): the visible calls,
then, once each has answered and the output so far is kept, the hidden
ones; it answers each call with its own frame as soon as it is done. So no
hidden argument is in its memory at import or during a visible call.
Frames are length-prefixed JSON (numpy arrays as raw binary after the
JSON), each checked by `grader.execution.boundary` before it is kept; stdout and
stderr are read against a deadline and capped.

Timeouts count the job's CPU time, not the clock: a call's timeout is CPU
seconds of the job (`Job.cpu_seconds`), with a wall-clock backstop
`WALL_BACKSTOP_FACTOR` times larger for a call that waits (sleeps, blocks),
so load elsewhere on the machine never costs a correct submission a point.
Where the job's CPU time cannot be read, the timeout is wall-clock time.
Durations (`grader.models.CallResult.seconds`) are measured here, from
the hand-over (or the previous answer) to reading the call's answer, never
taken from the job.

A call that times out or kills its process costs only that call: the child
is killed and a fresh one runs the calls that remain (started as a standby
before the call's limit is reached, so a hang costs its timeout and no
restart). A whole submission also has a budget (``--submission-timeout``)
so that no submission can stall a batch: CPU seconds of its own jobs
(every worker and standby it ran), with a wall-clock backstop
`WALL_BACKSTOP_FACTOR` times larger, moved on by the jobs' waiting for a
CPU, for a submission that waits rather than computes (`_Budget`). The
import's limit (``--import-timeout``) is CPU time of the job too. So the
same submission gets the same results on a quiet machine, beside CPU hogs,
or in a Dask worker.

What the submission prints is kept up to the moment the first hidden call
(`grader.models.Call.hidden`) is sent: output after it could carry hidden
inputs, and is cut (`HIDDEN_CUT_NOTE`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import hashlib
import itertools
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from grader.child.limits import CPU_RLIMIT_MARGIN_SECONDS
from grader.execution.boundary import (
    CALL_KEYS,
    CHANNEL_LOST_EXIT,
    FRAMES,
    IMPORT_FRAME_BYTES,
    UNREADABLE,
    BoundaryError,
    ResultBudget,
    check_length,
    decode_frame,
    encode_nonfinite,
    frame_limit,
)
from grader.execution.explain import explain_error
from grader.execution.servers import CHILD_ENV as CHILD_ENV
from grader.execution.servers import FORKSERVER as FORKSERVER
from grader.execution.servers import fork_server_available
from grader.execution.servers import start_server as start_server
from grader.execution.servers import stop_server as stop_server
from grader.fileio import MAX_SOURCE_BYTES, read_at_most, scratch_prefix
from grader.models import Call, CallResult, RunOutcome, phase_wire

if TYPE_CHECKING:
    import socket  # imported where it is used: 'grader check' starts without it

WORKER = str(Path(__file__).resolve().parent.parent / "child" / "worker.py")
EOF_GRACE_SECONDS = 0.25
"""After the result pipe closes, how long stdout and stderr are still read."""
OUTPUT_CAP_BYTES = 16 << 10
"""Bytes of stdout and of stderr kept per submission (16 KiB each)."""
WALL_BACKSTOP_FACTOR = 4.0
"""A call may take this many times its (CPU-time) timeout in wall-clock time, waiting included."""
MIN_POLL_SECONDS = 0.01
"""Shortest wait between two readings of a job's CPU time."""
GATHER_SECONDS = 0.001
"""When a call's answer is not in yet, how long the grader lets the job go on before it waits for it.

A job answers a phase's fast calls a fraction of a millisecond apart: waking
for each answer costs the grader a sleep, a wake-up and the GIL again per
call. After this pause the answers that came meanwhile are read at once. It
is far below any call's timeout; a call's CPU time is counted from before
the pause (a busy machine may stretch the pause). Near a phase's end the
pause is as long as its last calls should take, at the pace of the calls
before them, so that a job that is done does not wait a whole pause.
"""
MIN_GATHER_SECONDS = 0.0001
"""A shorter pause than this is not taken: the grader waits for the answer itself."""
READ_AHEAD_BYTES = 64 << 10
"""The most a read of a job's result pipe takes beyond the frame it needs (the frames behind it)."""
LARGE_FRAME_BYTES = 1 << 18
"""A frame at least this long (its length prefix within its limit) is read straight into a buffer
of its size: a 512x512 result (2 MiB of doubles) is not grown chunk by chunk and copied twice."""
HIDDEN_CUT_NOTE = "[output after the first hidden check is not shown]"
"""Ends the kept output when the submission printed more after the first hidden call was sent."""
CHANNEL_LOST = (
    "your code closed or replaced a file descriptor the grader uses (its result channel), "
    "so the grader lost its channel to your code"
)
"""Why a job that closed or replaced its result or call descriptor could not answer."""


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds greater than 0 (and finite)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (``--jobs``, ``--dask-chunk``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def read_source(path: str) -> bytes:
    """Read a submission file once, without following a symbolic link.

    Raises
    ------
    OSError
        If the path is a symbolic link (``ELOOP``), gone, unreadable, or
        larger than the locator's limit (``EFBIG``).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        data = read_at_most(fd, MAX_SOURCE_BYTES)
    finally:
        os.close(fd)
    if len(data) > MAX_SOURCE_BYTES:  # it grew after it was located
        raise OSError(errno.EFBIG, f"larger than {MAX_SOURCE_BYTES >> 20} MiB")
    return data


def write_request(workdir: str, source: bytes, cpu_seconds: float, filename: str = "submission.py") -> str:
    """Write the submission into a new folder of ``workdir``, and the worker's request beside it, as JSON.

    The submission is written as ``filename`` (the course pack's file name:
    the worker imports it under that module name, and tracebacks name it).
    The request holds the file's path and the CPU seconds allowed, no call.
    Returns the request's path.
    """
    folder = tempfile.mkdtemp(prefix="worker-", dir=workdir)
    file = os.path.join(folder, filename)
    with open(file, "wb") as fh:
        fh.write(source)
    fd, request_path = tempfile.mkstemp(prefix="request-", suffix=".json", dir=workdir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"file": file, "cpu_seconds": cpu_seconds}, fh)
    return request_path


class Job(Protocol):
    """A running worker, as the parent sees it: three pipes to read, one to write, and control.

    Attributes
    ----------
    result_fd, stdout_fd, stderr_fd : int
        Read ends owned by the parent (closed by `_Child.kill`).
    call_fd : int
        Write end of the job's call pipe (its stdin), owned by the parent;
        closing it tells the worker it is done.
    """

    result_fd: int
    stdout_fd: int
    stderr_fd: int

    @property
    def call_fd(self) -> int:
        """Write end of the job's call pipe, or -1 once closed (`end_calls`)."""

    def cpu_seconds(self) -> float | None:
        """CPU seconds the job has used so far (all its processes, as far as the job type can see), or None.

        None means this job's CPU time cannot be read: its calls are timed
        by the wall clock.
        """

    def end_calls(self) -> None:
        """Close the call pipe: the worker, at end-of-file, leaves."""

    # Optional: ``cpu_readable() -> bool``, whether this job's CPU time can be read at all: then a None
    # from `cpu_seconds` means "nothing counted yet" (a sandbox job still entering its cgroup on a busy
    # machine), and its import is not timed by the clock (`_await_import`).

    # Optional: ``wait_seconds() -> float | None``, the seconds the job has spent ready to run but
    # waiting for a CPU (a busy machine), or None when unknown. Not counted against the wall-clock
    # backstop (`run_calls`), so a call that computes is stopped by its CPU limit however busy the
    # machine is, and a call that sleeps by the backstop.

    def kill(self, finished: bool = False, wait: bool = True) -> None:
        """Kill the worker and everything it started.

        ``finished`` is True when the worker answered every call and is
        exiting on its own: a job may then be given a moment to finish.
        ``wait=False`` (its standby took over) allows not waiting for the
        worker to be gone, if the launcher waits later.
        """

    def exit_code(self, timeout: float) -> int | None:
        """The worker's exit code (negative: killed by that signal), or None if it still runs after ``timeout`` s."""

    def describe_exit(self, code: int, imported: bool) -> str:
        """Say how the worker ended, in words a student understands (``imported``: it sent its import frame)."""


Launcher = Callable[..., Job]
"""``launch(source, workdir, cpu_seconds, standby=False) -> Job`` starts a worker on the
submission's bytes (read once by `run_calls`, so every worker of a submission runs the same file).

The worker imports the file, then waits for its calls (`_Child.send`). ``standby`` says the
worker is started ahead, while a call may be about to time out: it gets the calls after that
call if it does, else it is killed before any call."""


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") and "SC_CLK_TCK" in os.sysconf_names else 100


def open_stat(pid: int) -> int | None:
    """A descriptor of ``/proc/<pid>/stat`` (read with `stat_cpu_seconds`), or None off Linux or once it is gone."""
    try:
        return os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def stat_cpu_seconds(stat_fd: int | None) -> float | None:
    """CPU seconds (user and system, its waited children's included) of the process whose stat ``stat_fd`` reads.

    None when there is no descriptor, the process is gone (ESRCH) or the file is not in Linux's format.
    """
    if stat_fd is None:
        return None
    try:
        fields = os.pread(stat_fd, 4096, 0).rsplit(b")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / _CLOCK_TICKS  # utime stime cutime cstime
    except (OSError, IndexError, ValueError):
        return None


def schedstat_wait_seconds(schedstat_fd: int | None) -> float | None:
    """Seconds the task whose ``/proc/<pid>/schedstat`` ``schedstat_fd`` reads has waited on a run queue, or None.

    The file's second number (nanoseconds); None when there is no
    descriptor, the task is gone or the kernel keeps no such figure.
    """
    if schedstat_fd is None:
        return None
    try:
        return int(os.pread(schedstat_fd, 256, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def open_proc_file(pid: int, name: str) -> int | None:
    """A descriptor of ``/proc/<pid>/<name>``, or None off Linux or once the process is gone."""
    try:
        return os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


class _PipedJob:
    """What a job the grader started itself (a plain child, a forked one) shares: its CPU time and its call pipe."""

    call_fd: int
    _stat_fd: int | None
    _schedstat_fd: int | None = None

    def cpu_seconds(self) -> float | None:
        return stat_cpu_seconds(self._stat_fd)

    def cpu_readable(self) -> bool:
        """Whether this job's CPU time can be read (see `Job`)."""
        return self._stat_fd is not None

    def wait_seconds(self) -> float | None:
        """Seconds the worker's main thread has waited for a CPU (see `Job`)."""
        return schedstat_wait_seconds(self._schedstat_fd)

    def _close_proc_files(self) -> None:
        for fd in (self._stat_fd, self._schedstat_fd):
            if fd is not None:
                os.close(fd)
        self._stat_fd = self._schedstat_fd = None

    def end_calls(self) -> None:
        if self.call_fd >= 0:
            os.close(self.call_fd)
            self.call_fd = -1


class PlainJob(_PipedJob):
    """A worker in a plain child process (new session, scrubbed environment).

    Its CPU time (`cpu_seconds`) is read from ``/proc/<pid>/stat``: user and
    system time of the worker process, all its threads, plus those of the
    children it has waited for. Processes it started and has not waited for
    are not counted (the wall-clock backstop bounds them). Without ``/proc``
    (macOS), calls are timed by the wall clock.
    """

    def __init__(
        self, source: bytes, workdir: str, cpu_seconds: float, standby: bool = False, filename: str = "submission.py"
    ) -> None:
        request_path = write_request(workdir, source, cpu_seconds, filename)
        read_fd, write_fd = os.pipe()
        call_read, call_write = os.pipe()
        env = dict(CHILD_ENV, HOME=workdir, TMPDIR=workdir)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-u", WORKER, request_path, str(write_fd)],
                stdin=call_read,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        except BaseException:
            for fd in (read_fd, call_write):
                os.close(fd)
            raise
        finally:
            os.close(write_fd)
            os.close(call_read)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.result_fd = read_fd
        self.call_fd = call_write
        self.stdout_fd = os.dup(self.proc.stdout.fileno())
        self.stderr_fd = os.dup(self.proc.stderr.fileno())
        self.proc.stdout.close()
        self.proc.stderr.close()
        self._stat_fd = open_stat(self.proc.pid)
        self._schedstat_fd = open_proc_file(self.proc.pid, "schedstat")

    def kill(self, finished: bool = False, wait: bool = True) -> None:
        self.end_calls()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        self._close_proc_files()

    def exit_code(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def describe_exit(self, code: int, imported: bool) -> str:
        return describe_exit(code)


class ForkServer:
    """The grader's handle on a warm fork server (``grader/child/forkserver.py``), for ``--insecure``.

    One process imports numpy once and forks a plain worker per job (no isolation layer), so
    trusted code is graded without starting an interpreter per submission. Linux and macOS
    only (``os.fork``); `available` says whether it can run here. Thread-safe.

    Raises
    ------
    OSError
        If the server does not start.
    """

    def __init__(self, wait: bool = True, started: tuple[subprocess.Popen[bytes], socket.socket] | None = None) -> None:
        """Start the server (or take one `grader.execution.servers.start_server` ``started``).

        ``wait=False`` returns at once: the first request waits until the server is ready.
        """
        import threading

        self.proc, self.sock = started if started is not None else start_server(FORKSERVER, stderr=subprocess.DEVNULL)
        self.lock = threading.Lock()
        self._buffer = b""
        self._ready = False
        if wait:
            with self.lock:
                self._wait_ready()

    def _wait_ready(self) -> None:
        """Read the server's ``{"ready": true}`` (once; the caller holds the lock)."""
        if self._ready:
            return
        try:
            ready = self._line() == {"ready": True}
        except (OSError, ValueError):
            ready = False
        if not ready:
            self.close()
            raise OSError("the fork server did not start")
        self._ready = True

    @staticmethod
    def available() -> bool:
        """Whether a fork server can run here (``os.fork`` and descriptor passing: not Windows)."""
        return fork_server_available()

    def _line(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise OSError("the fork server stopped answering")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, message: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        """Send one request (with descriptors) and return the answer."""
        import socket

        data = json.dumps(message).encode() + b"\n"
        with self.lock:
            self._wait_ready()
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.sendall(data)
            return self._line()

    def close(self) -> None:
        """Stop the server (it kills the jobs it still has)."""
        stop_server(self.sock, self.proc)


class ForkJob(_PipedJob):
    """A plain worker forked by the warm `ForkServer` (``--insecure``): `PlainJob`'s rules, no interpreter start.

    Its CPU time is read from ``/proc/<pid>/stat``, its exit code comes on a status pipe from
    the server (which reaps it), and it is killed through the server, which signals its
    process group only while the job is its own. `kill` returns once the job and every process
    it left behind (a double-forked daemon) are killed and reaped: the server is their
    subreaper (``grader/child/plain.py``). With ``walls`` (``check``: a student's code on a CI
    runner), the job is walled in first (``plain.guard``: Landlock, and no root); ``grade
    --insecure`` (trusted code, by the instructor's choice) runs without.
    """

    def __init__(
        self,
        server: ForkServer,
        source: bytes,
        workdir: str,
        cpu_seconds: float,
        standby: bool = False,
        filename: str = "submission.py",
        walls: bool = True,
    ) -> None:
        folder = tempfile.mkdtemp(prefix="worker-", dir=workdir)
        file = os.path.join(folder, filename)
        with open(file, "wb") as fh:
            fh.write(source)
        self.server = server
        pipes = [os.pipe() for _ in range(5)]  # result, stdout, stderr, call, status
        theirs = [pipes[0][1], pipes[1][1], pipes[2][1], pipes[3][0], pipes[4][1]]
        env = dict(CHILD_ENV, HOME=workdir, TMPDIR=workdir)
        try:
            reply = server.request(
                {
                    "op": "launch",
                    "file": file,
                    "cpu_seconds": cpu_seconds,
                    "cwd": workdir,
                    "env": env,
                    "walls": walls,
                },
                theirs,
            )
        except BaseException:
            for fd in (pipes[0][0], pipes[1][0], pipes[2][0], pipes[3][1], pipes[4][0]):
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        self.pid = int(reply["pid"])
        self.result_fd, self.stdout_fd, self.stderr_fd = pipes[0][0], pipes[1][0], pipes[2][0]
        self.call_fd = pipes[3][1]
        self._status_fd: int | None = pipes[4][0]
        self._status: int | None = None
        self._stat_fd = open_stat(self.pid)
        self._schedstat_fd = open_proc_file(self.pid, "schedstat")

    def exit_code(self, timeout: float) -> int | None:
        if self._status is None and self._status_fd is not None:
            ready, _, _ = select.select([self._status_fd], [], [], max(timeout, 0.0))
            if not ready:
                return None
            text = os.read(self._status_fd, 64).decode("ascii", "replace").strip()
            os.close(self._status_fd)
            self._status_fd = None
            self._status = int(text) if text.lstrip("-").isdigit() else -signal.SIGKILL
        return self._status

    def kill(self, finished: bool = False, wait: bool = True) -> None:
        self.end_calls()
        ended = self.exit_code(0.5 if finished else 0.0)
        try:  # even when the job ended by itself: the server kills and reaps whatever it left behind
            self.server.request({"op": "kill", "pid": self.pid})
        except OSError:
            pass
        if ended is None:
            self.exit_code(5.0)
        self._close_proc_files()

    def describe_exit(self, code: int, imported: bool) -> str:
        return describe_exit(code)


def describe_exit(code: int) -> str:
    """Words for a worker's exit code (negative: killed by that signal)."""
    if code < 0:
        sig = -code
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return f"the process was killed ({name}): it used up its CPU time or memory"
        if sig == signal.SIGXFSZ:
            return f"the process was killed ({name}): it wrote a file larger than allowed"
        return f"the process was killed by signal {name}"
    if code == CHANNEL_LOST_EXIT:
        return CHANNEL_LOST
    return f"the process exited with code {code} before answering"


class _Child:
    """The parent's side of one job: sends calls, reads frames and output against deadlines.

    Every descriptor is non-blocking: the grader never waits on a job
    except in ``select`` with a deadline.
    """

    def __init__(self, job: Job) -> None:
        self.job = job
        self.result_fd = job.result_fd
        self.buffer = bytearray()
        self.selector = selectors.DefaultSelector()
        for fd, name in ((job.result_fd, "result"), (job.stdout_fd, "stdout"), (job.stderr_fd, "stderr")):
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ, name)
        if job.call_fd >= 0:
            os.set_blocking(job.call_fd, False)
        self.result_open = True
        self.eof_grace_end: float | None = None
        self.closed = False
        self.imported = False  # set when its import frame said the import worked
        self.finished = False  # set when every call was answered
        self.bytes_read = 0  # of the result pipe: what the grader took in from this job
        self.empty = False  # the last read of the result pipe found nothing (reset when it is readable)
        self.last_wire = b""  # the bytes of the last frame read (`CallResult.wire`)
        self.large: bytearray | None = None  # a large frame being read in place (`_read_large`)
        self.filled = 0  # its bytes read so far

    def send(self, call: Call | bytes, deadline: float) -> str:
        """Write a phase of calls (`grader.models.phase_wire`; a `Call`: that call alone) to the job's call pipe.

        Returns ``"sent"``, ``"closed"`` (the pipe is gone) or ``"timeout"``.
        """
        fd = self.job.call_fd
        view = memoryview(call.wire if isinstance(call, Call) else call)
        while view:
            try:
                view = view[os.write(fd, view) :]
                continue
            except BlockingIOError:
                pass
            except OSError:  # EPIPE: the job closed the pipe, or is gone
                return "closed"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            select.select([], [fd], [], remaining)
        return "sent"

    def drain(self, sink: dict[str, bytearray]) -> None:
        """Read what the job has written to stdout and stderr so far, without waiting."""
        for fd, name in ((self.job.stdout_fd, "stdout"), (self.job.stderr_fd, "stderr")):
            if fd not in self.selector.get_map():
                continue
            for _ in range(64):  # at most 4 MiB now; the rest is later output anyway
                try:
                    chunk = os.read(fd, 1 << 16)
                except (BlockingIOError, OSError):
                    break
                if not chunk:
                    self.selector.unregister(fd)
                    break
                self._keep(sink[name], chunk)

    @staticmethod
    def _keep(kept: bytearray, chunk: bytes) -> None:
        room = OUTPUT_CAP_BYTES + 1 - len(kept)
        if room > 0:
            kept += chunk[:room]

    def read_frame(
        self, deadline: float, sink: dict[str, bytearray], expect: str = "call", budget: ResultBudget | None = None
    ) -> dict[str, Any] | str | BoundaryError:
        """Return the next frame, decoded and validated by `grader.execution.boundary.decode_frame`.

        Or ``"timeout"`` (nothing by ``deadline``), ``"eof"`` (the result
        pipe closed), or the `BoundaryError` that refused the frame. A frame
        whose length prefix exceeds its limit is refused before more of it
        is read than one read ahead (`READ_AHEAD_BYTES`): what is read at
        once is whatever the pipe holds, up to the frame's need or that
        much, so that the frames of calls answered meanwhile take one read.
        """
        limit = IMPORT_FRAME_BYTES if expect != "call" else frame_limit(budget)
        while True:
            if self.result_open:
                need = 4 - len(self.buffer)
                if need <= 0 and self.large is None:
                    size = int.from_bytes(self.buffer[:4], "big")
                    try:
                        check_length(size, limit, budget, expect)
                    except BoundaryError as exc:
                        return exc
                    need = 4 + size - len(self.buffer)
                    if need <= 0:
                        return self._take(size, expect, budget)
                    if size >= LARGE_FRAME_BYTES:  # within its limit: read in place from here on
                        # (the buffer holds less than this frame, so nothing of the next one)
                        self.large = bytearray(size)
                        self.large[: len(self.buffer) - 4] = self.buffer[4:]
                        self.filled = len(self.buffer) - 4
                        self.buffer.clear()
                if self.large is not None:
                    got = self._read_large(expect, budget)
                    if got is True:
                        continue
                    if got is not False:
                        return got
                    chunk = None  # nothing there yet: wait below
                else:
                    try:
                        # Not again before the pipe says it has more: the read just before found it empty.
                        chunk = (
                            None if self.empty else os.read(self.result_fd, min(max(need, READ_AHEAD_BYTES), 1 << 20))
                        )
                    except BlockingIOError:
                        chunk = None
                        self.empty = True
                    except OSError:
                        chunk = b""
                if chunk:
                    self.bytes_read += len(chunk)
                    self.buffer += chunk
                    continue
                if chunk == b"":
                    self._result_closed()
            if not self.result_open:
                # Briefly keep reading stdout and stderr: what the job wrote just before it
                # ended (why it crashed, why its setup failed) must not be lost.
                if self.eof_grace_end is None:
                    self.eof_grace_end = time.monotonic() + EOF_GRACE_SECONDS
                remaining = self.eof_grace_end - time.monotonic()
                if remaining <= 0 or not self.selector.get_map():
                    return "eof"
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return "timeout"
            for key, _ in self.selector.select(remaining):
                if key.data == "result":
                    self.empty = False
                    continue  # read at the top of the loop
                try:
                    chunk = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    self.selector.unregister(key.fd)
                    continue
                self._keep(sink[key.data], chunk)

    def _take(self, size: int, expect: str, budget: ResultBudget | None) -> dict[str, Any] | BoundaryError:
        """The frame of ``size`` bytes at the head of the buffer (whole, its length checked), decoded."""
        data = bytes(self.buffer[4 : 4 + size])
        del self.buffer[: 4 + size]
        self.last_wire = data
        try:
            return FRAMES.decode(data, expect, budget)
        except BoundaryError as exc:
            return exc

    def take_ready(self, budget: ResultBudget | None) -> dict[str, Any] | BoundaryError | None:
        """The next call frame if it is already read whole (decoded, or what refused it); else None, reading nothing.

        `read_frame` without its loop, for the answers read ahead with the one before them.
        """
        buffer = self.buffer
        if self.large is not None or len(buffer) < 4:
            return None
        size = int.from_bytes(buffer[:4], "big")
        if len(buffer) < 4 + size:
            return None  # read_frame checks the length, and reads the rest
        try:
            check_length(size, frame_limit(budget), budget, "call")
        except BoundaryError as exc:
            return exc
        return self._take(size, "call", budget)

    def _read_large(self, expect: str, budget: ResultBudget | None) -> dict[str, Any] | BoundaryError | bool:
        """Read more of a large frame (`LARGE_FRAME_BYTES`) straight into its own buffer.

        Returns the decoded frame, or the `BoundaryError` that refused it, once it is whole;
        True when bytes came, or the result pipe closed before the frame was whole (`read_frame`
        reads on, or sees the pipe closed); False when no byte is there yet. A large frame's
        `CallResult.wire` is empty: it is judged each time (hashing 2 MiB as a verdict's key
        costs about what judging it does, and would keep it).
        """
        assert self.large is not None
        self.last_wire = b""
        if self.empty:
            return False
        try:
            n = os.readv(self.result_fd, [memoryview(self.large)[self.filled :]])
        except BlockingIOError:
            self.empty = True
            return False
        except OSError:
            n = 0
        if n == 0:
            self.large = None  # it will never be whole
            self._result_closed()
            return True
        self.bytes_read += n
        self.filled += n
        if self.filled < len(self.large):
            return True
        data, self.large = self.large, None
        try:
            return decode_frame(data, expect, budget)
        except BoundaryError as exc:
            return exc

    def _result_closed(self) -> None:
        self.result_open = False
        self.selector.unregister(self.result_fd)

    def frame_ready(self) -> bool:
        """Whether a whole frame is already read (after one read without waiting, if none was)."""
        if self.large is not None:  # a large frame part read: read_frame reads the rest
            return False
        if len(self.buffer) >= 4 and len(self.buffer) >= 4 + int.from_bytes(self.buffer[:4], "big"):
            return True
        if not self.result_open:
            return False
        if self.empty:
            return False
        try:
            chunk = os.read(self.result_fd, READ_AHEAD_BYTES)
        except BlockingIOError:
            self.empty = True  # read_frame waits for the pipe instead of reading it again
            return False
        except OSError:  # gone: read_frame says so
            return False
        if not chunk:
            return False  # end of file: left for read_frame to see (the read returns it again)
        self.bytes_read += len(chunk)
        self.buffer += chunk
        return len(self.buffer) >= 4 and len(self.buffer) >= 4 + int.from_bytes(self.buffer[:4], "big")

    def pending(self) -> bool:
        """Whether the result pipe holds more (or has closed) although no call is outstanding."""
        if self.buffer or not self.result_open:
            return True
        return bool(select.select([self.result_fd], [], [], 0)[0])

    def exit_description(self) -> str:
        """Say how the job ended, once it is gone; a job still running after its result pipe closed lost it."""
        code = self.job.exit_code(2.0)
        if code is None:
            return CHANNEL_LOST if not self.result_open else "the process stopped answering"
        return self.job.describe_exit(code, self.imported)

    def kill(self, wait: bool = True) -> None:
        """Kill the job and release the pipes (idempotent); see `Job.kill` for ``wait``."""
        if self.closed:
            return
        self.closed = True
        self.job.kill(finished=self.finished, wait=wait)
        self.selector.close()
        for fd in (self.job.result_fd, self.job.stdout_fd, self.job.stderr_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def _result_of(frame: dict[str, Any], seconds: float, wire: bytes = b"") -> CallResult:
    """A validated call frame (`grader.execution.boundary.decode_frame`) as a `CallResult`, with the grader's duration.

    ``wire`` is the frame's bytes (`CallResult.wire`).
    """
    status, mutated = frame["status"], frame["mutated"]
    if status == "returned":
        return CallResult("returned", value=frame["value"], seconds=seconds, mutated_args=mutated, wire=wire)
    if status == "raised":
        return CallResult(
            "raised",
            error_type=frame["type"] or "Exception",
            value_error=frame["value_error"],
            message=frame["message"],
            where=frame["where"],
            seconds=seconds,
            mutated_args=mutated,
            wire=wire,
        )
    return CallResult(status, message=frame["message"], seconds=seconds, mutated_args=mutated, wire=wire)


def _call_result(frame: dict[str, Any]) -> CallResult:
    """A call frame held as data (``grader.packs.catalogue``'s cache) as a `CallResult`, checked as a job's frame is.

    The frame is written again as the worker writes it and decoded by
    `grader.execution.boundary.decode_frame`; its ``seconds`` (the grader's own
    measure, stored with it) is kept if it is a finite number of seconds.
    """
    status = frame.get("status")
    keys = CALL_KEYS.get(status) if isinstance(status, str) else None
    raw = frame.get("seconds")
    seconds = 0.0
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and 0 <= raw < 1e9:  # JSON numbers, no true/false
        seconds = float(raw)
    if keys is None:
        return CallResult("crashed", message=UNREADABLE)
    wire = {key: value for key, value in frame.items() if key in keys}
    wire["event"] = "call"
    try:
        data = json.dumps(encode_nonfinite(wire), allow_nan=False).encode("utf-8", "surrogatepass")
        return _result_of(decode_frame(data, "call"), seconds)
    except BoundaryError as exc:
        return CallResult("bad_return" if not exc.fatal else "crashed", message=exc.message, seconds=seconds)
    except (TypeError, ValueError, RecursionError):
        return CallResult("crashed", message=UNREADABLE)


STANDBY_LEAD_SECONDS = 0.25
"""How long before a call's limit (of CPU time, or of wall-clock time) its successor worker is
started as a standby (seconds): more than a plain worker takes to start and import numpy."""


def _standby(launch: Launcher, source: bytes, workdir: str, cpu: float) -> Job:
    """Start a worker ahead, as a standby (see `Launcher`)."""
    return launch(source, workdir, cpu, standby=True)


def phases(calls: Sequence[Call]) -> list[tuple[int, int]]:
    """The hand-overs of ``calls``: ``(start, end)`` of the calls before the first hidden one, then of the rest.

    A job is handed a phase at once; the hidden phase only once every
    visible call has answered and what the submission printed until then
    is kept (see `run_calls`). One phase when no call (or every call) is hidden.
    """
    first_hidden = next((i for i, c in enumerate(calls) if c.hidden), len(calls))
    cuts = [0, first_hidden, len(calls)]
    return [(x, y) for x, y in itertools.pairwise(cuts) if y > x]


class _Budget:
    """A submission's budget: CPU seconds of its own jobs, and a wall-clock backstop for true hangs.

    Every job the submission runs (its workers, the standbys started for
    it) is charged its CPU time when it ends (`charge`); the job running
    now counts what it has used so far (`cpu_left`). So the budget is
    spent only by the submission's own processes, however busy the machine
    is. The backstop (`end`) is `WALL_BACKSTOP_FACTOR` times the budget in
    wall-clock time, moved on by the time the jobs spent waiting for a CPU
    (`extend`): it stops a submission that waits (sleeps, blocks) rather
    than computes. Where a job's CPU time cannot be read, the budget is
    wall-clock time, as the calls' limits are.

    Parameters
    ----------
    seconds : float
        The budget (``--submission-timeout``): CPU seconds of the submission's jobs.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spent = 0.0  # CPU seconds of the jobs that are over
        self.waited = 0.0  # seconds those jobs waited for a CPU
        self.cpu_timed = True  # False once a job's CPU time could not be read: wall-clock time then
        self.began = time.monotonic()
        self.wall = seconds * WALL_BACKSTOP_FACTOR
        self.end = self.began + self.wall
        self.over_cpu = f"the submission used up its {seconds:g} s budget of CPU time"
        self.over_wall = f"the submission used up its {self.wall:g} s budget of wall-clock time"

    def wall_only(self) -> None:
        """Time the submission by the wall clock: its jobs' CPU time cannot be read here."""
        if self.cpu_timed:
            self.cpu_timed = False
            self.wall = self.seconds
            self.end = self.began + self.seconds
            self.over_wall = f"the submission used up its {self.seconds:g} s budget"

    def cpu_left(self, job_cpu: float) -> float:
        """CPU seconds left, the running job having used ``job_cpu`` (its `Job.cpu_seconds`)."""
        return self.seconds - self.spent - job_cpu

    def charge(self, job: Job) -> None:
        """Count the CPU time (and CPU waiting) of a job about to end."""
        cpu = job.cpu_seconds()
        if cpu is not None:
            self.spent += cpu
        waited = getattr(job, "wait_seconds", None)
        wait = waited() if waited is not None else None
        if wait is not None:
            self.waited += wait

    def extend(self, job: Job) -> bool:
        """Move the backstop on by the running ``job``'s waiting for a CPU; whether it is still ahead."""
        waited = getattr(job, "wait_seconds", None)
        wait = waited() if waited is not None and self.cpu_timed else None
        if wait is not None:
            self.end = max(self.end, self.began + self.wall + self.waited + wait)
        return self.end > time.monotonic()

    def used_up(self) -> str:
        """Why no more call may start ('' while the budget lasts), between jobs."""
        if self.cpu_timed and self.spent >= self.seconds:
            return self.over_cpu
        if time.monotonic() >= self.end and self.cpu_timed:
            self.end = max(self.end, self.began + self.wall + self.waited)
        return self.over_wall if time.monotonic() >= self.end else ""


def _await_import(child: _Child, import_timeout: float, budget: _Budget, sink: dict[str, bytearray]) -> Any:
    """The job's import frame (`_Child.read_frame`), or ``"timeout"``, or the budget's reason it is used up.

    The import's limit is ``import_timeout`` seconds of the job's CPU time
    (its start and set-up included), with a wall-clock backstop
    `WALL_BACKSTOP_FACTOR` times larger, moved on by the job's waiting for
    a CPU; where the job's CPU time cannot be read, ``import_timeout``
    seconds of wall-clock time.
    """
    began = time.monotonic()
    own_backstop = began + import_timeout * WALL_BACKSTOP_FACTOR
    job = child.job
    waited = getattr(job, "wait_seconds", None)
    readable = getattr(job, "cpu_readable", None)
    timed = budget.cpu_timed and readable is not None and bool(readable())
    while True:
        now = time.monotonic()
        cpu = job.cpu_seconds() if budget.cpu_timed else None
        if cpu is None and timed:  # nothing counted yet (still setting up): only the backstop applies
            used, limit, capped = 0.0, import_timeout, False
        elif cpu is None:  # not readable: the clock
            used, limit, capped = now - began, import_timeout, False
        else:
            left = budget.cpu_left(cpu)
            used, limit, capped = cpu, min(import_timeout, max(cpu + left, 0.0)), left < import_timeout - cpu
        if used >= limit:
            return budget.over_cpu if capped else "timeout"
        backstop = min(own_backstop, budget.end)
        if now >= backstop and (cpu is not None or timed):
            # The job's waiting for a CPU (since it started: a standby's too) is not the import's.
            wait = waited() if waited is not None else None
            if wait is not None:
                own_backstop = max(own_backstop, began + import_timeout * WALL_BACKSTOP_FACTOR + wait)
            if backstop >= budget.end:
                budget.extend(job)
            backstop = min(own_backstop, budget.end)
        if now >= backstop:
            return budget.over_wall if backstop >= budget.end else "timeout"
        # CPU time grows no faster than the clock (one thread; a sandbox slot is capped at one CPU).
        step = max(limit - used, MIN_POLL_SECONDS) if cpu is not None or not timed else 0.5
        frame = child.read_frame(min(now + step, backstop), sink, "import")
        if frame != "timeout":
            return frame


def run_calls(
    file: str,
    calls: Sequence[Call],
    import_timeout: float = 10.0,
    submission_timeout: float = 120.0,
    launch: Launcher | None = None,
    scratch: bool = True,
    filename: str | None = None,
) -> RunOutcome:
    """Run ``calls`` against the submission ``file`` in child processes, a phase of calls at a time.

    The calls are handed to the job in two *phases* (`phases`): every call
    before the first hidden one, then, once each of those has answered and
    the submission's output so far is kept, the hidden calls. The job
    answers each call with its own frame as soon as it is done; a call is
    timed from the previous answer's arrival (or the phase's hand-over) to
    its own. Its timeout counts the job's CPU time in that span, with a
    wall-clock backstop of `WALL_BACKSTOP_FACTOR` times the timeout (wall
    time only, where the job's CPU time cannot be read). A call that times
    out or kills its process costs only that call: the calls after it run
    in a fresh worker. That worker is started as a *standby*
    `STANDBY_LEAD_SECONDS` before the call's limit (it sets up and imports
    the file, then waits for its calls), so when the call does time out the
    remaining calls go on at once and a hanging call costs its timeout and
    nothing more. A standby not needed (the call returned) is killed before
    it gets any call.

    Parameters
    ----------
    file : str
        The submission's Python file.
    calls : sequence of Call
        The calls to make, each with its own timeout in seconds (of CPU
        time), result budget and hidden flag.
    import_timeout : float
        CPU seconds allowed for the child to start and import the file
        (`_await_import`: a wall-clock backstop `WALL_BACKSTOP_FACTOR`
        times larger; wall-clock seconds where CPU time cannot be read).
    submission_timeout : float
        The whole submission's budget: CPU seconds of its jobs, with a
        wall-clock backstop (`_Budget`); calls not reached within it are
        reported as ``timeout``.
    launch : callable
        Starts a worker (`PlainJob` by default; the sandbox passes its own);
        see `Launcher`.
    scratch : bool
        Make a temporary folder for the workers (passed to ``launch``);
        False passes ``""`` (the sandbox's jobs have their own folders).
    filename : str, optional
        The name the default launcher gives the file in the job (the course
        pack's submission file); default: ``file``'s own name.

    Returns
    -------
    grader.models.RunOutcome
        One result per call, in order. ``import_error`` is set when the file
        could not be imported; every call is then ``skipped``. ``stdout``
        and ``stderr`` hold what was printed before the first hidden call
        was sent.
    """
    if launch is None:
        launch = functools.partial(PlainJob, filename=filename or os.path.basename(file))
    try:
        source = read_source(file)
    except OSError as exc:
        why = f"{Path(file).name} could not be read ({exc.strerror}); was it moved or changed during grading?"
        return RunOutcome(tuple(CallResult("skipped", message=why) for _ in calls), why)
    sha256 = hashlib.sha256(source).hexdigest()
    results: list[CallResult | None] = [None] * len(calls)
    sink = {"stdout": bytearray(), "stderr": bytearray()}
    mark: tuple[int, int] | None = None  # the output's lengths when the first hidden call was sent
    import_error = ""
    budget = _Budget(submission_timeout)
    phase_ends = [end for _, end in phases(calls)]

    def cpu_for(pending: Sequence[Call]) -> float:
        return import_timeout + sum(c.timeout for c in pending) + CPU_RLIMIT_MARGIN_SECONDS

    def out_of_time(start: int, why: str) -> None:
        for j in range(start, len(calls)):
            results[j] = CallResult("timeout", message=f"not run: {why}")

    start = 0
    standby: _Child | None = None  # a worker for calls[start:], imported or importing, waiting for a call
    with (
        tempfile.TemporaryDirectory(prefix=scratch_prefix("job")) if scratch else contextlib.nullcontext("") as workdir
    ):
        try:
            while start < len(calls):
                spent = budget.used_up()
                if spent:
                    out_of_time(start, spent)
                    break
                handover = False  # True once a standby took over from this worker
                if standby is not None:  # started while the call before it was about to time out
                    child, standby = standby, None
                else:
                    child = _Child(launch(source, workdir, cpu_for(calls[start:])))
                try:
                    frame = _await_import(child, import_timeout, budget, sink)
                    if frame in (budget.over_cpu, budget.over_wall):
                        assert isinstance(frame, str)
                        out_of_time(start, frame)
                        break
                    if not isinstance(frame, dict) or not frame["ok"]:
                        import_error = _import_problem(frame, child, import_timeout, again=mark is not None)
                        for j in range(start, len(calls)):
                            results[j] = CallResult("skipped", message=import_error)
                        break
                    child.imported = True
                    if budget.cpu_timed and child.job.cpu_seconds() is None:
                        budget.wall_only()  # this job's CPU time cannot be read: the clock times it
                    stop_at = len(calls)
                    j = start
                    while j < len(calls):
                        end = next(e for e in phase_ends if e > j)
                        if calls[j].hidden and mark is None:
                            child.drain(sink)
                            mark = (len(sink["stdout"]), len(sink["stderr"]))
                        got, failed, standby = _run_phase(
                            child,
                            calls,
                            j,
                            end,
                            budget,
                            sink,
                            lambda pending: _standby(launch, source, workdir, cpu_for(pending)),
                        )
                        results[j : j + len(got)] = got
                        if failed:
                            handover = standby is not None
                            stop_at = j + len(got)
                            break
                        j = end
                    else:
                        child.finished = True
                        child.drain(sink)  # what it printed with its last answer
                    start = stop_at
                finally:
                    # A job replaced by its standby, or done, is ended without waiting (see `Job.kill`).
                    budget.charge(child.job)
                    child.kill(wait=not (handover or child.finished))
        finally:
            if standby is not None:
                budget.charge(standby.job)
                standby.kill()
    out = [r if r is not None else CallResult("skipped", message="not run") for r in results]
    stdout = _decode(sink["stdout"], mark[0] if mark else None)
    stderr = _decode(sink["stderr"], mark[1] if mark else None)
    return RunOutcome(tuple(out), import_error, stdout, stderr, sha256)


def _run_phase(
    child: _Child,
    calls: Sequence[Call],
    start: int,
    end: int,
    budget: _Budget,
    sink: dict[str, bytearray],
    start_standby: Callable[[Sequence[Call]], Job],
) -> tuple[list[CallResult], bool, _Child | None]:
    """Hand ``calls[start:end]`` to ``child`` at once and read one answer per call, each against its own limits.

    Call ``k`` is timed from the moment the answer before it was read (the
    phase's hand-over, for the first) until its own answer is read; its
    CPU time is the job's in that span (every call before it had answered,
    so no later call had started), counted from before a pause of
    `GATHER_SECONDS` when its answer was not in yet. A frame already in the
    pipe is read without waiting.

    Returns
    -------
    (list of CallResult, bool, _Child or None)
        The results of the calls answered (the last one the call that
        failed, when the job cannot go on), whether the job must be
        replaced, and the standby started meanwhile (None if none is, or it
        is not needed: a standby not needed is killed here).
    """
    got: list[CallResult] = []
    began = time.monotonic()
    first = calls[start]
    cpu_timed = child.job.cpu_seconds() is not None
    phase_wait0: float | None = None  # the job's CPU waiting so far, read at the phase's first wait
    sent = child.send(phase_wire(calls[start:end]), min(began + first.timeout * WALL_BACKSTOP_FACTOR, budget.end))
    standby: _Child | None = None
    phase_began = began
    for j in range(start, end):
        call = calls[j]
        if j > start:
            began = time.monotonic()
        taken = child.take_ready(call.budget) if sent == "sent" else None
        if isinstance(taken, dict):  # read with the answer before it: no waiting, no clock, no CPU reading
            got.append(_result_of(taken, time.monotonic() - began, child.last_wire))
            continue
        # An answer already read needs no CPU reading (it came in time); others are timed from now.
        ready = taken is not None or child.frame_ready()
        cpu_before: float | None = None
        if not ready and sent == "sent" and child.result_open:
            # Let the answers of the next fast calls gather, then read them at once; near the phase's
            # end, only for about as long as its last calls should take (at the pace of the ones before).
            pause = GATHER_SECONDS
            if j > start:
                pause = min(pause, (time.monotonic() - phase_began) / (j - start) * (end - j))
            if pause >= MIN_GATHER_SECONDS:
                # Read before the pause: a busy machine may stretch it well past its length, and the
                # call's CPU in it is the call's.
                cpu_before = child.job.cpu_seconds() if cpu_timed else None
                time.sleep(pause)
                child.empty = False
                ready = child.frame_ready()
        if not cpu_timed:
            cpu0 = None
        elif ready:
            cpu0 = 0.0
        else:
            cpu0 = cpu_before if cpu_before is not None else child.job.cpu_seconds()
        wall_limit = call.timeout * WALL_BACKSTOP_FACTOR if cpu0 is not None else call.timeout
        # The call's CPU limit, or what is left of the submission's CPU budget if that is less.
        limit, capped = call.timeout, False
        if cpu0 is not None and not ready and budget.cpu_timed:
            left = budget.cpu_left(cpu0)
            if left < limit:
                limit, capped = max(left, 0.0), True
        own_backstop = began + wall_limit
        backstop = min(own_backstop, budget.end)
        waited = getattr(child.job, "wait_seconds", None) if cpu0 is not None and not ready else None
        if waited is not None and phase_wait0 is None:
            # Read once a phase: a call's waiting is counted from the phase's first unanswered call,
            # which can only move a backstop further (the submission's budget still bounds it).
            phase_wait0 = waited()
        wait0 = phase_wait0
        more = j + 1 < len(calls)
        want_standby = more and call.timeout > STANDBY_LEAD_SECONDS
        frame: dict[str, Any] | str | BoundaryError = sent
        if taken is not None:  # a frame already read, refused
            frame = taken
        elif sent == "sent" and ready:  # its answer is already read: no waiting, no clock
            frame = child.read_frame(budget.end, sink, "call", call.budget)
        elif sent == "sent":
            polled = cpu_before is not None  # the call ran through the pause: look at its CPU at once
            while True:
                now = time.monotonic()
                if cpu0 is None:
                    used = now - began
                elif polled:
                    cpu = child.job.cpu_seconds()
                    used = (cpu - cpu0) if cpu is not None else now - began
                else:
                    used = 0.0  # nothing ran yet that a wait of the whole budget could overrun
                if limit - used <= 0:
                    frame = ("budget" if capped else "cpu") if cpu0 is not None else "wall"
                    break
                if backstop - now <= 0 and waited is not None and wait0 is not None and backstop < budget.end:
                    # Time the job spent waiting for a CPU (a busy machine) is not the call's: the backstop
                    # moves on by it, so a call that computes meets its CPU limit first, however busy.
                    waited_now = waited()
                    left = wall_limit - (now - began - (waited_now - wait0)) if waited_now is not None else 0.0
                    if left > 0:
                        own_backstop = now + left
                        backstop = min(own_backstop, budget.end)
                if backstop - now <= 0 and backstop >= budget.end and budget.extend(child.job):
                    backstop = min(own_backstop, budget.end)  # the submission's backstop moved on by its waiting
                if backstop - now <= 0:
                    frame = "wall"
                    break
                remaining = min(limit - used, backstop - now)
                if want_standby and standby is None and remaining <= STANDBY_LEAD_SECONDS:
                    standby = _Child(start_standby(calls[j + 1 :]))  # the call may hang: get its successor ready
                lead = STANDBY_LEAD_SECONDS if want_standby and standby is None else 0.0
                wait = max(remaining - lead, MIN_POLL_SECONDS)
                frame = child.read_frame(min(now + wait, backstop), sink, "call", call.budget)
                polled = True
                if frame != "timeout":
                    break
        seconds = time.monotonic() - began
        if isinstance(frame, dict):
            result: CallResult = _result_of(frame, seconds, child.last_wire)
        elif isinstance(frame, BoundaryError) and not frame.fatal:  # a well-formed frame whose value is refused
            result = CallResult("bad_return", message=frame.message, seconds=seconds)
        else:
            got.append(_failed_call(frame, child, call, cpu0 is not None, backstop >= budget.end, budget, seconds))
            return got, True, standby
        got.append(result)
        if standby is not None:  # the call answered in time after all
            standby.kill()
            standby = None
    if end < len(calls) and child.pending():
        # More answers than calls (frames the submission wrote itself), or the job ended right after
        # answering: the next phase goes to a fresh job, never to a stale answer.
        return got, True, None
    return got, False, None


def _failed_call(
    frame: str | BoundaryError,
    child: _Child,
    call: Call,
    cpu_timed: bool,
    budget_bound: bool,
    budget: _Budget,
    seconds: float,
) -> CallResult:
    """The result of a call that did not answer: timed out, refused, or the job ended or lost its channel."""
    if frame == "budget":
        return CallResult("timeout", message=budget.over_cpu, seconds=seconds)
    if frame == "cpu":
        return CallResult("timeout", message=f"the call used more than {call.timeout:g} s of CPU time", seconds=seconds)
    if frame in ("wall", "timeout"):
        if budget_bound:
            return CallResult("timeout", message=budget.over_wall, seconds=seconds)
        if not cpu_timed:
            return CallResult("timeout", message=f"the call took longer than {call.timeout:g} s", seconds=seconds)
        return CallResult(
            "timeout",
            seconds=seconds,
            message=(f"the call took longer than {call.timeout * WALL_BACKSTOP_FACTOR:g} s of wall-clock time"),
        )
    if isinstance(frame, BoundaryError):
        return CallResult("crashed", message=frame.message, seconds=seconds)
    if frame == "closed" and child.job.exit_code(0.5) is None:  # alive, but its call pipe is gone
        return CallResult("crashed", message=CHANNEL_LOST, seconds=seconds)
    return CallResult("crashed", message=child.exit_description(), seconds=seconds)


def _import_problem(
    frame: dict[str, Any] | str | BoundaryError, child: _Child, import_timeout: float, again: bool = False
) -> str:
    """One sentence saying why the submission could not be imported.

    ``again``: a worker started after the first hidden call (to replace one
    that ended) failed to import what imported before; its message, which
    the submission wrote and could fill with a hidden input, is not repeated.
    """
    if isinstance(frame, dict):
        kind, where = frame["type"], frame["where"]
        location = f" ({where})" if where else ""
        if again:
            return f"importing the file again (after a check that ended its process) failed with {kind}{location}"
        message = frame["message"]
        return f"importing the file failed with {kind}{location}: {message}{explain_error(kind, message)}"
    if frame == "timeout":
        return f"importing the file took longer than {import_timeout:g} s (does it run a loop at top level?)"
    if isinstance(frame, BoundaryError):
        return f"importing the file failed: {frame.message}"
    return f"importing the file failed: {child.exit_description()}"


def _decode(data: bytearray, mark: int | None = None) -> str:
    """Captured output as text: capped, and cut where the first hidden call was sent (``mark``)."""
    cut = mark is not None and len(data) > mark
    kept = data[:mark] if cut else data
    text = bytes(kept[:OUTPUT_CAP_BYTES]).decode("utf-8", errors="replace")
    if len(kept) > OUTPUT_CAP_BYTES:
        text += f"\n[output cut at {OUTPUT_CAP_BYTES // 1024} KiB]"
    if cut:
        text += ("" if not text or text.endswith("\n") else "\n") + HIDDEN_CUT_NOTE
    return text


JobChannel = _Child
"""The parent's side of one job (`Job`): what a launcher's caller reads frames from."""

call_result = _call_result
"""A call frame held as data (the catalogue's cache) as a `CallResult`, checked as a job's frame is."""


class LauncherPool(Protocol):
    """Launchers lent one at a time (the sandbox's workers: each has its own uids and cgroup)."""

    def slot(self) -> contextlib.AbstractContextManager[Launcher]:
        """Wait for a free launcher; give it back when the block ends."""


def sandboxed(config: Any) -> bool:
    """Whether a run's submissions run in the sandbox: ``grade``, unless ``--insecure``.

    The other commands run trusted code only (the reference, the catalogued
    mutants, a student's own file on their own machine) in plain child
    processes (`PlainJob`).
    """
    return config.command == "grade" and not config.option("insecure", False)


"""The parent's side of one job (`Job`): what a launcher's caller reads frames from."""

call_result = _call_result
"""A call frame held as data (the catalogue's cache) as a `CallResult`, checked as a job's frame is."""
