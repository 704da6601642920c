"""GitHub Actions annotations and step summary (github), as a student's CI sees them."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from conftest import ROOT, SUBMISSIONS

from grader.builtin.github import MAX_PER_LEVEL, _md, escape_data, escape_property, step_summary, workflow_commands
from grader.models import CheckResult, ExerciseResult, GradingReport, SubmissionResult
from grader.reporting.feedback import HIDDEN_NOTE

COMMAND = re.compile(r"^::(error|warning|notice) (?P<props>[^:]*)::(?P<message>.*)$")


@pytest.fixture
def actions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Pretend to run in a GitHub Actions job; return the step summary file."""
    summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    return summary


def _unescape(text: str) -> str:
    return text.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def _commands(out: str) -> list[tuple[str, dict[str, str], str]]:
    found = []
    for line in out.splitlines():
        m = COMMAND.match(line)
        if m:
            props = dict(p.split("=", 1) for p in m.group("props").split(","))
            found.append((m.group(1), {k: _unescape(v) for k, v in props.items()}, _unescape(m.group("message"))))
    return found


def _def_line(path: Path, function: str) -> str:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.startswith(f"def {function}("):
            return str(number)
    raise AssertionError(function)


def test_check_annotates_each_failing_check_on_its_function(cli, actions: Path) -> None:
    file = SUBMISSIONS / "unnormalized_scores" / "attention.py"
    code, out, _ = cli("check", file.relative_to(ROOT))
    assert code == 1
    commands = _commands(out)
    assert commands and {level for level, _, _ in commands} == {"error"}
    by_title = {props["title"]: (props, message) for _, props, message in commands}
    props, message = by_title["G14.02 zero-scores: failed (0/2 points)"]
    assert props["file"] == "submissions/unnormalized_scores/attention.py"
    assert props["line"] == _def_line(file, "attention")
    assert message.splitlines() == [
        "outputs differs from the expected value by up to 5 (at outputs[0][0]); asked: within rtol=1e-06, "
        "atol=1e-09 (float64 code is accurate to about 1e-13 here; float16 or a wrong formula is not)",
        "call: attention(Q=[[0.0]], K=[[0.0], [0.0]], V=[[2.0], [8.0]]), and "
        "attention(Q=[[1.0]], K=[[2.0], [0.0]], V=[[2.0], [8.0]])",
        "expected: [[5.0]]",
        "got: [[0.0]]",
        "largest error: 5",
        "where: outputs[0][0]",
        "tolerance: rtol=1e-06, atol=1e-09",
        "Hint: Normalize the scores with softmax first, then mix the values with those weights; never put raw scores "
        'into the weighted sum. Reread "A numerical example before the general architecture".',
    ]
    # One annotation per check that did not pass, as many as the terminal summary's count.
    failed = int(re.search(r"^\d+ passed, (\d+) failed$", out, re.M).group(1))
    assert len(commands) == failed
    summary = actions.read_text()
    assert summary.startswith("## G14 checks: attention.py\n")
    assert f"passed, {failed} failed**" in summary
    assert "| G14.02 Softmax weights and mixed outputs |" in summary
    assert (
        "- **G14.02 zero-scores** (failed): outputs differs from the expected value by up to 5 (at outputs\\[0\\]\\[0\\])"
        in summary
    )
    assert "  - expected: <code>\\[\\[5.0\\]\\]</code>" in summary
    assert "hidden checks run at grading." in summary


def test_a_raising_check_points_at_the_line_that_raised(cli, actions: Path) -> None:
    code, out, _ = cli("check", SUBMISSIONS / "transposed_shapes" / "attention.py")
    assert code == 1
    props, message = next((p, m) for _, p, m in _commands(out) if p["title"].startswith("G14.01 shapes-3x2-5x2-5x4"))
    line = re.search(r"\(attention\.py, line (\d+)\)", message).group(1)
    assert props["line"] == line


def test_not_attempted_functions_get_one_notice_each(cli, actions: Path) -> None:
    file = SUBMISSIONS / "starter" / "attention.py"
    code, out, _ = cli("check", file)
    assert code == 1
    commands = _commands(out)
    assert {level for level, _, _ in commands} == {"notice"}
    functions = [props["title"].split(":")[0] for _, props, _ in commands]
    assert sorted(functions) == sorted(
        {"attention", "softmax", "softmax_backward", "score_array_bytes", "bytes_to_mib"}
    )
    for _, props, message in commands:
        function = props["title"].split(":")[0]
        assert props["line"] == _def_line(file, function)
        assert message.startswith(f"{function} still raises NotImplementedError: ")


