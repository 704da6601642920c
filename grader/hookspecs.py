"""The grader's hook contract: every hook a plugin may implement.

Each hook is a do-nothing function whose docstring says when it is called
and how results combine. Built-in features implement these hooks exactly as
a third-party plugin would (see ``grader.builtin``). Hooks are called with
keyword arguments, so an implementation may accept fewer parameters than
the spec lists.

Phases, in order:

1. Set-up: `grader_add_commands`, `grader_addoption`, `grader_configure`.
2. Collection: `grader_load_exercise`, `grader_load_reference`,
   `grader_check_kinds`, `grader_locate_submissions`.
3. Grading: `grader_collection_finish` once, `grader_batch_start` once, then per submission
   `grader_cached_result`, `grader_run_calls` (whose runner asks `grader_known_outcome` first),
   `grader_judge_check`,
   `grader_score_exercise`, `grader_adjust_result` (also for cached
   results; it may call `grader_submission_time`), `grader_submission_graded`.
4. Reporting: `grader_write_reports` (the writers ask `grader_report_links` and
   `grader_call_seconds`), `grader_terminal_summary`, `grader_unconfigure`.

Plugins share state through these hooks, never through each other's stash keys: a plugin keeps
its own state under its own `grader.stash.StashKey`, and what another plugin may ask of it is a
hook here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grader.markers import hookspec

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping, Sequence

    from grader.collected import Collected
    from grader.config.commands import Commands
    from grader.config.core import Config
    from grader.kinds import CheckKind, KindContext
    from grader.models import (
        Call,
        CallResult,
        Check,
        Exercise,
        ExerciseResult,
        GradingReport,
        Prepared,
        RunOutcome,
        Submission,
        SubmissionResult,
        Verdict,
    )


# --- 1. set-up -------------------------------------------------------------


@hookspec
def grader_add_commands(commands: Commands) -> None:
    """Register subcommands of ``grader``: call ``commands.add(name, help=..., handler=..., ...)``.

    Called once per run, before the command line is parsed, for every plugin (all called). The
    built-in commands are the modules of ``grader.cli.commands``; a third-party plugin adds its
    own the same way. Two plugins registering one name is a `grader.errors.PluginError` naming
    both. See `grader.config.commands.Commands.add` for the arguments.
    """


@hookspec
def grader_addoption(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the command-line options of one subcommand.

    Called once per subcommand that takes the shared options (``grade``,
    ``similarity``, ``check``, ``validate``, ``publish``, ``audit``,
    ``doctor``, ``build-student-package``), after every plugin is registered
    and before the command line is parsed. All implementations are called.
    A plugin adds its options only to the subcommands it serves, so each
    subcommand's ``--help`` lists what it uses, and an option given to a
    subcommand that does not use it is a usage error. An implementation that
    does not take ``command`` adds its options to every subcommand.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parent parser; call ``parser.add_argument``.
    command : str
        The subcommand's name, e.g. ``"grade"``.
    """


@hookspec
def grader_configure(config: Config) -> None:
    """Prepare a plugin for this run, after the command line is parsed.

    Called before any spec, reference or submission is read, so a plugin may
    start helpers here that must never see a secret. All implementations
    are called.

    Parameters
    ----------
    config : grader.config.core.Config
        Parsed options (``config.options``), the plugin manager, the typed
        hooks (``config.hooks``) and ``config.stash`` for plugin state, under
        `grader.stash.StashKey` keys.
    """


# --- 2. collection ---------------------------------------------------------


@hookspec(firstresult=True)
def grader_load_exercise(path: str, config: Config) -> Exercise | None:
    """Load one file of the specs folder as an exercise.

    Called for every file of the specs folder, in sorted order. The first
    non-None result wins; return None for a file your plugin does not read
    (the built-in YAML loader takes ``*.yaml`` and ``*.yml``).

    Raises
    ------
    grader.errors.SpecError
        If the file is yours but malformed; name the file and the key.
    """


@hookspec(firstresult=True)
def grader_load_reference(path: str, config: Config) -> Mapping[str, Callable[..., Any]] | None:
    """Load the reference implementation (trusted, run in the grader's process).

    First non-None result wins.

    Returns
    -------
    mapping of str to callable
        The reference functions by name (``softmax``, ``attention``...).

    Raises
    ------
    grader.errors.ConfigError
        If the reference cannot be loaded.
    """


