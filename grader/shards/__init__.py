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

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader._version import __version__
from grader.errors import UsageError
from grader.grading.slices import CLASS_IDS, CLASS_LISTING, STASH_KEY, ShardSpec
from grader.models import (
    RunOutcome,
    Submission,
    SubmissionResult,
)
from grader.shards.outcomes import OutcomeError, decode_outcome, encode_outcome
from grader.stash import StashKey

__all__ = [
    "FORMAT",
    "MANIFEST",
    "RECORDS",
    "REPLAY_KEY",
    "SUBFOLDER",
    "OutcomeError",
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
"""``config.stash`` key: during a merge, each submission's recorded outcome by id (the merge answers
``grader_known_outcome`` with it, so every wrapper of ``grader_run_calls`` sees it as in the shard's run)."""
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
        "dask_judge",
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


# --- what crosses: outcomes as plain data (grader.shards.outcomes) ------------------------------------


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


def record_line(
    submission: Submission,
    result: SubmissionResult,
    outcome: RunOutcome | None,
    wires: dict[bytes, int] | None = None,
    exercises: dict[str, int] | None = None,
) -> str:
    """One line of ``records.jsonl.gz``: the submission, its final result and its outcome (or null).

    ``wires`` and ``exercises`` are the shard's tables of frames and of exercise results: a frame
    (`encode_outcome` with ``inline``) or an exercise's result (`encode_exercises`) an earlier line
    holds is written as its position, so the lines must be written in the order they were made.
    """
    from grader.models import result_to_dict

    recorded = result_to_dict(result, exercises=exercises is None)
    if exercises is not None:
        recorded["exercises"] = encode_exercises(result, exercises)
    data = {
        "submission": _submission_data(submission),
        "result": recorded,
        "outcome": encode_outcome(outcome, wires, inline=True) if outcome is not None else None,
    }
    return json.dumps(data, allow_nan=False, ensure_ascii=True) + "\n"


def encode_exercises(result: SubmissionResult, table: dict[str, int] | None) -> list[Any]:
    """A result's exercises as record data: each one's fields (`grader.models.exercise_to_dict`), or its
    position in ``table`` when an earlier line holds an equal one (a class's results repeat). With no
    table (a line made again, out of its order) every one is ``{"$once": fields}``: read, never kept."""
    from grader.models import exercise_to_dict

    out: list[Any] = []
    for ex in result.exercises:
        fields = exercise_to_dict(ex)
        if table is None:
            out.append({"$once": fields})
            continue
        text = json.dumps(fields, sort_keys=True, allow_nan=False, ensure_ascii=True)
        position = table.get(text)
        if position is None:
            table[text] = len(table)
            out.append(fields)
        else:
            out.append(position)
    return out


_STUB = {"id": "", "path": "", "sha256": "", "status": "graded", "score": 0.0, "max_score": 0.0}


def exercise_from_data(data: Any, check: bool = True) -> Any:
    """An `grader.models.ExerciseResult` from `grader.models.exercise_to_dict` data (``check``: its fields
    checked first, `check_result_data`).

    Raises
    ------
    ValueError, KeyError, TypeError
        If it is not an exercise's result.
    """
    from grader.models import result_from_dict

    stub = dict(_STUB, exercises=[data])
    if check:
        check_result_data(stub)
    return result_from_dict(stub).exercises[0]


def result_from_record(data: Any, table: list[Any], check: bool = True) -> SubmissionResult:
    """A recorded result (`record_line`): its exercises from the data or by position in ``table``, the shard's
    exercise results so far (read in the order written; each new one appended).

    Raises
    ------
    ValueError, KeyError, TypeError
        If it is not one (``check``: every field's type, `check_result_data`).
    """
    import dataclasses

    from grader.models import result_from_dict

    if type(data) is not dict or type(data.get("exercises")) is not list:
        raise ValueError("result.exercises is not a list")
    built = []
    for item in data["exercises"]:
        if type(item) is int:
            if not 0 <= item < len(table):
                raise ValueError("result.exercises names no exercise result")
            built.append(table[item])
        elif type(item) is dict and item.keys() == {"$once"}:
            built.append(exercise_from_data(item["$once"], check))
        else:
            table.append(exercise_from_data(item, check))
            built.append(table[-1])
    head = {**data, "exercises": []}
    if check:
        check_result_data(head)
    return dataclasses.replace(result_from_dict(head), exercises=tuple(built))


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
