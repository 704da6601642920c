"""The sandbox's zygote: a secret-free parent that forks one isolated job per request.

Run as a script by the grader (``grader.builtin.sandbox``), from a fresh
exec, before any spec, reference or expected value is loaded::

    python -I -B -u zygote.py CONTROL_FD

It uses only the standard library and numpy. It imports numpy (and the
standard-library modules student code typically needs) once, then serves
requests on the UNIX socket CONTROL_FD. Each request is one JSON line; a
``launch`` request also carries five file descriptors as SCM_RIGHTS: the
write ends of the job's result, stdout and stderr pipes, of a status pipe
on which the zygote writes the job's exit code once the slot's cgroups
hold nothing of the job any more, and the read end of the job's task pipe
(its stdin). Replies are JSON lines; a launch's reply carries a pidfd of
the job, with which the grader kills it (``kill`` requests remain).

Jobs are started ahead, before the grader knows their submission: a job
sets up every layer, then waits on its stdin for its task (the
submission's bytes, see `receive_task`), imports it, and then reads its
calls from the same pipe, one at a time, each only when the grader makes
it. The zygote never sees a submission or a call. A launch's reply names
the slot's cgroup-v2 ``cpu.stat``, from which the grader reads the job's
CPU time (a slot is capped at one CPU, `cpu_quota_one`).

A job is one fork of the zygote, set up in this order (each layer is
applied if the kernel and the privileges allow it, and reported by
``probe``):

1. the zygote unshares a pid namespace for its next child and forks:
   the job is pid 1 of a new pid namespace (the zygote then goes back to
   its own with ``setns``);
2. the job starts a new session, dies with the zygote, moves itself into
   its slot's cgroups (pids, memory, cpu; v2 for ``cgroup.kill``), then
   unshares mount, ipc and uts namespaces (the network namespace is the
   zygote's own, empty, made once: see `NET_NAMESPACE`), mounts a fresh
   ``/proc`` and its folder, a size-limited tmpfs, at the fixed path
   `JOB_FOLDER` (its working folder, HOME and TMPDIR), takes its pipes as
   fds 0-3 (and a set-up reason pipe as fd 4, closed before the submission
   runs), closes every other fd, and sets rlimits (CPU, address space,
   file size, open files, processes, no core dumps);
3. ``PR_SET_NO_NEW_PRIVS``, then a Landlock ruleset: read-only the standard
   library (not its site-packages) and numpy, read-write the job folder,
   nothing else; TCP bind/connect denied; abstract UNIX sockets and signals
   scoped to the job;
4. drop to a non-root uid/gid (one per worker slot), death with the zygote;
5. a seccomp allow-list (default deny; x86_64 only): the system calls CPython
   and numpy need, sockets AF_UNIX only (and no connect, sendmsg or sendto with
   an address: named sockets escape Landlock), clone without namespace flags,
   no file locks, leases or watches (channels between jobs), no ptrace, mount,
   unshare, setns, bpf, io_uring, listmount, exec...;
6. wait for the task on stdin, write the submission into the job folder,
   and run the worker (``worker.run``) on it: it imports the file, then
   answers the calls that arrive on stdin.

The zygote watches each job through a pidfd; when it exits (the kernel has
then killed everything else in its pid namespace), the zygote reaps it,
makes sure the slot's cgroups are empty (``cgroup.kill`` for stragglers),
and only then writes the exit code on the status pipe: the slot's next job
starts clean. One fork per job, not two: an intermediate "keeper" process
cost about 5 ms of CPU per job (a fork and an exit of a 40 MiB process).

Nothing in this process ever held a secret: the grader's specs, reference
and expected values live only in the grader's process.
"""

import ctypes
import ctypes.util
import errno
import fcntl
import gc
import importlib.util
import json
import os
import platform
import resource
import select
import signal
import socket
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ZYGOTE_PID = os.getpid()

# Student code may import these; after the uid drop and Landlock, modules
# not imported yet may be unreadable, so they are imported here, once.
PREIMPORT = (
    "abc array base64 bisect calendar cmath collections collections.abc concurrent.futures "
    "concurrent.futures.thread contextlib copy csv dataclasses datetime decimal enum fnmatch fractions "
    "functools glob hashlib heapq io "
    "itertools json linecache logging math numbers operator pathlib pprint queue random re reprlib "
    "secrets statistics string struct textwrap threading time traceback types typing unittest warnings "
    "numpy numpy.linalg numpy.random numpy.fft numpy.ma numpy.polynomial numpy.testing numpy.typing "
    "numpy.lib.stride_tricks"
).split()

libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWCGROUP = 0x02000000
NAMESPACES = {"pid": CLONE_NEWPID, "mount": CLONE_NEWNS, "net": CLONE_NEWNET, "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS}

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 16384, 1 << 18

READONLY_RULES = []
"""(O_PATH fd, rights) of every read-only path, opened once by `main`."""

READONLY_PATHS = []
"""The paths of `READONLY_RULES`."""

ZYGOTE_PIDFD = -1
"""A pidfd of the zygote (readable once it has exited), inherited by jobs."""

OWN_PIDNS_FD = -1
"""The zygote's own pid namespace, to return to after forking a job into a new one."""

NET_NAMESPACE = "not set up"
"""True once the zygote is in a network namespace of its own, or why not. It has no interface up
(not even loopback) and jobs inherit it: a network namespace per job would cost about 1 ms of CPU
each (made, then torn down by the kernel), for nothing more, since jobs can open no socket but
socketpair() (seccomp) and reach no abstract socket outside their own Landlock domain."""

SLOT_CPU_PERIOD_US = 100_000
"""cpu.max period of a slot's cgroup (v2), in microseconds; the quota equals it (one CPU)."""

SLOT_CPU_SHARES = 110
"""cpu.shares of a slot's cpu cgroup: the weight of one task at nice 10 (the kernel's table)."""

JOB_NICE = 10
"""Jobs run at this nice value: when every core is busy, the grader and the zygote (which read
results, kill hung jobs and start the next ones) still get the CPU at once."""

UID_BASE = 61000
"""Worker slot k runs as uid and gid ``UID_BASE + k``."""

CGROUP_ROOT = "/sys/fs/cgroup"


def _check(result, what):
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def prctl(option, arg2=0, arg3=0, arg4=0, arg5=0):
    """libc ``prctl``; raises OSError (with errno) when it fails."""
    return _check(libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                             ctypes.c_ulong(arg4), ctypes.c_ulong(arg5)), f"prctl({option})")


# --- cgroups ----------------------------------------------------------------


def _own_cgroup(controller):
    """This process's cgroup path in a v1 controller, or '/' (v2: controller '')."""
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, names, path = line.rstrip("\n").split(":", 2)
                if controller in names.split(",") or (controller == "" and names == ""):
                    return path
    except OSError:
        pass
    return "/"


def cgroup_dirs(slot):
    """Cgroup folders of a worker slot that can exist here: {'pids':..., 'memory':..., 'cpu':..., 'kill':...}.

    The cpu cgroup gives each slot one equal share of the CPU, however many
    processes its job starts: without it, a job whose children each call
    ``setsid()`` gets a scheduler autogroup per child and can starve the
    job of the student graded beside it into timeouts.

    One set per slot (not per job) is made once and reused: a slot runs one
    job at a time, and making memory cgroups costs milliseconds.
    """
    dirs = {}
    name = f"grader-{ZYGOTE_PID}-slot{int(slot)}"
    for controller in ("pids", "memory", "cpu"):
        base = os.path.join(CGROUP_ROOT, controller)
        if os.path.isfile(os.path.join(base, "cgroup.procs")):
            dirs[controller] = os.path.join(base + _own_cgroup(controller).rstrip("/"), name)
    unified = os.path.join(CGROUP_ROOT, "unified")
    if not os.path.isfile(os.path.join(unified, "cgroup.procs")) and os.path.isfile(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
        unified = CGROUP_ROOT  # a pure v2 machine
    if os.path.isfile(os.path.join(unified, "cgroup.procs")):
        dirs["kill"] = os.path.join(unified + _own_cgroup("").rstrip("/"), name)
    return dirs


def cgroup_enter(slot, limits):
    """Move this process into the slot's cgroups (made on first use). Returns the layers applied."""
    applied = {}
    for name, path in cgroup_dirs(slot).items():
        try:
            if not os.path.isdir(path):
                os.makedirs(path, exist_ok=True)
                if name == "pids":
                    _write(os.path.join(path, "pids.max"), str(limits["pids"]))
                elif name == "memory":
                    _write(os.path.join(path, "memory.limit_in_bytes"), str(limits["memory_bytes"]))
                    try:
                        _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limits["memory_bytes"]))
                    except OSError:
                        pass
                elif name == "cpu":
                    # Across cgroups, group weights decide, not nice values: a slot weighs what
                    # one process at nice 10 does (JOB_NICE), so the grader still comes first.
                    _write(os.path.join(path, "cpu.shares"), str(SLOT_CPU_SHARES))
                    cpu_quota_one(path)
                elif name == "kill":
                    cpu_quota_one(path)
            if name == "kill" and not os.path.exists(os.path.join(path, "cgroup.kill")):
                applied[name] = "no cgroup.kill on this kernel"
                continue
            _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
            applied[name] = True
        except OSError as exc:
            applied[name] = f"not writable: {exc.strerror}"
    return applied


def cpu_quota_one(path):
    """Cap the cgroup at ``path`` at one CPU: its quota per period equals the period.

    With the cap, a job's CPU time never grows faster than wall-clock time
    (however many threads or processes it runs), so the grader, timing a
    call by the job's CPU time, may wait the CPU time left before looking
    again. v1: ``cpu.cfs_quota_us``; v2: ``cpu.max`` (only where the cpu
    controller is enabled for the cgroup; otherwise nothing is written).
    """
    try:
        if os.path.exists(os.path.join(path, "cpu.cfs_quota_us")):
            with open(os.path.join(path, "cpu.cfs_period_us")) as fh:
                period = int(fh.read())
            _write(os.path.join(path, "cpu.cfs_quota_us"), str(period))
        elif os.path.exists(os.path.join(path, "cpu.max")):
            _write(os.path.join(path, "cpu.max"), f"{SLOT_CPU_PERIOD_US} {SLOT_CPU_PERIOD_US}")
    except (OSError, ValueError):
        pass  # no cap: the grader still re-reads the CPU time before it times a call out


def cpu_stat_path(slot):
    """The slot's cgroup-v2 ``cpu.stat`` (``usage_usec``: CPU time of every process in it), or None.

    Every v2 cgroup has ``cpu.stat``, cpu controller or not. Jobs enter
    this cgroup only where it has ``cgroup.kill`` (`cgroup_enter`); where
    they do not, its count stays 0, which the grader takes as "unknown".
    """
    path = cgroup_dirs(slot).get("kill")
    return os.path.join(path, "cpu.stat") if path else None


