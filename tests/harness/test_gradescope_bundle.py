"""``grader gradescope-bundle`` (issue 23, item 4): the zip, unpacked as Gradescope does, grades truly.

Gradescope's autograder layout ("Autograder Specifications"): the zip is unpacked into
``/autograder/source/``, ``run_autograder`` is copied to ``/autograder/run_autograder`` and run
with the student's files in ``/autograder/submission/``; it must write
``/autograder/results/results.json``. Here that folder is a temporary one, and the zip runs
with this virtual environment's Python (``GRADER_PYTHON``) instead of what ``setup.sh`` installs.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
from conftest import SUBMISSIONS
from scale_support import grader_env
from spec_totals import G14

from harness.test_gradescope import GRADESCOPE_RESULTS

SECRET = "bundle-test-course-secret-0123456789abcdef"


def _bundle(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader", "gradescope-bundle", *extra],
        cwd=tmp_path,
        env=env or grader_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _unpack(zip_path: Path, root: Path, submission: Path) -> None:
    """``/autograder/`` as Gradescope lays it out for one submission."""
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():
            zf.extract(info, root / "source")
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (root / "source" / info.filename).chmod(mode)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    shutil.copy2(submission, root / "submission" / submission.name)
    (root / "results").mkdir()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    here = tmp_path_factory.mktemp("bundle")
    done = _bundle(here, "--out", "autograder.zip", env=grader_env(GRADER_COURSE_SECRET=SECRET))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("wrote autograder.zip: ")
    assert "the zip holds the course secret (from GRADER_COURSE_SECRET)" in done.stdout
    return here / "autograder.zip"


def test_the_zip_holds_what_gradescope_runs_and_no_sample(bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as zf:
        names = zf.namelist()
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
        key = zf.read("course.key").decode().strip()
    assert {"setup.sh", "run_autograder", "requirements.txt", "pack/course.yaml", "lib/grader/__main__.py"} <= set(
        names
    )
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755 and modes["course.key"] == 0o600
    assert key == SECRET
    assert not [n for n in names if "__pycache__" in n or n.startswith("pack/submissions/")]
    # The course folder is the repository's root: of it, only the course goes in (never .git, .venv, tests,
    # reports or the harness a second time).
    assert sorted({n.split("/")[1] for n in names if n.startswith("pack/")}) == [
        "course.yaml",
        "exercises",
        "reference",
    ]
    assert "pack/reference/attention.py" in names and "pack/exercises/G14.01.yaml" in names
    assert names == sorted(names)
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o600  # it holds the secret
    # Same grader, pack and secret: the same bytes.
    again = bundle.with_name("again.zip")
    assert _bundle(bundle.parent, "--out", again.name, env=grader_env(GRADER_COURSE_SECRET=SECRET)).returncode == 0
    assert again.read_bytes() == bundle.read_bytes()


def test_run_autograder_writes_the_true_score(bundle: Path, tmp_path: Path) -> None:
    sample = "no_sqrt_dk"  # fails hidden checks: their inputs come from the course secret in the zip
    root = tmp_path / "autograder"
    _unpack(bundle, root, SUBMISSIONS / sample / "attention.py")
    env = grader_env(GRADER_PYTHON=sys.executable)
    env.pop("GRADER_COURSE_SECRET", None)  # the zip's own course.key is used
    done = subprocess.run(
        [str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(data, GRADESCOPE_RESULTS)
    # The true score: what 'grader grade' gives here with the same secret, check by check.
    local = tmp_path / "local.json"
    graded = subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(SUBMISSIONS / sample), "--out", str(tmp_path / "o"), "-q",
         "--gradescope", str(local)],
        env=grader_env(GRADER_COURSE_SECRET=SECRET), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert graded.returncode == 0, graded.stderr[-3000:]
    want = json.loads(local.read_text())
    assert data["score"] == want["score"] > 0 and data["tests"] == want["tests"]
    assert sum(t["max_score"] for t in data["tests"]) == G14.points and data["score"] < G14.points
    assert data["extra_data"]["sha256"] == want["extra_data"]["sha256"]
    assert sorted(p.name for p in (root / "results").iterdir()) == ["results.json"]  # nothing else left


def test_bad_out_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    done = _bundle(tmp_path, "--out", "folder")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"grader: error: --out folder: is a folder; give the zip's file name, e.g. {os.path.join('folder', 'autograder.zip')}"
    ]
    done = _bundle(tmp_path, "--out", "missing/autograder.zip")
    assert done.returncode == 2 and "the folder missing does not exist; make it first" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"] and not any((tmp_path / "folder").iterdir())
