"""Built-in plugin: the sandbox that ``grader grade`` runs submissions in (Linux).

At configure time, before any spec, reference or expected value is read,
the grader starts a *zygote* (``grader/child/zygote.py``) from a fresh exec: a
secret-free process that imports numpy once and forks one isolated job per
submission run (namespaces, cgroups, rlimits, Landlock, a non-root uid,
seccomp; see the zygote's docstring). This plugin lends its workers to the
runner plugin (`grader.stash.JOB_LAUNCHERS`): each a launcher that asks the
zygote for jobs; reading frames, deadlines and output caps stay in
`grader.execution.jobs`.

The zygote gets ready, and a *preflight* runs, in a thread of their own
while the specs and the reference load (`grader_grading_ready` waits for
them, before the output folder is made). The preflight runs a real job in
every slot of the batch
(the same folder, uids, cgroups and limits; it imports a tiny file and
makes one call): if it fails, ``grade`` stops with one line saying why,
rather than grade a class to zeros. ``grader doctor`` runs it too. A job's
set-up failure reaches the grader with its reason (the zygote's status
pipe), never through output a submission could forge.

Grading hidden checks without a filesystem isolation layer (Landlock) is
refused unless ``--insecure`` is given; so is blocking this plugin or the
runner with ``-p no:NAME`` (`grader.config.plugins.ESSENTIAL`). ``grader check``
(a student's own code) and ``grader validate`` (the reference) use the plain
child process.
"""

from __future__ import annotations

import shutil
import time
from typing import TYPE_CHECKING, Any

from grader.builtin.sandbox.handle import SandboxJob, Zygote
from grader.builtin.sandbox.slots import Pool, Starting, Worker, make_workdir, preflight
from grader.child.limits import DEFAULT_LIMITS
from grader.errors import ConfigError
from grader.execution.channel import JobChannel
from grader.execution.jobs import sandboxed
from grader.execution.keys import EARLY_ZYGOTE, JOB_LAUNCHERS
from grader.markers import hookimpl
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_ZYGOTE: StashKey[Zygote] = StashKey()


LAYERS = (
    ("pid", "pid namespace (the job is pid 1; nothing it starts outlives it)"),
    ("mount", "mount namespace"),
    ("fresh_proc", "fresh /proc (only the job's own processes)"),
    ("job_tmpfs", "job folder on a size-limited tmpfs (no filling the disk)"),
    ("net", "network namespace (no network at all)"),
    ("ipc", "ipc namespace"),
    ("uts", "uts namespace"),
    ("pids", "cgroup pids limit (fork bombs)"),
    ("memory", "cgroup memory limit"),
    ("cpu", "cgroup cpu share (a job's many processes cannot starve the job graded beside it)"),
    ("kill", "cgroup.kill (kills every process of a job)"),
    ("rlimits", "rlimits: CPU, address space, file size, open files, processes, no core dumps"),
    ("landlock", "Landlock filesystem allow-list (stdlib, numpy, the job folder)"),
    ("landlock_tcp", "Landlock: TCP bind and connect denied"),
    ("landlock_scopes", "Landlock: abstract UNIX sockets and signals scoped to the job"),
    ("uid", "non-root uid per worker slot"),
    ("seccomp", "seccomp allow-list (default deny; sockets AF_UNIX only, no ptrace, mount, namespaces, bpf...)"),
    ("file_locks", "file locks denied (flock, fcntl locks, leases, directory notifications)"),
    ("fixed_cwd", "fixed working folder (the job sees /tmp or another fixed folder, never the grader's path)"),
    ("preflight", "a real job imports a file and answers a call (same folder, uids, cgroups, limits as grade)"),
)
"""Every isolation layer, in the order ``grader doctor`` prints them."""


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command == "merge":  # no code runs: the shards ran it
        return
    group = parser.add_argument_group("sandbox")
    group.add_argument(
        "--insecure",
        action="store_true",
        help="grade without the sandbox (plain child processes); only for trusted code",
    )
    group.add_argument(
        "--cpu-weight",
        type=cpu_weight,
        metavar="W",
        help="the CPU weight of each job slot's cgroup, 1-10000 on cgroup v2's scale (100: a task at nice 0); "
        "default: a nice-10 task's weight, so the grader's own process comes first on a busy machine",
    )


