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
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pluggy

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
        """Let every writer write its files (all called)."""
        self._pm.hook.grader_write_reports(report=report, config=config)

    def terminal_summary(self, report: GradingReport, config: Config, write: Callable[[str], None]) -> None:
        """Let every plugin print its summary lines (all called)."""
        self._pm.hook.grader_terminal_summary(report=report, config=config, write=write)

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
