"""seccomp, for the sandbox child: the system-call allow-list, a raw BPF program (x86_64).

Default deny: the calls CPython, numpy and the worker need are allowed
(`ALLOWED_SYSCALLS_X86_64`, traced on real jobs); attack calls fail with
EPERM (`DENIED_SYSCALLS_X86_64`), a few kill the job
(`KILLED_SYSCALLS_X86_64`), anything else fails with ENOSYS; sockets are
AF_UNIX only, ``sendto`` takes no address, ``clone`` no namespace flag, and
``fcntl`` no lock, lease or notify command (`seccomp_program`). Built with
``struct`` and installed with ``prctl``: no dependency.

Part of the sandbox child (``grader/child``), loaded by path by the zygote
(see the package's docstring): it imports only the standard library.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import socket
import struct

from .kernel import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    PR_SET_SECCOMP,
    SECCOMP_MODE_FILTER,
    check,
    libc,
)

# The tables are kept as written, a few numbers a line (not one a line, as the formatter would).
# fmt: off
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

# fmt: on
SYS_SOCKET, SYS_SENDTO, SYS_CLONE, SYS_FCNTL, SYS_CLONE3 = 41, 44, 56, 72, 435
NAMESPACE_FLAGS = (
    CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP
)


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _runs(eperm: int, enosys: int) -> list[tuple[int, int | str]]:
    """The system-call numbers from 0 up, as runs of one outcome: ``(first number, outcome)`` each.

    An outcome is a filter return value, or the name of a system call whose
    arguments are checked (`ARGUMENT_CHECKED`; ``clone3`` always fails with
    ENOSYS). The last run, past the highest number named, fails with ENOSYS.
    """
    outcome: dict[int, int | str] = {}
    for table, action in (
        (ALLOWED_SYSCALLS_X86_64, RET_ALLOW),
        (DENIED_SYSCALLS_X86_64, eperm),
        (KILLED_SYSCALLS_X86_64, RET_KILL_PROCESS),
    ):
        outcome.update(dict.fromkeys(table, action))
    outcome.update({nr: name for nr, name in ARGUMENT_CHECKED.items() if nr != SYS_CLONE3})
    runs: list[tuple[int, int | str]] = []
    for nr in range(max(outcome) + 2):
        here = outcome.get(nr, enosys)
        if not runs or runs[-1][1] != here:
            runs.append((nr, here))
    return runs


def seccomp_program() -> bytes:
    """A BPF program (bytes) for x86_64: an allow-list, default deny.

    Order: any other architecture is killed, the x32 ABI denied; then the
    system call's number is looked up in a binary tree of the runs of
    numbers with one outcome (`_runs`: about 140 runs, 8 comparisons deep,
    where a list of one comparison per number took up to 300): allowed
    (`ALLOWED_SYSCALLS_X86_64`), EPERM (`DENIED_SYSCALLS_X86_64`), killed
    (`KILLED_SYSCALLS_X86_64`), ENOSYS (anything else, and ``clone3``:
    glibc falls back to ``clone``, whose flags a filter can read), or one of
    the argument checks that follow the tree (`ARGUMENT_CHECKED`):
    ``socket`` for AF_UNIX only, ``sendto`` without an address, ``clone``
    without namespace flags, ``fcntl`` without lock, lease or notify
    commands (`LOCK_COMMANDS`). The kernel runs the program on every
    system call it cannot answer from its cache, and at install emulates it
    for every number to fill that cache: a short tree costs a job about a
    quarter of the CPU a list did to install.
    """
    LD_W_ABS, JA, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x05, 0x15, 0x35, 0x45, 0x06
    eperm, enosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    head = [
        _bpf(LD_W_ABS, 4),  # arch
        _bpf(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        _bpf(RET_K, RET_KILL_PROCESS),
        _bpf(LD_W_ABS, 0),  # syscall number
        _bpf(JGE_K, 0x40000000, 0, 1),  # x32 ABI
        _bpf(RET_K, eperm),
    ]
    locks = [_bpf(LD_W_ABS, 24)]  # args[1]: the fcntl command
    for cmd in sorted(LOCK_COMMANDS):
        locks += [_bpf(JEQ_K, cmd, 0, 1), _bpf(RET_K, eperm)]
    locks.append(_bpf(RET_K, RET_ALLOW))
    checks = {
        "sendto": [  # with a destination address (a datagram to a named socket): denied
            _bpf(LD_W_ABS, 48),  # args[4]: dest_addr, low half
            _bpf(JEQ_K, 0, 0, 3),
            _bpf(LD_W_ABS, 52),  # high half
            _bpf(JEQ_K, 0, 0, 1),
            _bpf(RET_K, RET_ALLOW),
            _bpf(RET_K, eperm),
        ],
        "socket": [
            _bpf(LD_W_ABS, 16),  # args[0]: the address family
            _bpf(JEQ_K, socket.AF_UNIX, 0, 1),
            _bpf(RET_K, RET_ALLOW),
            _bpf(RET_K, RET_ERRNO | errno.EAFNOSUPPORT),
        ],
        "clone": [
            _bpf(LD_W_ABS, 16),  # args[0]: clone flags
            _bpf(JSET_K, NAMESPACE_FLAGS, 0, 1),
            _bpf(RET_K, eperm),
            _bpf(RET_K, RET_ALLOW),
        ],
        "fcntl": locks,
    }
    runs = _runs(eperm, enosys)
    tree_end = len(head) + 2 * len(runs) - 1  # one comparison per run but the first, one leaf per run
    check_at, at = {}, tree_end
    for name, code in checks.items():  # the checks follow the tree, in this order
        check_at[name], at = at, at + len(code)
    tree: list[bytes] = []

    def emit(lo: int, hi: int) -> None:  # runs[lo:hi], the syscall number in A
        if hi - lo == 1:
            action = runs[lo][1]
            here = len(head) + len(tree)
            tree.append(_bpf(RET_K, action) if isinstance(action, int) else _bpf(JA, check_at[action] - here - 1))
            return
        mid = (lo + hi) // 2
        node = len(tree)
        tree.append(b"")
        emit(lo, mid)
        skip = len(tree) - node - 1  # past the lower half, to the upper one
        if skip > 255:
            raise ValueError("seccomp tree too deep for a conditional jump")
        tree[node] = _bpf(JGE_K, runs[mid][0], skip, 0)
        emit(mid, hi)

    emit(0, len(runs))
    assert len(head) + len(tree) == tree_end
    return b"".join(head + tree + [instruction for code in checks.values() for instruction in code])


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_BUILT: list[tuple[ctypes.Array[ctypes.c_char], _SockFprog]] = []
"""The program and its ``sock_fprog``, built once (in the zygote, by `prepare`; jobs inherit them)."""


def prepare() -> None:
    """Build the filter once, so that each job only installs it (building it is pure Python work)."""
    if not _BUILT and platform.machine() in ("x86_64", "AMD64"):
        program = seccomp_program()
        buf = ctypes.create_string_buffer(program, len(program))
        _BUILT.append((buf, _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))))


def seccomp_install() -> None:
    """Install the filter (after PR_SET_NO_NEW_PRIVS). Raises OSError where unsupported."""
    if not _BUILT:  # not built in the zygote (`prepare`): only on x86_64 is there a filter
        if platform.machine() not in ("x86_64", "AMD64"):
            raise OSError(errno.ENOSYS, f"no seccomp filter for {platform.machine()}")
        prepare()
    fprog = _BUILT[0][1]
    check(
        libc.prctl(
            PR_SET_SECCOMP,
            ctypes.c_ulong(SECCOMP_MODE_FILTER),
            ctypes.byref(fprog),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        ),
        "seccomp",
    )
