"""The catalogue of known implementations: mutants and correct variants.

``mutants/catalogue.yaml`` lists known-wrong submission files
("mutants"), each tagged with the misconception it embodies, the chapter
section that addresses it and the exercises it must lose points on, and
correct variants that must score full marks. ``grader audit`` grades them
all (`grader.grading.audit`); the diagnosis plugin (`grader.builtin.diagnosis`)
compares a student's failing results with the mutants' results.

Catalogue entries are code: they run like student code, in a child process
through the ``grader_run_calls`` hook, never in the grader's process. Their
results depend only on their bytes and the calls, so `run_entries` keeps
them in a small cache (one JSON file per entry, under `cache_dir`) and runs
only the calls it has not seen.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grader.errors import ConfigError
from grader.execution.jobs import usable_cores
from grader.fileio import cache_dir, read_regular, write_atomic
from grader.models import Call, CallResult, RunOutcome, Submission

__all__ = [
    "CATALOGUE_FILE",
    "CONTRACT_FILE",
    "Catalogue",
    "Clause",
    "Entry",
    "cache_dir",
    "fingerprint",
    "load_catalogue",
    "load_contract",
    "run_entries",
]

CATALOGUE_FILE = "catalogue.yaml"
"""The catalogue's file name inside the mutants folder."""

CONTRACT_FILE = "contract.yaml"
"""The starter's contract clauses, beside the catalogue (`load_contract`)."""

_CONTRACT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["clauses"],
    "properties": {
        "clauses": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "function", "text", "checks"],
                "properties": {
                    "id": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9-]*$"},
                    "function": {"type": "string", "minLength": 1},
                    "text": {"type": "string", "minLength": 5},
                    "checks": {
                        "type": "array",
                        "uniqueItems": True,
                        "items": {"type": "string", "pattern": r"^\S+ \S+$"},
                    },
                },
            },
        },
    },
}


@dataclass(frozen=True)
class Clause:
    """One clause of the starter's contract and the checks that hold code to it.

    Attributes
    ----------
    id : str
        E.g. ``"attention-rejects-width-mismatch"``.
    function : str
        The starter function the clause is about.
    text : str
        The clause in the starter's words.
    checks : tuple of (str, str)
        ``(exercise id, check id)`` of each check that fails code breaking it.
    """

    id: str
    function: str
    text: str
    checks: tuple[tuple[str, str], ...]


def load_contract(folder: str | os.PathLike[str]) -> tuple[str, tuple[Clause, ...]] | None:
    """Read ``<folder>/contract.yaml``: the starter's contract clauses, each with its checks.

    Returns
    -------
    (str, tuple of Clause) or None
        The file and its clauses; None when the folder has no contract file.

    Raises
    ------
    grader.errors.ConfigError
        If the file is malformed (one line naming the key) or lists a clause twice.
    """
    from grader.readers.yamlfile import parse_yaml  # the same safe loader as the specs

    path = Path(folder) / CONTRACT_FILE
    if not path.is_file():
        return None
    import jsonschema  # here, not at the top: only 'grader audit' reads the contract

    data = parse_yaml(str(path))
    errors = sorted(
        jsonschema.Draft202012Validator(_CONTRACT_SCHEMA).iter_errors(data),
        key=lambda e: (list(map(str, e.absolute_path)), e.message),
    )
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "top level"
        raise ConfigError(f"{path}: {where}: {err.message}")
    clauses: list[Clause] = []
    for index, raw in enumerate(data["clauses"]):
        if any(c.id == raw["id"] for c in clauses):
            raise ConfigError(f"{path}: clauses[{index}] '{raw['id']}': the id is used twice")
        pairs = (str(c).split(" ", 1) for c in raw["checks"])  # the schema asks "EXERCISE CHECK"
        checks = tuple((exercise, check) for exercise, check in pairs)
        clauses.append(Clause(str(raw["id"]), str(raw["function"]), " ".join(str(raw["text"]).split()), checks))
    return str(path), tuple(clauses)


def _entry_file(filename: str | None) -> str:
    """Each entry's code is ``<mutants folder>/<name>/<filename>``: the course pack's submission file."""
    if filename:
        return filename
    from grader.packs import find_pack

    return find_pack().submission


