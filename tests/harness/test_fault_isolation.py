"""One submission's fault never costs another its grade, nor the batch its files (issue 9, item 1).

A plugin (`FaultPlugin`) raises at one stage for the submission ``victim``
only: running its calls (where the runner decodes what the job sent),
judging a check (where diagnosis runs too), scoring an exercise, or writing
its files. The batch beside it holds an honest classmate, ``sibling``. Each
test asserts that the victim is graded ``error`` with a one-line reason
naming the stage and an internal-error id, that the sibling keeps full
marks, and that every class-level file is written.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import SUBMISSIONS

from grader.cli import main
from grader.grading.session import internal_error_id
from grader.markers import hookimpl
from grader.models import CallResult, RunOutcome, Verdict

CLASS_FILES = (
    "index.html",
    "summary.html",
    "results.json",
    "gradebook.csv",
    "junit.xml",
    "gradescope",
    "gradebook.sqlite",
    "sibling.html",
    "victim.html",
)
POISON = "poison: raise here"


class FaultPlugin:
    """Raises at ``stage`` for the submission ``victim``; leaves every other submission alone."""

    def __init__(self, stage: str) -> None:
        self.stage = stage

    @hookimpl(tryfirst=True)
    def grader_run_calls(self, submission: Any, calls: Any, config: Any) -> RunOutcome | None:
        if submission.id != "victim":
            return None
        if self.stage == "running":
            raise ValueError("a fault while decoding the job's frames")
        # Poisoned, well-formed results: the fault comes later, at the chosen stage.
        value = [[0.0]]
        return RunOutcome(tuple(CallResult("returned", value=value, message=POISON) for _ in calls), sha256="")

    @hookimpl(tryfirst=True)
    def grader_judge_check(self, check: Any, prepared: Any, results: Any, kind: Any, context: Any) -> Verdict | None:
        if not results or results[0].message != POISON:
            return None
        if self.stage == "judging":
            raise KeyError("a fault while judging")
        return Verdict("failed", POISON)

    @hookimpl(tryfirst=True)
    def grader_score_exercise(self, exercise: Any, verdicts: Any, config: Any) -> Any:
        if self.stage == "scoring" and any(v.message == POISON for _, v in verdicts):
            raise ZeroDivisionError("a fault while scoring")
        return None

    @hookimpl(tryfirst=True)
    def grader_submission_graded(self, result: Any, config: Any) -> None:
        if self.stage == "writing" and result.id == "victim" and result.status != "error":
            raise OSError(36, "File name too long")


def _class(tmp_path: Path) -> Path:
    folder = tmp_path / "class"
    for name in ("sibling", "victim"):
        (folder / name).mkdir(parents=True)
        shutil.copy(SUBMISSIONS / "correct_numpy" / "attention.py", folder / name / "attention.py")
    # The victim's file differs by a comment, so the gradebook cannot answer for it.
    with open(folder / "victim" / "attention.py", "a") as fh:
        fh.write("\n# victim\n")
    return folder


@pytest.mark.parametrize(
    ("stage", "words"),
    [
        ("running", "running its calls"),
        ("judging", "judging its checks"),
        ("scoring", "scoring it"),
        ("writing", "writing its files"),
    ],
)
def test_a_fault_at_any_stage_is_that_submissions_error(
    stage: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import grader.config.plugins

    plugin = FaultPlugin(stage)
    real = grader.config.plugins.get_plugin_manager

    def with_fault(*args: Any, **kwargs: Any) -> Any:
        pm = real(*args, **kwargs)
        pm.register(plugin, name="fault")
        return pm

    monkeypatch.setattr("grader.cli.app.get_plugin_manager", with_fault)
    out = tmp_path / "out"
    code = main(["grade", str(_class(tmp_path)), "--out", str(out), "--insecure", "-q", "--jobs", "2"])
    err = capsys.readouterr().err
    assert code == 4, err
    for name in CLASS_FILES:
        assert (out / name).exists(), name
    results = {s["id"]: s for s in json.loads((out / "results.json").read_text())["submissions"]}
    assert results["sibling"]["status"] == "graded"
    assert results["sibling"]["score"] == results["sibling"]["max_score"] == 86.0
    victim = results["victim"]
    assert victim["status"] == "error" and victim["score"] == 0.0 and victim["max_score"] == 86.0
    assert f"the grader failed while {words} (internal error " in victim["error"]
    assert "\n" not in victim["error"]
    # The exception's message is not in the result (it may hold student text); its type is.
    assert "a fault while" not in victim["error"] and "File name too long" not in victim["error"]
    # The log names the submission, the stage and the id, then the traceback.
    fault_id = victim["error"].split("internal error ")[1][:8]
    assert f"grader: internal error {fault_id} while {words} for submission 'victim'" in err
    assert "Traceback (most recent call last)" in err
    assert f"grader: internal error on 1 submission(s): 'victim' ({fault_id})" in err
    # The victim's page and Gradescope file say so too; the gradebook keeps no internal-error result.
    assert fault_id in (out / "victim.html").read_text()
    assert json.loads((out / "gradescope" / "victim.json").read_text())["score"] == 0.0
    rows = {row["student"]: row for row in csv.DictReader((out / "gradebook.csv").open())}
    assert (rows["sibling"]["total"], rows["sibling"]["status"]) == ("86", "graded")
    assert (rows["victim"]["total"], rows["victim"]["status"]) == ("0", "error")


def test_a_failing_report_writer_does_not_stop_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import grader.config.plugins

    class BrokenWriter:
        @hookimpl
        def grader_write_reports(self, report: Any, config: Any) -> None:
            raise RuntimeError("a writer bug")

    real = grader.config.plugins.get_plugin_manager

    def with_broken(*args: Any, **kwargs: Any) -> Any:
        pm = real(*args, **kwargs)
        pm.register(BrokenWriter(), name="broken_writer")
        return pm

    monkeypatch.setattr("grader.cli.app.get_plugin_manager", with_broken)
    out = tmp_path / "out"
    code = main(["grade", str(_class(tmp_path)), "--out", str(out), "--insecure", "-q"])
    err = capsys.readouterr().err
    assert code == 4
    for name in CLASS_FILES:
        assert (out / name).exists(), name
    assert "1 report writer(s) failed: broken_writer (" in err
    results = json.loads((out / "results.json").read_text())["submissions"]
    assert [s["score"] for s in results] == [86.0, 86.0]


@pytest.mark.parametrize("hook", ["write_reports", "terminal_summary", None])
def test_a_plugin_that_raises_costs_only_its_own_output(hook: str | None, tmp_path: Path, cli, monkeypatch) -> None:  # noqa: ANN001
    """The typed facade calls each writer and each summary on its own (grader.config.core.Hooks.call_each)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "plugin_examples"))
    out = tmp_path / "out"
    args = ["grade", str(_class(tmp_path)), "--out", str(out), "--insecure", "-p", "raising_plugin"]
    code, stdout, err = cli(*args, *(["--raise-in", hook] if hook else []))
    for name in CLASS_FILES:
        assert (out / name).exists(), name
    results = json.loads((out / "results.json").read_text())["submissions"]
    assert [(s["id"], s["score"]) for s in results] == [("sibling", 86.0), ("victim", 86.0)]
    faults = [line for line in err.splitlines() if line.startswith("grader: internal error ")]
    if hook is None:  # the control: the plugin's own file and line, nothing on stderr, exit 0
        assert (code, faults) == (0, [])
        assert (out / "raising-plugin.txt").read_text() == "2 submission(s)\n"
        assert "raising plugin: its own summary line" in stdout and "reports: " in stdout
        return
    # One line names the plugin, the hook and the fault's id; the traceback follows, each line behind "|".
    assert code == 4, err
    assert len(faults) == 1 and re.fullmatch(
        rf"grader: internal error [0-9a-f]{{8}} in the raising_plugin plugin's grader_{hook}", faults[0]
    ), faults
    assert "  | Traceback (most recent call last):" in err
    if hook == "write_reports":
        assert not (out / "raising-plugin.txt").exists()
        fault = faults[0].split()[3]
        assert f"\ngrader: error: 1 report writer(s) failed: raising_plugin ({fault}); every other file was" in err
    else:  # every other plugin's summary printed, the raising plugin's own line too (written before it raised)
        assert (out / "raising-plugin.txt").exists()
        assert "raising plugin: its own summary line" in stdout and "reports: " in stdout


