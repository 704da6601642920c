"""A worker slot's cgroups, for the sandbox child: pids, memory, cpu (one CPU at most), kill.

Each worker slot has one set of cgroups, made on first use and reused by
every job of the slot (making memory cgroups costs milliseconds): v1
``pids`` (fork bombs), ``memory`` (memory bombs), ``cpu`` (an equal share,
capped at one CPU, so a job's many processes cannot starve the job graded
beside it), and the v2 cgroup for ``cgroup.kill`` and ``cpu.stat`` (the CPU
time the grader's call timeouts count). A job moves itself in
(`cgroup_enter`); the zygote empties and removes them.

Part of the sandbox child (``grader/child``), loaded by path by the zygote
(see the package's docstring): it imports only the standard library.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterable

from . import limits as shared
from .kernel import high_fd

ZYGOTE_PID = os.getpid()
"""The zygote's pid (this module is loaded in the zygote, before any fork): it names the slots' cgroups."""

CGROUP_ROOT = "/sys/fs/cgroup"


def _own_cgroup(controller: str) -> str:
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


def cgroup_dirs(slot: int, owner: int | None = None) -> dict[str, str]:
    """Cgroup folders of a worker slot that can exist here: {'pids':..., 'memory':..., 'cpu':..., 'kill':...}.

    The cpu cgroup gives each slot one equal share of the CPU, however many
    processes its job starts: without it, a job whose children each call
    ``setsid()`` gets a scheduler autogroup per child and can starve the
    job of the student graded beside it into timeouts.

    One set per slot (not per job) is made once and reused: a slot runs one
    job at a time, and making memory cgroups costs milliseconds. ``owner``
    is the zygote's pid (default: `ZYGOTE_PID`, this process in the zygote).
    """
    return dict(_cgroup_dirs(int(slot), ZYGOTE_PID if owner is None else int(owner)))


@functools.lru_cache(maxsize=64)
def _cgroup_dirs(slot: int, owner: int) -> tuple[tuple[str, str], ...]:
    """`cgroup_dirs`, worked out once per slot and owner: the zygote's cgroups never change, and a job,
    forked from it, gets the answer made in the zygote (before it enters its slot's cgroups)."""
    dirs = {}
    name = f"grader-{owner}-slot{slot}"
    for controller in ("pids", "memory", "cpu"):
        base = os.path.join(CGROUP_ROOT, controller)
        if os.path.isfile(os.path.join(base, "cgroup.procs")):
            dirs[controller] = os.path.join(base + _own_cgroup(controller).rstrip("/"), name)
    unified = os.path.join(CGROUP_ROOT, "unified")
    if not os.path.isfile(os.path.join(unified, "cgroup.procs")) and os.path.isfile(
        os.path.join(CGROUP_ROOT, "cgroup.controllers")
    ):
        unified = CGROUP_ROOT  # a pure v2 machine
    if os.path.isfile(os.path.join(unified, "cgroup.procs")):
        dirs["kill"] = os.path.join(unified + _own_cgroup("").rstrip("/"), name)
    return tuple(dirs.items())


_SLOT_PROCS: dict[int, dict[str, int]] = {}
"""Per slot, made by `prepare_slot` in the zygote: each cgroup's ``cgroup.procs``, open for writing."""

_SLOT_LIST: dict[int, int] = {}
"""Per slot, made by `prepare_slot` in the zygote: its cgroup-v2 ``cgroup.procs``, open for reading
(`slot_processes` with ``quick``). Only v2's: a v1 list read again through the same descriptor is the
one read before (the kernel keeps it about a second), v2 lists the cgroup anew at each read from 0."""


def prepare_slot(slot: int, limits: dict[str, int]) -> None:
    """In the zygote, before a slot's first job: make its cgroups, and open each one's ``cgroup.procs``.

    Every job of the slot then enters them with one write of ``0`` (the
    writer) to each inherited descriptor (`cgroup_enter`): finding, making
    and opening them by path in each job cost it about 0.2 ms of CPU. A
    cgroup that cannot be made or opened here is left to the job, which
    says why (as before). The descriptors are at 10 or above; jobs close
    them with every other one before student code runs.
    """
    if slot in _SLOT_PROCS:
        return
    opened: dict[str, int] = {}
    for name, path in cgroup_dirs(slot).items():
        try:
            if _make(name, path, limits):
                opened[name] = high_fd(os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            pass
    _SLOT_PROCS[slot] = opened
    if "kill" in opened:
        try:
            _SLOT_LIST[slot] = high_fd(os.open(cgroup_dirs(slot)["kill"] + "/cgroup.procs", os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            pass


def _make(name: str, path: str, limits: dict[str, int]) -> bool:
    """Make the cgroup ``name`` at ``path`` with its limits unless it exists; whether jobs may enter it."""
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
            # Across cgroups, group weights decide, not nice values: by default a slot weighs what
            # one process at nice 10 does (JOB_NICE), so the grader still comes first.
            _write(os.path.join(path, "cpu.shares"), str(slot_cpu_shares(limits)))
            cpu_quota_one(path)
        elif name == "kill":
            if "cpu_weight" in limits and os.path.exists(os.path.join(path, "cpu.weight")):
                _write(os.path.join(path, "cpu.weight"), str(int(limits["cpu_weight"])))  # v2: the weight as given
            cpu_quota_one(path)
    return name != "kill" or os.path.exists(os.path.join(path, "cgroup.kill"))


def cgroup_enter(slot: int, limits: dict[str, int]) -> dict[str, bool | str]:
    """Move this process into the slot's cgroups (made on first use). Returns the layers applied."""
    applied: dict[str, bool | str] = {}
    opened = _SLOT_PROCS.get(slot, {})
    for name, path in cgroup_dirs(slot).items():
        try:
            if name in opened:
                try:
                    os.write(opened[name], b"0")
                    applied[name] = True
                    continue
                except OSError:
                    pass  # by path, as for a cgroup the zygote did not open
            if not _make(name, path, limits):
                applied[name] = "no cgroup.kill on this kernel"
                continue
            _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
            applied[name] = True
        except OSError as exc:
            applied[name] = f"not writable: {exc.strerror}"
    return applied


def slot_cpu_shares(limits: dict[str, int]) -> int:
    """A slot's v1 ``cpu.shares``: ``limits["cpu_weight"]`` (cgroup v2's scale, 100 = a task at nice 0)
    as shares (1024 = nice 0), else `SLOT_CPU_SHARES` (nice 10's weight)."""
    weight = limits.get("cpu_weight")
    return shared.SLOT_CPU_SHARES if weight is None else max(2, round(int(weight) * 1024 / 100))


def cpu_quota_one(path: str) -> None:
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
            _write(os.path.join(path, "cpu.max"), f"{shared.SLOT_CPU_PERIOD_US} {shared.SLOT_CPU_PERIOD_US}")
    except (OSError, ValueError):
        pass  # no cap: the grader still re-reads the CPU time before it times a call out


def cpu_stat_path(slot: int) -> str | None:
    """The slot's cgroup-v2 ``cpu.stat`` (``usage_usec``: CPU time of every process in it), or None.

    Every v2 cgroup has ``cpu.stat``, cpu controller or not. Jobs enter
    this cgroup only where it has ``cgroup.kill`` (`cgroup_enter`); where
    they do not, its count stays 0, which the grader takes as "unknown".
    """
    path = cgroup_dirs(slot).get("kill")
    return os.path.join(path, "cpu.stat") if path else None


def cgroup_kill(slot: int) -> None:
    """Kill every process left in the slot's cgroup (cgroup v2 ``cgroup.kill``)."""
    path = cgroup_dirs(slot).get("kill")
    if path and os.path.exists(os.path.join(path, "cgroup.kill")):
        try:
            _write(os.path.join(path, "cgroup.kill"), "1")
        except OSError:
            pass


def slot_processes(slot: int, owner: int | None = None, quick: bool = False) -> set[str]:
    """Pids still in the slot's cgroups (as seen from the zygote; ``owner`` as in `cgroup_dirs`).

    With ``quick``, the slot's cgroup-v2 list alone, through the descriptor
    `prepare_slot` opened (one ``pread``), where there is one: for a job
    that was pid 1 of its own pid namespace, whose every process entered
    that cgroup with it and is gone once the job is reaped (the caller's
    word). Else, or when that read fails, every cgroup's list, each opened anew.
    """
    listed = _SLOT_LIST.get(slot, -1) if quick and owner is None else -1
    if listed >= 0:
        try:
            data = os.pread(listed, 1 << 16, 0)
        except OSError:
            data = b"?" * (1 << 16)  # unread: as a list too long for one read, every list is read below
        if len(data) < 1 << 16:
            return set(data.decode().split())
    pids: set[str] = set()
    for path in cgroup_dirs(slot, owner).values():
        try:
            fd = os.open(path + "/cgroup.procs", os.O_RDONLY | os.O_CLOEXEC)  # no file object: called once a job
        except OSError:
            continue
        try:
            data = b""
            while chunk := os.read(fd, 1 << 16):
                data += chunk
        except OSError:
            pass
        finally:
            os.close(fd)
        pids.update(data.decode().split())
    return pids


def cgroup_remove_stale() -> None:
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


def cgroup_remove(slots: Iterable[int]) -> None:
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


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
