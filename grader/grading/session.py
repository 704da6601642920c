"""The grading protocol: a short sequence of hook calls.

``collect`` loads the check kinds, the exercise specs and the reference,
and prepares every check once (seeded inputs, expected values). ``grade``
then runs each submission's calls in a child process, judges and scores
the results, and hands the report to the writers.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import operator
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from grader import packs
from grader._version import __version__
from grader.collected import COLLECTED, Collected, PreparedCheck
from grader.config.core import Config
from grader.config.parser import MAX_JOBS
from grader.disclosure import is_public, secret_while_grading
from grader.errors import ConfigError, GraderError, JobStarterLost, PluginError, internal_error_id
from grader.errors import WriterError as WriterError  # where grader.shards.merge finds it
from grader.errors import log_internal_error as _log_internal_error
from grader.execution.channel import own_results
from grader.execution.jobs import usable_cores
from grader.execution.memo import IdentityTable
from grader.grading.batch import Batch
from grader.grading.judging import OutcomeMemo, answers_of
from grader.grading.settings import result_settings
from grader.models import (
    Check,
    CheckResult,
    Exercise,
    ExerciseResult,
    GradingReport,
    Prepared,
    RunOutcome,
    Submission,
    SubmissionResult,
    Verdict,
)
from grader.safetext import display
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.kinds import KindContext  # imported when checks are prepared: it loads numpy

_NOT_LOADED_WARNED = StashKey[bool]()
CHECK_KINDS = StashKey[dict[str, Any]]()
"""The run's check kinds by name."""
INTERNAL_ERRORS = StashKey[list[tuple[str, str]]]()
"""(submission id, internal-error id) of each submission the grader failed on."""

T = TypeVar("T")

__all__ = [
    "CHECK_KINDS",
    "INTERNAL_ERRORS",
    "collect",
    "grade",
    "grade_submission",
    "result_key",
    "spec_hash",
    "default_jobs",
    "worker_count",
]


def answered(value: T | None, hook: str) -> T:
    """A first-result hook's answer, or a `grader.errors.PluginError` when no plugin gave one.

    The built-ins answer every such hook the grading protocol calls; None means a third-party
    plugin replaced one and returned nothing.
    """
    if value is None:
        raise PluginError(f"no plugin answered {hook}")
    return value


def check_kinds(config: Config) -> dict[str, Any]:
    """Merge the kinds contributed through ``grader_check_kinds``, each plugin's answer checked.

    Raises
    ------
    grader.errors.PluginError
        Naming the plugin and the fix, if a plugin's hook raises, returns something that is not
        a list of kinds (each with a text ``name``, ``prepare`` and ``judge``), or if two
        kinds share a name (both plugins named).
    """
    from grader.grading.kindcheck import contributed_kinds

    kinds: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for plugin, contributed in contributed_kinds(config.pluginmanager):
        for kind in contributed:
            if kind.name in kinds and kinds[kind.name] is not kind:
                raise PluginError(
                    f"two plugins define the check kind '{kind.name}': {owners[kind.name]} and {plugin}; "
                    "rename one of them, or block one with -p no:NAME"
                )
            kinds[kind.name] = kind
            owners[kind.name] = plugin
    return kinds