CACHEABLE = ("returned", "raised", "bad_return")
"""Call statuses worth caching; timeouts and crashes are run again."""

_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "kind"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9_]*$"},
        "kind": {"enum": ["mutant", "correct"]},
        "base": {"type": "string", "minLength": 1},
        "misconception": {"type": "string", "minLength": 10},
        "section": {"type": "string", "minLength": 1},
        "exercises": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "uniqueItems": True},
        "description": {"type": "string", "minLength": 1},
        "degenerate": {"type": "boolean"},
    },
    "if": {"properties": {"kind": {"const": "mutant"}}},
    "then": {"required": ["misconception", "section", "exercises"], "not": {"required": ["description"]}},
    "else": {
        "required": ["description"],
        "not": {"anyOf": [{"required": [k]} for k in ("misconception", "exercises", "base")]},
    },
}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["entries"],
    "properties": {
        "chapter_url": {"type": "string"},
        "entries": {"type": "array", "minItems": 1, "items": _ENTRY_SCHEMA},
    },
}
"""JSON Schema of ``catalogue.yaml``: a mutant needs ``misconception``,
``section`` and ``exercises``; a correct variant needs ``description`` and
has no exercises to lose."""


@dataclass(frozen=True)
class Entry:
    """One catalogued implementation.

    Attributes
    ----------
    name : str
        Its folder name, e.g. ``"mask_after_softmax"``.
    kind : str
        ``"mutant"`` (known wrong) or ``"correct"``.
    file : str
        Its submission file.
    sha256 : str
        Hex digest of the file's bytes.
    misconception : str
        For a mutant: one plain sentence a student understands.
    section : str
        For a mutant: the chapter section heading that addresses it.
    exercises : tuple of str
        For a mutant: every exercise it must lose points on.
    base : str
        The correct variant it was copied from, if any.
    description : str
        For a correct variant: what makes it a distinct approach.
    degenerate : bool
        For a mutant that computes nothing (constants, uniform weights, an
        error on every input): ``grader audit`` requires it to score no
        more than the shape checks and the ValueError checks it passes.
    """

    name: str
    kind: str
    file: str
    sha256: str
    misconception: str = ""
    section: str = ""
    exercises: tuple[str, ...] = ()
    base: str = ""
    description: str = ""
    degenerate: bool = False

    @property
    def submission(self) -> Submission:
        """The entry as a submission for ``grader_run_calls`` and grading: a reference run (`Submission.reference`),
        which no per-student record of the run keeps, whatever student shares its name."""
        path = str(Path(self.file).parent)
        return Submission(id=self.name, path=path, file=self.file, sha256=self.sha256, reference=True)


@dataclass(frozen=True)
class Catalogue:
    """The loaded ``catalogue.yaml``.

    Attributes
    ----------
    path : str
        The catalogue file.
    entries : tuple of Entry
        In file order.
    chapter_url : str
        The chapter's web address, used to link sections (may be empty).
    """

    path: str
    entries: tuple[Entry, ...]
    chapter_url: str = ""

    @property
    def mutants(self) -> tuple[Entry, ...]:
        """The known-wrong entries, in file order."""
        return tuple(e for e in self.entries if e.kind == "mutant")

    @property
    def correct(self) -> tuple[Entry, ...]:
        """The correct variants, in file order."""
        return tuple(e for e in self.entries if e.kind == "correct")

    def section_url(self, section: str) -> str:
        """A link to a chapter section: ``chapter_url#slug``, or ``""`` without a URL."""
        if not self.chapter_url:
            return ""
        slug = "".join(c if c.isalnum() else "-" for c in section.lower())
        return f"{self.chapter_url}#{'-'.join(filter(None, slug.split('-')))}"


def _where(data: Any, path: Sequence[Any]) -> str:
    out = ""
    for i, part in enumerate(path):
        if isinstance(part, int):
            out += f"[{part}]"
            if i >= 1 and path[i - 1] == "entries":
                try:
                    name = data["entries"][part].get("name")
                except (AttributeError, IndexError, KeyError, TypeError):
                    name = None
                if isinstance(name, str):
                    out += f" '{name}'"
        else:
            out += ("." if out else "") + str(part)
    return out or "top level"


