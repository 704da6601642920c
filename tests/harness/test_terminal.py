"""What the grader prints on the terminal (terminal, safetext.display): student text stays inert."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace
from typing import Any

import pytest

from grader.builtin.terminal import Progress, grader_terminal_summary
from grader.models import CheckResult, Exercise, ExerciseResult, GradingReport, SubmissionResult
from grader.packs import find_pack
from grader.safetext import display

HOSTILE_ID = "eve\x1b]0;pwn\x07\x1b[2J\r\n::error::forged\u202egnp.exe\x9b31m"


def _config(command: str, **options: Any) -> Any:
    return SimpleNamespace(
        command=command,
        option=lambda name, default=None: options.get(name, default),
        stash={},
        out_dir=None,
        pack=find_pack(),
    )


def _sub(sid: str, message: str = "", status: str = "graded") -> SubmissionResult:
    check = CheckResult(
        "c1", "", "error", 0.0, 1.0, "visible", message, "Reread the section.", True, (("exception", message),)
    )
    ex = ExerciseResult("G14.02", "Softmax", "s", 0.0, 1.0, (check,))
    return SubmissionResult(
        sid, f"/class/{sid}", "", status, 0.0, 1.0, (ex,), error=message if status == "error" else ""
    )


def test_display_removes_escape_sequences_controls_and_bidi() -> None:
    assert display("a\x1b]0;pwn\x07b\x1b[2Jc") == "abc"
    assert display("x\x1b]52;c;ZXZpbA==\x1b\\y") == "xy"  # OSC 52 (clipboard) ended by ST
    assert display("r\rs\nt\r\nu") == "r s t u"
    assert display("r\rs\nt", newlines=True) == "r\ns\nt"
    assert display("\u202egnp.exe\u2066x\u2069") == "gnp.exex"
    assert display("\x9b31mred\x85\x00\x7f\ud800") == "red \ufffd"
    assert display("tab\there") == "tab here"
    # An unterminated OSC ends at the line's end: it cannot swallow the next line.
    assert display("a\x1b]0;pwn\nnext", newlines=True) == "a\nnext" and display("a\x1b]0;pwn\nb") == "a b"


def test_display_keeps_printable_ascii_as_it_is_and_agrees_with_its_long_way_on_every_ascii_character() -> None:
    """`display`'s shortcut for printable ASCII (the text returned as it is) gives what the long way gives, and
    every other ASCII character still takes the long way."""
    from grader.safetext import _display

    printable = "".join(chr(c) for c in range(0x20, 0x7F))
    assert display(printable) == printable == _display(printable, False) == _display(printable, True)
    for c in range(0x80):
        text = f"a{chr(c)}b"
        assert display(text) == _display(text, False) and display(text, newlines=True) == _display(text, True)
    assert (
        display("a\x7fb") == "ab" and display("a\tb") == "a b" and display("a\x1bb") == "a"
    )  # ESC and the character after it


def test_progress_lines_hold_no_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    progress = Progress(2, stream=stream)
    progress.update(_sub(HOSTILE_ID))
    progress.update(_sub("bob\x1b[31m", "boom\x1b]0;x\x07\nline two", status="error"))
    out = stream.getvalue()
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\u202e" not in out and "\x9b" not in out
    lines = out.splitlines()
    assert lines[0] == "[1/2] eve ::error::forgedgnp.exe: 0/1"
    assert lines[1].startswith("[2/2] bob: 0/1  error: boom line two")
    assert len(lines) == 2


def test_score_table_and_check_output_hold_no_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    report = GradingReport("0", "h", "grade", (_sub(HOSTILE_ID), _sub("x" * 300)))
    lines: list[str] = []
    grader_terminal_summary(report, _config("grade"), lines.append)
    text = "\n".join(lines)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text and "\r" not in text
    assert lines[0] == "G14: Attention, embeddings and transformer reasoning"  # the pack's chapter and title
    assert lines[1].startswith("course: ")  # the course folder found
    assert lines[3].startswith("eve ::error::forgedgnp.exe ")
    assert lines[4].startswith("x" * 59 + "…  ")  # long ids cut to ID_WIDTH
    lines.clear()
    message = "attention raised ValueError: \x1b[2J\x1b]0;pwn\x07cleared\r\n::warning::x"
    grader_terminal_summary(GradingReport("0", "h", "check", (_sub("me", message),)), _config("check"), lines.append)
    text = "\n".join(lines)
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert "          attention raised ValueError: cleared ::warning::x" in lines
    assert not any(line.lstrip().startswith("::") for line in lines)


def test_in_github_actions_the_summary_sits_between_stop_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    report = GradingReport("0", "h", "grade", (_sub("::error::forged"),))
    lines: list[str] = []
    grader_terminal_summary(report, _config("grade"), lines.append)
    m = re.fullmatch(r"::stop-commands::([0-9a-f]{32})", lines[0])
    assert m, lines[0]
    assert lines[-1] == f"::{m.group(1)}::"
    assert any(line.startswith("::error::forged") for line in lines[1:-1])  # inert: commands are stopped
    again: list[str] = []
    grader_terminal_summary(report, _config("grade"), again.append)
    assert again[0] != lines[0]  # a fresh, unpredictable token each time


def test_progress_bar_on_a_terminal_writes_no_student_escape() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    progress = Progress(2, stream=stream)
    assert progress.bar is not None  # the tqdm path
    progress.update(_sub(HOSTILE_ID))
    progress.update(_sub("bob\x1b]0;pwn\x07", "boom\x1b]8;;http://x\x07link\x1b]8;;\x07", status="error"))
    progress.close()
    out = stream.getvalue()
    assert "\x1b]" not in out and "\x07" not in out and "pwn" not in out and "\u202e" not in out
    assert "[2/2] bob: 0/1  error: boomlink" in out


def test_xml_text_removes_exactly_what_xml_cannot_hold() -> None:
    from grader.safetext import xml_text

    def xml_char(c: int) -> bool:  # XML 1.0, production [2] Char
        return c in (0x9, 0xA, 0xD) or 0x20 <= c <= 0xD7FF or 0xE000 <= c <= 0xFFFD or 0x10000 <= c <= 0x10FFFF

    every = "".join(map(chr, range(0x110000)))
    kept = xml_text(every)
    assert kept == "".join(ch for ch in every if xml_char(ord(ch)))
    assert len(every) - len(kept) == 2079  # 29 C0 controls, 2,048 surrogates, U+FFFE, U+FFFF


def _six(sid: str, status: str = "graded") -> SubmissionResult:
    exercises = tuple(ExerciseResult(f"G14.0{k}", "t", "s", 14.0, 14.0, ()) for k in range(1, 7))
    return SubmissionResult(sid, f"/class/{sid}", "", status, 84.0, 84.0, exercises, error="x" * (status == "error"))


def _table(columns: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("COLUMNS", str(columns))
    specs = tuple(Exercise(f"G14.0{k}", "t", "s", "p", ()) for k in range(1, 7))
    report = GradingReport("0", "h", "grade", (_six("unnormalized_scores"), _six("broken", "error")), specs)
    lines: list[str] = []
    grader_terminal_summary(report, _config("grade"), lines.append)
    return lines[2:5] + lines[5:6]


def test_the_score_table_fits_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # 100 columns (off a terminal too): as it always was, a column of 10 characters per exercise.
    wide = _table(100, monkeypatch)
    assert wide[0] == "submission           " + "".join(f"G14.0{k}    " for k in range(1, 7)) + "total"
    assert wide[2] == "broken               " + "14/14     " * 6 + "84/84  (error)"
    # 80: tighter columns (the widest text and one space), every line within 80 characters.
    narrow = _table(80, monkeypatch)
    assert narrow[0] == "submission           " + "".join(f"G14.0{k} " for k in range(1, 7)) + "total"
    assert narrow[1] == "unnormalized_scores  " + "14/14  " * 6 + "84/84"
    assert max(map(len, narrow)) <= 80 < max(map(len, wide))
    # 60: no exercise column fits; the totals, and where the rest is.
    least = _table(60, monkeypatch)
    assert least[:3] == [
        "submission           total",
        "unnormalized_scores  84/84",
        "broken               84/84  (error)",
    ]
    assert least[3] == "(too narrow for each exercise's score: see the reports)"
