"""The grading protocol: a short sequence of hook calls.

``collect`` loads the check kinds, the exercise specs and the reference,
and prepares every check once (seeded inputs, expected values). ``grade``
then runs each submission's calls in a child process, judges and scores
the results, and hands the report to the writers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import __version__
from grader.builtin.checks import KindContext
from grader.config import Config
from grader.errors import ConfigError, PluginError
from grader.models import (
    CallResult,
    Check,
    Exercise,
    GradingReport,
    Prepared,
    RunOutcome,
    Submission,
    SubmissionResult,
    Verdict,
)

__all__ = ["Collected", "PreparedCheck", "collect", "grade", "grade_submission", "result_key", "spec_hash", "worker_count"]


@dataclass(frozen=True)
class PreparedCheck:
    """A check with its kind, context and prepared calls."""

    check: Check
    kind: Any
    context: KindContext
    prepared: Prepared


@dataclass(frozen=True)
class Collected:
    """Everything known before the first submission is graded."""

    exercises: tuple[Exercise, ...]
    checks: tuple[tuple[Exercise, tuple[PreparedCheck, ...]], ...]
    spec_hash: str
    unlisted_hidden: int = 0
    """Hidden checks known only by count (the public-checks file lists none)."""

    def header(self, command: str) -> GradingReport:
        """The session's report before any result: versions and exercises, no submissions.

        What a writer needs to render one submission's file while the
        batch still runs.
        """
        return GradingReport(__version__, self.spec_hash, command, (), self.exercises)

    @property
    def hidden_count(self) -> int:
        """Number of checks that are not ``visible``."""
        listed = sum(1 for ex in self.exercises for c in ex.checks if c.visibility != "visible")
        return listed + self.unlisted_hidden


def check_kinds(config: Config) -> dict[str, Any]:
    """Merge the kinds contributed through ``grader_check_kinds``.

    Raises
    ------
    grader.errors.PluginError
        If two kinds share a name.
    """
    kinds: dict[str, Any] = {}
    for contributed in config.hook.grader_check_kinds():
        for kind in contributed or ():
            if kind.name in kinds and kinds[kind.name] is not kind:
                raise PluginError(f"two plugins define the check kind '{kind.name}'")
            kinds[kind.name] = kind
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

    ``--public FILE`` names one; without it, the file shipped with the
    package is used when the specs folder was left at its default and is
    not here (a student's own folder).
    """
    from grader.cli import DEFAULT_SPECS
    from grader.public import BUNDLE

    if config.option("public"):
        return Path(config.option("public"))
    if config.option("specs") == DEFAULT_SPECS and not specs_dir.is_dir() and BUNDLE.is_file():
        return BUNDLE
    return None


def collect(config: Config, visible_only: bool = False) -> Collected:
    """Load kinds, specs and reference, and prepare every check.

    Parameters
    ----------
    config : grader.config.Config
    visible_only : bool
        Keep only ``visible`` checks (what ``grader check`` runs).

    Raises
    ------
    grader.errors.ConfigError
        If the specs folder or the reference is missing, no spec is found,
        two specs share an exercise id, or a spec is malformed
        (`grader.errors.SpecError`).
    """
    config.stash["check_kinds"] = kinds = check_kinds(config)
    specs_dir = Path(config.option("specs"))
    if visible_only:
        bundle = public_bundle(config, specs_dir)
        if bundle is not None:
            from grader.public import load_bundle

            collected, hidden = load_bundle(bundle, kinds)
            return dataclasses.replace(collected, unlisted_hidden=hidden)
    if not specs_dir.is_dir():
        raise ConfigError(f"{specs_dir}: specs folder not found; run from the project folder or pass --specs DIR")
    reference_path = Path(config.option("reference"))
    reference = config.hook.grader_load_reference(path=str(reference_path), config=config)
    exercises: list[Exercise] = []
    used: list[Path] = []
    for path in sorted(p for p in specs_dir.iterdir() if p.is_file()):
        exercise = config.hook.grader_load_exercise(path=str(path), config=config)
        if exercise is None:
            continue
        if any(e.id == exercise.id for e in exercises):
            raise ConfigError(f"{path}: exercise '{exercise.id}' is defined twice in {specs_dir}")
        exercises.append(exercise)
        used.append(path)
    if not exercises:
        raise ConfigError(f"{specs_dir}: no exercise specs (*.yaml) found")
    prepared = []
    for exercise in exercises:
        context = KindContext(exercise, dict(reference))
        items = []
        for check in exercise.checks:
            if visible_only and check.visibility != "visible":
                continue
            kind = kinds[check.kind]
            items.append(PreparedCheck(check, kind, context, kind.prepare(check, context)))
        prepared.append((exercise, tuple(items)))
    return Collected(tuple(exercises), tuple(prepared), spec_hash(used, reference_path))


def _failed_everywhere(collected: Collected, status: str, message: str) -> list[tuple[Exercise, list[tuple[Check, Verdict]]]]:
    return [
        (exercise, [(pc.check, Verdict(status, message)) for pc in items]) for exercise, items in collected.checks
    ]


