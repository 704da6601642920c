"""The frame channel: the parent's side of one job (`JobChannel`), reading its frames and output against deadlines.

Frames are length-prefixed JSON (numpy arrays as raw binary after the
JSON), each checked by `grader.execution.boundary` before it is kept; stdout and
stderr are read against a deadline and capped (`OUTPUT_CAP_BYTES`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import selectors
import time
from collections.abc import Sequence
from typing import Any

from grader.execution.boundary import (
    CALL_KEYS,
    FRAMES,
    IMPORT_FRAME_BYTES,
    UNREADABLE,
    BoundaryError,
    ResultBudget,
    check_length,
    decode_frame,
    encode_nonfinite,
    frame_limit,
    fresh,
)
from grader.execution.jobs import CHANNEL_LOST, Job
from grader.execution.memo import LargeFrame
from grader.fileio import fd_ready
from grader.models import Call, CallResult

EOF_GRACE_SECONDS = 0.25
"""After the result pipe closes, how long stdout and stderr are still read."""
OUTPUT_CAP_BYTES = 16 << 10
"""Bytes of stdout and of stderr kept per submission (16 KiB each)."""
READ_AHEAD_BYTES = 64 << 10
"""The most a read of a job's result pipe takes beyond the frame it needs (the frames behind it)."""
LARGE_FRAME_BYTES = 1 << 18
"""A frame at least this long (its length prefix within its limit) is read straight into a buffer
of its size: a 512x512 result (2 MiB of doubles) is not grown chunk by chunk and copied twice."""


PIPE_BYTES = 64 << 10
"""What a pipe holds by default on Linux."""
WIDE_PIPE_BYTES = 1 << 20
"""What `widen_pipe` makes a pipe hold at most (Linux's ``pipe-max-size`` for an unprivileged process)."""


def widen_pipe(fd: int, size: int) -> None:
    """Let the pipe ``fd`` hold ``size`` bytes, up to `WIDE_PIPE_BYTES` (where the system allows it).

    A large frame or phase then crosses in a few reads and writes rather than one per 64 KiB, each
    a wake-up of the other side. Only the pipe's capacity changes, never what crosses it; where
    the system refuses (not Linux, a user over its pipe quota), nothing changes.
    """
    if _SETPIPE is None:
        return
    try:
        if _fcntl.fcntl(fd, _GETPIPE) < min(size, WIDE_PIPE_BYTES):
            _fcntl.fcntl(fd, _SETPIPE, min(size, WIDE_PIPE_BYTES))
    except OSError:
        pass


try:
    import fcntl as _fcntl

    _SETPIPE: int | None = _fcntl.F_SETPIPE_SZ
    _GETPIPE = _fcntl.F_GETPIPE_SZ
except (ImportError, AttributeError):  # not Linux
    _SETPIPE = None