def cgroup_kill(slot):
    """Kill every process left in the slot's cgroup (cgroup v2 ``cgroup.kill``)."""
    path = cgroup_dirs(slot).get("kill")
    if path and os.path.exists(os.path.join(path, "cgroup.kill")):
        try:
            _write(os.path.join(path, "cgroup.kill"), "1")
        except OSError:
            pass


def slot_processes(slot):
    """Pids still in the slot's cgroups (as seen from the zygote)."""
    pids = set()
    for path in cgroup_dirs(slot).values():
        try:
            with open(os.path.join(path, "cgroup.procs")) as fh:
                pids.update(fh.read().split())
        except OSError:
            pass
    return pids


def fork_retrying(timeout=3.0):
    """``os.fork()``, retried while it fails with EAGAIN or ENOMEM (bounded).

    A slot's cgroups are reused: the processes of the slot's previous job (a
    fork bomb's children) may still be leaving and count against
    ``pids.max`` (EAGAIN) and the memory limit (ENOMEM); failing here would
    fail an innocent submission.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.fork()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ENOMEM) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def cgroup_remove_stale():
    """Remove slot cgroups left by zygotes that died without cleaning up (``kill -9``)."""
    for path in cgroup_dirs(0).values():
        parent = os.path.dirname(path)
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if len(parts) != 3 or parts[0] != "grader" or not parts[1].isdigit() or not parts[2].startswith("slot"):
                continue
            if os.path.exists(f"/proc/{parts[1]}"):
                continue  # that zygote is alive
            stale = os.path.join(parent, name)
            if os.path.exists(os.path.join(stale, "cgroup.kill")):
                try:
                    _write(os.path.join(stale, "cgroup.kill"), "1")
                except OSError:
                    pass
            try:
                os.rmdir(stale)
            except OSError:
                pass


def cgroup_remove(slots):
    """Kill what is left and remove the slots' cgroup folders (when the zygote stops)."""
    for slot in slots:
        cgroup_kill(slot)
        for path in cgroup_dirs(slot).values():
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)  # killed processes are still leaving


def _write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# --- Landlock ---------------------------------------------------------------

SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
FS_TRUNCATE, FS_IOCTL_DEV = 1 << 14, 1 << 15
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi():
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    if platform.system() != "Linux":
        return 0
    version = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def _high_fd(fd):
    """Move ``fd`` to 10 or above (clear of fds 0-3, which a job dup2s over); close-on-exec."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def open_rules(paths, rights):
    """O_PATH descriptors and allowed rights for ``paths`` (made once, in the zygote)."""
    rules = []
    handled_fs = FS_RIGHTS_BY_ABI.get(landlock_abi(), FS_RIGHTS_BY_ABI[5])
    for path in paths:
        try:
            low = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        fd = _high_fd(low)
        rules.append((fd, rights if os.path.isdir(path) else rights & FILE_RIGHTS & handled_fs))
    return rules


def landlock_restrict(readonly_rules, readwrite):
    """Allow only the read-only rules and ``readwrite`` paths; deny TCP; scope signals.

    ``readonly_rules`` are ``(O_PATH fd, rights)`` pairs from `open_rules`.
    Returns a dict of the sub-layers applied. Raises OSError if Landlock is
    unavailable.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available on this kernel")
    handled_fs = FS_RIGHTS_BY_ABI.get(abi, FS_RIGHTS_BY_ABI[5])
    attr = _RulesetAttr(handled_fs, (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
                        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _check(libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                                  ctypes.c_uint32(0)), "landlock_create_ruleset")
    own = open_rules(readwrite, handled_fs)
    try:
        for fd, allowed in list(readonly_rules) + own:
            rule = _PathBeneathAttr(allowed, fd)
            _check(libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(1),
                                ctypes.byref(rule), ctypes.c_uint32(0)), "landlock_add_rule")
        _check(libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)
        for fd, _ in own:
            os.close(fd)
    return {"landlock": f"ABI {abi}", "landlock_tcp": abi >= 4, "landlock_scopes": abi >= 6}


def allowed_paths(numpy_module):
    """Read-only paths for jobs: the stdlib without site-packages, and numpy."""
    import sysconfig

    readonly = set()
    for key in ("stdlib", "platstdlib"):
        root = sysconfig.get_paths().get(key)
        if not root or not os.path.isdir(root):
            continue
        for entry in os.listdir(root):
            if entry in ("site-packages", "dist-packages"):
                continue
            readonly.add(os.path.join(root, entry))
    numpy_dir = os.path.dirname(os.path.abspath(numpy_module.__file__))
    readonly.add(numpy_dir)
    libs = numpy_dir + ".libs"  # vendored OpenBLAS of the numpy wheel
    if os.path.isdir(libs):
        readonly.add(libs)
    readonly.update(("/dev/urandom", "/proc/self", "/proc/cpuinfo", "/proc/meminfo"))
    return sorted(readonly)


# --- seccomp ----------------------------------------------------------------

AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000