@hookspec
def grader_check_kinds() -> Sequence[CheckKind] | None:
    """Contribute check kinds.

    All results are collected; each is a sequence of objects with a ``name``
    (the ``kind:`` used in specs), a ``params`` dict naming the spec keys the
    kind accepts (``{"expect": "required", "rtol": "optional"}``),
    ``prepare(check, ctx) -> Prepared`` and
    ``judge(check, prepared, results, ctx) -> Verdict``; optionally a
    ``schema``: a JSON Schema (draft 2020-12) of the mapping of the kind's own
    keys, e.g. ``{"type": "object", "properties": {"atol": {"type": "number",
    "minimum": 0, "description": "give a tolerance: a number >= 0"}}}``. The
    spec loader validates a check's kind keys against it and reports the
    first violation in one line (file, check, key, the message and the
    violated property's ``description`` as the fix). A kind without a
    ``schema`` gets only the generic checks: unknown and missing keys, every
    number finite. See
    ``grader.kinds`` for the protocol (`grader.kinds.CheckKind`), and
    ``grader.builtin.checks`` for the generic kinds; a course pack's plugin
    adds its own. Two kinds with one
    name is an error.
    """


@hookspec(firstresult=True)
def grader_float64_error(function: str, args: Sequence[Any], parts: dict[str, Any]) -> dict[str, Any] | None:
    """State what correct float64 code may be off by on one call, per element.

    A course pack's error analysis of its own functions (e.g. from the
    magnitude of the scores). The generic ``compare`` and ``literal`` kinds
    widen a check's tolerance by it where it exceeds ``rtol``/``atol``
    (`grader.kinds.with_floor`), so correct float64 routes pass on extreme
    inputs; without an answer they measure the effect of rounding the inputs
    instead. Called while checks are prepared, in the grader's process, on
    trusted data only.

    Parameters
    ----------
    function : str
        The function the check calls.
    args : sequence
        Its (plain data) arguments.
    parts : dict of str to array_like
        The reference's result on ``args``, by part name.

    Returns
    -------
    dict of str to ndarray or None
        An absolute bound per element of each part it knows; None when it
        does not know the function.
    """


@hookspec(firstresult=True)
def grader_locate_submissions(path: str, config: Config) -> Sequence[Submission] | None:
    """Turn one command-line PATH into submissions.

    First non-None result wins. The built-in locator takes a
    submission file (e.g. ``attention.py``), a folder holding one, or a folder of student folders.
    Ids need not be unique across PATHs: `grader.grading.session.locate_all` tells
    colliding ids apart and gives every submission its ``slug``
    (`grader.intake.naming`); set ``raw_name`` to the name as found.

    Raises
    ------
    grader.errors.UsageError
        If the path does not exist or holds nothing gradable.
    """


# --- 3. grading ------------------------------------------------------------


@hookspec
def grader_collection_finish(submissions: Sequence[Submission], collected: Collected, config: Config) -> None:
    """Called once every submission is located and every check prepared, before grading.

    ``submissions`` is the whole batch, in report order (ids are unique);
    ``collected`` holds the exercises, the prepared checks and the spec hash.
    Writers that stream one file per submission from
    `grader_submission_graded` learn the whole list of ids here (to give
    each a unique file name) and progress displays learn the total. All
    implementations are called, in the main thread.
    """


@hookspec
def grader_grading_ready(config: Config) -> None:
    """Called once by ``grade``, after the checks are prepared and before the output folder is made.

    The last moment a plugin can stop the run and leave nothing behind: it
    raises `grader.errors.ConfigError` (one line: what is wrong, and the fix).
    A plugin that started something at `grader_configure` time and let it
    get ready in the background, while the specs and the reference were
    loaded, waits for it here (the sandbox: its zygote and its preflight
    jobs). All implementations are called, in the main thread.
    """


@hookspec
def grader_batch_start(submissions: Sequence[Submission], calls: Sequence[Call], config: Config) -> None:
    """Called once before grading starts, with the submissions about to be run (not those reused from a cache).

    ``submissions`` are in report order, ``calls`` what `grader_run_calls`
    will be given for each. A runner that grades elsewhere (the ``dask``
    built-in: a Dask cluster) sends the whole batch ahead here, then answers
    `grader_run_calls` for each submission with what came back; judging,
    the gradebook, progress and the reports stay in the grader's process.
    All implementations are called, in the main thread.
    """


@hookspec(firstresult=True)
def grader_run_calls(submission: Submission, calls: Sequence[Call], config: Config) -> RunOutcome | None:
    """Run a submission's calls away from the grader's process.

    Called from worker threads, ``--jobs`` at a time: implementations must be
    thread-safe. First non-None result wins; the built-in runner (a child process per
    submission) is registered ``trylast`` so a stricter sandbox overrides
    it. Only data may come back: the implementation must never unpickle,
    ``eval`` or ``exec`` anything the submission controls. The catalogued
    mutants (``grader audit``, diagnosis) run through this hook too, in the
    grading run's configuration, as submissions named after their folders and
    marked ``submission.reference``: a student's folder may have the same name,
    so a wrapper that keeps something per submission id must leave a reference
    run out (the built-in timing, staff-page, similarity and shard wrappers do).

    Returns
    -------
    grader.models.RunOutcome
        One `CallResult` per call, in order, plus captured output.
    """


