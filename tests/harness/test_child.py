"""The sandbox child's modules: loaded by path without the grader, and one limits module for both sides."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from grader.child import limits

CHILD_MODULES = ["cgroups", "control", "jobsetup", "kernel", "landlock", "limits", "rlimits", "seccomp"]


def test_the_zygote_loads_every_child_module_by_path_and_nothing_of_the_grader() -> None:
    """As the zygote starts (``python -I``): the child is the package ``_grader_child``; ``grader`` never loads."""
    probe = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('zyg', {str(ROOT / 'grader' / 'child' / 'zygote.py')!r})\n"
        "zygote = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(zygote)\n"
        "control = zygote.load_child()\n"
        "print(json.dumps([control.__name__, sorted(m for m in sys.modules if m.split('.')[0] in ('grader', '_grader_child'))]))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-B", "-c", probe], capture_output=True, text=True, check=True, cwd="/")
    name, loaded = json.loads(out.stdout)
    assert name == "_grader_child.control"
    assert loaded == ["_grader_child"] + [f"_grader_child.{m}" for m in CHILD_MODULES]


def test_the_shared_limits() -> None:
    assert limits.slot_uid(0) == 61000 and limits.slot_uid(5) == 61005
    assert limits.cpu_rlimit(0.2) == (1, 2)  # at least a second; the hard limit one more (pid 1 ignores SIGXCPU)
    assert limits.cpu_rlimit(17.0) == (17, 18)
    assert limits.cpu_rlimit(17.9) == (17, 18)


def test_the_uid_base_and_the_limits_are_written_once() -> None:
    """No other module of the grader spells the uid base or a per-job limit: they read `grader.child.limits`."""
    spelled = []
    for path in sorted((ROOT / "grader").rglob("*.py")):
        if path.name == "limits.py":
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in (
            r"\b61000\b",  # the uid base
            r"\b(UID_BASE|SETUP_FAILED|CEILING_CPU_SECONDS|DEFAULT_LIMITS|JOB_NICE) = ",  # a second definition
            r"RLIMIT_CPU, \(",  # a CPU rlimit pair not made by cpu_rlimit()
            r"RLIMIT_FSIZE, \(\d",  # a file-size limit spelled out
            r'"address_space_bytes": \d',
        ):
            spelled += [f"{path.relative_to(ROOT)}: {pattern}" for _ in re.finditer(pattern, text)]
    assert spelled == []


CPU_LIMITS = """
import resource

def limits():
    return [list(resource.getrlimit(resource.RLIMIT_CPU)), list(resource.getrlimit(resource.RLIMIT_FSIZE))]
"""


def _rlimits_seen(tmp_path: Path, launch: Any = None) -> Any:
    from grader.builtin.runner import run_calls
    from grader.models import Call

    path = tmp_path / "attention.py"
    path.write_text(CPU_LIMITS)
    extra = {"launch": launch} if launch is not None else {}
    out = run_calls(str(path), [Call("limits", (), 2.0)], import_timeout=10.0, **extra)
    assert out.results[0].status == "returned", out
    return out.results[0].value


def test_a_plain_child_gets_the_shared_cpu_and_file_limits(tmp_path: Path) -> None:
    # The CPU rlimit: the import timeout, the calls' timeouts and the margin (10 + 2 + 5 s).
    assert _rlimits_seen(tmp_path) == [[17, 18], [64 << 20, 64 << 20]]


@pytest.mark.sandbox
@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="the sandbox needs Linux and root")
def test_a_sandbox_job_gets_the_same_cpu_and_file_limits(tmp_path: Path) -> None:
    import shutil

    from grader.builtin import sandbox
    from grader.builtin.sandbox import slots

    zygote = sandbox.Zygote()
    workdir = slots.make_workdir()
    worker = slots.Worker(zygote, (0, 1), workdir)
    try:
        assert _rlimits_seen(tmp_path, worker.launch) == [[17, 18], [64 << 20, 64 << 20]]
    finally:
        worker.close()
        zygote.close()
        shutil.rmtree(workdir)


def test_the_catalogue_cache_key_hashes_the_child() -> None:
    """A change to the zygote or any module of the child makes cached mutant results stale."""
    from grader.packs import catalogue

    hashed = {path.resolve() for path in catalogue._DECODING}
    assert all(path.is_file() for path in catalogue._DECODING)  # a moved file is not silently left out
    child = {path.resolve() for path in (ROOT / "grader" / "child").glob("*.py")}
    assert {f"{m}.py" for m in [*CHILD_MODULES, "__init__", "zygote", "worker"]} <= {p.name for p in child}
    execution = ("boundary.py", "jobs.py", "channel.py", "calls.py")
    others = {(ROOT / "grader" / "execution" / name).resolve() for name in execution}
    others.add((ROOT / "grader" / "builtin" / "runner.py").resolve())
    assert all(path.is_file() for path in hashed)
    assert child | others <= hashed  # the runner's machinery, which turns a frame into a result
