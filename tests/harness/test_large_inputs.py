"""Large inputs (issue 16): a compare check on 512x64 Q, K, V is cheap per submission and per run,
and as strict as on small inputs.

* The pack's float64 error bound on softmax rows (`g14.reference.error_bounds.weight_bounds`) takes O(m) per
  row of m keys and agrees with the bound's definition, each weight's own O(m) sum.
* Preparing a check calls the reference once on its arguments, not once per use.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import marshal
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from course_plugin import error_bounds
from security.test_boundary import _PipeJob, worker_frame

from harness.test_checks import make, prepare

EPS, row_weight_bound, score_rounding, weight_bounds = (
    error_bounds.EPS,
    error_bounds.row_weight_bound,
    error_bounds.score_rounding,
    error_bounds.weight_bounds,
)

from grader.child import worker
from grader.execution.boundary import BoundaryError, budget_for, decode_frame
from grader.execution.channel import LARGE_FRAME_BYTES, READ_AHEAD_BYTES, JobChannel
from grader.execution.memo import LargeFrame
from grader.grading.judging import VerdictCache, answers_of
from grader.kinds import FLOOR_KEY
from grader.models import Call, phase_wire


def _pairwise_row(scores: np.ndarray, allowed: np.ndarray, error: np.ndarray) -> np.ndarray:
    """The bound of one row as its docstring defines it, weight by weight (O(m**2)): the oracle."""
    out = np.zeros(scores.shape)
    idx = np.flatnonzero(allowed)
    if idx.size <= 1:
        return out
    s, e = scores[idx], error[idx]

    def lse(x: np.ndarray) -> np.ndarray:
        top = np.max(x, axis=-1, keepdims=True)
        return (top + np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True)))[..., 0]

    diff = s[None, :] - s[:, None]
    spread = e[None, :] + e[:, None]
    np.fill_diagonal(spread, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.exp(-lse(diff))
        high = np.exp(-lse(diff - spread))
        low = np.exp(-lse(diff + spread))
    top = float(np.max(s))
    common = min(EPS * abs(top), float(lse(s - top))) + (idx.size + 4) * EPS
    out[idx] = np.maximum(high - p, p - low) + p * np.expm1(common)
    return out


ROWS = [
    (np.array([1.0, 2.0, 3.0]), np.array([True, True, True]), np.zeros(3)),
    (np.array([1e12, 1e12 + 1.0, 1e12 - 2.0]), np.ones(3, bool), np.zeros(3)),
    (np.array([1e12, 0.0, 1e12 + 0.5, -3.0]), np.array([True, False, True, True]), np.full(4, 1e-4)),
    (np.array([700.0, -700.0, 0.0]), np.ones(3, bool), np.full(3, 1e-13)),
    (np.array([0.0, 0.0, 0.0, 0.0]), np.ones(4, bool), np.full(4, 1e-12)),
    (np.array([5.0, 1.0]), np.array([False, True]), np.zeros(2)),  # one allowed key: exactly 0
]


@pytest.mark.parametrize("row", range(len(ROWS)))
def test_the_row_bound_agrees_with_its_definition(row: int) -> None:
    scores, allowed, error = ROWS[row]
    got = row_weight_bound(scores, allowed, error)
    want = _pairwise_row(scores, allowed, error)
    assert got.shape == want.shape
    assert np.all(got[~allowed] == 0.0)
    # The two sums round differently: a few eps of the weight (<= 1), nothing more.
    assert np.all(np.abs(got - want) <= 1e-12 * want + 8 * EPS), (got, want)
    if row == 1:  # near 1e12 the log-sum-exp route's rounding dominates: about 1e-4 per weight
        assert 1e-5 < float(np.max(got)) < 1e-3
    if row == len(ROWS) - 1:
        assert np.all(got == 0.0)


def test_the_matrix_bound_is_the_bound_of_each_row_with_a_causal_mask() -> None:
    rng = np.random.default_rng(5)
    n = 40
    scores = rng.normal(size=(n, n)) * 30
    scores[3] = 1e12 + rng.normal(size=n)  # spread like unit scores, near 1e12
    allowed = np.tril(np.ones((n, n), bool))
    error = np.abs(rng.normal(size=(n, n))) * 1e-12
    got = weight_bounds(scores, allowed, error)
    for i in range(n):
        want = _pairwise_row(scores[i], allowed[i], error[i])
        assert np.all(np.abs(got[i] - want) <= 1e-12 * want + 8 * EPS), i
    assert np.all(got[0] == 0.0)  # the first causal row has one key
    assert float(np.max(got[3])) > 1e-5  # the row near 1e12


@pytest.mark.timing
def test_the_512x64_attention_bound_is_small_and_quick() -> None:

    rng = np.random.default_rng(9901)
    q, k, v = (rng.normal(size=(512, 64)) for _ in range(3))
    s = q @ k.T / 8.0
    w = np.exp(s - s.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    start = time.process_time()
    bound = score_rounding("attention", [q.tolist(), k.tolist(), v.tolist()], {"outputs": w @ v, "weights": w})
    seconds = time.process_time() - start
    assert bound is not None and bound["weights"].shape == (512, 512) and bound["outputs"].shape == (512, 64)
    # Well-conditioned inputs: float64 code is accurate to about 1e-13; the check keeps its 1e-9.
    assert 0.0 < float(np.max(bound["weights"])) < 1e-12
    assert seconds < 2.0  # the pairwise bound took 3.6 s of CPU here (a 512x512 sum per weight row)


def test_a_big_check_calls_the_reference_once() -> None:
    calls = []
    args = {"Q": {"normal": [64, 8]}, "K": {"normal": [64, 8]}, "V": {"normal": [64, 8]}}
    check, plain = make("compare", "attention", args)
    real = plain.reference["attention"]

    @functools.wraps(real)
    def counted(*a: object, **kw: object) -> object:
        calls.append(a)
        return real(*a, **kw)

    # As grading prepares it: the pack's error analysis (the grader_float64_error hook) gives the floor.
    ctx = dataclasses.replace(plain, reference={**plain.reference, "attention": counted}, error_bound=score_rounding)
    prepared = prepare(check, ctx)
    # The expected value and its rounding floor share one call ...
    assert len(calls) == 1
    call = prepared.calls[0]
    known, value = ctx.last_reference("attention", call.args)
    assert known and np.array_equal(value[1], prepared.expected["weights"])
    # ... which the result budget reuses; other arguments, or another function, are not taken for these.
    assert ctx.last_reference("attention", tuple(list(call.args))) == (False, None)
    assert ctx.last_reference("softmax", call.args) == (False, None)
    ctx.forget_reference()
    assert ctx.last_reference("attention", call.args) == (False, None)
    assert FLOOR_KEY not in prepared.expected  # well-conditioned: the default tolerance stands


# --- the worker: large float arguments and results -------------------------------------------------


def _mutations() -> dict[str, Any]:
    """Things a call may do to a 2-d list of floats it was handed, by name."""

    class Liar(float):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = float.__hash__

    class LiarRow(list):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = None  # type: ignore[assignment]

    def set_value(a: list) -> None:
        a[7][3] = a[7][3] + 1.0

    def deep_last_bit(a: list) -> None:
        a[-1][-1] = math.nextafter(a[-1][-1], math.inf)  # one float deep in the last row, one ulp off

    def same_value_as_int(a: list) -> None:
        a[0][0] = int(a[0][0])  # 2.0 -> 2: equal, but another JSON text

    def one_as_true(a: list) -> None:
        a[0][1] = True  # 1.0 -> True: equal, but a bool

    def numpy_float(a: list) -> None:
        a[1][1] = np.float64(a[1][1])  # equal, a float subclass: not what it was given

    def lying_float(a: list) -> None:
        a[5][6] = Liar(a[5][6] + 1.0)  # says it equals anything

    def lying_row(a: list) -> None:
        a[6] = LiarRow([x + 1.0 for x in a[6]])  # a row of another type that says it equals anything

    def equal_row_subclass(a: list) -> None:
        a[6] = LiarRow(a[6])  # equal values, another type of row

    def row_as_array(a: list) -> None:
        a[8] = np.array(a[8])  # equal values, a numpy row

    def nan_to_new_nan(a: list) -> None:
        a[3][5] = float("nan")  # another NaN object: still NaN, so unchanged

    def zero_to_negative_zero(a: list) -> None:
        a[0][2] = -0.0  # equal to 0.0 (as == says): unchanged

    def same_float_again(a: list) -> None:
        a[4][1] = float(str(a[4][1]))  # an equal float, another object: unchanged

    def row_copied(a: list) -> None:
        a[2] = list(a[2])  # an equal row: unchanged

    def row_as_tuple(a: list) -> None:
        a[2] = tuple(a[2])

    def appended(a: list) -> None:
        a[9].append(0.5)

    def row_dropped(a: list) -> None:
        del a[-1]

    def nested(a: list) -> None:
        a[4][4] = [a[4][4]]

    def swapped(a: list) -> None:
        a[0][1], a[0][2] = a[0][2], a[0][1]

    def cycle(a: list) -> None:
        a[10].append(a)

    return {
        "nothing": lambda a: None,
        "set_value": set_value,
        "deep_last_bit": deep_last_bit,
        "same_value_as_int": same_value_as_int,
        "one_as_true": one_as_true,
        "numpy_float": numpy_float,
        "lying_float": lying_float,
        "lying_row": lying_row,
        "equal_row_subclass": equal_row_subclass,
        "row_as_array": row_as_array,
        "nan_to_new_nan": nan_to_new_nan,
        "zero_to_negative_zero": zero_to_negative_zero,
        "same_float_again": same_float_again,
        "row_copied": row_copied,
        "row_as_tuple": row_as_tuple,
        "appended": appended,
        "row_dropped": row_dropped,
        "nested": nested,
        "swapped": swapped,
        "cycle": cycle,
    }


UNCHANGED = {"nothing", "nan_to_new_nan", "row_copied", "zero_to_negative_zero", "same_float_again"}


@pytest.mark.parametrize("shape", [(80, 64), (512, 64)])
@pytest.mark.parametrize("name", sorted(_mutations()))
def test_a_large_float_argument_s_mutation_is_seen_as_the_generic_check_sees_it(
    name: str, shape: tuple[int, int]
) -> None:

    rng = np.random.default_rng(3)
    value = rng.normal(size=shape).tolist()
    value[0][0] = 2.0
    value[0][1] = 1.0
    value[0][2] = 0.0
    value[3][5] = float("nan")
    wire = phase_wire((Call("f", (value, [1.0, 2.0]), 1.0),))[4:]
    calls, blob = worker._phase(wire)
    # the large argument travels apart, as its own marshal (its lists' headers, a code and 8 bytes per float)
    assert blob is not None and bytes(blob) == marshal.dumps(value, 2)
    assert len(blob) == 5 + shape[0] * (5 + shape[1] * 9)
    assert calls == [{"function": "f", "args": [{"$marshal": len(blob)}, [1.0, 2.0]]}]
    [(function, args, pristine)] = worker._work(calls, blob)
    assert function == "f" and type(pristine[0]) is type(pristine[1]) is worker._Marshalled
    assert type(pristine[0].data) is memoryview  # the phase's own bytes: no copy made before the call
    assert marshal.dumps(args[0], 2) == marshal.dumps(value, 2)  # bit for bit: NaN and -0.0 too
    assert pristine[1].same([1.0, 2.0]) and not pristine[1].same([1.0, 2.0, 3.0]) and not pristine[1].same((1.0, 2.0))
    generic = worker._copy(args)  # the copy compared element by element
    marshalled = [worker._Marshalled(a) for a in args]  # what an argument that came as JSON gets
    _mutations()[name](args[0])
    fast = worker._mutated(args, pristine)
    assert fast == worker._mutated(args, generic) == worker._mutated(args, marshalled)
    assert fast == ([] if name in UNCHANGED else [0])


def test_an_argument_s_marshalled_copy_judges_changes_as_the_element_walk_does() -> None:

    class Hostile(list):
        def __reduce_ex__(self, protocol: object) -> object:
            raise RuntimeError("no")

    def changes() -> dict[str, tuple[Any, Any]]:
        """(the argument as it came, as the call left it), by name."""
        return {
            "negative_zero": ([0.0, 1.0], [-0.0, 1.0]),  # equal numbers: unchanged, as == says
            "nan_payload": ([math.nan], [-math.nan]),  # still NaN: unchanged
            "shared_string": (["ab", "ab"], ["ab"] * 2),
            "numpy_float": ([1.0, 2.0], [np.float64(1.0), 2.0]),
            "int_for_float": ([1.0, 2.0], [1, 2.0]),
            "tuple_row": ([[1.0], [2.0]], [(1.0,), [2.0]]),
            "list_subclass": ([1.0], Hostile([1.0])),
            "dict_rebuilt": ({"a": [1.0]}, {"a": [1.0]}),
            "dict_changed": ({"a": [1.0]}, {"a": [1.5]}),
            "cycle": ([1.0], None),
        }

    verdicts = {}
    for name, (given, left) in changes().items():
        if left is None:  # the call appends the list to itself
            left = list(given)
            left.append(left)
        marshalled = worker._Marshalled(given)
        assert marshalled.same(left) == worker._same(left, worker._copy(given)), name
        verdicts[name] = marshalled.same(left)
    assert verdicts == {
        "negative_zero": True,
        "nan_payload": True,
        "shared_string": True,
        "numpy_float": False,
        "int_for_float": False,
        "tuple_row": False,
        "list_subclass": False,
        "dict_rebuilt": True,
        "dict_changed": False,
        "cycle": False,
    }


def test_a_row_of_plain_numbers_is_returned_as_the_element_walk_returns_it() -> None:
    big = 10**400
    for value in ([1.0, 2, True], (1.5, -2.0), [1, big], [[1.0, 2.0], (3, 4)], [math.inf, 1.0], list(range(50))):
        try:
            slow = [worker.to_data(v, np, 1) for v in value]
        except worker.BadReturn as exc:
            with pytest.raises(worker.BadReturn) as raised:
                worker.to_data(value, np)
            assert str(raised.value) == str(exc) and "too large to be a float" in str(exc)
            continue
        fast = worker.to_data(value, np)
        assert fast == slow and [type(x) for x in fast] == [type(x) for x in slow]
    with pytest.raises(worker.BadReturn, match="too large"):
        worker.to_data([1.0] * 10, np, budget=[5])
    with pytest.raises(worker.BadReturn, match="nested too deeply"):
        worker.to_data([1.0], np, depth=worker.MAX_DEPTH)


def test_a_large_argument_arrives_as_the_same_lists_and_a_large_result_leaves_as_its_bytes(tmp_path: Path) -> None:

    rng = np.random.default_rng(4)
    array = rng.normal(size=(300, 70))
    blobs: list[Any] = []
    data = worker.to_data([array, array[:, ::2].astype(np.float32), np.arange(5000) > 2500], np, blobs=blobs)
    assert data == [
        {"$array": ["<f8", [300, 70]]},
        {"$array": ["<f8", [300, 35]]},
        {"$array": ["|b1", [5000]]},
    ]
    path = tmp_path / "frame"
    with path.open("wb") as fh:
        worker._emit(fh.fileno(), {"event": "call", "status": "returned", "value": data, "mutated": []}, blobs)
    frame = path.read_bytes()
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4

    got = decode_frame(frame[4:], "call", budget_for([array, array[:, ::2], np.zeros(5000)]))["value"]
    assert np.array_equal(got[0], array) and got[0].flags.writeable is False
    assert np.array_equal(got[1], array[:, ::2].astype(np.float32).astype(np.float64))
    assert got[2].dtype == np.bool_ and int(got[2].sum()) == 2499


def test_a_frame_larger_than_the_pipe_arrives_whole() -> None:

    array = np.random.default_rng(6).normal(size=(512, 512))  # 2 MiB: about 32 pipe buffers
    blobs: list[Any] = []
    value = worker.to_data((array, 1.5), np, blobs=blobs)
    read_fd, write_fd = os.pipe()
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(read_fd, 1 << 16), b"")))
    reader.start()
    worker._emit(write_fd, {"event": "call", "status": "returned", "value": value, "mutated": []}, blobs)
    os.close(write_fd)
    reader.join(30)
    os.close(read_fd)
    frame = b"".join(chunks)
    assert len(chunks) > 1 and int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert frame[-8 * 512 * 512 :] == array.astype("<f8").tobytes()


# --- the grader: reading a large frame -------------------------------------------------------------


def _big_frame(array: np.ndarray) -> bytes:
    """A whole frame (length prefix included) of a call that returned ``array``, as the worker writes it."""

    body = worker_frame(array)
    return len(body).to_bytes(4, "big") + body


def _writer(fd: int, data: bytes, pause_after: int = -1, pause: float = 0.0) -> Any:
    """Write ``data`` to ``fd`` from a thread (a pipe holds less), pausing once after ``pause_after`` bytes."""

    def run() -> None:
        view = memoryview(data)
        if pause_after >= 0:
            head = view[:pause_after]
            while head:
                head = head[os.write(fd, head) :]
            time.sleep(pause)
            view = view[pause_after:]
        while view:
            view = view[os.write(fd, view) :]

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_large_frame_is_read_in_place_and_decoded_as_its_arrays() -> None:

    weights = np.random.default_rng(7).random((512, 512))
    frame = _big_frame(weights)
    assert len(frame) > LARGE_FRAME_BYTES
    small = json.dumps({"event": "call", "status": "returned", "value": 1.5, "mutated": []}).encode()
    small = len(small).to_bytes(4, "big") + small
    job = _PipeJob()
    child = JobChannel(job)
    sink = {"stdout": bytearray(), "stderr": bytearray()}
    # A small answer, then half of the large one, then a pause longer than the deadline: the
    # reader says "timeout", keeps what it has, and reads the rest at the next call.
    thread = _writer(job.write_fd, small + frame, pause_after=len(small) + len(frame) // 2, pause=0.3)
    assert child.read_frame(time.monotonic() + 5.0, sink, "call", budget_for(weights))["value"] == 1.5
    assert child.last_wire == small[4:]
    first = child.read_frame(time.monotonic() + 0.1, sink, "call", budget_for(weights))
    assert first == "timeout" and child.large is not None and child.filled == len(frame) // 2 - 4
    got = child.read_frame(time.monotonic() + 10.0, sink, "call", budget_for(weights))
    thread.join()
    assert isinstance(got, dict) and got["status"] == "returned"
    assert np.array_equal(got["value"], weights) and got["value"].flags.writeable is False
    assert child.bytes_read == len(small) + len(frame) and child.large is None
    # No wire (never the small answer's): its bytes key the kept verdicts as a LargeFrame.
    assert child.last_wire == b"" and child.last_large == LargeFrame(bytearray(frame[4:]))
    assert child.last_large is not None and np.shares_memory(
        np.frombuffer(child.last_large.data, np.uint8), got["value"]
    )
    assert child.read_frame(time.monotonic() + 0.05, sink, "call", budget_for(weights)) == "timeout"
    child.kill()


def test_a_large_frame_cut_short_is_the_job_s_end_not_a_frame() -> None:

    weights = np.zeros((512, 512))
    frame = _big_frame(weights)
    job = _PipeJob()
    child = JobChannel(job)
    sink = {"stdout": bytearray(), "stderr": bytearray()}
    thread = _writer(job.write_fd, frame[: len(frame) // 3])
    thread.join()
    os.close(job.write_fd)
    job.write_fd = os.open(os.devnull, os.O_WRONLY)  # for kill() to close
    assert child.read_frame(time.monotonic() + 5.0, sink, "call", budget_for(weights)) == "eof"
    assert child.bytes_read == len(frame) // 3 and child.large is None and not child.result_open
    child.kill()


def test_a_large_frame_over_its_limit_is_refused_before_anything_is_kept() -> None:

    small = budget_for(np.zeros((64, 64)))  # a 64x64 reference: about 0.5 MiB allowed
    frame = _big_frame(np.zeros((512, 512)))
    job = _PipeJob()
    os.write(job.write_fd, frame[: 1 << 16])
    child = JobChannel(job)
    error = child.read_frame(time.monotonic() + 5.0, {"stdout": bytearray(), "stderr": bytearray()}, "call", small)
    assert isinstance(error, BoundaryError) and error.fatal
    assert error.message == "the result is far larger than the reference's (2.0 MiB)"
    # Its length and at most one read ahead (what the pipe held), and no buffer for the rest.
    assert child.bytes_read <= 4 + READ_AHEAD_BYTES and child.large is None
    child.kill()


@pytest.mark.parametrize(
    "case",
    ["more numbers than the budget", "bytes beyond the header", "fewer bytes than the header", "not UTF-8 JSON"],
)
def test_a_malformed_or_oversized_large_frame_is_refused(case: str) -> None:

    budget = budget_for(np.zeros((512, 512)))
    text = {"event": "call", "status": "returned", "mutated": [], "value": {"$array": ["<f8", [512, 512]]}}
    blob = np.zeros(512 * 512).tobytes()
    if case == "more numbers than the budget":
        text["value"]["$array"][1] = [2048, 512]  # 4x the reference's numbers (its frame fits the byte limit)
        blob = blob * 4
    elif case == "bytes beyond the header":
        blob += b"\0" * 8
    elif case == "fewer bytes than the header":
        blob = blob[:-8]
    header = json.dumps(text).encode()
    body = b"\x00" + len(header).to_bytes(4, "big") + header + blob
    if case == "not UTF-8 JSON":
        body = b"\xff" * len(body)
    job = _PipeJob()
    child = JobChannel(job)
    thread = _writer(job.write_fd, len(body).to_bytes(4, "big") + body)
    error = child.read_frame(time.monotonic() + 10.0, {"stdout": bytearray(), "stderr": bytearray()}, "call", budget)
    thread.join()
    assert isinstance(error, BoundaryError), error
    if case == "more numbers than the budget":
        assert not error.fatal and error.message.startswith("the result is far larger than the reference's (more than")
    else:
        assert error.fatal
    assert child.bytes_read == 4 + len(body) and child.large is None
    child.kill()


def test_a_512x64_call_goes_through_a_job_whole(tmp_path: Path) -> None:
    from grader.execution.calls import run_calls

    rng = np.random.default_rng(8)
    q = rng.normal(size=(512, 64))
    call = Call("look", (q.tolist(), q[:4].tolist()), 5.0, budget=budget_for([np.zeros((512, 512)), 0.0]))
    assert len(call.wire) > 256 << 10  # a large message for the worker, a large frame back
    path = tmp_path / "attention.py"
    path.write_text(
        "import numpy as np\ndef look(a, b):\n    x = np.asarray(a)\n    return x @ x.T, sum(map(sum, a)) + len(b)\n"
    )
    plain = run_calls(str(path), [call]).results[0]
    assert plain.status == "returned" and plain.mutated_args == ()
    weights, total = plain.value
    assert np.array_equal(weights, q @ q.T) and total == sum(map(sum, q.tolist())) + 4
    path.write_text("def look(a, b):\n    a[511][63] += 1.0\n    return [[0.0]], 0.0\n")
    changed = run_calls(str(path), [call]).results[0]
    assert changed.status == "returned" and changed.mutated_args == (0,)


def test_a_large_part_s_tolerance_is_made_once_and_judges_as_before() -> None:
    from grader.compare import Mismatch, compare, tolerance_limit
    from grader.kinds import LIMIT_KEPT_ELEMENTS, compare_parts

    check, ctx = make("compare", "attention")
    rng = np.random.default_rng(9)
    weights = rng.random((256, 128))
    assert weights.size >= LIMIT_KEPT_ELEMENTS
    floor = np.full(weights.shape, 1e-7)
    limit = ctx.limit_for(weights, 1e-6, 1e-9, floor)
    assert limit is not None and not limit.flags.writeable
    assert np.array_equal(limit, 1e-9 + 1e-6 * np.abs(weights) + floor)  # the sums as written out
    assert ctx.limit_for(weights, 1e-6, 1e-9, floor) is limit  # kept
    assert ctx.limit_for(weights.copy(), 1e-6, 1e-9, floor) is not limit  # another part, however equal
    assert ctx.limit_for(weights, 1e-5, 1e-9, floor) is not limit
    assert ctx.limit_for(weights[:10], 1e-6, 1e-9, None) is None  # small: compare makes its own
    # The same verdicts and messages with it as without: within, at the edge (rounding puts some
    # elements just past it), past it at one element.
    edge = weights + tolerance_limit(weights, 1e-6, 1e-9, floor)
    past = weights.copy()
    past[17, 5] += 1e-5
    outcomes = {}
    for label, got in (("within", weights), ("edge", edge), ("past", past)):
        seen = []
        for kept in (None, limit):
            try:
                compare("weights", weights, got, 1e-6, 1e-9, floor, "why", kept)
                seen.append("passed")
            except Mismatch as m:
                seen.append(m.message)
        assert seen[0] == seen[1], label
        outcomes[label] = seen[0]
    assert outcomes["within"] == "passed"
    assert outcomes["past"].startswith("weights differs from the expected value by up to 1e-05 (at weights[17][5])")
    # Through compare_parts, as the compare kind judges: an answer off by one element fails.
    expected = {"outputs": weights[:, :64].copy(), "weights": weights}
    answer = [expected["outputs"], weights.copy()]
    assert compare_parts(check, ctx, expected, answer).status == "passed"
    answer[1][200, 100] += 1e-3
    verdict = compare_parts(check, ctx, expected, answer)
    assert verdict.status == "failed" and "(at weights[200][100])" in verdict.message


def test_a_large_frame_of_json_lists_is_read_in_place_too() -> None:
    rows = np.random.default_rng(10).normal(size=(200, 200)).tolist()  # a pure-Python answer: JSON numbers
    body = json.dumps({"event": "call", "status": "returned", "value": rows, "mutated": []}).encode()
    assert len(body) > LARGE_FRAME_BYTES
    job = _PipeJob()
    child = JobChannel(job)
    thread = _writer(job.write_fd, len(body).to_bytes(4, "big") + body)
    got = child.read_frame(time.monotonic() + 10.0, {"stdout": bytearray(), "stderr": bytearray()}, "call", None)
    thread.join()
    assert isinstance(got, dict) and got["value"] == rows and child.last_wire == b""
    child.kill()


BIG_SPEC = """\
exercise: BIG.01
title: One large attention call
section: "tests"
seed: 9901
returns:
  attention: [outputs, weights]
