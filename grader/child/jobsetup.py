"""One sandbox job, for the sandbox child: fork it, apply every layer in order, wait for its task, run it.

`fork_job` (in the zygote) forks the job as pid 1 of a new pid namespace;
`job` (in the job) starts a new session, enters the slot's cgroups
(`cgroups`), unshares the mount, ipc and uts namespaces, takes its pipes as
fds 0-4 and closes every other fd; `isolate_job` mounts a fresh ``/proc``
and the job folder's tmpfs at `JOB_FOLDER`, sets the rlimits (`rlimits`),
``PR_SET_NO_NEW_PRIVS``, Landlock (`landlock`), the uid drop and seccomp
(`seccomp`). The job then waits for its task on stdin (`receive_task`) and
runs the worker on it. A job that cannot set up says why on its reason pipe
and exits with `limits.SETUP_FAILED`.

What every job inherits from the zygote is made once, at start, by
`prepare`: the read-only Landlock rules, the zygote's pidfd and pid
namespace, the job folder's path, and the zygote's own mount namespace
(private, so jobs need not make their copy private; with the standard
library's site-packages covered, so that one rule allows the standard
library: `COVERED`). Before each fork the zygote also makes its own
environment the job's (`prepare_environment`) and opens the slot's
cgroups (``cgroups.prepare_slot``): the job enters them and finds its
environment set without any work of its own (each page a job first
writes is copied from the zygote's: its Python work is dear).

Part of the sandbox child (``grader/child``), loaded by path by the zygote
(see the package's docstring): it imports only the standard library.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType, TracebackType
from typing import Any, NoReturn, Protocol

from . import cgroups, landlock, rlimits, seccomp
from .kernel import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUTS,
    MNT_DETACH,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    check,
    fork_cheaply,
    high_fd,
    libc,
    prctl,
    unshare,
)
from .limits import JOB_NICE, SETUP_FAILED, slot_uid

NAMESPACES = {"pid": CLONE_NEWPID, "mount": CLONE_NEWNS, "net": CLONE_NEWNET, "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS}

READONLY_RULES: list[landlock.Rule] = []
"""(O_PATH fd, rights) of every read-only path, opened once by `prepare`."""

READONLY_PATHS: list[str] = []
"""Every path jobs may read (`landlock.allowed_paths`); `READONLY_RULES` allow them, one rule for each, or
one rule for a whole standard-library folder (see `ZYGOTE_MOUNTS`)."""

ZYGOTE_MOUNTS: bool | str = "not set up"
"""True once the zygote is in a mount namespace of its own, made private once: each job's copy of it
is private too, so jobs skip the recursive ``MS_PRIVATE`` (a walk of every mount). Else why not (the
zygote then stays in the machine's namespace, and jobs make their copy private themselves)."""

COVERED: bool | str = "not set up"
"""True once, in the zygote's mount namespace, each standard-library folder's site-packages (and
dist-packages) is covered by an empty read-only tmpfs, and `READONLY_RULES` allow each such folder with
one rule instead of one per entry (about 200: adding them cost each job about 0.3 ms of CPU); else why
not (`landlock.whole_roots`, `landlock.covered_view_is_sole`; the rules are then one per entry). Jobs
read no more either way: what lay in the covered folders is not there for them, and they cannot
uncover it (seccomp denies mount and umount, Landlock denies changing the mounts, and they are not
root). What they do see in addition: the folder's own listing and the empty covers."""

JOB_RULES: list[landlock.Rule] = []
"""`READONLY_RULES` and /dev/null (read-write): every job's ruleset but its own folder, opened once."""

ZYGOTE_PIDFD = -1
"""A pidfd of the zygote (readable once it has exited), inherited by jobs."""

OWN_PIDNS_FD = -1
"""The zygote's own pid namespace, to return to after forking a job into a new one."""

NET_NAMESPACE: bool | str = "not set up"
"""True once the zygote is in a network namespace of its own, or why not. It has no interface up
(not even loopback) and jobs inherit it: a network namespace per job would cost about 1 ms of CPU
each (made, then torn down by the kernel), for nothing more, since jobs can open no socket but
socketpair() (seccomp) and reach no abstract socket outside their own Landlock domain."""

JOB_FOLDER_CLASH = "not set up"
"""`fixed_folder_clash` of `READONLY_PATHS` at `JOB_FOLDER`, worked out once by `prepare`: each job
reads it instead of walking the read-only paths again (every object a job touches is a page copied
from the zygote's)."""

JOB_FOLDER_CHOICES = ("/tmp", "/mnt", "/srv", "/media")
"""Where a job may see its folder, in order of preference (see `choose_job_folder`)."""

JOB_FOLDER = "/tmp"
"""Where a job sees its folder (its working folder, HOME and TMPDIR): a fixed path, so that
``getcwd()``, ``__file__`` and tracebacks show nothing of the grader's own temporary folder. A fresh
tmpfs is mounted there inside the job's mount namespace (the machine's folder is hidden from the job,
and from nothing else); the job then needs no path of the host at all, so a TMPDIR inside a folder
the job uids cannot enter (mode 0700) does not matter. Set by `prepare` with `choose_job_folder`: /tmp,
unless something jobs read (a virtual environment's numpy) lies under it; "" when every choice
clashes (the job folder then stays the grader's own)."""

REASON_FD = 4
"""In a job, until its student code runs: where a set-up failure's reason is written (read by the
zygote, which passes it to the grader with the exit code on the status pipe)."""


class Worker(Protocol):
    """What a job uses of the worker (``grader/child/worker.py``, loaded by path by the zygote)."""

    def run(self, request: dict[str, Any], fd: int) -> NoReturn:
        """Import the submission, then answer calls from stdin, writing frames to ``fd``."""

    def preimport(self) -> None:
        """Import the modules student code may import (the zygote does, before any job)."""

    def _emit(self, fd: int, obj: Any) -> None:
        """Write one frame."""

    def _read_exactly(self, fd: int, n: int) -> bytes | None:
        """``n`` bytes from ``fd``, or None at end-of-file."""


def prepare(readonly: list[str], keep: Sequence[str] = ()) -> None:
    """Make, once in the zygote, what every job inherits: the network namespace, Landlock rules, fds.

    ``readonly`` are the paths jobs may read (`landlock.allowed_paths`),
    ``keep`` what the zygote and its jobs read after start (numpy, the
    zygote's own files): never covered. The zygote enters a network
    namespace of its own (`NET_NAMESPACE`), chooses `JOB_FOLDER`, enters
    its mount namespace (`zygote_mounts`), opens the read-only rules, and
    keeps a pidfd of itself and its pid namespace, each at fd 10 or above.
    """
    global READONLY_RULES, READONLY_PATHS, ZYGOTE_PIDFD, OWN_PIDNS_FD, NET_NAMESPACE, JOB_FOLDER, JOB_RULES
    global ZYGOTE_MOUNTS, COVERED, JOB_FOLDER_CLASH
    NET_NAMESPACE = unshare(CLONE_NEWNET)
    READONLY_PATHS = readonly
    JOB_FOLDER = choose_job_folder(readonly)
    JOB_FOLDER_CLASH = fixed_folder_clash(readonly)
    ZYGOTE_MOUNTS, COVERED, paths = zygote_mounts(readonly, keep)
    READONLY_RULES = landlock.open_rules(paths, landlock.READONLY_RIGHTS)
    all_rights = landlock.FS_RIGHTS_BY_ABI.get(landlock.landlock_abi(), landlock.FS_RIGHTS_BY_ABI[5])
    JOB_RULES = READONLY_RULES + landlock.open_rules(["/dev/null"], all_rights)
    landlock.prepare_job(JOB_RULES)  # their structures, made once here, not per job (`landlock.job_restrict`)
    seccomp.prepare()  # the filter program too
    ZYGOTE_PIDFD = high_fd(os.pidfd_open(os.getpid()))
    OWN_PIDNS_FD = high_fd(os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC))


