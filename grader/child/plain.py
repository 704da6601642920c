"""A plain job's walls (``check``, ``grade --insecure``): what the warm fork server applies without namespaces.

The sandbox (``grade``) puts a job in a pid namespace of its own, under
another uid. The fork server (``grader/child/forkserver.py``) runs a student's
code on the student's own machine or CI runner, where neither may be
possible; it still makes sure of two things:

* nothing of a job outlives it. The server is a *child subreaper*
  (``PR_SET_CHILD_SUBREAPER``): what a job starts and leaves behind
  (a double-forked daemon in a session of its own) is re-parented to the
  server, not to init. `sweep` kills and reaps every such process, and the
  server answers a job's ``kill`` only once the job and all of them are gone;
  so the grader writes its results after the last of the job's processes
  has been reaped.
* a job reaches nothing of the grader's but its own pipes. Its standard
  streams are pipes to the grader and every other descriptor is closed (the
  server does that). `guard` adds, where the kernel has Landlock (Linux 5.13
  and newer, unprivileged): a Landlock domain that lets the job write only
  in its own folder (read everywhere), denies TCP (ABI 4) and scopes its
  signals (ABI 6). A process in that domain cannot open another's
  ``/proc/PID/fd/N`` (the kernel's ptrace access check), so the grader's
  stdout, a CI runner's log pipe or a parent shell's descriptors are out of
  reach, and so are ``result.json``, ``junit.xml``, ``$GITHUB_STEP_SUMMARY``
  or ``$GITHUB_ENV``. A job run by root (a CI container) also drops to the
  ``nobody`` uid first (its folder given to it), so that other root
  processes' ``/proc/PID/environ`` and files are shut by ownership too, with
  or without Landlock; a job of an ordinary user without Landlock keeps that
  user's rights (its own machine: the student's own files).

Part of the sandbox child (``grader/child``), loaded by path by the fork
server as the zygote loads it: it imports only the standard library.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Collection

from . import landlock
from .kernel import PR_SET_NO_NEW_PRIVS, prctl

PR_SET_CHILD_SUBREAPER = 36
NOBODY = 65534
"""The uid and gid a root job without Landlock drops to."""
SWEEP_SECONDS = 5.0
"""The longest a sweep keeps killing what a job left (a fork bomb that outruns it is left to the backstops)."""


def become_subreaper() -> bool:
    """Make this process (the fork server) the reaper of its jobs' orphans; False where the kernel cannot."""
    try:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        return False
    return True


def guard(folder: str) -> str:
    """Wall in the calling process (a job, before it imports the submission); return what applied.

    A job of root first drops to the ``nobody`` uid, its folder given to it: Landlock alone leaves
    a root job able to read other root processes' ``/proc/PID/environ`` (a CI job's tokens).
    Then Landlock, where the kernel has it.

    Parameters
    ----------
    folder : str
        The job's folder (its working directory, HOME and TMPDIR): the one
        place it may write.

    Returns
    -------
    str
        ``"nobody+landlock"``, ``"landlock"``, ``"nobody"`` or ``"none"``.
    """
    applied = []
    if os.geteuid() == 0:
        for root, dirs, files in os.walk(folder):
            for name in (root, *(os.path.join(root, n) for n in dirs + files)):
                os.lchown(name, NOBODY, NOBODY)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        applied.append("nobody")
    if landlock.landlock_abi() >= 1:
        try:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            readonly = landlock.open_rules(["/"], landlock.READONLY_RIGHTS)
            readonly += landlock.open_rules(["/dev/null"], landlock.FS_READ_FILE | landlock.FS_WRITE_FILE)
            try:
                landlock.landlock_restrict(readonly, [folder])
            finally:
                for fd, _ in readonly:
                    os.close(fd)
            applied.append("landlock")
        except OSError:  # refused (a container's seccomp profile): the uid, if any, is the wall
            pass
    return "+".join(applied) or "none"


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (zombies included), read from ``/proc``.

    From ``/proc/PID/task/TID/children`` (a few bytes) where the kernel has
    it, else by reading every process's ``stat``.
    """
    try:
        found: list[int] = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", "rb") as fh:
                found += [int(x) for x in fh.read().split()]
        return found
    except (OSError, ValueError):
        pass
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def sweep(jobs: Collection[int], reap: Callable[[], None], until_gone: int = 0) -> bool:
    """Kill and reap every child of this process that is not one of ``jobs`` (what jobs left behind).

    Parameters
    ----------
    jobs : collection of int
        The running jobs' pids (kept), read again at every round.
    reap : callable
        Reaps the children that ended (the server's ``reap``).
    until_gone : int
        Also wait until this pid (a job being killed) is no longer in ``jobs``.

    Returns
    -------
    bool
        True when nothing was left (within `SWEEP_SECONDS`).
    """
    deadline = time.monotonic() + SWEEP_SECONDS
    me = os.getpid()
    while True:
        reap()
        strays = [pid for pid in children(me) if pid not in jobs]
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not strays and until_gone not in jobs:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
