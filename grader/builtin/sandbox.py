"""Built-in plugin: the sandbox that ``grader grade`` runs submissions in (Linux).

At configure time, before any spec, reference or expected value is read,
the grader starts a *zygote* (``grader/child/zygote.py``) from a fresh exec: a
secret-free process that imports numpy once and forks one isolated job per
submission run (namespaces, cgroups, rlimits, Landlock, a non-root uid,
seccomp; see the zygote's docstring). This plugin lends its workers to the
runner plugin (`grader.stash.JOB_LAUNCHERS`): each a launcher that asks the
zygote for jobs; reading frames, deadlines and output caps stay in
`grader.execution.jobs`.

The zygote gets ready, and a *preflight* runs, in a thread of their own
while the specs and the reference load (`grader_grading_ready` waits for
them, before the output folder is made). The preflight runs a real job in
every slot of the batch
(the same folder, uids, cgroups and limits; it imports a tiny file and
makes one call): if it fails, ``grade`` stops with one line saying why,
rather than grade a class to zeros. ``grader doctor`` runs it too. A job's
set-up failure reaches the grader with its reason (the zygote's status
pipe), never through output a submission could forge.

Grading hidden checks without a filesystem isolation layer (Landlock) is
refused unless ``--insecure`` is given; so is blocking this plugin or the
runner with ``-p no:NAME`` (`grader.config.plugins.ESSENTIAL`). ``grader check``
(a student's own code) and ``grader validate`` (the reference) use the plain
child process.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import platform
import queue
import select
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from grader.child.limits import CEILING_CPU_SECONDS, DEFAULT_LIMITS, SETUP_FAILED, UID_BASE, slot_uid
from grader.errors import ConfigError
from grader.execution.calls import run_calls
from grader.execution.channel import JobChannel
from grader.execution.jobs import (
    CHILD_ENV,
    Launcher,
    describe_exit,
    open_proc_file,
    sandboxed,
    schedstat_wait_seconds,
    stop_server,
)
from grader.execution.keys import EARLY_ZYGOTE, JOB_LAUNCHERS
from grader.execution.servers import ZYGOTE, start_zygote
from grader.fileio import scratch_prefix
from grader.markers import hookimpl
from grader.models import Call
from grader.stash import StashKey

_ZYGOTE: StashKey[Zygote] = StashKey()


LAYERS = (
    ("pid", "pid namespace (the job is pid 1; nothing it starts outlives it)"),
    ("mount", "mount namespace"),
    ("fresh_proc", "fresh /proc (only the job's own processes)"),
    ("job_tmpfs", "job folder on a size-limited tmpfs (no filling the disk)"),
    ("net", "network namespace (no network at all)"),
    ("ipc", "ipc namespace"),
    ("uts", "uts namespace"),
    ("pids", "cgroup pids limit (fork bombs)"),
    ("memory", "cgroup memory limit"),
    ("cpu", "cgroup cpu share (a job's many processes cannot starve the job graded beside it)"),
    ("kill", "cgroup.kill (kills every process of a job)"),
    ("rlimits", "rlimits: CPU, address space, file size, open files, processes, no core dumps"),
    ("landlock", "Landlock filesystem allow-list (stdlib, numpy, the job folder)"),
    ("landlock_tcp", "Landlock: TCP bind and connect denied"),
    ("landlock_scopes", "Landlock: abstract UNIX sockets and signals scoped to the job"),
    ("uid", "non-root uid per worker slot"),
    ("seccomp", "seccomp allow-list (default deny; sockets AF_UNIX only, no ptrace, mount, namespaces, bpf...)"),
    ("file_locks", "file locks denied (flock, fcntl locks, leases, directory notifications)"),
    ("fixed_cwd", "fixed working folder (the job sees /tmp or another fixed folder, never the grader's path)"),
    ("preflight", "a real job imports a file and answers a call (same folder, uids, cgroups, limits as grade)"),
)
"""Every isolation layer, in the order ``grader doctor`` prints them."""


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
        self.proc, self.sock, self._stderr = started if started is not None else start_zygote(ZYGOTE)
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.landlock_abi = 0
        self.readonly: list[str] = []
        if wait:
            self.wait_started()

    def wait_started(self) -> None:
        """Wait for the zygote's first line (it has imported numpy and prepared every layer).

        Raises
        ------
        grader.errors.ConfigError
            If the zygote did not start (the reason is in the message).
        """
        try:
            line, _ = self._receive()
        except OSError:
            line = b""
        if not line:
            self.close()
            self._stderr.seek(0)
            why = self._stderr.read().decode(errors="replace").strip().splitlines()
            raise ConfigError(f"the sandbox's zygote did not start: {why[-1] if why else 'no reason given'}")
        hello = json.loads(line)
        self.landlock_abi = int(hello.get("landlock_abi", 0))
        self.readonly = hello.get("readonly", [])

    def _receive(self) -> tuple[bytes, list[int]]:
        """One reply line, with the file descriptors that came with it (b"" once the zygote is gone)."""
        data, fds = b"", []
        while not data.endswith(b"\n"):
            chunk, got, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, 1)
            fds += got
            if not chunk:
                return b"", fds
            data += chunk
        return data, fds

    def request(self, message: dict[str, Any], fds: Sequence[int] = ()) -> tuple[dict[str, Any], list[int]]:
        """Send one request (with file descriptors); return the reply and the descriptors it carried.

        Raises
        ------
        grader.errors.ConfigError
            If the zygote stopped answering.
        """
        data = json.dumps(message).encode() + b"\n"
        with self.lock:
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.sendall(data)
            line, got = self._receive()
        if not line:
            for fd in got:
                os.close(fd)
            raise ConfigError("the sandbox's zygote stopped answering")
        return json.loads(line), got

    def close(self) -> None:
        """Stop the zygote (its jobs die with it)."""
        stop_server(self.sock, self.proc)


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
    ) -> None:
        self.zygote = zygote
        self.id = next(zygote.ids)
        self.slot = slot
        self.on_end = on_end
        uid = slot_uid(slot) if os.geteuid() == 0 else os.geteuid()
        self.jobdir = os.path.join(workdir, f"job{self.id}")
        try:
            os.mkdir(self.jobdir, 0o700)
        except FileNotFoundError:  # something (a temporary-folder cleaner) removed the workdir
            os.makedirs(workdir, 0o711, exist_ok=True)
            os.chmod(workdir, 0o711)
            os.mkdir(self.jobdir, 0o700)
        if os.geteuid() == 0:
            os.chown(self.jobdir, uid, uid)
        request = {
            "op": "launch",
            "job": self.id,
            "slot": slot,
            "jobdir": self.jobdir,
            "file": os.path.join(self.jobdir, filename),
            "probe": probe,
            "limits": dict(limits, cpu_seconds=CEILING_CPU_SECONDS),
            "env": dict(CHILD_ENV, HOME=self.jobdir, TMPDIR=self.jobdir),
        }
        # result, stdout, stderr, the status the zygote reports; the task pipe (the job's stdin)
        pipes = [os.pipe() for _ in range(4)]
        self.task_fd: int | None
        task_read, self.task_fd = os.pipe()
        sent = [w for _, w in pipes] + [task_read]
        try:
            reply, got = zygote.request(request, sent)
        finally:
            for fd in sent:
                os.close(fd)
        self.pid = reply.get("pid")
        self.pidfd = got[0] if got else None  # to kill the job without asking the zygote
        self.cpu_stat: str | None = reply.get("cpu_stat") if isinstance(reply.get("cpu_stat"), str) else None
        """The slot's cgroup-v2 ``cpu.stat`` (the zygote's word), read for CPU-time timeouts."""
        self._cpu_fd: int | None = None
        # The slot's cgroup is reused by every job of the slot: its count starts at what the jobs before
        # this one used (all gone before this one was started), read now.
        self._cpu_base = self._usec() or 0
        self._schedstat_fd: int | None = None  # the job's /proc/<pid>/schedstat, opened when first read
        self._schedstat_unknown = False
        self.result_fd, self.stdout_fd, self.stderr_fd, self.status_fd = (r for r, _ in pipes)
        self.status: int | None = None
        self.setup_reason = ""
        """Why the job's set-up failed, as the zygote reported it (empty if it did not fail)."""
        self.ending: _Ending | list[SandboxJob] | None = None
        """Where a job killed without waiting puts itself, for its worker to `settle` later."""

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
                self._cpu_fd = os.open(self.cpu_stat, os.O_RDONLY | os.O_CLOEXEC)
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

        Its ``/proc/<pid>/schedstat`` (run-queue delay), opened on first use
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
            if select.select([self.pidfd], [], [], 0)[0]:  # it has ended: the pid may be another's now
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
        self._close_task()
        if self._read_status(0.5 if finished and wait else 0.0) is None:
            try:
                if self.pidfd is None:
                    raise OSError("no pidfd")
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)  # pid 1: its namespace goes with it
            except (OSError, TypeError):  # gone already, or no pidfd: the zygote kills it
                self.zygote.request({"op": "kill", "job": self.id})
            if not wait and self.ending is not None:
                self._close_pipes()  # first: the settler may settle the job (and close them) at once
                self.ending.append(self)
                return
        self.settle()

    def _close_pipes(self) -> None:
        for fd in (self.result_fd, self.stdout_fd, self.stderr_fd):
            if fd >= 0:
                os.close(fd)
        self.result_fd = self.stdout_fd = self.stderr_fd = -1

    def settle(self, timeout: float = 5.0) -> bool:
        """Wait (at most ``timeout`` seconds) until the job is over and its slot clean; release it.

        Returns
        -------
        bool
            False if the zygote has not reported yet (call again).
        """
        if self.on_end is None and self.status is not None:
            return True
        if self._read_status(timeout) is None:
            if timeout > 0.0:
                self.status = 128 + signal.SIGKILL  # never reported: give the slot up anyway
                os.close(self.status_fd)
            else:
                return False
        self._close_pipes()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        for fd in (self._cpu_fd, self._schedstat_fd):
            if fd is not None:
                os.close(fd)
        self._cpu_fd = self._schedstat_fd = None
        try:
            os.rmdir(self.jobdir)  # empty, as a rule: the job wrote on its own tmpfs, mounted elsewhere
        except OSError:
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
            ready, _, _ = select.select([self.status_fd], [], [], timeout)
            if not ready:
                return None
            data = os.read(self.status_fd, 1024).decode("utf-8", errors="replace").strip()
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


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command == "merge":  # no code runs: the shards ran it
        return
    group = parser.add_argument_group("sandbox")
    group.add_argument(
        "--insecure",
        action="store_true",
        help="grade without the sandbox (plain child processes); only for trusted code",
    )


