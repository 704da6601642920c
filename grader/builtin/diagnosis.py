"""Built-in plugin: name the known mistake behind a failing check.

When a check fails, this plugin compares what the submission returned with
what each catalogued mutant (``mutants/catalogue.yaml``, see
`grader.packs.catalogue`) returned on the same check. A mistake is named only
when the evidence singles it out: the mutant must match the submission on
that check *and* on every other check of the exercise the submission ran
(both passed, or both failed with the same returned data or the same
exception type). Then the check's ``diagnosis`` names the mutant's
misconception and the chapter section that addresses it, e.g. "the mask is
applied after softmax ... (chapter section "Mask before normalization")".
When several mistakes fit all of the evidence, each is named; when none does
(an uncatalogued mistake, or two mistakes at once), none is: a diagnosis is
never a guess from one check. ``grader audit`` measures this by leaving each
mutant out of the catalogue in turn (`leave_one_out`).

The mutants are code and run like student code: through the
``grader_run_calls`` hook (a child process, or the sandbox), once per
grading session and only when some check fails, with their results cached
on disk (`grader.packs.catalogue.run_entries`). The comparison happens here, in
the grader's process, on returned data only. A diagnosis holds no input and
no expected value, so it is shown for hidden checks too.

Without a catalogue (a student's own folder, where ``grader check`` runs
the public checks shipped with the package), the table comes from the
public-checks file instead: ``grader publish`` stored there each mistake's
returned data on each visible check (`grader.packs.public.load_mistakes`), so
the diagnosis works offline with no mutant code installed.

``--no-diagnosis`` turns it off. A missing catalogue (and no precomputed
data) turns it off silently unless ``--mutants`` was given explicitly.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grader.collected import COLLECTED
from grader.errors import ConfigError
from grader.execution.boundary import plain_data
from grader.execution.channel import own_results
from grader.markers import hookimpl
from grader.models import CallResult, Check, Diagnosis, Prepared, RunOutcome, Verdict
from grader.packs import mutants_dir, specs_dir
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config
    from grader.packs.catalogue import Catalogue, Entry

__all__ = ["DiagnosisTable", "Evidence", "build_table", "leave_one_out", "same_data"]

MATCH_RTOL = 1e-6
MATCH_ATOL = 1e-9
"""Smallest tolerances used to match a result with a mutant's: the check's own
tolerances, but never tighter than these (two ways of computing the same
mistake may differ in the last bits)."""

_TABLE: StashKey[DiagnosisTable | None] = StashKey()
_LOCK = StashKey[threading.Lock]()
_EVIDENCE = threading.local()
"""Per grading thread: (exercise id, check id) -> `Evidence` of the submission being judged, read
back when its exercise is scored (judging sees one check, naming needs the whole exercise)."""

EVIDENCE_STATUSES = ("returned", "raised")
"""Call statuses that are evidence about the code (a timeout or a crash says nothing of the mistake)."""


@dataclass(frozen=True)
class Evidence:
    """What one check says about a submission, for naming mistakes.

    Attributes
    ----------
    passed : bool
        Whether the submission passed the check.
    matches : frozenset of str
        The catalogued mutants whose results on the check agree with the
        submission's: those that also passed, or that also failed with the
        same data (`same_results`).
    status, message : str
        The verdict's, to recognise it when the exercise is scored.
    """

    passed: bool
    matches: frozenset[str]
    status: str = ""
    message: str = ""


def same_results(
    mine: Sequence[CallResult],
    theirs: Sequence[CallResult],
    rtol: float,
    atol: float,
    expected_raise: bool = False,
) -> bool:
    """Whether two checks' call results agree call by call.

    Both returned the same data (`same_data`) and changed the same arguments
    in place, or both raised the same exception type with the same message.
    Where an error is what the check asks for (the first call of a check
    whose kind expects one, ``expected_raise``), the type alone must agree:
    the message is the student's own words. Elsewhere an error's type alone
    says little (many mistakes make numpy raise ValueError), its message
    (numpy's, naming the shapes) says which.
    """
    if len(mine) != len(theirs):
        return False
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if a.status != b.status or a.status not in EVIDENCE_STATUSES:
            return False
        if a.status == "raised" and (a.error_type != b.error_type or a.value_error != b.value_error):
            return False
        if a.status == "raised" and not (expected_raise and i == 0) and a.message != b.message:
            return False
        if a.status == "returned" and not (
            a.mutated_args == b.mutated_args and same_data(a.value, b.value, rtol, atol)
        ):
            return False
    return True


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
    if hasattr(a, "dtype") or hasattr(b, "dtype"):  # a large array that came as binary (grader.execution.boundary)
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
            return bool(a == b)
        return bool(abs(a - b) <= atol + rtol * abs(b))
    return False


class DiagnosisTable:
    """For each check, the mutants that fail it and what they returned.

    Parameters
    ----------
    rows : mapping
        ``(exercise id, check id)`` to a list of ``(Entry, results)`` for
        every mutant whose every call returned and whose verdict on the
        check is "failed".
    catalogue : grader.packs.catalogue.Catalogue
    """

    def __init__(
        self,
        rows: Mapping[tuple[str, str], list[tuple[Entry, tuple[CallResult, ...]]]],
        catalogue: Catalogue,
        unknown: Mapping[tuple[str, str], frozenset[str]] | None = None,
    ):
        self.rows = rows
        self.catalogue = catalogue
        self.unknown = dict(unknown or {})

    def without(self, names: Collection[str]) -> DiagnosisTable:
        """The same table with the mutants ``names`` left out of the catalogue (`leave_one_out`)."""
        rows = {key: [(e, r) for e, r in items if e.name not in names] for key, items in self.rows.items()}
        entries = tuple(e for e in self.catalogue.entries if e.name not in names)
        unknown = {key: frozenset(n for n in items if n not in names) for key, items in self.unknown.items()}
        return DiagnosisTable(rows, dataclasses.replace(self.catalogue, entries=entries), unknown)

    def mutant_names(self) -> frozenset[str]:
        """Every mutant the table knows."""
        names = {e.name for e in self.catalogue.mutants}
        names.update(e.name for items in self.rows.values() for e, _ in items)
        return frozenset(names)

    def evidence(self, exercise_id: str, check: Check, results: Sequence[CallResult], passed: bool) -> Evidence | None:
        """The `Evidence` of one check's results, or None when they are none (a call timed out, crashed...).

        The tolerances are the check's own, never tighter than `MATCH_RTOL` / `MATCH_ATOL`.
        """
        if not results or any(r.status not in EVIDENCE_STATUSES for r in results):
            return None
        failing = self.rows.get((exercise_id, check.id), ())
        if passed:  # the mutants that passed too: neither failing nor without evidence there
            unknown = self.unknown.get((exercise_id, check.id), frozenset())
            return Evidence(True, self.mutant_names() - {e.name for e, _ in failing} - unknown)
        rtol = max(float(check.params.get("rtol", MATCH_RTOL)), MATCH_RTOL)
        atol = max(float(check.params.get("atol", MATCH_ATOL)), MATCH_ATOL)
        raising = check.kind == "raises"
        return Evidence(
            False,
            frozenset(
                e.name for e, theirs in failing if same_results(results, theirs, rtol, atol, expected_raise=raising)
            ),
        )

    def degenerate_names(self) -> frozenset[str]:
        """The degenerate entries (constants, uniform weights, an error everywhere): claims about a whole file."""
        names = {e.name for e in self.catalogue.entries if e.degenerate}
        names.update(e.name for items in self.rows.values() for e, _ in items if e.degenerate)
        return frozenset(names)

    def whole_file(self, evidence: Sequence[Evidence], clean: bool) -> frozenset[str]:
        """The degenerate entries the whole file's evidence fits (each check of every exercise).

        A degenerate entry says what every function does ("every function returns a constant"):
        it is named only when the file matches it everywhere, never from one exercise (a gradient
        that comes out all zeros is not a file of constants). ``clean``: some exercise passed every
        check (no degenerate file does).
        """
        if clean:
            return frozenset()
        consistent = set(self.degenerate_names())
        for item in evidence:
            consistent &= item.matches
        return frozenset(consistent)

    def name(
        self, exercise_id: str, evidence: Mapping[str, Evidence], exclude: Collection[str] = ()
    ) -> dict[str, tuple[Diagnosis, ...]]:
        """The mistakes named on each failed check of an exercise, from the evidence of all its checks.

        A mutant is named on a failed check when it matches there and on
        every other check with evidence (it is consistent with everything
        the submission did). One `Diagnosis` per distinct misconception, in
        catalogue order.

        Parameters
        ----------
        exercise_id : str
        evidence : mapping of str to Evidence
            By check id; checks without evidence are left out.
        exclude : collection of str
            Mutants never named here (degenerate entries the rest of the file does not fit,
            `whole_file`).

        Returns
        -------
        dict of str to tuple of Diagnosis
            By check id, only for failed checks that name something.
        """
        consistent = set(self.mutant_names()) - set(exclude)
        for item in evidence.values():
            consistent &= item.matches
        if not consistent:
            return {}
        order = {e.name: i for i, e in enumerate(self.catalogue.entries)}
        entries = {e.name: e for items in self.rows.values() for e, _ in items}
        named: dict[str, tuple[Diagnosis, ...]] = {}
        for check_id, item in evidence.items():
            if item.passed:
                continue
            found: list[Diagnosis] = []
            for name in sorted(item.matches & consistent, key=lambda n: (order.get(n, len(order)), n)):
                entry = entries[name]
                if any(f.misconception == entry.misconception for f in found):
                    continue
                found.append(
                    Diagnosis(entry.name, entry.misconception, entry.section, self.catalogue.section_url(entry.section))
                )
            if found:
                named[check_id] = tuple(found)
        return named

    def leave_one_out(
        self,
        catalogue: Catalogue,
        collected: Any,
        outcomes: Mapping[str, RunOutcome],
        statuses: Mapping[str, Mapping[tuple[str, str], str]],
    ) -> list[tuple[str, str, str, str]]:
        """Diagnose each mutant with itself left out of the catalogue: every name it then gets.

        Parameters
        ----------
        catalogue : grader.packs.catalogue.Catalogue
        collected : grader.grading.session.Collected
        outcomes : mapping of str to RunOutcome
            Each mutant's results on ``collected``'s calls.
        statuses : mapping
            Each mutant's verdict status per ``(exercise id, check id)``.

        Returns
        -------
        list of (str, str, str, str)
            ``(mutant, exercise id, check id, named mutant)`` for every
            naming; a naming is right when the named mutant has the left-out
            one's misconception (a twin), a misnaming otherwise.
        """
        out: list[tuple[str, str, str, str]] = []
        for entry in catalogue.mutants:
            outcome = outcomes.get(entry.name)
            if outcome is None or outcome.import_error or len(outcome.results) != len(collected.calls):
                continue
            reduced = self.without({entry.name})
            evidence: dict[str, dict[str, Evidence]] = {}
            for exercise, pc, results in collected.split(outcome.results):
                status = statuses[entry.name].get((exercise.id, pc.check.id), "")
                item = reduced.evidence(exercise.id, pc.check, results, passed=status == "passed")
                if item is not None:
                    evidence.setdefault(exercise.id, {})[pc.check.id] = item
            for exercise_id, items in evidence.items():
                for check_id, found in reduced.name(exercise_id, items).items():
                    out.extend((entry.name, exercise_id, check_id, d.mistake) for d in found)
        return out

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
        item = self.evidence(exercise_id, check, results, passed=False)
        if item is None:
            return ()
        found: list[Diagnosis] = []
        for entry, _ in self.rows.get((exercise_id, check.id), ()):
            if entry.name in item.matches and not any(f.misconception == entry.misconception for f in found):
                found.append(
                    Diagnosis(entry.name, entry.misconception, entry.section, self.catalogue.section_url(entry.section))
                )
        return tuple(found)


def build_table(
    config: Any, collected: Any, catalogue: Catalogue, outcomes: Mapping[str, RunOutcome] | None = None
) -> DiagnosisTable:
    """Run the catalogue's mutants on every prepared call and keep their failing results.

    Parameters
    ----------
    config : grader.config.core.Config
    collected : grader.grading.session.Collected
        The prepared checks of this session.
    catalogue : grader.packs.catalogue.Catalogue
    outcomes : mapping of str to RunOutcome, optional
        The mutants' outcomes on ``collected``'s calls when already run
        (``grader audit``); otherwise they are run here.

    Returns
    -------
    DiagnosisTable
    """
    from grader.grading.judging import judge  # the built-in rules: no plugin sees mutant verdicts

    calls = list(collected.calls)
    mutants = catalogue.mutants
    if outcomes is None:
        from grader.packs.catalogue import run_entries  # here: a run without mutants never needs it

        outcomes = run_entries(config, mutants, calls)
    rows: dict[tuple[str, str], list[tuple[Entry, tuple[CallResult, ...]]]] = {}
    unknown: dict[tuple[str, str], set[str]] = {}
    split = {  # values of their own for the kinds' judges: equal answers share one (`own_results`)
        entry.name: collected.split(own_results(outcome.results))
        for entry in mutants
        if (outcome := outcomes.get(entry.name)) is not None
        and not outcome.import_error
        and len(outcome.results) == len(calls)
    }
    for index, (exercise, pc, _) in enumerate(collected.split(calls)):
        for entry in mutants:
            if entry.name not in split:
                continue
            theirs = tuple(split[entry.name][index][2])
            if any(r.status not in EVIDENCE_STATUSES for r in theirs):  # a call that neither returned nor raised
                unknown.setdefault((exercise.id, pc.check.id), set()).add(entry.name)
                continue
            if judge(pc.check, pc.prepared, theirs, pc.kind, pc.context).status != "passed":
                rows.setdefault((exercise.id, pc.check.id), []).append((entry, theirs))
    return DiagnosisTable(rows, catalogue, {key: frozenset(names) for key, names in unknown.items()})


def _catalogue(config: Any) -> Catalogue | None:
    """The catalogue, or None when there is none and none was asked for."""
    folder, explicit = mutants_dir(config)
    if folder is None:
        return None
    from grader.packs.catalogue import load_catalogue  # here: a command without mutants never needs it

    try:
        return load_catalogue(folder, config.pack.submission, config.pack.chapter_url)
    except ConfigError:
        if explicit:
            raise  # an explicit --mutants that is wrong is an error
        return None


def _precomputed(config: Any) -> DiagnosisTable | None:
    """The table stored in the public-checks file this session runs, if it runs one."""
    from grader.grading.session import public_bundle
    from grader.packs.public import load_mistakes

    if config.command != "check":
        return None
    bundle = public_bundle(config, specs_dir(config))
    found = load_mistakes(bundle) if bundle is not None else None
    return DiagnosisTable(*found) if found is not None else None


def table(config: Config, outcomes: Mapping[str, RunOutcome] | None = None) -> DiagnosisTable | None:
    """This session's table, built on first use (thread-safe).

    Parameters
    ----------
    config : grader.config.core.Config
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
        "--no-diagnosis",
        action="store_true",
        help="do not compare failing results with the catalogued mistakes (--mutants)",
    )