def test_a_file_that_does_not_import_gets_one_error_on_its_line(cli, actions: Path) -> None:
    code, out, _ = cli("check", SUBMISSIONS / "syntax_error" / "attention.py")
    assert code == 1
    [(level, props, message)] = _commands(out)
    assert (level, props["line"]) == ("error", "20")
    assert message == "importing the file failed with SyntaxError (attention.py, line 20): expected ':'"
    assert "**The file could not be graded:** importing the file failed with SyntaxError" in actions.read_text()


def test_hidden_checks_in_grade_reveal_only_status_and_hint(cli, actions: Path, tmp_path: Path) -> None:
    code, out, _ = cli("grade", SUBMISSIONS / "no_sqrt_dk", "--out", tmp_path / "o", "-q")
    assert code == 0
    by_title = {props["title"]: message for _, props, message in _commands(out)}
    message = by_title["G14.01 unequal-counts-and-widths: failed (0/3 points)"]
    assert message.splitlines()[0] == HIDDEN_NOTE
    assert message.splitlines()[1].startswith("Hint: Write the inner dimensions")
    assert "differs" not in message and "call:" not in message
    summary = actions.read_text()
    assert summary.startswith("## G14 grades: 1 submission\n")
    assert re.search(r"^\| no\\_sqrt\\_dk \| 6 \| 8 \| 9 \| 10 \| 10 \| \d+ \| \d+ / \d+ \| graded \|$", summary, re.M)


def test_nothing_outside_github_actions(cli, tmp_path: Path) -> None:
    code, out, _ = cli("check", SUBMISSIONS / "unnormalized_scores" / "attention.py")
    assert code == 1
    assert not _commands(out) and "::" not in out


def test_escaping() -> None:
    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert escape_property("G14.02 x: a,b") == "G14.02 x%3A a%2Cb"
    assert _md("a|b *c* [l](http://x) <img src=x> `t` ~s~\nnext") == (
        "a\\|b \\*c\\* \\[l\\](http://x) &lt;img src=x&gt; \\`t\\` \\~s\\~ next"
    )


def test_at_most_ten_errors_per_step() -> None:
    checks = tuple(
        CheckResult(f"c{i}", "", "failed", 0.0, 1.0, "visible", f"wrong {i}", "hint", True) for i in range(15)
    )
    sub = SubmissionResult(
        "s", "nowhere/attention.py", "", "graded", 0.0, 15.0, (ExerciseResult("E1", "t", "s", 0.0, 15.0, checks),)
    )
    lines = workflow_commands(GradingReport("0", "h", "check", (sub,)))
    assert len(lines) == MAX_PER_LEVEL
    assert [_unescape(line.split("::")[2]).splitlines()[0] for line in lines] == [f"wrong {i}" for i in range(10)]


def _hostile_report(message: str, sid: str = "eve") -> GradingReport:
    check = CheckResult("c1", "", "error", 0.0, 1.0, "visible", message, "", True)
    ex = ExerciseResult("G14.02", "Softmax", "s", 0.0, 1.0, (check,))
    return GradingReport(
        "0", "h", "check", (SubmissionResult(sid, "/nowhere/attention.py", "", "graded", 0.0, 1.0, (ex,)),)
    )


def test_student_text_cannot_forge_a_workflow_command() -> None:
    message = "attention raised ValueError: boom\n::error::forged 100%0A\r::add-mask::x\x1b[31m"
    [line] = workflow_commands(_hostile_report(message, sid="eve,file=x::y"))
    # The message: % -> %25, CR -> %0D, LF -> %0A, exactly as GitHub documents; ESC sequences gone.
    assert line == (
        "::error file=/nowhere/attention.py,title=G14.02 c1%3A error (0/1 points)::"
        "attention raised ValueError: boom%0A::error::forged 100%250A%0A::add-mask::x"
    )
    assert line.count("\n") == 0 and "\r" not in line and "\x1b" not in line
    [line] = workflow_commands(
        GradingReport(
            "0",
            "h",
            "check",
            (
                SubmissionResult(
                    "eve,x:y\n::e", "/n/attention.py", "", "error", 0.0, 1.0, (), error="bad\n::error::forged"
                ),
            ),
        )
    )
    assert (
        line
        == "::error file=/n/attention.py,title=eve%2Cx%3Ay %3A%3Ae%3A the file could not be graded::bad%0A::error::forged"
    )


def test_step_summary_escapes_student_html_markdown_and_table_cells() -> None:
    report = _hostile_report("x")
    sub = dataclasses.replace(report.submissions[0], id="<script>alert(1)</script>|`x`\n| forged | row |")
    text = step_summary(dataclasses.replace(report, submissions=(sub,)), "grade")
    row = text.splitlines()[4]
    assert row == ("| &lt;script&gt;alert(1)&lt;/script&gt;\\|\\`x\\` \\| forged \\| row \\| |  | 0 / 1 | graded |")
    assert "<script>" not in text and len(text.splitlines()) == 6
