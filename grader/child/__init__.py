"""The sandbox child: the code of the zygote and of the jobs it forks, one module per concern.

``grader/child/zygote.py`` (the script the grader starts from a fresh exec) loads
this folder *by path*, as a package of its own named ``_grader_child``, never
as ``grader.child``: the zygote must hold nothing of the grader (no spec, no
reference, no plugin) and runs with ``python -I``, so neither ``grader`` nor
this folder is on its ``sys.path``. The modules therefore import only the
standard library, numpy (at start, in `control.main`) and each other
(relatively: ``from . import kernel``), and this file imports nothing.

The grader's own process imports `limits` normally (``grader.child.limits``):
it is the one place where the uid base, the set-up failure code, the CPU
rlimit and the default per-job limits are written, read by both sides.
Tests import the other modules as ``grader.child.*`` to check their tables.

Modules
-------
limits
    What the parent and the child must agree on (uids, exit codes, limits).
kernel
    libc through ctypes: raw calls and constants every layer shares.
cgroups
    A worker slot's cgroups: pids, memory, cpu (one CPU at most), kill.
landlock
    The filesystem allow-list, TCP denial and scopes.
seccomp
    The system-call allow-list (a raw BPF program, x86_64).
rlimits
    A job's resource limits (CPU, address space, file size, files, processes).
jobsetup
    One job: fork into a pid namespace, apply every layer in order, wait for
    the task, run the worker.
control
    The zygote itself: start-up, the control socket's requests, watching jobs.
"""