defaults:
  timeout: 10
  visibility: hidden
  points: 1
  hint: the large check
checks:
  - id: big-512x64
    kind: compare
    function: attention
    args:
      Q: {normal: [512, 64]}
      K: {normal: [512, 64]}
      V: {normal: [512, 64]}
"""

OFF_BY_ONE = """
_right = attention


def attention(Q, K, V, causal=False):
    outputs, weights = _right(Q, K, V, causal)
    weights = weights.copy()
    weights[200, 100] += 1e-6  # one weight of 262,144, a millionth off
    return outputs, weights
"""


def test_the_512x64_check_passes_the_right_answer_and_fails_one_element_off(tmp_path: Path) -> None:
    from conftest import REFERENCE, SUBMISSIONS

    from grader.config.core import Config
    from grader.config.parser import build_parser
    from grader.config.plugins import get_plugin_manager
    from grader.execution.calls import run_calls
    from grader.grading import session
    from grader.grading.judging import judge

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "BIG.01.yaml").write_text(BIG_SPEC)
    pm = get_plugin_manager(load_entrypoints=False)
    argv = ["grade", "x.py", "--insecure", "--specs", str(specs), "--reference", str(REFERENCE)]
    collected = session.collect(Config("grade", build_parser(pm).parse_args(argv), pm))
    [(_, [pc])] = collected.checks
    assert len(pc.prepared.calls[0].encoded[1]) == 3  # the arguments travel apart, as their marshal
    right = (SUBMISSIONS / "correct_numpy" / "attention.py").read_text()
    verdicts, results, kept = {}, {}, {}
    cache = VerdictCache()
    for name, source in (("right", right), ("again", right + "\n# another student\n"), ("off", right + OFF_BY_ONE)):
        path = tmp_path / name / "attention.py"
        path.parent.mkdir()
        path.write_text(source)
        [result] = run_calls(str(path), pc.prepared.calls).results
        assert result.status == "returned" and result.mutated_args == ()
        assert result.wire == b"" and isinstance(result.large, LargeFrame)  # a large frame: its key, no wire
        results[name] = result
        verdicts[name] = judge(pc.check, pc.prepared, [result], pc.kind, pc.context)
        kept[name] = cache.judge(pc.check, pc.prepared, [result], pc.kind, pc.context, False)
    assert verdicts["right"].status == verdicts["again"].status == "passed"
    off = verdicts["off"]
    assert off.status == "failed"
    assert off.message.startswith("weights differs from the expected value by up to 1e-06 (at weights[200][100])")
    # The same answer, byte for byte, is the same key (the kept verdict); one element off is another.
    assert answers_of([results["again"]]) == answers_of([results["right"]]) != answers_of([results["off"]])
    assert kept["again"] is kept["right"] and kept["right"] == verdicts["right"]
    assert kept["off"] is not kept["right"] and kept["off"] == off


@pytest.mark.parametrize("shape", [(5000,), (80, 64), (3, 40, 50), (2, 3, 4, 200)])
def test_a_large_argument_arrives_bit_for_bit_and_its_bytes_are_its_pristine_copy(shape: tuple[int, ...]) -> None:

    array = np.random.default_rng(5).normal(size=shape)
    flat = array.reshape(-1)
    flat[:6] = [math.nan, -math.nan, -0.0, 0.0, math.inf, -math.inf]
    flat[6] = 5e-324  # a subnormal
    calls, blob = worker._phase(phase_wire((Call("f", (array.tolist(),), 1.0),))[4:])
    [(_, [got], [kept])] = worker._work(calls, blob)
    assert bytes(kept.data) == marshal.dumps(array.tolist(), 2)
    assert np.array_equal(np.array(got).view(np.int64), array.view(np.int64))  # every bit: NaN's sign, -0.0
    assert kept.same(got) and marshal.dumps(kept.pristine(), 2) == bytes(kept.data)
    changed = kept.pristine()
    row = changed
    while type(row[-1]) is list:
        row = row[-1]
    row[-1] = int(row[-1])  # an equal int where a float was: changed, as the element walk says
    assert not kept.same(changed) and not worker._same(changed, array.tolist())
    assert worker._mutated([got], [kept]) == [] and worker._mutated([changed], [kept]) == [0]


def test_a_large_frame_key_is_its_bytes_hashed_from_a_sample() -> None:

    data = bytearray(np.random.default_rng(8).random(300_000).tobytes())
    key = LargeFrame(data)
    same = LargeFrame(bytearray(data))
    assert key == same and hash(key) == hash(same) and len(key) == len(data)
    unsampled = bytearray(data)
    unsampled[LargeFrame.STRIDE + 1] ^= 1  # where no sample falls: the same hash, yet another key
    other = LargeFrame(unsampled)
    assert hash(other) == hash(key) and other != key
    assert len({key: 1, same: 2, other: 3}) == 2
    sampled = bytearray(data)
    sampled[LargeFrame.STRIDE * 7] ^= 1
    assert LargeFrame(sampled) != key and hash(LargeFrame(sampled)) != hash(key)
    assert key != bytes(data) and key != data  # a key equals only a key


def test_large_answers_are_kept_apart_and_never_empty_the_table_of_small_ones() -> None:
    from grader.execution.memo import BudgetTable

    class Table(BudgetTable[Any, str]):
        MAX_BYTES = 100
        LARGE_MAX_BYTES = 2500

    table = Table()
    small = [bytes([i]) * 30 for i in range(3)]
    table._keep(small[0], 30, "a")
    table._keep(small[1], 30, "b")
    frames = [LargeFrame(bytearray([i]) * 1000) for i in range(4)]
    table._keep((frames[0],), 1000, "x", large=True)
    table._keep((frames[1],), 1000, "y", large=True)
    assert table._kept((LargeFrame(bytearray([1]) * 1000),)) == "y" and table._kept(small[0]) == "a"
    table._keep((frames[2],), 1000, "z", large=True)  # over the large budget: only the large keys go
    assert table._kept((frames[0],)) is None and table._kept((frames[1],)) is None
    assert table._kept((frames[2],)) == "z" and table._kept(small[0]) == "a" and table._kept(small[1]) == "b"
    table._keep(small[2], 30, "c")
    table._keep(b"d" * 30, 30, "d")  # over the small budget: the small keys go, the large one stays
    assert table._kept(small[0]) is None and table._kept(b"d" * 30) == "d" and table._kept((frames[2],)) == "z"
