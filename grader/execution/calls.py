"""`run_calls`: a submission's calls handed to its jobs phase by phase, each against its limits and its budget.

Timeouts count the job's CPU time, not the clock: a call's timeout is CPU
seconds of the job (`grader.execution.jobs.Job.cpu_seconds`), with a wall-clock backstop
`WALL_BACKSTOP_FACTOR` times larger for a call that waits (sleeps, blocks),
so load elsewhere on the machine never costs a correct submission a point.
Where the job's CPU time cannot be read, the timeout is wall-clock time.
Durations (`grader.models.CallResult.seconds`) are measured here, from
the hand-over (or the previous answer) to reading the call's answer, never
taken from the job.

A call that times out or kills its process costs only that call: the child
is killed and a fresh one runs the calls that remain (started as a standby
before the call's limit is reached, so a hang costs its timeout and no
restart). A whole submission also has a budget (``--submission-timeout``)
so that no submission can stall a batch: CPU seconds of its own jobs
(every worker and standby it ran), with a wall-clock backstop
`WALL_BACKSTOP_FACTOR` times larger, moved on by the jobs' waiting for a
CPU, for a submission that waits rather than computes (`_Budget`). The
import's limit (``--import-timeout``) is CPU time of the job too. So the
same submission gets the same results on a quiet machine, beside CPU hogs,
or in a Dask worker.

What the submission prints is kept up to the moment the first hidden call
(`grader.models.Call.hidden`) is sent: output after it could carry hidden
inputs, and is cut (`HIDDEN_CUT_NOTE`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from grader.child.limits import CPU_RLIMIT_MARGIN_SECONDS
from grader.execution.boundary import BoundaryError
from grader.execution.channel import OUTPUT_CAP_BYTES, JobChannel, result_of
from grader.execution.explain import explain_error
from grader.execution.jobs import CHANNEL_LOST, Job, Launcher, PlainJob, read_source
from grader.execution.memo import BudgetTable
from grader.fileio import scratch_prefix
from grader.models import Call, CallResult, RunOutcome, phase_wire

WALL_BACKSTOP_FACTOR = 4.0
"""A call may take this many times its (CPU-time) timeout in wall-clock time, waiting included."""
MIN_POLL_SECONDS = 0.01
"""Shortest wait between two readings of a job's CPU time."""
GATHER_SECONDS = 0.001
"""When a call's answer is not in yet, how long the grader lets the job go on before it waits for it.

A job answers a phase's fast calls a fraction of a millisecond apart: waking
for each answer costs the grader a sleep, a wake-up and the GIL again per
call. After this pause the answers that came meanwhile are read at once. It
is far below any call's timeout; a call's CPU time is counted from before
the pause (a busy machine may stretch the pause). Near a phase's end the
pause is as long as its last calls should take, at the pace of the calls
before them, so that a job that is done does not wait a whole pause.
"""
MIN_GATHER_SECONDS = 0.0001
"""A shorter pause than this is not taken: the grader waits for the answer itself."""
HIDDEN_CUT_NOTE = "[output after the first hidden check is not shown]"
"""Ends the kept output when the submission printed more after the first hidden call was sent."""


STANDBY_LEAD_SECONDS = 0.25
"""How long before a call's limit (of CPU time, or of wall-clock time) its successor worker is
started as a standby (seconds): more than a plain worker takes to start and import numpy."""


class PhaseWires(BudgetTable[tuple[int, ...], tuple[tuple[Call, ...], bytes]]):
    """The bytes of the phases handed to jobs in a run (`grader.models.phase_wire`), by their very calls.

    Every submission of a class gets the same phases: a phase with large arguments (a few
    hundred KiB of raw doubles) is joined once, not once per job. A phase is known by its calls'
    ids, kept with it (so no other object can take one of those ids). At most `MAX_BYTES` of
    phases; past that the table starts again. Thread-safe.
    """

    MAX_BYTES = 32 << 20
    """Bytes of phases kept, at most (32 MiB)."""

    def wire(self, calls: Sequence[Call]) -> bytes:
        """`grader.models.phase_wire` of ``calls``, from the table when these very calls were joined before."""
        key = tuple(map(id, calls))
        kept = self._kept(key)
        if kept is not None:
            return kept[1]
        wire = phase_wire(calls)
        self._keep(key, len(wire), (tuple(calls), wire))
        return wire