ALLOWED_SYSCALLS_X86_64 = {
    0: "read", 1: "write", 2: "open", 3: "close", 4: "stat", 5: "fstat", 6: "lstat", 7: "poll", 8: "lseek",
    9: "mmap", 10: "mprotect", 11: "munmap", 12: "brk", 13: "rt_sigaction", 14: "rt_sigprocmask",
    15: "rt_sigreturn", 16: "ioctl", 17: "pread64", 18: "pwrite64", 19: "readv", 20: "writev", 21: "access",
    22: "pipe", 23: "select", 24: "sched_yield", 25: "mremap", 26: "msync", 28: "madvise", 32: "dup",
    33: "dup2", 34: "pause", 35: "nanosleep", 36: "getitimer", 37: "alarm", 38: "setitimer", 39: "getpid",
    40: "sendfile", 45: "recvfrom", 47: "recvmsg", 48: "shutdown", 51: "getsockname", 52: "getpeername",
    53: "socketpair", 54: "setsockopt", 55: "getsockopt", 60: "exit", 61: "wait4", 62: "kill", 63: "uname",
    74: "fsync", 75: "fdatasync", 76: "truncate", 77: "ftruncate", 78: "getdents", 79: "getcwd", 80: "chdir",
    81: "fchdir", 82: "rename", 83: "mkdir", 84: "rmdir", 85: "creat", 86: "link", 87: "unlink", 88: "symlink",
    89: "readlink", 90: "chmod", 91: "fchmod", 95: "umask", 96: "gettimeofday", 97: "getrlimit",
    98: "getrusage", 99: "sysinfo", 100: "times", 102: "getuid", 104: "getgid", 107: "geteuid", 108: "getegid",
    109: "setpgid", 110: "getppid", 111: "getpgrp", 112: "setsid", 115: "getgroups", 118: "getresuid",
    120: "getresgid", 121: "getpgid", 124: "getsid", 125: "capget", 127: "rt_sigpending",
    128: "rt_sigtimedwait", 129: "rt_sigqueueinfo", 130: "rt_sigsuspend", 131: "sigaltstack", 132: "utime",
    137: "statfs", 138: "fstatfs", 140: "getpriority", 141: "setpriority", 143: "sched_getparam",
    145: "sched_getscheduler", 146: "sched_get_priority_max", 147: "sched_get_priority_min",
    148: "sched_rr_get_interval", 157: "prctl", 158: "arch_prctl", 160: "setrlimit", 186: "gettid",
    187: "readahead", 191: "getxattr", 192: "lgetxattr", 193: "fgetxattr", 194: "listxattr", 195: "llistxattr",
    196: "flistxattr", 200: "tkill", 201: "time", 202: "futex", 203: "sched_setaffinity",
    204: "sched_getaffinity", 213: "epoll_create", 217: "getdents64", 218: "set_tid_address",
    219: "restart_syscall", 221: "fadvise64", 222: "timer_create", 223: "timer_settime", 224: "timer_gettime",
    225: "timer_getoverrun", 226: "timer_delete", 228: "clock_gettime", 229: "clock_getres",
    230: "clock_nanosleep", 231: "exit_group", 232: "epoll_wait", 233: "epoll_ctl", 234: "tgkill",
    235: "utimes", 247: "waitid", 257: "openat", 258: "mkdirat", 261: "futimesat", 262: "newfstatat",
    263: "unlinkat", 264: "renameat", 265: "linkat", 266: "symlinkat", 267: "readlinkat", 268: "fchmodat",
    269: "faccessat", 270: "pselect6", 271: "ppoll", 273: "set_robust_list", 277: "sync_file_range",
    280: "utimensat", 281: "epoll_pwait", 282: "signalfd", 283: "timerfd_create", 284: "eventfd",
    285: "fallocate", 286: "timerfd_settime", 287: "timerfd_gettime", 289: "signalfd4", 290: "eventfd2",
    291: "epoll_create1", 292: "dup3", 293: "pipe2", 295: "preadv", 296: "pwritev", 297: "rt_tgsigqueueinfo",
    299: "recvmmsg", 302: "prlimit64", 309: "getcpu", 315: "sched_getattr", 316: "renameat2", 318: "getrandom",
    324: "membarrier", 326: "copy_file_range", 327: "preadv2", 328: "pwritev2", 329: "pkey_mprotect",
    330: "pkey_alloc", 331: "pkey_free", 332: "statx", 334: "rseq", 424: "pidfd_send_signal", 434: "pidfd_open",
    436: "close_range", 437: "openat2", 439: "faccessat2", 441: "epoll_pwait2", 449: "futex_waitv",
    452: "fchmodat2", 453: "map_shadow_stack", 454: "futex_wake", 455: "futex_wait", 456: "futex_requeue",
    462: "mseal",
}
"""What a job may call (x86_64): what CPython, numpy (OpenBLAS on one thread), the worker, threads
and ``os.fork`` use, traced with ``strace -f`` on real jobs (the samples, a job using threads, numpy's
linear algebra and FFT, temporary files). Everything else is denied: `DENIED_SYSCALLS_X86_64` with
EPERM (a student reads "Operation not permitted"), `KILLED_SYSCALLS_X86_64` by killing the job, the
rest with ENOSYS (as for a system call this kernel lacks: libc and CPython fall back where they can)."""

ARGUMENT_CHECKED = {41: "socket", 44: "sendto", 56: "clone", 72: "fcntl", 435: "clone3"}
"""Allowed only with some arguments (see `seccomp_program`)."""

