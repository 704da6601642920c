"""The command line: usage errors are one line, exit codes are documented."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SUBMISSIONS
from spec_totals import G14

from grader.config.secret import WARNING as SECRET_WARNING


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["grade"], "the following arguments are required: PATH"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["grade", "submissions", "--jobs", "x"], "argument -j/--jobs: invalid number: 'x'"),
        (["grade", "submissions", "--jobs", "0"], "argument -j/--jobs: must be at least 1, got 0"),
        (["grade", "submissions", "--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["check", "a.py", "b.py"], "unrecognized arguments: b.py"),
        (["grade", "no/such/place"], "no/such/place: no such file or folder"),
        (["grade", "README.md"], "README.md: not a Python file"),
        (
            ["grade", "submissions", "--import-timeout", "soon"],
            "argument --import-timeout: invalid number of seconds: 'soon'",
        ),
        (
            ["grade", "submissions", "--import-timeout", "-1"],
            "argument --import-timeout: must be more than 0 seconds, got -1",
        ),
        (
            ["grade", "submissions", "--submission-timeout", "0"],
            "argument --submission-timeout: must be more than 0 seconds, got 0",
        ),
        # Found before grading, not after: root may "access" /proc and /sys but create nothing there.
        (
            ["grade", "submissions", "--json", "/proc/x.json"],
            "argument --json: /proc/x.json is under /proc, a kernel file system; give another file name",
        ),
        (
            ["grade", "submissions", "--junit", "/sys/x.xml"],
            "argument --junit: /sys/x.xml is under /sys, a kernel file system",
        ),
    ],
)
def test_usage_errors_are_one_line_exit_2(cli, args, phrase) -> None:
    code, out, err = cli(*args)
    assert code == 2
    line = _one_line(err)
    assert line.startswith("grader: error: ")
    assert phrase in line


@pytest.mark.parametrize("plugin", ["sandbox", "runner", "grader.builtin.sandbox"])
def test_the_sandbox_and_the_runner_cannot_be_blocked(cli, tmp_path: Path, plugin: str) -> None:
    """Only --insecure grades without the sandbox: -p no:sandbox is refused before anything runs."""
    code, out, err = cli("grade", "-p", f"no:{plugin}", SUBMISSIONS / "correct_numpy", "--out", tmp_path / "out")
    assert code == 2 and out == ""
    short = plugin.removeprefix("grader.builtin.")
    assert _one_line(err) == (
        f"grader: error: -p no:{plugin}: the {short} cannot be blocked; use --insecure to grade without the sandbox"
    )
    assert not (tmp_path / "out").exists()


def test_empty_folder_is_a_usage_error(cli, tmp_path: Path) -> None:
    code, out, err = cli("grade", tmp_path)
    assert code == 2
    assert f"{tmp_path}: holds no attention.py, no student folders and no .py files" in _one_line(err)


def test_unwritable_out_is_a_usage_error_and_writes_nothing(cli, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, out, err = cli("grade", SUBMISSIONS / "correct_numpy", "--out", blocker)
    assert code == 2
    assert f"--out {blocker}: exists and is not a folder" in _one_line(err)
    code, out, err = cli("grade", SUBMISSIONS / "correct_numpy", "--out", blocker / "sub")
    assert code == 2
    assert "cannot create the folder" in _one_line(err)
    assert blocker.read_text() == "not a folder"


def test_missing_reference_and_specs_are_config_errors(cli, tmp_path: Path) -> None:
    code, out, err = cli("validate", "--reference", tmp_path / "nope.py")
    assert code == 3
    assert f"{tmp_path / 'nope.py'}: reference not found; pass --reference PATH" in _one_line(err)
    code, out, err = cli("grade", SUBMISSIONS / "correct_numpy", "--specs", tmp_path / "nospecs", "--out", tmp_path)
    assert code == 3
    assert "specs folder not found" in _one_line(err)


def test_check_on_a_correct_file(cli) -> None:
    code, out, err = cli("check", SUBMISSIONS / "correct_lists" / "attention.py")
    assert code == 0
    lines = out.splitlines()
    assert "23 passed, 0 failed" in lines
    assert lines[-1] == "visible checks: 35/35 points; 36 hidden checks run at grading"
    assert "G14.02 Softmax weights and mixed outputs: 6/6  PASS all 4" in lines
    assert len(lines) == 8  # one line per exercise that passes whole, then the totals


def test_check_shows_call_expected_got_and_hint(cli) -> None:
    code, out, err = cli("check", SUBMISSIONS / "unnormalized_scores" / "attention.py")
    assert code == 1
    assert "  FAIL    zero-scores: outputs differs" in out
    text = " ".join(out.split())
    # one likely mistake per exercise, said in full once, then referred to
    assert "likely mistake (all 3 failing checks fail as it does): The outputs mix the value rows" in text
    assert "likely mistake (all 2 failing checks fail as it does): the same as G14.02's." in text
    assert "zero-scores: outputs differs from the expected value by up to 5 (at outputs[0][0])" in text
    # the example of G14.02 (its shortest call), whole
    assert "call: attention(Q=[[1.0]], K=[[1.098612289], [0.0]], V=[[2.0], [8.0]])" in text
    assert "expected: [[3.5]] got: [[2.197224577]]" in text
    assert "hint:" not in text  # every failing check is explained by the likely mistake
    assert "16 passed, 7 failed" in text
    assert (
        "causal-noninterference: changing only the last key and value changed outputs[0]: an earlier position" in text
    )


def test_check_runs_no_hidden_check(cli) -> None:
    code, out, err = cli("check", SUBMISSIONS / "correct_numpy" / "attention.py")
    for hidden_id in ("unequal-counts-and-widths", "random-softmax", "finite-difference", "rejects-ragged"):
        assert hidden_id not in out


def test_check_on_starter_says_not_attempted(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "80")  # an 80x24 terminal
    code, out, err = cli("check", "exercises/starter/attention.py")
    assert code == 1
    lines = out.splitlines()
    # One line per function not written yet, not one per check (with its hint): the starter fits a screen.
    assert lines[6:11] == [
        "  TODO    attention: 13 checks not attempted (G14.01 G14.02 G14.03 G14.06)",
        "  TODO    softmax: 6 checks not attempted (G14.02 G14.03 G14.06)",
        "  TODO    softmax_backward: 2 checks not attempted (G14.04)",
        "  TODO    score_array_bytes: 1 check not attempted (G14.05)",
        "  TODO    bytes_to_mib: 1 check not attempted (G14.05)",
    ]
    assert lines[0] == "G14.01 Shapes of scores, weights and outputs: 0/6"
    assert "zero-scores" not in out and "hint:" not in out
    assert lines[-2:] == [
        f"0 passed, 0 failed, {G14.visible_checks} not attempted",
        f"visible checks: 0/{G14.visible_points:g} points; {G14.hidden_checks} hidden checks run at grading",
    ]
    assert len(lines) == 14 and max(map(len, lines)) <= 80


def test_check_on_syntax_error(cli) -> None:
    code, out, err = cli("check", "submissions/syntax_error/attention.py")
    assert code == 1
    assert (
        "ERROR submissions/syntax_error/attention.py: importing the file failed with SyntaxError (attention.py, line 20)"
        in out
    )
    assert "Traceback" not in out + err


def test_validate(cli) -> None:
    code, out, err = cli("validate")
    assert code == 0
    assert out.splitlines() == [
        f"specs: 6 exercises, {G14.checks} checks; 13 hand values agree with the reference",
        f"reference scores {G14.points:g}/{G14.points:g}: valid",
    ]


def test_python_dash_m_and_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "grader", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0
    assert proc.stdout.strip() == "grader 0.1.0"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "grader: error: the following arguments are required: PATH (see 'grader grade --help')"
    )


def test_grade_prints_a_table_and_progress(cli, tmp_path: Path) -> None:
    code, out, err = cli(
        "grade", SUBMISSIONS / "correct_numpy", SUBMISSIONS / "mib_decimal", "--out", tmp_path, "--jobs", "1"
    )
    assert code == 0
    # Tests grade without a course secret: 'grade' says so first, in one line.
    assert err.splitlines()[0] == f"grader: warning: {SECRET_WARNING}"
    progress = [line.split("  (")[0] for line in err.splitlines()[1:]]  # the rate and ETA vary
    assert progress == [
        f"[1/2] correct_numpy: {G14.points:g}/{G14.points:g}",
        f"[2/2] mib_decimal: {G14.points - 5:g}/{G14.points:g}",
    ]
    assert re.fullmatch(
        rf"\[2/2\] mib_decimal: {G14.points - 5:g}/{G14.points:g}(  \(\d+\.\d/s, ETA 0 s\))?", err.splitlines()[2]
    )
    assert out.splitlines()[-3:] == [
        "graded 2 submissions (0 could not run)",
        f"reports: {tmp_path / 'index.html'}",
        f"gradebook: {tmp_path / 'gradebook.sqlite'}",
    ]


def test_one_file_path_and_student_id(cli, tmp_path: Path) -> None:
    alice = tmp_path / "class" / "alice"
    alice.mkdir(parents=True)
    (alice / "attention.py").write_bytes((SUBMISSIONS / "correct_lists" / "attention.py").read_bytes())
    (tmp_path / "class" / "bob").mkdir()
    (tmp_path / "class" / "carol.py").write_bytes((SUBMISSIONS / "mib_decimal" / "attention.py").read_bytes())
    code, out, err = cli("grade", tmp_path / "class", "--out", tmp_path / "out", "-q")
    assert code == 0
    assert out.splitlines()[0] == "G14: Attention, embeddings and transformer reasoning"  # the pack's names
    assert out.splitlines()[1].startswith("course: ")  # the course folder found, as pytest prints its rootdir
    rows = [line.split()[0] for line in out.splitlines()[3:6]]
    assert rows == ["alice", "bob", "carol"]
    assert "bob" in out and "(error)" in out.splitlines()[4]


def test_output_files_are_checked_before_grading(cli, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for option in ("--json", "--csv", "--junit", "--gradescope", "--gradebook"):
        code, out, err = cli("grade", SUBMISSIONS / "correct_numpy", "--out", tmp_path / "o", option, blocker / "x")
        assert code == 2, option
        assert _one_line(err) == (
            f"grader: error: argument {option}: {blocker / 'x'}: {blocker} is a file, not a folder "
            "(see 'grader grade --help')"
        )
        code, out, err = cli("grade", SUBMISSIONS / "correct_numpy", "--out", tmp_path / "o", option, tmp_path)
        assert code == 2 and f"argument {option}: {tmp_path} is a folder; give a file name" in err
    assert not (tmp_path / "o" / "results.json").exists()


def test_gradescope_file_with_two_submissions_is_refused_before_grading(cli, tmp_path: Path) -> None:
    code, out, err = cli(
        "grade",
        SUBMISSIONS / "correct_numpy",
        SUBMISSIONS / "mib_decimal",
        "--out",
        tmp_path / "o",
        "--gradescope",
        tmp_path / "results.json",
    )
    assert code == 2
    assert _one_line(err) == (
        f"grader: error: --gradescope {tmp_path / 'results.json'}: Gradescope grades one submission per run, "
        "and this run has more than one (2 found so far); use DIR/gradescope/<id>.json instead"
    )
    assert not (tmp_path / "o" / "gradebook.sqlite").exists()


def test_a_reader_that_goes_away_stops_the_summary_not_the_grading(tmp_path: Path) -> None:
    """``grader grade ... | head -1``: no traceback, and the reports are still written."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "grade", SUBMISSIONS / "correct_numpy", "--out", tmp_path / "o", "-q"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    os.close(write_end)
    assert proc.returncode == 0 and proc.stderr == f"grader: warning: {SECRET_WARNING}\n"  # no secret in tests
    assert (tmp_path / "o" / "results.json").is_file()


