"""Built-in plugin: run a submission's calls in a child process.

The student's code never runs in the grader's process. Per submission, a
child ``python -I -B -u grader/worker.py`` starts in a fresh temporary
folder, with a scrubbed environment (BLAS threads pinned to 1), its own
session (process group), stdin from /dev/null and rlimits on CPU time, core
dumps and file size. It sends back length-prefixed JSON frames on a
dedicated pipe; stdout and stderr are read against a deadline and capped.

Each call has its own wall-clock timeout. A call that times out or kills
its process costs only that call: the child is killed and a fresh one runs
the calls that remain (started as a standby before the call's deadline, so
a hang costs its timeout and no restart). A whole submission also has a time
budget (``--submission-timeout``) so that no submission can stall a batch.

This runner is registered ``trylast``: a stricter sandbox plugin that
implements ``grader_run_calls`` replaces it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from grader.models import Call, CallResult, RunOutcome, Submission
from grader.fileio import scratch_prefix
from grader.plugins import hookimpl

WORKER = str(Path(__file__).resolve().parent.parent / "worker.py")
MAX_FRAME_BYTES = 64 << 20
"""Largest result frame accepted from the child, in bytes (64 MiB)."""
EOF_GRACE_SECONDS = 0.25
"""After the result pipe closes, how long stdout and stderr are still read."""
MAX_FRAME_DEPTH = 32
"""Deepest nesting of lists and dicts accepted in a frame (the worker sends at most 9)."""
OUTPUT_CAP_BYTES = 16 << 10
"""Bytes of stdout and of stderr kept per submission (16 KiB each)."""
CHILD_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
}
"""The child's whole environment (plus HOME and TMPDIR set to its folder)."""


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds greater than 0 (and finite)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


@hookimpl
def grader_addoption(parser: Any) -> None:
    group = parser.add_argument_group("running submissions")
    group.add_argument(
        "--import-timeout", type=positive_seconds, default=10.0, metavar="SECONDS",
        help="seconds a submission may take to start and import (default: 10)",
    )
    group.add_argument(
        "--submission-timeout", type=positive_seconds, default=120.0, metavar="SECONDS",
        help="wall-clock budget of one submission, all calls included (default: 120)",
    )


def read_source(path: str) -> bytes:
    """Read a submission file once, without following a symbolic link.

    Raises
    ------
    OSError
        If the path is a symbolic link (``ELOOP``), gone, unreadable, or
        larger than the locator's limit (``EFBIG``).
    """
    from grader.builtin.submission import MAX_SOURCE_BYTES

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:  # it grew after it was located
        raise OSError(errno.EFBIG, f"larger than {MAX_SOURCE_BYTES >> 20} MiB")
    return data