def test_internal_error_ids_are_stable_and_ignore_the_message() -> None:
    def fail(message: str) -> BaseException:
        try:
            raise ValueError(message)
        except ValueError as exc:
            return exc

    first, second = fail("alice's text"), fail("bob's text")
    assert internal_error_id(first) == internal_error_id(second)
    assert len(internal_error_id(first)) == 8 and int(internal_error_id(first), 16) >= 0


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_an_output_option_never_replaces_a_special_file_or_a_link(kind: str, tmp_path: Path, cli) -> None:
    """Writing through a rename would replace a device, a FIFO or a link (as root, even /dev/null)."""
    import os

    target = tmp_path / "results.xml"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(tmp_path / "elsewhere.xml")
    code, _, err = cli("check", SUBMISSIONS / "correct_numpy" / "attention.py", "--junit", target, "-q")
    what = "a FIFO" if kind == "fifo" else "a symbolic link"
    assert code == 2
    assert err.strip().startswith(
        f"grader: error: argument --junit: {target} is {what}, which the grader would "
        "replace; give a regular file's path"
    )
    assert target.is_symlink() if kind == "symlink" else target.is_fifo()


def test_the_output_folder_inside_the_class_folder_is_no_student(tmp_path: Path, cli) -> None:
    folder = _class(tmp_path)
    for _ in range(2):
        code, _, err = cli("grade", folder, "--out", folder / "reports", "--insecure", "-q")
        assert code == 0, err
    ids = [s["id"] for s in json.loads((folder / "reports" / "results.json").read_text())["submissions"]]
    assert ids == ["sibling", "victim"]


