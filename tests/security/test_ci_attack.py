"""Every CI path grades a submission that forges its results, and the results hold the true points.

The submission (tests/ci_attack/forger.py appended to the no_sqrt_dk mutant: 33/35 visible points)
double-forks a daemon that, for 30 s, writes forged results over ``result.json``, ``junit.xml`` and
the step summary and a forged ``Points 35/35`` notice with a stop-commands token to every descriptor
it holds and to the standard output and error of every ancestor it can open through ``/proc``; the job itself
prints the same workflow commands. Each path below runs as its CI runs it (``grader check`` by
hand as GitHub's and GitLab's files say, Classroom 50's autograder, pytest with ``--junitxml``);
the daemon is seen alive while it runs, none of it is alive afterwards, and every file and notice
holds the true points.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import processes
from junitparser import JUnitXml

ROOT = Path(__file__).resolve().parents[2]
MUTANT = ROOT / "reference" / "mutants" / "no_sqrt_dk" / "attention.py"
FORGER = Path(__file__).resolve().parents[1] / "ci_attack" / "forger.py"
BIN = Path(sys.executable).parent
NAME = "ci-forger"
TRUE_NOTICES = [
    "::notice title=Autograding complete::Points 33/35",
    '::notice title=Autograding report::{"totalPoints":33,"maxPoints":35}',
]


def _walled() -> bool:
    from grader.child.landlock import landlock_abi

    return landlock_abi() >= 1 or os.geteuid() == 0


pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(
        sys.platform != "linux" or not _walled(),
        reason="Linux only (the daemon is found through /proc), with Landlock or as root (grader/child/plain.py)",
    ),
]


def forgers() -> list[int]:
    """Pids of the attack's processes (named through PR_SET_NAME), zombies excluded."""
    return [p["pid"] for p in processes() if p["name"] == NAME and not p["state"].startswith("Z")]


def acted_on(log: str) -> list[str]:
    """The workflow commands GitHub Actions' runner acts on in a log, in order.

    Transcribed from actions/runner, src/Runner.Worker/ActionCommandManager.cs (TryProcessCommand)
    and src/Runner.Worker/ActionCommand.cs (TryParseV2): a line whose trimmed text starts with
    ``::`` is a command; after ``::stop-commands::TOKEN`` nothing is acted on until the line
    ``::TOKEN::`` (compared without regard to case).
    """
    stopped: str | None = None
    acted = []
    for raw in log.splitlines():
        line = raw.strip()
        if not line.startswith("::"):
            continue
        command = line[2:].split("::", 1)[0].split(" ", 1)[0]
        if stopped is not None:
            if command.lower() == stopped.lower():
                stopped = None
            continue
        if command == "stop-commands":
            stopped = line.split("::", 2)[2]
            continue
        acted.append(line)
    return acted