def write_request(workdir: str, source: bytes, calls: Sequence[Call], cpu_seconds: float, standby: bool = False) -> str:
    """Write the submission into a new folder of ``workdir``, and the worker's request beside it, as JSON.

    Returns the request's path.
    """
    folder = tempfile.mkdtemp(prefix="worker-", dir=workdir)
    file = os.path.join(folder, "attention.py")
    with open(file, "wb") as fh:
        fh.write(source)
    request = {
        "file": file,
        "cpu_seconds": cpu_seconds,
        "standby": standby,
        "calls": [c.request for c in calls],
    }
    fd, request_path = tempfile.mkstemp(prefix="request-", suffix=".json", dir=workdir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(request, fh, allow_nan=True)
    return request_path


class Job(Protocol):
    """A running worker, as the parent sees it: three pipes to read, and control.

    Attributes
    ----------
    result_fd, stdout_fd, stderr_fd : int
        Read ends owned by the parent (closed by `_Child.kill`).
    """

    result_fd: int
    stdout_fd: int
    stderr_fd: int

    def kill(self, finished: bool = False, wait: bool = True) -> None:
        """Kill the worker and everything it started.

        ``finished`` is True when the worker answered every call and is
        exiting on its own: a job may then be given a moment to finish.
        ``wait=False`` (its standby took over) allows not waiting for the
        worker to be gone, if the launcher waits later.
        """

    def go(self) -> None:
        """Let a standby worker (launched with ``standby=True``, already imported) make its calls."""

    def exit_description(self) -> str:
        """Say how the worker ended, in words a student understands."""


Launcher = Callable[..., Job]
"""``launch(source, calls, workdir, cpu_seconds, standby=False) -> Job`` starts a worker on the
submission's bytes (read once by `run_calls`, so every worker of a submission runs the same file).

A standby worker starts, imports the file, then waits for `Job.go` before its first call."""


class PlainJob:
    """A worker in a plain child process (new session, scrubbed environment)."""

    def __init__(self, source: bytes, calls: Sequence[Call], workdir: str, cpu_seconds: float, standby: bool = False) -> None:
        request_path = write_request(workdir, source, calls, cpu_seconds, standby)
        read_fd, write_fd = os.pipe()
        env = dict(CHILD_ENV, HOME=workdir, TMPDIR=workdir)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-u", WORKER, request_path, str(write_fd)],
                stdin=subprocess.PIPE if standby else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.result_fd = read_fd
        self.stdout_fd = os.dup(self.proc.stdout.fileno())
        self.stderr_fd = os.dup(self.proc.stderr.fileno())
        self.proc.stdout.close()
        self.proc.stderr.close()

    def go(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write(b"g")
                self.proc.stdin.close()
            except OSError:
                pass  # it is gone; reading its frames will say so

    def kill(self, finished: bool = False, wait: bool = True) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass

    def exit_description(self) -> str:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "the process stopped answering"
        return describe_exit(code)


def describe_exit(code: int) -> str:
    """Words for a worker's exit code (negative: killed by that signal)."""
    if code < 0:
        sig = -code
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return f"the process was killed ({name}): it used up its CPU time or memory"
        if sig == signal.SIGXFSZ:
            return f"the process was killed ({name}): it wrote a file larger than allowed"
        return f"the process was killed by signal {name}"
    return f"the process exited with code {code} before answering"


class _Child:
    """The parent's side of one job: reads frames and output against deadlines."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.result_fd = job.result_fd
        self.buffer = bytearray()
        self.selector = selectors.DefaultSelector()
        self.selector.register(job.result_fd, selectors.EVENT_READ, "result")
        self.selector.register(job.stdout_fd, selectors.EVENT_READ, "stdout")
        self.selector.register(job.stderr_fd, selectors.EVENT_READ, "stderr")
        self.result_open = True
        self.eof_grace_end: float | None = None
        self.closed = False
        self.finished = False  # set when every call was answered

    def read_frame(self, deadline: float, sink: dict[str, bytearray]) -> dict[str, Any] | str:
        """Return the next frame, or ``"timeout"``, ``"eof"`` or ``"oversize"``."""
        while True:
            frame = self._pop_frame()
            if frame is not None:
                return frame
            if not self.result_open:
                # Briefly keep reading stdout and stderr: what the job wrote just before it
                # ended (why it crashed, why its setup failed) must not be lost.
                if self.eof_grace_end is None:
                    self.eof_grace_end = time.monotonic() + EOF_GRACE_SECONDS
                remaining = self.eof_grace_end - time.monotonic()
                if remaining <= 0 or not self.selector.get_map():
                    return "eof"
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return "timeout"
            for key, _ in self.selector.select(remaining):
                fileobj = key.fileobj
                fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    self.selector.unregister(fileobj)
                    if key.data == "result":
                        self.result_open = False
                    continue
                if key.data == "result":
                    self.buffer += chunk
                    if len(self.buffer) > MAX_FRAME_BYTES + 4:
                        return "oversize"
                else:
                    kept = sink[key.data]
                    room = OUTPUT_CAP_BYTES + 1 - len(kept)
                    if room > 0:
                        kept += chunk[:room]

    def _pop_frame(self) -> dict[str, Any] | None | str:
        if len(self.buffer) < 4:
            return None
        size = int.from_bytes(self.buffer[:4], "big")
        if size > MAX_FRAME_BYTES:
            return "oversize"
        if len(self.buffer) < 4 + size:
            return None
        data = bytes(self.buffer[4 : 4 + size])
        del self.buffer[: 4 + size]
        try:
            frame = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: JSON nested too deep
            return {"event": "garbled"}
        if not isinstance(frame, dict):
            return {"event": "garbled"}
        # Nesting cannot exceed the number of opening brackets: scan only when it could.
        if data.count(b"[") + data.count(b"{") > MAX_FRAME_DEPTH and _nesting(frame) > MAX_FRAME_DEPTH:
            return {"event": "garbled"}
        return frame

    def exit_description(self) -> str:
        """Say how the job ended, once it is gone."""
        return self.job.exit_description()

    def kill(self, wait: bool = True) -> None:
        """Kill the job and release the pipes (idempotent); see `Job.kill` for ``wait``."""
        if self.closed:
            return
        self.closed = True
        self.job.kill(finished=self.finished, wait=wait)
        self.selector.close()
        for fd in (self.job.result_fd, self.job.stdout_fd, self.job.stderr_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def _nesting(value: Any) -> int:
    """How deeply lists and dicts nest in ``value`` (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, list):
            stack.extend((x, depth + 1) for x in item)
        elif isinstance(item, dict):
            stack.extend((x, depth + 1) for x in item.values())
    return deepest


def _call_result(frame: dict[str, Any]) -> CallResult:
    """Validate a call frame from the child and turn it into a `CallResult`."""
    status = frame.get("status")

    def text(key: str) -> str:
        value = frame.get(key, "")
        return value[:2000] if isinstance(value, str) else ""

    seconds = frame.get("seconds", 0.0)
    seconds = float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else 0.0
    mutated = frame.get("mutated", [])
    mutated_args = tuple(
        sorted({i for i in mutated if type(i) is int and 0 <= i < 64}) if isinstance(mutated, list) else ()
    )[:64]
    if status == "returned":
        return CallResult("returned", value=frame.get("value"), seconds=seconds, mutated_args=mutated_args)
    if status == "raised":
        return CallResult(
            "raised",
            error_type=text("type")[:100] or "Exception",
            value_error=frame.get("value_error") is True,
            message=text("message"),
            where=text("where"),
            seconds=seconds,
            mutated_args=mutated_args,
        )
    if status in ("not_implemented", "bad_return"):
        return CallResult(status, message=text("message"), seconds=seconds, mutated_args=mutated_args)
    return CallResult("crashed", message="the worker sent a malformed answer")


def run_calls(
    file: str,
    calls: Sequence[Call],
    import_timeout: float = 10.0,
    submission_timeout: float = 120.0,
    launch: Launcher = PlainJob,
    scratch: bool = True,
) -> RunOutcome:
    """Run ``calls`` against the submission ``file`` in child processes.

    A call that times out or kills its process costs only that call: the
    calls after it run in a fresh worker. That worker is started as a
    *standby* `STANDBY_LEAD_SECONDS` before the call's deadline (it sets up
    and imports the file, then waits), so when the call does time out the
    remaining calls go on at once and a hanging call costs its timeout and
    nothing more. A standby not needed (the call returned) is killed before
    it makes any call.

    Parameters
    ----------
    file : str
        The submission's Python file.
    calls : sequence of Call
        The calls to make, each with its own timeout in seconds.
    import_timeout : float
        Seconds allowed for the child to start and import the file.
    submission_timeout : float
        Wall-clock seconds for the whole submission; calls not reached in
        time are reported as ``timeout``.
    launch : callable
        Starts a worker (`PlainJob` by default; the sandbox passes its own);
        see `Launcher`.
    scratch : bool
        Make a temporary folder for the workers (passed to ``launch``);
        False passes ``""`` (the sandbox's jobs have their own folders).

    Returns
    -------
    grader.models.RunOutcome
        One result per call, in order. ``import_error`` is set when the file
        could not be imported; every call is then ``skipped``.
    """
    try:
        source = read_source(file)
    except OSError as exc:
        why = f"{Path(file).name} could not be read ({exc.strerror}); was it moved or changed during grading?"
        return RunOutcome(tuple(CallResult("skipped", message=why) for _ in calls), why)
    sha256 = hashlib.sha256(source).hexdigest()
    results: list[CallResult | None] = [None] * len(calls)
    sink = {"stdout": bytearray(), "stderr": bytearray()}
    import_error = ""
    budget_end = time.monotonic() + submission_timeout
    over_budget = f"the submission used up its {submission_timeout:g} s budget"

    def cpu_for(pending: Sequence[Call]) -> float:
        return import_timeout + sum(c.timeout for c in pending) + 5.0

    start = 0
    standby: _Child | None = None  # a worker for calls[start:], waiting for its go
    went = 0.0  # when the standby now running was told to go: its first call started then
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("job")) if scratch else contextlib.nullcontext("") as workdir:
        try:
            while start < len(calls):
                if time.monotonic() >= budget_end:
                    for j in range(start, len(calls)):
                        results[j] = CallResult("timeout", message=f"not run: {over_budget}")
                    break
                handover = False  # True once a standby took over from this worker
                if standby is not None:  # told to go when the call before it failed
                    child, standby = standby, None
                else:
                    went = 0.0
                    child = _Child(launch(source, calls[start:], workdir, cpu_for(calls[start:])))
                try:
                    frame = child.read_frame(min(time.monotonic() + import_timeout, budget_end), sink)
                    if frame == "timeout" and time.monotonic() >= budget_end:
                        for j in range(start, len(calls)):
                            results[j] = CallResult("timeout", message=f"not run: {over_budget}")
                        break
                    if not isinstance(frame, dict) or frame.get("event") != "import" or not frame.get("ok"):
                        import_error = _import_problem(frame, child, import_timeout)
                        for j in range(start, len(calls)):
                            results[j] = CallResult("skipped", message=import_error)
                        break
                    stop_at = len(calls)
                    for j in range(start, len(calls)):
                        began = went if j == start and went else time.monotonic()
                        deadline = min(began + calls[j].timeout, budget_end)
                        frame = "timeout"
                        if j + 1 < len(calls) and deadline - STANDBY_LEAD_SECONDS > time.monotonic():
                            frame = child.read_frame(deadline - STANDBY_LEAD_SECONDS, sink)
                            if frame == "timeout":  # the call may hang: get its successor ready
                                pending = calls[j + 1 :]
                                standby = _Child(launch(source, pending, workdir, cpu_for(pending), standby=True))
                        if frame == "timeout":
                            frame = child.read_frame(deadline, sink)
                        if isinstance(frame, dict) and frame.get("event") == "call":
                            results[j] = _call_result(frame)
                            if standby is not None:  # the call returned in time after all
                                standby.kill()
                                standby = None
                            continue
                        results[j] = _failed_call(frame, child, calls[j].timeout, time.monotonic() >= budget_end,
                                                  over_budget)
                        if standby is not None:
                            standby.job.go()  # now, while this worker is being killed
                            went = time.monotonic()
                            handover = True
                        stop_at = j + 1
                        break
                    else:
                        child.finished = True
                    start = stop_at
                finally:
                    child.kill(wait=not handover)
        finally:
            if standby is not None:
                standby.kill()
    out = [r if r is not None else CallResult("skipped", message="not run") for r in results]
    return RunOutcome(tuple(out), import_error, _decode(sink["stdout"]), _decode(sink["stderr"]), sha256)


STANDBY_LEAD_SECONDS = 0.25
"""How long before a call's deadline its successor worker is started as a standby (seconds):
more than a plain worker takes to start and import numpy."""


def _failed_call(frame: dict[str, Any] | str, child: _Child, timeout: float, over: bool, over_budget: str) -> CallResult:
    """The result of a call that did not answer: timed out, oversized, garbled, or the job ended."""
    if frame == "timeout":
        return CallResult("timeout", message=over_budget if over else f"the call took longer than {timeout:g} s",
                          seconds=timeout)
    if frame == "oversize":
        return CallResult("crashed", message=f"the result is larger than {MAX_FRAME_BYTES >> 20} MiB")
    if isinstance(frame, dict):  # garbled, or not a call's answer: forged by the submission
        return CallResult("crashed", message=(
            "the grader could not read its answer (does your code write to a file descriptor it did not open?)"))
    return CallResult("crashed", message=child.exit_description())


SANDBOX_RULES = (
    "the grader's sandbox does not allow this: while grading, your code may read only its own file, "
    "the standard library and numpy, and may not use the network, write outside its own folder, "
    "or start, stop or inspect other programs"
)
"""What the sandbox forbids, in a student's words (appended to errors it caused)."""


def explain_error(error_type: str, message: str) -> str:
    """Words to append to an exception a submission raised, when the sandbox or a limit caused it.

    Parameters
    ----------
    error_type, message : str
        The exception's class name and message, as the worker reported them.

    Returns
    -------
    str
        ``" (...)"``, words for a student, or ``""`` for an ordinary error.
    """
    if error_type == "PermissionError" or message.startswith(("[Errno 1]", "[Errno 13]")):
        return f" ({SANDBOX_RULES})"
    if message.startswith("[Errno 97]"):  # EAFNOSUPPORT: a network socket
        return f" (no network: {SANDBOX_RULES})"
    if error_type in ("ModuleNotFoundError", "ImportError"):
        return (
            " (while grading, only numpy and the standard library's common modules can be imported;"
            " see the README's list)"
        )
    if message.startswith(("[Errno 27]", "[Errno 28]")):  # EFBIG, ENOSPC
        return " (while grading, your code may write at most 64 MiB of files)"
    if error_type == "MemoryError":
        return " (your code asked for more memory than the grader allows)"
    if error_type == "SyntaxError" and "codec can't decode" in message:
        return " (save the file as UTF-8 text: it holds a character in another encoding)"
    return ""


def _import_problem(frame: dict[str, Any] | str, child: _Child, import_timeout: float) -> str:
    """One sentence saying why the submission could not be imported."""
    if isinstance(frame, dict) and frame.get("event") == "import":
        kind = str(frame.get("type", "Error"))[:100]
        message = str(frame.get("message", ""))[:2000]
        where = str(frame.get("where", ""))[:200]
        location = f" ({where})" if where else ""
        return f"importing the file failed with {kind}{location}: {message}{explain_error(kind, message)}"
    if frame == "timeout":
        return f"importing the file took longer than {import_timeout:g} s (does it run a loop at top level?)"
    return f"importing the file failed: {child.exit_description()}"


def _decode(data: bytearray) -> str:
    text = bytes(data[:OUTPUT_CAP_BYTES]).decode("utf-8", errors="replace")
    if len(data) > OUTPUT_CAP_BYTES:
        text += f"\n[output cut at {OUTPUT_CAP_BYTES // 1024} KiB]"
    return text


@hookimpl(trylast=True)
def grader_run_calls(submission: Submission, calls: Sequence[Call], config: Any) -> RunOutcome:
    """Run the calls with `run_calls`, a child process per submission."""
    assert submission.file is not None
    return run_calls(
        submission.file,
        calls,
        import_timeout=float(config.option("import_timeout", 10.0)),
        submission_timeout=float(config.option("submission_timeout", 120.0)),
    )