def zygote_mounts(readonly: list[str], keep: Sequence[str]) -> tuple[bool | str, bool | str, list[str]]:
    """In the zygote: enter a private mount namespace, and cover the standard library's site-packages there.

    Returns `ZYGOTE_MOUNTS`, `COVERED` and the paths the read-only rules
    are to allow: ``readonly``, or with each covered standard-library
    folder allowed whole (`landlock.compact_paths`). Anything that fails
    leaves the zygote as it was before (back in the machine's mount
    namespace, or the covers taken away).
    """
    host = high_fd(os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC))
    try:
        entered = unshare(CLONE_NEWNS)
        if entered is not True:
            return f"no mount namespace: {entered}", "no mount namespace", readonly
        try:
            check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        except OSError as exc:
            check(libc.setns(host, CLONE_NEWNS), "setns back to the machine's mount namespace")
            return str(exc), "no mount namespace", readonly
    finally:
        os.close(host)
    roots = landlock.whole_roots(readonly, keep)
    if isinstance(roots, str):
        return True, roots, readonly
    covers: list[str] = []
    try:
        for folder in (folder for covered in roots.values() for folder in covered):
            flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
            check(
                libc.mount(b"tmpfs", folder.encode(), b"tmpfs", flags, b"size=4096,nr_inodes=2,mode=0555"),
                f"cover {folder}",
            )
            covers.append(folder)
            if os.listdir(folder):
                raise OSError(errno.EEXIST, f"{folder} is not empty once covered")
        why = next((w for w in (landlock.covered_view_is_sole(r, c) for r, c in roots.items()) if w), "")
        if why:
            raise OSError(errno.EEXIST, why)
    except OSError as exc:
        for folder in reversed(covers):
            check(libc.umount2(folder.encode(), MNT_DETACH), f"uncover {folder}")
        return True, str(exc), readonly
    return True, True, landlock.compact_paths(readonly, roots)