PHASES = PhaseWires()
"""The grader's one table of phases' bytes (`PhaseWires`)."""


def _standby(launch: Launcher, source: bytes, workdir: str, cpu: float) -> Job:
    """Start a worker ahead, as a standby (see `Launcher`)."""
    return launch(source, workdir, cpu, standby=True)


def phases(calls: Sequence[Call]) -> list[tuple[int, int]]:
    """The hand-overs of ``calls``: ``(start, end)`` of the calls before the first hidden one, then of the rest.

    A job is handed a phase at once; the hidden phase only once every
    visible call has answered and what the submission printed until then
    is kept (see `run_calls`). One phase when no call (or every call) is hidden.
    """
    first_hidden = next((i for i, c in enumerate(calls) if c.hidden), len(calls))
    cuts = [0, first_hidden, len(calls)]
    return [(x, y) for x, y in itertools.pairwise(cuts) if y > x]


class _Budget:
    """A submission's budget: CPU seconds of its own jobs, and a wall-clock backstop for true hangs.

    Every job the submission runs (its workers, the standbys started for
    it) is charged its CPU time when it ends (`charge`); the job running
    now counts what it has used so far (`cpu_left`). So the budget is
    spent only by the submission's own processes, however busy the machine
    is. The backstop (`end`) is `WALL_BACKSTOP_FACTOR` times the budget in
    wall-clock time, moved on by the time the jobs spent waiting for a CPU
    (`extend`): it stops a submission that waits (sleeps, blocks) rather
    than computes. Where a job's CPU time cannot be read, the budget is
    wall-clock time, as the calls' limits are.

    Parameters
    ----------
    seconds : float
        The budget (``--submission-timeout``): CPU seconds of the submission's jobs.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spent = 0.0  # CPU seconds of the jobs that are over
        self.waited = 0.0  # seconds those jobs waited for a CPU
        self.cpu_timed = True  # False once a job's CPU time could not be read: wall-clock time then
        self.began = time.monotonic()
        self.wall = seconds * WALL_BACKSTOP_FACTOR
        self.end = self.began + self.wall
        self.over_cpu = f"the submission used up its {seconds:g} s budget of CPU time"
        self.over_wall = f"the submission used up its {self.wall:g} s budget of wall-clock time"

    def wall_only(self) -> None:
        """Time the submission by the wall clock: its jobs' CPU time cannot be read here."""
        if self.cpu_timed:
            self.cpu_timed = False
            self.wall = self.seconds
            self.end = self.began + self.seconds
            self.over_wall = f"the submission used up its {self.seconds:g} s budget"

    def cpu_left(self, job_cpu: float) -> float:
        """CPU seconds left, the running job having used ``job_cpu`` (its `Job.cpu_seconds`)."""
        return self.seconds - self.spent - job_cpu

    def charge(self, job: Job) -> None:
        """Count the CPU time (and CPU waiting) of a job about to end."""
        cpu = job.cpu_seconds()
        if cpu is not None:
            self.spent += cpu
        waited = getattr(job, "wait_seconds", None)
        wait = waited() if waited is not None else None
        if wait is not None:
            self.waited += wait

    def extend(self, job: Job) -> bool:
        """Move the backstop on by the running ``job``'s waiting for a CPU; whether it is still ahead."""
        waited = getattr(job, "wait_seconds", None)
        wait = waited() if waited is not None and self.cpu_timed else None
        now = time.monotonic()
        if wait is not None:
            moved = max(self.end, self.began + self.wall + self.waited + wait)
            if moved > now:  # moved past now: the budget lasts; else the end stays where the backstop met it
                self.end = moved
        return self.end > now

    def used_up(self) -> str:
        """Why no more call may start ('' while the budget lasts), between jobs."""
        if self.cpu_timed and self.spent >= self.seconds:
            return self.over_cpu
        if time.monotonic() >= self.end and self.cpu_timed:
            self.end = max(self.end, self.began + self.wall + self.waited)
        return self.over_wall if time.monotonic() >= self.end else ""