@hookspec(firstresult=True)
def grader_known_outcome(submission: Submission, calls: Sequence[Call], config: Config) -> RunOutcome | None:
    """The outcome of a submission's calls when it already exists, so that nothing runs here.

    Asked by the built-in runner (`grader_run_calls`) before it runs ``calls``, from worker
    threads: implementations must be thread-safe. First non-None result wins; None (every
    implementation's answer when no outcome exists) runs the calls. The built-in ``dask_cluster``
    plugin answers with what the Dask cluster brought back (``grade --dask``), and ``grader merge``
    with each shard's recorded outcome. Every wrapper of `grader_run_calls` (timing, the staff
    pages, similarity) sees the outcome as if it had run here. Never asked for a reference run
    (``submission.reference``, a catalogue entry): its name may be a student's id.

    Parameters
    ----------
    submission : grader.models.Submission
    calls : sequence of grader.models.Call
        What the runner was asked to run, in order.
    config : grader.config.core.Config

    Returns
    -------
    grader.models.RunOutcome or None
        One `CallResult` per call, decoded as strictly as a job's answer
        (`grader.shards.decode_outcome`); None when this plugin has none.
    """


@hookspec(firstresult=True)
def grader_judge_check(
    check: Check,
    prepared: Prepared,
    results: Sequence[CallResult],
    kind: CheckKind,
    context: KindContext,
    config: Config,
) -> Verdict | None:
    """Decide one check from its call results.

    First non-None result wins; the built-in judge (``trylast``) handles
    calls that did not return (timeout, crash, not implemented) and
    otherwise asks ``kind.judge(check, prepared, results, context)``. A
    plugin may amend verdicts with ``@hookimpl(wrapper=True)``, e.g. to
    name a misconception.

    Parameters
    ----------
    check : grader.models.Check
    prepared : grader.models.Prepared
        The calls made and the expectations (never sent to the child).
    results : sequence of grader.models.CallResult
        One per call in ``prepared.calls``.
    kind : grader.kinds.CheckKind
        The check kind named by ``check.kind``.
    context : grader.kinds.KindContext
        The exercise and the reference functions.
    """


@hookspec(firstresult=True)
def grader_mistake_table(
    collected: Collected, catalogue: Any, outcomes: Mapping[str, RunOutcome] | None, config: Config
) -> Any | None:
    """The catalogued mistakes that fail each check of ``collected``, with what each returned.

    Called by ``grader publish`` (on the visible checks) and ``grader audit``
    (with the mutants' outcomes it already ran). First non-None result wins;
    the built-in diagnosis plugin answers, None when diagnosis is off
    (``--no-diagnosis``). When ``collected`` is the session's
    (`grader.stash.COLLECTED`), the table is also the one the session's
    verdicts are diagnosed with.

    Parameters
    ----------
    collected : grader.grading.session.Collected
    catalogue : grader.packs.catalogue.Catalogue
    outcomes : mapping of str to grader.models.RunOutcome, optional
        The mutants' outcomes on ``collected.calls`` by entry name; run when None.

    Returns
    -------
    object
        With ``rows``: (exercise id, check id) to a list of
        (`grader.packs.catalogue.Entry`, results) for every mutant that fails the
        check, and ``catalogue``.
    """


@hookspec(firstresult=True)
def grader_score_exercise(
    exercise: Exercise, verdicts: Sequence[tuple[Check, Verdict]], config: Config
) -> ExerciseResult | None:
    """Turn an exercise's verdicts into its score (partial credit).

    First non-None result wins; the built-in scorer awards each check its
    points times ``verdict.fraction``.
    """


@hookspec(firstresult=True)
def grader_cached_result(submission: Submission, key: str, config: Config) -> SubmissionResult | None:
    """Return a stored result for ``key`` instead of grading the submission again.

    Called in the main thread for each gradable submission before grading
    starts. ``key`` (see `grader.grading.session.result_key`) covers the file's
    bytes, the specs, the grader version and the settings that change a
    result. First non-None result wins; the built-in SQLite gradebook
    answers when resuming a batch (unless ``--regrade``).
    """