DENIED_SYSCALLS_X86_64 = {
    101: "ptrace", 103: "syslog", 135: "personality", 153: "vhangup", 155: "pivot_root", 159: "adjtimex",
    161: "chroot", 163: "acct", 164: "settimeofday", 165: "mount", 166: "umount2", 170: "sethostname",
    171: "setdomainname", 179: "quotactl", 212: "lookup_dcookie", 227: "clock_settime", 248: "add_key",
    249: "request_key", 250: "keyctl", 272: "unshare", 298: "perf_event_open", 303: "name_to_handle_at",
    304: "open_by_handle_at", 308: "setns", 310: "process_vm_readv", 311: "process_vm_writev", 312: "kcmp",
    321: "bpf", 323: "userfaultfd", 425: "io_uring_setup", 426: "io_uring_enter", 427: "io_uring_register",
    428: "open_tree", 429: "move_mount", 430: "fsopen", 431: "fsconfig", 432: "fsmount", 433: "fspick",
    438: "pidfd_getfd", 442: "mount_setattr", 443: "quotactl_fd", 457: "statmount", 458: "listmount",
    # Named UNIX sockets are not covered by Landlock or the net namespace: a job could reach a
    # world-writable socket of the machine. Jobs get socketpair() only: no connect, no sendmsg.
    42: "connect", 43: "accept", 46: "sendmsg", 49: "bind", 50: "listen", 288: "accept4", 307: "sendmmsg",
    # No other programs, no other ids.
    59: "execve", 322: "execveat", 105: "setuid", 106: "setgid", 113: "setreuid", 114: "setregid",
    116: "setgroups", 117: "setresuid", 119: "setresgid", 122: "setfsuid", 123: "setfsgid", 126: "capset",
    92: "chown", 93: "fchown", 94: "lchown", 260: "fchownat", 133: "mknod", 259: "mknodat",
    # Channels between jobs side by side, through files they all may read: locks, watches.
    73: "flock", 253: "inotify_init", 254: "inotify_add_watch", 294: "inotify_init1", 300: "fanotify_init",
    301: "fanotify_mark",
}
"""Denied with EPERM: what attacks try, with an error a student's code can report."""

KILLED_SYSCALLS_X86_64 = {
    167: "swapon", 168: "swapoff", 169: "reboot", 172: "iopl", 173: "ioperm", 175: "init_module",
    176: "delete_module", 246: "kexec_load", 313: "finit_module", 320: "kexec_file_load",
}
"""No code has a reason to try these: the job is killed (SIGSYS)."""

LOCK_COMMANDS = {5: "F_GETLK", 6: "F_SETLK", 7: "F_SETLKW", 36: "F_OFD_GETLK", 37: "F_OFD_SETLK",
                 38: "F_OFD_SETLKW", 1024: "F_SETLEASE", 1025: "F_GETLEASE", 1026: "F_NOTIFY"}
"""fcntl commands denied (EPERM): record locks, leases and directory notifications would let two jobs
side by side pass bits through a file both may read."""

SYS_SOCKET, SYS_SENDTO, SYS_CLONE, SYS_FCNTL, SYS_CLONE3 = 41, 44, 56, 72, 435
NAMESPACE_FLAGS = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP


def _bpf(code, k, jt=0, jf=0):
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def seccomp_program():
    """A BPF program (bytes) for x86_64: an allow-list, default deny.

    Order: any other architecture is killed, the x32 ABI denied; then the
    system calls allowed only with some arguments (`ARGUMENT_CHECKED`):
    ``socket`` for AF_UNIX only, ``sendto`` without an address, ``clone``
    without namespace flags, ``fcntl`` without lock, lease or notify
    commands (`LOCK_COMMANDS`), ``clone3`` never (ENOSYS: glibc falls back to
    ``clone``, whose flags a filter can read); then `ALLOWED_SYSCALLS_X86_64`,
    `DENIED_SYSCALLS_X86_64` (EPERM), `KILLED_SYSCALLS_X86_64`; anything
    else fails with ENOSYS.
    """
    LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
    eperm, enosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    prog = [
        _bpf(LD_W_ABS, 4),                       # arch
        _bpf(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        _bpf(RET_K, RET_KILL_PROCESS),
        _bpf(LD_W_ABS, 0),                       # syscall number
        _bpf(JGE_K, 0x40000000, 0, 1),           # x32 ABI
        _bpf(RET_K, eperm),
    ]
    prog += [_bpf(JEQ_K, SYS_CLONE3, 0, 1), _bpf(RET_K, enosys)]
    prog += [  # sendto with a destination address (a datagram to a named socket) is denied
        _bpf(JEQ_K, SYS_SENDTO, 0, 6),
        _bpf(LD_W_ABS, 48),                      # args[4]: dest_addr, low half
        _bpf(JEQ_K, 0, 0, 3),
        _bpf(LD_W_ABS, 52),                      # high half
        _bpf(JEQ_K, 0, 0, 1),
        _bpf(RET_K, RET_ALLOW),
        _bpf(RET_K, eperm),
    ]
    prog += [
        _bpf(JEQ_K, SYS_SOCKET, 0, 4),
        _bpf(LD_W_ABS, 16),                      # args[0]: the address family
        _bpf(JEQ_K, socket.AF_UNIX, 0, 1),
        _bpf(RET_K, RET_ALLOW),
        _bpf(RET_K, RET_ERRNO | errno.EAFNOSUPPORT),
        _bpf(JEQ_K, SYS_CLONE, 0, 4),
        _bpf(LD_W_ABS, 16),                      # args[0]: clone flags
        _bpf(JSET_K, NAMESPACE_FLAGS, 0, 1),
        _bpf(RET_K, eperm),
        _bpf(RET_K, RET_ALLOW),
    ]
    locks = [_bpf(LD_W_ABS, 24)]                 # args[1]: the fcntl command
    for cmd in sorted(LOCK_COMMANDS):
        locks += [_bpf(JEQ_K, cmd, 0, 1), _bpf(RET_K, eperm)]
    locks.append(_bpf(RET_K, RET_ALLOW))
    prog += [_bpf(JEQ_K, SYS_FCNTL, 0, len(locks))] + locks
    prog += [_bpf(LD_W_ABS, 0)]                  # the syscall number again
    # The tables are disjoint: the allowed come first, the most frequent of them (futex, reads and
    # writes, memory) at the front, so that an honest call goes through the fewest checks.
    hot = (202, 0, 1, 9, 11, 10, 28, 12, 3, 257, 262, 5, 8, 14, 13, 228, 7, 271)
    allowed = list(hot) + sorted(set(ALLOWED_SYSCALLS_X86_64) - set(hot))
    for table, action in (({nr: "" for nr in allowed}, RET_ALLOW), (DENIED_SYSCALLS_X86_64, eperm),
                          (KILLED_SYSCALLS_X86_64, RET_KILL_PROCESS)):
        for nr in table:
            prog += [_bpf(JEQ_K, nr, 0, 1), _bpf(RET_K, action)]
    prog.append(_bpf(RET_K, enosys))
    return b"".join(prog)


def seccomp_install():
    """Install the filter (after PR_SET_NO_NEW_PRIVS). Raises OSError where unsupported."""
    if platform.machine() not in ("x86_64", "AMD64"):
        raise OSError(errno.ENOSYS, f"no seccomp filter for {platform.machine()}")
    program = seccomp_program()
    buf = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)), "seccomp")


