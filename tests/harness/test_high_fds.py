"""A grader whose process already holds more than 1,024 descriptors still grades.

``select.select`` refuses a descriptor of 1,024 or more (``ValueError: filedescriptor out of range``):
a grader embedded in a process with many files or sockets open (a web server, a notebook, a test
runner) got its job's pipes, the zygote's socket and the pidfds numbered above that, and every
submission failed as an internal error. The grader's waits use ``poll``, which has no such limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SUBMISSIONS

SCRIPT = """
import os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard != resource.RLIM_INFINITY and hard < 2048:
    print("SKIP: the hard limit on open files is", hard)
    sys.exit(0)
resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # the grader's own next ones are above 1,024
assert held[-1] >= 1024
sys.argv = ["grader", *sys.argv[1:]]
from grader.cli import console_main
console_main()
"""


@pytest.mark.parametrize("runner", [[], ["--insecure"]])
def test_a_process_holding_many_descriptors_grades_its_class(tmp_path: Path, runner: list[str]) -> None:
    folder = tmp_path / "class"
    for name in ("one", "two"):
        (folder / name).mkdir(parents=True)
        (folder / name / "attention.py").write_bytes((SUBMISSIONS / "correct_numpy" / "attention.py").read_bytes())
    out = tmp_path / "out"
    command = [sys.executable, "-c", SCRIPT, "grade", str(folder), "--out", str(out), "-q", "--jobs", "2", *runner]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    if done.stdout.startswith("SKIP:"):
        pytest.skip(done.stdout.strip())
    assert "out of range" not in done.stderr
    assert done.returncode == 0, done.stderr[-2000:]
    results = {s["id"]: s for s in json.loads((out / "results.json").read_text())["submissions"]}
    assert sorted(results) == ["one", "two"]
    assert all(s["status"] == "graded" and s["score"] == s["max_score"] > 0 for s in results.values())
