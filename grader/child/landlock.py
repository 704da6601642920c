"""Landlock, for the sandbox child: the filesystem allow-list, TCP denial, signal and socket scopes.

A job may read the standard library (not its site-packages) and numpy, and
read and write its own folder; nothing else (`allowed_paths`,
`landlock_restrict`). From ABI 4, TCP bind and connect are denied; from
ABI 6, abstract UNIX sockets and signals are scoped to the job. The
read-only paths are opened once, in the zygote (`open_rules`), and every
job adds them to its own ruleset: about 210 rules, one per entry of the
standard library's folder, or, where the zygote could cover that folder's
site-packages with an empty mount (`whole_roots`, `covered_view_is_sole`),
one rule for the whole folder (`compact_paths`).

Part of the sandbox child (``grader/child``), loaded by path by the zygote
(see the package's docstring): it imports only the standard library.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import re
from collections.abc import Iterable, Sequence
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


@functools.cache
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


def _ruleset_attr(abi: int) -> tuple[_RulesetAttr, int]:
    """The ruleset attribute for ``abi`` (every filesystem right it knows handled; TCP; scopes) and its size."""
    attr = _RulesetAttr(
        FS_RIGHTS_BY_ABI.get(abi, FS_RIGHTS_BY_ABI[5]),
        (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    return attr, ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)


def make_ruleset(rules: Iterable[Rule], abi: int | None = None, built: Sequence[_PathBeneathAttr] = ()) -> int:
    """A new Landlock ruleset allowing only ``rules`` (``(O_PATH fd, rights)`` pairs); its descriptor.

    ``built`` are more rules, already made by `built_rules`.
    Everything the kernel's ABI can handle is handled (denied unless a rule
    allows it): every filesystem right, TCP bind and connect (ABI 4), and
    the abstract UNIX socket and signal scopes (ABI 6). The descriptor is
    close-on-exec. Raises OSError if Landlock is unavailable or a rule is
    refused.
    """
    abi = landlock_abi() if abi is None else abi
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available on this kernel")
    attr, size = _ruleset_attr(abi)
    ruleset = check(
        libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
        "landlock_create_ruleset",
    )
    try:
        ruleset_c, path_beneath, no_flags = ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.c_uint32(0)
        for rule in [*built, *(_PathBeneathAttr(allowed, fd) for fd, allowed in rules)]:
            check(
                libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset_c, path_beneath, ctypes.byref(rule), no_flags),
                "landlock_add_rule",
            )
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def sublayers(abi: int) -> dict[str, bool | str]:
    """What a ruleset of `make_ruleset` applies on a kernel of Landlock ``abi``, as the probe reports it."""
    return {"landlock": f"ABI {abi}", "landlock_tcp": abi >= 4, "landlock_scopes": abi >= 6}


def restrict_self(ruleset: int) -> None:
    """Enforce the ruleset ``ruleset`` (from `make_ruleset`) on this process and all it starts, for good.

    Needs ``PR_SET_NO_NEW_PRIVS`` (or CAP_SYS_ADMIN). A ruleset holding the
    job folder is made in each job: Landlock skips mount points as it walks
    up from a file, so no rule outside the job's own tmpfs covers it.
    """
    check(
        libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
        "landlock_restrict_self",
    )


def landlock_restrict(readonly_rules: Iterable[Rule], readwrite: Iterable[str]) -> dict[str, bool | str]:
    """Allow only the read-only rules and ``readwrite`` paths; deny TCP; scope signals.

    ``readonly_rules`` are ``(O_PATH fd, rights)`` pairs from `open_rules`.
    Returns a dict of the sub-layers applied. Raises OSError if Landlock is
    unavailable.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available on this kernel")
    own = open_rules(readwrite, FS_RIGHTS_BY_ABI.get(abi, FS_RIGHTS_BY_ABI[5]))
    try:
        ruleset = make_ruleset(own, abi, built_rules(tuple(readonly_rules)))
    finally:
        for fd, _ in own:
            os.close(fd)
    try:
        restrict_self(ruleset)
    finally:
        os.close(ruleset)
    return sublayers(abi)


