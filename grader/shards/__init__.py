"""Grading past one machine: shards of a class, their record, and the merge of shards.

``grader grade PATH... --shard K/N`` grades the K-th of N slices of the class
(`select`) and writes, beside its usual files, a *shard record* in
``DIR/shard/``: ``manifest.json`` (what made it: grader version, spec and
reference hashes, the settings that change a result, the course secret's
fingerprint, ``K/N``, every id of the class, the class listing (each
submission's id and file digest), the run it belongs to (`run_of`) and the
ids of this shard) and
``records.jsonl.gz`` (per submission of the shard: the located submission,
its final result and what its calls returned). ``grader merge SHARD_DIR...
--out DIR`` reads the records of every shard and hands them to the writers
through the same hooks an unsharded run calls, in the class's order, so
every export (plugins included) writes exactly what one unsharded run
writes without knowing about shards (`merge`).

A submission's slice depends on its id only (`shard_of`: a keyed hash), so
adding students to a class never moves the others between shards. ``K``
is 1-based (``1/4`` ... ``4/4``); ``--shard auto/N`` reads it from the
scheduler (`SCHEDULER_VARIABLES`: a Kubernetes Indexed Job's
``JOB_COMPLETION_INDEX``, a Slurm array's ``SLURM_ARRAY_TASK_ID``, or
``GRADER_SHARD_INDEX``, e.g. GitHub Actions' ``strategy.job-index``; all
0-based). This module names no chapter and imports no built-in plugin.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader._version import __version__
from grader.errors import UsageError
from grader.grading.slices import CLASS_IDS, CLASS_LISTING, STASH_KEY, ShardSpec
from grader.models import (
    CALL_STATUSES,
    Call,
    CallResult,
    RunOutcome,
    Submission,
    SubmissionResult,
)
from grader.stash import StashKey

__all__ = [
    "FORMAT",
    "MANIFEST",
    "RECORDS",
    "REPLAY_KEY",
    "SUBFOLDER",
    "decode_outcome",
    "encode_outcome",
]

FORMAT = "grader-shard/1"
"""The ``format`` of a shard manifest; another value is refused by the merge."""
SUBFOLDER = "shard"
"""Where a shard's record goes inside its ``--out`` folder."""
MANIFEST = "manifest.json"
RECORDS = "records.jsonl.gz"
SEAL = "seal"
"""File in a shard folder: `seal_of` its manifest and records, under the course secret."""
_SEAL_LABEL = b"grader shard seal v1"
REPLAY_KEY = StashKey[dict[str, Any]]()
"""``config.stash`` key: during a merge, each submission's recorded outcome by id (the shard plugin's
``grader_run_calls`` answers with it, so every wrapper of that hook sees it as in the shard's run)."""
MAX_MANIFEST_BYTES = 64 << 20
MAX_RECORD_BYTES = 256 << 20

LOCATION_OPTIONS = frozenset(
    {
        "command",
        "paths",
        "out",
        "json",
        "csv",
        "junit",
        "gradescope",
        "gradebook",
        "regrade",
        "only",
        "shard",
        "dask",
        "dask_chunk",
        "dask_tls_ca",
        "dask_tls_cert",
        "dask_tls_key",
        "cpu_weight",
        "jobs",
        "quiet",
        "p",
        "specs",
        "reference",
        "mutants",
        "secret_file",
        "canvas_push",
        "roster",
        "manual",
        "policy",
        "lms_times",
        "starter",
        "pack",
    }
)
"""Options that say where a run reads or writes, or how fast it goes, not what it gives: not compared
between shards and not carried into the merge (files read are compared by content, `_options`)."""


# --- what crosses: outcomes as plain data --------------------------------------------------------


def _nonfinite(value: Any) -> Any:
    if type(value) is float and value - value != 0.0:
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, (list, tuple)):
        return [_nonfinite(v) for v in value]
    if hasattr(value, "tolist"):  # a numpy array or scalar
        return _nonfinite(value.tolist())
    return value