def cpu_weight(text: str) -> int:
    """argparse type of ``--cpu-weight``: a whole number from 1 to 10000 (cgroup v2's ``cpu.weight``)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}; give a weight from 1 to 10000") from None
    if not 1 <= value <= 10000:
        raise argparse.ArgumentTypeError(f"{value} is out of range; give a weight from 1 to 10000 (100: nice 0)")
    return value


_STARTING = StashKey[Starting]()


@hookimpl
def grader_configure(config: Config) -> None:
    """Start the zygote before any spec or reference is loaded (``grade`` only); it gets ready meanwhile."""
    if not sandboxed(config):
        return  # a zygote the command line started is stopped by it (grader.cli.main)
    from grader.grading.session import worker_count

    slots, submission = worker_count(config), config.pack.submission  # no course: refused before a zygote runs
    weight = config.option("cpu_weight")
    limits = None if weight is None else dict(DEFAULT_LIMITS, cpu_weight=weight)

    def start() -> Starting:
        zygote = Zygote(wait=False, started=config.stash.pop(EARLY_ZYGOTE, None))
        config.stash[_ZYGOTE] = zygote
        starting = Starting(zygote, slots, submission, limits)
        config.stash[_STARTING] = starting
        return starting

    if config.option("dask"):
        # A Dask client grades here only a chunk its cluster could not take: the sandbox starts then.
        config.stash[JOB_LAUNCHERS] = Pool(start, lazy=True)
    else:
        config.stash[JOB_LAUNCHERS] = Pool(start())  # waits for the start-up when first used


@hookimpl
def grader_grading_ready(config: Config) -> None:
    """Wait for the sandbox started at configure time (``grade``; a Dask worker waits at its first job)."""
    pool = config.stash.get(JOB_LAUNCHERS)
    if isinstance(pool, Pool) and not pool.lazy:
        pool.ready()  # raises what went wrong; grader_unconfigure stops the zygote and cleans up


@hookimpl
def grader_unconfigure(config: Config) -> None:
    pool = config.stash.pop(JOB_LAUNCHERS, None)
    if isinstance(pool, Pool):
        pool.close()  # a Dask client's sandbox starting in a grading thread is started, then stopped here
    zygote = config.stash.pop(_ZYGOTE, None)
    if zygote is None:
        return
    starting = config.stash.pop(_STARTING, None)
    if starting is None:  # configure stopped between the two (a refused run): only the zygote to stop
        zygote.close()
        return
    try:
        if starting.thread.is_alive():  # the run stopped before grading: stopping the zygote ends the start-up too
            zygote.close()
            starting.thread.join(timeout=30.0)
        for worker in starting.workers:
            try:
                worker.close()
            except (OSError, ConfigError):
                pass
    finally:  # a second Ctrl-C while the jobs end (a worker's join) still leaves no folder behind
        zygote.close()
        if starting.workdir is not None:
            shutil.rmtree(starting.workdir, ignore_errors=True)


def probe_layers() -> dict[str, Any]:
    """Start a zygote, run a probe job and a preflight (`preflight`), and return what applied.

    The jobs run as ``grader grade`` runs them: in a folder made by
    `make_workdir` (so under the same TMPDIR), with the same uids, cgroups
    and limits.

    Returns
    -------
    dict
        Layer name to True, or a string saying why it is not active; plus
        ``"zygote"``: True or the reason it did not start, and
        ``"preflight"``: True or why a real job could not run.
    """
    try:
        zygote = Zygote()
    except ConfigError as exc:
        return {"zygote": str(exc)}
    try:
        workdir = make_workdir()
    except ConfigError as exc:
        zygote.close()
        return {"zygote": True, "job": str(exc)}
    try:
        job = SandboxJob(zygote, 0, workdir, DEFAULT_LIMITS, probe=True)
        child = JobChannel(job)
        frame = child.read_frame(
            time.monotonic() + 10.0, {"stdout": bytearray(), "stderr": bytearray()}, expect="probe"
        )
        child.kill()
        layers = frame.get("layers", {}) if isinstance(frame, dict) else {}
        if not layers:
            return {"zygote": True, "job": f"the probe job did not answer ({job.exit_description()})"}
        layers["uid"] = True if layers.get("uid", 0) != 0 else "the job would run as root"
        worker = Worker(zygote, (0, 1), workdir)
        try:
            layers["preflight"] = preflight([worker], workdir) or True
        finally:
            worker.close()
        return {"zygote": True, **layers}
    finally:
        try:
            zygote.close()  # waits for the zygote's end: where a Ctrl-C to 'grader doctor' most often lands
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


@hookimpl(trylast=True)
def grader_doctor(write: Any, config: Config) -> int:
    """``grader doctor``: `doctor`."""
    return doctor(write)


def doctor(write: Any) -> int:
    """Print which isolation layers are active here; return 0 if all are."""
    layers = probe_layers()
    if layers.get("zygote") is not True:
        write(f"sandbox: cannot start: {layers['zygote']}")
        return 1
    if "job" in layers:
        write(f"sandbox: cannot run a job: {layers['job']}")
        return 1
    active = 0
    for key, label in LAYERS:
        state = layers.get(key, "not reported")
        ok = state is True or (key == "landlock" and isinstance(state, str) and state.startswith("ABI"))
        active += ok
        detail = f" ({state})" if isinstance(state, str) and ok else ("" if ok else f": {state}")
        write(f"{'active  ' if ok else 'MISSING '} {label}{detail}")
    write(f"{active} of {len(LAYERS)} layers active")
    if layers.get("preflight") is not True:
        write(f"'grader grade' refuses to run here: {layers.get('preflight')}")
    filesystem = isinstance(layers.get("landlock"), str) and layers["landlock"].startswith("ABI")
    if not filesystem:
        write("without Landlock, 'grader grade' refuses to run unless --insecure is given")
    return 0 if active == len(LAYERS) else 1
