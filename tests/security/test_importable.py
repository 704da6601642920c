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

from grader.child import worker
from grader.execution.calls import run_calls
from grader.models import Call

REFUSED = "No module named 'colorsys'"
HINT = (
    " (while grading, only numpy and the standard library's common modules can be imported:"
    ' the student package\'s README lists them, under "What your file may import")'
)


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
    assert worker.IMPORTABLE == {"numpy"}  # a standard-library module must be imported already
    assert worker.OnlyListed.find_spec("numpy.f2py") is None  # the usual finders decide
    for name in ("scipy.linalg", "statistics", "logging.handlers"):
        with pytest.raises(ModuleNotFoundError, match=f"No module named '{name}'") as refused:
            worker.OnlyListed.find_spec(name)
        assert refused.value.name == name


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="the sandbox needs Linux and root"
)
@pytest.mark.slow
@pytest.mark.sandbox
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


def test_a_standard_library_module_not_imported_yet_is_refused_even_in_a_listed_package(tmp_path: Path) -> None:
    """The sandbox here cannot read ``logging/handlers.py`` (a 0700 /root): before, ``import
    logging.handlers`` passed ``grader check`` and ``--insecure`` and scored 0 when graded, and
    ``from unittest import mock`` raised ModuleNotFoundError for asyncio in --insecure and ImportError in the sandbox (its
    interpreter's folder)."""
    path = tmp_path / "attention.py"
    path.write_text(
        "def f(name):\n"
        "    import importlib\n"
        "    importlib.import_module(name)\n\n"
        "def g():\n"
        "    from unittest import mock\n"
    )
    calls = [Call("f", (name,), 5.0, None, False) for name in ("logging.handlers", "json.tool", "numpy.char")]
    out = run_calls(str(path), [*calls, Call("g", (), 5.0, None, False)])
    assert out.import_error == ""
    got = [(r.status, r.error_type, r.message) for r in out.results]
    assert got == [
        ("raised", "ModuleNotFoundError", "No module named 'logging.handlers'"),
        ("raised", "ModuleNotFoundError", "No module named 'json.tool'"),
        ("bad_return", "", got[2][2]),  # numpy's modules, which the sandbox reads: imported, then f returned None
        ("raised", "ImportError", got[3][2]),
    ]
    assert got[3][2].startswith("cannot import name 'mock' from 'unittest' (")  # Python's words, as in the sandbox
    assert worker.IMPORTABLE == {"numpy"}
    with pytest.raises(ModuleNotFoundError, match="No module named 'logging.handlers'"):
        worker.OnlyListed.find_spec("logging.handlers")


def test_what_listed_modules_import_when_used_is_imported_before_the_job(tmp_path: Path) -> None:
    """Honest code refused before in every job: datetime.strptime imports _strptime, an encoding is
    imported when first named, np.savez and np.load of an .npz use cp437, np.memmap uses mmap."""
    path = tmp_path / "attention.py"
    path.write_text(
        "import datetime, time\n"
        "import numpy as np\n\n"
        "def f():\n"
        "    d = datetime.datetime.strptime('2026-12-02', '%Y-%m-%d')\n"
        "    t = time.strptime('2026', '%Y').tm_year\n"
        "    codes = ['é'.encode(e) for e in ('latin-1', 'cp1252', 'utf-8-sig', 'utf-16-le', 'utf-32-le')]\n"
        "    np.savez('a.npz', x=np.arange(3.0))\n"
        "    loaded = np.load('a.npz')['x'].tolist()\n"
        "    m = np.memmap('m.dat', dtype='f8', mode='w+', shape=(2,))\n"
        "    m[:] = 2.0\n"
        "    return [d.day, t, [len(c) for c in codes], loaded, float(m.sum()), len('bücher.de'.encode('idna'))]\n"
    )
    out = run_calls(str(path), [Call("f", (), 5.0, None, False)])
    assert out.import_error == ""
    assert out.results[0].status == "returned", out.results[0].message
    assert out.results[0].value == [2, 2026, [1, 1, 5, 2, 4], [0.0, 1.0, 2.0], 4.0, 16]


def test_a_refused_reload_says_so_in_true_words(tmp_path: Path) -> None:
    """``importlib.reload`` of a module the job has (its file may be unreadable in the sandbox) is
    refused with Python's words for a reload whose module is not found, not "No module named"."""
    path = tmp_path / "attention.py"
    path.write_text("import importlib, statistics\n\ndef f():\n    importlib.reload(statistics)\n")
    out = run_calls(str(path), [Call("f", (), 5.0, None, False)])
    assert out.import_error == ""
    got = out.results[0]
    assert (got.status, got.error_type, got.message) == (
        "raised",
        "ModuleNotFoundError",
        "spec not found for the module 'statistics'",
    )
    with pytest.raises(ModuleNotFoundError, match="No module named 'statistics'"):
        worker.OnlyListed.find_spec("statistics")


def test_the_docs_list_what_may_be_imported() -> None:
    """docs/reference/imports.md (the one list, for students and the sandbox's page alike) names
    exactly the packages of `LISTED`."""
    from conftest import ROOT

    text = (ROOT / "docs" / "reference" / "imports.md").read_text()
    stdlib = text[text.index("**These modules of the standard library:**") : text.index("**And what")]
    names = re.findall(r"`([a-z0-9_.]+)`", stdlib)
    assert len(names) == len(set(names)) > 40
    assert {name.partition(".")[0] for name in names} | {"numpy"} == {n.partition(".")[0] for n in worker.LISTED}
    security = (ROOT / "docs" / "explanation" / "security.md").read_text()
    assert "[What student code may import](../reference/imports.md)" in security


def test_a_plain_job_has_what_the_sandbox_s_jobs_inherit_from_the_zygote(tmp_path: Path) -> None:
    """The zygote imports ctypes.util (Landlock, seccomp), so a sandboxed job could import it and a
    ``grader check`` or ``--insecure`` job could not: the fork server imports it too."""
    path = tmp_path / "attention.py"
    path.write_text("import ctypes.util\n\ndef f():\n    return [callable(ctypes.util.find_library)]\n")
    out = run_calls(str(path), [Call("f", (), 5.0, None, False)])
    assert out.import_error == ""
    assert out.results[0].value == [True]
    assert "ctypes.util" in worker.PREIMPORT and "ctypes.util" not in worker.LISTED