def encode_outcome(outcome: RunOutcome, wires: dict[bytes, int] | None = None) -> dict[str, Any]:
    """A `RunOutcome` as plain JSON data, for `decode_outcome`.

    A call's result that came as a frame (`grader.models.CallResult.wire`) is kept in that wire form,
    ``{"wire": ..., "seconds": ...}``: the frame's bytes in base64, or, when ``wires`` is given, their
    position in that table of distinct frames (filled here; the caller sends the frames beside the data).
    Decoded again (`decode_outcome`), it is the very frame the job wrote: read as a local run reads it
    (`grader.execution.boundary.FRAMES`), and judged once per distinct answer
    (`grader.grading.judging.VerdictCache`). A result with no frame (a timeout, a crash, a refused or
    large value) is written out field by field, non-finite floats as ``{"$float": ...}``.
    """
    rows: list[dict[str, Any]] = []
    for r in outcome.results:
        if r.wire:
            if wires is None:
                where: Any = base64.b64encode(r.wire).decode("ascii")
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
    from grader.execution.boundary import clean_text

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
        The table of frames a wire result names by position (`encode_outcome`'s ``wires``); without
        it, a wire result holds its frame in base64.
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
        results = [_checked_result(i, row, call, wires, checked) for i, (row, call) in enumerate(zip(rows, calls))]
    else:
        results = [_decode_result(i, row, call, wires) for i, (row, call) in enumerate(zip(rows, calls))]
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


def _checked_result(i: int, row: Any, call: Call, wires: Sequence[bytes] | None, checked: dict[Any, str]) -> CallResult:
    """`_decode_result`'s checks, its status and seconds kept (a frame checked once per budget: ``checked``)."""
    if type(row) is dict and row.keys() == _WIRE_KEYS and type(row["wire"]) in (str, int):
        key = (row["wire"], call.budget)
        status = checked.get(key)
        if status is not None:
            return CallResult(status, seconds=_seconds(row, i))
        result = _decode_result(i, row, call, wires)
        checked[key] = result.status
        return CallResult(result.status, seconds=result.seconds)
    result = _decode_result(i, row, call, wires)
    return CallResult(result.status, seconds=result.seconds)


def _decode_result(i: int, row: Any, call: Call, wires: Sequence[bytes] | None) -> CallResult:
    """One call's result of `decode_outcome` (``i``: its position, named in errors)."""
    from grader.execution.boundary import FRAMES, MAX_NAME, MAX_WHERE, BoundaryError, decode_frame
    from grader.execution.channel import result_of

    if type(row) is dict and row.keys() == _WIRE_KEYS:
        where = row["wire"]
        if wires is not None:
            if type(where) is not int or not 0 <= where < len(wires):
                raise OutcomeError(f"result {i}: no such frame")
            wire = wires[where]
        else:
            if type(where) is not str or len(where) > 2 * _frame_limit(call.budget):
                raise OutcomeError(f"result {i}: the frame is not base64 text of a frame's size")
            try:
                wire = base64.b64decode(where, validate=True)
            except (binascii.Error, ValueError):
                raise OutcomeError(f"result {i}: the frame is not base64") from None
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
    from grader.execution.boundary import frame_limit

    return frame_limit(budget)


def values_read(config: Any) -> bool:
    """Whether a plugin of this run reads the calls' returned values (not only their statuses and seconds).

    The staff pages (``--staff``), the similarity check (``--similarity``), a shard's record
    (``--shard``) and any wrapper of ``grader_run_calls`` the grader does not ship do. Where none
    does, outcomes that exist (a Dask worker's that judged, a merge's records) need not carry them.
    """
    if config.option("staff") or config.option("similarity") or STASH_KEY in config.stash:
        return True
    known = {"timing", "staff", "similarity", "shard_record", "runner", "dask_cluster", "submission"}
    return any(
        impl.plugin_name.rpartition(".")[2] not in known for impl in config.hooks.implementations("grader_run_calls")
    )


def _strict_json(text: str | bytes) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


# --- the shard record ----------------------------------------------------------------------------


def _submission_data(s: Submission) -> dict[str, Any]:
    return {
        "id": s.id,
        "path": s.path,
        "file": s.file,
        "sha256": s.sha256,
        "problem": s.problem,
        "slug": s.slug,
        "raw_name": s.raw_name.hex(),
        "lms": dict(s.lms),
    }


def _submission_from(data: Any) -> Submission:
    if type(data) is not dict or set(data) != {
        "id",
        "path",
        "file",
        "sha256",
        "problem",
        "slug",
        "raw_name",
        "lms",
    }:
        raise ValueError("not a submission")
    text = ("id", "path", "sha256", "problem", "slug", "raw_name")
    if any(type(data[k]) is not str for k in text) or not (data["file"] is None or type(data["file"]) is str):
        raise ValueError("a submission's field is not text")
    lms = data["lms"]
    if type(lms) is not dict or any(type(k) is not str or type(v) is not str for k, v in lms.items()):
        raise ValueError("a submission's lms is not text")
    return Submission(
        data["id"],
        data["path"],
        data["file"],
        data["sha256"],
        data["problem"],
        data["slug"],
        bytes.fromhex(data["raw_name"]),
        dict(lms),
    )


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _jsonable(value: Any) -> bool:
    if value is None or type(value) in (str, int, float, bool):
        return not (type(value) is float and value - value != 0.0)
    return type(value) in (list, tuple) and all(_jsonable(v) for v in value)


def _options(config: Any) -> dict[str, Any]:
    """The run's options that change what its files say (JSON-able), and the files it read, by content.

    Location options (`LOCATION_OPTIONS`) are left out; an option naming a
    file the run read (``--manual``, ``--policy``, ``--roster``,
    ``--lms-times``, ``--starter``) is kept as that file's SHA-256, so shards
    on machines with other paths still compare equal.
    """
    out: dict[str, Any] = {}
    for name, value in sorted(vars(config.options).items()):
        if name.startswith("_"):
            continue
        if name in ("manual", "policy", "roster", "lms_times", "starter"):
            out[f"{name}:sha256"] = _file_digest(value) if value and os.path.isfile(value) else None
            continue
        if name in LOCATION_OPTIONS or not _jsonable(value):
            continue
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


def manifest(config: Any, collected: Any, ids: Sequence[str]) -> dict[str, Any]:
    """The manifest of a shard's record: what made it, and which ids it holds.

    Parameters
    ----------
    config : grader.config.core.Config
        The run (its `ShardSpec`, options and class ids are in it).
    collected : grader.grading.session.Collected
    ids : sequence of str
        The ids of the shard's results, in the class's order.
    """
    from grader.config.secret import course_secret
    from grader.grading.settings import result_settings
    from grader.packs import reference_file

    spec: ShardSpec = config.stash[STASH_KEY]
    reference = reference_file(config)
    class_ids = list(config.stash.get(CLASS_IDS, ids))
    listing = [list(row) for row in config.stash.get(CLASS_LISTING, [[i, ""] for i in class_ids])]
    data = {
        "format": FORMAT,
        "grader_version": __version__,
        "spec_hash": collected.spec_hash,
        "reference_sha256": _file_digest(str(reference)) if reference.is_file() else "",
        "secret_fingerprint": course_secret(config).fingerprint,
        "settings": result_settings(config, with_secret=False),
        "options": _options(config),
        "plugins": sorted(str(p) for p in config.option("p") or ()),
        "shard": {"k": spec.k, "n": spec.n, "source": spec.source},
        "class": {
            "count": len(class_ids),
            "sha256": hashlib.sha256(
                json.dumps(class_ids, ensure_ascii=False).encode("utf-8", "surrogatepass")
            ).hexdigest(),
        },
        "class_ids": class_ids,
        "class_listing": listing,
        "ids": list(ids),
    }
    data["run"] = run_of(data)
    return data


def run_of(data: Mapping[str, Any]) -> str:
    """The run a shard belongs to: a SHA-256 of what every shard of one run shares (its manifest ``run``).

    The specs, reference, course secret (its fingerprint), settings,
    options and plugins, the number of shards and the class listing (every
    submission's id and the SHA-256 of its file): shards graded from the
    same inputs share it; a shard left from an earlier run, graded before a
    student sent a new file, does not.
    """
    keys = ("spec_hash", "reference_sha256", "secret_fingerprint", "settings", "options", "plugins", "class_listing")
    shared = {key: data.get(key) for key in keys}
    shared["n"] = data["shard"]["n"]
    text = json.dumps(shared, sort_keys=True, ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(b"grader shard run v1\0" + text.encode()).hexdigest()


def record_line(submission: Submission, result: SubmissionResult, outcome: RunOutcome | None) -> str:
    """One line of ``records.jsonl.gz``: the submission, its final result and its outcome (or null)."""
    from grader.models import result_to_dict

    data = {
        "submission": _submission_data(submission),
        "result": result_to_dict(result),
        "outcome": encode_outcome(outcome) if outcome is not None else None,
    }
    return json.dumps(data, allow_nan=False, ensure_ascii=True) + "\n"


def _file_sha256(path: Path) -> bytes:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.digest()


def seal_of(folder: Path, manifest_bytes: bytes, secret: Any) -> str:
    """The seal of a shard folder: HMAC-SHA256 under the course secret of its manifest and its records' SHA-256.

    Parameters
    ----------
    folder : pathlib.Path
        The shard folder (holding `RECORDS`).
    manifest_bytes : bytes
        The manifest file's bytes.
    secret : grader.config.secret.CourseSecret
        The course secret (every shard and the merge share it).

    Returns
    -------
    str
        64 hex digits: a record edited after grading (a score, a status, a
        returned value) no longer matches it, and only a holder of the
        course secret can make a matching one.
    """
    return str(secret.seal(_SEAL_LABEL, manifest_bytes, _file_sha256(folder / RECORDS)))


def check_seal(shard: Shard, secret: Any) -> None:
    """Refuse a shard whose records or manifest changed after grading (or were sealed under another secret).

    Raises
    ------
    grader.errors.UsageError
        If the seal is missing, malformed, or does not match.
    """
    import hmac

    path = shard.folder / SEAL
    again = f"grade shard {shard.manifest['shard']['k']}/{shard.manifest['shard']['n']} again"
    try:
        told = path.read_bytes()[:200].decode("ascii").strip()
        manifest_bytes = (shard.folder / MANIFEST).read_bytes()
        records = shard.folder / RECORDS
        if not records.is_file():
            raise UsageError(f"{records}: missing; {again}")
        want = seal_of(shard.folder, manifest_bytes, secret)
    except FileNotFoundError:
        raise UsageError(f"{path}: missing (the shard is unsealed or cut short); {again}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: unreadable ({exc}); {again}") from None
    if not hmac.compare_digest(told.encode(), want.encode()):
        raise UsageError(
            f"{shard.folder}: the seal does not match its manifest and records (they were changed after "
            f"grading, or sealed under another course secret); never merge an edited shard: {again}"
        )


MAX_POINTS = 1e9
"""Largest absolute number of points a recorded result may hold."""


@functools.cache
def _field_kinds(cls: Any) -> tuple[dict[str, tuple[Any, bool]], frozenset[str]]:
    """Per field of a result dataclass: its checked type (``str``, ``bool``, ``float`` or None) and whether
    it may be None; and the field names (worked out once per class, for `check_result_data`)."""
    import dataclasses

    kinds = {}
    for f in dataclasses.fields(cls):
        kind = str(f.type)
        optional = kind.endswith(" | None")
        kind = kind.removesuffix(" | None")
        kinds[f.name] = ({"str": str, "bool": bool, "float": float}.get(kind), optional)
    return kinds, frozenset(kinds)


def check_result_data(data: Any) -> None:
    """Refuse recorded result data that `grader.models.result_from_dict` would take but a writer would choke on.

    Every field of `SubmissionResult`, `ExerciseResult`, `CheckResult`,
    `Diagnosis` and `Adjustment` must have its type: a ``str`` field a
    string, a ``bool`` a bool, a ``float`` a finite number (not a bool) of
    at most `MAX_POINTS` in magnitude; ``details`` pairs of strings and
    ``lms`` strings to strings. (The seal is what refuses a forged result; this
    keeps a malformed one from reaching the writers when the seal's key is
    public, with no course secret set.)

    Raises
    ------
    ValueError
        Naming the field at fault.
    """

    from grader.models import Adjustment, CheckResult, Diagnosis, ExerciseResult, SubmissionResult

    def fields_of(cls: Any, value: Any, where: str) -> None:
        if type(value) is not dict:
            raise ValueError(f"{where} is not an object")
        kinds, names = _field_kinds(cls)
        for name, v in value.items():
            if name not in names:
                raise ValueError(f"{where} has unknown keys {sorted(set(value) - names)}")
            kind, optional = kinds[name]
            if (v is None and optional) or kind is None:
                continue
            if kind is str and type(v) is not str:
                raise ValueError(f"{where}.{name} is not a string")
            if kind is bool and type(v) is not bool:
                raise ValueError(f"{where}.{name} is not true or false")
            if kind is float and not (type(v) in (int, float) and -MAX_POINTS <= v <= MAX_POINTS):  # NaN fails
                raise ValueError(f"{where}.{name} is not a number of points")

    def items(value: Any, where: str) -> list[Any]:
        if type(value) is not list:
            raise ValueError(f"{where} is not a list")
        return value

    fields_of(SubmissionResult, data, "result")
    for i, ex in enumerate(items(data.get("exercises"), "result.exercises")):
        fields_of(ExerciseResult, ex, f"result.exercises[{i}]")
        for j, c in enumerate(items(ex.get("checks"), f"result.exercises[{i}].checks")):
            at = f"result.exercises[{i}].checks[{j}]"
            fields_of(CheckResult, c, at)
            for pair in items(c.get("details", []), f"{at}.details"):
                if type(pair) is not list or len(pair) != 2 or any(type(x) is not str for x in pair):
                    raise ValueError(f"{at}.details holds something other than pairs of strings")
            for k, d in enumerate(items(c.get("diagnosis", []), f"{at}.diagnosis")):
                fields_of(Diagnosis, d, f"{at}.diagnosis[{k}]")
    for i, a in enumerate(items(data.get("adjustments", []), "result.adjustments")):
        fields_of(Adjustment, a, f"result.adjustments[{i}]")
    lms = data.get("lms", {})
    if type(lms) is not dict or any(type(k) is not str or type(v) is not str for k, v in lms.items()):
        raise ValueError("result.lms is not a mapping of strings to strings")


def write_record(folder: Path, manifest_data: dict[str, Any], lines: Iterable[str], secret: Any = None) -> None:
    """Write ``manifest.json``, ``records.jsonl.gz`` and the `SEAL` into ``folder`` (each through a rename; gzip
    without a time, so the same shard gives the same bytes). The manifest is written last: a folder with one is
    complete. ``secret`` (a `grader.config.secret.CourseSecret`, default: none set) keys the seal."""
    import gzip  # here: only a sharded run writes records

    from grader.config.secret import CourseSecret
    from grader.fileio import write_atomic

    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{RECORDS}.tmp"
    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
    ):
        for line in lines:
            gz.write(line.encode("utf-8", "surrogatepass"))
    os.replace(tmp, folder / RECORDS)
    text = json.dumps(manifest_data, indent=1, ensure_ascii=True) + "\n"
    seal = seal_of(folder, text.encode("utf-8"), secret if secret is not None else CourseSecret())
    write_atomic(folder / SEAL, seal + "\n")
    write_atomic(folder / MANIFEST, text)


# --- the merge -------------------------------------------------------------------------------------


@dataclass
class Shard:
    """A shard folder given to ``grader merge``: where it is and its manifest."""

    folder: Path
    manifest: dict[str, Any]

    @property
    def name(self) -> str:
        """``K/N (folder)``, as messages name the shard."""
        return f"{self.manifest['shard']['k']}/{self.manifest['shard']['n']} ({self.folder})"


_MANIFEST_KEYS = {
    "format": str,
    "grader_version": str,
    "spec_hash": str,
    "reference_sha256": str,
    "secret_fingerprint": str,
    "settings": dict,
    "options": dict,
    "plugins": list,
    "shard": dict,
    "class": dict,
    "class_ids": list,
    "class_listing": list,
    "ids": list,
    "run": str,
}


def read_shard(folder: str | Path) -> Shard:
    """Read a shard folder's manifest (the ``--out`` of a ``--shard`` run, or its ``shard/`` subfolder).

    Raises
    ------
    grader.errors.UsageError
        If the folder holds no manifest, or one that is not a shard manifest of this format.
    """
    path = Path(folder)
    for candidate in (path / SUBFOLDER / MANIFEST, path / MANIFEST):
        if candidate.is_file():
            break
    else:
        raise UsageError(
            f"{path}: not a shard folder (no {SUBFOLDER}/{MANIFEST}); give the --out folders of "
            "'grader grade --shard K/N' runs that finished"
        )
    from grader.readers.jsonfile import read_json

    data = read_json(candidate, str(candidate), "grade that shard again", UsageError, MAX_MANIFEST_BYTES)
    bad = [k for k, kind in _MANIFEST_KEYS.items() if type(data.get(k) if type(data) is dict else None) is not kind]
    if bad:
        raise UsageError(f"{candidate}: not a shard manifest (missing or wrong: {', '.join(bad)})")
    if data["format"] != FORMAT:
        raise UsageError(
            f"{candidate}: shard format {data['format']!r}, this grader reads {FORMAT!r}; grade the "
            "shards and merge them with the same grader"
        )
    shard = data["shard"]
    if not (type(shard.get("k")) is int and type(shard.get("n")) is int and 1 <= shard["k"] <= shard["n"]):
        raise UsageError(f"{candidate}: shard is not K/N")
    for key in ("class_ids", "ids"):
        if any(type(i) is not str for i in data[key]):
            raise UsageError(f"{candidate}: {key} is not a list of ids")
    if any(
        type(row) is not list or len(row) != 2 or any(type(v) is not str for v in row) for row in data["class_listing"]
    ):
        raise UsageError(f"{candidate}: class_listing is not a list of [id, sha256]")
    return Shard(candidate.parent, data)