class _Starting:
    """The sandbox getting ready in a thread of its own while ``grade`` loads the specs and the reference.

    The zygote is started (exec'd) before any of them is read; this thread
    waits for it to be ready, makes the job folder and the workers, and runs
    the preflight. `grader_grading_ready` waits for it: a start-up that
    would take a quarter of a small class's run overlaps with the checks'
    preparation instead (issue 16).
    """

    def __init__(self, zygote: Zygote, count: int, filename: str) -> None:
        self.zygote, self.count, self.filename = zygote, count, filename
        self.workdir: str | None = None
        self.workers: list[_Worker] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="grader-sandbox-start", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.zygote.wait_started()
            if self.zygote.landlock_abi < 1:
                raise ConfigError(
                    "no filesystem isolation here (Landlock needs Linux 5.13 or newer, enabled); grading "
                    "hidden checks would let submissions read them. Run 'grader doctor', or pass --insecure "
                    "to grade anyway"
                )
            self.workdir = make_workdir()
            count = self.count
            self.workers = [
                _Worker(self.zygote, (slot, slot + count), self.workdir, self.filename) for slot in range(count)
            ]
            problem = preflight(self.workers, self.workdir)
            if problem:
                raise ConfigError(problem)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread (grader_grading_ready)
            self.error = exc

    def wait(self) -> list[_Worker]:
        """The ready workers; or the start-up's error, raised here (a ConfigError: one line and the fix)."""
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.workers


