"""The lean worker protocol: each cheaper step gives exactly what the plain one gave.

The worker's frame encoder, its one-write frames, the grader's frame buffer, its `CallResult`s,
its phases' bytes, its pipes and `compare`'s work arrays are each checked against the plain way
(the constructor, ``json.JSONEncoder``, a fresh join, fresh arrays), value for value and byte for
byte; none of it is timed here.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import marshal
import math
import os
import threading
from typing import Any

import numpy as np
import pytest
from security.test_boundary import _PipeJob

from grader.child import worker
from grader.compare import Mismatch, compare
from grader.execution.boundary import FRAMES, LIST_BELOW_ITEMS, budget_for, decode_frame
from grader.execution.calls import PHASES
from grader.execution.channel import WIDE_PIPE_BYTES, JobChannel, result_of, widen_pipe
from grader.models import Call, CallResult, phase_wire

PLAIN_ENCODE = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


@pytest.mark.parametrize(
    "frame",
    [
        {"event": "import", "ok": True},
        {"event": "call", "status": "returned", "value": [[0.1, 2, True], [1e308, -0.0]], "mutated": [0, 2]},
        {"event": "call", "status": "raised", "type": "ValueError", "message": "é \ud800 \n", "where": "a.py, line 3"},
        {"event": "call", "status": "returned", "value": [{"$array": ["<f8", [512, 64]]}], "mutated": []},
    ],
)
def test_the_worker_s_frame_encoder_writes_the_plain_encoder_s_text(frame: dict[str, Any]) -> None:

    assert worker._encode(frame) == PLAIN_ENCODE(frame)


def test_the_worker_s_frame_encoder_refuses_what_the_plain_one_refuses() -> None:

    for bad in ({"value": math.nan}, {"value": [math.inf]}):
        with pytest.raises(ValueError):
            worker._encode(bad)
    with pytest.raises(TypeError):
        worker._encode({"value": object()})


def _written(value: Any) -> bytes:
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    try:
        blobs: list[Any] = []
        data = worker.to_data(value, np, blobs=blobs)
        worker._emit(write_fd, {"event": "call", "status": "returned", "value": data, "mutated": []}, blobs)
        os.close(write_fd)
        return b"".join(iter(lambda: os.read(read_fd, 1 << 20), b""))
    finally:
        os.close(read_fd)


def test_a_frame_with_small_arrays_is_one_buffer_with_the_bytes_of_a_large_one_s_layout() -> None:

    small = (np.arange(6.0).reshape(2, 3), np.array([True, False]), np.arange(3, dtype=np.int32))
    frame = _written(small)
    text = PLAIN_ENCODE(
        {
            "event": "call",
            "status": "returned",
            "value": [{"$array": ["<f8", [2, 3]]}, {"$array": ["|b1", [2]]}, {"$array": ["<i8", [3]]}],
            "mutated": [],
        }
    ).encode()
    text += b" " * (-(5 + len(text)) % 8)  # JSON's whitespace: the first array starts 8 bytes aligned in the frame
    assert (5 + len(text)) % 8 == 0 and text.endswith(b"} ")
    blob = small[0].tobytes() + small[1].tobytes() + small[2].astype("<i8").tobytes()
    body = b"\x00" + len(text).to_bytes(4, "big") + text + blob
    assert frame == len(body).to_bytes(4, "big") + body
    assert decode_frame(frame[4:], "call")["value"] == [[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [True, False], [0, 1, 2]]
    large = np.random.default_rng(1).normal(size=(300, 70))  # over 64 KiB: written from its own memory
    got = decode_frame(_written(large)[4:], "call", budget_for(large))["value"]
    assert np.array_equal(got, large)
    assert got.flags.aligned  # in the grader's (aligned) copy of the frame: compared without buffering


def test_result_of_makes_what_the_constructor_makes() -> None:

    frames = {
        "returned": {"status": "returned", "value": [0.5, [1.0]], "mutated": (1,)},
        "raised": {"status": "raised", "type": "", "value_error": True, "message": "m", "where": "w", "mutated": ()},
        "not_implemented": {"status": "not_implemented", "message": "stub", "mutated": ()},
        "bad_return": {"status": "bad_return", "message": "a str", "mutated": (0,)},
    }
    expected = {
        "returned": CallResult("returned", value=[0.5, [1.0]], seconds=0.25, mutated_args=(1,), wire=b"w"),
        "raised": CallResult(
            "raised", error_type="Exception", value_error=True, message="m", where="w", seconds=0.25, wire=b"w"
        ),
        "not_implemented": CallResult("not_implemented", message="stub", seconds=0.25, wire=b"w"),
        "bad_return": CallResult("bad_return", message="a str", seconds=0.25, mutated_args=(0,), wire=b"w"),
    }
    for status, frame in frames.items():
        got = result_of(
            {"event": "call", "type": "", "value": None, "value_error": False, "where": "", **frame}, 0.25, b"w"
        )
        assert type(got) is CallResult and dataclasses.astuple(got) == dataclasses.astuple(expected[status])
        assert got.__dict__ == expected[status].__dict__ and got == expected[status]
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.status = "x"  # type: ignore[misc]


def test_frames_read_together_are_taken_one_by_one_whole_and_in_order() -> None:

    job = _PipeJob()
    channel = JobChannel(job)  # type: ignore[arg-type]
    bodies = [worker_text(i) for i in range(200)]
    os.write(job.write_fd, b"".join(len(b).to_bytes(4, "big") + b for b in bodies[:150]))
    channel.frame_ready()
    got = []
    for i in range(150):
        frame = channel.take_ready(None)
        if frame is None:  # the read-ahead ended mid-frame: read_frame reads on
            frame = channel.read_frame(1e18, {"stdout": bytearray(), "stderr": bytearray()})
        assert isinstance(frame, dict) and channel.last_wire == bodies[i]
        got.append(frame["value"])
        if i == 100:  # more comes while frames are still buffered
            os.write(job.write_fd, b"".join(len(b).to_bytes(4, "big") + b for b in bodies[150:]))
    for i in range(150, 200):
        frame = channel.read_frame(1e18, {"stdout": bytearray(), "stderr": bytearray()})
        assert isinstance(frame, dict) and channel.last_wire == bodies[i]
        got.append(frame["value"])
    assert got == [[i, 0.5] for i in range(200)] and not channel.pending()
    channel.kill()


def worker_text(i: int) -> bytes:
    return PLAIN_ENCODE({"event": "call", "status": "returned", "value": [i, 0.5], "mutated": []}).encode()


def test_a_phase_s_bytes_are_joined_once_for_its_very_calls() -> None:

    big = np.random.default_rng(2).normal(size=(80, 64)).tolist()
    calls = (Call("f", (big,), 1.0), Call("g", ([1.0, 2.0],), 1.0))
    first = PHASES.wire(calls)
    assert first == phase_wire(calls) and PHASES.wire(list(calls)) is first
    equal = (Call("f", (big,), 1.0), Call("g", ([1.0, 2.0],), 1.0))  # equal calls, other objects
    assert PHASES.wire(equal) == first and PHASES.wire(equal) is not first


def test_a_pipe_is_widened_for_a_large_phase_and_never_narrowed() -> None:

    read_fd, write_fd = os.pipe()
    try:
        assert fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ) == 64 << 10
        widen_pipe(write_fd, 100)
        assert fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ) == 64 << 10
        widen_pipe(write_fd, 3 << 20)
        assert fcntl.fcntl(read_fd, fcntl.F_GETPIPE_SZ) == WIDE_PIPE_BYTES
        widen_pipe(write_fd, 300 << 10)
        assert fcntl.fcntl(read_fd, fcntl.F_GETPIPE_SZ) == WIDE_PIPE_BYTES
    finally:
        os.close(read_fd)
        os.close(write_fd)
    widen_pipe(read_fd, 1 << 20)  # closed: nothing happens


def _fresh_compare(name: str, expected: np.ndarray, got: Any, rtol: float, atol: float) -> str:
    """`compare`'s message, with its work arrays made fresh (the thread's kept ones thrown away)."""
    from grader import compare as module

    module._SCRATCH.__dict__.clear()
    try:
        compare(name, expected, got, rtol, atol)
    except Mismatch as m:
        return m.message + repr(m.details)
    return "passed"


def test_compare_judges_with_its_kept_work_arrays_as_with_fresh_ones() -> None:

    rng = np.random.default_rng(7)
    cases = []
    for shape in [(512, 512), (3,), (), (40, 7), (512, 64)]:
        expected = rng.normal(size=shape)
        wrong = expected + 1e-3 * rng.normal(size=shape)
        nan = np.array(expected, copy=True)
        nan.reshape(-1)[-1] = math.nan
        cases += [(expected, expected), (expected, wrong), (expected, nan)]
    fresh = [_fresh_compare("w", e, g, 1e-6, 1e-9) for e, g in cases]

    def kept() -> list[str]:
        out = []
        for e, g in cases:
            try:
                compare("w", e, g, 1e-6, 1e-9)
                out.append("passed")
            except Mismatch as m:
                out.append(m.message + repr(m.details))
        return out

    assert fresh.count("passed") == 5 and kept() == fresh
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(kept())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [fresh] * 3


def test_frames_decoded_from_the_table_are_fresh_and_equal() -> None:

    data = worker_text(3)
    one, two = FRAMES.decode(data, "call"), FRAMES.decode(data, "call")
    assert one == two == decode_frame(data, "call") and one["value"] is not two["value"]


def test_a_phase_arrives_as_the_data_its_json_would_parse_to() -> None:

    args = (
        (1.5, [2, 3.0]),  # a tuple: a list, as JSON makes it
        {1: "é", "k": [True, None, "\ud800x"]},  # an int key: a string key
        [math.nan, math.inf, -math.inf, -0.0, 10**30],
        [[0.25] * 3] * 2,  # the same row twice: two lists, as JSON makes them
    )
    calls = (Call("f", args, 1.0), Call("g", (), 2.0))
    wire = phase_wire(calls)
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4 and wire[4:5] == b"\x01"
    got, blob = worker._phase(wire[4:])
    text = json.dumps({"calls": [{"function": c.function, "args": list(c.args)} for c in calls]}, allow_nan=True)
    expected = json.loads(text)["calls"]
    assert blob is None and marshal.dumps(got, 2) == marshal.dumps(expected, 2)
    assert got[0]["args"][0] == [1.5, [2, 3.0]] and list(got[0]["args"][1]) == ["1", "k"]
    rows = got[0]["args"][3]
    assert rows[0] == rows[1] and rows[0] is not rows[1]
    assert marshal.dumps({"calls": got}, 2) == wire[9:]


@pytest.mark.parametrize(
    "message", [b"", b"\x00", b"\x01\x00\x00\x00\x09{}", b"\x01\x00\x00\x00\x02[0", b"{calls", b"\x01\x00\x00\x00\x01N"]
)
def test_a_phase_that_is_not_the_grader_s_is_refused(message: bytes) -> None:

    with pytest.raises((ValueError, KeyError, TypeError, EOFError)):
        worker._phase(message)


def test_a_rectangle_of_floats_travels_as_the_array_of_its_own_doubles() -> None:
    """A returned list of lists of floats (a numpy answer's ``tolist()``) comes to the grader as the
    array a numpy answer would: the same numbers, bit for bit (-0.0, NaN and the infinities too),
    as the JSON text of the same list decodes to."""
    rng = np.random.default_rng(3)
    weights, outputs = rng.normal(size=(300, 300)), rng.normal(size=(300, 20))
    weights[0, 0], weights[1, 1], weights[2, 2], weights[3, 3] = -0.0, math.nan, math.inf, -math.inf
    value = (outputs.tolist(), weights.tolist())
    budget = budget_for([outputs, weights])

    assert worker._DOUBLES.RAW_LIST_ITEMS == LIST_BELOW_ITEMS  # smaller: the grader would make lists again
    blobs: list[Any] = []
    assert worker.to_data(value, np, blobs=blobs) == [{"$array": ["<f8", [300, 20]]}, {"$array": ["<f8", [300, 300]]}]
    got = decode_frame(_written(value)[4:], "call", budget)["value"]
    as_json = decode_frame(PLAIN_ENCODE(_json_frame(value)).encode(), "call", budget)["value"]
    for part, sent, json_part in zip(got, (outputs, weights), as_json):
        assert isinstance(part, np.ndarray) and not part.flags.writeable
        assert part.view("<u8").tolist() == sent.view("<u8").tolist()  # the very bits
        assert np.array_equal(part, np.array(json_part), equal_nan=True)
        assert np.array_equal(np.signbit(part), np.signbit(np.array(json_part)))


def _json_frame(value: Any) -> dict[str, Any]:
    """The frame the worker wrote before rectangles of floats travelled as doubles: JSON only."""
    return {"event": "call", "status": "returned", "value": worker._finite(worker.to_data(value, np)), "mutated": []}


@pytest.mark.parametrize(
    "value",
    [
        [[0.5] * 64] * 63,  # 4,032 floats: under the grader's LIST_BELOW_ITEMS, JSON as before
        [[0.5] * 64] * 70 + [[1] * 64],  # an int
        [[0.5] * 64] * 70 + [[True] * 64],  # a bool
        [[0.5] * 64] * 70 + [[0.5] * 63],  # ragged
        [[0.5] * 64] * 70 + [[np.float64(0.5)] * 64],  # a float subclass
        [[0.5] * 64] * 70 + [0.5],  # a number beside the rows
    ],
    ids=["small", "int", "bool", "ragged", "subclass", "mixed-depth"],
)
def test_what_is_not_a_rectangle_of_floats_is_written_as_it_was(value: Any) -> None:

    blobs: list[Any] = []
    assert worker.to_data(value, np, blobs=blobs) == worker.to_data(value, np)
    assert blobs == []
    assert _written(value)[4:] == PLAIN_ENCODE(_json_frame(value)).encode()
