"""Helpers of the tests that grade past one machine (shards, merge, Dask, recipes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, SUBMISSIONS

SAMPLES = (
    "correct_numpy",
    "correct_lists",
    "mask_after_softmax",
    "no_sqrt_dk",
    "starter",
    "syntax_error",
    "mib_decimal",
    "transposed_shapes",
)
"""Samples whose results do not depend on the machine's load (no hanging one)."""

NOT_EXPORTS = ("gradebook.sqlite", "gradebook.sqlite-wal", "gradebook.sqlite-shm")
"""Files of an output folder that are not exports (SQLite's bytes depend on page layout and time)."""


def make_class(folder: Path, copies: int = 2) -> Path:
    """A class of ``copies`` x `SAMPLES` students, each file distinct (a comment), named ``<sample>-<n>``."""
    for n in range(copies):
        for name in SAMPLES:
            student = folder / f"{name}-{n}"
            student.mkdir(parents=True)
            source = (SUBMISSIONS / name / "attention.py").read_text()
            (student / "attention.py").write_text(source + f"\n# copy {n}\n")
    return folder


def grader_env(**extra: str) -> dict[str, str]:
    """The environment of a grader subprocess: this one, without scheduler variables, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "JOB_COMPLETION_INDEX",
            "SLURM_ARRAY_TASK_ID",
            "SLURM_ARRAY_TASK_MIN",
            "SLURM_ARRAY_TASK_COUNT",
            "GRADER_SHARD_INDEX",
        )
    }
    env.update(extra)
    return env


def grader_cmd(*args: object) -> list[str]:
    """The command line running this checkout's grader with ``args``."""
    return [sys.executable, "-m", "grader", *map(str, args)]


def run(*args: object, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run the grader in a subprocess from the repository root; fail with its stderr when ``check``."""
    done = subprocess.run(
        grader_cmd(*args),
        cwd=ROOT,
        env=env or grader_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


_MILLISECONDS = re.compile(r'("(?:duration|start|stop)":) -?[0-9]+')
_SECONDS = re.compile(r'("execution_time": )[0-9.e+-]+|( time=")[0-9.]+(")')


def without_times(name: str, data: bytes) -> bytes:
    """An export's bytes with its measured seconds zeroed (Gradescope ``execution_time``, JUnit ``time``):
    two runs of the same class measure different times; everything else must be the same bytes."""
    if name.endswith(".json") and "gradescope" in name or name.endswith(".xml"):
        text = data.decode()
        return _SECONDS.sub(lambda m: (m.group(1) or m.group(2)) + "0" + (m.group(3) or ""), text).encode()
    if name == "ctrf.json":  # CTRF's milliseconds: each check's duration, the run's start and stop
        return _MILLISECONDS.sub(r"\1 0", data.decode()).encode()
    return data


def exports(folder: Path) -> dict[str, bytes]:
    """Every file of an output folder by relative path, but the SQLite gradebook and a shard's record."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and path.name not in NOT_EXPORTS and not rel.startswith("shard/"):
            out[rel] = path.read_bytes()
    return out


def assert_same_exports(one: Path, other: Path) -> None:
    """``results.json`` byte-identical, and every other export identical up to measured seconds."""
    a, b = exports(one), exports(other)
    assert sorted(a) == sorted(b)
    assert a["results.json"] == b["results.json"]
    different = [name for name in a if without_times(name, a[name]) != without_times(name, b[name])]
    assert different == []


def ids_of(folder: Path) -> list[str]:
    """The ids of ``results.json``, in its order."""
    return [s["id"] for s in json.loads((folder / "results.json").read_text())["submissions"]]