_STARTING = StashKey[_Starting]()


@hookimpl
def grader_configure(config: Any) -> None:
    """Start the zygote before any spec or reference is loaded (``grade`` only); it gets ready meanwhile."""
    if not sandboxed(config):
        return  # a zygote the command line started is stopped by it (grader.cli.main)
    zygote = Zygote(wait=False, started=config.stash.pop(EARLY_ZYGOTE, None))
    config.stash[_ZYGOTE] = zygote
    from grader.grading.session import worker_count

    starting = _Starting(zygote, worker_count(config), config.pack.submission)
    config.stash[_STARTING] = starting
    config.stash[JOB_LAUNCHERS] = _Pool(starting)  # waits for the start-up when first used


@hookimpl
def grader_grading_ready(config: Any) -> None:
    """Wait for the sandbox started at configure time (``grade``; a Dask worker waits at its first job)."""
    pool = config.stash.get(JOB_LAUNCHERS)
    if isinstance(pool, _Pool):
        pool.ready()  # raises what went wrong; grader_unconfigure stops the zygote and cleans up


def make_workdir() -> str:
    """The folder for the jobs' folders (in the temporary folder), made as ``grade`` makes it.

    Job folders inside belong to the jobs' uids, hence mode 0711. A job
    sees its own folder at a fixed path (``zygote.JOB_FOLDER``) and needs
    this one only where that mount is not possible.

    Raises
    ------
    grader.errors.ConfigError
        If the temporary folder is not writable.
    """
    try:
        workdir = tempfile.mkdtemp(prefix=scratch_prefix("sandbox"))
        os.chmod(workdir, 0o711)
    except OSError as exc:
        raise ConfigError(
            f"the sandbox cannot make its folder in {tempfile.gettempdir()} ({exc.strerror}); "
            "set TMPDIR to a writable folder such as /tmp"
        ) from None
    return workdir