# --- a job ------------------------------------------------------------------


def set_rlimits(limits):
    """Apply a job's rlimits from ``limits``: CPU seconds, address space, file size, open files, processes; no core."""
    cpu = max(1, int(limits["cpu_seconds"]))
    for res, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),  # pid 1 ignores SIGXCPU: the hard limit's SIGKILL ends it
        (resource.RLIMIT_AS, (limits["address_space_bytes"],) * 2),
        (resource.RLIMIT_FSIZE, (limits["file_bytes"],) * 2),
        (resource.RLIMIT_NOFILE, (limits["open_files"],) * 2),
        (resource.RLIMIT_NPROC, (limits["processes"],) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(res, value)


JOB_FOLDER_CHOICES = ("/tmp", "/mnt", "/srv", "/media")
"""Where a job may see its folder, in order of preference (see `choose_job_folder`)."""

JOB_FOLDER = "/tmp"
"""Where a job sees its folder (its working folder, HOME and TMPDIR): a fixed path, so that
``getcwd()``, ``__file__`` and tracebacks show nothing of the grader's own temporary folder. A fresh
tmpfs is mounted there inside the job's mount namespace (the machine's folder is hidden from the job,
and from nothing else); the job then needs no path of the host at all, so a TMPDIR inside a folder
the job uids cannot enter (mode 0700) does not matter. Set by `main` with `choose_job_folder`: /tmp,
unless something jobs read (a virtual environment's numpy) lies under it; "" when every choice
clashes (the job folder then stays the grader's own)."""


def fixed_folder_clash(readonly, folder=None):
    """Why the job folder cannot be mounted at ``folder`` (a path jobs read lies under it), or ''."""
    folder = JOB_FOLDER if folder is None else folder
    if not folder:
        return f"every fixed folder ({', '.join(JOB_FOLDER_CHOICES)}) holds a path jobs read"
    for path in readonly:
        if path == folder or path.startswith(folder.rstrip("/") + "/"):
            return f"{path} (read by jobs) lies under {folder}"
    return ""


def choose_job_folder(readonly, choices=JOB_FOLDER_CHOICES):
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


def job_tmpfs(jobdir, uid, size):
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
    where = jobdir if not JOB_FOLDER or fixed_folder_clash(READONLY_PATHS) else JOB_FOLDER
    options = f"size={int(size)},nr_inodes=4096,mode=0700,uid={uid},gid={uid}".encode()
    _check(libc.mount(b"tmpfs", where.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options), f"mount tmpfs on {where}")
    os.chdir(where)  # the host's folder is now hidden beneath the tmpfs
    return where


def receive_task(request, read_exactly):
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
    task = json.loads(read_exactly(0, n_task) or b"null")
    source = read_exactly(0, n_source) if n_source else b""
    if not isinstance(task, dict) or source is None:
        os._exit(0)
    with open(request["file"], "wb") as fh:
        fh.write(source)
    cpu = max(1, int(task["cpu_seconds"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # lowering a limit needs no privilege
    return {"file": request["file"], "cpu_seconds": cpu}


def _move_job_folder(request, where):
    """Point the request and the environment at the job folder's new place; return it."""
    old = request["jobdir"]
    if where != old:
        request["jobdir"] = where
        request["file"] = os.path.join(where, os.path.relpath(request["file"], old))
        for key, value in list(os.environ.items()):
            if value == old:
                os.environ[key] = where
    return where


def isolate_job(request, layers):
    """Apply every layer inside the job (pid 1 of its namespaces). Records what applied.

    Moves the job folder to `JOB_FOLDER` (``request["jobdir"]`` and
    ``request["file"]`` are updated, and so are HOME and TMPDIR).
    """
    limits = request["limits"]
    uid = UID_BASE + int(request["slot"])
    jobdir = request["jobdir"]
    if layers.get("pid") is True and layers.get("mount") is True:
        try:
            _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
            _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
            layers["fresh_proc"] = True
        except OSError as exc:
            layers["fresh_proc"] = str(exc)
        if layers["fresh_proc"] is True:  # / is private now: the mount stays in the job's namespace
            try:
                where = job_tmpfs(jobdir, uid, limits["file_bytes"])
                layers["job_tmpfs"] = True
                layers["fixed_cwd"] = True if where == JOB_FOLDER else fixed_folder_clash(READONLY_PATHS)
                jobdir = _move_job_folder(request, where)
            except OSError as exc:
                layers["job_tmpfs"] = str(exc)
    layers.setdefault("fixed_cwd", layers.get("job_tmpfs", "no mount namespace"))
    if layers.get("uts") is True:
        socket.sethostname("grader-job")
    marks = layers.get("_marks", [])
    marks.append(("proc", time.perf_counter()))
    set_rlimits(limits)
    layers["rlimits"] = True
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    try:
        layers.update(landlock_restrict(READONLY_RULES, [jobdir, "/dev/null"]))
    except OSError as exc:
        layers["landlock"] = str(exc)
    marks.append(("landlock", time.perf_counter()))
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    layers["uid"] = os.geteuid()
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the uid change cleared it
    marks.append(("uid", time.perf_counter()))
    try:
        seccomp_install()
        layers["seccomp"] = layers["file_locks"] = True
    except OSError as exc:
        layers["seccomp"] = layers["file_locks"] = str(exc)
    marks.append(("seccomp", time.perf_counter()))


def _close_fds_from(lowest):
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = range(lowest, 1024)
    for fd in fds:
        if fd >= lowest:
            try:
                os.close(fd)
            except OSError:
                pass


REASON_FD = 4
"""In a job, until its student code runs: where a set-up failure's reason is written (read by the
zygote, which passes it to the grader with the exit code on the status pipe)."""

SETUP_FAILED = 70
"""A job's exit code when its set-up failed (the reason follows on the status pipe)."""


def _setup_reason(exc):
    """One line saying why a job's set-up failed: the exception and where in this file."""
    tb, line = exc.__traceback__, 0
    while tb is not None:
        tb, line = tb.tb_next, tb.tb_lineno
    text = f"{type(exc).__name__}: {exc} (zygote.py, line {line})"
    return "".join(c if c.isprintable() else " " for c in text)[:400]


def job(request, fds, control_fd, worker, layers, reason_fd=-1):
    """The job itself, just forked: pid 1 of its pid namespace when there is one.

    ``layers`` already says whether the pid namespace applied. If set-up
    fails, the reason goes to ``reason_fd`` (moved to `REASON_FD`, closed
    before the submission is run, so student code cannot write there) and
    the job exits with `SETUP_FAILED`. Never returns.
    """
    try:
        os.setsid()
        os.nice(JOB_NICE)
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if select.select([ZYGOTE_PIDFD], [], [], 0)[0]:
            os._exit(1)  # the zygote died before the death signal was armed
        os.close(control_fd)
        marks = [("start", time.perf_counter())]
        layers.update(cgroup_enter(request["slot"], request["limits"]))
        marks.append(("cgroups", time.perf_counter()))
        layers["_marks"] = marks
        layers["net"] = NET_NAMESPACE  # the zygote's own, empty: made once, not per job
        for name, flag in NAMESPACES.items():
            if flag in (CLONE_NEWPID, CLONE_NEWNET):
                continue
            layers[name] = True if libc.unshare(flag) == 0 else os.strerror(ctypes.get_errno())
        marks.append(("namespaces", time.perf_counter()))
        result_fd, out_fd, err_fd, task_fd = fds
        os.dup2(task_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.dup2(result_fd, 3)
        if reason_fd >= 0:
            os.dup2(reason_fd, REASON_FD)  # reason_fd is 10 or above (`fork_job`)
            reason_fd = REASON_FD
        os.chdir(request["jobdir"])
        os.environ.clear()
        os.environ.update(request["env"])
        isolate_job(request, layers)  # uses the zygote's O_PATH descriptors, closed next
        _close_fds_from(REASON_FD + 1)
        if request.get("probe"):
            marks = layers.pop("_marks")
            layers["setup_ms"] = {b[0]: round((b[1] - a[1]) * 1000, 2) for a, b in zip(marks, marks[1:])}
            worker._emit(3, {"event": "probe", "layers": layers})
            os._exit(0)
        if not str(layers.get("landlock", "")).startswith("ABI") or layers.get("uid") == 0:
            # Fail closed: student code never runs without the filesystem allow-list, or as root.
            raise OSError(errno.EPERM, f"a required layer did not apply (landlock: {layers.get('landlock')}, "
                                       f"uid: {layers.get('uid')})")
        task = receive_task(request, worker._read_exactly)
        if reason_fd >= 0:
            os.close(reason_fd)  # before any student code runs
            reason_fd = -1
        sys.argv = [task["file"]]  # as if run as a script: the zygote's path (the grader's install) is not shown
        worker.run(task, 3)
    except BaseException as exc:  # the worker never returns; anything here is a setup failure
        try:
            reason = _setup_reason(exc)
            os.write(2, f"sandbox setup failed: {reason}\n".encode())
            if reason_fd >= 0:
                os.write(reason_fd, reason.encode())
        finally:
            os._exit(SETUP_FAILED)


def fork_job(request, fds, control_fd, worker):
    """Fork one job as pid 1 of a new pid namespace (when possible).

    Returns
    -------
    (int, int)
        The job's pid, and the read end of its set-up reason pipe (see `job`).
    """
    layers = {}
    own_pidns = None
    reason_read, reason_write = os.pipe()
    reason_write = _high_fd(reason_write)
    os.set_blocking(reason_read, False)
    if libc.unshare(CLONE_NEWPID) == 0:
        layers["pid"] = True
        own_pidns = OWN_PIDNS_FD
    else:
        layers["pid"] = os.strerror(ctypes.get_errno())
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
            _check(libc.setns(own_pidns, CLONE_NEWPID), "setns back to the zygote's pid namespace")
    if pid == 0:
        os.close(reason_read)
        job(request, fds[:3] + fds[4:5], control_fd, worker, layers, reason_write)
    return pid, reason_read


class Running:
    """A job the zygote watches: its pidfd, slot and status pipe."""

    def __init__(self, job_id, pid, slot, status_fd, reason_fd=-1):
        self.id, self.pid, self.slot, self.status_fd = job_id, pid, slot, status_fd
        self.reason_fd = reason_fd  # why its set-up failed, if it did (see `job`)
        self.reason = ""
        self.pidfd = os.pidfd_open(pid)
        self.code = None          # exit code, once reaped
        self.deadline = None      # when stragglers in the slot are killed one by one

    def reap(self):
        """Collect the exited job; return True once it is reaped."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, 0
        if pid == 0:
            return False
        self.code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else (
            os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
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

    def settled(self):
        """Whether the slot's cgroups are empty (stragglers are killed); then report the exit code."""
        left = slot_processes(self.slot)
        if left:
            if time.monotonic() < self.deadline:
                cgroup_kill(self.slot)
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


def _read_request(sock):
    """One request line and its file descriptors; (None, []) when the grader is gone."""
    msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 5)
    if not msg:
        return None, fds
    buffer = msg
    while not buffer.endswith(b"\n"):
        more = sock.recv(1 << 16)
        if not more:
            return None, fds
        buffer += more
    return json.loads(buffer), fds


def serve(control_fd, worker):
    """Answer requests on the control socket, and settle finished jobs, until the socket closes."""
    sock = socket.socket(fileno=control_fd)
    running = {}      # job id -> Running
    settling = []     # reaped jobs whose slot is not empty yet
    slots = set()
    poller = select.poll()
    poller.register(control_fd, select.POLLIN)
    by_pidfd = {}
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
                cgroup_remove(slots)
                return
            op = request.get("op")
            if op == "launch":
                slot = int(request["slot"])
                slots.add(slot)
                try:
                    pid, reason_fd = fork_job(request, fds, control_fd, worker)
                    job_ = Running(request["job"], pid, slot, fds[3], reason_fd)
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
                    reply = {"pid": pid, "cpu_stat": cpu_stat_path(slot)}
                    socket.send_fds(sock, [json.dumps(reply).encode() + b"\n"], [job_.pidfd])
                    continue
            elif op == "kill":
                job_ = running.get(request["job"])
                if job_ is not None:
                    _kill(job_)  # its pidfd reports the exit; the status follows once the slot is empty
                reply = {"ok": True}
            elif op == "ping":
                reply = {"pid": os.getpid()}
            else:
                reply = {"error": f"unknown op {op!r}"}
            sock.sendall(json.dumps(reply).encode() + b"\n")
        settling = [job_ for job_ in settling if not job_.settled()]


def _kill(job_):
    """Kill a job; being pid 1 of its namespace, it takes everything it started along."""
    try:
        signal.pidfd_send_signal(job_.pidfd, signal.SIGKILL)
    except (ProcessLookupError, OSError):
        pass
    cgroup_kill(job_.slot)


def main(argv):
    """Script entry: ``zygote.py CONTROL_FD``; import numpy and the pre-imported modules, then `serve`."""
    control_fd = int(argv[1])
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:
        os._exit(1)
    spec = importlib.util.spec_from_file_location("_grader_worker", os.path.join(HERE, "worker.py"))
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    for name in PREIMPORT:
        try:
            __import__(name)
        except ImportError:
            pass
    import numpy

    cgroup_remove_stale()
    readonly = allowed_paths(numpy)
    global READONLY_RULES, READONLY_PATHS, ZYGOTE_PIDFD, OWN_PIDNS_FD, NET_NAMESPACE, JOB_FOLDER
    NET_NAMESPACE = True if libc.unshare(CLONE_NEWNET) == 0 else os.strerror(ctypes.get_errno())
    READONLY_RULES = open_rules(readonly, FS_EXECUTE | FS_READ_FILE | FS_READ_DIR)
    READONLY_PATHS = readonly
    JOB_FOLDER = choose_job_folder(readonly)
    ZYGOTE_PIDFD = _high_fd(os.pidfd_open(os.getpid()))
    OWN_PIDNS_FD = _high_fd(os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC))
    # Move everything imported so far out of the collector's reach: a job's
    # garbage collection would otherwise write to every object's header and
    # copy the zygote's whole heap, page by page, into each forked job.
    gc.collect()
    gc.freeze()
    sock = socket.socket(fileno=os.dup(control_fd))
    sock.sendall(json.dumps({"ready": True, "pid": os.getpid(), "readonly": readonly, "job_folder": JOB_FOLDER,
                             "landlock_abi": landlock_abi()}).encode() + b"\n")
    sock.detach()
    serve(control_fd, worker)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
