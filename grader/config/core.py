"""The run's configuration (`Config`) and its typed facade over the hook calls (`Hooks`).

`Config` is what every hook receives: the options, the run's own plugin manager and its stash.
`Hooks` has one method per hook of `grader.hookspecs`.

pluggy's relay (``pm.hook.grader_run_calls(...)``) is untyped: a misspelt keyword or a wrong
argument only shows when it runs, and every result is ``Any``. The core calls hooks through this
class instead, in the way tox 4 does (``tox.plugin.manager``): each method has the hook's own
signature and result type, so mypy checks every call the core makes. Plugins still *implement*
hooks as plain functions marked ``@grader.hookimpl``; nothing changes for them.

Each method's docstring says how results combine; the hook's full contract is its spec in
`grader.hookspecs`. ``tests/harness/test_hooks.py`` checks that every spec has its method here, with the
same parameters.

Fault isolation lives here too: the hooks whose implementations each make their own output (the
report writers, the terminal summaries) call every implementation on its own (`Hooks.call_each`),
so a plugin that raises costs only its own files or lines. Its fault is named in one line on
standard error (the plugin, the hook and an internal-error id, its traceback below) and the run
still exits 4, the code of a bug (`grader.errors.EXIT_INTERNAL`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pluggy

from grader.errors import GraderError, WriterError, internal_error_id, log_internal_error
from grader.stash import Stash

if TYPE_CHECKING:
    from grader.collected import Collected
    from grader.config.commands import Commands
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

__all__ = ["Config", "Hooks"]


class Hooks:
    """The hooks of one run's plugin manager, as typed methods.

    Parameters
    ----------
    pluginmanager : pluggy.PluginManager
        The run's manager (`grader.config.plugins.get_plugin_manager`).
    """

    __slots__ = ("_pm",)

    def __init__(self, pluginmanager: pluggy.PluginManager) -> None:
        self._pm = pluginmanager

    def implementations(self, name: str) -> list[pluggy.HookImpl]:
        """The implementations of hook ``name``, in registration order (pluggy calls them reversed)."""
        return list(getattr(self._pm.hook, name).get_hookimpls())

    def call(self, name: str, **kwargs: Any) -> Any:
        """Call hook ``name`` as pluggy does (for callers that handle each hook alike)."""
        return getattr(self._pm.hook, name)(**kwargs)

    def call_each(self, name: str, /, errors: list[GraderError] | None = None, **kwargs: Any) -> list[tuple[str, str]]:
        """Call every implementation of hook ``name`` (one that returns nothing) on its own, in pluggy's order.

        pluggy stops at the first implementation that raises; here one implementation's exception
        is logged as an internal error (one line naming the plugin and the hook, then the
        traceback) and the others still run. A hook with a wrapper is called as a whole instead,
        so wrappers keep their meaning (a fault is then the hook's, not a plugin's).

        Parameters
        ----------
        name : str
            The hook, ``grader_write_reports`` say.
        errors : list of grader.errors.GraderError, optional
            Collects each implementation's one-line error (a refused ``--out``, a refused Canvas
            push), so the others still run; without it the first is raised at once.
        **kwargs
            The hook's arguments.

        Returns
        -------
        list of (str, str)
            (plugin name, internal-error id) of each implementation that raised.

        Raises
        ------
        grader.errors.GraderError
            An implementation's one-line error, when ``errors`` is None.
        """
        impls = self.implementations(name)
        failed: list[tuple[str, str]] = []
        if any(impl.hookwrapper or impl.wrapper for impl in impls):
            try:
                self.call(name, **kwargs)
            except GraderError as exc:
                if errors is None:
                    raise
                errors.append(exc)
            except Exception as exc:  # noqa: BLE001 - one plugin's bug costs its own output only
                fault = internal_error_id(exc)
                log_internal_error(f"internal error {fault} in {name}", exc)
                failed.append((name, fault))
            return failed
        for impl in reversed(impls):  # pluggy's own order: last registered first
            try:
                impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
            except GraderError as exc:
                if errors is None:
                    raise
                errors.append(exc)  # one line, the caller's to report once every implementation ran
            except Exception as exc:  # noqa: BLE001 - one plugin's bug costs its own output only
                fault = internal_error_id(exc)
                log_internal_error(f"internal error {fault} in the {impl.plugin_name} plugin's {name}", exc)
                failed.append((impl.plugin_name, fault))
        return failed

    # --- 1. set-up ---------------------------------------------------------

    def add_commands(self, commands: Commands) -> None:
        """Let every plugin register its subcommands (all called; `grader.config.parser.commands_of`
        calls the implementations one by one, to name the plugin of a clash)."""
        self._pm.hook.grader_add_commands(commands=commands)

    def addoption(self, parser: argparse.ArgumentParser, command: str) -> None:
        """Let every plugin add the options of subcommand ``command`` (all called)."""
        self._pm.hook.grader_addoption(parser=parser, command=command)

    def configure(self, config: Config) -> None:
        """Prepare every plugin for the run (all called)."""
        self._pm.hook.grader_configure(config=config)

    # --- 2. collection -----------------------------------------------------

    def load_exercise(self, path: str, config: Config) -> Exercise | None:
        """The exercise in file ``path``, or None when no plugin reads it (first result)."""
        return cast("Exercise | None", self._pm.hook.grader_load_exercise(path=path, config=config))

    def load_reference(self, path: str, config: Config) -> Mapping[str, Callable[..., Any]] | None:
        """The reference functions by name (first result)."""
        return cast(
            "Mapping[str, Callable[..., Any]] | None", self._pm.hook.grader_load_reference(path=path, config=config)
        )

    def check_kinds(self) -> list[Sequence[CheckKind]]:
        """Every plugin's check kinds (all collected)."""
        return cast("list[Sequence[CheckKind]]", self._pm.hook.grader_check_kinds())

    def float64_error(self, function: str, args: Sequence[Any], parts: dict[str, Any]) -> dict[str, Any] | None:
        """What correct float64 code may be off by on one call, per element of each part (first result)."""
        return cast(
            "dict[str, Any] | None", self._pm.hook.grader_float64_error(function=function, args=args, parts=parts)
        )

    def locate_submissions(self, path: str, config: Config) -> Sequence[Submission] | None:
        """The submissions behind one command-line PATH (first result)."""
        return cast("Sequence[Submission] | None", self._pm.hook.grader_locate_submissions(path=path, config=config))

    # --- 3. grading --------------------------------------------------------

    def collection_finish(self, submissions: Sequence[Submission], collected: Collected, config: Config) -> None:
        """Tell every plugin the batch and the prepared checks (all called)."""
        self._pm.hook.grader_collection_finish(submissions=submissions, collected=collected, config=config)

    def grading_ready(self, config: Config) -> None:
        """Let every plugin finish what it readies in the background, or stop the run (all called)."""
        self._pm.hook.grader_grading_ready(config=config)

    def batch_start(self, submissions: Sequence[Submission], calls: Sequence[Call], config: Config) -> None:
        """Tell every plugin the submissions about to be run and their calls (all called)."""
        self._pm.hook.grader_batch_start(submissions=submissions, calls=calls, config=config)

    def run_calls(self, submission: Submission, calls: Sequence[Call], config: Config) -> RunOutcome | None:
        """Run a submission's calls away from the grader's process (first result)."""
        return cast(
            "RunOutcome | None", self._pm.hook.grader_run_calls(submission=submission, calls=calls, config=config)
        )

    def known_outcome(self, submission: Submission, calls: Sequence[Call], config: Config) -> RunOutcome | None:
        """An outcome of ``calls`` that already exists (a Dask cluster's, a shard's), or None (first result)."""
        return cast(
            "RunOutcome | None", self._pm.hook.grader_known_outcome(submission=submission, calls=calls, config=config)
        )

    def judge_check(
        self,
        check: Check,
        prepared: Prepared,
        results: Sequence[CallResult],
        kind: CheckKind,
        context: KindContext,
        config: Config,
    ) -> Verdict | None:
        """Decide one check from its call results (first result)."""
        return cast(
            "Verdict | None",
            self._pm.hook.grader_judge_check(
                check=check, prepared=prepared, results=results, kind=kind, context=context, config=config
            ),
        )

    def mistake_table(
        self, collected: Collected, catalogue: Any, outcomes: Mapping[str, RunOutcome] | None, config: Config
    ) -> Any | None:
        """The catalogued mistakes failing each check of ``collected`` (first result)."""
        return self._pm.hook.grader_mistake_table(
            collected=collected, catalogue=catalogue, outcomes=outcomes, config=config
        )

    def score_exercise(
        self, exercise: Exercise, verdicts: Sequence[tuple[Check, Verdict]], config: Config
    ) -> ExerciseResult | None:
        """An exercise's score from its verdicts (first result)."""
        return cast(
            "ExerciseResult | None",
            self._pm.hook.grader_score_exercise(exercise=exercise, verdicts=verdicts, config=config),
        )

    def cached_result(self, submission: Submission, key: str, config: Config) -> SubmissionResult | None:
        """A stored result for ``key`` (first result)."""
        return cast(
            "SubmissionResult | None", self._pm.hook.grader_cached_result(submission=submission, key=key, config=config)
        )

    def adjust_result(self, result: SubmissionResult, submission: Submission, config: Config) -> list[SubmissionResult]:
        """Every plugin's adjusted result (all collected; `grader.grading.session.adjust_result` chains them)."""
        return cast(
            "list[SubmissionResult]",
            self._pm.hook.grader_adjust_result(result=result, submission=submission, config=config),
        )

    def submission_time(self, submission: Submission, config: Config) -> list[Sequence[tuple[str, str]]]:
        """(source, ISO time) pairs from every plugin that knows when ``submission`` was submitted."""
        return cast(
            "list[Sequence[tuple[str, str]]]",
            self._pm.hook.grader_submission_time(submission=submission, config=config),
        )

    def submission_graded(self, result: SubmissionResult, config: Config) -> None:
        """Hand one result to every plugin (all called)."""
        self._pm.hook.grader_submission_graded(result=result, config=config)

    # --- 4. reporting ------------------------------------------------------

    def write_reports(self, report: GradingReport, config: Config) -> None:
        """Let every writer write its files (all called, each on its own: `call_each`).

        Raises
        ------
        grader.errors.GraderError
            The first writer's one-line error (exit 2 or 3), once every other writer wrote its files.
        grader.errors.WriterError
            When a writer raised anything else (exit 4): it names each such plugin and its
            internal-error id; every other writer's files were written.
        """
        errors: list[GraderError] = []
        failed = self.call_each("grader_write_reports", errors=errors, report=report, config=config)
        if errors:  # a writer's one-line error (a refused Canvas push): the other writers' files are written
            raise errors[0]
        if failed:
            names = ", ".join(f"{plugin} ({fault})" for plugin, fault in failed)
            raise WriterError(
                f"{len(failed)} report writer(s) failed: {names}; every other file was written "
                f"(the traceback of each is above)"
            )

    def report_links(self, config: Config, page: str) -> list[tuple[str, str]]:
        """Every plugin's (label, file name) links for class page ``page`` (all collected, in one list)."""
        answers = cast("list[Sequence[tuple[str, str]]]", self._pm.hook.grader_report_links(config=config, page=page))
        return [(label, name) for links in answers for label, name in links]

    def call_seconds(self, submission_id: str, config: Config) -> Sequence[float] | None:
        """The seconds of each call of one submission, in ``Collected.calls`` order (first result)."""
        return cast(
            "Sequence[float] | None", self._pm.hook.grader_call_seconds(submission_id=submission_id, config=config)
        )

    def terminal_summary(
        self, report: GradingReport, config: Config, write: Callable[[str], None]
    ) -> list[tuple[str, str]]:
        """Let every plugin print its summary lines (all called, each on its own: `call_each`).

        Returns
        -------
        list of (str, str)
            (plugin name, internal-error id) of each plugin that raised, already logged; the
            caller exits 4 when there is one. The other plugins' lines were printed.

        Raises
        ------
        grader.errors.GraderError
            The first plugin's one-line error, once every other plugin printed its lines.
        """
        errors: list[GraderError] = []
        failed = self.call_each("grader_terminal_summary", errors=errors, report=report, config=config, write=write)
        if errors:
            raise errors[0]
        return failed

    def doctor(self, write: Callable[[str], None], config: Config) -> int | None:
        """Print which isolation layers are active here; the exit code (first result)."""
        return cast("int | None", self._pm.hook.grader_doctor(write=write, config=config))

    def unconfigure(self, config: Config) -> None:
        """Release what ``configure`` started (all called)."""
        self._pm.hook.grader_unconfigure(config=config)


