"""Starting and stopping the grader's control servers (the sandbox's zygote, the warm fork server).

Standard library only, and nothing else imported: the command line starts grader check's fork
server with it before it loads anything (`grader.cli.launch`), so that the server imports numpy
while the grader starts (issue 16). `grader.execution.jobs` and the sandbox plugin use the same functions.
"""

from __future__ import annotations

import _thread
import os
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import socket  # imported where it is used

T = TypeVar("T")
_SPAWN_LOCK = _thread.allocate_lock()

__all__ = [
    "CHILD_ENV",
    "FORKSERVER",
    "ZYGOTE",
    "check_fork_server",
    "fork_server_available",
    "grade_zygote",
    "start_server",
    "start_zygote",
    "stop_server",
    "stop_zygote",
]

FORKSERVER = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "child", "forkserver.py")
"""The warm fork server's script (`grader.execution.jobs.ForkServer`)."""

ZYGOTE = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "child", "zygote.py")
"""The sandbox's zygote's script (``grader.builtin.sandbox.Zygote``)."""

CHILD_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864",
}
"""The child's whole environment (plus HOME and TMPDIR set to its folder).

``GLIBC_TUNABLES`` sets the servers' malloc, which every job inherits with the fork: blocks up to
32 MiB come from the heap, freed blocks stay there for the next ones (up to 64 MiB free at its
top), and the heap grows in transparent huge pages (``madvise``; where the kernel offers none,
nothing changes). A job is a fresh fork, so each page its calls write first costs a page fault
(about 1.6 µs here, most of a large call's system time): numpy's 2 MiB temporaries of a 512x512
attention took about 3,100 faults in a job, and take about 600 so (3 ms of CPU less per call).
32 MiB and twice that are glibc's own ceilings for the thresholds it adjusts by itself."""


def start_server(script: str, stderr: Any = None) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start a control server (the sandbox's zygote, the fork server) and the socket the grader talks to it on.

    ``script`` runs in a fresh isolated interpreter (``python -I -B -u``) in its own session, at
    ``/`` with the children's environment (`CHILD_ENV`), and gets its end of a Unix socket pair as
    its one argument. ``stderr`` is where its standard error goes (default: the grader's). The
    grader's end waits at most 60 s for a reply. Stop it with `stop_server`.
    """
    return _from_lasting_thread(lambda: _start_server(script, stderr))


def _start_server(script: str, stderr: Any) -> tuple[subprocess.Popen[bytes], socket.socket]:
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-u", script, str(theirs.fileno())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            pass_fds=(theirs.fileno(),),
            env=dict(CHILD_ENV, HOME="/nonexistent"),
            cwd="/",
            start_new_session=True,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    ours.settimeout(60.0)
    return proc, ours


_SPAWNS: list[Any] = []  # the queue of the thread that starts servers for other threads, once made


def _from_lasting_thread(start: Callable[[], T]) -> T:
    """``start()``, run where the process it starts outlives the calling thread.

    A server sets its parent-death signal (SIGKILL) as it starts, and Linux sends it when the
    *thread* that forked it ends, not the process. The main thread runs ``start`` itself; any
    other thread (a grading thread starting a Dask client's sandbox for a chunk its cluster could
    not take, a Dask task thread, which Dask may retire) hands it to one daemon thread that lives as
    long as the process and only starts servers.
    """
    threading = sys.modules.get("threading")
    if threading is None or threading.current_thread() is threading.main_thread():
        return start()
    import queue
    from concurrent.futures import Future

    with _SPAWN_LOCK:
        if not _SPAWNS:
            requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
            threading.Thread(target=_serve_spawns, args=(requests,), name="grader-server-parent", daemon=True).start()
            _SPAWNS.append(requests)
    started: Future[T] = Future()
    _SPAWNS[0].put((start, started))
    return started.result()


def _serve_spawns(requests: Any) -> None:
    while True:
        start, started = requests.get()
        try:
            started.set_result(start())
        except BaseException as exc:  # noqa: BLE001 - raised again in the thread that asked
            started.set_exception(exc)


def _forget_spawns() -> None:
    """In a forked child: the lasting thread was not copied (only the forking thread is), so forget its queue
    (the next server asked for from a thread makes another) and its lock (another thread may have held it)."""
    global _SPAWN_LOCK
    _SPAWN_LOCK = _thread.allocate_lock()
    _SPAWNS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_spawns)


def stop_server(sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
    """Close a control socket and wait for its server process (5 s, then kill): the zygote's and the fork server's.

    The socket is shut down first: that wakes a thread of ours waiting on it (its read returns the end),
    which closing alone does not (and the descriptor's number could then be reused under it).
    """
    import socket

    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def fork_server_available() -> bool:
    """Whether a fork server can run here (``os.fork`` and descriptor passing: not Windows)."""
    import socket

    return hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform != "win32"


def check_fork_server(argv: list[str]) -> tuple[subprocess.Popen[bytes], socket.socket] | None:
    """For ``grader check`` (``argv`` without the program name), the fork server started now; else None.

    None for any other command, for ``--help``, where there is no fork server (Windows), or if it
    cannot start (``check`` then runs each submission in a fresh interpreter). The caller wraps it
    in a `grader.execution.jobs.ForkServer`, which waits for it to be ready on its first request.
    """
    if not argv or argv[0] != "check" or any(a in ("-h", "--help") for a in argv) or not fork_server_available():
        return None
    try:  # its standard error is not the grader's: no descriptor of the server leads to the grader's output
        return start_server(FORKSERVER, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def grade_zygote(argv: list[str]) -> tuple[subprocess.Popen[bytes], socket.socket, Any] | None:
    """For ``grader grade`` in the sandbox (``argv`` without the program name), the zygote exec'd now; else None.

    Started before the grader imports its plugins (about 0.4 s of a small class's run), so that it
    has imported numpy and prepared its layers by the time the checks are: it holds nothing secret
    (it starts before any spec is read). Returns the process, its socket and the file its standard
    error goes to, for ``grader.builtin.sandbox.Zygote``, which waits for it. None for any other
    command, for ``--help``, ``--insecure`` and ``--dask``, off Linux, or if it cannot start (the sandbox then
    starts its own at configure time). Unused, it stops when the grader's end of the socket closes.
    """
    if not argv or argv[0] != "grade" or sys.platform != "linux":
        return None
    if any(a in ("-h", "--help") or a.startswith("--insec") or a == "--dask" or a.startswith("--dask=") for a in argv):
        return None  # a Dask client starts its sandbox only for a chunk its cluster could not take
    try:
        return start_zygote()
    except OSError:
        return None


def start_zygote(script: str = ZYGOTE) -> tuple[subprocess.Popen[bytes], socket.socket, Any]:
    """Exec the sandbox's zygote (``script``); return its process, its socket and its standard error file.

    The standard error goes to a temporary file, where ``grader.builtin.sandbox.Zygote`` reads why a
    zygote that did not start stopped. Stop it with `stop_zygote`.

    Raises
    ------
    OSError
        If the interpreter cannot be started.
    """
    import tempfile

    stderr = tempfile.TemporaryFile()
    try:
        proc, sock = start_server(script, stderr=stderr)
    except BaseException:
        stderr.close()
        raise
    return proc, sock, stderr


def stop_zygote(started: tuple[subprocess.Popen[bytes], socket.socket, Any]) -> None:
    """Stop a zygote `start_zygote` started, and close its standard error file."""
    proc, sock, stderr = started
    stop_server(sock, proc)
    stderr.close()
