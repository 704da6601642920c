"""The grader's handles on the sandbox: the zygote (`Zygote`) and the jobs it forks (`SandboxJob`).

The zygote (``grader/child/zygote.py``) is a secret-free process that imports numpy once and forks
one isolated job per submission run; a `SandboxJob` is one of them as the runner sees a job
(`grader.execution.jobs.Job`).
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import platform
import shutil
import signal
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from grader.child.limits import CEILING_CPU_SECONDS, SETUP_FAILED, slot_uid
from grader.errors import ConfigError, JobStarterLost
from grader.execution.jobs import CHILD_ENV, describe_exit, open_proc_file, schedstat_wait_seconds, stop_server
from grader.execution.servers import ZYGOTE, start_zygote
from grader.fileio import fd_ready

ZYGOTE_NAME = "the sandbox's zygote (the process that starts every job)"
REPLY_FDS_SPACE = socket.CMSG_SPACE(2 * 4)
"""Room for a launch reply's descriptors: the job's pidfd and its ``/proc/<pid>/schedstat``."""


class Reply:
    """A request's reply from the zygote, once it has come (`Zygote.collect`): its line and descriptors."""

    __slots__ = ("done", "fds", "line")

    def __init__(self) -> None:
        self.done = False
        self.line = b""
        self.fds: list[int] = []

    def decoded(self) -> tuple[dict[str, Any], list[int]]:
        """The reply and its descriptors.

        Raises
        ------
        grader.errors.ConfigError
            If the zygote stopped answering.
        """
        if not self.line:
            for fd in self.fds:
                os.close(fd)
            raise JobStarterLost(ZYGOTE_NAME)
        return json.loads(self.line), self.fds


