"""What a student sees from ``grader check``: short, each number once, coloured, wrapped, per student."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from grader.builtin import terminal
from grader.builtin.terminal import colourize, grader_terminal_summary, use_colour
from grader.cli import main
from grader.models import (
    Check,
    CheckResult,
    Exercise,
    ExerciseResult,
    GradingReport,
    SubmissionResult,
)

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "submissions"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _config(**options: Any) -> Any:
    return SimpleNamespace(
        command="check", option=lambda name, default=None: options.get(name, default), stash={}, out_dir=None
    )


def _failing(sid: str, stdout: str = "") -> SubmissionResult:
    check = CheckResult(
        "random",
        "",
        "failed",
        0.0,
        1.0,
        "visible",
        "outputs differs from the expected value by up to 0.5 (at outputs[0][0])",
        "Reread the section.",
        True,
        (
            ("call", "attention(Q=[[1.0]])"),
            ("expected", "[[1.5]]"),
            ("got", "[[1.0]]"),
            ("largest error", "0.5"),
            ("where", "outputs[0][0]"),
            ("tolerance", "rtol=1e-06, atol=1e-09"),
        ),
    )
    ex = ExerciseResult("G14.02", "Softmax", "s", 0.0, 1.0, (check,))
    return SubmissionResult(sid, f"/class/{sid}", "", "graded", 0.0, 1.0, (ex,), stdout=stdout)


def _report(*subs: SubmissionResult) -> GradingReport:
    check = Check("random", "compare", "attention", 1.0, "visible", "h", 2.0)
    return GradingReport("0", "h", "check", subs, (Exercise("G14.02", "Softmax", "s", "x.yaml", (check,)),))


def test_a_failure_states_each_number_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    lines: list[str] = []
    grader_terminal_summary(_report(_failing("me")), _config(), lines.append)
    text = "\n".join(lines)
    assert text.count("0.5") == 1 and text.count("outputs[0][0]") == 1  # not again as 'largest error', 'where'
    assert "          expected: [[1.5]]" in lines and "          got: [[1.0]]" in lines
    assert "          tolerance: rtol=1e-06, atol=1e-09" in lines
    assert "largest error" not in text and "where:" not in text


def test_a_folder_gets_a_header_per_student_and_their_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    lines: list[str] = []
    printed = "step 1\x1b[2J\n" + "".join(f"line {i}\n" for i in range(20))
    grader_terminal_summary(_report(_failing("alice", printed), _failing("bob")), _config(), lines.append)
    assert lines[0] == "== alice (/class/alice) =="
    assert "== bob (/class/bob) ==" in lines
    at = lines.index("your prints (what the file printed while the visible checks ran):")
    assert lines[at + 1] == "  | step 1"  # inert: the escape sequence is gone
    assert lines[at + 12] == "  | line 10" and lines[at + 13] == "  | ... and 9 more lines"
    assert sum(1 for line in lines if line.startswith("your prints")) == 1  # bob printed nothing


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert use_colour(Tty()) is True and use_colour(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_colour(Tty()) is False
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert use_colour(Tty()) is False
    assert colourize("  FAIL    random") == "  \x1b[31mFAIL\x1b[0m    random"
    assert colourize("  PASS    x") == "  \x1b[32mPASS\x1b[0m    x" and colourize("  TODO    y").startswith(
        "  \x1b[33mTODO"
    )
    assert colourize("== PASSING (x) ==") == "== PASSING (x) =="  # only a mark that starts the line


def test_colour_reaches_the_terminal_and_student_text_stays_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(terminal.sys, "stdout", Tty())
    lines: list[str] = []
    grader_terminal_summary(_report(_failing("FAIL\x1b[32m", "PASS\x1b]0;x\x07")), _config(), lines.append)
    text = "\n".join(lines)
    assert "  \x1b[31mFAIL\x1b[0m    random" in lines
    assert text.count("\x1b[") == 2  # the mark's colour and its reset, nothing from the student


def test_text_wraps_to_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("COLUMNS", "50")
    assert terminal.width() == 50
    sub = _failing("me")
    long = CheckResult("c", "", "failed", 0.0, 1.0, "visible", "word " * 40, "hint " * 40, True, ())
    sub = SubmissionResult("me", "/me", "", "graded", 0.0, 1.0, (ExerciseResult("G14.02", "S", "s", 0, 1, (long,)),))
    lines: list[str] = []
    grader_terminal_summary(_report(sub), _config(), lines.append)
    shown = "\n".join(lines).split("\n")  # a wrapped paragraph is written at once
    assert max(len(line) for line in shown) <= 50 and len(shown) > 10
    monkeypatch.setenv("COLUMNS", "300")
    assert terminal.width() == 100


def test_check_on_a_folder_of_students(cli, tmp_path: Path) -> None:  # noqa: ANN001
    for name, source in (("alice", SUBMISSIONS / "correct_numpy"), ("bob", ROOT / "exercises" / "starter")):
        (tmp_path / name).mkdir()
        shutil.copy(source / "attention.py", tmp_path / name / "attention.py")
    code, out, err = cli("check", tmp_path)
    assert code == 1, err
    lines = out.splitlines()
    assert lines[0] == f"== alice ({tmp_path / 'alice'}) =="
    assert f"== bob ({tmp_path / 'bob'}) ==" in lines
    assert lines.count("visible checks: 35/35 points; 36 hidden checks run at grading") == 1
    assert lines.count("0 passed, 0 failed, 23 not attempted") == 1


INSTRUCTOR = (
    "--roster",
    "--gradebook",
    "--regrade",
    "--csv",
    "--gradescope",
    "--jobs",
    "--out",
    "--json",
    "--after-due-date",
    "--published",
    "--secret-file",
    "--roster-ignore-case",
)


@pytest.mark.parametrize(
    "command", ["check", "publish", "doctor", "audit", "validate", "init-ci", "build-student-package", "starter"]
)
def test_each_command_lists_only_the_options_it_uses(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    shown = {opt for opt in INSTRUCTOR if f" {opt}" in text}
    allowed = {
        "audit": {"--secret-file"},
        "validate": {"--secret-file"},
        "publish": {"--out"},
        "build-student-package": {"--out", "--secret-file"},
    }.get(command, set())
    assert shown <= allowed, shown
    if command == "check":
        assert "--public FILE" in text and "--junit FILE" in text and "--no-diagnosis" in text
    if command == "doctor":
        assert "--specs" not in text and "--insecure" in text


def test_an_option_a_command_does_not_use_is_refused(cli) -> None:  # noqa: ANN001
    code, _, err = cli("check", "exercises/starter/attention.py", "--roster", "r.csv")
    assert code == 2 and err.strip() == "grader: error: unrecognized arguments: --roster r.csv (see 'grader --help')"
    code, _, err = cli("check", "exercises/starter/attention.py", "-j", "2")
    assert code == 2 and "unrecognized arguments: -j 2" in err


@pytest.mark.slow
def test_one_mistake_reads_in_one_80_column_screen(cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # noqa: ANN001
    """Issue 24: mask after softmax, one mistake: at most 40 lines of 80 columns, its diagnosis once per exercise,
    no call cut; its HTML page has one diagnosis box per failing exercise and one check shown whole in each."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = cli("check", root / "reference" / "mutants" / "mask_after_softmax" / "attention.py")
    lines = out.splitlines()
    assert code == 1 and len(lines) <= 40 and max(map(len, lines)) <= 80, out
    assert sum("likely mistake" in line for line in lines) == 2 and "hint:" not in out
    calls = [i for i, line in enumerate(lines) if line.strip().startswith("call:")]
    assert len(calls) == 2 and "…" not in out  # the example of each failing exercise, whole
    assert lines[calls[0] + 1].strip() == "V=[[2.0], [8.0], [4.0]], causal=True)"
    code, _, err = cli("grade", root / "reference" / "mutants" / "mask_after_softmax", "--out", tmp_path, "-q")
    assert code == 0, err
    page = (tmp_path / "mask_after_softmax.html").read_text()
    for exercise, failing in (("G14.03", 6), ("G14.06", 7)):
        section = page[page.index(f'<section class="exercise" id="{exercise}">') :]
        section = section[: section.index("</section>")]
        assert section.count('<p class="diagnosis">') == 1
        assert f"Likely mistake (all {failing} failing checks fail as it does)" in section
        assert section.count('<div class="check">') == 1 and section.count('<div class="check brief">') == failing - 1
    assert page.count('<p class="hint">') == 0
