"""``grader check`` as a function, for tools that run in a student's folder (the pytest plugin).

`run_check` does what ``grader check FILE`` does (same plugins, same
options, the public checks shipped with the package outside this
repository) and returns the report instead of printing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grader.models import GradingReport
from grader.stash import COLLECTED

__all__ = ["CheckRun", "run_check"]


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
    from grader import session
    from grader.cli import _plugin_args, build_parser
    from grader.config import Config
    from grader.plugins import get_plugin_manager

    argv = ["check", str(path), *options]
    pm = get_plugin_manager(_plugin_args(argv))
    parsed = build_parser(pm).parse_args(argv)
    config = Config(command="check", options=parsed, pluginmanager=pm)
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