class Zygote:
    """The grader's handle on a running zygote.

    Raises
    ------
    grader.errors.ConfigError
        If the zygote does not start (the reason is in the message).
    """

    def __init__(self, wait: bool = True, started: tuple[Any, Any, Any] | None = None) -> None:
        if platform.system() != "Linux":
            raise ConfigError("the sandbox needs Linux; pass --insecure to grade with process isolation only")
        # Exec'd by the command line already (grader.execution.servers.grade_zygote), or now.
        self.proc: Any
        self.sock: socket.socket
        try:
            self.proc, self.sock, self._stderr = started if started is not None else start_zygote(ZYGOTE)
        except OSError as exc:  # fork's EAGAIN or ENOMEM, an interpreter gone: the machine's, not a bug
            raise ConfigError(f"the sandbox's zygote could not be started: {exc.strerror or exc}") from None
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.landlock_abi = 0
        self.readonly: list[str] = []
        self._cpu_fds: dict[str, int] = {}
        self._waiting: collections.deque[Reply] = collections.deque()  # requests sent, oldest first
        self.lost = False
        """True once a job's status pipe closed without a word: only the zygote's end does that, as it ends
        (its files close before its jobs get their death signal, and before the process can be reaped)."""
        if wait:
            self.wait_started()

    def wait_started(self) -> None:
        """Wait for the zygote's first line (it has imported numpy and prepared every layer).

        Raises
        ------
        grader.errors.JobStarterLost
            If it was killed from outside meanwhile (SIGKILL, SIGTERM: the out-of-memory killer, an
            administrator): a new one may start (a Dask worker starts another for its chunk).
        grader.errors.ConfigError
            If the zygote did not start (the reason is in the message).
        """
        try:
            line, _ = self._receive()
        except OSError:
            line = b""
        if not line:
            self.close(keep_log=True)
            if self.proc.returncode in (-signal.SIGKILL, -signal.SIGTERM):
                self._stderr.close()
                raise JobStarterLost(ZYGOTE_NAME)
            self._stderr.seek(0)
            why = self._stderr.read().decode(errors="replace").strip().splitlines()
            self._stderr.close()
            raise ConfigError(f"the sandbox's zygote did not start: {why[-1] if why else 'no reason given'}")
        hello = json.loads(line)
        self.landlock_abi = int(hello.get("landlock_abi", 0))
        self.readonly = hello.get("readonly", [])

    def _receive(self) -> tuple[bytes, list[int]]:
        """One reply line, with the file descriptors that came with it (b"" once the zygote is gone)."""
        data, fds = b"", list[int]()
        while not data.endswith(b"\n"):
            try:  # socket.recv_fds, lighter
                chunk, ancillary, _flags, _addr = self.sock.recvmsg(1 << 16, REPLY_FDS_SPACE)
            except ConnectionResetError:
                return b"", fds
            except OSError:
                if self.sock.fileno() == -1:  # closed by `close`: the zygote is stopped
                    return b"", fds
                raise
            for level, kind, fd_data in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds += struct.unpack(f"{len(fd_data) // 4}i", fd_data[: len(fd_data) // 4 * 4])
            if not chunk:
                return b"", fds
            data += chunk
        return data, fds

    def send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> Reply:
        """Send one request (with file descriptors); its reply comes later (`collect`).

        One request is in flight at a time: the reply to the one before is
        taken first (whichever thread sent it; see `collect`).
        """
        data = json.dumps(message).encode() + b"\n"
        reply = Reply()
        with self.lock:
            # One request at a time in flight: two replies could come in one read, and the second's
            # request would wait for ever. The one before is taken first (its reply has come, or soon will).
            while self._waiting:
                self._take_reply()
            try:
                if fds:  # as socket.send_fds, without its array
                    rights = struct.pack(f"{len(fds)}i", *fds)
                    self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
                else:
                    self.sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                raise JobStarterLost(ZYGOTE_NAME) from None
            except OSError:
                if self.sock.fileno() == -1:  # closed by `close`: the zygote is stopped
                    raise JobStarterLost(ZYGOTE_NAME) from None
                raise
            self._waiting.append(reply)
        return reply

    def collect(self, reply: Reply, block: bool = True) -> bool:
        """Read the zygote's replies until ``reply`` has come (or, without ``block``, those already there).

        Returns whether ``reply`` has come. Without ``block``, nothing waits:
        not for the zygote, nor for another thread reading its replies.
        """
        if reply.done:
            return True
        if not self.lock.acquire(blocking=block):
            return False
        try:
            while not reply.done:
                if not block and not fd_ready(self.sock.fileno()):
                    return False
                self._take_reply()
        finally:
            self.lock.release()
        return True

    def _take_reply(self) -> None:
        """Read the reply to the request in flight (the lock held), waiting for it."""
        line, got = self._receive()
        if not line:  # the zygote is gone: no request will be answered
            for fd in got:
                os.close(fd)
            for waiting in self._waiting:
                waiting.done = True
            self._waiting.clear()
            return
        head = self._waiting.popleft()
        head.line, head.fds, head.done = line, got, True

    def request(self, message: dict[str, Any], fds: Sequence[int] = ()) -> tuple[dict[str, Any], list[int]]:
        """Send one request (with file descriptors); return the reply and the descriptors it carried.

        Raises
        ------
        grader.errors.ConfigError
            If the zygote stopped answering.
        """
        reply = self.send(message, fds)
        self.collect(reply)
        return reply.decoded()

    def cpu_stat_fd(self, path: str) -> int:
        """A descriptor of a slot cgroup's ``cpu.stat`` (read with ``pread``), opened once for all its jobs.

        Raises
        ------
        OSError
            If it cannot be opened.
        """
        fd = self._cpu_fds.get(path)
        if fd is None:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            kept = self._cpu_fds.setdefault(path, fd)  # another thread may have opened it meanwhile
            if kept != fd:
                os.close(fd)
            fd = kept
        return fd

    def close(self, keep_log: bool = False) -> None:
        """Stop the zygote (its jobs die with it), and close the file its standard error went to unless ``keep_log``.

        A thread waiting for a reply is woken first (the socket shut down: it reads the end, and every
        request in flight is answered with nothing); the socket is closed once no thread reads it, so
        that none waits on its descriptor's number after another file took it.
        """
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        taken = self.lock.acquire(timeout=5.0)
        try:
            stop_server(self.sock, self.proc)
        finally:
            if taken:
                self.lock.release()
        for fd in self._cpu_fds.values():
            os.close(fd)
        self._cpu_fds.clear()
        if not keep_log:
            self._stderr.close()


class JobSink(Protocol):
    """Where a job killed without waiting puts itself (`SandboxJob.kill`): its worker (settled in its chores), or a list."""

    def append(self, job: SandboxJob) -> None:
        """Take ``job``, to be settled later."""


class SandboxJob:
    """A job run by the zygote, seen through the runner's `Job` protocol.

    A job is started *blank*: the zygote forks it and it sets up every
    isolation layer, then waits for its task (`assign`). The sandbox starts
    each worker's next job while the current one runs, so a submission
    finds its job ready.

    Parameters
    ----------
    zygote : Zygote
    slot : int
        Its cgroups and uid (``UID_BASE + slot``).
    workdir : str
        A folder for the job's folder (a tmpfs is mounted over it inside the
        job's mount namespace; the grader's side stays empty).
    limits : dict
        `DEFAULT_LIMITS`; its CPU seconds are set from the task.
    probe : bool
        Report the layers that applied and end (``grader doctor``).
    on_end : callable, optional
        Called with ``slot`` once the job is over and its slot is clean.
    filename : str
        The submission's name in the job (the course pack's file name).
    """

    def __init__(
        self,
        zygote: Zygote,
        slot: int,
        workdir: str,
        limits: dict[str, int],
        probe: bool = False,
        on_end: Any = None,
        filename: str = "submission.py",
        wait: bool = True,
    ) -> None:
        self.zygote = zygote
        self.id = next(zygote.ids)
        self.slot = slot
        self.on_end = on_end
        uid = slot_uid(slot) if os.geteuid() == 0 else os.geteuid()
        # One folder per slot, made once and left empty by each job (see `settle`), not one per job.
        self.jobdir = os.path.join(workdir, f"slot{slot}")
        try:
            os.mkdir(self.jobdir, 0o700)
        except FileExistsError:
            made = False
        except FileNotFoundError:  # something (a temporary-folder cleaner) removed the workdir
            os.makedirs(workdir, 0o711, exist_ok=True)
            os.chmod(workdir, 0o711)
            os.mkdir(self.jobdir, 0o700)
            made = True
        else:
            made = True
        if made and os.geteuid() == 0:
            os.chown(self.jobdir, uid, uid)
        request = {
            "op": "launch",
            "slot": slot,
            "jobdir": self.jobdir,
            "file": os.path.join(self.jobdir, filename),
            "probe": probe,
            "limits": dict(limits, cpu_seconds=CEILING_CPU_SECONDS),
            "env": dict(CHILD_ENV, HOME=self.jobdir, TMPDIR=self.jobdir),
            "job": self.id,  # last: the zygote decodes the rest once per slot (``grader/child/control.py``)
        }
        # result, stdout, stderr, the status the zygote reports; the task pipe (the job's stdin)
        pipes = [os.pipe() for _ in range(4)]
        self.task_fd: int | None
        task_read, self.task_fd = os.pipe()
        sent = [w for _, w in pipes] + [task_read]
        try:
            self._reply: Reply | None = zygote.send(request, sent)
        except BaseException:
            for fd in [r for r, _ in pipes] + [self.task_fd]:
                os.close(fd)
            raise
        finally:
            for fd in sent:
                os.close(fd)
        self.pid: Any = None
        self.pidfd: int | None = None
        self.cpu_stat: str | None = None
        """The slot's cgroup-v2 ``cpu.stat`` (the zygote's word), read for CPU-time timeouts."""
        self._cpu_fd: int | None = None
        self._cpu_base = 0
        self._schedstat_fd: int | None = None
        self._schedstat_unknown = False
        self.result_fd, self.stdout_fd, self.stderr_fd, self.status_fd = (r for r, _ in pipes)
        self.status: int | None = None
        self.setup_reason = ""
        """Why the job's set-up failed, as the zygote reported it (empty if it did not fail)."""
        self.ending: JobSink | None = None
        """Where a job killed without waiting puts itself, for its worker to `settle` later."""
        self.chores: Callable[[], bool] | None = None
        """Its worker's chores (settling ended jobs, starting the next one), for the thread running this
        job's calls to do in a pause while the job computes (`grader.execution.calls._gather`)."""
        if wait:
            self.started()

    def started(self, block: bool = True) -> bool:
        """Take the zygote's reply to the job's launch: its pid, pidfd and slot's ``cpu.stat``.

        A job made with ``wait=False`` is started once this says True;
        without ``block`` it waits for nothing (the reply may not have come).

        Raises
        ------
        grader.errors.ConfigError
            If the zygote stopped answering (the job's pipes are closed).
        """
        if self._reply is None:
            return True
        if not self.zygote.collect(self._reply, block):
            return False
        reply_, self._reply = self._reply, None
        try:
            reply, got = reply_.decoded()
        except ConfigError:
            self._close_pipes()
            os.close(self.status_fd)
            self.status = 128 + signal.SIGKILL
            self._close_task()
            raise
        self.pid = reply.get("pid")
        self.pidfd = got[0] if got else None  # to kill the job without asking the zygote
        for fd in got[2:]:  # more than the zygote sends
            os.close(fd)
        self.cpu_stat = reply.get("cpu_stat") if isinstance(reply.get("cpu_stat"), str) else None
        # The slot's cgroup is reused by every job of the slot: its count starts at what the jobs before
        # this one used (all gone before this one was started), read now, before the job has its task.
        self._cpu_base = self._usec() or 0
        # The job's /proc/<pid>/schedstat: opened by the zygote before it could reap the job (its pid was
        # its own), sent with the pidfd; else opened here when first read.
        self._schedstat_fd = got[1] if len(got) > 1 else None
        return True

    def assign(self, source: bytes, cpu_seconds: float) -> None:
        """Send the job its task: the submission's bytes and its CPU seconds, no call.

        The job writes the file into its folder and imports it, then reads
        its calls, one at a time, from the same pipe (`call_fd`; see
        `grader.execution.channel.JobChannel.send`).
        """
        task = json.dumps({"cpu_seconds": cpu_seconds}).encode()
        self._send(struct.pack(">II", len(task), len(source)) + task + source)

    @property
    def call_fd(self) -> int:
        """The write end of the job's task and call pipe (its stdin); -1 once closed."""
        return -1 if self.task_fd is None else self.task_fd

    def end_calls(self) -> None:
        """Close the call pipe: the worker, at end-of-file, leaves."""
        self._close_task()

    def cpu_seconds(self) -> float | None:
        """CPU seconds used by every process in the job's slot since the job was started, from ``cpu.stat``.

        The slot holds this job alone (the slot's previous job is gone
        before a job starts in it); the slot's cgroup counts every job it
        held, so the count when this job was started is taken off. It
        includes the job's import and most of its set-up. None where the
        zygote reported no such file, or before the job entered the cgroup
        (nothing counted yet: see `cpu_readable`).
        """
        usec = self._usec()
        if usec is None or usec <= self._cpu_base:
            return None
        return (usec - self._cpu_base) / 1e6

    def _usec(self) -> int | None:
        """The slot cgroup's ``usage_usec`` (every job it held), or None where it cannot be read."""
        if self._cpu_fd is None:
            if not self.cpu_stat:
                return None
            try:
                self._cpu_fd = self.zygote.cpu_stat_fd(self.cpu_stat)
            except OSError:
                self.cpu_stat = None
                return None
        try:
            data = os.pread(self._cpu_fd, 512, 0)
        except OSError:
            return None
        if not data.startswith(b"usage_usec "):
            return None
        return int(data[11 : data.index(b"\n")])

    def cpu_readable(self) -> bool:
        """Whether the job's CPU time can be read: the zygote named its slot's ``cpu.stat`` (see `grader.execution.jobs.Job`).

        Its `cpu_seconds` is then None only until the job has entered the slot's cgroup.
        """
        return bool(self.cpu_stat)

    def wait_seconds(self) -> float | None:
        """Seconds the job's main process spent ready to run but waiting for a CPU, or None (see `grader.execution.jobs.Job`).

        Its ``/proc/<pid>/schedstat`` (run-queue delay), opened by the zygote
        as it started the job (sent with its pidfd), or else here on first use
        while the job's pidfd says it still runs (so the pid is still the
        job's). The cgroup's ``cpu.pressure`` would cover every process of
        the job, but on this kind of machine it counts about two thirds of
        the delay that ``schedstat`` counts.
        """
        if self._schedstat_fd is None:
            if self._schedstat_unknown or not isinstance(self.pid, int) or self.pidfd is None:
                return None
            self._schedstat_unknown = True  # one try
            fd = open_proc_file(self.pid, "schedstat")
            if fd is None:
                return None
            if fd_ready(self.pidfd):  # it has ended: the pid may be another's now
                os.close(fd)
                return None
            self._schedstat_fd = fd
        return schedstat_wait_seconds(self._schedstat_fd)

    def _send(self, data: bytes) -> None:
        if self.task_fd is None:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.task_fd, view) :]
        except OSError:
            pass  # the job is gone; reading its frames will say so

    def _close_task(self) -> None:
        if self.task_fd is not None:
            os.close(self.task_fd)  # a job still waiting for its task or a call leaves
            self.task_fd = None

    def kill(self, finished: bool = False, wait: bool = True) -> None:
        """End the job: a job that answered everything is left to report; others are killed.

        With ``wait=False`` the kill is only sent: `settle` (which the job's
        worker calls before it needs the slot again) waits for the slot to
        be clean. A job replaced by its standby is ended so, while the
        standby already makes its calls; and so is a job that answered every
        call (its slot is settled while the next submission's job imports).
        """
        if self._reply is not None:  # not started yet (`started`): its pidfd first
            try:
                self.started()
            except ConfigError:
                pass  # the zygote is gone, and the job with it
        self._close_task()
        if self._read_status(0.5 if finished and wait else 0.0) is None:
            try:
                if self.pidfd is None:
                    raise OSError("no pidfd")
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)  # pid 1: its namespace goes with it
            except (OSError, TypeError):  # gone already, or no pidfd: the zygote kills it
                self.zygote.request({"op": "kill", "job": self.id})
            if not wait and self.ending is not None:
                self._close_pipes()  # first: its worker may settle the job (and close them) at once
                self.ending.append(self)
                return
        self.settle()

    def _close_pipes(self) -> None:
        for fd in (self.result_fd, self.stdout_fd, self.stderr_fd):
            if fd >= 0:
                os.close(fd)
        self.result_fd = self.stdout_fd = self.stderr_fd = -1

    def settle(self, timeout: float = 5.0, give_up: bool = True) -> bool:
        """Wait (at most ``timeout`` seconds) until the job is over and its slot clean; release it.

        With ``give_up`` (and a ``timeout``), a slot the zygote has not reported
        clean by then is released all the same (the job was killed).

        Returns
        -------
        bool
            False if the zygote has not reported yet (call again).
        """
        if self.on_end is None and self.status is not None:
            return True
        if self._read_status(timeout) is None:
            if timeout > 0.0 and give_up:
                self.status = 128 + signal.SIGKILL  # never reported: give the slot up anyway
                os.close(self.status_fd)
            else:
                return False
        self._close_pipes()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        if self._schedstat_fd is not None:
            os.close(self._schedstat_fd)
        self._cpu_fd = self._schedstat_fd = None  # the slot's cpu.stat stays open in `Zygote.cpu_stat_fd`
        # Empty, as a rule: the job wrote on its own tmpfs, mounted elsewhere. Kept so for the slot's
        # next job; anything a job left there (no mount namespace here) goes with the folder.
        try:
            with os.scandir(self.jobdir) as entries:
                left = next(entries, None) is not None
        except OSError:
            left = False
        if left:
            shutil.rmtree(self.jobdir, ignore_errors=True)
        if self.on_end is not None:
            self.on_end(self.slot)
            self.on_end = None
        return True

    def _read_status(self, timeout: float) -> int | None:
        """The job's exit code, as the zygote reports it once the slot is clean.

        None if nothing came within ``timeout`` seconds; 128 + SIGKILL if the
        status pipe closed without a word (the zygote is gone).
        """
        if self.status is None:
            if not fd_ready(self.status_fd, timeout):
                return None
            data = os.read(self.status_fd, 1024).decode("utf-8", errors="replace").strip()
            if not data:
                self.zygote.lost = True  # the job died with it: not the student's doing (`Pool.slot`)
            code, _, reason = data.partition(" ")  # "CODE" or "CODE why the set-up failed"
            self.status = int(code) if code.isdigit() else 128 + signal.SIGKILL
            self.setup_reason = reason
            os.close(self.status_fd)
        return self.status

    def exit_code(self, timeout: float) -> int | None:
        """The job's exit code (negative: killed by that signal), or None if not reported within ``timeout`` s."""
        code = self._read_status(timeout)
        if code is None:
            return None
        return -(code - 128) if 128 < code < 128 + 65 else code

    def exit_description(self) -> str:
        """Words for how the job ended (waiting up to 2 s, then killing it), as if it never imported."""
        code = self.exit_code(2.0)
        if code is None:
            self.kill()
            code = -signal.SIGKILL
        return self.describe_exit(code, imported=False)

    def describe_exit(self, code: int, imported: bool) -> str:
        """Words for the job's end: a set-up failure only as the zygote reports it, before the import."""
        if code == SETUP_FAILED and self.setup_reason and not imported:  # reported by the zygote, never by student code
            return f"the sandbox could not set up the job: {self.setup_reason}"
        return describe_exit(code)