@dataclass
class Config:
    """Options and shared state of one grader run.

    Attributes
    ----------
    command : str
        ``"grade"``, ``"check"`` or ``"validate"``.
    options : argparse.Namespace
        Parsed command-line options, including those added by plugins.
    pluginmanager : pluggy.PluginManager
        The run's own plugin manager (a fresh one per run).
    stash : grader.stash.Stash
        Per-run state of plugins, under typed keys (`grader.stash.StashKey`).
    """

    command: str
    options: argparse.Namespace
    pluginmanager: pluggy.PluginManager
    stash: Stash = field(default_factory=Stash)
    _pack: Any = field(default=None, repr=False, compare=False)

    @property
    def pack(self) -> Any:
        """The course pack this run grades (`grader.packs.Pack`): ``--pack``, else the one installed.

        Raises
        ------
        grader.errors.ConfigError
            If there is none, or several and ``--pack`` chose none.
        """
        if self._pack is None:
            from grader.packs import find_pack

            self._pack = find_pack(self.option("pack"))
        return self._pack

    @property
    def hook(self) -> Any:
        """The plugin manager's hook relay (``config.hook.grader_...``), untyped; the core uses `hooks`."""
        return self.pluginmanager.hook

    @property
    def hooks(self) -> Hooks:
        """The hooks as typed methods (`grader.config.core.Hooks`): ``config.hooks.run_calls(...)``."""
        return Hooks(self.pluginmanager)

    @property
    def out_dir(self) -> Path | None:
        """Folder for report files, or None when the command writes none."""
        out = getattr(self.options, "out", None)
        return Path(out) if out else None

    def option(self, name: str, default: Any = None) -> Any:
        """Return option ``name``, or ``default`` when the command lacks it."""
        return getattr(self.options, name, default)