def _await_import(child: JobChannel, import_timeout: float, budget: _Budget, sink: dict[str, bytearray]) -> Any:
    """The job's import frame (`JobChannel.read_frame`), or ``"timeout"``, or the budget's reason it is used up.

    The import's limit is ``import_timeout`` seconds of the job's CPU time
    (its start and set-up included), with a wall-clock backstop
    `WALL_BACKSTOP_FACTOR` times larger, moved on by the job's waiting for
    a CPU; where the job's CPU time cannot be read, ``import_timeout``
    seconds of wall-clock time.
    """
    began = time.monotonic()
    own_backstop = began + import_timeout * WALL_BACKSTOP_FACTOR
    job = child.job
    waited = getattr(job, "wait_seconds", None)
    readable = getattr(job, "cpu_readable", None)
    timed = budget.cpu_timed and readable is not None and bool(readable())
    while True:
        now = time.monotonic()
        cpu = job.cpu_seconds() if budget.cpu_timed else None
        if cpu is None and timed:  # nothing counted yet (still setting up): only the backstop applies
            used, limit, capped = 0.0, import_timeout, False
        elif cpu is None:  # not readable: the clock
            used, limit, capped = now - began, import_timeout, False
        else:
            left = budget.cpu_left(cpu)
            used, limit, capped = cpu, min(import_timeout, max(cpu + left, 0.0)), left < import_timeout - cpu
        if used >= limit:
            return budget.over_cpu if capped else "timeout"
        backstop = min(own_backstop, budget.end)
        if now >= backstop and (cpu is not None or timed):
            # The job's waiting for a CPU (since it started: a standby's too) is not the import's.
            wait = waited() if waited is not None else None
            if wait is not None:
                own_backstop = max(own_backstop, began + import_timeout * WALL_BACKSTOP_FACTOR + wait)
            if backstop >= budget.end:
                budget.extend(job)
            backstop = min(own_backstop, budget.end)
        if now >= backstop:
            return budget.over_wall if backstop >= budget.end else "timeout"
        # CPU time grows no faster than the clock (one thread; a sandbox slot is capped at one CPU).
        step = max(limit - used, MIN_POLL_SECONDS) if cpu is not None or not timed else 0.5
        frame = child.read_frame(min(now + step, backstop), sink, "import")
        if frame != "timeout":
            return frame