def spec_hash(spec_files: list[Path], reference: Path) -> str:
    """SHA-256 over the spec files (names and bytes) and the reference file."""
    h = hashlib.sha256()
    for path in [*spec_files, reference]:
        h.update(path.name.encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def public_bundle(config: Config, specs_dir: Path) -> Path | None:
    """The public-checks file ``grader check`` should use, or None to read the specs.

    ``--public FILE`` names one; without it, the pack's public-checks file
    is used when ``--specs`` was not given and the pack holds no specs (a
    student package's pack).
    """
    if config.option("public"):
        return Path(config.option("public"))
    if not config.option("specs") and not specs_dir.is_dir() and config.pack.public.is_file():
        return Path(config.pack.public)
    return None


def collect(config: Config, visible_only: bool = False) -> Collected:
    """Load kinds, specs and reference, and prepare every check.

    Parameters
    ----------
    config : grader.config.core.Config
    visible_only : bool
        Keep only ``visible`` checks (what ``grader check`` runs).

    Raises
    ------
    grader.errors.ConfigError
        If the specs folder or the reference is missing, no spec is found,
        two specs share an exercise id, or a spec is malformed
        (`grader.errors.SpecError`).
    """
    config.stash[CHECK_KINDS] = kinds = check_kinds(config)
    specs_dir = packs.specs_dir(config)
    if visible_only:
        bundle = public_bundle(config, specs_dir)
        if bundle is not None:
            from grader.packs.public import load_bundle

            collected, hidden = load_bundle(bundle, kinds)
            return dataclasses.replace(collected, unlisted_hidden=hidden)
    if not specs_dir.is_dir():
        raise ConfigError(f"{specs_dir}: specs folder not found; run from the project folder or pass --specs DIR")
    reference_path = packs.reference_file(config)
    reference = config.hooks.load_reference(path=str(reference_path), config=config)
    if reference is None:
        raise ConfigError(f"{reference_path}: no plugin loads the reference (grader_load_reference)")
    exercises: list[Exercise] = []
    used: list[Path] = []
    not_loaded: list[str] = []
    for path in sorted(specs_dir.iterdir()):
        if path.is_dir():
            not_loaded += [f"{q.relative_to(specs_dir)} (in a subfolder)" for q in _spec_like_files(path)]
            continue
        if not path.is_file():
            continue
        exercise = config.hooks.load_exercise(path=str(path), config=config)
        if exercise is None:
            if _looks_like_spec(path.name):
                not_loaded.append(f"{path.name} (not named *.yaml)")
            continue
        twin = next((i for i, e in enumerate(exercises) if e.id == exercise.id), None)
        if twin is not None:
            newer, older = sorted([path, used[twin]], key=lambda p: (p.stat().st_mtime_ns, p.name), reverse=True)
            raise ConfigError(
                f"{newer}: exercise '{exercise.id}' is also defined in {older} (this file is the newer); "
                "keep one of the two files in the specs folder"
            )
        exercises.append(exercise)
        used.append(path)
    if not_loaded and not config.stash.get(_NOT_LOADED_WARNED):
        config.stash[_NOT_LOADED_WARNED] = True  # validate collects twice: warn once
        shown = ", ".join(not_loaded[:10]) + (f" and {len(not_loaded) - 10} more" if len(not_loaded) > 10 else "")
        print(
            f"grader: warning: {specs_dir}: not loaded: {display(shown)}; specs are the *.yaml and *.yml files "
            "directly in this folder",
            file=sys.stderr,
        )
    if not exercises:
        raise ConfigError(f"{specs_dir}: no exercise specs (*.yaml) found")
    from grader.kinds import KindContext

    prepared = []
    for exercise in exercises:
        context = KindContext(exercise, dict(reference), error_bound=_error_bound(config))
        items = []
        for check in exercise.checks:
            if visible_only and not is_public(check):
                continue
            kind = kinds[check.kind]
            from grader.grading.kindcheck import prepare_checked

            ready = _bounded(check, context, prepare_checked(kind, check, context, exercise.path))
            context.forget_reference()
            items.append(PreparedCheck(check, kind, context, ready))
        prepared.append((exercise, tuple(items)))
    return Collected(tuple(exercises), tuple(prepared), spec_hash(used, reference_path))


def _error_bound(config: Config) -> Any:
    """``KindContext.error_bound``: the ``grader_float64_error`` hook, as a plain function."""

    def bound(function: str, args: Any, parts: Any) -> Any:
        return config.hooks.float64_error(function=function, args=args, parts=parts)

    return bound


def _bounded(check: Check, context: KindContext, prepared: Prepared) -> Prepared:
    """The prepared calls with their result budgets and whether they are hidden.

    A call's budget (`grader.execution.boundary.budget_for`) is a few times the size
    of what the reference returns on the same arguments: a job's answer
    larger than that is refused before it is read. A call on which the
    reference raises (a ``raises`` check) gets `grader.execution.boundary.DEFAULT_BUDGET`. A call is
    hidden when its check is not ``visible``: the submission's output is
    shown only up to the first hidden call.
    """
    from grader.execution.boundary import DEFAULT_BUDGET, budget_for
    from grader.kinds import guarded_call

    calls = []
    for call in prepared.calls:
        fn = context.reference.get(call.function)
        try:
            if fn is None:
                budget = DEFAULT_BUDGET
            else:
                known, value = context.last_reference(call.function, call.args)
                budget = budget_for(value if known else guarded_call(fn, copy.deepcopy(call.args)))
        except KeyboardInterrupt:  # Ctrl-C, not the reference: the run stops (it was lost here)
            raise
        except BaseException:  # noqa: BLE001 - the reference is meant to raise here (a raises check)
            budget = DEFAULT_BUDGET  # what a submission that does not raise returns has no reference size
        calls.append(dataclasses.replace(call, budget=budget, hidden=secret_while_grading(check)))
    return dataclasses.replace(prepared, calls=tuple(calls))


def _looks_like_spec(name: str) -> bool:
    """Whether a file name looks like a spec's (``G14.02.yaml.txt``, ``G14.02.yaml~``, ``.G14.02.yml.swp``)."""
    lower = name.lower()
    return ".yaml" in lower or ".yml" in lower


def _spec_like_files(folder: Path, limit: int = 1000) -> list[Path]:
    """Files below ``folder`` that look like specs (at most ``limit`` entries looked at)."""
    found = []
    for count, (root, dirs, files) in enumerate(os.walk(folder)):
        if count >= limit:
            break
        dirs.sort()
        found += [Path(root) / f for f in sorted(files) if _looks_like_spec(f)]
    return found


def _failed_everywhere(
    collected: Collected, status: str, message: str
) -> list[tuple[Exercise, list[tuple[Check, Verdict]]]]:
    return [(exercise, [(pc.check, Verdict(status, message)) for pc in items]) for exercise, items in collected.checks]


def grade_submission(
    submission: Submission, collected: Collected, config: Config, outcome: RunOutcome | None = None
) -> SubmissionResult:
    """Grade one submission: run its calls, judge each check, score.

    A submission that cannot run (no file, import failure) is graded
    ``"error"`` with every check in error and the reason. A fault of the
    grader or of a plugin while running, decoding, judging, diagnosing or
    scoring this submission also makes it ``"error"`` (see
    `internal_error_result`): it never raises, and never costs another
    submission its grade. ``outcome``, when given, holds the results of the
    submission's calls already run (``grader audit`` runs its catalogue once
    for grading and diagnosis); otherwise ``grader_run_calls`` runs them.
    """
    stage = "running"
    try:
        return _grade_submission(submission, collected, config, outcome, _Stage())
    except JobStarterLost:  # no job can start any more: not this submission's fault, nor one to repeat per submission
        raise
    except Exception as exc:  # noqa: BLE001 - any fault stays this submission's
        stage = getattr(exc, "_grader_stage", stage)
        return internal_error_result(submission, collected, config, exc, stage)


_WITH_CALL = StashKey[IdentityTable]()


def _with_call(config: Config, prepared: Prepared, verdict: Verdict) -> Verdict:
    """``verdict`` with the call a student may read first in its details (made once per verdict object:
    a verdict judged before comes back as the same object, `grader.grading.judging.VerdictCache`)."""
    table = config.stash.setdefault(_WITH_CALL, IdentityTable())
    shown: Verdict | None = table.get(prepared, verdict)
    if shown is None:
        shown = table.put(
            prepared, verdict, dataclasses.replace(verdict, details=(("call", prepared.shown_call), *verdict.details))
        )
    return shown


class _Stage:
    """The grading stage in progress, named in an internal-error note."""

    def __init__(self) -> None:
        self.name = "running its calls"


def _grade_submission(
    submission: Submission, collected: Collected, config: Config, outcome: RunOutcome | None, stage: _Stage
) -> SubmissionResult:
    try:
        stdout = stderr = error = ""
        exercise_results: tuple[ExerciseResult, ...] | None = None
        memo: OutcomeMemo | None = None
        wires: tuple[Any, ...] | None = None
        if submission.problem or submission.file is None:
            error = submission.problem or "no file to grade"
            verdicts = _failed_everywhere(collected, "error", f"not run: {error}")
        else:
            calls = collected.calls
            if outcome is None:
                outcome = config.hooks.run_calls(submission=submission, calls=list(calls), config=config)
            stage.name = "reading its results"
            if outcome is None or len(outcome.results) != len(calls):
                raise RuntimeError(
                    f"the runner returned {len(outcome.results) if outcome else 'no'} results for {len(calls)} calls"
                )
            if outcome.graded is not None:  # judged and scored where the calls ran (grade --dask-judge)
                return dataclasses.replace(outcome.graded, id=submission.id, path=submission.path, slug=submission.slug)
            stdout, stderr, error = outcome.stdout, outcome.stderr, outcome.import_error
            stage.name = "judging its checks"
            memo = OutcomeMemo.of(config, collected)
            wires = answers_of(outcome.results) if memo is not None else None
            if memo is not None and wires is not None:
                exercise_results = memo.get(wires)
            verdicts = [] if exercise_results is not None else _judged(collected, outcome, config)
        stage.name = "scoring it"
        if exercise_results is None:
            exercise_results = tuple(
                answered(
                    config.hooks.score_exercise(exercise=exercise, verdicts=judged, config=config),
                    "grader_score_exercise",
                )
                for exercise, judged in verdicts
            )
            if memo is not None and wires is not None:
                memo.keep(wires, exercise_results)
        sha256 = outcome.sha256 if outcome is not None and outcome.sha256 else submission.sha256
        return SubmissionResult(
            id=submission.id,
            path=submission.path,
            sha256=submission.sha256 if sha256 == submission.sha256 else sha256,  # one string kept, not two
            status="error" if error else "graded",
            score=round(sum(e.score for e in exercise_results), 6),
            max_score=round(sum(e.max_score for e in exercise_results), 6),
            exercises=exercise_results,
            error=error,
            stdout=stdout,
            stderr=stderr,
            slug=submission.slug,
        )
    except Exception as exc:
        exc._grader_stage = stage.name  # type: ignore[attr-defined]
        raise


def _judged(
    collected: Collected, outcome: RunOutcome, config: Config
) -> list[tuple[Exercise, list[tuple[Check, Verdict]]]]:
    """Each exercise with its checks' verdicts, judged through ``grader_judge_check``."""
    judged: dict[str, list[tuple[Check, Verdict]]] = {exercise.id: [] for exercise, _ in collected.checks}
    # Values of their own: the answers are shared between equal frames (`grader.execution.channel.own_results`).
    for exercise, pc, mine in collected.split(own_results(outcome.results)):
        verdict = answered(
            config.hooks.judge_check(
                check=pc.check,
                prepared=pc.prepared,
                results=mine,
                kind=pc.kind,
                context=pc.context,
                config=config,
            ),
            "grader_judge_check",
        )
        if pc.prepared.shown_call:
            verdict = _with_call(config, pc.prepared, verdict)
        judged[exercise.id].append((pc.check, verdict))
    return [(exercise, judged[exercise.id]) for exercise, _ in collected.checks]


def internal_error_result(
    submission: Submission, collected: Collected, config: Config, exc: BaseException, stage: str
) -> SubmissionResult:
    """The ``error`` result of a submission the grader failed on, and a note in the log.

    The note (one line naming the submission, the stage and the id, then
    the traceback) goes to the log (standard error); the result's ``error``
    says, in one line, that the grader failed, where, and the id to report.
    The exception's message is not put in the result: it may hold text the
    submission wrote.
    """
    fault = internal_error_id(exc)
    if not config.stash.get(_STOPPED, False):  # not the stop's own doing (the batch stopped, its jobs ended)
        _log_internal_error(f"internal error {fault} while {stage} for submission {submission.id!a}", exc)
    config.stash.setdefault(INTERNAL_ERRORS, []).append((submission.id, fault))
    message = (
        f"the grader failed while {stage} (internal error {fault}, {type(exc).__name__}); this submission "
        f"was not graded: this is a bug in the grader or a plugin, please report it with that id"
    )
    verdicts = _failed_everywhere(collected, "error", message)
    exercise_results = []
    for exercise, judged in verdicts:
        try:
            exercise_results.append(
                answered(
                    config.hooks.score_exercise(exercise=exercise, verdicts=judged, config=config),
                    "grader_score_exercise",
                )
            )
        except Exception:  # noqa: BLE001 - the scorer itself is at fault: keep the result scoreless
            exercise_results.append(_unscored(exercise, judged))
    return SubmissionResult(
        id=submission.id,
        path=submission.path,
        sha256="",  # no content was graded: no gradebook keeps this result, the next run grades it again
        status="error",
        score=0.0,
        max_score=round(sum(e.max_score for e in exercise_results), 6),
        exercises=tuple(exercise_results),
        error=message,
        slug=submission.slug,
    )


def _unscored(exercise: Exercise, judged: list[tuple[Check, Verdict]]) -> ExerciseResult:
    """An exercise's result with every check at 0 points, made without the scoring plugin."""
    checks = tuple(
        CheckResult(
            id=check.id,
            description="",
            status=verdict.status,
            score=0.0,
            max_score=check.points,
            visibility=check.visibility,
            message=verdict.message,
            hint=check.hint,
            shown=False,
        )
        for check, verdict in judged
    )
    return ExerciseResult(
        exercise.id, exercise.title, exercise.section, 0.0, round(sum(c.max_score for c in checks), 6), checks
    )


def _log_line(line: str) -> None:
    try:
        print(f"grader: {display(line)}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


_STOPPED = StashKey[bool]()
"""True once a batch stops (Ctrl-C): the submissions still in flight fail as their jobs are ended,
and those failures are not the grader's faults to report."""


def locate_all(paths: list[str], config: Config) -> list[Submission]:
    """Locate the submissions of every PATH and name them (`grader.intake.naming`).

    The roster (``--roster``) is matched against the ids as found; then ids
    that collide are told apart (``frank``, ``frank-2`` and ``frank.py``
    stay three students) and every submission gets its unique slug, the
    stem of its files.
    """
    from grader.intake.naming import name_submissions

    found: list[Submission] = []
    for path in paths:
        found.extend(answered(config.hooks.locate_submissions(path=path, config=config), "grader_locate_submissions"))
    if config.option("roster") and config.command == "grade":
        from grader.intake.roster import apply_roster, read_roster

        ignore_case = bool(config.option("roster_ignore_case", False))
        found = apply_roster(found, read_roster(config.option("roster"), ignore_case), ignore_case)
    return name_submissions(found)


def result_key(submission: Submission, collected: Collected, config: Config) -> str:
    """What a submission's result depends on: its bytes, the specs, the grader, the run settings.

    Two runs with the same key give the same result, so a stored result with
    this key can be reused (resuming a batch, or identical files).
    """
    text = json.dumps([submission.sha256, collected.spec_hash, __version__, result_settings(config)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def default_jobs() -> int:
    """Submissions graded at once without ``--jobs``: one per core the grader may use (`usable_cores`), and one more.

    A job waits for the grader between its phases and at its end (its next calls, its judging); the
    extra one keeps the cores busy meanwhile. On 2 cores, 1,000 submissions: 3 at once took 0.70x the
    calls-only floor's wall time where 2 took 0.65x, at the same CPU per submission; 4 gained nothing
    more (``python benchmarks/bench_floor.py --only sandboxed@2,sandboxed@3,sandboxed@4,floor``).

    Returns
    -------
    int
        Submissions at once, from 2 to `grader.config.parser.MAX_JOBS` (256), as ``--jobs`` allows.
    """
    return min(MAX_JOBS, usable_cores() + 1)  # what --jobs accepts at most, on a machine of 256 cores or more


def worker_count(config: Config) -> int:
    """Submissions graded at once: ``--jobs``, or `default_jobs`."""
    jobs = config.option("jobs")
    return max(1, int(jobs)) if jobs else default_jobs()


def grade(config: Config, paths: list[str], visible_only: bool = False) -> GradingReport:
    """Grade every submission behind ``paths`` and write the reports.

    Submissions are graded ``--jobs`` at a time, each in its own child
    process; a result a plugin already holds for the same `result_key` (the
    SQLite gradebook, when resuming) is reused instead of graded again.
    Results keep the order of ``paths``.

    Returns
    -------
    grader.models.GradingReport
    """
    submissions = locate_all(paths, config)
    only = set(config.option("only") or ())
    if only:
        unknown = sorted(only - {s.id for s in submissions})
        if unknown:
            from grader.errors import UsageError

            raise UsageError(
                f"--only: no submission with the id {', '.join(map(repr, unknown))}; give ids as "
                "results.json lists them"
            )
    from grader.grading.slices import select

    submissions = select(submissions, config)  # --shard K/N: this run's slice of the class (ids named class-wide)
    collected = collect(config, visible_only=visible_only)
    config.hooks.grading_ready(config=config)  # e.g. the sandbox's zygote and preflight, readied meanwhile
    made = config.out_dir is not None and not config.out_dir.exists()
    if config.out_dir is not None:  # only now: a run refused before grading leaves no --out behind
        from grader.fileio import make_out_dir

        make_out_dir(config.out_dir)
    config.stash[COLLECTED] = collected
    try:
        config.hooks.collection_finish(submissions=submissions, collected=collected, config=config)
    except GraderError:  # refused by a plugin's check of its input (--manual rows): leave no --out behind
        if made and config.out_dir is not None:
            shutil.rmtree(config.out_dir, ignore_errors=True)
        raise
    results: list[SubmissionResult | None] = [None] * len(submissions)
    todo = _reuse_cached(submissions, collected, config, only, results)
    # A runner that grades elsewhere (a Dask cluster) sends the batch ahead; results still come back through
    # grader_run_calls, one submission at a time, and are judged, kept and written here.
    config.hooks.batch_start(submissions=[submissions[i] for i in todo], calls=collected.calls, config=config)
    _grade_todo(submissions, todo, collected, config, results)
    report = GradingReport(
        grader_version=__version__,
        spec_hash=collected.spec_hash,
        command=config.command,
        submissions=tuple(r for r in results if r is not None),
        exercises=collected.exercises,
    )
    # Each writer on its own (the facade): one that fails costs only its own files, then stops the run (exit 4).
    config.hooks.write_reports(report=report, config=config)
    return report


def _reuse_cached(
    submissions: list[Submission],
    collected: Collected,
    config: Config,
    only: set[str],
    results: list[SubmissionResult | None],
) -> list[int]:
    """Put in ``results`` the results plugins hold (`result_key`), leave others out for ``--only``; return the rest."""
    todo: list[int] = []
    left_out: list[str] = []
    for index, submission in enumerate(submissions):
        cached = None
        if submission.file is not None and not submission.problem:
            key = result_key(submission, collected, config)
            cached = config.hooks.cached_result(submission=submission, key=key, config=config)
        if only and submission.id not in only and cached is None:
            left_out.append(submission.id)  # --only: another student, and the gradebook has no result of theirs
            continue
        if cached is not None:
            cached = dataclasses.replace(cached, id=submission.id, path=submission.path, slug=submission.slug)
            results[index] = _shared_hand_over(adjust_result(cached, submission, config), submission, collected, config)
        else:
            todo.append(index)
    if left_out:
        _log_line(
            f"warning: --only: {len(left_out)} other student(s) left out of this run's files, the gradebook has "
            f"no result of theirs: {', '.join(left_out[:10])}{' ...' if len(left_out) > 10 else ''}"
        )
    return todo


def _grade_todo(
    submissions: list[Submission],
    todo: list[int],
    collected: Collected,
    config: Config,
    results: list[SubmissionResult | None],
) -> None:
    """Grade ``submissions[i]`` for each ``i`` in ``todo``, `worker_count` at a time, into ``results[i]``.

    Each grading thread grades a submission and hands its result over itself, one thread at a
    time (`grader.grading.batch.Batch`): a result is written as soon as it is graded and dropped
    (issue 16: memory flat in the class size), and no other thread is woken per submission.
    """

    def grade_one(index: int) -> SubmissionResult:
        try:
            return grade_submission(submissions[index], collected, config)
        except JobStarterLost:  # the run stops with its one line (the gradebook keeps what was graded)
            raise
        except Exception as exc:  # noqa: BLE001 - grade_submission does not raise; belt and braces
            return internal_error_result(submissions[index], collected, config, exc, "grading it")

    def hand_over(index: int, result: SubmissionResult) -> None:
        adjusted = adjust_result(result, submissions[index], config)
        results[index] = _shared_hand_over(adjusted, submissions[index], collected, config)

    def stopped() -> None:
        # Ctrl-C (or a writer's one-line error): the submissions in flight are not waited for; the
        # runner's grader_unconfigure ends their jobs, so they finish at once, quietly (their
        # failures are the stop's, not the grader's).
        config.stash[_STOPPED] = True

    # One thread more than running jobs, so a result is judged and handed over while every job slot is
    # busy; no thread that would find nothing to grade.
    Batch(todo, grade_one, hand_over, stopped).run(min(worker_count(config) + 1, len(todo)))


_SHARED = StashKey[dict[Any, Any]]()
_SHARED_TUPLES = StashKey[dict[int, tuple[Any, Any]]]()
"""The last exercise-result tuples `shared` was handed (by id, with the tuple itself) and what each was
shared as: one handed in again (`grader.grading.judging.OutcomeMemo` gives equal answers the very same
one) is not hashed again."""

SHARED_SEEN = 256
"""Tuples `_SHARED_TUPLES` holds at most (past that it starts again): a bounded few results held alive."""


def shared(result: SubmissionResult, config: Config) -> SubmissionResult:
    """The result with each check's and exercise's result shared with the equal ones already kept.

    A class of correct submissions holds the same 46 check results thousands of times; kept once,
    the batch's memory grows by about a kilobyte per submission instead of tens (issue 16). So are
    equal printed output and error texts (the same debugging print left in many submissions, up to
    16 KiB a stream). The results are frozen, so sharing changes nothing a writer sees.
    """
    table = config.stash.setdefault(_SHARED, {})
    changes: dict[str, Any] = {}
    for name in ("stdout", "stderr", "error"):
        text = getattr(result, name)
        if text and table.setdefault(text, text) is not text:
            changes[name] = table[text]
    seen = config.stash.setdefault(_SHARED_TUPLES, {})
    known = seen.get(id(result.exercises))
    if known is not None and known[0] is result.exercises:  # these very results were shared before
        if known[1] is not result.exercises:
            changes["exercises"] = known[1]
        return dataclasses.replace(result, **changes) if changes else result
    try:
        exercises = []
        for exercise in result.exercises:
            checks = tuple(table.setdefault(c, c) for c in exercise.checks)
            if any(a is not b for a, b in zip(checks, exercise.checks)):
                exercise = dataclasses.replace(exercise, checks=checks)
            exercises.append(table.setdefault(exercise, exercise))
        same = len(exercises) == len(result.exercises) and all(map(operator.is_, exercises, result.exercises))
        kept = table.setdefault(("exercises", *exercises), result.exercises if same else tuple(exercises))
        if kept is not result.exercises:
            changes["exercises"] = kept
        if len(seen) >= SHARED_SEEN:
            seen.clear()
        seen[id(result.exercises)] = (result.exercises, kept)  # the tuple held with it: its id stays its own
    except TypeError:  # an unhashable field (a plugin's list in details): its exercises are kept as they are
        pass
    return dataclasses.replace(result, **changes) if changes else result


def adjust_result(result: SubmissionResult, submission: Submission, config: Config) -> SubmissionResult:
    """The result with the LMS's facts and every ``grader_adjust_result`` applied, in pluggy's order.

    Starts from the automatic result (`grader.term.strip_adjustments`), so a
    result taken from the gradebook is never adjusted twice, and manual
    scores are read again on every run (a ``--regrade`` keeps them).
    """
    from grader.term import strip_adjustments

    stripped = strip_adjustments(result)
    if stripped is not result or result.lms != submission.lms:  # a fresh result's lms is its own already
        result = dataclasses.replace(stripped, lms=dict(submission.lms))
    automatic = result
    for impl in reversed(config.hooks.implementations("grader_adjust_result")):  # pluggy's own call order
        kwargs = {"result": result, "submission": submission, "config": config}
        try:
            changed = cast("SubmissionResult | None", impl.function(**{name: kwargs[name] for name in impl.argnames}))
        except GraderError:
            raise  # a configuration error (manual.csv, policy.yaml): the run stops with its one line
        except Exception as exc:  # noqa: BLE001 - a plugin's bug costs this student their adjustments only
            fault = internal_error_id(exc)
            _log_internal_error(
                f"internal error {fault} in the {impl.plugin_name} plugin's grader_adjust_result "
                f"for submission {submission.id!a}",
                exc,
            )
            config.stash.setdefault(INTERNAL_ERRORS, []).append((submission.id, fault))
            return automatic
        if changed is not None:
            result = changed
    return result


def _shared_hand_over(
    result: SubmissionResult, submission: Submission, collected: Collected, config: Config
) -> SubmissionResult:
    """`shared` result, handed over (`_hand_over`): the kept one.

    Shared before the writers see it: their parts kept per distinct result go by the exercise results'
    identity, and a result built anew for each submission (an import error, a syntax error) is one
    object only once shared; handed over unshared, every such student's page, file and line was made whole.
    """
    kept = shared(result, config)
    handed = _hand_over(kept, submission, collected, config)
    return handed if handed is kept else shared(handed, config)


def _hand_over(
    result: SubmissionResult, submission: Submission, collected: Collected, config: Config
) -> SubmissionResult:
    """Give a result to the ``grader_submission_graded`` writers; a writer's fault makes it an error result.

    The error result is then handed to every writer in its place (the page
    and the line of results.json say the grader failed), so the batch's
    files stay consistent; a writer that fails on that too is logged. A
    writer's `grader.errors.GraderError` (bad instructor input: a link in
    ``--out`` where a file goes) is no fault of the grader's: it stops the
    run with its one line, as it did when the error result met it again.
    """
    try:
        config.hooks.submission_graded(result=result, config=config)
        return result
    except GraderError:  # bad instructor input (--out holds a link where a file goes): the run stops with its one line
        raise
    except Exception as exc:  # noqa: BLE001 - one submission's files never cost the batch
        failed = internal_error_result(submission, collected, config, exc, "writing its files")
    for plugin, fault in config.hooks.call_each("grader_submission_graded", result=failed, config=config):
        _log_line(f"internal error {fault}: the {plugin} plugin could not write the error result of {submission.id!a}")
    return failed


def call_each(config: Config, hook_name: str, /, **kwargs: Any) -> list[tuple[str, str]]:
    """Call every implementation of a hook that returns nothing, each on its own (`grader.config.core.Hooks.call_each`).

    ``_errors``, when given, collects the one-line errors (`grader.errors.GraderError`) instead of
    raising the first.

    Returns
    -------
    list of (str, str)
        (plugin name, internal-error id) of each implementation that raised.
    """
    errors = kwargs.pop("_errors", None)
    return config.hooks.call_each(hook_name, errors=errors, **kwargs)
