"""The visible checks as pytest tests, in a student's folder (entry point ``pytest11``: ``grader``).

Run ``pytest`` in the folder holding your submission file (the installed
course pack's, e.g. ``attention.py``, or its notebook): it collects one test
per visible check, named by exercise and check id (e.g.
``attention.py::G14.03::causal-two-positions``), so ``-k G14.03`` selects an
exercise. A check that does not pass fails with
the text ``grader check`` prints for it; a function that still raises
``NotImplementedError`` skips its checks ("not attempted"). Points are in
the terminal summary and, with ``--junitxml``, as the properties
``points``, ``max_points``, ``exercise`` and ``check`` of each test case.
Hidden checks run only at grading (``grader grade``), never here.

When it is on
-------------
The ini option ``grader_checks`` decides (``pytest.ini``, ``tox.ini``,
``setup.cfg`` or ``pyproject.toml``'s ``[tool.pytest.ini_options]``):

``auto`` (default)
    on when the root folder (pytest's ``rootdir``) holds the pack's
    submission file or notebook and is not the grader's own repository or
    a pack's folder (no ``grader/cli.py`` and no ``course.yaml`` there),
    so the grader's own test suite is never disturbed;
``true``
    on wherever the submission file sits in the root folder;
``false``
    off. ``-p no:grader`` turns the plugin off too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

_RUN = pytest.StashKey[Any]()
_NAMES = pytest.StashKey[tuple[str, ...]]()
_TITLE = pytest.StashKey[str]()


def names(config: Any) -> tuple[str, ...]:
    """The installed course pack's submission file and notebook names; ``()`` without exactly one pack."""
    if _NAMES not in config.stash:
        from grader.errors import GraderError
        from grader.packs import find_pack

        try:
            pack = find_pack()
        except GraderError:
            config.stash[_NAMES], config.stash[_TITLE] = (), ""
        else:
            config.stash[_NAMES], config.stash[_TITLE] = pack.names, pack.chapter
    names: tuple[str, ...] = config.stash[_NAMES]
    return names


def pytest_addoption(parser: Any) -> None:
    """Add the ``grader_checks`` ini option (``auto``, ``true`` or ``false``; see `active`)."""
    parser.addini(
        "grader_checks", "run the course pack's visible checks as tests: auto (default), true or false", default="auto"
    )


def active(config: Any) -> bool:
    """Whether the plugin collects the checks in this session (see the module docstring)."""
    value = str(config.getini("grader_checks") or "auto").strip().lower()
    if value in ("false", "0", "no", "off"):
        return False
    root = Path(config.rootpath)
    if not any((root / name).is_file() for name in names(config)):
        return False
    if value in ("true", "1", "yes", "on"):
        return True
    return not (root / "grader" / "cli.py").is_file() and not (root / "course.yaml").is_file()


def pytest_collect_file(file_path: Path, parent: Any) -> Any:
    """Collect a student's submission file (or notebook) in pytest's root folder as an `ExerciseNode` per exercise.

    Returns None for any other file, or when the plugin is not `active`.
    """
    config = parent.config
    if file_path.name not in names(config) or Path(file_path).parent != Path(config.rootpath) or not active(config):
        return None
    source, notebook = names(config)
    if file_path.name == notebook and (file_path.parent / source).is_file():
        return None  # the .py is the submission when both are there
    return SubmissionFile.from_parent(parent, path=file_path)


class CheckFailed(Exception):
    """A visible check that did not pass; its text is what ``grader check`` prints."""


class SubmissionFile(pytest.File):
    """The student's file: graded once, one collector per exercise."""

    def collect(self) -> Any:
        from grader.errors import GraderError
        from grader.student import run_check

        try:
            run = run_check(str(self.path))
        except GraderError as exc:
            raise self.CollectError(f"grader: error: {exc}") from None
        self.config.stash[_RUN] = run
        sub = run.report.submissions[0]
        for ex in sub.exercises:
            yield ExerciseNode.from_parent(self, name=ex.id, result=ex, submission=sub, run=run)


class ExerciseNode(pytest.Collector):
    """One exercise of the visible checks (e.g. ``G14.03``): its items are the exercise's checks."""

    def __init__(self, *, result: Any, submission: Any, run: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.result, self.submission, self.run = result, submission, run

    def collect(self) -> Any:
        for c in self.result.checks:
            yield CheckItem.from_parent(self, name=c.id, check=c)


class CheckItem(pytest.Item):
    """One visible check as a test: it fails with the same message as ``grader check``; points as properties."""

    @property
    def exercise(self) -> ExerciseNode:
        """The exercise node this check was collected under."""
        return cast("ExerciseNode", self.parent)

    def __init__(self, *, check: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        ex = self.exercise.result
        self.user_properties += [
            ("exercise", ex.id),
            ("check", check.id),
            ("points", f"{check.score:g}"),
            ("max_points", f"{check.max_score:g}"),
        ]

    def runtest(self) -> None:
        from grader.safetext import display

        c = self.check
        if c.status == "passed":
            return
        sub = self.exercise.submission
        if sub.status == "error":
            raise CheckFailed(f"{display(sub.path)}: {display(sub.error)}")
        if c.status == "not_attempted":
            function = self.exercise.run.functions.get((self.exercise.result.id, c.id), "the function")
            pytest.skip(f"not attempted: {display(function)} still raises NotImplementedError")
        from grader.checktext import MARKS, failure_lines

        raise CheckFailed("\n".join([f"{MARKS.get(c.status, c.status.upper())} {display(c.id)}", *failure_lines(c)]))

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.exercise.result.id} {self.check.id} ({self.check.max_score:g} points)"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """Points per exercise and in total, for the checks that ran."""
    run = config.stash.get(_RUN, None)
    if run is None:
        return
    from grader.safetext import display

    names(config)
    terminalreporter.section(f"{config.stash[_TITLE]} visible checks".strip())
    sub = run.report.submissions[0]
    for ex in sub.exercises:
        terminalreporter.write_line(f"{display(ex.id)} {display(ex.title)}: {ex.score:g}/{ex.max_score:g} points")
    terminalreporter.write_line(
        f"visible checks: {sub.score:g}/{sub.max_score:g} points; {run.hidden_count} hidden checks run at grading "
        "(the grade comes from 'grader grade', not from this run)"
    )