def run_calls(
    file: str,
    calls: Sequence[Call],
    import_timeout: float = 10.0,
    submission_timeout: float = 120.0,
    launch: Launcher | None = None,
    scratch: bool = True,
    filename: str | None = None,
) -> RunOutcome:
    """Run ``calls`` against the submission ``file`` in child processes, a phase of calls at a time.

    The calls are handed to the job in two *phases* (`phases`): every call
    before the first hidden one, then, once each of those has answered and
    the submission's output so far is kept, the hidden calls. The job
    answers each call with its own frame as soon as it is done; a call is
    timed from the previous answer's arrival (or the phase's hand-over) to
    its own. Its timeout counts the job's CPU time in that span, with a
    wall-clock backstop of `WALL_BACKSTOP_FACTOR` times the timeout (wall
    time only, where the job's CPU time cannot be read). A call that times
    out or kills its process costs only that call: the calls after it run
    in a fresh worker. That worker is started as a *standby*
    `STANDBY_LEAD_SECONDS` before the call's limit (it sets up and imports
    the file, then waits for its calls), so when the call does time out the
    remaining calls go on at once and a hanging call costs its timeout and
    nothing more. A standby not needed (the call returned) is killed before
    it gets any call.

    Parameters
    ----------
    file : str
        The submission's Python file.
    calls : sequence of Call
        The calls to make, each with its own timeout in seconds (of CPU
        time), result budget and hidden flag.
    import_timeout : float
        CPU seconds allowed for the child to start and import the file
        (`_await_import`: a wall-clock backstop `WALL_BACKSTOP_FACTOR`
        times larger; wall-clock seconds where CPU time cannot be read).
    submission_timeout : float
        The whole submission's budget: CPU seconds of its jobs, with a
        wall-clock backstop (`_Budget`); calls not reached within it are
        reported as ``timeout``.
    launch : callable
        Starts a worker (`PlainJob` by default; the sandbox passes its own);
        see `Launcher`.
    scratch : bool
        Make a temporary folder for the workers (passed to ``launch``);
        False passes ``""`` (the sandbox's jobs have their own folders).
    filename : str, optional
        The name the default launcher gives the file in the job (the course
        pack's submission file); default: ``file``'s own name.

    Returns
    -------
    grader.models.RunOutcome
        One result per call, in order. ``import_error`` is set when the file
        could not be imported; every call is then ``skipped``. ``stdout``
        and ``stderr`` hold what was printed before the first hidden call
        was sent.
    """
    if launch is None:
        launch = functools.partial(PlainJob, filename=filename or os.path.basename(file))
    try:
        source = read_source(file)
    except OSError as exc:
        why = f"{Path(file).name} could not be read ({exc.strerror}); was it moved or changed during grading?"
        return RunOutcome(tuple(CallResult("skipped", message=why) for _ in calls), why)
    sha256 = hashlib.sha256(source).hexdigest()
    run = _Submission(calls, source, launch, import_timeout, submission_timeout)
    with (
        tempfile.TemporaryDirectory(prefix=scratch_prefix("job")) if scratch else contextlib.nullcontext("") as workdir
    ):
        run.run(workdir)
    out = [r if r is not None else CallResult("skipped", message="not run") for r in run.results]
    mark = run.mark
    stdout = _decode(run.sink["stdout"], mark[0] if mark else None)
    stderr = _decode(run.sink["stderr"], mark[1] if mark else None)
    return RunOutcome(tuple(out), run.import_error, stdout, stderr, sha256)


