"""The zygote's control server, for the sandbox child: start-up, requests, and watching jobs.

`main` (called by ``grader/child/zygote.py``) loads the worker by path, imports
numpy and the modules student code may use (the worker's ``PREIMPORT``:
after Landlock and the uid drop, a job may be unable to read a module), makes what every job
inherits (`jobsetup.prepare`), freezes the heap for cheap forks, says it
is ready, and `serve` answers the grader's requests on the control socket:
``launch`` (fork a job, `jobsetup.fork_job`; reply with its pid, a pidfd
and its slot's ``cpu.stat``), ``kill`` and ``ping``. Each job is watched
through its pidfd (`Running`): once it exits, the zygote reaps it, empties
its slot's cgroups and only then writes its exit code (and any set-up
failure's reason) on its status pipe.

Part of the sandbox child (``grader/child``), loaded by path by the zygote
(see the package's docstring): it imports only the standard library, and
numpy at start.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import select
import signal
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any, cast

from . import cgroups, jobsetup, landlock
from .kernel import PR_SET_PDEATHSIG, prctl
from .limits import SETUP_FAILED

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
"""The worker every job runs (``grader/child/worker.py``), loaded by path."""


class Running:
    """A job the zygote watches: its pidfd, slot and status pipe."""

    def __init__(
        self, job_id: Any, pid: int, slot: int, status_fd: int, reason_fd: int = -1, pid_namespace: bool = False
    ) -> None:
        self.id, self.pid, self.slot, self.status_fd = job_id, pid, slot, status_fd
        self.pid_namespace = pid_namespace  # the job is pid 1 of its own pid namespace
        self.reason_fd = reason_fd  # why its set-up failed, if it did (see `jobsetup.job`)
        self.reason = ""
        self.pidfd = os.pidfd_open(pid)
        self.code: int | None = None  # exit code, once reaped
        self.deadline = 0.0  # once reaped: when stragglers in the slot are killed one by one

    def reap(self) -> bool:
        """Collect the exited job; return True once it is reaped."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, 0
        if pid == 0:
            return False
        self.code = (
            128 + os.WTERMSIG(status)
            if os.WIFSIGNALED(status)
            else (os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
        )
        self.deadline = time.monotonic() + 5.0
        if self.reason_fd >= 0:
            try:
                data = os.read(self.reason_fd, 1024) if self.code == SETUP_FAILED else b""
            except OSError:  # nothing written (the write end may still be open in a straggler)
                data = b""
            os.close(self.reason_fd)
            self.reason_fd = -1
            text = data.decode("utf-8", errors="replace")
            self.reason = "".join(c if c.isprintable() else " " for c in text).strip()[:400]
        return True

    def settled(self) -> bool:
        """Whether the slot's cgroups are empty (stragglers are killed); then report the exit code."""
        # The pid 1 of a pid namespace is reaped only once every process of its namespace is gone
        # (the kernel kills them all and waits): then one read of the slot's cgroup-v2 list checks
        # it, else every cgroup's list is read.
        left = cgroups.slot_processes(self.slot, quick=self.pid_namespace)
        if left:
            if time.monotonic() < self.deadline:
                cgroups.cgroup_kill(self.slot)
                return False
            for p in left:  # no cgroup.kill here, and 5 s passed: kill what is left one by one
                try:
                    os.kill(int(p), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        try:  # one write of less than PIPE_BUF bytes: the grader reads it whole
            os.write(self.status_fd, f"{self.code} {self.reason}".strip().encode() + b"\n")
        except OSError:
            pass  # the grader stopped waiting
        os.close(self.status_fd)
        return True


_PARSED: dict[bytes, dict[str, Any]] = {}
"""Launch requests already decoded, by their line up to the job id (`JOB_KEY`, last): a worker's
launches differ only in it, and decoding each anew cost the zygote about 40 objects per job (each page
the zygote writes after a fork is copied, since its live jobs share it)."""

JOB_KEY = b', "job": '

FDS_SPACE = socket.CMSG_SPACE(5 * 4)
"""Room for a launch's five descriptors."""

FDS = {1: struct.Struct("i"), 2: struct.Struct("2i")}
"""One or two descriptors as SCM_RIGHTS carries them (C ints)."""


def _decode(line: bytes) -> dict[str, Any]:
    """A request line, decoded; a launch's from `_PARSED` when its line up to the job id was seen before.

    A launch seen before is that same dict again, its ``job`` set anew: what `serve` and
    ``jobsetup.fork_job`` add to it (``environment_ready``, ``module``) is worked out from the
    rest, the same for every launch of that line, and a job changes only its own copy (the
    fork's). Copying it per launch wrote to each of its values (their reference counts): pages
    copied in the zygote, whose live jobs share them.
    """
    head, found, tail = line.rpartition(JOB_KEY)
    if found and tail.endswith(b"}\n") and tail[:-2].isdigit():
        request = _PARSED.get(head)
        if request is None:
            request = json.loads(line)
            if len(_PARSED) < 64 and isinstance(request, dict) and request.get("op") == "launch":
                _PARSED[head] = request
        request["job"] = int(tail[:-2])
        return request
    return cast("dict[str, Any]", json.loads(line))


def _read_request(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One request line and its file descriptors; (None, []) when the grader is gone."""
    msg, ancillary, _flags, _addr = sock.recvmsg(1 << 16, FDS_SPACE)  # as socket.recv_fds, without its array
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += struct.unpack(f"{len(data) // 4}i", data[: len(data) // 4 * 4])
    if not msg:
        return None, fds
    buffer = msg
    while not buffer.endswith(b"\n"):
        more = sock.recv(1 << 16)
        if not more:
            return None, fds
        buffer += more
    return _decode(buffer), fds


def serve(control_fd: int, worker: jobsetup.Worker) -> None:
    """Answer requests on the control socket, and settle finished jobs, until the socket closes."""
    sock = socket.socket(fileno=control_fd)
    running: dict[Any, Running] = {}  # job id -> Running
    settling: list[Running] = []  # reaped jobs whose slot is not empty yet
    slots: set[int] = set()
    poller = select.poll()
    poller.register(control_fd, select.POLLIN)
    by_pidfd: dict[int, Running] = {}
    cpu_stats: dict[int, str | None] = {}
    replies: dict[int, bytes] = {}
    while True:
        events = poller.poll(2 if settling else None)
        for fd, _ in events:
            if fd != control_fd:
                job_ = by_pidfd[fd]
                if job_.reap():  # else not a zombie yet: the pidfd stays watched
                    del by_pidfd[fd]
                    poller.unregister(fd)
                    os.close(fd)
                    running.pop(job_.id, None)
                    settling.append(job_)
                continue
            request, fds = _read_request(sock)
            if request is None:
                for job_ in running.values():
                    _kill(job_)
                cgroups.cgroup_remove(slots)
                return
            op = request.get("op")
            reply: dict[str, Any]
            if op == "launch":
                slot = int(request["slot"])
                slots.add(slot)
                cpu_stat = cpu_stats.get(slot, "")
                if cpu_stat == "":
                    cpu_stat = cpu_stats[slot] = cgroups.cpu_stat_path(slot)  # once a slot
                cgroups.prepare_slot(slot, request["limits"])  # made and opened once, entered by each job
                request["environment_ready"] = jobsetup.prepare_environment(request)
                try:
                    pid, reason_fd, pidns = jobsetup.fork_job(request, fds, control_fd, worker)
                    job_ = Running(request["job"], pid, slot, fds[3], reason_fd, pidns)
                except OSError as exc:
                    os.write(fds[2], f"sandbox setup failed: {exc}\n".encode())
                    os.write(fds[3], f"{SETUP_FAILED} the zygote could not start the job: {exc}"[:400].encode() + b"\n")
                    for fd_ in fds:
                        os.close(fd_)
                    reply = {"pid": None}
                else:
                    for fd_ in fds[:3] + fds[4:]:
                        os.close(fd_)
                    running[job_.id] = job_
                    by_pidfd[job_.pidfd] = job_
                    poller.register(job_.pidfd, select.POLLIN)
                    # The grader gets a pidfd too: it kills a job without a round trip here,
                    # and a pidfd, unlike a pid, can never name another process.
                    tail = replies.get(slot)
                    if tail is None:  # {"pid": PID, "cpu_stat": PATH}: the path's part encoded once a slot
                        tail = replies[slot] = (', "cpu_stat": ' + json.dumps(cpu_stat) + "}\n").encode()
                    sent = [job_.pidfd]
                    try:  # its run-queue delay, opened while the job cannot have been reaped (its pid is its own)
                        schedstat = os.open(f"/proc/{pid}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
                    except OSError:
                        schedstat = -1
                    else:
                        sent.append(schedstat)
                    try:
                        rights = FDS[len(sent)].pack(*sent)
                        sock.sendmsg([b'{"pid": %d' % pid, tail], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
                    finally:
                        if schedstat >= 0:
                            os.close(schedstat)
                    continue
            elif op == "kill":
                found = running.get(request["job"])
                if found is not None:
                    _kill(found)  # its pidfd reports the exit; the status follows once the slot is empty
                reply = {"ok": True}
            elif op == "ping":
                reply = {"pid": os.getpid()}
            else:
                reply = {"error": f"unknown op {op!r}"}
            sock.sendall(json.dumps(reply).encode() + b"\n")
        if settling:
            settling = [job_ for job_ in settling if not job_.settled()]


def _kill(job_: Running) -> None:
    """Kill a job; being pid 1 of its namespace, it takes everything it started along."""
    try:
        signal.pidfd_send_signal(job_.pidfd, signal.SIGKILL)
    except (ProcessLookupError, OSError):
        pass
    cgroups.cgroup_kill(job_.slot)


def _load_worker() -> jobsetup.Worker:
    """``grader/child/worker.py``, loaded by path (as ``_grader_worker``): nothing of the grader package runs."""
    spec = importlib.util.spec_from_file_location("_grader_worker", WORKER)
    assert spec is not None and spec.loader is not None
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    return cast(jobsetup.Worker, worker)


def main(argv: Sequence[str]) -> None:
    """Script entry: ``zygote.py CONTROL_FD``; import numpy and the pre-imported modules, then `serve`."""
    control_fd = int(argv[1])
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:
        os._exit(1)
    worker = _load_worker()
    worker.preimport()
    import numpy

    cgroups.cgroup_remove_stale()
    readonly = landlock.allowed_paths(numpy)
    numpy_dir = os.path.dirname(os.path.abspath(str(numpy.__file__)))
    jobsetup.prepare(readonly, keep=[numpy_dir, numpy_dir + ".libs", os.path.dirname(WORKER)])
    # Move everything imported so far out of the collector's reach: a job's
    # garbage collection would otherwise write to every object's header and
    # copy the zygote's whole heap, page by page, into each forked job.
    gc.collect()
    gc.freeze()
    sock = socket.socket(fileno=os.dup(control_fd))
    sock.sendall(
        json.dumps(
            {
                "ready": True,
                "pid": os.getpid(),
                "readonly": readonly,
                "readonly_rules": len(jobsetup.READONLY_RULES),
                "covered": jobsetup.COVERED,
                "job_folder": jobsetup.JOB_FOLDER,
                "landlock_abi": landlock.landlock_abi(),
            }
        ).encode()
        + b"\n"
    )
    sock.detach()
    serve(control_fd, worker)
    os._exit(0)
