"""The modules a submission may import: one rule in every kind of job, on every machine (worker.OnlyListed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SUBMISSIONS

from grader import worker
from grader.jobs import run_calls
from grader.models import Call

REFUSED = "No module named 'colorsys'"
HINT = " (while grading, only numpy and the standard library's common modules can be imported; see the README's list)"


def _correct_with(tmp_path: Path, name: str, first_line: str) -> Path:
    folder = tmp_path / "class" / name
    folder.mkdir(parents=True)
    source = (SUBMISSIONS / "correct_lists" / "attention.py").read_text()
    (folder / "attention.py").write_text(first_line + "\n" + source)
    return folder


def test_a_module_outside_the_list_is_refused_in_a_plain_job(tmp_path: Path) -> None:
    path = tmp_path / "attention.py"
    path.write_text("import colorsys\n\ndef f():\n    return 1\n")
    out = run_calls(str(path), [Call("f", (), 5.0, None, False)])
    assert out.import_error.startswith("importing the file failed with ModuleNotFoundError (attention.py, line 1): ")
    assert out.import_error.endswith(REFUSED + HINT)
    assert [r.status for r in out.results] == ["skipped"]


def test_modules_already_imported_and_listed_ones_are_importable(tmp_path: Path) -> None:
    path = tmp_path / "attention.py"
    path.write_text(
        "import os, sys, math, statistics, fractions, unittest, numpy.linalg\n"
        "from collections import OrderedDict\n\n"
        "def f():\n"
        "    import importlib\n"
        "    return [statistics.median([1, 3, 2]), float(fractions.Fraction(1, 4)), len(os.sep), len(OrderedDict())]\n\n"
        "def g():\n"
        "    import importlib\n"
        "    importlib.import_module('shlex')\n"
    )
    out = run_calls(str(path), [Call("f", (), 5.0, None, False), Call("g", (), 5.0, None, False)])
    assert out.import_error == ""
    assert out.results[0].value == [2, 0.25, 1, 0]
    # A refusal inside a call is that call's error, by importlib too.
    assert out.results[1].status == "raised" and out.results[1].error_type == "ModuleNotFoundError"
    assert out.results[1].message == "No module named 'shlex'"


def test_the_finder_names_every_listed_package() -> None:
    assert "numpy" in worker.IMPORTABLE and "statistics" in worker.IMPORTABLE
    assert worker.OnlyListed.find_spec("numpy.f2py") is None  # the usual finders decide
    with pytest.raises(ModuleNotFoundError, match="No module named 'scipy.linalg'") as refused:
        worker.OnlyListed.find_spec("scipy.linalg")
    assert refused.value.name == "scipy.linalg"


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="the sandbox needs Linux and root"
)
def test_check_insecure_and_the_sandbox_agree(tmp_path: Path) -> None:
    """Before, ``import colorsys`` passed ``grader check`` and ``--insecure`` and scored 0 in the sandbox
    (on this machine its Python lives under a 0700 /root, which a job's uid cannot read)."""
    refused = _correct_with(tmp_path, "colorsys_user", "import colorsys")
    _correct_with(tmp_path, "os_user", "import os, sys, statistics")
    env = {**os.environ, "GRADER_COURSE_SECRET": "importable-test-secret"}
    grader = [sys.executable, "-m", "grader"]
    scores = {}
    for mode in ("sandbox", "insecure"):
        out = tmp_path / mode
        extra = ["--insecure"] if mode == "insecure" else []
        proc = subprocess.run(
            [*grader, "grade", str(tmp_path / "class"), "--out", str(out), "-q", *extra],
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        results = json.loads((out / "results.json").read_text())
        scores[mode] = {s["id"]: (s["score"], s.get("error", "")) for s in results["submissions"]}
    assert scores["sandbox"] == scores["insecure"]
    assert scores["sandbox"]["os_user"][0] == 86.0
    score, why = scores["sandbox"]["colorsys_user"]
    assert score == 0.0 and why.endswith(REFUSED + HINT)
    student = tmp_path / "student"
    student.mkdir()
    shutil.copy(refused / "attention.py", student / "attention.py")
    proc = subprocess.run([*grader, "check", "attention.py"], capture_output=True, text=True, cwd=student, env=env)
    assert proc.returncode == 1
    assert REFUSED + HINT in proc.stdout


def test_the_readme_lists_what_may_be_imported() -> None:
    """Both lists in the README (for students, and the sandbox's) name exactly the packages of `IMPORTABLE`."""
    from conftest import ROOT

    text = " ".join((ROOT / "README.md").read_text().split())
    lists = re.findall(r"(?:these modules of the standard library: |numpy\.testing`\) and )`([a-z0-9_. ]+)`", text)
    assert len(lists) == 2
    for names in lists:
        assert {name.partition(".")[0] for name in names.split()} | {"numpy"} == worker.IMPORTABLE