class _Submission:
    """One submission's run of `run_calls`: its calls' results so far, its output, its budget and its standby."""

    def __init__(
        self, calls: Sequence[Call], source: bytes, launch: Launcher, import_timeout: float, submission_timeout: float
    ) -> None:
        self.calls, self.source, self.launch, self.import_timeout = calls, source, launch, import_timeout
        self.workdir = ""
        self.results: list[CallResult | None] = [None] * len(calls)
        self.sink = {"stdout": bytearray(), "stderr": bytearray()}
        self.mark: tuple[int, int] | None = None  # the output's lengths when the first hidden call was sent
        self.import_error = ""
        self.budget = _Budget(submission_timeout)
        self.phase_ends = [end for _, end in phases(calls)]
        self.standby: JobChannel | None = None  # a worker for calls[start:], imported or importing, waiting for a call

    def cpu_for(self, pending: Sequence[Call]) -> float:
        return self.import_timeout + sum(c.timeout for c in pending) + CPU_RLIMIT_MARGIN_SECONDS

    def out_of_time(self, start: int, why: str) -> None:
        for j in range(start, len(self.calls)):
            self.results[j] = CallResult("timeout", message=f"not run: {why}")

    def run(self, workdir: str) -> None:
        """Run the calls, a job at a time, until every call has its result or no more may run."""
        self.workdir = workdir
        start = 0
        try:
            while start < len(self.calls):
                spent = self.budget.used_up()
                if spent:
                    self.out_of_time(start, spent)
                    break
                if self.standby is not None:  # started while the call before it was about to time out
                    child, self.standby = self.standby, None
                else:
                    child = JobChannel(self.launch(self.source, workdir, self.cpu_for(self.calls[start:])))
                after = self._run_job(child, start)
                if after is None:
                    break
                start = after
        finally:
            if self.standby is not None:
                self.budget.charge(self.standby.job)
                self.standby.kill()

    def _run_job(self, child: JobChannel, start: int) -> int | None:
        """Run ``calls[start:]`` in ``child``, phase by phase; where the next job starts, or None to stop."""
        calls, sink, budget = self.calls, self.sink, self.budget
        handover = False  # True once a standby took over from this worker
        try:
            frame = _await_import(child, self.import_timeout, budget, sink)
            if frame in (budget.over_cpu, budget.over_wall):
                assert isinstance(frame, str)
                self.out_of_time(start, frame)
                return None
            if not isinstance(frame, dict) or not frame["ok"]:
                self.import_error = _import_problem(frame, child, self.import_timeout, again=self.mark is not None)
                for j in range(start, len(calls)):
                    self.results[j] = CallResult("skipped", message=self.import_error)
                return None
            child.imported = True
            if budget.cpu_timed and child.job.cpu_seconds() is None:
                budget.wall_only()  # this job's CPU time cannot be read: the clock times it
            stop_at = len(calls)
            j = start
            while j < len(calls):
                end = next(e for e in self.phase_ends if e > j)
                if calls[j].hidden and self.mark is None:
                    child.drain(sink)
                    self.mark = (len(sink["stdout"]), len(sink["stderr"]))
                got, failed, self.standby = _run_phase(
                    child,
                    calls,
                    j,
                    end,
                    budget,
                    sink,
                    lambda pending: _standby(self.launch, self.source, self.workdir, self.cpu_for(pending)),
                )
                self.results[j : j + len(got)] = got
                if failed:
                    handover = self.standby is not None
                    stop_at = j + len(got)
                    break
                j = end
            else:
                child.finished = True
                child.drain(sink)  # what it printed with its last answer
            return stop_at
        finally:
            # A job replaced by its standby, or done, is ended without waiting (see `Job.kill`).
            if not child.finished:  # every call answered: no job after this one spends the budget
                budget.charge(child.job)
            child.kill(wait=not (handover or child.finished))