@hookspec
def grader_adjust_result(result: SubmissionResult, submission: Submission, config: Config) -> SubmissionResult | None:
    """Adjust a graded submission's score: manual scores, a late penalty.

    Called in the main thread for every result (graded now or taken from a
    cache) before `grader_submission_graded`, with the automatic result
    (`grader.term.strip_adjustments`: never one already adjusted). The
    implementations are called one after another in pluggy's order (the
    built-in ``manual`` is ``tryfirst``, ``policy`` ``trylast``), each given
    the result the previous one returned; return a new result (with
    `grader.models.Adjustment` entries and ``raw_score`` set, e.g. through
    `grader.term.apply_manual` / `grader.term.apply_penalty`) or None to
    leave it. Every writer shows ``score`` (the final one) and the adjustments' reasons.

    Raises
    ------
    grader.errors.GraderError
        For a configuration error (a manual score for a check that does not
        exist): the run stops with its one-line message.
    """


@hookspec
def grader_submission_time(submission: Submission, config: Config) -> Sequence[tuple[str, str]] | None:
    """Say when a submission was submitted, from a trusted source.

    All implementations are called; each returns (source, ISO 8601 time in
    UTC) pairs or None. Sources are ``"lms"`` (the LMS's own export: a
    Moodle grading worksheet, a Canvas CSV of submission times) and
    ``"arrival"`` (the grader's record of when it first saw the file, kept in
    the gradebook). The course policy (``times:``) picks the first source it
    trusts, and never ``arrival`` for a submission from an LMS export (the
    grader sees those files when the export is downloaded). Never answer from
    a commit date or a file's modification time: the student controls both.
    """


@hookspec
def grader_submission_graded(result: SubmissionResult, config: Config) -> None:
    """Called after each submission is graded (progress, live gradebooks).

    Called in the main thread, in completion order (submissions are graded
    ``--jobs`` at a time), also for results taken from a cache. All
    implementations are called.
    """


# --- 4. reporting ----------------------------------------------------------


@hookspec
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write report files for a finished session.

    All implementations are called. ``config.out_dir`` is the output folder,
    or None when the command writes no files (``grader check``). Write each
    file to a temporary name and rename it, so no half-written file is left.
    """


@hookspec
def grader_report_links(config: Config, page: str) -> Sequence[tuple[str, str]] | None:
    """Links a class page shows to pages a plugin writes beside it.

    Asked by the built-in page writers while they write: ``page`` is ``"index"`` for the class
    index (``index.html``, by ``html_report``) and ``"summary"`` for the summary page
    (``summary.html``, by ``summary_page``). All implementations are called; the links are shown
    in pluggy's order (last registered first), each plugin's in its own order.

    Parameters
    ----------
    config : grader.config.core.Config
    page : str
        ``"index"`` or ``"summary"``.

    Returns
    -------
    sequence of (str, str) or None
        (label, file name) pairs, the file name relative to the output folder; None or an
        empty sequence for no link on this page.
    """


@hookspec(firstresult=True)
def grader_call_seconds(submission_id: str, config: Config) -> Sequence[float] | None:
    """The seconds each call of a submission took, for the exporters that show a time.

    Asked by the writers (Gradescope's ``execution_time``, JUnit's and CTRF's per-check times,
    through `grader.grading.timing`) once grading is over. First non-None result wins; the built-in
    ``timing`` plugin answers with what it measured around `grader_run_calls` (from sending a
    call to the job to reading its answer).

    Parameters
    ----------
    submission_id : str
    config : grader.config.core.Config

    Returns
    -------
    sequence of float or None
        One number per call, in ``Collected.calls`` order; None when the submission ran no call
        here (a result from the gradebook cache: its time is unknown).
    """


@hookspec
def grader_terminal_summary(report: GradingReport, config: Config, write: Callable[[str], None]) -> None:
    """Print a summary to the terminal with ``write(line)``.

    All implementations are called, in registration order reversed (last
    registered first), like any pluggy hook.
    """


@hookspec(firstresult=True)
def grader_doctor(write: Callable[[str], None], config: Config) -> int | None:
    """Say which isolation layers are active on this machine (``grader doctor``).

    First non-None result wins; the built-in sandbox plugin (``trylast``)
    starts its zygote, runs an empty job and a preflight, and writes one line
    per layer with ``write(line)``.

    Returns
    -------
    int
        The exit code: 0 when every layer is active, 1 otherwise.
    """


@hookspec
def grader_unconfigure(config: Config) -> None:
    """Release what `grader_configure` started. Always called, even after an error."""


# Names used by tests that check each hook is documented and exercised.
HOOK_NAMES = tuple(name for name in list(globals()) if name.startswith("grader_"))
