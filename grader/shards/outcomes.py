"""Outcomes as plain data: what a Dask worker sends back and a shard's record keeps of each submission's calls.

`encode_outcome` keeps each call's frame as the job wrote it (its wire form); `decode_outcome`
reads it back exactly as a local run reads its jobs' frames, strictly. Re-exported by `grader.shards`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
from collections.abc import Sequence
from typing import Any

from grader.execution.boundary import FRAMES, MAX_NAME, MAX_WHERE, BoundaryError, clean_text, decode_frame, frame_limit
from grader.execution.channel import result_of
from grader.models import CALL_STATUSES, Call, CallResult, RunOutcome

__all__ = ["OutcomeError", "decode_outcome", "encode_outcome"]


def _nonfinite(value: Any) -> Any:
    if type(value) is float and value - value != 0.0:
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, (list, tuple)):
        return [_nonfinite(v) for v in value]
    if hasattr(value, "tolist"):  # a numpy array or scalar
        return _nonfinite(value.tolist())
    return value


def encode_outcome(outcome: RunOutcome, wires: dict[bytes, int] | None = None, inline: bool = False) -> dict[str, Any]:
    """A `RunOutcome` as plain JSON data, for `decode_outcome`.

    A call's result that came as a frame (`grader.models.CallResult.wire`) is kept in that wire form,
    ``{"wire": ..., "seconds": ...}``: the frame's bytes in base64, or, when ``wires`` is given, their
    position in that table of distinct frames (filled here; the caller sends the frames beside the
    data). With ``inline``, a frame new to the table is written in base64 (and takes the table's next
    position) and one already there by its position: data read in the order it was written
    (`decode_outcome` with ``grow``) rebuilds the table as it goes (a shard's records). Decoded again,
    it is the very frame the job wrote: read as a local run reads it
    (`grader.execution.boundary.FRAMES`), and judged once per distinct answer
    (`grader.grading.judging.VerdictCache`). A result with no frame (a timeout, a crash, a refused or
    large value) is written out field by field, non-finite floats as ``{"$float": ...}``.
    """
    rows: list[dict[str, Any]] = []
    for r in outcome.results:
        if r.wire:
            if wires is None or (inline and r.wire not in wires):
                where: Any = base64.b64encode(r.wire).decode("ascii")
                if wires is not None:
                    wires[r.wire] = len(wires)
            else:
                where = wires.setdefault(r.wire, len(wires))
            rows.append({"wire": where, "seconds": float(r.seconds)})
            continue
        rows.append(
            {
                "status": r.status,
                "value": _nonfinite(r.value),
                "error_type": r.error_type,
                "value_error": r.value_error,
                "message": r.message,
                "where": r.where,
                "seconds": float(r.seconds),
                "mutated_args": list(r.mutated_args),
            }
        )
    return {
        "results": rows,
        "import_error": outcome.import_error,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "sha256": outcome.sha256,
    }


class OutcomeError(ValueError):
    """Data that is not an outcome `encode_outcome` writes, for these calls."""


def _text(value: Any, limit: int, what: str) -> str:
    if type(value) is not str:
        raise OutcomeError(f"{what} is not text")
    if len(value) > limit:
        raise OutcomeError(f"{what} is longer than {limit} characters")
    return clean_text(value, limit)


_RESULT_KEYS = frozenset(
    {
        "status",
        "value",
        "error_type",
        "value_error",
        "message",
        "where",
        "seconds",
        "mutated_args",
    }
)
_OUTPUT_LIMIT = 64 << 10
_MESSAGE_LIMIT = 16 << 10


_WIRE_KEYS = frozenset({"wire", "seconds"})


def decode_outcome(
    data: Any,
    calls: Sequence[Call],
    wires: Sequence[bytes] | None = None,
    timed: bool = False,
    checked: dict[Any, str] | None = None,
    grow: bool = False,
) -> RunOutcome:
    """Rebuild a `RunOutcome` from `encode_outcome` data, strictly, for these calls.

    Every key and type is checked. A result in wire form is the job's frame: it is decoded and
    validated by `grader.execution.boundary.FRAMES` against its call's budget, exactly as a job's
    answer is read in a local run (a frame seen before is decoded once), and keeps its bytes
    (`grader.models.CallResult.wire`). A result written field by field is validated by
    `grader.execution.boundary.decode_frame` the same way. Texts are cut as the boundary cuts them.

    Parameters
    ----------
    data : object
        What `encode_outcome` wrote (parsed JSON).
    calls : sequence of Call
        The calls, in the order their results are listed.
    wires : sequence of bytes, optional
        The table of frames a wire result names by position (`encode_outcome`'s ``wires``); a wire
        result may also hold its frame in base64.
    grow : bool
        Whether a frame in base64 is appended to ``wires`` (a list), as `encode_outcome` with
        ``inline`` gave it the table's next position.
    timed : bool
        Whether a result may be its status and seconds only (`grader.shards.cluster.timed_outcome`:
        workers that judge, for a client where no plugin reads the values); its value is then None.
    checked : dict, optional
        For a reader that needs no value (a merge whose plugins read none): every result is checked
        as above but kept as its status and seconds only, and a frame already checked for the same
        budget (a key of ``checked``, filled here) is not decoded again.

    Raises
    ------
    OutcomeError
        If anything is missing, unknown, of the wrong type or over a limit.
    """
    if type(data) is not dict or data.keys() != {
        "results",
        "import_error",
        "stdout",
        "stderr",
        "sha256",
    }:
        raise OutcomeError("not an outcome")
    rows = data["results"]
    if type(rows) is not list or len(rows) != len(calls):
        raise OutcomeError(f"{len(rows) if type(rows) is list else 'no'} results for {len(calls)} calls")
    if timed:
        results = [_timed_result(i, row) for i, row in enumerate(rows)]
    elif checked is not None:
        results = [
            _checked_result(i, row, call, wires, checked, grow) for i, (row, call) in enumerate(zip(rows, calls))
        ]
    else:
        results = _decode_results(rows, calls, wires, grow)
    sha = data["sha256"]
    if type(sha) is not str or (sha and (len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha))):
        raise OutcomeError("sha256 is not a SHA-256")
    return RunOutcome(
        results=tuple(results),
        import_error=_text(data["import_error"], _OUTPUT_LIMIT, "import_error"),
        stdout=_text(data["stdout"], _OUTPUT_LIMIT, "stdout"),
        stderr=_text(data["stderr"], _OUTPUT_LIMIT, "stderr"),
        sha256=sha,
    )


def _seconds(row: dict[str, Any], i: int) -> float:
    seconds = row["seconds"]
    if type(seconds) not in (int, float) or not 0 <= seconds < 1e7:
        raise OutcomeError(f"result {i}: seconds is not a duration")
    return float(seconds)


def _timed_result(i: int, row: Any) -> CallResult:
    """A `grader.shards.cluster.timed_outcome` result: its status and seconds."""
    if type(row) is not dict or row.keys() != {"status", "seconds"} or row["status"] not in CALL_STATUSES:
        raise OutcomeError(f"result {i} is not a call's status and seconds")
    return CallResult(row["status"], seconds=_seconds(row, i))


def _checked_result(
    i: int, row: Any, call: Call, wires: Sequence[bytes] | None, checked: dict[Any, str], grow: bool
) -> CallResult:
    """`_decode_result`'s checks, its status and seconds kept (a frame checked once per budget: ``checked``)."""
    if type(row) is dict and row.keys() == _WIRE_KEYS and type(row["wire"]) is int:
        key = (row["wire"], call.budget)
        status = checked.get(key)
        if status is not None:
            return CallResult(status, seconds=_seconds(row, i))
        result = _decode_result(i, row, call, wires, grow)
        checked[key] = result.status
        return CallResult(result.status, seconds=result.seconds)
    result = _decode_result(i, row, call, wires, grow)
    return CallResult(result.status, seconds=result.seconds)


def _decode_results(
    rows: list[Any], calls: Sequence[Call], wires: Sequence[bytes] | None, grow: bool
) -> list[CallResult]:
    """`_decode_result` of each row; a frame named by its position in ``wires`` (a Dask chunk's table) is read
    as a local run reads its job's frame (`grader.execution.boundary.FRAMES`, then
    `grader.execution.channel.result_of`), with its sizes checked once per (frame, budget) of this outcome."""
    results: list[CallResult] = []
    sized: set[tuple[int, Any]] = set()
    count = -1 if wires is None else len(wires)
    for i, (row, call) in enumerate(zip(rows, calls)):
        where = row.get("wire") if type(row) is dict and len(row) == 2 else None
        if type(where) is not int or not 0 <= where < count or row.keys() != _WIRE_KEYS:
            results.append(_decode_result(i, row, call, wires, grow))
            continue
        assert wires is not None  # noqa: S101 - count >= 0
        wire, budget = wires[where], call.budget
        if type(wire) is not bytes:
            wire = bytes(wire)
        if (where, budget) not in sized:
            if not wire or len(wire) > _frame_limit(budget):
                raise OutcomeError(f"result {i}: the frame is empty or larger than its call allows")
            sized.add((where, budget))
        try:
            frame = FRAMES.decode(wire, "call", budget)
        except BoundaryError as exc:
            raise OutcomeError(f"result {i}: {exc}") from None
        results.append(result_of(frame, _seconds(row, i), wire))
    return results


def _decode_result(i: int, row: Any, call: Call, wires: Sequence[bytes] | None, grow: bool = False) -> CallResult:
    """One call's result of `decode_outcome` (``i``: its position, named in errors)."""
    if type(row) is dict and row.keys() == _WIRE_KEYS:
        where = row["wire"]
        if type(where) is int:
            if wires is None or not 0 <= where < len(wires):
                raise OutcomeError(f"result {i}: no such frame")
            wire = wires[where]
        else:
            if type(where) is not str or len(where) > 2 * _frame_limit(call.budget):
                raise OutcomeError(f"result {i}: the frame is not base64 text of a frame's size")
            try:
                wire = base64.b64decode(where, validate=True)
            except (binascii.Error, ValueError):
                raise OutcomeError(f"result {i}: the frame is not base64") from None
            if grow and isinstance(wires, list):
                wires.append(wire)  # read in the order written: the table's next position
        if not wire or len(wire) > _frame_limit(call.budget):
            raise OutcomeError(f"result {i}: the frame is empty or larger than its call allows")
        try:
            frame = FRAMES.decode(bytes(wire), "call", call.budget)
        except BoundaryError as exc:
            raise OutcomeError(f"result {i}: {exc}") from None
        return result_of(frame, _seconds(row, i), bytes(wire))
    if type(row) is not dict or row.keys() != _RESULT_KEYS or row["status"] not in CALL_STATUSES:
        raise OutcomeError(f"result {i} is not a call's result")
    seconds = _seconds(row, i)
    mutated = row["mutated_args"]
    if type(mutated) is not list or len(mutated) > 64 or any(type(m) is not int or m < 0 for m in mutated):
        raise OutcomeError(f"result {i}: mutated_args is not a list of positions")
    if type(row["value_error"]) is not bool:
        raise OutcomeError(f"result {i}: value_error is not a bool")
    value = None
    if row["status"] == "returned":
        text = json.dumps(
            {"event": "call", "status": "returned", "value": row["value"]},
            allow_nan=False,
        )
        try:
            value = decode_frame(text.encode(), "call", call.budget)["value"]
        except BoundaryError as exc:
            raise OutcomeError(f"result {i}: {exc}") from None
    elif row["value"] is not None:
        raise OutcomeError(f"result {i}: a value for a call that did not return")
    return CallResult(
        status=row["status"],
        value=value,
        error_type=_text(row["error_type"], MAX_NAME, "error_type"),
        value_error=row["value_error"],
        message=_text(row["message"], _MESSAGE_LIMIT, "message"),
        where=_text(row["where"], MAX_WHERE, "where"),
        seconds=seconds,
        mutated_args=tuple(mutated),
    )


@functools.lru_cache(maxsize=1024)
def _frame_limit(budget: Any) -> int:
    """The largest frame a job may answer a call of this budget with (`grader.execution.boundary.frame_limit`)."""
    return frame_limit(budget)
