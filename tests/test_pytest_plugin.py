"""The pytest plugin: in a student's folder, one test per visible check; never in this repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from junitparser import JUnitXml

from grader.pytest_plugin import active

ROOT = Path(__file__).resolve().parents[1]


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB", "PYTEST"))}
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _student(tmp_path: Path, name: str = "no_sqrt_dk") -> Path:
    folder = tmp_path / "me"
    folder.mkdir()
    shutil.copy(ROOT / "g14" / "mutants" / name / "attention.py", folder / "attention.py")
    return folder


def test_one_test_per_visible_check_with_the_check_message_and_points(tmp_path: Path, cli) -> None:  # noqa: ANN001
    folder = _student(tmp_path)
    proc = _pytest(folder, "--junitxml", "junit.xml")
    assert proc.returncode == 1
    assert "FAILED attention.py::G14.02::scaled-scores-dk3 - FAIL scaled-scores-dk3" in proc.stdout
    assert "2 failed, 21 passed" in proc.stdout
    assert "G14.02 Softmax weights and mixed outputs: 5/6 points" in proc.stdout
    assert (
        "visible checks: 33/35 points; 36 hidden checks run at grading (the grade comes from 'grader grade', "
        "not from this run)"
    ) in proc.stdout
    # The failure says what 'grader check' says of that check: its call (whole) and its likely mistake
    # ('check' says the mistake once per exercise, above the checks; pytest under each failing test).
    _, out, _ = cli("check", folder / "attention.py")
    said = " ".join(proc.stdout.split())
    call = "call: attention(Q=[[0.6804731745, 1.177110123, 0.5645057347], [0.3763933419, 0.1553943449,"
    assert call in " ".join(out.split()) and call in said
    assert "likely mistake: The scores are Q K^T without the 1/sqrt(d_k) scale" in said
    assert "likely mistake (the failing check fails as it does): The scores are Q K^T without" in " ".join(out.split())
    xml = JUnitXml.fromfile(str(folder / "junit.xml"))
    cases = {case.name: case for suite in xml for case in suite}
    assert len(cases) == 23
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


def test_k_selects_an_exercise_and_the_starter_skips(tmp_path: Path) -> None:
    folder = _student(tmp_path)
    proc = _pytest(folder, "-k", "G14.03", "-vv")
    assert "3 passed, 20 deselected" in proc.stdout
    assert "attention.py::G14.03::causal-two-positions PASSED" in proc.stdout
    shutil.copy(ROOT / "g14" / "starter" / "attention.py", folder / "attention.py")
    proc = _pytest(folder, "-rs")
    assert "23 skipped" in proc.stdout
    assert "not attempted: attention still raises NotImplementedError" in proc.stdout


def test_it_stays_off_in_this_repository_and_when_asked(tmp_path: Path) -> None:
    def config(root: Path, value: str = "auto") -> SimpleNamespace:
        return SimpleNamespace(rootpath=root, getini=lambda name: value, stash={})

    assert active(config(ROOT)) is False  # no attention.py at the root, and it is the grader's repository
    folder = _student(tmp_path)
    assert active(config(folder)) is True and active(config(folder, "false")) is False
    (folder / "course.yaml").write_text("id: x\n")  # a course pack's own folder
    assert active(config(folder)) is False and active(config(folder, "true")) is True
    (folder / "course.yaml").unlink()
    (folder / "pytest.ini").write_text("[pytest]\ngrader_checks = false\n")
    assert "no tests ran" in _pytest(folder).stdout
    (folder / "pytest.ini").unlink()
    assert "no tests ran" in _pytest(folder, "-p", "no:grader").stdout