def _run_phase(
    child: JobChannel,
    calls: Sequence[Call],
    start: int,
    end: int,
    budget: _Budget,
    sink: dict[str, bytearray],
    start_standby: Callable[[Sequence[Call]], Job],
) -> tuple[list[CallResult], bool, JobChannel | None]:
    """Hand ``calls[start:end]`` to ``child`` at once and read one answer per call, each against its own limits.

    Call ``k`` is timed from the moment the answer before it was read (the
    phase's hand-over, for the first) until its own answer is read; its
    CPU time is the job's in that span (every call before it had answered,
    so no later call had started), counted from before a pause of
    `GATHER_SECONDS` when its answer was not in yet. A frame already in the
    pipe is read without waiting.

    Returns
    -------
    (list of CallResult, bool, JobChannel or None)
        The results of the calls answered (the last one the call that
        failed, when the job cannot go on), whether the job must be
        replaced, and the standby started meanwhile (None if none is, or it
        is not needed: a standby not needed is killed here).
    """
    got: list[CallResult] = []
    began = time.monotonic()
    first = calls[start]
    # Read once after the job's import (`_Submission._run_job`): the budget says whether it could be.
    cpu_timed = budget.cpu_timed or child.job.cpu_seconds() is not None
    phase_wait0: float | None = None  # the job's CPU waiting so far, read at the phase's first wait
    sent = child.send(PHASES.wire(calls[start:end]), min(began + first.timeout * WALL_BACKSTOP_FACTOR, budget.end))
    standby: JobChannel | None = None
    phase_began = began
    for j in range(start, end):
        call = calls[j]
        if j > start:
            began = time.monotonic()
        taken = child.take_ready(call.budget) if sent == "sent" else None
        if isinstance(taken, dict):  # read with the answer before it: no waiting, no clock, no CPU reading
            got.append(result_of(taken, time.monotonic() - began, child.last_wire, child.last_large))
            continue
        # An answer already read needs no CPU reading (it came in time); others are timed from now.
        ready = taken is not None or child.frame_ready()
        cpu_before: float | None = None
        if not ready and sent == "sent" and child.result_open:
            ready, cpu_before = _gather(child, j, start, end, phase_began, cpu_timed)
        if not cpu_timed:
            cpu0 = None
        elif ready:
            cpu0 = 0.0
        else:
            cpu0 = cpu_before if cpu_before is not None else child.job.cpu_seconds()
        wall_limit = call.timeout * WALL_BACKSTOP_FACTOR if cpu0 is not None else call.timeout
        limit, capped = _cpu_limit(call, budget, cpu0, ready)
        own_backstop = began + wall_limit
        backstop = min(own_backstop, budget.end)
        waited = getattr(child.job, "wait_seconds", None) if cpu0 is not None and not ready else None
        if waited is not None and phase_wait0 is None:
            # Read once a phase: a call's waiting is counted from the phase's first unanswered call,
            # which can only move a backstop further (the submission's budget still bounds it).
            phase_wait0 = waited()
        wait0 = phase_wait0
        want_standby = j + 1 < len(calls) and call.timeout > STANDBY_LEAD_SECONDS
        frame: dict[str, Any] | str | BoundaryError = sent
        if taken is not None:  # a frame already read, refused
            frame = taken
        elif sent == "sent" and ready:  # its answer is already read: no waiting, no clock
            frame = child.read_frame(budget.end, sink, "call", call.budget)
        elif sent == "sent":
            polled = cpu_before is not None  # the call ran through the pause: look at its CPU at once
            frame, backstop, standby = _await_answer(
                child,
                call,
                budget,
                sink,
                _CallLimits(began, cpu0, limit, capped, wall_limit, own_backstop, backstop, waited, wait0),
                polled,
                standby,
                functools.partial(start_standby, calls[j + 1 :]) if want_standby else None,
            )
        seconds = time.monotonic() - began
        if isinstance(frame, dict):
            result: CallResult = result_of(frame, seconds, child.last_wire, child.last_large)
        elif isinstance(frame, BoundaryError) and not frame.fatal:  # a well-formed frame whose value is refused
            result = CallResult("bad_return", message=frame.message, seconds=seconds)
        else:
            got.append(_failed_call(frame, child, call, cpu0 is not None, backstop >= budget.end, budget, seconds))
            return got, True, standby
        got.append(result)
        if standby is not None:  # the call answered in time after all
            standby.kill()
            standby = None
    if end < len(calls) and child.pending():
        # More answers than calls (frames the submission wrote itself), or the job ended right after
        # answering: the next phase goes to a fresh job, never to a stale answer.
        return got, True, None
    return got, False, None


def _cpu_limit(call: Call, budget: _Budget, cpu0: float | None, ready: bool) -> tuple[float, bool]:
    """The call's CPU limit, or what is left of the submission's CPU budget if that is less (then True)."""
    limit, capped = call.timeout, False
    if cpu0 is not None and not ready and budget.cpu_timed:
        left = budget.cpu_left(cpu0)
        if left < limit:
            limit, capped = max(left, 0.0), True
    return limit, capped