def _repo(tmp_path: Path, target: str | None = None) -> Path:
    repo = tmp_path / "student-repo"
    repo.mkdir()
    targets = [str(repo / "result.json"), str(repo / "junit.xml"), str(tmp_path / "step-summary.md")]
    attack = FORGER.read_text().replace("__TARGETS__", repr(targets))
    (repo / "attention.py").write_text(MUTANT.read_text() + "\n\n" + attack)
    if target is not None:
        proc = subprocess.run(
            [str(BIN / "grader"), "init-ci", target, "--dir", str(repo), "--package", "dist/g14.whl"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    return repo


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB", "CI", "PYTEST"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", GRADER_CACHE_DIR="", NO_COLOR="1", **extra)
    return env


def _run(argv: list[str], repo: Path, env: dict[str, str]) -> tuple[int, str, str, bool]:
    """Run a command as CI does; return its exit code, output, and whether the daemon was seen alive meanwhile."""
    out, err = repo.parent / "stdout.txt", repo.parent / "stderr.txt"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(argv, cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        seen = False
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            seen = seen or bool(forgers())
            time.sleep(0.02)
        code = proc.wait(timeout=10)
    time.sleep(0.5)  # a survivor would go on writing: give it time to
    return code, out.read_text(), err.read_text(), seen


def _no_survivor_and_no_forged_notice(out: str, err: str, seen: bool) -> None:
    assert seen, "the daemon never ran: the test proves nothing"
    assert forgers() == []
    for log in (out, err):
        assert not [line for line in acted_on(log) if "35/35" in line or "pwned" in line]
        assert "::stop-commands::pwned" not in [line.strip() for line in log.splitlines()]


def _true_junit(path: Path) -> None:
    xml = JUnitXml.fromfile(str(path))
    cases = {(suite.name, case.name): case for suite in xml for case in suite}
    assert len(cases) == 23 and sum(1 for c in cases.values() if not c.is_passed) == 2


@pytest.mark.slow
def test_github_workflow_by_hand(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "github")
    job = yaml.safe_load((repo / ".github" / "workflows" / "g14-checks.yml").read_text())["jobs"]["g14-checks"]
    [check] = [s["run"] for s in job["steps"] if "run" in s and "pip install" not in s["run"]]
    summary = tmp_path / "step-summary.md"
    env = _env(GITHUB_ACTIONS="true", CI="true", GITHUB_WORKSPACE=str(repo), GITHUB_STEP_SUMMARY=str(summary))
    code, out, err, seen = _run(shlex.split(check), repo, env)
    assert code == 1, err
    _no_survivor_and_no_forged_notice(out, err, seen)
    assert [line for line in acted_on(out) if line.startswith("::notice title=Autograding")] == TRUE_NOTICES
    assert out.splitlines()[:2] == TRUE_NOTICES
    text = summary.read_text()
    assert "35/35" not in text and "**21 passed, 2 failed** · 33 / 35 points" in text
    _true_junit(repo / "junit.xml")
    time.sleep(0.5)
    assert summary.read_text() == text  # nothing wrote to it afterwards


@pytest.mark.slow
def test_gitlab_job_by_hand(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "gitlab")
    job = yaml.safe_load((repo / ".gitlab-ci.yml").read_text())["g14-checks"]
    [check] = [line for line in job["script"] if line.startswith("grader ")]
    code, out, err, seen = _run(shlex.split(check), repo, _env(GITLAB_CI="true", CI="true"))
    assert code == 1, err
    _no_survivor_and_no_forged_notice(out, err, seen)
    assert "visible checks: 33/35 points" in out
    _true_junit(repo / job["artifacts"]["reports"]["junit"])


@pytest.mark.slow
def test_classroom50_autograder(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "classroom50")
    env = _env(CLASSROOM="g14-course", ASSIGNMENT="attention", OWNER="alice", GITHUB_ACTIONS="true")
    code, out, err, seen = _run([sys.executable, str(repo / "autograder.py")], repo, env)
    assert code == 0, err
    _no_survivor_and_no_forged_notice(out, err, seen)
    result = json.loads((repo / "result.json").read_text())
    assert (result["score"], result["max-score"], len(result["tests"])) == (33, 35, 23)


@pytest.mark.slow
def test_pytest_with_junitxml(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", "junit.xml"]
    code, out, err, seen = _run(argv, repo, _env())
    assert code == 1, out + err
    _no_survivor_and_no_forged_notice(out, err, seen)
    assert "2 failed, 21 passed" in out and "visible checks: 33/35 points" in out
    xml = JUnitXml.fromfile(str(repo / "junit.xml"))
    cases = [case for suite in xml for case in suite]
    assert len(cases) == 23 and sum(1 for c in cases if not c.is_passed) == 2


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="a job run by root")
@pytest.mark.parametrize("with_landlock", [True, False])
def test_a_root_job_drops_to_nobody(monkeypatch: pytest.MonkeyPatch, with_landlock: bool) -> None:
    import shutil
    import tempfile

    from grader.child import landlock, plain

    if with_landlock and landlock.landlock_abi() < 1:
        pytest.skip("no Landlock here")
    folder = Path(tempfile.mkdtemp(prefix="grader-job-test-"))  # where run_calls makes it: in the temporary folder
    (folder / "worker-x").mkdir(parents=True)
    (folder / "worker-x" / "attention.py").write_text("x = 1\n")
    if not with_landlock:
        monkeypatch.setattr(landlock, "landlock_abi", lambda: 0)
    monkeypatch.setenv("CI_JOB_TOKEN", "secret-of-the-pipeline")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the job
        try:
            os.close(read)
            applied = plain.guard(str(folder))
            said = [applied, str(os.getuid())]
            for what in ("fd/1", "environ"):
                try:
                    with open(f"/proc/{os.getppid()}/{what}", "rb") as fh:
                        said.append(f"{what}: read {b'secret-of-the-pipeline' in fh.read()}")
                except OSError:
                    said.append(f"{what}: refused")
            with open(folder / "worker-x" / "attention.py") as fh:
                said.append("own file: " + ("read" if fh.read() == "x = 1\n" else "unread"))
            os.write(write, "; ".join(said).encode())
        except BaseException as exc:  # noqa: BLE001 - said to the parent
            os.write(write, repr(exc).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as fh:
        said = fh.read()
    shutil.rmtree(folder)
    walls = "nobody+landlock" if with_landlock else "nobody"
    assert said == f"{walls}; 65534; fd/1: refused; environ: refused; own file: read"
