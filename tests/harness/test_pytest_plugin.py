"""The pytest plugin, run in-process with ``pytester``: in a student's folder, one test per visible check.

A check that does not pass is a failure ("not attempted" included), so pytest exits non-zero below
full visible points; ``-k`` reports the selected checks' points only; failure text fits the terminal;
collection runs nothing of the student's; the plugin never runs in this repository.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy  # noqa: F401  (imported once here: pytester drops what a run imported, and numpy cannot load twice)
import pytest
from junitparser import JUnitXml
from spec_totals import G14

from grader.integrations.pytest_plugin import active

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "exercises" / "starter" / "attention.py"
REFERENCE = ROOT / "reference" / "attention.py"
TOTAL = f"{G14.hidden_checks} hidden checks run at grading (the grade comes from 'grader grade', not from this run)"


@pytest.fixture(scope="module", autouse=True)
def _imported_once() -> None:
    """Import what grading imports before pytester's first run: it drops the modules a run imported, and
    numpy, libyaml's loader or a plugin's classes imported twice in one process are not the same."""
    import grader.cli  # noqa: F401
    import grader.execution.jobs  # noqa: F401
    import grader.reporting.checktext  # noqa: F401
    from grader.integrations.student import visible_checks

    visible_checks(str(REFERENCE))


def _student(pytester: pytest.Pytester, source: str | Path) -> Path:
    text = source.read_text() if isinstance(source, Path) else source
    path = pytester.path / "attention.py"
    path.write_text(text)
    return path


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str, columns: int = 80) -> Any:
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("NO_COLOR", "1")
    # CI (or BUILD_NUMBER) makes pytest print its short summary lines whole, whatever the width: a student's
    # terminal is what is measured here.
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS", "CI", "BUILD_NUMBER"):
        monkeypatch.delenv(name, raising=False)
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def _summary(result: Any) -> str:
    """The plugin's terminal section, its wrapped lines joined back."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if " G14 visible checks " in line) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("====="))
    return re.sub(r"\n    ", " ", "".join(line + "\n" for line in lines[start:end] if line))


def test_one_test_per_visible_check_with_the_check_message_and_points(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    cli,  # noqa: ANN001
) -> None:
    path = _student(pytester, ROOT / "reference" / "mutants" / "no_sqrt_dk" / "attention.py")
    result = _run(pytester, monkeypatch, "--junitxml", "junit.xml", columns=100)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=2, passed=21)
    result.stdout.fnmatch_lines(["FAILED attention.py::G14.02::scaled-scores-dk3 - FAIL scaled-scores-dk3"])
    summary = _summary(result)
    assert "G14.02 Softmax weights and mixed outputs: 5/6 points\n" in summary
    assert f"visible checks: {G14.visible_points - 2:g}/{G14.visible_points:g} points; {TOTAL}\n" in summary
    # The failure says what 'grader check' says of that check: its call (whole) and its likely mistake
    # ('check' says the mistake once per exercise, above the checks; pytest under each failing test).
    monkeypatch.setenv("COLUMNS", "99")
    _, out, err = cli("check", path)
    said = " ".join(result.stdout.str().split())
    call = "call: attention(Q=[[0.6804731745, 1.177110123, 0.5645057347], [0.3763933419, 0.1553943449,"
    assert call in " ".join(out.split()) and call in said, (out, err)
    assert "likely mistake: The scores are Q K^T without the 1/sqrt(d_k) scale" in said
    assert "likely mistake (the failing check fails as it does): The scores are Q K^T without" in " ".join(out.split())
    xml = JUnitXml.fromfile(str(pytester.path / "junit.xml"))
    cases = {case.name: case for suite in xml for case in suite}
    assert len(cases) == G14.visible_checks
    assert not cases["scaled-scores-dk3"].is_passed and cases["zero-scores"].is_passed

    def props(name: str) -> dict[str, str]:
        return {p.get("name"): p.get("value") for p in cases[name]._elem.iter("property")}

    assert props("scaled-scores-dk3") == {
        "exercise": "G14.02",
        "check": "scaled-scores-dk3",
        "points": "0",
        "max_points": "1",
    }
    assert props("zero-scores")["points"] == "2"


def test_the_untouched_starter_fails_every_check_as_not_attempted(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _student(pytester, STARTER)
    result = _run(pytester, monkeypatch, "-rs")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=23)  # not one skip: work not done is not green
    text = result.stdout.str()
    assert "skipped" not in text
    assert "TODO shapes-3x2-5x2-5x4: not attempted: attention still raises NotImplementedError (0/2 points)" in (
        text.replace("\n    ", " ")
    )
    assert f"visible checks: 0/{G14.visible_points:g} points; {TOTAL}" in _summary(result)


