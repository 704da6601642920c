"""The sandbox's slots: each worker's two jobs (`Worker`), the pool lending them (`Pool`), their
start-up in a thread of its own (`Starting`) and the preflight that runs a real job in every slot."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType

from grader.builtin.sandbox.handle import ZYGOTE_NAME, SandboxJob, Zygote
from grader.child.limits import DEFAULT_LIMITS, UID_BASE
from grader.errors import ConfigError, JobStarterLost
from grader.execution.calls import run_calls
from grader.execution.jobs import Launcher
from grader.fileio import scratch_prefix, unreachable_folder
from grader.models import Call


class Starting:
    """The sandbox getting ready in a thread of its own while ``grade`` loads the specs and the reference.

    The zygote is started (exec'd) before any of them is read; this thread
    waits for it to be ready, makes the job folder and the workers, and runs
    the preflight. `grader_grading_ready` waits for it: a start-up that
    would take a quarter of a small class's run overlaps with the checks'
    preparation instead (issue 16).
    """

    def __init__(self, zygote: Zygote, count: int, filename: str, limits: dict[str, int] | None = None) -> None:
        self.zygote, self.count, self.filename = zygote, count, filename
        self.limits = DEFAULT_LIMITS if limits is None else limits
        self.workdir: str | None = None
        self.workers: list[Worker] = []
        self.error: BaseException | None = None
        # the start-up's own traceback, which each raise of `error` starts from (`wait`)
        self._error_trace: TracebackType | None = None
        self.thread = threading.Thread(target=self._run, name="grader-sandbox-start", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.zygote.wait_started()
            if self.zygote.landlock_abi < 1:
                raise ConfigError(
                    "no filesystem isolation here (Landlock needs Linux 5.13 or newer, enabled); grading "
                    "hidden checks would let submissions read them. Run 'grader doctor', or pass --insecure "
                    "to grade anyway"
                )
            self.workdir = make_workdir()
            count = self.count
            self.workers = [
                Worker(self.zygote, (slot, slot + count), self.workdir, self.filename, self.limits)
                for slot in range(count)
            ]
            problem = preflight(self.workers, self.workdir)
            if problem:
                raise ConfigError(problem)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread (grader_grading_ready)
            self.error, self._error_trace = exc, exc.__traceback__
            if type(exc) is ConfigError and self._zygote_killed():
                self.error, self._error_trace = JobStarterLost(ZYGOTE_NAME), None  # a new one may start (Dask)

    def _zygote_killed(self) -> bool:
        """Whether the zygote ended meanwhile, killed from outside (the preflight's job died with it)."""
        proc = self.zygote.proc
        try:
            code = proc.wait(timeout=1.0) if self.zygote.lost else proc.poll()
        except subprocess.TimeoutExpired:
            code = None
        return self.zygote.lost or code in (-signal.SIGKILL, -signal.SIGTERM)

    def wait(self) -> list[Worker]:
        """The ready workers; or the start-up's error, raised here (a ConfigError: one line and the fix).

        Raised again at each call (a Dask worker's runner, at each chunk) with the start-up's own
        traceback: raising an exception adds the raiser's frames to the one it holds, so it would
        grow by a chunk's frames (and keep them) at each raise.
        """
        self.thread.join()
        if self.error is not None:
            raise self.error.with_traceback(self._error_trace)
        return self.workers


def make_workdir() -> str:
    """The folder for the jobs' folders (in the temporary folder), made as ``grade`` makes it.

    Job folders inside belong to the jobs' uids, hence mode 0711. A job
    sees its own folder at a fixed path (``zygote.JOB_FOLDER``) and needs
    this one only where that mount is not possible.

    Raises
    ------
    grader.errors.ConfigError
        If the temporary folder is not writable.
    """
    try:
        workdir = tempfile.mkdtemp(prefix=scratch_prefix("sandbox"))
        os.chmod(workdir, 0o711)
    except OSError as exc:
        raise ConfigError(
            f"the sandbox cannot make its folder in {tempfile.gettempdir()} ({exc.strerror}); "
            "set TMPDIR to a writable folder such as /tmp"
        ) from None
    return workdir


PREFLIGHT_SOURCE = b"""def grader_preflight(x):
    return x + 1
"""
"""The submission a preflight job imports; its one call, ``grader_preflight(41)``, answers 42."""


def preflight(workers: Sequence[Worker], workdir: str) -> str:
    """Run a real job in each slot of ``workers``, as grading will; say what is wrong, or ''.

    Each job imports `PREFLIGHT_SOURCE` and makes one call, through the
    same launcher, folder, uids, cgroups and limits as the batch's jobs (and
    leaves each worker with its next job started, as after a submission).

    Parameters
    ----------
    workers : sequence of Worker
        The batch's workers; each runs two jobs (one per slot).
    workdir : str
        Their folder for job folders.

    Returns
    -------
    str
        ``""`` if every job answered 42; else one line naming the
        cause and, where known, the fix.
    """
    path = os.path.join(workdir, "preflight.py")
    with open(path, "wb") as fh:
        fh.write(PREFLIGHT_SOURCE)
    # The workers side by side (each in a thread of its own, the first in this one), as grading runs them:
    # start-up waits for the slowest worker's two jobs, not for every job in turn.
    answers: list[str | BaseException] = [""] * len(workers)

    def check(number: int) -> None:
        try:
            answers[number] = _preflight_worker(workers[number], path)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
            answers[number] = exc

    try:
        threads = [threading.Thread(target=check, args=(n,), daemon=True) for n in range(1, len(workers))]
        for thread in threads:
            thread.start()
        if workers:
            check(0)
        for thread in threads:
            thread.join()
    finally:
        os.unlink(path)
    for answer in answers:  # in the workers' order: the first worker's problem is the one told
        if isinstance(answer, BaseException):
            raise answer
        if answer:
            return _preflight_problem(workdir, answer)
    return ""


def _preflight_worker(worker: Worker, path: str) -> str:
    """Run the preflight's two jobs in one worker; why the first that failed did, or ''."""
    for _ in range(2):  # two jobs: in the first slot, then in the other (started ahead)
        outcome = run_calls(
            path,
            [Call("grader_preflight", (41,), 10.0)],
            import_timeout=10.0,
            submission_timeout=30.0,
            launch=worker.launch,
            scratch=False,
        )
        result = outcome.results[0]
        if result.status != "returned" or result.value != 42:
            return outcome.import_error or result.message or f"it answered {result.value!r}"
    return ""


def _preflight_problem(workdir: str, why: str) -> str:
    """One line: why a preflight job failed, and the fix."""
    why = " ".join(why.split())[:300]
    blocked = unreachable_folder(workdir)
    if blocked is not None:
        folder, mode = blocked
        return (
            f"the sandbox's job folder {workdir} is not reachable by the job uids ({UID_BASE}+): {folder} "
            f"is mode {mode:04o}; set TMPDIR to a folder such as /tmp, or pass --insecure ({why})"
        )
    return (
        f"the sandbox cannot run a job here ({why}); run 'grader doctor' to see each layer, "
        "or pass --insecure to grade without the sandbox"
    )


class Ending:
    """Where a job killed without waiting puts itself (`SandboxJob.kill`): its worker's jobs to settle."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def append(self, job: SandboxJob) -> None:
        self.worker.settle_later(job)


class Worker:
    """One worker's sandboxed jobs, on two slots: the job that runs, and the next one, started ahead.

    The next job (for the worker's next submission, or for the calls after
    a call that may be about to time out) sets up its isolation while the
    current one runs, in the other slot: its own cgroups and uid. A job
    that is done is *settled* (its exit reported, its cgroups empty, its
    folder removed), and the next job started ahead in the slot it freed,
    by the worker's *chores*, which never wait: the thread grading the
    worker's next submission does them in its pauses while that
    submission's job computes (`chores`, from `grader.execution.calls._gather`),
    so that no thread of its own is woken for them, and the thread grading
    submissions never waits for a finished job (issue 16) unless it needs
    its slot at once (`_take`).
    """

    def __init__(
        self,
        zygote: Zygote,
        slots: tuple[int, int],
        workdir: str,
        filename: str = "submission.py",
        limits: dict[str, int] | None = None,
    ) -> None:
        self.zygote = zygote
        self.limits = DEFAULT_LIMITS if limits is None else limits
        self.filename = filename
        self.free = set(slots)
        self.workdir = workdir
        self.ready: SandboxJob | None = None
        self.starting: SandboxJob | None = None  # launched, the zygote's reply not taken yet
        self.ending = Ending(self)  # killed without waiting; settled by `chores`
        self.cond = threading.Condition()
        self.closing = False
        self._ended: list[SandboxJob] = []  # killed without waiting, not settled yet

    @property
    def unsettled(self) -> int:
        """Jobs killed without waiting whose slots are not settled yet."""
        with self.cond:
            return len(self._ended)

    def settle_later(self, job: SandboxJob) -> None:
        """Keep a killed job, for `chores` (or `_take`, or `close`) to settle."""
        with self.cond:
            self._ended.append(job)

    def _settle_ended(self, timeout: float) -> bool:
        """Settle the ended jobs whose slots are reported clean within ``timeout`` s (5 s: then given up).

        Returns whether none is left.
        """
        with self.cond:
            ended, self._ended = self._ended, []
        left = []
        for job in ended:
            try:
                if not job.settle(timeout, give_up=timeout >= 5.0):
                    left.append(job)
            except OSError:  # a descriptor already gone: the slot is freed all the same
                if job.on_end is not None:
                    job.on_end(job.slot)
                    job.on_end = None
        if left:
            with self.cond:
                self._ended[:0] = left
        return not left

    def chores(self) -> bool:
        """Settle the ended jobs, start the next job ahead, take its start's reply; whether all is done.

        Nothing here waits (a slot not yet reported clean, a reply not yet
        come, is left for the next call): run by the thread grading this
        worker's submission in its pauses (`grader.execution.calls._gather`).
        Errors are not raised: a job that fails to start frees its slot, and
        `_take` starts one, or says why.
        """
        try:
            settled = self._settle_ended(0.0)
            self._start_ahead(block=False)
            self._take_started(block=False)
        except Exception:  # noqa: BLE001 - the run is ending (the zygote's socket closed: EBADF), or a job
            return True  # failed to start: its slot is freed, and `_take` starts one, or says why
        with self.cond:
            return settled and self.starting is None and (self.ready is not None or not self.free or self.closing)

    def _freed(self, slot: int) -> None:
        with self.cond:
            self.free.add(slot)
            self.cond.notify_all()

    def _new(self, slot: int, wait: bool = True) -> SandboxJob:
        try:
            job = SandboxJob(
                self.zygote, slot, self.workdir, self.limits, on_end=self._freed, filename=self.filename, wait=wait
            )
        except BaseException:
            self._freed(slot)
            raise
        job.ending = self.ending
        return job

    def _start_ahead(self, block: bool = True) -> None:
        """Start the next job in a free slot, unless one is ready or starting (or none is free)."""
        with self.cond:
            if self.ready is not None or self.starting is not None or not self.free or self.closing:
                return
            slot = min(self.free)
            self.free.discard(slot)
        self.starting = self._new(slot, wait=False)
        self._take_started(block)

    def _take_started(self, block: bool) -> None:
        """Make the job starting the ready one once the zygote's reply has come (waiting for it with ``block``)."""
        job = self.starting
        if job is None:
            return
        try:
            if not job.started(block):
                return
        except BaseException:
            with self.cond:
                mine, self.starting = self.starting is job, None if self.starting is job else self.starting
            if mine:
                job.settle(0.0, give_up=False)  # its pipes are closed: its slot is freed (`_freed`)
            raise
        with self.cond:
            if self.starting is not job:  # taken by another thread meanwhile (`close`, as a run stops)
                return
            self.starting = None
            if self.ready is None and not self.closing:
                self.ready = job
                self.cond.notify_all()
                return
        job.kill()

    def _take(self) -> SandboxJob:
        """The job started ahead, or a new one in a free slot (settling the ended jobs if neither is there)."""
        deadline = time.monotonic() + 30.0
        with self.cond:
            if self.closing:  # the run is stopping (Ctrl-C): its folder is gone, and no job is started again
                raise ConfigError("the sandbox is stopping: no job is started")
        while True:
            self._take_started(block=True)
            with self.cond:
                if self.ready is not None:
                    job, self.ready = self.ready, None
                    return job
                if self.free:
                    slot = min(self.free)
                    self.free.discard(slot)
                    break
                waiting = bool(self._ended)
            if waiting:
                self._settle_ended(5.0)  # the slot is needed now: wait for it (given up after 5 s)
                continue
            with self.cond:  # a slot in use elsewhere (a doctor's probe): wait for it
                if self.ready is None and not self.free and not self._ended:
                    if not self.cond.wait(max(deadline - time.monotonic(), 0.0)):
                        raise ConfigError("the sandbox's job slots did not become free within 30 s")
        return self._new(slot)

    def launch(self, source: bytes, _workdir: str, cpu: float, standby: bool = False) -> SandboxJob:
        """`grader.execution.jobs.Launcher`: the ready job gets the task; the next one starts meanwhile.

        A standby is the same as any job: it imports, then waits for its first call. The slot of
        the job before is settled, and the next job started ahead, by `chores`, which the job
        handed out carries (`SandboxJob.chores`) for the thread running its calls.
        """
        job = self._take()
        job.assign(source, cpu)
        job.chores = self.chores
        return job

    def close(self) -> None:
        """Stop the job started ahead (or starting), if any, and settle the jobs still ending."""
        with self.cond:
            self.closing = True
            ready, self.ready = self.ready, None
        try:
            self._take_started(block=True)  # closing: killed there
        except Exception:  # noqa: BLE001 - the zygote is gone: nothing to stop
            pass
        if ready is not None:
            ready.kill()
        self._settle_ended(5.0)


class Pool:
    """The sandbox's workers, lent one submission at a time (`grader.execution.jobs.LauncherPool`).

    Lent from configure time: the first `slot` (or `ready`) waits for the sandbox's start-up
    (`Starting`) and raises what went wrong there. A *lazy* pool is given how to start the
    sandbox instead, and starts it at its first `slot` (a Dask client, which grades here only
    what its cluster could not).
    """

    def __init__(self, starting: Starting | Callable[[], Starting], lazy: bool = False) -> None:
        self._starting = starting
        self.lazy = lazy
        self._slots: queue.SimpleQueue[Worker] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def ready(self) -> queue.SimpleQueue[Worker]:
        """The workers, once the zygote is ready and the preflight passed (waits for both; raises ConfigError)."""
        if self._slots is None:
            with self._lock:
                if self._slots is None:
                    if self._closed:  # its runner was dropped or the run stopped: its zygote is gone
                        raise JobStarterLost(ZYGOTE_NAME)
                    if not isinstance(self._starting, Starting):
                        self._starting = self._starting()
                    slots: queue.SimpleQueue[Worker] = queue.SimpleQueue()
                    for worker in self._starting.wait():
                        slots.put(worker)
                    self._slots = slots
        return self._slots

    def close(self) -> None:
        """Start nothing any more; a start under way (a lazy pool's, in a grading thread) ends first.

        The run's clean-up calls it before it stops the sandbox: a grading thread still starting a
        lazy pool when the run stops (Ctrl-C) would otherwise make the zygote and the job folder after
        the clean-up looked for them, and leave the folder behind.
        """
        with self._lock:
            self._closed = True

    @contextlib.contextmanager
    def slot(self) -> Iterator[Launcher]:
        slots = self.ready()
        worker = slots.get()  # one worker per concurrent submission; each has its own uids
        try:
            yield worker.launch
            if worker.zygote.lost or worker.zygote.proc.poll() is not None:
                # A job that failed meanwhile was killed with its zygote, not by the student's code: the
                # run stops rather than record that failure as the submission's (and resume it later).
                raise JobStarterLost(ZYGOTE_NAME)
        finally:
            slots.put(worker)