PREFLIGHT_SOURCE = b"""def grader_preflight(x):
    return x + 1
"""
"""The submission a preflight job imports; its one call, ``grader_preflight(41)``, answers 42."""


def preflight(workers: Sequence[_Worker], workdir: str) -> str:
    """Run a real job in each slot of ``workers``, as grading will; say what is wrong, or ''.

    Each job imports `PREFLIGHT_SOURCE` and makes one call, through the
    same launcher, folder, uids, cgroups and limits as the batch's jobs (and
    leaves each worker with its next job started, as after a submission).

    Parameters
    ----------
    workers : sequence of _Worker
        The batch's workers; each runs two jobs (one per slot).
    workdir : str
        Their folder for job folders.

    Returns
    -------
    str
        ``""`` if every job answered 42; else one line naming the
        cause and, where known, the fix.
    """
    path = os.path.join(workdir, "preflight.py")
    with open(path, "wb") as fh:
        fh.write(PREFLIGHT_SOURCE)
    try:
        for worker in workers:
            for _ in range(2):  # two jobs: in the first slot, then in the other (started ahead)
                outcome = run_calls(
                    path,
                    [Call("grader_preflight", (41,), 10.0)],
                    import_timeout=10.0,
                    submission_timeout=30.0,
                    launch=worker.launch,
                    scratch=False,
                )
                result = outcome.results[0]
                if result.status != "returned" or result.value != 42:
                    why = outcome.import_error or result.message or f"it answered {result.value!r}"
                    return _preflight_problem(workdir, why)
    finally:
        os.unlink(path)
    return ""


def _unreachable_parent(path: str) -> tuple[str, int] | None:
    """The first folder on ``path`` that a uid other than its owner's may not enter, and its mode."""
    current = os.path.abspath(path)
    chain = []
    while True:
        chain.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for folder in reversed(chain):
        try:
            mode = os.stat(folder).st_mode
        except OSError:
            continue
        if not mode & 0o001:
            return folder, mode & 0o7777
    return None


def _preflight_problem(workdir: str, why: str) -> str:
    """One line: why a preflight job failed, and the fix."""
    why = " ".join(why.split())[:300]
    blocked = _unreachable_parent(workdir)
    if blocked is not None:
        folder, mode = blocked
        return (
            f"the sandbox's job folder {workdir} is not reachable by the job uids ({UID_BASE}+): {folder} "
            f"is mode {mode:04o}; set TMPDIR to a folder such as /tmp, or pass --insecure ({why})"
        )
    return (
        f"the sandbox cannot run a job here ({why}); run 'grader doctor' to see each layer, "
        "or pass --insecure to grade without the sandbox"
    )


class _Ending:
    """Where a job killed without waiting puts itself (`SandboxJob.kill`): its worker's settler."""

    def __init__(self, worker: _Worker) -> None:
        self.worker = worker

    def append(self, job: SandboxJob) -> None:
        self.worker.settle_later(job)