def test_wrong_functions_raising_not_implemented_fail_and_only_full_points_pass(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reference, then softmax, attention and softmax_backward raising NotImplementedError on purpose.
    starter = STARTER.read_text()
    _student(
        pytester,
        REFERENCE.read_text() + starter[starter.index("def softmax(") : starter.index("def score_array_bytes")],
    )
    result = _run(pytester, monkeypatch)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, failed=21)  # G14.05's two checks pass: 4 points of 35
    assert f"visible checks: 4/35 points; {TOTAL}" in _summary(result)
    _student(pytester, REFERENCE)  # full visible points: the only green run
    result = _run(pytester, monkeypatch)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=23)
    assert f"visible checks: {G14.visible_points:g}/{G14.visible_points:g} points; {TOTAL}" in _summary(result)


def test_k_reports_the_selected_checks_points_only(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _student(pytester, ROOT / "reference" / "mutants" / "no_sqrt_dk" / "attention.py")
    result = _run(pytester, monkeypatch, "-k", "G14.03", "-v")
    assert result.ret == pytest.ExitCode.OK  # G14.03's checks all pass: its 7 points of 7
    result.assert_outcomes(passed=3, deselected=G14.visible_checks - 3)
    result.stdout.fnmatch_lines(["attention.py::G14.03::causal-two-positions PASSED*"])
    summary = _summary(result)
    assert (
        summary
        == f"G14.03 Causal masking: 7/7 points\nvisible checks: 7/7 points (3 of {G14.visible_checks} visible checks ran); {TOTAL}\n"
    )
    result = _run(pytester, monkeypatch, "-k", "G14.02 and not dk3")
    assert result.ret == pytest.ExitCode.OK
    assert _summary(result).startswith("G14.02 Softmax weights and mixed outputs: 5/5 points (3 of its 4 checks ran)\n")


def test_failure_text_fits_the_terminal(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _student(pytester, ROOT / "reference" / "mutants" / "no_sqrt_dk" / "attention.py")
    for columns in (60, 80):
        result = _run(pytester, monkeypatch, columns=columns)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        lines = result.stdout.lines
        failures = lines[lines.index(next(x for x in lines if "FAILURES" in x)) :]
        assert "FAIL scaled-scores-dk3" in failures
        too_wide = [line for line in failures if len(line) > columns]
        assert too_wide == [], too_wide


def test_collection_runs_nothing_of_the_students(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    # The witness: a datagram the file sends when it is imported (a plain job may write only in its own
    # folder, but UDP on the loopback is open to it).
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as witness:
        witness.bind(("127.0.0.1", 0))
        port = witness.getsockname()[1]
        source = REFERENCE.read_text() + (
            f"\nimport socket as _s\n_s.socket(_s.AF_INET, _s.SOCK_DGRAM).sendto(b'imported', ('127.0.0.1', {port}))\n"
        )
        _student(pytester, source)
        result = _run(pytester, monkeypatch, "--collect-only", "-q")
        assert result.ret == pytest.ExitCode.OK
        assert "23 tests collected" in result.stdout.str()
        witness.settimeout(0.5)
        with pytest.raises(TimeoutError):
            witness.recv(64)
        result = _run(pytester, monkeypatch, "-k", "G14.05")  # running a check does import it: the witness works
        assert result.ret == pytest.ExitCode.OK
        witness.settimeout(10.0)
        assert witness.recv(64) == b"imported"


def test_it_stays_off_in_this_repository_and_when_asked(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    def config(root: Path, value: str = "auto") -> SimpleNamespace:
        return SimpleNamespace(rootpath=root, getini=lambda name: value, stash={})

    assert active(config(ROOT)) is False  # no attention.py at the root, and it is the grader's repository
    _student(pytester, STARTER)
    folder = pytester.path
    assert active(config(folder)) is True and active(config(folder, "false")) is False
    (folder / "course.yaml").write_text("id: x\n")  # a course pack's own folder
    assert active(config(folder)) is False and active(config(folder, "true")) is True
    (folder / "course.yaml").unlink()
    pytester.makeini("[pytest]\ngrader_checks = false\n")
    assert _run(pytester, monkeypatch).ret == pytest.ExitCode.NO_TESTS_COLLECTED
    (folder / "tox.ini").unlink()
    assert _run(pytester, monkeypatch, "-p", "no:grader").ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert _run(pytester, monkeypatch).ret == pytest.ExitCode.TESTS_FAILED