def load_catalogue(folder: str | os.PathLike[str], filename: str | None = None, chapter_url: str = "") -> Catalogue:
    """Read and check ``<folder>/catalogue.yaml``.

    Parameters
    ----------
    folder : path-like
        The mutants folder (``--mutants``, default: the pack's).
    filename : str, optional
        Each entry's file name (default: the installed pack's submission file).
    chapter_url : str
        The chapter's address when ``catalogue.yaml`` gives none (the
        pack's ``chapter_url``): section links start there.

    Returns
    -------
    Catalogue

    Raises
    ------
    grader.errors.ConfigError
        If the folder or the catalogue is missing, the YAML is unsafe or
        malformed (the message names the file and the key), two entries
        share a name, an entry's file is missing, or a ``base``
        is not a correct variant of the catalogue.
    """
    from grader.readers.yamlfile import parse_yaml  # the same safe loader as the specs

    entry_file = _entry_file(filename)
    root = Path(folder)
    path = root / CATALOGUE_FILE
    if not path.is_file():
        raise ConfigError(f"{path}: catalogue not found; pass --mutants DIR (a folder holding {CATALOGUE_FILE})")
    data = parse_yaml(str(path))
    import jsonschema  # here, not at the top: 'grader check' with the public checks never needs it

    errors = sorted(
        jsonschema.Draft202012Validator(SCHEMA).iter_errors(data),
        key=lambda e: (list(map(str, e.absolute_path)), e.message),
    )
    if errors:
        err = errors[0]
        message = err.message
        if {"then", "else"} & set(map(str, err.schema_path)):
            message = (
                "a mutant needs misconception, section and exercises (and no description); "
                "a correct variant needs description (and no misconception, exercises or base)"
            )
        raise ConfigError(f"{path}: {_where(data, list(err.absolute_path))}: {message}")
    entries: list[Entry] = []
    for index, raw in enumerate(data["entries"]):
        where = f"{path}: entries[{index}] '{raw['name']}'"
        if any(e.name == raw["name"] for e in entries):
            raise ConfigError(f"{where}: the name is used twice")
        file = root / raw["name"] / entry_file
        if not file.is_file():
            raise ConfigError(f"{where}: {file} not found")
        entries.append(
            Entry(
                name=raw["name"],
                kind=raw["kind"],
                file=str(file),
                sha256=hashlib.sha256(file.read_bytes()).hexdigest(),
                misconception=" ".join(raw.get("misconception", "").split()),
                section=raw.get("section", ""),
                exercises=tuple(raw.get("exercises", ())),
                base=raw.get("base", ""),
                description=" ".join(raw.get("description", "").split()),
                degenerate=bool(raw.get("degenerate", False)),
            )
        )
    correct = {e.name for e in entries if e.kind == "correct"}
    for index, entry in enumerate(entries):
        if entry.base and entry.base not in correct:
            raise ConfigError(
                f"{path}: entries[{index}] '{entry.name}'.base: '{entry.base}' is not a correct variant here"
            )
    return Catalogue(str(path), tuple(entries), data.get("chapter_url", "") or chapter_url)


def fingerprint(folder: str | os.PathLike[str], filename: str | None = None) -> str:
    """SHA-256 of ``catalogue.yaml`` and every ``*/<filename>`` in ``folder``; ``""`` without a catalogue.

    A stored grade depends on it when diagnosis is on (the diagnoses come
    from these files).
    """
    root = Path(folder)
    if not (root / CATALOGUE_FILE).is_file():
        return ""
    h = hashlib.sha256()
    for path in [root / CATALOGUE_FILE, *sorted(root.glob(f"*/{_entry_file(filename)}"))]:
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


_WORKER = Path(__file__).resolve().parent.parent / "child" / "worker.py"
_EXECUTION = _WORKER.parent.parent / "execution"
_DECODING = (
    _WORKER,
    _EXECUTION / "boundary.py",
    _EXECUTION / "jobs.py",
    _EXECUTION / "channel.py",
    _EXECUTION / "calls.py",
    _WORKER.parent.parent / "builtin" / "runner.py",
    *sorted(_WORKER.parent.glob("*.py")),
)
"""The files that decide what a job's answer becomes (the decoder, the job machinery and the runner,
and every module of ``grader/child``: the worker, the zygote and the sandbox child): a change to any
of them makes cached results stale."""


