"""The strict decoder at the boundary: `grader.execution.boundary` and the runner's frame reader.

Frames are built here byte by byte, as a hostile job could write them; the
decoder must refuse what is not the worker's format with a true message,
bound what it keeps by the call's budget, and never take long doing so.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time

import pytest

from grader.execution.boundary import (
    DEFAULT_BUDGET,
    FRAME_OVERHEAD_BYTES,
    MAX_BUDGET,
    BoundaryError,
    ResultBudget,
    budget_for,
    check_length,
    decode_frame,
    frame_limit,
)

REFERENCE = [[0.5, 0.5], [0.25, 0.75]]
BUDGET = budget_for(REFERENCE)


def call_frame(value_text: str, **extra: object) -> bytes:
    head = json.dumps({"event": "call", "status": "returned", "mutated": [], **extra})[:-1]
    return (head + ', "value": ' + value_text + "}").encode()


def refused(data: bytes, expect: str = "call", budget: ResultBudget | None = BUDGET) -> BoundaryError:
    with pytest.raises(BoundaryError) as info:
        decode_frame(data, expect, budget)
    return info.value


# --- budgets -----------------------------------------------------------------


@pytest.mark.slow
def test_budget_is_a_few_times_the_reference_plus_slack() -> None:
    # 7 items (the outer list, 2 rows, 4 numbers), 2 deep: 4 * 7 + 256 items, 4 deep, 32 bytes an item + 4 KiB.
    assert BUDGET == ResultBudget(max_items=284, max_depth=4, max_bytes=284 * 32 + 4096)
    assert budget_for(None) == ResultBudget(max_items=256, max_depth=2, max_bytes=256 * 32 + 4096)
    assert budget_for(3.5) == ResultBudget(max_items=260, max_depth=2, max_bytes=260 * 32 + 4096)
    assert budget_for((REFERENCE, [1.0, 0.0])) == ResultBudget(
        max_items=4 * 11 + 256, max_depth=5, max_bytes=(4 * 11 + 256) * 32 + 4096
    )
    assert budget_for([0.0] * 10_000_000) == ResultBudget(MAX_BUDGET.max_items, 3, MAX_BUDGET.max_bytes)
    assert frame_limit(BUDGET) == BUDGET.max_bytes + FRAME_OVERHEAD_BYTES
    assert frame_limit(None) == DEFAULT_BUDGET.max_bytes + FRAME_OVERHEAD_BYTES


def test_budget_measures_numpy_arrays_as_lists() -> None:
    np = pytest.importorskip("numpy")
    assert budget_for(np.zeros((2, 2))) == BUDGET


def test_a_length_over_the_limit_is_refused_in_words() -> None:
    check_length(frame_limit(BUDGET), frame_limit(BUDGET), BUDGET)  # at the limit: accepted
    with pytest.raises(BoundaryError) as info:
        check_length(100 << 20, frame_limit(BUDGET), BUDGET)
    assert info.value.fatal and info.value.message == "the result is far larger than the reference's (100.0 MiB)"
    with pytest.raises(BoundaryError) as info:
        check_length(3 << 20, frame_limit(None), None)
    assert info.value.message == "the result is larger than the grader accepts (3.0 MiB)"


# --- values ------------------------------------------------------------------


def test_a_valid_frame_keeps_numbers_and_decodes_non_finite_floats() -> None:
    frame = decode_frame(
        call_frame('[[1.5, {"$float": "nan"}], [{"$float": "-inf"}, 2, true]]', mutated=[2, 0]), budget=BUDGET
    )
    value = frame["value"]
    assert value[0][0] == 1.5 and math.isnan(value[0][1])
    assert value[1] == [-math.inf, 2, True] and type(value[1][1]) is int and type(value[1][2]) is bool
    assert frame["mutated"] == (0, 2) and frame["status"] == "returned" and frame["message"] == ""


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "[1.0, NaN]"])
def test_nan_and_infinity_literals_are_refused(literal: str) -> None:
    error = refused(call_frame(literal))
    assert error.fatal
    assert error.message.startswith("the grader could not read its answer")


@pytest.mark.timing
def test_an_integer_beyond_float_range_is_an_error_in_words() -> None:
    error = refused(call_frame("1" + "0" * 399))
    assert not error.fatal
    assert error.message == "the result holds an integer too large to be a float (400 digits)"
    started = time.perf_counter()
    error = refused(call_frame("-" + "9" * 5000))  # past Python's 4300-digit conversion limit
    assert error.message == "the result holds an integer too large to be a float (5000 digits)"
    assert time.perf_counter() - started < 0.05
    assert decode_frame(call_frame(str(2**1000)), budget=BUDGET)["value"] == 2**1000  # 302 digits: a float can hold it


def test_an_overflowing_float_literal_is_refused() -> None:
    assert refused(call_frame("[1.0, 1e999]")).message == "the result holds a number too large to be a float"
    assert decode_frame(call_frame("[1e308, 1e308]"), budget=BUDGET)["value"] == [1e308, 1e308]  # sum overflows only


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"256.0"', "the result holds a string"),
        ('{"mib": 64.0}', "the result holds a dict"),
        ("[1.0, null]", "the result holds null (None)"),
        ('{"$float": "NaN"}', "the result holds a dict"),
        ("[[[[[1.0]]]]]", "the result is nested more than 4 lists deep"),
        (
            "[" + ", ".join(["0.5"] * 400) + "]",
            "the result is far larger than the reference's (more than 284 numbers and lists)",
        ),
    ],
)
def test_values_that_are_not_numbers_or_break_the_budget(value: str, message: str) -> None:
    error = refused(call_frame(value))
    assert not error.fatal and error.message == message


def test_the_default_budget_says_it_is_the_grader_s() -> None:
    error = refused(call_frame("[" + ", ".join(["0"] * (DEFAULT_BUDGET.max_items + 10)) + "]"), budget=None)
    assert error.message == "the result is larger than the grader accepts (more than 65536 numbers and lists)"


@pytest.mark.timing
def test_wide_and_deep_junk_is_refused_fast() -> None:
    started = time.perf_counter()
    wide = call_frame("[" + "0," * (1 << 20) + "0]")  # 2 MiB of zeros, one item each
    assert refused(wide, budget=None).message.startswith("the result is larger than the grader accepts")
    deep = call_frame("[" * 1_000_000 + "]" * 1_000_000)
    assert refused(deep, budget=None).message.startswith("the result is larger than the grader accepts")
    generous = ResultBudget(max_items=3_000_000, max_depth=64, max_bytes=8 << 20)
    error = refused(deep, budget=generous)  # counted as within budget: the parser's own depth limit refuses it
    assert error.fatal and error.message.startswith("the grader could not read its answer")
    assert time.perf_counter() - started < 1.0


# --- strings and shapes ------------------------------------------------------


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    data = json.dumps(
        {
            "event": "call",
            "status": "raised",
            "type": "ValueError\udc80",
            "value_error": True,
            "message": "bad \ud800 here",
            "where": "attention.py, line 3",
            "mutated": [],
        }
    ).encode()
    frame = decode_frame(data)
    assert frame["message"] == "bad \ufffd here" and frame["type"] == "ValueError\ufffd"
    frame["message"].encode("utf-8")  # now valid UTF-8 for every writer
    assert frame["value_error"] is True and frame["where"] == "attention.py, line 3"


def test_long_texts_are_cut() -> None:
    data = json.dumps({"event": "call", "status": "not_implemented", "message": "x" * 50_000}).encode()
    assert decode_frame(data)["message"] == "x" * 2000


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe not json",
        b"[1, 2]",
        b'{"event": "call", "status": "returned", "value": 1.0, "seconds": 0.1}',  # durations are the grader's
        b'{"event": "call", "status": "returned", "value": 1.0, "passed": true}',
        b'{"event": "call", "status": "won", "value": 1.0}',
        b'{"event": "call", "status": "returned"}',
        b'{"event": "call", "status": "raised", "value_error": "yes"}',
        b'{"event": "call", "status": "raised", "message": 5}',
        b'{"event": "call", "status": "returned", "value": 1.0, "mutated": [0.5]}',
        b'{"event": "done"}',
        b'{"event": "import", "ok": false, "type": "Forged", "message": "fake"}',
    ],
    ids=[
        "bytes",
        "list",
        "seconds",
        "unknown-key",
        "status",
        "no-value",
        "bool-type",
        "message-type",
        "mutated-type",
        "event",
        "import-in-call",
    ],
)
def test_frames_not_in_the_worker_s_format_are_refused(data: bytes) -> None:
    error = refused(data)
    assert error.fatal
    assert (
        error.message == "the grader could not read its answer (does your code write to a file descriptor it did "
        "not open?)"
    )


def test_import_frames() -> None:
    assert decode_frame(b'{"event": "import", "ok": true}', "import")["ok"] is True
    failed = decode_frame(
        json.dumps(
            {
                "event": "import",
                "ok": False,
                "type": "SyntaxError",
                "message": "m\ud800",
                "where": "attention.py, line 2",
            }
        ).encode(),
        "import",
    )
    assert (failed["type"], failed["message"], failed["where"]) == ("SyntaxError", "m\ufffd", "attention.py, line 2")
    assert refused(b'{"event": "import", "ok": true, "message": "x"}', "import").fatal
    assert refused(b'{"event": "import", "ok": 1}', "import").fatal


# --- the reader: refused before it is read -----------------------------------


class _PipeJob:
    """Just enough of `grader.execution.jobs.Job` for `JobChannel` to read a pipe the test writes."""

    def __init__(self) -> None:
        self.result_fd, self.write_fd = os.pipe()
        fcntl.fcntl(self.write_fd, 1031, 1 << 20)  # F_SETPIPE_SZ: room for the whole hostile frame
        self.stdout_fd, self._out = os.pipe()
        self.stderr_fd, self._err = os.pipe()
        self.call_fd = -1

    def cpu_seconds(self) -> None:
        return None

    def kill(self, finished: bool = False, wait: bool = True) -> None:
        for fd in (self.write_fd, self._out, self._err):
            os.close(fd)


@pytest.mark.timing
def test_a_frame_over_its_budget_is_refused_after_reading_only_its_length_and_one_read_ahead() -> None:
    from grader.execution.channel import READ_AHEAD_BYTES, JobChannel

    job = _PipeJob()
    body = b"[" * (1 << 18) + b"0" * (1 << 18)  # 512 KiB of the 100 MiB it claims
    os.write(job.write_fd, (100 << 20).to_bytes(4, "big") + body)
    child = JobChannel(job)
    sink = {"stdout": bytearray(), "stderr": bytearray()}
    started = time.perf_counter()
    error = child.read_frame(time.monotonic() + 5.0, sink, "call", BUDGET)
    assert isinstance(error, BoundaryError) and error.fatal
    assert error.message == "the result is far larger than the reference's (100.0 MiB)"
    assert child.bytes_read == READ_AHEAD_BYTES == 64 << 10  # the length prefix and one read ahead, no more
    assert time.perf_counter() - started < 0.5
    left = bytearray()
    while len(left) < len(body) - (READ_AHEAD_BYTES - 4):
        left += os.read(job.result_fd, 1 << 20)
    assert bytes(left) == body[READ_AHEAD_BYTES - 4 :]  # still in the pipe: the grader never took it in
    child.kill()


def test_the_reader_takes_frames_one_at_a_time() -> None:
    from grader.execution.channel import JobChannel

    job = _PipeJob()
    frames = [json.dumps({"event": "call", "status": "returned", "value": i, "mutated": []}).encode() for i in range(3)]
    os.write(job.write_fd, b"".join(len(f).to_bytes(4, "big") + f for f in frames))
    child = JobChannel(job)
    sink = {"stdout": bytearray(), "stderr": bytearray()}
    got = [child.read_frame(time.monotonic() + 5.0, sink, "call", BUDGET)["value"] for _ in range(3)]
    assert got == [0, 1, 2]
    assert child.bytes_read == sum(4 + len(f) for f in frames)
    assert child.read_frame(time.monotonic() + 0.05, sink, "call", BUDGET) == "timeout"
    child.kill()


# --- binary arrays (issue 16) ------------------------------------------------


def _worker():
    import importlib.util

    from grader.execution.jobs import WORKER

    spec = importlib.util.spec_from_file_location("_test_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker_frame(value: object) -> bytes:
    """The frame the worker writes for a call that returned ``value`` (without the length prefix)."""
    import tempfile

    import numpy as np

    worker = _worker()
    with tempfile.TemporaryFile() as fh:  # a file, not a pipe: the frame may be larger than a pipe holds
        blobs: list[bytes] = []
        data = worker.to_data(value, np, blobs=blobs)
        worker._emit(fh.fileno(), {"event": "call", "status": "returned", "value": data, "mutated": []}, blobs)
        fh.seek(0)
        raw = fh.read()
    assert int.from_bytes(raw[:4], "big") == len(raw) - 4
    return raw[4:]


def binary_frame(header_json: str, blob: bytes) -> bytes:
    text = ('{"event":"call","status":"returned","mutated":[],"value":' + header_json + "}").encode()
    return b"\x00" + len(text).to_bytes(4, "big") + text + blob


def test_small_arrays_decode_to_exactly_the_lists_json_gives() -> None:
    import numpy as np

    weights = np.array([[0.25, 0.75], [np.nan, -0.0]])
    value = (weights.astype(np.float32), np.array([1, 2], dtype=np.int16), np.array([True, False]), 3.5)
    frame = worker_frame(value)
    assert frame[:1] == b"\x00"  # the arrays travel as bytes
    got = decode_frame(frame, "call", budget_for([[0.0] * 2] * 2 + [[0.0] * 2] * 3))["value"]
    assert got[1:] == [[1, 2], [True, False], 3.5]
    assert type(got[1][0]) is int and type(got[2][0]) is bool
    assert got[0][0] == [0.25, 0.75] and math.isnan(got[0][1][0]) and math.copysign(1.0, got[0][1][1]) == -1.0


def test_a_large_array_stays_a_read_only_array_and_no_number_is_visited() -> None:
    import numpy as np

    from grader.execution.boundary import LIST_BELOW_ITEMS

    rng = np.random.default_rng(0)
    outputs, weights = rng.normal(size=(512, 64)), rng.random((512, 512))
    frame = worker_frame((outputs, weights))
    assert len(frame) < (512 * 64 + 512 * 512) * 8 + 200  # the raw data and a small header: no JSON numbers
    budget = budget_for((outputs, weights))
    started = time.process_time()
    for _ in range(20):
        got = decode_frame(frame, "call", budget)["value"]
    per_frame = (time.process_time() - started) / 20
    assert per_frame < 0.005, per_frame  # a 2.4 MB answer is taken whole, not number by number
    assert isinstance(got[0], np.ndarray) and got[0].dtype == np.float64 and got[0].shape == (512, 64)
    assert np.array_equal(got[0], outputs) and np.array_equal(got[1], weights)
    assert not got[1].flags.writeable and got[1].size >= LIST_BELOW_ITEMS


def test_binary_arrays_keep_to_the_budget() -> None:
    import numpy as np

    blob = np.zeros(300, dtype="<f8").tobytes()
    error = refused(binary_frame('{"$array":["<f8",[300]]}', blob))
    assert (
        not error.fatal
        and error.message == "the result is far larger than the reference's (more than 284 numbers and lists)"
    )
    # a shape claiming 2**62 numbers is refused from its header, before any size is computed in bytes
    error = refused(binary_frame('{"$array":["<f8",[4611686018427387904]]}', b""))
    assert not error.fatal and "far larger" in error.message
    deep = refused(binary_frame('{"$array":["<f8",[1,1,1,1,1]]}', b"\0" * 8))
    assert not deep.fatal and deep.message == "the result is nested more than 4 lists deep"


@pytest.mark.parametrize(
    "header_json, blob",
    [
        ('{"$array":["<f8",[4]]}', b"\0" * 24),  # fewer bytes than the header announces
        ('{"$array":["<f8",[2]]}', b"\0" * 24),  # bytes no header announces
        ('{"$array":["|O",[2]]}', b"\0" * 16),  # an object dtype
        ('{"$array":[">f8",[2]]}', b"\0" * 16),  # not little-endian
        ('{"$array":["<f8",[-1]]}', b""),
        ('{"$array":["<f8",[true]]}', b"\0" * 8),
        ('{"$array":["<f8",[]]}', b"\0" * 8),
        ('{"$array":["<f8"]}', b""),
        ('{"$array":["<f8",[1]],"x":1}', b"\0" * 8),
    ],
)
def test_a_binary_frame_that_is_not_the_worker_s_is_refused(header_json: str, blob: bytes) -> None:
    error = refused(binary_frame(header_json, blob))
    assert error.fatal or error.message.startswith("the result holds a dict")
    assert error.message == UNREADABLE_TEXT or error.message.startswith("the result holds a dict")


def test_a_binary_frame_is_only_a_returned_call_s() -> None:
    text = b'{"event":"call","status":"bad_return","message":"x","mutated":[]}'
    assert refused(b"\x00" + len(text).to_bytes(4, "big") + text + b"\0" * 8).fatal
    assert refused(b"\x00\x00\x00\x00\x40{}", "import").fatal
    assert refused(b"\x00\x00", "call").fatal


UNREADABLE_TEXT = "the grader could not read its answer (does your code write to a file descriptor it did not open?)"


def test_budget_of_a_reference_array_is_measured_from_its_shape() -> None:
    import numpy as np

    array = np.zeros((3, 4, 5))
    assert budget_for(array) == budget_for(array.tolist())
    assert budget_for((array, 1.0)) == budget_for([array.tolist(), 1.0])
