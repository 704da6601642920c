"""Landlock, for the sandbox child: the filesystem allow-list, TCP denial, signal and socket scopes.

A job may read the standard library (not its site-packages) and numpy, and
read and write its own folder; nothing else (`allowed_paths`,
`landlock_restrict`). From ABI 4, TCP bind and connect are denied; from
ABI 6, abstract UNIX sockets and signals are scoped to the job. The
read-only paths are opened once, in the zygote (`open_rules`), and every
job adds them to its own ruleset.

Part of the sandbox child (``grader/child``), loaded by path by the zygote
(see the package's docstring): it imports only the standard library.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from collections.abc import Iterable
from types import ModuleType

from .kernel import check, high_fd, libc

SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
FS_TRUNCATE, FS_IOCTL_DEV = 1 << 14, 1 << 15
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READONLY_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
"""What a job may do with the read-only paths (the standard library, numpy)."""
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

Rule = tuple[int, int]
"""An O_PATH descriptor and the rights allowed beneath it."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    if platform.system() != "Linux":
        return 0
    version = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def open_rules(paths: Iterable[str], rights: int) -> list[Rule]:
    """O_PATH descriptors and allowed rights for ``paths`` (made once, in the zygote)."""
    rules = []
    handled_fs = FS_RIGHTS_BY_ABI.get(landlock_abi(), FS_RIGHTS_BY_ABI[5])
    for path in paths:
        try:
            low = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        fd = high_fd(low)
        rules.append((fd, rights if os.path.isdir(path) else rights & FILE_RIGHTS & handled_fs))
    return rules


_BUILT_RULES: dict[tuple[Rule, ...], list[_PathBeneathAttr]] = {}


def built_rules(rules: tuple[Rule, ...]) -> list[_PathBeneathAttr]:
    """The ``landlock_path_beneath_attr`` of each rule, made once (the zygote's read-only rules, which jobs inherit)."""
    built = _BUILT_RULES.get(rules)
    if built is None:
        built = _BUILT_RULES.setdefault(rules, [_PathBeneathAttr(allowed, fd) for fd, allowed in rules])
    return built


def landlock_restrict(readonly_rules: Iterable[Rule], readwrite: Iterable[str]) -> dict[str, bool | str]:
    """Allow only the read-only rules and ``readwrite`` paths; deny TCP; scope signals.

    ``readonly_rules`` are ``(O_PATH fd, rights)`` pairs from `open_rules`.
    Returns a dict of the sub-layers applied. Raises OSError if Landlock is
    unavailable.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available on this kernel")
    handled_fs = FS_RIGHTS_BY_ABI.get(abi, FS_RIGHTS_BY_ABI[5])
    attr = _RulesetAttr(
        handled_fs,
        (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = check(
        libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
        "landlock_create_ruleset",
    )
    own = open_rules(readwrite, handled_fs)
    try:
        ruleset_c, path_beneath, no_flags = ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.c_uint32(0)
        for rule in built_rules(tuple(readonly_rules)) + [_PathBeneathAttr(allowed, fd) for fd, allowed in own]:
            check(
                libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset_c, path_beneath, ctypes.byref(rule), no_flags),
                "landlock_add_rule",
            )
        check(
            libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
            "landlock_restrict_self",
        )
    finally:
        os.close(ruleset)
        for fd, _ in own:
            os.close(fd)
    return {"landlock": f"ABI {abi}", "landlock_tcp": abi >= 4, "landlock_scopes": abi >= 6}


def allowed_paths(numpy_module: ModuleType) -> list[str]:
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
    numpy_dir = os.path.dirname(os.path.abspath(str(numpy_module.__file__)))
    readonly.add(numpy_dir)
    libs = numpy_dir + ".libs"  # vendored OpenBLAS of the numpy wheel
    if os.path.isdir(libs):
        readonly.add(libs)
    readonly.update(("/dev/urandom", "/proc/self", "/proc/cpuinfo", "/proc/meminfo"))
    return sorted(readonly)