@hookimpl(trylast=True)
def grader_mistake_table(
    collected: Any, catalogue: Catalogue, outcomes: Mapping[str, RunOutcome] | None, config: Config
) -> DiagnosisTable | None:
    """`build_table`; for the session's own checks, the session's table (`table`)."""
    if config.option("no_diagnosis", False):
        return None
    if collected is config.stash.get(COLLECTED):
        return table(config, outcomes)
    return build_table(config, collected, catalogue, outcomes)


@hookimpl
def grader_configure(config: Config) -> None:
    config.stash[_LOCK] = threading.Lock()
    if not config.option("no_diagnosis", False) and config.option("mutants"):
        from grader.packs.catalogue import load_catalogue

        load_catalogue(
            config.option("mutants"), config.pack.submission
        )  # a wrong explicit --mutants fails now, in one line


def leave_one_out(
    table: DiagnosisTable,
    catalogue: Catalogue,
    collected: Any,
    outcomes: Mapping[str, RunOutcome],
    statuses: Mapping[str, Mapping[tuple[str, str], str]],
) -> list[tuple[str, str, str, str]]:
    """`DiagnosisTable.leave_one_out` of ``table``."""
    return table.leave_one_out(catalogue, collected, outcomes, statuses)


@hookimpl(wrapper=True, trylast=True)
def grader_judge_check(
    check: Check, prepared: Prepared, results: Sequence[CallResult], kind: Any, context: Any, config: Config
) -> Any:
    """Add a diagnosis to a failed verdict whose results match a catalogued mistake.

    ``trylast``, like every built-in implementation of a first-result hook:
    it is the innermost wrapper, so a third-party wrapper sees (and may
    change) the diagnosed verdict.
    """
    verdict: Verdict = yield
    store = _store()
    if store.pop("~scoring", False):  # the previous submission was scored: this one's judging begins
        store.pop("~file", None)
    if verdict is None or verdict.diagnosis:
        return verdict
    key = (context.exercise.id, check.id)
    store.pop(key, None)
    if not results or any(r.status not in EVIDENCE_STATUSES for r in results):
        return verdict  # not attempted, timed out, crashed: no evidence, and no reason to run the mutants
    if verdict.status == "passed" and not store.get("~any-failed", {}).get(context.exercise.id):
        # Nothing failed yet in this exercise: no need to build the table for a clean pass.
        store.setdefault("~passed", {}).setdefault(context.exercise.id, []).append((check, results, verdict))
        return verdict
    found_table = table(config)
    if found_table is None:
        return verdict
    for earlier, earlier_results, earlier_verdict in store.pop("~passed", {}).pop(context.exercise.id, []):
        item = found_table.evidence(context.exercise.id, earlier, earlier_results, passed=True)
        if item is not None:
            store[(context.exercise.id, earlier.id)] = dataclasses.replace(
                item, status=earlier_verdict.status, message=earlier_verdict.message
            )
    item = found_table.evidence(context.exercise.id, check, results, passed=verdict.status == "passed")
    if item is not None:
        store[key] = dataclasses.replace(item, status=verdict.status, message=verdict.message)
    if verdict.status != "passed":
        store.setdefault("~any-failed", {})[context.exercise.id] = True
    return verdict