class _Worker:
    """One worker's sandboxed jobs, on two slots: the job that runs, and the next one, started ahead.

    The next job (for the worker's next submission, or for the calls after
    a call that may be about to time out) sets up its isolation while the
    current one runs, in the other slot: its own cgroups and uid. A job
    that is done is *settled* (its exit reported, its cgroups empty, its
    folder removed) by the worker's settler thread, which then starts the
    next job ahead in the slot it freed: the thread grading submissions
    never waits for a finished job (issue 16).
    """

    def __init__(self, zygote: Zygote, slots: tuple[int, int], workdir: str, filename: str = "submission.py") -> None:
        self.zygote = zygote
        self.filename = filename
        self.free = set(slots)
        self.workdir = workdir
        self.ready: SandboxJob | None = None
        self.ending = _Ending(self)  # killed without waiting; settled by the settler thread
        self.cond = threading.Condition()
        self.unsettled = 0
        self.closing = False
        self._queue: queue.SimpleQueue[SandboxJob | None] = queue.SimpleQueue()
        self._settler = threading.Thread(target=self._settle_loop, name="grader-settle", daemon=True)
        self._settler.start()

    def settle_later(self, job: SandboxJob) -> None:
        """Hand a killed job to the settler thread."""
        with self.cond:
            self.unsettled += 1
        self._queue.put(job)

    def _settle_loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                job.settle()
            except OSError:  # a descriptor already gone: the slot is freed below all the same
                if job.on_end is not None:
                    job.on_end(job.slot)
                    job.on_end = None
            with self.cond:
                self.unsettled -= 1
                self.cond.notify_all()
            try:
                self._start_ahead()
            except Exception:  # noqa: BLE001 - the run is ending (the zygote's socket closed: EBADF), or a job
                pass  # failed to start: its slot is freed (`_new`), and `_take` starts one, or says why

    def _freed(self, slot: int) -> None:
        with self.cond:
            self.free.add(slot)
            self.cond.notify_all()

    def _new(self, slot: int) -> SandboxJob:
        try:
            job = SandboxJob(
                self.zygote, slot, self.workdir, DEFAULT_LIMITS, on_end=self._freed, filename=self.filename
            )
        except BaseException:
            self._freed(slot)
            raise
        job.ending = self.ending
        return job

    def _start_ahead(self) -> None:
        """Start the next job in a free slot, unless one is ready (or none is free: the settler starts it)."""
        with self.cond:
            if self.ready is not None or not self.free or self.closing:
                return
            slot = min(self.free)
            self.free.discard(slot)
        job = self._new(slot)
        with self.cond:
            if self.ready is None and not self.closing:
                self.ready = job
                self.cond.notify_all()
                return
        job.kill()

    def _take(self) -> SandboxJob:
        """The job started ahead, or a new one in a free slot (waiting for the settler if neither is there)."""
        deadline = time.monotonic() + 30.0
        with self.cond:
            if self.closing:  # the run is stopping (Ctrl-C): its folder is gone, and no job is started again
                raise ConfigError("the sandbox is stopping: no job is started")
            while self.ready is None and not self.free:
                if not self.cond.wait(max(deadline - time.monotonic(), 0.0)):
                    raise ConfigError("the sandbox's job slots did not become free within 30 s")
            if self.ready is not None:
                job, self.ready = self.ready, None
                return job
            slot = min(self.free)
            self.free.discard(slot)
        return self._new(slot)

    def launch(self, source: bytes, _workdir: str, cpu: float, standby: bool = False) -> SandboxJob:
        """`grader.execution.jobs.Launcher`: the ready job gets the task; the next one starts.

        A standby is the same as any job: it imports, then waits for its first call.
        """
        job = self._take()
        job.assign(source, cpu)
        self._start_ahead()  # when the other slot is still being settled, the settler starts it
        return job

    def close(self) -> None:
        """Stop the job started ahead, if any, and wait for the jobs still ending."""
        with self.cond:
            self.closing = True
            ready, self.ready = self.ready, None
        if ready is not None:
            ready.kill()
        self._queue.put(None)
        self._settler.join(timeout=30.0)


