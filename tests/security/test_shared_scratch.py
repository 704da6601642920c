"""Attacks on the grader's scratch folders in a shared memory folder (``/dev/shm``).

``/dev/shm`` is often shared by graders that cannot see each other's processes: containers run with
``--ipc=host`` (as Dask and PyTorch images often are), each in a pid namespace of its own. A
grader there must not take another's live folder for a killed one's because its pid is not
among the processes it can see.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from grader import fileio
from grader.fileio import remove_stale_scratch, scratch_prefix


def _gone_pid() -> int:
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid names no process here now
    return dead.pid


def test_a_scratch_name_says_which_pid_namespace_its_pid_belongs_to() -> None:
    ours = re.fullmatch(r"pid:\[(\d+)\]", os.readlink("/proc/self/ns/pid"))
    assert ours is not None
    assert scratch_prefix("dask") == f"grader-dask-{os.getpid()}-n{ours.group(1)}-"


def test_a_live_grader_in_another_pid_namespace_keeps_its_folder(tmp_path: Path) -> None:
    """The other grader's pid is no process here: only a folder of this namespace's is removed."""
    pid = _gone_pid()
    ours = re.fullmatch(r"pid:\[(\d+)\]", os.readlink("/proc/self/ns/pid"))
    assert ours is not None
    theirs = tmp_path / f"grader-dask-{pid}-n{int(ours.group(1)) + 1}-k3j2h1g0"
    killed_here = tmp_path / f"grader-dask-{pid}-n{ours.group(1)}-a1b2c3d4"
    for folder in (theirs / "0", killed_here / "0"):
        folder.mkdir(parents=True)
        (folder / "attention.py").write_text("x = 1\n")
    assert remove_stale_scratch(str(tmp_path)) == 1
    assert [p.name for p in tmp_path.iterdir()] == [theirs.name]
    assert (theirs / "0" / "attention.py").read_text() == "x = 1\n"


def test_without_proc_nothing_is_named_for_a_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "_PID_NAMESPACE", [])
    monkeypatch.setattr(fileio.os, "readlink", _no_proc)
    assert scratch_prefix("zip") == f"grader-zip-{os.getpid()}-"


def _no_proc(path: str) -> str:
    raise FileNotFoundError(path)