def _gather(
    child: JobChannel, j: int, start: int, end: int, phase_began: float, cpu_timed: bool
) -> tuple[bool, float | None]:
    """Let the answers of the next fast calls gather (`GATHER_SECONDS`), then look whether call ``j``'s is in.

    Near the phase's end the pause is only about as long as its last calls should take (at the pace
    of the ones before); for the phase's last call it ends as soon as the job writes its answer (the
    job then waits for the grader: its next phase, or its end). A job's launcher may have chores for
    the grader (`grader.builtin.sandbox.handle.SandboxJob.chores`), which never wait: done before it.
    Returns whether a whole frame is read now, and the job's CPU time read
    before the pause (None when no pause was taken, or its CPU time is not read).
    """
    pause = GATHER_SECONDS
    if j > start:
        pause = min(pause, (time.monotonic() - phase_began) / (j - start) * (end - j))
    if pause < MIN_GATHER_SECONDS:
        return False, None
    # Read before the pause: a busy machine may stretch it well past its length, and the
    # call's CPU in it is the call's.
    cpu_before = child.job.cpu_seconds() if cpu_timed else None
    chores = getattr(child.job, "chores", None)
    if chores is not None and chores():  # its launcher's chores, which never wait (see `SandboxJob.chores`)
        child.job.chores = None  # type: ignore[attr-defined]
    if end - j == 1:
        child.wait_result(pause)  # the phase's last answer: no answer gathers after it, the job waits for it
    else:
        time.sleep(pause)
    child.empty = False
    return child.frame_ready(), cpu_before


class _CallLimits(NamedTuple):
    """One call's limits while its answer is awaited (`_await_answer`), as `_run_phase` set them."""

    began: float
    cpu0: float | None  # the job's CPU time when the call began; None: the call is timed by the clock
    limit: float  # CPU seconds (or wall-clock seconds, when cpu0 is None)
    capped: bool  # the limit is what is left of the submission's budget
    wall_limit: float
    own_backstop: float
    backstop: float
    waited: Callable[[], float | None] | None  # the job's waiting for a CPU so far, where it can be read
    wait0: float | None  # that waiting when the phase's first unanswered call began


def _await_answer(
    child: JobChannel,
    call: Call,
    budget: _Budget,
    sink: dict[str, bytearray],
    limits: _CallLimits,
    polled: bool,
    standby: JobChannel | None,
    start_next: Callable[[], Job] | None,
) -> tuple[dict[str, Any] | str | BoundaryError, float, JobChannel | None]:
    """Wait for a call's answer against its CPU limit and its wall-clock backstop.

    ``polled``: look at the job's CPU time at once (the call ran through a pause). ``start_next``
    starts the calls' next worker as a standby `STANDBY_LEAD_SECONDS` before the call's limit (None:
    no standby is wanted). Returns the frame (or ``"budget"``, ``"cpu"``, ``"wall"``), the backstop
    as it stood last, and the standby (``standby``, or the one started here).
    """
    began, cpu0, limit, capped, wall_limit, own_backstop, backstop, waited, wait0 = limits
    want_standby = start_next is not None
    while True:
        now = time.monotonic()
        if cpu0 is None:
            used = now - began
        elif polled:
            cpu = child.job.cpu_seconds()
            used = (cpu - cpu0) if cpu is not None else now - began
        else:
            used = 0.0  # nothing ran yet that a wait of the whole budget could overrun
        if limit - used <= 0:
            frame: dict[str, Any] | str | BoundaryError = (
                ("budget" if capped else "cpu") if cpu0 is not None else "wall"
            )
            break
        if backstop - now <= 0 and waited is not None and wait0 is not None and backstop < budget.end:
            # Time the job spent waiting for a CPU (a busy machine) is not the call's: the backstop
            # moves on by it, so a call that computes meets its CPU limit first, however busy.
            waited_now = waited()
            left = wall_limit - (now - began - (waited_now - wait0)) if waited_now is not None else 0.0
            if left > 0:
                own_backstop = now + left
                backstop = min(own_backstop, budget.end)
        if backstop - now <= 0 and backstop >= budget.end and budget.extend(child.job):
            backstop = min(own_backstop, budget.end)  # the submission's backstop moved on by its waiting
        if backstop - now <= 0:
            frame = "wall"
            break
        remaining = min(limit - used, backstop - now)
        if start_next is not None and standby is None and remaining <= STANDBY_LEAD_SECONDS:
            standby = JobChannel(start_next())  # the call may hang: get its successor ready
        lead = STANDBY_LEAD_SECONDS if want_standby and standby is None else 0.0
        wait = max(remaining - lead, MIN_POLL_SECONDS)
        frame = child.read_frame(min(now + wait, backstop), sink, "call", call.budget)
        polled = True
        if frame != "timeout":
            break
    return frame, backstop, standby


