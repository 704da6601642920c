"""The jobs that run a submission's calls in child processes: the `Job` protocol and the plain launchers.

The runner plugin (``grader.builtin.runner``) answers ``grader_run_calls`` with
`grader.execution.calls.run_calls` and the launcher the configuration asks for: `PlainJob`
(``--insecure``, and the commands that run only visible checks), `ForkJob` (forked by a warm
`ForkServer`), or the sandbox's jobs (``grader.builtin.sandbox``, which starts its own workers
through the same `Job` protocol and `grader.execution.channel.JobChannel`).

The student's code never runs in the grader's process. Per submission, a
child ``python -I -B -u grader/child/worker.py`` starts in a fresh temporary
folder, with a scrubbed environment (BLAS threads pinned to 1), its own
session (process group), and rlimits on CPU time, core dumps and file size.
Its task (the request file) names only the submission's file: the child
imports it and reports on a dedicated result pipe, then gets its calls on
its stdin (the call pipe) in two hand-overs (`grader.execution.calls.phases`): the visible calls,
then, once each has answered and the output so far is kept, the hidden
ones; it answers each call with its own frame as soon as it is done. So no
hidden argument is in its memory at import or during a visible call.
Frames are read by `grader.execution.channel`, timeouts and the submission's budget are
`grader.execution.calls`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from grader.execution.boundary import CHANNEL_LOST_EXIT
from grader.execution.servers import CHILD_ENV as CHILD_ENV
from grader.execution.servers import FORKSERVER as FORKSERVER
from grader.execution.servers import fork_server_available
from grader.execution.servers import start_server as start_server
from grader.execution.servers import stop_server as stop_server
from grader.fileio import MAX_SOURCE_BYTES, fd_ready, read_at_most

if TYPE_CHECKING:
    import socket  # imported where it is used: 'grader check' starts without it

WORKER = str(Path(__file__).resolve().parent.parent / "child" / "worker.py")
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


def usable_cores(proc_cgroup: str = "/proc/self/cgroup", cgroup_root: str = "/sys/fs/cgroup") -> int:
    """The cores this process may keep busy: its CPU affinity, capped by its cgroups' CPU quota.

    ``os.cpu_count()`` counts the machine's cores. A process pinned with ``taskset``, given a
    container's cpuset or a cluster job's allocation runs on fewer (its affinity mask); one in a
    container with a CPU quota (``docker --cpus 2``: cgroup v2 ``cpu.max``, v1
    ``cpu.cfs_quota_us``) gets at most quota / period of them, rounded up, however many it sees.
    The quotas of the process's cgroup and of each one above it count (the smallest wins).

    Parameters
    ----------
    proc_cgroup : str
        The file that names the process's cgroups (a test gives its own).
    cgroup_root : str
        Where the cgroup file systems are mounted.

    Returns
    -------
    int
        At least 1. A file that cannot be read or parsed sets no cap.
    """
    process_cpu_count = getattr(os, "process_cpu_count", None)  # Python 3.13: the affinity mask's count
    if process_cpu_count is not None:
        cores = process_cpu_count() or 1
    else:
        try:
            cores = len(os.sched_getaffinity(0)) or 1
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    try:
        with open(proc_cgroup, "rb") as fh:  # a cgroup's name is any bytes: read as a path is
            lines = os.fsdecode(fh.read(65536)).splitlines()
    except OSError:
        return cores
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        files: list[tuple[str, ...]]
        if controllers == "":  # cgroup v2: cpu.max is "QUOTA PERIOD" or "max PERIOD"
            files = [(os.path.join(cgroup_root, folder, "cpu.max"),) for folder in _cgroup_folders(path)]
        elif "cpu" in controllers.split(","):
            mount = os.path.join(cgroup_root, controllers)
            files = [
                (os.path.join(mount, folder, "cpu.cfs_quota_us"), os.path.join(mount, folder, "cpu.cfs_period_us"))
                for folder in _cgroup_folders(path)
            ]
        else:
            continue
        for names in files:
            quota = _cpu_quota(names)
            if quota is not None:
                cores = min(cores, max(1, -(-quota[0] // quota[1])))
    return cores


def _cgroup_folders(path: str) -> list[str]:
    """A cgroup's folder and each one above it, relative to the mount (``/a/b``: ``a/b``, ``a``, ``""``)."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    return ["/".join(parts[:n]) for n in range(len(parts), -1, -1)]


def _cpu_quota(names: tuple[str, ...]) -> tuple[int, int] | None:
    """(quota, period) in microseconds from a cgroup's files, or None: no quota, or not readable."""
    try:
        texts = []
        for name in names:
            with open(name) as fh:
                texts.append(fh.read(256).split())
        words = texts[0] if len(texts) == 1 else [texts[0][0], texts[1][0]]
        quota, period = int(words[0]), int(words[1])
    except (OSError, ValueError, IndexError):  # "max", a missing file, a mount elsewhere
        return None
    return (quota, period) if quota > 0 and period > 0 else None


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
        Read ends owned by the parent (closed by `JobChannel.kill`).
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

The worker imports the file, then waits for its calls (`JobChannel.send`). ``standby`` says the
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
    _schedstat_pid: int | None = None  # whose schedstat `wait_seconds` opens on first use

    def _still_unreaped(self) -> bool:
        """Whether the job's pid is still its own (not reaped), so that a ``/proc`` file opened now is its."""
        return True

    def cpu_seconds(self) -> float | None:
        return stat_cpu_seconds(self._stat_fd)

    def cpu_readable(self) -> bool:
        """Whether this job's CPU time can be read (see `Job`)."""
        return self._stat_fd is not None

    def wait_seconds(self) -> float | None:
        """Seconds the worker's main thread has waited for a CPU (see `Job`)."""
        if self._schedstat_fd is None and self._schedstat_pid is not None:
            # Opened on first use (a phase whose answers all come within the grader's pause never
            # reads it), while the pid is still the job's.
            pid, self._schedstat_pid = self._schedstat_pid, None
            if self._still_unreaped():
                self._schedstat_fd = open_proc_file(pid, "schedstat")
        return schedstat_wait_seconds(self._schedstat_fd)

    def _close_proc_files(self) -> None:
        for fd in (self._stat_fd, self._schedstat_fd):
            if fd is not None:
                os.close(fd)
        self._stat_fd = self._schedstat_fd = self._schedstat_pid = None

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
        self._schedstat_pid = self.proc.pid  # this process's own child: its pid stays its own until waited for

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

    def _still_unreaped(self) -> bool:
        return self.proc.returncode is None

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
        self._schedstat_pid = self.pid

    def _still_unreaped(self) -> bool:
        # The server reaps the job, then writes its status: no status yet, the pid is still the job's.
        if self._status is not None or self._status_fd is None:
            return False
        return not fd_ready(self._status_fd)

    def exit_code(self, timeout: float) -> int | None:
        if self._status is None and self._status_fd is not None:
            if not fd_ready(self._status_fd, timeout):
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