def grade_submission(
    submission: Submission, collected: Collected, config: Config, outcome: RunOutcome | None = None
) -> SubmissionResult:
    """Grade one submission: run its calls, judge each check, score.

    A submission that cannot run (no file, import failure) is graded
    ``"error"`` with every check in error and the reason; it never raises.
    ``outcome``, when given, holds the results of the submission's calls
    already run (``grader audit`` runs its catalogue once for grading and
    diagnosis); otherwise ``grader_run_calls`` runs them.
    """
    stdout = stderr = error = ""
    if submission.problem or submission.file is None:
        error = submission.problem or "no file to grade"
        verdicts = _failed_everywhere(collected, "error", f"not run: {error}")
    else:
        calls = [call for _, items in collected.checks for pc in items for call in pc.prepared.calls]
        if outcome is None:
            outcome = config.hook.grader_run_calls(submission=submission, calls=calls, config=config)
        stdout, stderr, error = outcome.stdout, outcome.stderr, outcome.import_error
        results = list(outcome.results)
        verdicts = []
        offset = 0
        for exercise, items in collected.checks:
            judged = []
            for pc in items:
                n = len(pc.prepared.calls)
                mine: list[CallResult] = results[offset : offset + n]
                offset += n
                verdict = config.hook.grader_judge_check(
                    check=pc.check, prepared=pc.prepared, results=mine, kind=pc.kind, context=pc.context, config=config
                )
                if pc.prepared.shown_call:
                    verdict = dataclasses.replace(verdict, details=(("call", pc.prepared.shown_call), *verdict.details))
                judged.append((pc.check, verdict))
            verdicts.append((exercise, judged))
    exercise_results = tuple(
        config.hook.grader_score_exercise(exercise=exercise, verdicts=judged, config=config)
        for exercise, judged in verdicts
    )
    return SubmissionResult(
        id=submission.id,
        path=submission.path,
        sha256=outcome.sha256 if outcome is not None and outcome.sha256 else submission.sha256,
        status="error" if error else "graded",
        score=round(sum(e.score for e in exercise_results), 6),
        max_score=round(sum(e.max_score for e in exercise_results), 6),
        exercises=exercise_results,
        error=error,
        stdout=stdout,
        stderr=stderr,
        slug=submission.slug,
    )


def locate_all(paths: list[str], config: Config) -> list[Submission]:
    """Locate the submissions of every PATH and name them (`grader.naming`).

    The roster (``--roster``) is matched against the ids as found; then ids
    that collide are told apart (``frank``, ``frank-2`` and ``frank.py``
    stay three students) and every submission gets its unique slug, the
    stem of its files.
    """
    from grader.naming import name_submissions

    found: list[Submission] = []
    for path in paths:
        found.extend(config.hook.grader_locate_submissions(path=path, config=config))
    if config.option("roster") and config.command == "grade":
        from grader.builtin.submission import apply_roster, read_roster

        found = apply_roster(found, read_roster(config.option("roster")))
    return name_submissions(found)


def result_key(submission: Submission, collected: Collected, config: Config) -> str:
    """What a submission's result depends on: its bytes, the specs, the grader, the run settings.

    Two runs with the same key give the same result, so a stored result with
    this key can be reused (resuming a batch, or identical files).
    """
    settings = {
        "import_timeout": config.option("import_timeout"),
        "submission_timeout": config.option("submission_timeout"),
        "insecure": config.option("insecure", False),
        "visible_only": config.command == "check",
        "after_due_date": config.option("after_due_date", False),
        "published": config.option("published", False),
        "diagnosis": _diagnosis_fingerprint(config),
    }
    text = json.dumps([submission.sha256, collected.spec_hash, __version__, settings], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _diagnosis_fingerprint(config: Config) -> str:
    """The catalogue behind diagnoses (its fingerprint), or "" when diagnosis is off; computed once."""
    if config.option("no_diagnosis", False) or config.pluginmanager.get_plugin("diagnosis") is None:
        return ""
    if "session.catalogue_fingerprint" not in config.stash:
        from grader.catalogue import fingerprint

        config.stash["session.catalogue_fingerprint"] = fingerprint(config.option("mutants") or "mutants")
    return config.stash["session.catalogue_fingerprint"]


def worker_count(config: Config) -> int:
    """Submissions graded at once: ``--jobs``, or one per core."""
    jobs = config.option("jobs")
    return max(1, int(jobs)) if jobs else max(1, os.cpu_count() or 1)


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
    collected = collect(config, visible_only=visible_only)
    config.stash["collected"] = collected
    config.stash["total"] = len(submissions)
    config.hook.grader_collection_finish(submissions=submissions, collected=collected, config=config)
    results: list[SubmissionResult | None] = [None] * len(submissions)
    todo = []
    for index, submission in enumerate(submissions):
        cached = None
        if submission.file is not None and not submission.problem:
            key = result_key(submission, collected, config)
            cached = config.hook.grader_cached_result(submission=submission, key=key, config=config)
        if cached is not None:
            results[index] = dataclasses.replace(cached, id=submission.id, path=submission.path, slug=submission.slug)
            config.hook.grader_submission_graded(result=results[index], config=config)
        else:
            todo.append(index)
    # One thread more than running jobs, so a result is judged while every job slot is busy.
    with ThreadPoolExecutor(max_workers=worker_count(config) + 1, thread_name_prefix="grader") as pool:
        futures = {pool.submit(grade_submission, submissions[i], collected, config): i for i in todo}
        for future in as_completed(futures):
            index = futures[future]
            results[index] = future.result()
            config.hook.grader_submission_graded(result=results[index], config=config)
    report = GradingReport(
        grader_version=__version__,
        spec_hash=collected.spec_hash,
        command=config.command,
        submissions=tuple(r for r in results if r is not None),
        exercises=collected.exercises,
    )
    config.hook.grader_write_reports(report=report, config=config)
    return report