def _entry_key(entry: Entry, config: Any) -> str:
    """What an entry's results depend on besides the call: its bytes, the worker, Python, numpy, the runners."""
    runners = [config.pluginmanager.get_name(impl.plugin) for impl in config.hooks.implementations("grader_run_calls")]
    code = [hashlib.sha256(path.read_bytes()).hexdigest() for path in _DECODING if path.is_file()]
    parts = [entry.sha256, code, sys.version, np.__version__, runners]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _call_key(call: Call) -> str:
    budget = dataclasses.astuple(call.budget) if call.budget is not None else None  # larger answers are refused
    text = json.dumps([call.function, list(call.args), call.timeout, budget], allow_nan=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _to_frame(result: CallResult) -> dict[str, Any]:
    from grader.execution.boundary import plain_data

    return {
        "status": result.status,
        "value": plain_data(result.value),
        "type": result.error_type,
        "value_error": result.value_error,
        "message": result.message,
        "where": result.where,
        "seconds": result.seconds,
        "mutated": list(result.mutated_args),
    }


_MAX_CACHE_BYTES = 256 << 20
"""The largest cache file read (`grader.fileio.read_regular`); a larger one is a miss."""


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(path, _MAX_CACHE_BYTES))
    except (OSError, ValueError, RecursionError):  # missing, damaged, nested too deep, not ours: a miss
        return {}
    results = data.get("results") if isinstance(data, dict) else None
    return results if isinstance(results, dict) else {}


def _run_one(entry: Entry, calls: Sequence[Call], config: Any, folder: Path | None) -> RunOutcome:
    from grader.execution.channel import call_result  # validates a frame exactly as one from the child

    keys = [_call_key(c) for c in calls]
    path = folder / f"{entry.name}-{_entry_key(entry, config)[:32]}.json" if folder else None
    cached = _read_cache(path) if path else {}
    results: list[CallResult | None] = [None] * len(calls)
    for i, key in enumerate(keys):
        frame = cached.get(key)
        if isinstance(frame, dict) and frame.get("status") in CACHEABLE:
            results[i] = call_result(frame)
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        outcome = config.hooks.run_calls(submission=entry.submission, calls=[calls[i] for i in missing], config=config)
        if outcome.import_error:
            return RunOutcome(tuple(outcome.results), outcome.import_error)
        fresh = {}
        for i, result in zip(missing, outcome.results):
            results[i] = result
            if result.status in CACHEABLE:
                fresh[keys[i]] = _to_frame(result)
        if path and fresh:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                merged = {**_read_cache(path), **fresh}
                write_atomic(path, json.dumps({"entry": entry.name, "results": merged}, allow_nan=True))
            except OSError:  # the cache is best-effort
                pass
    return RunOutcome(tuple(r for r in results if r is not None))


def run_entries(
    config: Any, entries: Sequence[Entry], calls: Sequence[Call], jobs: int | None = None
) -> Mapping[str, RunOutcome]:
    """Run ``calls`` against each entry, like a submission, reusing cached results.

    Parameters
    ----------
    config : grader.config.core.Config
        The run's configuration; calls go through its ``grader_run_calls``
        hook (the child-process runner, or the sandbox).
    entries : sequence of Entry
    calls : sequence of grader.models.Call
    jobs : int, optional
        Entries run at once (threads, each waiting on its child process);
        default: one per usable core (`grader.execution.jobs.usable_cores`), at most 8.

    Returns
    -------
    dict of str to grader.models.RunOutcome
        By entry name; one result per call, in order. Captured output is
        not kept, so outcomes do not depend on the cache.
    """
    folder = cache_dir()
    if folder is not None:
        folder = folder / "catalogue"
    workers = jobs or min(8, usable_cores())
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="grader-catalogue") as pool:
        futures = {e.name: pool.submit(_run_one, e, calls, config, folder) for e in entries}
        return {name: future.result() for name, future in futures.items()}
