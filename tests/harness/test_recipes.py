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


def _staff_only(folder: Path) -> None:
    """Every folder of an output is its owner's alone (0700): no other user of the machine or share reads a file."""
    folders = [folder, *(p for p in folder.rglob("*") if p.is_dir())]
    assert [(str(p), oct(p.stat().st_mode & 0o777)) for p in folders if p.stat().st_mode & 0o077] == []


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


@pytest.mark.slow
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
    _staff_only(shards)
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
    _staff_only(reports)
    # the submit script queues the merge after the whole array, under umask 077 (sbatch passes it on)
    submit = (EXAMPLES / "slurm" / "submit.sh").read_text()
    assert "sbatch --parsable" in submit and '--dependency="afterok:' in submit
    assert submit.index("umask 077") < submit.index("sbatch")
    for script in ("grade-array.sbatch", "merge.sbatch"):
        text = (EXAMPLES / "slurm" / script).read_text()
        assert "\numask 077\n" in text and "mkdir -p -m 0700" in text
        assert "GRADER_COURSE_SECRET=" not in text  # the secret comes from a key file, never the script


def _container(document: dict) -> dict:
    [container] = document["spec"]["template"]["spec"]["containers"]
    return container


def _container_env(container: dict, key_file: Path, **override: str) -> dict[str, str]:
    values = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    assert not [e for e in container.get("env", []) if "valueFrom" in e]  # no secret in the environment
    # The course secret is a file of the Secret's read-only volume: here, a key file of the test's.
    [mount] = [m for m in container["volumeMounts"] if m["name"] == "course-secret"]
    assert mount["readOnly"] is True and values["GRADER_COURSE_SECRET_FILE"].startswith(mount["mountPath"] + "/")
    return {**values, "GRADER_COURSE_SECRET_FILE": str(key_file), **override}


def _key_file(checkout: Path) -> Path:
    key = checkout / "course.key"
    if not key.exists():
        key.write_text(SECRET + "\n")
        key.chmod(0o600)
    return key


def _no_credentials(pod: dict) -> None:
    """A pod that gets no Kubernetes API token and no other services' addresses; its secret volume is 0400."""
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
    [secret] = [v["secret"] for v in pod["volumes"] if "secret" in v]
    assert secret["defaultMode"] == 0o400


@pytest.mark.slow
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
    _no_credentials(spec["template"]["spec"])
    assert [m["readOnly"] for m in container["volumeMounts"] if m["mountPath"] == "/class"] == [True]
    assert script.startswith('umask 077; mkdir -p -m 0700 "$RESULTS";')
    results = checkout / "k8s-results"
    # paths as the unsharded run gave them
    env = _container_env(container, _key_file(checkout), CLASS="class", RESULTS=str(results))
    _run_all(
        [
            (
                ["sh", "-c", script],
                {**_without_secret(_env(checkout, JOB_COMPLETION_INDEX=str(index))), **env},
                checkout,
            )
            for index in range(completions)
        ]
    )
    merge = yaml.safe_load((EXAMPLES / "kubernetes" / "merge-job.yaml").read_text())
    container = _container(merge)
    _no_credentials(merge["spec"]["template"]["spec"])
    context = container["securityContext"]  # it runs no student code: no privilege at all
    assert "privileged" not in context and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]} and context["readOnlyRootFilesystem"] is True
    [script] = container["args"]
    env = _container_env(container, _key_file(checkout), RESULTS=str(results), TMPDIR=str(checkout))
    _run_all([(["sh", "-c", script], {**_without_secret(_env(checkout)), **env}, checkout)])
    assert_same_exports(unsharded, results / "reports")
    _staff_only(results)


def _without_secret(env: dict[str, str]) -> dict[str, str]:
    """An environment without the course secret: the recipe must bring it (as a key file)."""
    return {k: v for k, v in env.items() if k != "GRADER_COURSE_SECRET"}