def test_canvas_push_settings_are_checked_before_grading(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CANVAS_API_TOKEN", raising=False)
    out = tmp_path / "out"
    for url, line in (
        (
            "http://x",
            "grader: error: --canvas-push http://x: not an assignment's address; give "
            "https://HOST/courses/COURSE/assignments/ASSIGNMENT",
        ),
        (
            "https://canvas.example/courses/1/assignments/2",
            "grader: error: --canvas-push: set CANVAS_API_TOKEN to a Canvas access token",
        ),
    ):
        code, _, err = cli("grade", SUBMISSIONS / "correct_numpy", "--out", out, "--canvas-push", url)
        assert (code, err.strip()) == (3, line)
        assert not out.exists()


def test_writers_get_equal_results_as_one_object_so_their_kept_parts_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Results built anew per student (a syntax error's) reach the writers shared (`_shared_hand_over`): the
    second student's exercise results are the first's very object, which the writers' parts kept per
    distinct result go by; a writer's fault still hands over, and keeps, the error result in its place."""
    import types

    from grader.grading import session
    from grader.models import CheckResult, ExerciseResult, SubmissionResult
    from grader.stash import Stash

    def made(sid: str) -> SubmissionResult:  # equal content, new objects each time
        checks = tuple(
            CheckResult(f"c{i}", "", "error", 0.0, 1.0, "visible", "SyntaxError", "", True) for i in range(3)
        )
        return SubmissionResult(
            sid, f"{sid}.py", "", "error", 0.0, 3.0, (ExerciseResult("E1", "T", "s", 0.0, 3.0, checks),)
        )

    seen: list[SubmissionResult] = []
    failed = made("zed")
    monkeypatch.setattr(session, "_hand_over", lambda r, *_: seen.append(r) or (failed if r.id == "c" else r))
    config = types.SimpleNamespace(stash=Stash())
    kept = [session._shared_hand_over(made(sid), None, None, config) for sid in ("a", "b", "c")]  # type: ignore[arg-type]
    assert [r.id for r in seen] == ["a", "b", "c"]
    assert seen[1].exercises is seen[0].exercises and seen[2].exercises is seen[0].exercises
    assert kept[0] is seen[0] and kept[1] is seen[1]
    assert kept[2].id == "zed" and kept[2].exercises is seen[0].exercises  # the writer's fault: its result, shared
