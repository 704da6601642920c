"""A warm fork server for ``--insecure``: numpy imported once, a plain worker forked per job.

Run as a script by the grader (`grader.execution.jobs.ForkServer`), never imported by it::

    python -I -B -u forkserver.py CONTROL_FD

It is the sandbox's zygote without the isolation layers: trusted code (or a machine without the
sandbox) graded near the sandbox's speed, instead of starting an interpreter and importing numpy
for every submission. It imports only the standard library, numpy and ``worker.py`` (loaded by
path, as the zygote loads it). It holds no secret: it is started before the specs are read.

Protocol, on the UNIX socket CONTROL_FD: the grader sends one JSON line per request, with file
descriptors; the server answers one JSON line.

* ``{"op": "launch", "file": PATH, "cpu_seconds": S, "cwd": DIR, "env": {...}, "walls": BOOL}`` with five
  descriptors: the result pipe's write end, stdout's and stderr's write ends, the call pipe's
  read end and a status pipe's write end. The server forks a job: a new session, those pipes on
  fds 3, 1, 2 and 0 and no other descriptor, the environment and folder given, with ``walls``
  (default) the plain job's walls (``grader/child/plain.py``: no root, and Landlock lets it
  write in DIR only and reach no other process's descriptors), the worker's rlimits, then
  ``worker.run``. Answer ``{"pid": PID}``.
  When the job ends, the server writes its exit code (negative: the signal that killed it) on
  the status pipe and closes it.
* ``{"op": "kill", "pid": PID}``: SIGKILL to the job's process group, only while the job is
  the server's own and not yet reaped (so a pid the system gave to another process is never
  signalled); then, the job reaped or not, every process a job left behind is killed and reaped
  (the server is their subreaper: ``plain.sweep``). Answer ``{"ok": true}`` once the job and all
  of them are gone, so that the grader writes no result while anything of the job still runs.

Where ``os.fork`` does not exist (Windows), the grader does not start this server: ``--insecure``
runs each submission in a fresh ``python worker.py`` (`grader.execution.jobs.PlainJob`), as before.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import os
import signal
import socket
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = HERE
PACKAGE = "_grader_child"


def _load_plain() -> ModuleType:
    """``grader/child/plain.py``, loaded by path in the package ``_grader_child`` (as the zygote loads the child)."""
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(CHILD, "__init__.py"), submodule_search_locations=[CHILD]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return importlib.import_module(PACKAGE + ".plain")


def _load_worker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_grader_worker", os.path.join(HERE, "worker.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Server:
    """The jobs the server forked and has not reaped, with their status pipes."""

    def __init__(self, sock: socket.socket, worker: ModuleType, plain: ModuleType) -> None:
        self.sock = sock
        self.worker = worker
        self.plain = plain
        self.kernel = importlib.import_module(PACKAGE + ".kernel")
        self.jobs: dict[int, int] = {}  # pid -> status pipe's write end

    def reap(self, *_: object) -> None:
        """Reap every child that ended (jobs, and what they left behind); report each job's exit code on its status pipe."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = self.jobs.pop(pid, None)
            if fd is not None:
                try:
                    os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
                except OSError:
                    pass
                os.close(fd)

    def launch(self, request: dict[str, Any], fds: Sequence[int]) -> dict[str, Any]:
        result_w, stdout_w, stderr_w, call_r, status_w = fds
        # No reaping between the fork and the job's registration: a job that ends at once is reported too.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        pid = -1
        try:
            pid = self.kernel.fork_cheaply()  # no interpreter after-fork work: this process has one thread
            if pid:
                self.jobs[pid] = status_w
        finally:
            if pid:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        if pid == 0:  # the job
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
                os.setsid()
                for target, fd in ((0, call_r), (1, stdout_w), (2, stderr_w), (3, result_w)):
                    os.dup2(fd, target)
                os.closerange(4, 1 << 16)
                os.chdir(request["cwd"])
                os.environ.clear()
                os.environ.update(request["env"])
                if request.get("walls", True):
                    self.plain.guard(request["cwd"])
                sys.argv = [request["file"]]
                self.worker._limits(request["cpu_seconds"])
                self.worker.run({"file": request["file"], "cpu_seconds": request["cpu_seconds"]}, 3)
            finally:
                os._exit(70)
        for fd in (result_w, stdout_w, stderr_w, call_r):
            os.close(fd)
        return {"pid": pid}

    def kill(self, pid: int) -> dict[str, Any]:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # reaped here, not in the handler meanwhile
        try:
            if pid in self.jobs:  # not reaped: the pid (and its group) is still this job's
                for kill in (os.killpg, os.kill):  # its group, and the job itself if it left the group
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            self.plain.sweep(self.jobs, self.reap, until_gone=pid)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        return {"ok": True}

    def serve(self) -> None:
        buffer = b""
        fds: list[int] = []
        while True:
            try:
                data, got, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, 8)
            except InterruptedError:
                continue
            except OSError:  # the grader went away without reading (interrupted): as at end-of-file
                return
            fds += got
            if not data:
                return
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                request = json.loads(line)
                if request.get("op") == "launch":
                    taken, fds = fds[:5], fds[5:]
                    reply = self.launch(request, taken)
                else:
                    reply = self.kill(int(request.get("pid", 0)))
                try:
                    self.sock.sendall(json.dumps(reply).encode() + b"\n")
                except OSError:  # the grader went away before the reply (interrupted): as at end-of-file
                    return
            self.reap()


def main(argv: Sequence[str]) -> None:
    """Serve fork requests on the socket whose descriptor is ``argv[1]`` until the grader closes it.

    The worker, numpy and the modules student code may import (the worker's ``preimport``, as the
    sandbox's zygote does) are imported once, here, so that each forked job starts with them loaded;
    ``{"ready": true}`` tells the grader (`grader.execution.jobs.ForkServer`) the server is up. When the socket
    closes, the jobs still running are killed.
    """
    gc.disable()  # start-up makes no garbage worth a pass (numpy's import ran about 30 of them); frozen below
    sock = socket.socket(fileno=int(argv[1]))
    plain = _load_plain()
    plain.become_subreaper()  # what a job leaves behind comes to this process, to be killed (plain.sweep)
    worker = _load_worker()
    worker.preimport()  # numpy and what student code may import, once here: the zygote's modules
    # As the zygote does: what is loaded so far is moved out of the collector's reach, so that a
    # job's collections never walk (and copy, page by page, from this process) the server's heap.
    # No collection first: it walked every object numpy made (about 8 ms on the way to check's first
    # job) to free the little garbage imports leave.
    gc.freeze()
    gc.enable()

    server = Server(sock, worker, plain)
    signal.signal(signal.SIGCHLD, server.reap)
    try:
        sock.sendall(b'{"ready": true}\n')
    except OSError:  # the grader is gone already (interrupted while it started): nothing to serve
        return
    try:
        server.serve()
    finally:  # whatever ended the serving, no job outlives the server
        for pid in list(server.jobs):
            server.kill(pid)
        plain.sweep(server.jobs, server.reap)  # what jobs that ended by themselves left behind


if __name__ == "__main__":
    main(sys.argv)
    os._exit(0)  # nothing to flush or close: skip tearing numpy down (tens of ms of CPU the grader waits for)