def _expand(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        return values[match.group(1)]

    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", one, text)


def _step_env(step: dict, values: dict[str, str]) -> dict[str, str]:
    return {k: _expand(str(v), values) for k, v in (step.get("env") or {}).items()}


@pytest.mark.slow
def test_the_github_actions_matrix_and_its_merge(checkout: Path, unsharded: Path) -> None:
    workflow = yaml.safe_load((EXAMPLES / "github-actions" / "grade-matrix.yml").read_text())
    grade, merge = workflow["jobs"]["grade"], workflow["jobs"]["merge"]
    assert merge["needs"] == "grade"
    shards = grade["strategy"]["matrix"]["shard"]
    steps = {s["id"]: s for s in grade["steps"] if "id" in s}
    env = {k: v for k, v in workflow["env"].items() if "${{" not in v}
    env["CLASS"] = "class"
    jobs = []
    for shard in shards:
        workspace = checkout / f"gh-grade-{shard}"  # each matrix job has its own runner and checkout
        workspace.mkdir()
        (workspace / "class").symlink_to(checkout / "class")  # the class is in the course's repository
        (workspace / "runner-temp").mkdir()
        values = {"matrix.shard": str(shard), "strategy.job-total": str(len(shards)), "secrets.COURSE_SECRET": SECRET}
        # The job's steps in order: the key file, then the grading; the secret in no environment of the grader.
        script = "\n".join(_expand(steps[i]["run"], values) for i in ("secret", "grade"))
        job_env = {**_without_secret(_env(checkout, **env)), "RUNNER_TEMP": str(workspace / "runner-temp")}
        jobs.append((["bash", "-e", "-c", script], {**job_env, **_step_env(steps["secret"], values)}, workspace))
    _run_all(jobs)
    for shard in shards:
        _staff_only(checkout / f"gh-grade-{shard}" / f"shard-{shard}")
        key = checkout / f"gh-grade-{shard}" / "runner-temp" / "course.key"
        assert key.read_text().strip() == SECRET and key.stat().st_mode & 0o077 == 0
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
    merge_env = {**_without_secret(_env(checkout, **env)), **_step_env(step, {"secrets.COURSE_SECRET": SECRET})}
    _run_all([(["bash", "-e", "-c", step["run"]], merge_env, workspace)])
    assert_same_exports(unsharded, workspace / "reports")
    _staff_only(workspace / "reports")


def _github_workflow_schema() -> dict:
    """GitHub's workflow schema, as check-jsonschema ships it (vendored from SchemaStore's github-workflow.json)."""
    import importlib.resources
    import json

    pytest.importorskip("check_jsonschema")
    text = (importlib.resources.files("check_jsonschema") / "builtin_schemas/vendor/github-workflows.json").read_text()
    return json.loads(text)


def test_the_workflow_is_valid_and_its_jobs_hold_no_credential_they_do_not_need() -> None:
    import jsonschema

    path = EXAMPLES / "github-actions" / "grade-matrix.yml"
    workflow = yaml.safe_load(path.read_text())
    schema = _github_workflow_schema()
    # YAML 1.1 reads the key 'on' as True; GitHub's parser reads it as the string "on".
    document = {("on" if k is True else k): v for k, v in workflow.items()}
    jsonschema.validators.validator_for(schema)(schema).validate(document)
    # A typo the schema must catch (so the lint can fail): an unknown permission level.
    broken = {**document, "permissions": {"contents": "readonly"}}
    assert not jsonschema.validators.validator_for(schema)(schema).is_valid(broken)

    assert document["permissions"] == {"contents": "read"}
    assert not any("secrets." in str(v) for v in document.get("env", {}).values())  # no secret for every step
    for name, job in document["jobs"].items():
        assert job["permissions"] == {"contents": "read"}, name
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False, name
            run = step.get("run", "")
            assert "sudo -E" not in run and "--preserve-env" not in run, (name, run)
            if "grader grade" in run:  # runs student code: no secret in its environment
                assert not any("secrets." in str(v) for v in (step.get("env") or {}).values()), name
                assert "umask 077" in run
            if "sudo" in run and step.get("env"):
                assert all("secrets." not in str(v) or "sudo sh -c 'umask 077; cat >" in run
                           for v in step["env"].values()), (name, run)  # fmt: skip
