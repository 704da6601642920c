"""``grader check`` as a function, for tools that run in a student's folder (the pytest plugin).

`run_check` does what ``grader check FILE`` does (same plugins, same
options, the public checks shipped with the package outside this
repository) and returns the report instead of printing it.
`visible_checks` lists the checks it would run without running anything
of the submission's (pytest's collection).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grader.collected import COLLECTED
from grader.models import GradingReport

__all__ = ["CheckRun", "VisibleCheck", "run_check", "visible_checks"]


@dataclass(frozen=True)
class VisibleCheck:
    """A visible check as the pack defines it, before anything runs.

    Attributes
    ----------
    exercise, title : str
        The exercise's id (``"G14.03"``) and title.
    check : str
        The check's id.
    function : str
        The function it calls.
    max_score : float
        Its points.
    """

    exercise: str
    title: str
    check: str
    function: str
    max_score: float


@dataclass(frozen=True)
class CheckRun:
    """One ``grader check`` run.

    Attributes
    ----------
    report : grader.models.GradingReport
        The visible checks' results (one submission per student found).
    hidden_count : int
        Checks that run only at grading.
    functions : dict of (str, str) to str
        ``(exercise id, check id)`` to the function the check calls.
    """

    report: GradingReport
    hidden_count: int
    functions: dict[tuple[str, str], str]


def run_check(path: str, options: Sequence[str] = ()) -> CheckRun:
    """Run the visible checks on ``path`` (a submission file such as ``attention.py``, a notebook or a folder).

    Parameters
    ----------
    path : str
    options : sequence of str
        More ``grader check`` options, e.g. ``["--no-diagnosis"]``.

    Returns
    -------
    CheckRun

    Raises
    ------
    grader.errors.GraderError
        As ``grader check`` would report it (usage or configuration).
    """
    from grader.grading import session

    config = _config(path, options)
    try:
        config.hooks.configure(config)
        config.options.out = None
        report: Any = session.grade(config, [str(path)], visible_only=True)
        collected = config.stash.get(COLLECTED)
        hidden = collected.hidden_count if collected is not None else 0
    finally:
        config.hooks.unconfigure(config)
    functions = {(e.id, c.id): c.function for e in report.exercises for c in e.checks}
    return CheckRun(report, hidden, functions)


def _config(path: str, options: Sequence[str]) -> Any:
    from grader.config.parser import for_command, plugin_args

    return for_command("check", [str(path), *options], plugins=plugin_args(list(options)))


def visible_checks(path: str, options: Sequence[str] = ()) -> list[VisibleCheck]:
    """The visible checks ``grader check path`` runs, in order; nothing of the submission's is read or run.

    Parameters
    ----------
    path : str
        The submission (only named: it is not opened).
    options : sequence of str
        More ``grader check`` options.

    Returns
    -------
    list of VisibleCheck

    Raises
    ------
    grader.errors.GraderError
        As ``grader check`` would report it (usage or configuration).
    """
    from grader.grading import session

    config = _config(path, options)
    try:
        config.hooks.configure(config)
        collected = session.collect(config, visible_only=True)
    finally:
        config.hooks.unconfigure(config)
    return [
        VisibleCheck(exercise.id, exercise.title, item.check.id, item.check.function, float(item.check.points))
        for exercise, items in collected.checks
        for item in items
    ]