def _failed_call(
    frame: str | BoundaryError,
    child: JobChannel,
    call: Call,
    cpu_timed: bool,
    budget_bound: bool,
    budget: _Budget,
    seconds: float,
) -> CallResult:
    """The result of a call that did not answer: timed out, refused, or the job ended or lost its channel."""
    if frame == "budget":
        return CallResult("timeout", message=budget.over_cpu, seconds=seconds)
    if frame == "cpu":
        return CallResult("timeout", message=f"the call used more than {call.timeout:g} s of CPU time", seconds=seconds)
    if frame in ("wall", "timeout"):
        if budget_bound:
            return CallResult("timeout", message=budget.over_wall, seconds=seconds)
        if not cpu_timed:
            return CallResult("timeout", message=f"the call took longer than {call.timeout:g} s", seconds=seconds)
        return CallResult(
            "timeout",
            seconds=seconds,
            message=(f"the call took longer than {call.timeout * WALL_BACKSTOP_FACTOR:g} s of wall-clock time"),
        )
    if isinstance(frame, BoundaryError):
        return CallResult("crashed", message=frame.message, seconds=seconds)
    if frame == "closed" and child.job.exit_code(0.5) is None:  # alive, but its call pipe is gone
        return CallResult("crashed", message=CHANNEL_LOST, seconds=seconds)
    return CallResult("crashed", message=child.exit_description(), seconds=seconds)


def _import_problem(
    frame: dict[str, Any] | str | BoundaryError, child: JobChannel, import_timeout: float, again: bool = False
) -> str:
    """One sentence saying why the submission could not be imported.

    ``again``: a worker started after the first hidden call (to replace one
    that ended) failed to import what imported before; its message, which
    the submission wrote and could fill with a hidden input, is not repeated.
    """
    if isinstance(frame, dict):
        kind, where = frame["type"], frame["where"]
        location = f" ({where})" if where else ""
        if again:
            return f"importing the file again (after a check that ended its process) failed with {kind}{location}"
        message = frame["message"]
        return f"importing the file failed with {kind}{location}: {message}{explain_error(kind, message)}"
    if frame == "timeout":
        return f"importing the file took longer than {import_timeout:g} s (does it run a loop at top level?)"
    if isinstance(frame, BoundaryError):
        return f"importing the file failed: {frame.message}"
    return f"importing the file failed: {child.exit_description()}"


def _decode(data: bytearray, mark: int | None = None) -> str:
    """Captured output as text: capped, and cut where the first hidden call was sent (``mark``)."""
    cut = mark is not None and len(data) > mark
    kept = data[:mark] if cut else data
    text = bytes(kept[:OUTPUT_CAP_BYTES]).decode("utf-8", errors="replace")
    if len(kept) > OUTPUT_CAP_BYTES:
        text += f"\n[output cut at {OUTPUT_CAP_BYTES // 1024} KiB]"
    if cut:
        text += ("" if not text or text.endswith("\n") else "\n") + HIDDEN_CUT_NOTE
    return text