def fixed_folder_clash(readonly: Iterable[str], folder: str | None = None) -> str:
    """Why the job folder cannot be mounted at ``folder`` (a path jobs read lies under it), or ''."""
    folder = JOB_FOLDER if folder is None else folder
    if not folder:
        return f"every fixed folder ({', '.join(JOB_FOLDER_CHOICES)}) holds a path jobs read"
    for path in readonly:
        if path == folder or path.startswith(folder.rstrip("/") + "/"):
            return f"{path} (read by jobs) lies under {folder}"
    return ""


def choose_job_folder(readonly: Sequence[str], choices: Iterable[str] = JOB_FOLDER_CHOICES) -> str:
    """The first of ``choices`` that is a real folder and holds nothing jobs read, or ''.

    A checkout or virtual environment under /tmp (``git clone . /tmp/fresh``)
    holds the numpy jobs import: mounting the job's tmpfs over /tmp would
    hide it, so the next choice is taken. The choice is the same for every
    job of the machine's grader, and never names the grader's own folders.
    """
    for folder in choices:
        if os.path.isdir(folder) and not os.path.islink(folder) and not fixed_folder_clash(readonly, folder):
            return folder
    return ""


def job_tmpfs(jobdir: str, uid: int, size: int) -> str:
    """Put the job folder on an empty tmpfs of ``size`` bytes, owned by ``uid``; return its path.

    The job may write only there (Landlock): without a size limit, a job
    writing 64 MiB files (RLIMIT_FSIZE) until its timeout, call after call,
    could fill the grader's disk. The tmpfs is charged to the job's memory
    cgroup and vanishes with its mount namespace. It is mounted at
    `JOB_FOLDER` (inside the job's own mount namespace only), unless a path
    the job reads lies there: then over ``jobdir``, the grader's folder.

    Returns
    -------
    str
        Where the job folder is now (the job's working folder).
    """
    where = jobdir if not JOB_FOLDER or JOB_FOLDER_CLASH else JOB_FOLDER
    options = f"size={int(size)},nr_inodes=4096,mode=0700,uid={uid},gid={uid}".encode()
    if libc.mount(b"tmpfs", where.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) == -1:
        check(-1, f"mount tmpfs on {where}")
    os.chdir(where)  # the host's folder is now hidden beneath the tmpfs
    return where