class _Prepared:
    """Everything `job_restrict` needs but the job's own folder, made once by `prepare_job`."""

    def __init__(self, rules: list[Rule], abi: int) -> None:
        self.rules = rules
        self.rights = FS_RIGHTS_BY_ABI.get(abi, FS_RIGHTS_BY_ABI[5])  # of the job's own folder
        self.attr, size = _ruleset_attr(abi)
        self.built = built_rules(tuple(rules))
        self.create = (SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(self.attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        self.references = [ctypes.byref(rule) for rule in self.built]
        self.path_beneath, self.no_flags = ctypes.c_int(1), ctypes.c_uint32(0)
        self.applied = sublayers(abi)


_JOB_PREPARED: list[_Prepared] = []
"""Made by `prepare_job` in the zygote (one at most)."""


def prepare_job(readonly_rules: list[Rule]) -> None:
    """In the zygote: make every structure and argument of `job_restrict` for ``readonly_rules``, once.

    A job then runs a few system calls and little Python: each object it
    creates or touches is a page it copies from the zygote's (about 2 µs
    each). Where Landlock is unavailable nothing is made (`job_restrict`
    then says so, as `landlock_restrict` does).
    """
    _JOB_PREPARED.clear()
    abi = landlock_abi()
    if abi >= 1:
        _JOB_PREPARED.append(_Prepared(readonly_rules, abi))


def job_restrict(readonly_rules: list[Rule], folder: str) -> dict[str, bool | str]:
    """`landlock_restrict` (``readonly_rules``, ``[folder]``) for a job, with what `prepare_job` made.

    Falls back to `landlock_restrict` for rules it did not prepare.
    """
    if not _JOB_PREPARED or _JOB_PREPARED[0].rules is not readonly_rules:
        return landlock_restrict(readonly_rules, [folder])
    made = _JOB_PREPARED[0]
    ruleset = check(libc.syscall(*made.create), "landlock_create_ruleset")
    try:
        ruleset_c = ctypes.c_int(ruleset)
        try:
            fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            fd = -1  # as `open_rules`: a path that cannot be opened gets no rule
        try:
            own = [ctypes.byref(_PathBeneathAttr(made.rights, fd))] if fd >= 0 else []
            for rule in made.references + own:
                check(
                    libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset_c, made.path_beneath, rule, made.no_flags),
                    "landlock_add_rule",
                )
        finally:
            if fd >= 0:
                os.close(fd)
        restrict_self(ruleset)
    finally:
        os.close(ruleset)
    return dict(made.applied)


COVERED_NAMES = ("site-packages", "dist-packages")
"""The entries of a standard-library folder that jobs never read (third-party packages, the grader)."""


def stdlib_roots() -> list[str]:
    """The standard library's folders (``stdlib`` and ``platstdlib``; one in a plain install, two in a venv)."""
    import sysconfig

    roots: list[str] = []
    for key in ("stdlib", "platstdlib"):
        root = sysconfig.get_paths().get(key)
        if root and os.path.isdir(root) and root not in roots:
            roots.append(root)
    return roots


def allowed_paths(numpy_module: ModuleType) -> list[str]:
    """Read-only paths for jobs: the stdlib without site-packages, and numpy."""
    readonly = set()
    for root in stdlib_roots():
        for entry in os.listdir(root):
            if entry in COVERED_NAMES:
                continue
            readonly.add(os.path.join(root, entry))
    numpy_dir = os.path.dirname(os.path.abspath(str(numpy_module.__file__)))
    readonly.add(numpy_dir)
    libs = numpy_dir + ".libs"  # vendored OpenBLAS of the numpy wheel
    if os.path.isdir(libs):
        readonly.add(libs)
    readonly.update(("/dev/urandom", "/proc/self", "/proc/cpuinfo", "/proc/meminfo"))
    return sorted(readonly)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def whole_roots(readonly: Iterable[str], keep: Iterable[str]) -> dict[str, list[str]] | str:
    """The standard-library folders of ``readonly`` that one rule could allow whole, each with what to cover.

    A folder qualifies when ``readonly`` holds entries of it (`allowed_paths`
    made them) and its `COVERED_NAMES` entries are real folders, not links;
    these are to be covered by an empty mount first (`covered_view_is_sole`
    then checks the view). Returns ``{folder: [folders to cover]}``, or why
    not: a path of ``keep`` (numpy, the zygote's own files: what the zygote
    or its jobs read after start) lies under a folder to cover.
    """
    readonly = list(readonly)
    roots: dict[str, list[str]] = {}
    for root in stdlib_roots():
        if not any(os.path.dirname(path) == root for path in readonly):
            continue
        covered = [os.path.join(root, name) for name in COVERED_NAMES if os.path.lexists(os.path.join(root, name))]
        for folder in covered:
            if os.path.islink(folder) or not os.path.isdir(folder):
                return f"{folder} is not a plain folder"
            for path in keep:
                if _under(os.path.realpath(path), os.path.realpath(folder)):
                    return f"{path} lies under {folder}"
        roots[root] = covered
    return roots if roots else "no standard-library folder to allow whole"


def compact_paths(readonly: Iterable[str], roots: Iterable[str]) -> list[str]:
    """``readonly`` with the entries of each of ``roots`` replaced by the folder itself.

    An entry that is a link leading out of its folder keeps its own rule
    (`open_rules` follows it: the rule is on its target), as before.
    """
    roots = list(roots)
    paths = set(roots)
    for path in readonly:
        root = next((r for r in roots if os.path.dirname(path) == r), None)
        if root is None or (os.path.islink(path) and not _under(os.path.realpath(path), os.path.realpath(root))):
            paths.add(path)
    return sorted(paths)


def _unescape(field: str) -> str:
    """A path of ``/proc/self/mountinfo``: spaces, tabs, newlines and backslashes are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def covered_view_is_sole(root: str, covered: Iterable[str], mountinfo: str | None = None) -> str:
    """Why one rule on ``root`` could let a job read more than its entries and the ``covered`` mounts, or ''.

    Landlock allows a rule's folder by inode, through every path that leads
    to it. One rule on ``root`` (once its `COVERED_NAMES` folders are
    covered by empty mounts) allows no more than a rule per entry only if
    ``root`` is seen through one mount alone in this mount namespace (no
    bind mount shows it, or a folder above it, elsewhere, where its
    site-packages is not covered), and nothing but ``covered`` is mounted
    beneath it. ``mountinfo`` is ``/proc/self/mountinfo``'s text (read when
    None).
    """
    if mountinfo is None:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
            mountinfo = fh.read()
    real = os.path.realpath(root)
    dev = os.stat(real).st_dev
    device = f"{os.major(dev)}:{os.minor(dev)}"
    mounts = []  # (device, root in its file system, mount point)
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            return "unreadable mountinfo"
        mounts.append((fields[2], _unescape(fields[3]), _unescape(fields[4])))
    covered = {os.path.realpath(folder) for folder in covered}
    beneath = {point for _, _, point in mounts if _under(point, real) and point != real} - covered
    if beneath:
        return f"{sorted(beneath)[0]} is mounted beneath {root}"
    seen = [(fs_root, point) for dev_, fs_root, point in mounts if dev_ == device and _under(real, point)]
    if not seen:
        return f"no mount of {root}'s file system ({device}) found"
    fs_root, point = max(seen, key=lambda m: len(m[1]))  # the mount that shows root here
    inside = os.path.normpath(fs_root.rstrip("/") + "/" + os.path.relpath(real, point))
    views = [m for m in mounts if m[0] == device and _under(inside, m[1])]
    if len(views) != 1:
        return f"{root} is seen through {len(views)} mounts"
    return ""
