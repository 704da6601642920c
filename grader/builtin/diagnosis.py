"""Built-in plugin: name the known mistake behind a failing check.

When a check fails, this plugin compares what the submission returned with
what each catalogued mutant (``mutants/catalogue.yaml``, see
`grader.catalogue`) returned on the same check. If they agree, the
verdict's ``diagnosis`` names the mutant's misconception and the chapter
section that addresses it, e.g. "the mask is applied after softmax ...
(chapter section "Mask before normalization")".

The mutants are code and run like student code: through the
``grader_run_calls`` hook (a child process, or the sandbox), once per
grading session and only when some check fails, with their results cached
on disk (`grader.catalogue.run_entries`). The comparison happens here, in
the grader's process, on returned data only. A diagnosis holds no input and
no expected value, so it is shown for hidden checks too.

Without a catalogue (a student's own folder, where ``grader check`` runs
the public checks shipped with the package), the table comes from the
public-checks file instead: ``grader publish`` stored there each mistake's
returned data on each visible check (`grader.public.load_mistakes`), so
the diagnosis works offline with no mutant code installed.

``--no-diagnosis`` turns it off. A missing catalogue (and no precomputed
data) turns it off silently unless ``--mutants`` was given explicitly.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from grader.boundary import plain_data
from grader.catalogue import Catalogue, Entry, load_catalogue, run_entries
from grader.errors import ConfigError
from grader.models import CallResult, Check, Diagnosis, Prepared, RunOutcome, Verdict
from grader.packs import mutants_dir, specs_dir
from grader.plugins import hookimpl
from grader.stash import COLLECTED, StashKey

__all__ = ["DiagnosisTable", "build_table", "same_data"]

MATCH_RTOL = 1e-6
MATCH_ATOL = 1e-9
"""Smallest tolerances used to match a result with a mutant's: the check's own
tolerances, but never tighter than these (two ways of computing the same
mistake may differ in the last bits)."""

_TABLE: StashKey[DiagnosisTable | None] = StashKey()
_LOCK = StashKey[threading.Lock]()


def same_data(a: Any, b: Any, rtol: float, atol: float) -> bool:
    """Whether two pieces of returned JSON data agree.

    Lists must have the same lengths, booleans and ``None`` must be equal,
    and numbers agree within ``atol + rtol * |b|``; NaN matches NaN and an
    infinity matches the same infinity.

    Parameters
    ----------
    a, b : object
        Nested lists of numbers, booleans or None, as returned by the
        worker.
    rtol, atol : float
        Relative and absolute tolerance.

    Returns
    -------
    bool
    """
    if hasattr(a, "dtype") or hasattr(b, "dtype"):  # a large array that came as binary (grader.boundary)
        a, b = plain_data(a), plain_data(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_data(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b):
            return a == b
        return abs(a - b) <= atol + rtol * abs(b)
    return False


class DiagnosisTable:
    """For each check, the mutants that fail it and what they returned.

    Parameters
    ----------
    rows : mapping
        ``(exercise id, check id)`` to a list of ``(Entry, results)`` for
        every mutant whose every call returned and whose verdict on the
        check is "failed".
    catalogue : grader.catalogue.Catalogue
    """

    def __init__(self, rows: Mapping[tuple[str, str], list[tuple[Entry, tuple[CallResult, ...]]]], catalogue: Catalogue):
        self.rows = rows
        self.catalogue = catalogue

    def diagnose(self, exercise_id: str, check: Check, results: Sequence[CallResult]) -> tuple[Diagnosis, ...]:
        """The known mistakes whose results on this check equal ``results``.

        Every call must have returned, with data matching the mutant's
        within the check's tolerances (`same_data`) and the same arguments
        changed in place. Mistakes are listed in catalogue order, one per
        distinct misconception.

        Returns
        -------
        tuple of grader.models.Diagnosis
            Empty when no catalogued mistake matches.
        """
        if not results or any(r.status != "returned" for r in results):
            return ()
        rtol = max(float(check.params.get("rtol", MATCH_RTOL)), MATCH_RTOL)
        atol = max(float(check.params.get("atol", MATCH_ATOL)), MATCH_ATOL)
        found: list[Diagnosis] = []
        for entry, theirs in self.rows.get((exercise_id, check.id), ()):
            if len(theirs) != len(results) or any(f.misconception == entry.misconception for f in found):
                continue
            if all(
                mine.mutated_args == other.mutated_args and same_data(mine.value, other.value, rtol, atol)
                for mine, other in zip(results, theirs)
            ):
                found.append(Diagnosis(entry.name, entry.misconception, entry.section, self.catalogue.section_url(entry.section)))
        return tuple(found)


def build_table(config: Any, collected: Any, catalogue: Catalogue, outcomes: Mapping[str, RunOutcome] | None = None) -> DiagnosisTable:
    """Run the catalogue's mutants on every prepared call and keep their failing results.

    Parameters
    ----------
    config : grader.config.Config
    collected : grader.session.Collected
        The prepared checks of this session.
    catalogue : grader.catalogue.Catalogue
    outcomes : mapping of str to RunOutcome, optional
        The mutants' outcomes on ``collected``'s calls when already run
        (``grader audit``); otherwise they are run here.

    Returns
    -------
    DiagnosisTable
    """
    from grader.judging import judge  # the built-in rules: no plugin sees mutant verdicts

    calls = list(collected.calls)
    mutants = catalogue.mutants
    if outcomes is None:
        outcomes = run_entries(config, mutants, calls)
    rows: dict[tuple[str, str], list[tuple[Entry, tuple[CallResult, ...]]]] = {}
    split = {entry.name: collected.split(outcome.results) for entry in mutants
             if (outcome := outcomes.get(entry.name)) is not None and not outcome.import_error
             and len(outcome.results) == len(calls)}
    for index, (exercise, pc, _) in enumerate(collected.split(calls)):
        for entry in mutants:
            if entry.name not in split:
                continue
            theirs = tuple(split[entry.name][index][2])
            if any(r.status != "returned" for r in theirs):
                continue
            if judge(pc.check, pc.prepared, theirs, pc.kind, pc.context).status == "failed":
                rows.setdefault((exercise.id, pc.check.id), []).append((entry, theirs))
    return DiagnosisTable(rows, catalogue)


def _catalogue(config: Any) -> Catalogue | None:
    """The catalogue, or None when there is none and none was asked for."""
    folder, explicit = mutants_dir(config)
    if folder is None:
        return None
    try:
        return load_catalogue(folder, config.pack.submission, config.pack.chapter_url)
    except ConfigError:
        if explicit:
            raise  # an explicit --mutants that is wrong is an error
        return None


def _precomputed(config: Any) -> DiagnosisTable | None:
    """The table stored in the public-checks file this session runs, if it runs one."""
    from grader.public import load_mistakes
    from grader.session import public_bundle

    if config.command != "check":
        return None
    bundle = public_bundle(config, specs_dir(config))
    found = load_mistakes(bundle) if bundle is not None else None
    return DiagnosisTable(*found) if found is not None else None


def table(config: Any, outcomes: Mapping[str, RunOutcome] | None = None) -> DiagnosisTable | None:
    """This session's table, built on first use (thread-safe).

    Parameters
    ----------
    config : grader.config.Config
        Its stash holds the session's ``collected`` checks.
    outcomes : mapping of str to RunOutcome, optional
        The mutants' outcomes when the caller already ran them (see
        `build_table`).

    Returns
    -------
    DiagnosisTable or None
        None when diagnosis is off (``--no-diagnosis``, no catalogue, or no
        session).
    """
    if config.option("no_diagnosis", False):
        return None
    if _TABLE in config.stash:
        return config.stash[_TABLE]
    lock = config.stash.setdefault(_LOCK, threading.Lock())
    with lock:
        if _TABLE not in config.stash:
            collected = config.stash.get(COLLECTED)
            catalogue = _catalogue(config) if collected is not None else None
            if catalogue:
                config.stash[_TABLE] = build_table(config, collected, catalogue, outcomes)
            else:
                config.stash[_TABLE] = _precomputed(config) if collected is not None else None
    return config.stash[_TABLE]


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity", "check", "publish", "audit", "build-student-package"):
        return
    group = parser.add_argument_group("diagnosis")
    group.add_argument(
        "--no-diagnosis", action="store_true",
        help="do not compare failing results with the catalogued mistakes (--mutants)",
    )


@hookimpl(trylast=True)
def grader_mistake_table(
    collected: Any, catalogue: Catalogue, outcomes: Mapping[str, RunOutcome] | None, config: Any
) -> DiagnosisTable | None:
    """`build_table`; for the session's own checks, the session's table (`table`)."""
    if config.option("no_diagnosis", False):
        return None
    if collected is config.stash.get(COLLECTED):
        return table(config, outcomes)
    return build_table(config, collected, catalogue, outcomes)


@hookimpl
def grader_configure(config: Any) -> None:
    config.stash[_LOCK] = threading.Lock()
    if not config.option("no_diagnosis", False) and config.option("mutants"):
        load_catalogue(config.option("mutants"), config.pack.submission)  # a wrong explicit --mutants fails now, in one line


@hookimpl(wrapper=True, trylast=True)
def grader_judge_check(
    check: Check, prepared: Prepared, results: Sequence[CallResult], kind: Any, context: Any, config: Any
) -> Any:
    """Add a diagnosis to a failed verdict whose results match a catalogued mistake.

    ``trylast``, like every built-in implementation of a first-result hook:
    it is the innermost wrapper, so a third-party wrapper sees (and may
    change) the diagnosed verdict.
    """
    verdict: Verdict = yield
    if verdict is None or verdict.status != "failed" or verdict.diagnosis:
        return verdict
    found_table = table(config)
    if found_table is None:
        return verdict
    found = found_table.diagnose(context.exercise.id, check, results)
    return dataclasses.replace(verdict, diagnosis=found) if found else verdict