def receive_task(request: dict[str, Any], read_exactly: Callable[[int, int], bytes | None]) -> dict[str, Any]:
    """Wait on stdin for the job's task; write the submission into the job folder; return the request.

    A job is started before the grader knows which submission it will run
    (while the previous one runs), fully isolated, then waits here. The task
    is an 8-byte header (two big-endian lengths), a JSON object
    (``cpu_seconds``) and the submission's bytes: no call. End-of-file
    instead means the job is not needed: it leaves. The worker then reads
    its calls, one at a time, from the same pipe (see ``worker.run``): a
    call's arguments reach the job only when the call is made.
    ``read_exactly(fd, n)`` is the worker's own reader (n bytes, or None at
    end-of-file).
    """
    header = read_exactly(0, 8)
    if header is None:
        os._exit(0)
    n_task, n_source = struct.unpack(">II", header)
    task = _task(read_exactly(0, n_task) or b"null")
    source = read_exactly(0, n_source) if n_source else b""
    if not isinstance(task, dict) or source is None:
        os._exit(0)
    fd = os.open(request["file"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)  # as open() does
    try:
        view = memoryview(source)
        while view:  # no file object: its io machinery is pages the job would copy from the zygote's
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    cpu = rlimits.lower_cpu(task["cpu_seconds"])  # lowering a limit needs no privilege
    return {"file": request["file"], "cpu_seconds": cpu, "source": source, "module": request.get("module")}


PREPARED_MODULES: dict[str, ModuleType] = {}
"""By the path a job's submission will have (`prepare_module`), the module it is imported into."""


def prepare_module(request: dict[str, Any]) -> ModuleType | None:
    """In the zygote, before forking a job: the module its submission will be imported into (None: the job makes it).

    The submission's path in a job is the same for every job (its folder is at `JOB_FOLDER`), so
    the module (its spec, loader and attributes, as ``worker.run`` makes them; no code of it runs here,
    nor ever in the zygote) is made once and every job gets its own copy with the fork: making
    it in each job cost it about 0.3 ms of CPU (importlib's Python, pages copied from the
    zygote's). A job whose folder ends up elsewhere makes its own (`worker.run` checks the path).
    """
    if not JOB_FOLDER or JOB_FOLDER_CLASH:
        return None
    old, file = request["jobdir"], request["file"]
    if not file.startswith(old + "/"):
        return None
    path = os.path.join(JOB_FOLDER, file[len(old) + 1 :])
    module = PREPARED_MODULES.get(path)
    if module is None and len(PREPARED_MODULES) < 16:  # as `worker.run` makes it
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        if spec is None or spec.loader is None:
            return None
        module = PREPARED_MODULES[path] = importlib.util.module_from_spec(spec)
    return module


_TASK_HEAD, _TASK_TAIL = b'{"cpu_seconds": ', b"}"
_NUMBER_BYTES = frozenset(b"0123456789.eE+-")


def _task(data: bytes) -> Any:
    """The task's JSON (``{"cpu_seconds": S}``, as ``grader.builtin.sandbox.handle`` writes it).

    Read without the json module when it is exactly that text with a plain number: the first
    use of json's decoder in a job cost it about 0.1 ms of CPU (pages copied from the zygote's).
    """
    number = data[len(_TASK_HEAD) : -len(_TASK_TAIL)]
    if data.startswith(_TASK_HEAD) and data.endswith(_TASK_TAIL) and number and set(number) <= _NUMBER_BYTES:
        try:
            return {"cpu_seconds": int(number) if number.isdigit() else float(number)}
        except ValueError:
            pass
    return json.loads(data)


def _move_job_folder(request: dict[str, Any], where: str) -> str:
    """Point the request at the job folder's new place; return it (`job_environment` follows it too)."""
    old = request["jobdir"]
    if where != old:
        request["jobdir"] = where
        file = request["file"]
        inside = file[len(old) + 1 :] if file.startswith(old + "/") else os.path.relpath(file, old)
        request["file"] = os.path.join(where, inside)
    return where


ENV_READY: dict[str, str] | None = None
"""The job environment the zygote has made its own (`prepare_environment`), or None."""

_ENV_SOURCE: tuple[Any, ...] = ()
"""The request's environment and job folder `ENV_READY` was made from."""


def job_environment(env: dict[str, str], jobdir: str, where: str) -> dict[str, str]:
    """A job's environment ``env`` (the request's) once its folder ``jobdir`` is at ``where``: HOME, TMPDIR follow."""
    return {key: where if value == jobdir else value for key, value in env.items()}


def prepare_environment(request: dict[str, Any]) -> bool:
    """In the zygote, before forking a job: make the zygote's own environment the job's, as it will be.

    That is the request's environment with the job folder at `JOB_FOLDER`
    (the same for every job, so it is set once). A job whose folder is
    mounted there inherits it and sets nothing: setting it in each job cost
    about 0.4 ms of CPU (every page the job first writes is copied from the
    zygote's). Returns whether the zygote's environment is that one now.
    """
    global ENV_READY, _ENV_SOURCE
    if not JOB_FOLDER:
        return False
    if _ENV_SOURCE and _ENV_SOURCE[0] is request["env"] and _ENV_SOURCE[1] == request["jobdir"]:
        return True  # the same as the last job's (a launch decoded once: `control._decode`)
    _ENV_SOURCE = (request["env"], request["jobdir"])
    env = job_environment(request["env"], request["jobdir"], JOB_FOLDER)
    if env != ENV_READY:
        os.environ.clear()
        os.environ.update(env)
        ENV_READY = env
    return True


def isolate_job(request: dict[str, Any], layers: dict[str, Any]) -> None:
    """Apply every layer inside the job (pid 1 of its namespaces). Records what applied.

    Moves the job folder to `JOB_FOLDER` (``request["jobdir"]`` and
    ``request["file"]`` are updated, and so are HOME and TMPDIR).
    """
    limits = request["limits"]
    uid = slot_uid(request["slot"])
    jobdir = request["jobdir"]
    if layers.get("pid") is True and layers.get("mount") is True:
        try:
            if ZYGOTE_MOUNTS is not True:  # else this namespace is a copy of the zygote's, private already
                check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
            check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
            layers["fresh_proc"] = True
        except OSError as exc:
            layers["fresh_proc"] = str(exc)
        if layers["fresh_proc"] is True:  # / is private now: the mount stays in the job's namespace
            try:
                where = job_tmpfs(jobdir, uid, limits["file_bytes"])
                layers["job_tmpfs"] = True
                layers["fixed_cwd"] = True if where == JOB_FOLDER else JOB_FOLDER_CLASH
                jobdir = _move_job_folder(request, where)
            except OSError as exc:
                layers["job_tmpfs"] = str(exc)
    layers.setdefault("fixed_cwd", layers.get("job_tmpfs", "no mount namespace"))
    if layers.get("uts") is True:
        socket.sethostname("grader-job")
    marks = layers.get("_marks")  # a probe's: each layer's wall-clock time (`job`)
    _mark(marks, "proc")
    rlimits.set_rlimits(limits)
    layers["rlimits"] = True
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    try:
        layers.update(landlock.job_restrict(JOB_RULES, jobdir))
        layers["landlock_rules"], layers["stdlib_covered"] = len(JOB_RULES) + 1, COVERED  # for the probe
    except OSError as exc:
        layers["landlock"] = str(exc)
    _mark(marks, "landlock")
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    layers["uid"] = os.geteuid()
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the uid change cleared it
    _mark(marks, "uid")
    try:
        seccomp.seccomp_install()
        layers["seccomp"] = layers["file_locks"] = True
    except OSError as exc:
        layers["seccomp"] = layers["file_locks"] = str(exc)
    _mark(marks, "seccomp")


def _mark(marks: list[tuple[str, float]] | None, layer: str) -> None:
    """A probe's mark: ``layer`` set up now (a job to grade has no ``marks`` and makes none)."""
    if marks is not None:
        marks.append((layer, time.perf_counter()))


def _close_fds_from(lowest: int) -> None:
    """Close every descriptor from ``lowest`` up: one ``close_range`` call where the kernel has it.

    (Listing ``/proc/self/fd`` does not work here: Landlock allows the
    zygote's ``/proc/self``, not the job's fresh one, so that would fall back
    to a thousand ``close`` calls.) ``os.closerange`` falls back to a loop itself.
    """
    os.closerange(lowest, 1 << 20)


def _setup_reason(exc: BaseException) -> str:
    """One line saying why a job's set-up failed: the exception and where (file and line) it was raised."""
    tb: TracebackType | None = exc.__traceback__
    line, where = 0, "zygote.py"
    while tb is not None:
        line, where = tb.tb_lineno, os.path.basename(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    text = f"{type(exc).__name__}: {exc} ({where}, line {line})"
    return "".join(c if c.isprintable() else " " for c in text)[:400]


def job(
    request: dict[str, Any],
    fds: Sequence[int],
    control_fd: int,
    worker: Worker,
    layers: dict[str, Any],
    reason_fd: int = -1,
) -> NoReturn:
    """The job itself, just forked: pid 1 of its pid namespace when there is one.

    ``layers`` already says whether the pid namespace applied. If set-up
    fails, the reason goes to ``reason_fd`` (moved to `REASON_FD`, closed
    before the submission is run, so student code cannot write there) and
    the job exits with `limits.SETUP_FAILED`. Never returns.
    """
    try:
        os.setsid()
        os.nice(JOB_NICE)
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if select.select([ZYGOTE_PIDFD], [], [], 0)[0]:
            os._exit(1)  # the zygote died before the death signal was armed
        os.close(control_fd)
        # A probe times each layer (``setup_ms``); a job to grade makes no marks: every object
        # it makes is memory it first writes, a page copied from the zygote's.
        marks = [("start", time.perf_counter())] if request.get("probe") else None
        layers.update(cgroups.cgroup_enter(request["slot"], request["limits"]))
        _mark(marks, "cgroups")
        if marks is not None:
            layers["_marks"] = marks
        layers["net"] = NET_NAMESPACE  # the zygote's own, empty: made once, not per job
        if unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) is True:  # one call for the three
            layers["mount"] = layers["ipc"] = layers["uts"] = True
        else:  # one at a time, to say which did not apply and why
            for name, flag in NAMESPACES.items():
                if flag not in (CLONE_NEWPID, CLONE_NEWNET):
                    layers[name] = unshare(flag)
        _mark(marks, "namespaces")
        result_fd, out_fd, err_fd, task_fd = fds
        os.dup2(task_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.dup2(result_fd, 3)
        if reason_fd >= 0:
            os.dup2(reason_fd, REASON_FD)  # reason_fd is 10 or above (`fork_job`)
            reason_fd = REASON_FD
        os.chdir(request["jobdir"])
        grader_jobdir = request["jobdir"]
        isolate_job(request, layers)  # uses the zygote's O_PATH descriptors, closed next
        if not (request.get("environment_ready") and request["jobdir"] == JOB_FOLDER):
            os.environ.clear()  # else the zygote's own environment is the job's already
            os.environ.update(job_environment(request["env"], grader_jobdir, request["jobdir"]))
        _close_fds_from(REASON_FD + 1)
        if request.get("probe"):
            marks = layers.pop("_marks")
            layers["setup_ms"] = {b[0]: round((b[1] - a[1]) * 1000, 2) for a, b in zip(marks, marks[1:])}
            worker._emit(3, {"event": "probe", "layers": layers})
            os._exit(0)
        if not str(layers.get("landlock", "")).startswith("ABI") or layers.get("uid") == 0:
            # Fail closed: student code never runs without the filesystem allow-list, or as root.
            raise OSError(
                errno.EPERM,
                f"a required layer did not apply (landlock: {layers.get('landlock')}, uid: {layers.get('uid')})",
            )
        task = receive_task(request, worker._read_exactly)
        if reason_fd >= 0:
            os.close(reason_fd)  # before any student code runs
            reason_fd = -1
        sys.argv = [task["file"]]  # as if run as a script: the zygote's path (the grader's install) is not shown
        worker.run(task, 3)
    except BaseException as exc:  # noqa: BLE001 - the worker never returns; anything here is a setup failure
        try:
            reason = _setup_reason(exc)
            os.write(2, f"sandbox setup failed: {reason}\n".encode())
            if reason_fd >= 0:
                os.write(reason_fd, reason.encode())
        finally:
            os._exit(SETUP_FAILED)


def fork_retrying(timeout: float = 3.0) -> int:
    """``os.fork()``, retried while it fails with EAGAIN or ENOMEM (bounded).

    A slot's cgroups are reused: the processes of the slot's previous job (a
    fork bomb's children) may still be leaving and count against
    ``pids.max`` (EAGAIN) and the memory limit (ENOMEM); failing here would
    fail an innocent submission.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fork_cheaply()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ENOMEM) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def fork_job(request: dict[str, Any], fds: Sequence[int], control_fd: int, worker: Worker) -> tuple[int, int, bool]:
    """Fork one job as pid 1 of a new pid namespace (when possible).

    Returns
    -------
    (int, int, bool)
        The job's pid, the read end of its set-up reason pipe (see `job`),
        and whether the job is pid 1 of a pid namespace of its own.
    """
    layers: dict[str, Any] = {}
    own_pidns = None
    if "module" not in request:  # a launch seen before (`control._decode`) has it already
        request["module"] = prepare_module(request)
    reason_read, reason_write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)  # the reason: < 400 bytes, never blocks
    reason_write = high_fd(reason_write)
    layers["pid"] = unshare(CLONE_NEWPID)
    if layers["pid"] is True:
        own_pidns = OWN_PIDNS_FD
    try:
        pid = fork_retrying()
    except OSError:
        pid = -1
        os.close(reason_read)
        raise
    finally:
        if pid != 0:
            os.close(reason_write)
        if pid != 0 and own_pidns is not None:  # the zygote's next children go back to its own namespace
            check(libc.setns(own_pidns, CLONE_NEWPID), "setns back to the zygote's pid namespace")
    if pid == 0:
        os.close(reason_read)
        job(request, list(fds[:3]) + list(fds[4:5]), control_fd, worker, layers, reason_write)
    return pid, reason_read, layers["pid"] is True