def test_the_collector_is_paused_for_start_up_only(tmp_path: Path) -> None:
    """`grader.cli.launch` pauses the garbage collector while the grader imports; grading runs with it on."""
    (tmp_path / "gc_probe.py").write_text(
        "import gc, json, os\n"
        "import grader\n\n"
        "@grader.hookimpl\n"
        "def grader_configure(config):\n"
        "    os.environ['PROBE_CONFIGURE'] = json.dumps(gc.isenabled())\n\n"
        "@grader.hookimpl\n"
        "def grader_submission_graded(result, config):\n"
        "    seen = {'configure': json.loads(os.environ['PROBE_CONFIGURE']),\n"
        "            'grading': gc.isenabled(), 'frozen': gc.get_freeze_count()}\n"
        "    with open(os.environ['PROBE_OUT'], 'w') as f:\n"
        "        json.dump(seen, f)\n"
    )
    out = tmp_path / "probe.json"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PROBE_OUT": str(out)}
    argv = [sys.executable, "-m", "grader", "grade", str(SUBMISSIONS / "correct_lists"), "-p", "gc_probe"]
    proc = subprocess.run([*argv, "--out", str(tmp_path / "o"), "-q"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(out.read_text())
    assert seen["configure"] is False  # paused while the plugins and the pack were loaded
    assert seen["grading"] is True
    assert seen["frozen"] > 50_000  # numpy's, pluggy's and the grader's objects, moved out of its passes


def test_check_without_a_file_checks_this_folder(tmp_path: Path) -> None:
    (tmp_path / "attention.py").write_bytes((SUBMISSIONS / "no_sqrt_dk" / "attention.py").read_bytes())
    env = {**os.environ, "GRADER_COURSE": str(ROOT)}
    command = [sys.executable, "-m", "grader", "check"]
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 1, run.stderr  # not every visible check passes
    assert "visible checks: 33/35 points" in run.stdout
    (tmp_path / "attention.py").unlink()
    empty = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert empty.returncode == 2
    assert empty.stderr.strip().endswith(": holds no attention.py, no student folders and no .py files; it is empty")