def _store() -> dict[Any, Any]:
    """This thread's evidence store (see `_EVIDENCE`)."""
    if not hasattr(_EVIDENCE, "store"):
        _EVIDENCE.store = {}
    store: dict[Any, Any] = _EVIDENCE.store
    return store


@hookimpl(wrapper=True, trylast=True)
def grader_score_exercise(exercise: Any, verdicts: Sequence[tuple[Check, Verdict]], config: Config) -> Any:
    """Name the mistakes that all of the exercise's evidence singles out (`DiagnosisTable.name`).

    The evidence of each check was recorded while it was judged; a check's
    record counts only if it is this verdict's (same status and message),
    so a submission that never ran (every check "not run") gets none.
    """
    result = yield
    store = _store()
    store["~scoring"] = True
    # The file's evidence so far, for degenerate entries (`DiagnosisTable.whole_file`): the exercises
    # scored before this one (kept here), and those still to come (their records are still in the store).
    file = store.setdefault("~file", {"evidence": [], "clean": False})
    clean = bool(store.get("~passed", {}).pop(exercise.id, None)) and not store.get("~any-failed", {}).get(exercise.id)
    failed_before = store.get("~any-failed", {}).pop(exercise.id, False)
    file["clean"] = file["clean"] or clean or any(store.get("~passed", {}).values())
    evidence = {}
    for check, verdict in verdicts:
        item = store.pop((exercise.id, check.id), None)
        if item is not None and item.status == verdict.status and item.message == verdict.message:
            evidence[check.id] = item
    file["evidence"].extend(evidence.values())
    if result is None or not failed_before or not evidence:
        return result
    found_table = table(config)
    if found_table is None:
        return result
    later = [item for key, item in store.items() if isinstance(key, tuple) and isinstance(item, Evidence)]
    fits = found_table.whole_file([*file["evidence"], *later], file["clean"])
    named = found_table.name(exercise.id, evidence, exclude=found_table.degenerate_names() - fits)
    checks = tuple(
        dataclasses.replace(c, diagnosis=c.diagnosis or named.get(c.id, ())) if c.status != "passed" else c
        for c in result.checks
    )
    return dataclasses.replace(result, checks=checks)
