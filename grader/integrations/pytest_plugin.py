"""The visible checks as pytest tests, in a student's folder (entry point ``pytest11``: ``grader``).

Run ``pytest`` in the folder holding your submission file (the installed
course pack's, e.g. ``attention.py``, or its notebook): it collects one test
per visible check, named by exercise and check id (e.g.
``attention.py::G14.03::causal-two-positions``), so ``-k G14.03`` selects an
exercise. A check that does not pass fails with
the text ``grader check`` prints for it, wrapped to pytest's terminal
width; a function that still raises ``NotImplementedError`` fails its
checks too, reported as "not attempted". So pytest exits non-zero
whenever the visible points of the checks that ran are below their
maximum, and 0 only at full points. Points of the checks that ran (all, or
those ``-k`` selected) are in the terminal summary and, with
``--junitxml``, as the properties ``points``, ``max_points``, ``exercise``
and ``check`` of each test case. Hidden checks run only at grading
(``grader grade``), never here.

Collection reads the pack's visible checks only: nothing of the
submission's is read or run (``--collect-only`` runs nothing). The
submission is graded once, as ``grader check`` grades it (in a child
process, `grader.integrations.student.run_check`), when the first selected check runs.

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
from typing import Any

import pytest

_RUN = pytest.StashKey[Any]()
"""The `grader.integrations.student.CheckRun` of the session (or the `grader.errors.GraderError` it raised)."""
_RAN = pytest.StashKey[dict[tuple[str, str], Any]]()
"""(exercise id, check id) -> the check's result, for each check that ran in this session."""
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
    """The student's file: one collector per exercise, from the pack's checks (the file is not read here)."""

    def collect(self) -> Any:
        from grader.errors import GraderError
        from grader.integrations.student import visible_checks

        try:
            checks = visible_checks(str(self.path))
        except GraderError as exc:
            raise self.CollectError(f"grader: error: {exc}") from None
        exercises: dict[str, list[Any]] = {}
        for check in checks:
            exercises.setdefault(check.exercise, []).append(check)
        for exercise, its in exercises.items():
            yield ExerciseNode.from_parent(self, name=exercise, checks=its)


class ExerciseNode(pytest.Collector):
    """One exercise of the visible checks (e.g. ``G14.03``): its items are the exercise's checks."""

    def __init__(self, *, checks: list[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.checks = checks

    def collect(self) -> Any:
        for check in self.checks:
            yield CheckItem.from_parent(self, name=check.check, check=check)


def _graded(item: pytest.Item) -> Any:
    """The session's `grader.integrations.student.CheckRun`, graded on first use (or the error it raised)."""
    if _RUN not in item.config.stash:
        from grader.errors import GraderError
        from grader.integrations.student import run_check

        try:
            item.config.stash[_RUN] = run_check(str(item.path))
        except GraderError as exc:
            item.config.stash[_RUN] = exc
    return item.config.stash[_RUN]


class CheckItem(pytest.Item):
    """One visible check as a test: it fails with the same message as ``grader check``; points as properties."""

    def __init__(self, *, check: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.user_properties += [
            ("exercise", check.exercise),
            ("check", check.check),
        ]

    def runtest(self) -> None:
        from grader.reporting.checktext import MARKS, failure_lines, wrapped
        from grader.safetext import display

        columns = max(40, self.config.get_terminal_writer().fullwidth - 1)  # as wide as the terminal: wraps twice

        def fail(text: str) -> CheckFailed:
            return CheckFailed(wrapped(text, first="", rest="    ", columns=columns))

        run = _graded(self)
        if not hasattr(run, "report"):
            raise fail(f"grader: error: {run}")
        sub = run.report.submissions[0]
        key = (self.check.exercise, self.check.check)
        found = [c for e in sub.exercises if e.id == key[0] for c in e.checks if c.id == key[1]]
        if not found:
            raise fail(f"{key[1]}: not graded ({sub.path}: {sub.error})")
        c = found[0]
        self.config.stash.setdefault(_RAN, {})[key] = c
        self.user_properties += [("points", f"{c.score:g}"), ("max_points", f"{c.max_score:g}")]
        if c.status == "passed" and c.score >= c.max_score:
            return
        if sub.status == "error":
            raise fail(f"{sub.path}: {sub.error}")
        mark = f"{MARKS.get(c.status, c.status.upper())} {display(c.id)}"
        if c.status == "not_attempted":
            function = run.functions.get(key, self.check.function)
            raise fail(f"{mark}: not attempted: {function} still raises NotImplementedError (0/{c.max_score:g} points)")
        raise CheckFailed("\n".join([mark, *failure_lines(c, columns=columns)]))

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.check.exercise} {self.check.check} ({self.check.max_score:g} points)"


def _points(config: Any) -> tuple[float, float]:
    ran = config.stash.get(_RAN, {})
    return sum(c.score for c in ran.values()), sum(c.max_score for c in ran.values())


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Below full visible points, the session fails (exit status 1), whatever else was said."""
    if session.config.stash.get(_RAN, None) is None:
        return
    score, most = _points(session.config)
    if score < most and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """Points per exercise and in total, for the checks that ran (``-k`` selects some)."""
    run = config.stash.get(_RUN, None)
    ran = config.stash.get(_RAN, None)
    if run is None or ran is None or not hasattr(run, "report"):
        return
    from grader.reporting.checktext import wrapped

    columns = max(40, config.get_terminal_writer().fullwidth - 1)

    def write(text: str) -> None:
        terminalreporter.write_line(wrapped(text, first="", rest="    ", columns=columns))

    names(config)
    terminalreporter.section(f"{config.stash[_TITLE]} visible checks".strip())
    sub = run.report.submissions[0]
    for ex in sub.exercises:
        mine = [c for c in ex.checks if (ex.id, c.id) in ran]
        if not mine:
            continue
        score, most = sum(c.score for c in mine), sum(c.max_score for c in mine)
        part = "" if len(mine) == len(ex.checks) else f" ({len(mine)} of its {len(ex.checks)} checks ran)"
        write(f"{ex.id} {ex.title}: {score:g}/{most:g} points{part}")
    score, most = _points(config)
    total = sum(len(ex.checks) for ex in sub.exercises)
    part = "" if len(ran) == total else f" ({len(ran)} of {total} visible checks ran)"
    write(
        f"visible checks: {score:g}/{most:g} points{part}; {run.hidden_count} hidden checks run at grading "
        "(the grade comes from 'grader grade', not from this run)"
    )
