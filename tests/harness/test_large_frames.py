"""Large answers seen before (issue 29): decoded once, their key and arrays shared, their read buffer reused.

A class sends the same 2.3 MiB answer of a 512x64 attention from every correct submission. The
grader decodes it once (`grader.execution.boundary.LargeFrameMemo`); an equal answer gets the kept
frame's key (so the answer tables find it by identity) and read-only arrays, and the buffer it was
read into is read into again (`grader.execution.channel.BufferPool`), never while anything views it.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from security.test_boundary import _PipeJob, worker_frame

from grader.execution import channel
from grader.execution.boundary import BoundaryError, LargeFrameMemo, budget_for, decode_frame
from grader.execution.channel import LARGE_FRAME_BYTES, BufferPool, JobChannel
from grader.execution.memo import LargeFrame


def _answer(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((512, 64)), rng.random((512, 512))


def _read(frame: bytes, budget: object) -> tuple[dict, JobChannel]:
    """One large frame written by a thread and read by a fresh channel (as one job's answer)."""
    job = _PipeJob()
    child = JobChannel(job)
    whole = len(frame).to_bytes(4, "big") + frame

    def write() -> None:
        view = memoryview(whole)
        while view:
            view = view[os.write(job.write_fd, view) :]

    thread = threading.Thread(target=write)
    thread.start()
    got = child.read_frame(time.monotonic() + 10.0, {"stdout": bytearray(), "stderr": bytearray()}, "call", budget)
    thread.join()
    child.kill()
    assert isinstance(got, dict), got
    return got, child


def test_an_equal_large_answer_gets_the_kept_key_and_arrays_and_its_buffer_is_read_into_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(channel, "LARGE_FRAMES", LargeFrameMemo())
    pool = BufferPool()
    monkeypatch.setattr(channel, "_BUFFERS", pool)
    outputs, weights = _answer(1)
    frame = worker_frame((outputs, weights))
    assert len(frame) > LARGE_FRAME_BYTES
    budget = budget_for([outputs.tolist(), weights.tolist()])

    first, one = _read(frame, budget)
    assert pool._free == []  # a new answer: its buffer is its key's, and its arrays view it
    key = one.last_large
    assert key is not None and np.shares_memory(np.frombuffer(key.data, np.uint8), first["value"][1])
    assert np.array_equal(first["value"][0], outputs) and np.array_equal(first["value"][1], weights)

    second, two = _read(frame, budget)
    assert two.last_large is key  # found by identity in the answer tables, no second memcmp there
    assert second["value"] is not first["value"] and second["value"][1] is first["value"][1]
    assert second["value"][1].flags.writeable is False
    assert len(pool._free) == 1 and len(pool._free[0]) == len(frame)  # nothing views it: free again
    freed = pool._free[0]
    assert not np.shares_memory(np.frombuffer(freed, np.uint8), second["value"][1])

    other_out, other_w = _answer(2)  # another answer of the same size: read into that buffer, then kept
    third, three = _read(worker_frame((other_out, other_w)), budget)
    assert pool._free == [] and three.last_large is not None and three.last_large.data is freed
    assert np.array_equal(third["value"][1], other_w) and np.array_equal(first["value"][1], weights)
    assert three.last_large != key


def test_the_table_answers_as_decode_frame_does_and_keeps_no_refusal() -> None:
    memo = LargeFrameMemo()
    outputs, weights = _answer(3)
    frame = bytearray(worker_frame((outputs, weights)))
    budget = budget_for([outputs.tolist(), weights.tolist()])
    got, key, seen = memo.decode(bytearray(frame), "call", budget)
    want = decode_frame(bytearray(frame), "call", budget)
    assert not seen and key == LargeFrame(frame) and got.keys() == want.keys()
    assert all(np.array_equal(a, b) for a, b in zip(got["value"], want["value"], strict=True))
    again, same_key, seen = memo.decode(bytearray(frame), "call", budget)
    assert seen and same_key is key and again["value"][0] is got["value"][0]
    # Another budget is another key: the same bytes may be refused under it.
    small = budget_for([[0.0] * 10])
    with pytest.raises(BoundaryError) as refused:
        memo.decode(bytearray(frame), "call", small)
    assert not refused.value.fatal
    with pytest.raises(BoundaryError):
        memo.decode(bytearray(frame), "call", small)  # refused again: nothing was kept for it
    assert len(memo._table) == 1


def test_the_pool_gives_only_a_buffer_of_the_size_asked_and_keeps_few() -> None:
    pool = BufferPool()
    pool.MOST_BYTES = 3000  # type: ignore[misc]
    a, b = bytearray(1000), bytearray(1500)
    pool.give(a)
    pool.give(b)
    pool.give(bytearray(1000))  # over the pool's bytes: dropped
    assert pool.take(1500) is b and pool.take(1000) is a
    fresh = pool.take(1000)
    assert fresh is not a and len(fresh) == 1000 and pool._free == []
