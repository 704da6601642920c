"""The recipes in examples/ run: their own commands, with each scheduler's variables set for every index, then merged.

Slurm (``examples/slurm``), a Kubernetes Indexed Job (``examples/kubernetes``) and a GitHub Actions
matrix (``examples/github-actions``): the commands are read from the files themselves (the script,
the container's ``sh -c`` argument, the workflow's ``run`` steps), run as the scheduler would run
them one index at a time, and the merged ``results.json`` must be one unsharded run's, byte for byte.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from scale_support import assert_same_exports, grader_env, make_class

EXAMPLES = ROOT / "examples"
SECRET = "recipes-test-course-secret-0123456789"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder holding a class of 8 (the course pack is the installed one, found from anywhere)."""
    here = tmp_path_factory.mktemp("checkout")
    make_class(here / "class", copies=1)
    return here


@pytest.fixture(scope="module")
def unsharded(checkout: Path) -> Path:
    out = checkout / "unsharded"
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade", "class", "--out", str(out), "-q"],
        cwd=checkout,
        env=_env(checkout),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _env(checkout: Path, **extra: str) -> dict[str, str]:
    """A scheduler's environment: this venv's grader first on PATH, a ``sudo`` that just runs its command
    (the tests run as root, like the sandbox wants), the course secret, and ``extra``."""
    shim = checkout / "bin"
    if not shim.exists():
        shim.mkdir()
        (shim / "sudo").write_text('#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n')
        (shim / "sudo").chmod(0o755)
    path = os.pathsep.join([str(shim), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return grader_env(PATH=path, GRADER_COURSE_SECRET=SECRET, **extra)


def _run_all(commands: list[tuple[list[str], dict[str, str], Path]]) -> None:
    """Run the commands side by side (as a scheduler runs the indices of one array), each to success."""
    procs = [
        subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for cmd, env, cwd in commands
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]


def test_the_slurm_array_and_its_merge(checkout: Path, unsharded: Path) -> None:
    script = EXAMPLES / "slurm" / "grade-array.sbatch"
    low, high = map(
        int,
        re.search(r"^#SBATCH --array=(\d+)-(\d+)$", script.read_text(), re.MULTILINE).groups(),
    )
    count = high - low + 1
    shards = checkout / "slurm-shards"
    base = {
        "CLASS": "class",
        "SHARDS": str(shards),
        "SLURM_ARRAY_TASK_MIN": str(low),
        "SLURM_ARRAY_TASK_COUNT": str(count),
        "SLURM_CPUS_PER_TASK": "1",
        "SLURM_ARRAY_JOB_ID": "7",
    }
    _run_all(
        [
            (
                ["bash", str(script)],
                _env(checkout, **base, SLURM_ARRAY_TASK_ID=str(task)),
                checkout,
            )
            for task in range(low, high + 1)
        ]
    )
    assert sorted(p.name for p in shards.iterdir()) == [f"shard-{t}" for t in range(low, high + 1)]
    reports = checkout / "slurm-reports"
    _run_all(
        [
            (
                ["bash", str(EXAMPLES / "slurm" / "merge.sbatch")],
                _env(checkout, SHARDS=str(shards), REPORTS=str(reports)),
                checkout,
            )
        ]
    )
    assert_same_exports(unsharded, reports)
    # the submit script queues the merge after the whole array
    submit = (EXAMPLES / "slurm" / "submit.sh").read_text()
    assert "sbatch --parsable" in submit and '--dependency="afterok:' in submit


def _container(document: dict) -> dict:
    [container] = document["spec"]["template"]["spec"]["containers"]
    return container


def _container_env(container: dict, **override: str) -> dict[str, str]:
    values = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    secrets = [e["name"] for e in container.get("env", []) if "valueFrom" in e]
    assert secrets == ["GRADER_COURSE_SECRET"]  # the course secret comes from a Kubernetes Secret
    return {**values, **override}


def test_the_kubernetes_indexed_job_and_its_merge(checkout: Path, unsharded: Path) -> None:
    job = yaml.safe_load((EXAMPLES / "kubernetes" / "grade-job.yaml").read_text())
    spec = job["spec"]
    assert job["kind"] == "Job" and spec["completionMode"] == "Indexed"
    completions = spec["completions"]
    container = _container(job)
    assert container["command"] == ["sh", "-c"] and container["securityContext"]["privileged"] is True
    [script] = container["args"]
    assert "grader doctor;" in script and f"--shard auto/{completions}" in script
    assert spec["parallelism"] == completions
    results = checkout / "k8s-results"
    env = _container_env(container, CLASS="class", RESULTS=str(results))  # paths as the unsharded run gave them
    _run_all(
        [
            (
                ["sh", "-c", script],
                _env(checkout, **env, JOB_COMPLETION_INDEX=str(index)),
                checkout,
            )
            for index in range(completions)
        ]
    )
    merge = yaml.safe_load((EXAMPLES / "kubernetes" / "merge-job.yaml").read_text())
    container = _container(merge)
    [script] = container["args"]
    _run_all(
        [
            (
                ["sh", "-c", script],
                _env(checkout, **_container_env(container, RESULTS=str(results))),
                checkout,
            )
        ]
    )
    assert_same_exports(unsharded, results / "reports")


def _expand(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        return values[match.group(1)]

    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", one, text)


def test_the_github_actions_matrix_and_its_merge(checkout: Path, unsharded: Path) -> None:
    workflow = yaml.safe_load((EXAMPLES / "github-actions" / "grade-matrix.yml").read_text())
    grade, merge = workflow["jobs"]["grade"], workflow["jobs"]["merge"]
    assert merge["needs"] == "grade"
    shards = grade["strategy"]["matrix"]["shard"]
    [step] = [s for s in grade["steps"] if s.get("id") == "grade"]
    env = {k: v for k, v in workflow["env"].items() if "${{" not in v}
    env["CLASS"] = "class"
    jobs = []
    for shard in shards:
        workspace = checkout / f"gh-grade-{shard}"  # each matrix job has its own runner and checkout
        workspace.mkdir()
        (workspace / "class").symlink_to(checkout / "class")  # the class is in the course's repository
        script = _expand(
            step["run"],
            {"matrix.shard": str(shard), "strategy.job-total": str(len(shards))},
        )
        jobs.append((["bash", "-e", "-c", script], _env(checkout, **env), workspace))
    _run_all(jobs)
    workspace = checkout / "gh-merge"
    workspace.mkdir()
    download = next(s for s in merge["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"]["pattern"] == "shard-*"
    for shard in shards:  # download-artifact: each artifact into a folder named after it
        shutil.copytree(
            checkout / f"gh-grade-{shard}" / f"shard-{shard}",
            workspace / f"shard-{shard}",
        )
    [step] = [s for s in merge["steps"] if s.get("id") == "merge"]
    _run_all([(["bash", "-e", "-c", step["run"]], _env(checkout, **env), workspace)])
    assert_same_exports(unsharded, workspace / "reports")