class _Pool:
    """The sandbox's workers, lent one submission at a time (`grader.execution.jobs.LauncherPool`).

    Lent from configure time: the first `slot` (or `ready`) waits for the sandbox's start-up
    (`_Starting`) and raises what went wrong there.
    """

    def __init__(self, starting: _Starting) -> None:
        self._starting = starting
        self._slots: queue.SimpleQueue[_Worker] | None = None
        self._lock = threading.Lock()

    def ready(self) -> queue.SimpleQueue[_Worker]:
        """The workers, once the zygote is ready and the preflight passed (waits for both; raises ConfigError)."""
        if self._slots is None:
            with self._lock:
                if self._slots is None:
                    slots: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
                    for worker in self._starting.wait():
                        slots.put(worker)
                    self._slots = slots
        return self._slots

    @contextlib.contextmanager
    def slot(self) -> Iterator[Launcher]:
        slots = self.ready()
        worker = slots.get()  # one worker per concurrent submission; each has its own uids
        try:
            yield worker.launch
        finally:
            slots.put(worker)


@hookimpl
def grader_unconfigure(config: Any) -> None:
    zygote = config.stash.pop(_ZYGOTE, None)
    if zygote is None:
        return
    starting = config.stash.pop(_STARTING)
    config.stash.pop(JOB_LAUNCHERS, None)
    try:
        if starting.thread.is_alive():  # the run stopped before grading: stopping the zygote ends the start-up too
            zygote.close()
            starting.thread.join(timeout=30.0)
        for worker in starting.workers:
            try:
                worker.close()
            except (OSError, ConfigError):
                pass
    finally:  # a second Ctrl-C while the jobs end (a worker's join) still leaves no folder behind
        zygote.close()
        if starting.workdir is not None:
            shutil.rmtree(starting.workdir, ignore_errors=True)


def probe_layers() -> dict[str, Any]:
    """Start a zygote, run a probe job and a preflight (`preflight`), and return what applied.

    The jobs run as ``grader grade`` runs them: in a folder made by
    `make_workdir` (so under the same TMPDIR), with the same uids, cgroups
    and limits.

    Returns
    -------
    dict
        Layer name to True, or a string saying why it is not active; plus
        ``"zygote"``: True or the reason it did not start, and
        ``"preflight"``: True or why a real job could not run.
    """
    try:
        zygote = Zygote()
    except ConfigError as exc:
        return {"zygote": str(exc)}
    try:
        workdir = make_workdir()
    except ConfigError as exc:
        zygote.close()
        return {"zygote": True, "job": str(exc)}
    try:
        job = SandboxJob(zygote, 0, workdir, DEFAULT_LIMITS, probe=True)
        child = JobChannel(job)
        frame = child.read_frame(
            time.monotonic() + 10.0, {"stdout": bytearray(), "stderr": bytearray()}, expect="probe"
        )
        child.kill()
        layers = frame.get("layers", {}) if isinstance(frame, dict) else {}
        if not layers:
            return {"zygote": True, "job": f"the probe job did not answer ({job.exit_description()})"}
        layers["uid"] = True if layers.get("uid", 0) != 0 else "the job would run as root"
        worker = _Worker(zygote, (0, 1), workdir)
        try:
            layers["preflight"] = preflight([worker], workdir) or True
        finally:
            worker.close()
        return {"zygote": True, **layers}
    finally:
        zygote.close()
        shutil.rmtree(workdir, ignore_errors=True)


@hookimpl(trylast=True)
def grader_doctor(write: Any, config: Any) -> int:
    """``grader doctor``: `doctor`."""
    return doctor(write)


def doctor(write: Any) -> int:
    """Print which isolation layers are active here; return 0 if all are."""
    layers = probe_layers()
    if layers.get("zygote") is not True:
        write(f"sandbox: cannot start: {layers['zygote']}")
        return 1
    if "job" in layers:
        write(f"sandbox: cannot run a job: {layers['job']}")
        return 1
    active = 0
    for key, label in LAYERS:
        state = layers.get(key, "not reported")
        ok = state is True or (key == "landlock" and isinstance(state, str) and state.startswith("ABI"))
        active += ok
        detail = f" ({state})" if isinstance(state, str) and ok else ("" if ok else f": {state}")
        write(f"{'active  ' if ok else 'MISSING '} {label}{detail}")
    write(f"{active} of {len(LAYERS)} layers active")
    if layers.get("preflight") is not True:
        write(f"'grader grade' refuses to run here: {layers.get('preflight')}")
    filesystem = isinstance(layers.get("landlock"), str) and layers["landlock"].startswith("ABI")
    if not filesystem:
        write("without Landlock, 'grader grade' refuses to run unless --insecure is given")
    return 0 if active == len(LAYERS) else 1