class JobChannel:
    """The parent's side of one job: sends calls, reads frames and output against deadlines.

    Every descriptor is non-blocking: the grader never waits on a job
    except in ``select`` with a deadline.
    """

    def __init__(self, job: Job) -> None:
        self.job = job
        self.result_fd = job.result_fd
        self.buffer = bytearray()  # what was read of the result pipe and not taken yet, from `start` on
        self.start = 0
        # poll(2), not epoll: a job's three pipes are watched for a few waits, and an epoll
        # instance would cost its own descriptor and a system call per pipe, per job.
        self.selector = selectors.PollSelector()
        for fd, name in ((job.result_fd, "result"), (job.stdout_fd, "stdout"), (job.stderr_fd, "stderr")):
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ, name)
        if job.call_fd >= 0:
            os.set_blocking(job.call_fd, False)
        self.result_open = True
        self.eof_grace_end: float | None = None
        self.closed = False
        self.imported = False  # set when its import frame said the import worked
        self.finished = False  # set when every call was answered
        self.bytes_read = 0  # of the result pipe: what the grader took in from this job
        self.empty = False  # the last read of the result pipe found nothing (reset when it is readable)
        self.last_wire = b""  # the bytes of the last frame read (`CallResult.wire`)
        self.last_large: LargeFrame | None = None  # the last frame read, when it was large (`CallResult.large`)
        self.large: bytearray | None = None  # a large frame being read in place (`_read_large`)
        self.filled = 0  # its bytes read so far

    def send(self, call: Call | bytes, deadline: float) -> str:
        """Write a phase of calls (`grader.models.phase_wire`; a `Call`: that call alone) to the job's call pipe.

        Returns ``"sent"``, ``"closed"`` (the pipe is gone) or ``"timeout"``. A phase larger than
        a pipe holds (large arguments) first widens the pipe (`widen_pipe`), so that it goes in a
        write or a few rather than one per 64 KiB, each waiting for the job to read.
        """
        fd = self.job.call_fd
        view = memoryview(call.wire if isinstance(call, Call) else call)
        if len(view) > PIPE_BYTES:
            widen_pipe(fd, len(view))
        while view:
            try:
                view = view[os.write(fd, view) :]
                continue
            except BlockingIOError:
                pass
            except OSError:  # EPIPE: the job closed the pipe, or is gone
                return "closed"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            fd_ready(fd, remaining, write=True)
        return "sent"

    def drain(self, sink: dict[str, bytearray]) -> None:
        """Read what the job has written to stdout and stderr so far, without waiting."""
        for fd, name in ((self.job.stdout_fd, "stdout"), (self.job.stderr_fd, "stderr")):
            if fd not in self.selector.get_map():
                continue
            for _ in range(64):  # at most 4 MiB now; the rest is later output anyway
                try:
                    chunk = os.read(fd, 1 << 16)
                except (BlockingIOError, OSError):
                    break
                if not chunk:
                    self.selector.unregister(fd)
                    break
                self._keep(sink[name], chunk)

    @staticmethod
    def _keep(kept: bytearray, chunk: bytes) -> None:
        room = OUTPUT_CAP_BYTES + 1 - len(kept)
        if room > 0:
            kept += chunk[:room]

    def read_frame(
        self, deadline: float, sink: dict[str, bytearray], expect: str = "call", budget: ResultBudget | None = None
    ) -> dict[str, Any] | str | BoundaryError:
        """Return the next frame, decoded and validated by `grader.execution.boundary.decode_frame`.

        Or ``"timeout"`` (nothing by ``deadline``), ``"eof"`` (the result
        pipe closed), or the `BoundaryError` that refused the frame. A frame
        whose length prefix exceeds its limit is refused before more of it
        is read than one read ahead (`READ_AHEAD_BYTES`): what is read at
        once is whatever the pipe holds, up to the frame's need or that
        much, so that the frames of calls answered meanwhile take one read.
        """
        limit = IMPORT_FRAME_BYTES if expect != "call" else frame_limit(budget)
        while True:
            if self.result_open:
                start = self.start
                need = 4 - (len(self.buffer) - start)
                if need <= 0 and self.large is None:
                    size = int.from_bytes(self.buffer[start : start + 4], "big")
                    try:
                        check_length(size, limit, budget, expect)
                    except BoundaryError as exc:
                        return exc
                    need = 4 + size - (len(self.buffer) - start)
                    if need <= 0:
                        return self._take(size, expect, budget)
                    if size >= LARGE_FRAME_BYTES:  # within its limit: read in place from here on
                        # (the buffer holds less than this frame, so nothing of the next one)
                        widen_pipe(self.result_fd, size)
                        self.large = bytearray(size)
                        self.filled = len(self.buffer) - start - 4
                        self.large[: self.filled] = self.buffer[start + 4 :]
                        self.buffer.clear()
                        self.start = 0
                if self.large is not None:
                    got = self._read_large(expect, budget)
                    if got is True:
                        continue
                    if got is not False:
                        return got
                    chunk = None  # nothing there yet: wait below
                else:
                    try:
                        # Not again before the pipe says it has more: the read just before found it empty.
                        chunk = (
                            None if self.empty else os.read(self.result_fd, min(max(need, READ_AHEAD_BYTES), 1 << 20))
                        )
                    except BlockingIOError:
                        chunk = None
                        self.empty = True
                    except OSError:
                        chunk = b""
                if chunk:
                    self._append(chunk)
                    continue
                if chunk == b"":
                    self._result_closed()
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
                if key.data == "result":
                    self.empty = False
                    continue  # read at the top of the loop
                try:
                    chunk = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    self.selector.unregister(key.fd)
                    continue
                self._keep(sink[key.data], chunk)

    def _append(self, chunk: bytes) -> None:
        """Keep ``chunk``, read of the result pipe, after what is not taken yet."""
        self.bytes_read += len(chunk)
        if self.start:  # the frames taken are dropped now, at most once per read (not once per frame)
            del self.buffer[: self.start]
            self.start = 0
        self.buffer += chunk

    def _head(self) -> int:
        """The length prefix of the frame at the head of the buffer (-1 while fewer than 4 bytes are there)."""
        start = self.start
        if len(self.buffer) - start < 4:
            return -1
        return int.from_bytes(self.buffer[start : start + 4], "big")

    def _take(self, size: int, expect: str, budget: ResultBudget | None) -> dict[str, Any] | BoundaryError:
        """The frame of ``size`` bytes at the head of the buffer (whole, its length checked), decoded."""
        start = self.start + 4
        with memoryview(self.buffer) as view:
            data = bytes(view[start : start + size])
        self.start = start + size
        if self.start == len(self.buffer):
            self.buffer.clear()
            self.start = 0
        self.last_wire = data
        self.last_large = None
        try:
            return FRAMES.shared(data, expect, budget)
        except BoundaryError as exc:
            return exc

    def take_ready(self, budget: ResultBudget | None) -> dict[str, Any] | BoundaryError | None:
        """The next call frame if it is already read whole (decoded, or what refused it); else None, reading nothing.

        `read_frame` without its loop, for the answers read ahead with the one before them (the
        same checks, in one function: it runs once per call of every submission).
        """
        if self.large is not None:
            return None
        buffer, start = self.buffer, self.start
        head = start + 4
        if len(buffer) < head:
            return None
        size = int.from_bytes(buffer[start:head], "big")
        end = head + size
        if len(buffer) < end:
            return None  # read_frame checks the length, and reads the rest
        limit = frame_limit(budget)
        if size > limit:
            try:
                check_length(size, limit, budget, "call")
            except BoundaryError as exc:
                return exc
        data = bytes(buffer[head:end])
        if end == len(buffer):
            buffer.clear()
            self.start = 0
        else:
            self.start = end
        self.last_wire = data
        try:
            return FRAMES.shared(data, "call", budget)
        except BoundaryError as exc:
            return exc

    def _read_large(self, expect: str, budget: ResultBudget | None) -> dict[str, Any] | BoundaryError | bool:
        """Read more of a large frame (`LARGE_FRAME_BYTES`) straight into its own buffer.

        Returns the decoded frame, or the `BoundaryError` that refused it, once it is whole;
        True when bytes came, or the result pipe closed before the frame was whole (`read_frame`
        reads on, or sees the pipe closed); False when no byte is there yet. A large frame's
        `CallResult.wire` is empty (a shard or a Dask worker writes its result field by field); its
        bytes are `last_large` (`CallResult.large`), the key the grader's answer tables know it by.
        """
        assert self.large is not None
        self.last_wire = b""
        self.last_large = None
        if self.empty:
            return False
        try:
            n = os.readv(self.result_fd, [memoryview(self.large)[self.filled :]])
        except BlockingIOError:
            self.empty = True
            return False
        except OSError:
            n = 0
        if n == 0:
            self.large = None  # it will never be whole
            self._result_closed()
            return True
        self.bytes_read += n
        self.filled += n
        if self.filled < len(self.large):
            return True
        data, self.large = self.large, None
        try:
            frame = decode_frame(data, expect, budget)
        except BoundaryError as exc:
            return exc
        self.last_large = LargeFrame(data)
        return frame

    def _result_closed(self) -> None:
        self.result_open = False
        self.selector.unregister(self.result_fd)

    def frame_ready(self) -> bool:
        """Whether a whole frame is already read (after one read without waiting, if none was)."""
        if self.large is not None:  # a large frame part read: read_frame reads the rest
            return False
        size = self._head()
        if size >= 0 and len(self.buffer) - self.start >= 4 + size:
            return True
        if not self.result_open:
            return False
        if self.empty:
            return False
        try:
            chunk = os.read(self.result_fd, READ_AHEAD_BYTES)
        except BlockingIOError:
            self.empty = True  # read_frame waits for the pipe instead of reading it again
            return False
        except OSError:  # gone: read_frame says so
            return False
        if not chunk:
            return False  # end of file: left for read_frame to see (the read returns it again)
        self._append(chunk)
        size = self._head()
        return size >= 0 and len(self.buffer) - self.start >= 4 + size

    def wait_result(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds for the result pipe to be readable (or closed).

        Only when its last read found it empty (`frame_ready`): otherwise it is read first.
        """
        if self.result_open and self.empty:
            fd_ready(self.result_fd, timeout)
            self.empty = False

    def pending(self) -> bool:
        """Whether the result pipe holds more (or has closed) although no call is outstanding."""
        if len(self.buffer) > self.start or not self.result_open:
            return True
        return fd_ready(self.result_fd)

    def exit_description(self) -> str:
        """Say how the job ended, once it is gone; a job still running after its result pipe closed lost it."""
        code = self.job.exit_code(2.0)
        if code is None:
            return CHANNEL_LOST if not self.result_open else "the process stopped answering"
        return self.job.describe_exit(code, self.imported)

    def kill(self, wait: bool = True) -> None:
        """Kill the job and release the pipes (idempotent); see `Job.kill` for ``wait``."""
        if self.closed:
            return
        self.closed = True
        self.job.kill(finished=self.finished, wait=wait)
        self.selector.close()
        for fd in (self.job.result_fd, self.job.stdout_fd, self.job.stderr_fd):
            if fd < 0:  # closed by the job's own kill already
                continue
            try:
                os.close(fd)
            except OSError:
                pass


def result_of(frame: dict[str, Any], seconds: float, wire: bytes = b"", large: LargeFrame | None = None) -> CallResult:
    """A validated call frame (`grader.execution.boundary.decode_frame`) as a `CallResult`, with the grader's duration.

    ``wire`` is the frame's bytes (`CallResult.wire`), ``large`` a large frame's (`CallResult.large`). Made as the dataclass's own ``__init__``
    makes it (every field, defaults first), with its fields set at once: a grader makes one
    per call of every submission, and a frozen dataclass's ``__init__`` sets each field apart.
    """
    status, mutated = frame["status"], frame["mutated"]
    result = _new(CallResult)
    fields = result.__dict__
    fields.update(_RESULT_DEFAULTS)
    fields["status"] = status
    if status == "returned":
        fields["value"] = frame["value"]
    elif status == "raised":
        fields["error_type"] = frame["type"] or "Exception"
        fields["value_error"] = frame["value_error"]
        fields["message"] = frame["message"]
        fields["where"] = frame["where"]
    else:
        fields["message"] = frame["message"]
    fields["seconds"] = seconds
    fields["mutated_args"] = mutated
    fields["wire"] = wire
    fields["large"] = large
    return result


def own_results(results: Sequence[CallResult]) -> list[CallResult]:
    """``results`` with values of their own: each list value copied, for code that may change it (a judge).

    The answers a job sends are shared between equal frames of a run (`grader.execution.boundary.FrameMemo.shared`):
    a plugin's judge that changed a value in place would change every other submission's equal answer.

    Parameters
    ----------
    results : sequence of CallResult
        One submission's answers, in call order.

    Returns
    -------
    list of CallResult
        The same answers, in the same order; each whose value is a list is a new `CallResult`
        holding a copy of it (`grader.execution.boundary.fresh`), the others the very results.
    """
    own = list(results)
    for number, result in enumerate(own):
        if type(result.value) is list:
            copy = _new(CallResult)
            copy.__dict__.update(result.__dict__)
            copy.__dict__["value"] = fresh(result.value)
            own[number] = copy
    return own


_new = object.__new__
_RESULT_DEFAULTS = {f.name: f.default for f in dataclasses.fields(CallResult)}
"""Every field of a `CallResult` at its default (each is a plain default: no factory)."""


def call_result(frame: dict[str, Any]) -> CallResult:
    """A call frame held as data (``grader.packs.catalogue``'s cache) as a `CallResult`, checked as a job's frame is.

    The frame is written again as the worker writes it and decoded by
    `grader.execution.boundary.decode_frame`; its ``seconds`` (the grader's own
    measure, stored with it) is kept if it is a finite number of seconds.
    """
    status = frame.get("status")
    keys = CALL_KEYS.get(status) if isinstance(status, str) else None
    raw = frame.get("seconds")
    seconds = 0.0
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and 0 <= raw < 1e9:  # JSON numbers, no true/false
        seconds = float(raw)
    if keys is None:
        return CallResult("crashed", message=UNREADABLE)
    wire = {key: value for key, value in frame.items() if key in keys}
    wire["event"] = "call"
    try:
        data = json.dumps(encode_nonfinite(wire), allow_nan=False).encode("utf-8", "surrogatepass")
        return result_of(decode_frame(data, "call"), seconds)
    except BoundaryError as exc:
        return CallResult("bad_return" if not exc.fatal else "crashed", message=exc.message, seconds=seconds)
    except (TypeError, ValueError, RecursionError):
        return CallResult("crashed", message=UNREADABLE)
