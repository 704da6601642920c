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
submission's bytes, see ``jobsetup.receive_task``), imports it, and then reads its
calls from the same pipe, one at a time, each only when the grader makes
it. The zygote never sees a submission or a call. A launch's reply names
the slot's cgroup-v2 ``cpu.stat``, from which the grader reads the job's
CPU time (a slot is capped at one CPU, ``cgroups.cpu_quota_one``).

A job is one fork of the zygote, set up in this order (each layer is
applied if the kernel and the privileges allow it, and reported by
``probe``):

1. the zygote unshares a pid namespace for its next child and forks:
   the job is pid 1 of a new pid namespace (the zygote then goes back to
   its own with ``setns``);
2. the job starts a new session, dies with the zygote, moves itself into
   its slot's cgroups (pids, memory, cpu; v2 for ``cgroup.kill``), then
   unshares mount, ipc and uts namespaces (the network namespace is the
   zygote's own, empty, made once: see ``jobsetup.NET_NAMESPACE``), mounts a fresh
   ``/proc`` and its folder, a size-limited tmpfs, at the fixed path
   ``jobsetup.JOB_FOLDER`` (its working folder, HOME and TMPDIR), takes its pipes as
   fds 0-3 (and a set-up reason pipe as fd 4, closed before the submission
   runs), closes every other fd, and sets rlimits (CPU, address space,
   file size, open files, processes, no core dumps);
3. ``PR_SET_NO_NEW_PRIVS``, then a Landlock ruleset: read-only the standard
   library (not its site-packages) and numpy, read-write the job folder,
   nothing else; TCP bind/connect denied; abstract UNIX sockets and signals
   scoped to the job (the zygote's own mount namespace covers the standard
   library's site-packages with an empty mount, where it can tell that
   nothing else shows them: then one rule allows the standard library's
   folder, ``jobsetup.COVERED``);
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

This script only loads the sandbox child, ``grader/child``, by path (as a
package of its own, ``_grader_child``: see its docstring), and runs
``control.main``. Each concern is a module there: ``limits`` (shared with
the grader), ``kernel``, ``cgroups``, ``landlock``, ``seccomp``,
``rlimits``, ``jobsetup`` (steps 1-6 above) and ``control`` (the requests,
watching jobs). Nothing of the ``grader`` package is imported.
"""

import importlib
import importlib.util
import os
import sys
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = HERE
"""The sandbox child's modules (``grader/child``)."""
PACKAGE = "_grader_child"
"""The name the child's package is loaded under: not ``grader.child``, so that ``grader`` is never imported."""


def load_child() -> ModuleType:
    """Load ``grader/child`` by path as the package `PACKAGE`; return its ``control`` module.

    The zygote runs with ``python -I``: neither this folder nor the grader
    is on ``sys.path``. The package is registered under its own name, with
    ``grader/child`` as its only search location, so the modules' relative
    imports (``from . import kernel``) find each other there and nowhere else.
    """
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(CHILD, "__init__.py"), submodule_search_locations=[CHILD]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return importlib.import_module(PACKAGE + ".control")


def main(argv: list[str]) -> None:
    """Script entry: ``zygote.py CONTROL_FD``; see ``control.main``."""
    load_child().main(argv)


if __name__ == "__main__":
    main(sys.argv)
