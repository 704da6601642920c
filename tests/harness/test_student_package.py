"""The student package: built, opened and inspected; and used in a fresh folder with nothing else."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest
from spec_totals import G14

from grader.cli import main
from grader.packs import find_pack
from grader.packs.student import inspect_artifact, member_names, pack_members

pytestmark = pytest.mark.slow  # the student wheel and sdist built once for the module

ROOT = Path(__file__).resolve().parents[2]
SPECS, REFERENCE, MUTANTS = (
    ROOT / "exercises",
    ROOT / "reference" / "attention.py",
    ROOT / "reference" / "mutants",
)
STARTER = ROOT / "exercises" / "starter" / "attention.py"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        code = main(["build-student-package", "--out", str(out)])
    finally:
        os.chdir(old)
    assert code == 0
    return {"wheel": next(out.glob("*.whl")), "sdist": next(out.glob("*.tar.gz"))}


def _problems(artifact: Path) -> list[str]:
    return inspect_artifact(artifact, SPECS, REFERENCE, MUTANTS, pack_members(find_pack()))


def test_the_artifacts_hold_the_grader_the_public_checks_and_the_starter_only(built: dict[str, Path]) -> None:
    wheel = member_names(built["wheel"])
    assert "g14/public.json" in wheel and "g14/starter/attention.py" in wheel
    assert (
        "grader/cli/__init__.py" in wheel
        and "grader/integrations/pytest_plugin.py" in wheel
        and "grader/templates/report.html" in wheel
    )
    assert not [n for n in wheel if not n.startswith(("grader/", "g14/", "g14_grader-0.1.0.dist-info/"))]
    # Of the pack: the manifest, its plugin, the public checks and the starter; no spec, reference or mutant.
    assert sorted(n for n in wheel if n.startswith("g14/")) == [
        "g14/__init__.py",
        "g14/course.yaml",
        "g14/kinds.py",
        "g14/public.json",
        "g14/starter/attention.py",
    ]
    sdist = member_names(built["sdist"])
    assert "g14_grader-0.1.0/g14/public.json" in sdist and "g14_grader-0.1.0/pyproject.toml" in sdist
    for artifact in built.values():
        assert _problems(artifact) == []
    with zipfile.ZipFile(built["wheel"]) as zf:
        bundle = json.loads(zf.read("g14/public.json"))
        assert zf.read("g14/starter/attention.py") == STARTER.read_bytes()
        entry_points = zf.read("g14_grader-0.1.0.dist-info/entry_points.txt").decode()
        metadata = zf.read("g14_grader-0.1.0.dist-info/METADATA").decode()
    assert "\nRequires-Dist: pytest>=7.4\n" in metadata  # plain 'pytest' works with the wheel alone
    assert "[pytest11]\ngrader = grader.integrations.pytest_plugin" in entry_points
    assert "[grader.packs]\ng14 = g14" in entry_points
    checks = [c for e in bundle["exercises"] for c in e["checks"]]
    assert len(checks) == G14.visible_checks and {c["visibility"] for c in checks} == {"visible"}
    assert bundle["hidden_count"] == G14.hidden_checks
    # Diagnosis data: names and returned values, never code.
    mistakes = {m["name"] for c in checks for m in c["mistakes"]}
    assert len(mistakes) == 45 and "no_sqrt_dk" in mistakes
    assert "def " not in json.dumps([c["mistakes"] for c in checks])


def _with_extra(artifact: Path, tmp: Path, name: str, data: bytes) -> Path:
    copy = tmp / artifact.name
    if artifact.suffix == ".whl":
        shutil.copy(artifact, copy)
        with zipfile.ZipFile(copy, "a") as zf:
            zf.writestr(name, data)
        return copy
    with tarfile.open(artifact) as src, tarfile.open(copy, "w:gz") as dst:
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        info = tarfile.TarInfo(f"g14_grader-0.1.0/{name}")
        info.size = len(data)
        import io

        dst.addfile(info, io.BytesIO(data))
    return copy


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_the_inspection_fails_when_a_hidden_file_is_added(built: dict[str, Path], tmp_path: Path, kind: str) -> None:
    artifact = built[kind]
    reference = _with_extra(artifact, tmp_path, "reference/attention.py", REFERENCE.read_bytes())
    problems = _problems(reference)
    assert any("reference/attention.py: a folder that stays in the course repository" in p for p in problems)
    assert any("the same bytes as" in p and "reference/attention.py" in p for p in problems)
    (tmp_path / "b").mkdir()
    spec = _with_extra(artifact, tmp_path / "b", "grader/data/G14.06.yaml", (SPECS / "G14.06.yaml").read_bytes())
    assert any("a YAML file" in p for p in _problems(spec))
    (tmp_path / "c").mkdir()
    hidden = (MUTANTS / "no_sqrt_dk" / "attention.py").read_bytes()
    mutant = _with_extra(artifact, tmp_path / "c", "grader/builtin/extra.py", hidden)  # renamed mutant code
    assert [p for p in _problems(mutant) if "the same bytes as" in p and "mutants/no_sqrt_dk" in p]
    (tmp_path / "d").mkdir()
    bundle = json.loads((ROOT / "exercises" / "public.json").read_text())
    bundle["exercises"][0]["checks"][0]["id"] = "unequal-counts-and-widths"  # a hidden check's id
    leaked = _with_extra(artifact, tmp_path / "d", "grader/data/other.json", json.dumps(bundle).encode())
    assert any("check G14.01 unequal-counts-and-widths is hidden in the specs" in p for p in _problems(leaked))


def _fresh_venv(tmp: Path, wheel: Path) -> Path:
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheel)],  # pytest comes as its dependency
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot install the wheel's dependencies here (no package index?): {proc.stderr[-300:]}")
    return env_dir / "bin"


def test_a_fresh_environment_with_only_the_wheel(built: dict[str, Path], tmp_path: Path) -> None:
    """The 'done when' of issue 10: an empty folder, only the student wheel installed (it brings pytest)."""
    import nbformat

    bin_dir = _fresh_venv(tmp_path, built["wheel"])
    home = tmp_path / "student"
    home.mkdir()
    source = (MUTANTS / "no_sqrt_dk" / "attention.py").read_text()
    (home / "attention.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB", "PYTHON")) and k != "GRADER_COURSE"}
    env.update(GRADER_CACHE_DIR="", NO_COLOR="1")

    def run(*cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=home, env=env, capture_output=True, text=True, timeout=300, check=False)

    check = run(str(bin_dir / "grader"), "check", "attention.py")
    assert check.returncode == 1, check.stderr
    assert "fails as it does): The scores are Q K^T without the 1/sqrt(d_k) scale" in " ".join(check.stdout.split())
    assert (
        f"visible checks: {G14.visible_points - 2:g}/{G14.visible_points:g} points; {G14.hidden_checks} hidden checks run at grading"
        in check.stdout
    )
    tests = run(str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert tests.returncode == 1
    assert "FAILED attention.py::G14.02::scaled-scores-dk3" in tests.stdout
    assert (
        "2 failed, 21 passed" in tests.stdout
        and f"visible checks: {G14.visible_points - 2:g}/{G14.visible_points:g} points" in tests.stdout
    )
    assert "likely mistake: The scores are Q K^T without the 1/sqrt(d_k) scale" in " ".join(tests.stdout.split())
    # The same code as a notebook gets the same results.
    (home / "attention.py").unlink()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# attention"),
        nbformat.v4.new_code_cell("%load_ext autoreload"),
        nbformat.v4.new_code_cell(source),
    ]
    nbformat.write(nb, str(home / "attention.ipynb"))
    again = run(str(bin_dir / "grader"), "check", "attention.ipynb")
    assert (
        again.returncode == 1
        and f"visible checks: {G14.visible_points - 2:g}/{G14.visible_points:g} points" in again.stdout
    )
    assert "cell 2, line 1: '%load_ext autoreload' is an IPython line" in again.stderr
    notebook_tests = run(str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert "FAILED attention.ipynb::G14.02::scaled-scores-dk3" in notebook_tests.stdout
    assert "2 failed, 21 passed" in notebook_tests.stdout
    assert sys.prefix not in check.stdout  # not the development environment
    # The starter comes with the package.
    made = run(str(bin_dir / "grader"), "starter", "fresh")
    assert made.returncode == 0, made.stderr
    assert (home / "fresh" / "attention.py").read_bytes() == (STARTER).read_bytes()
    assert run(str(bin_dir / "grader"), "starter", "fresh").returncode == 2  # never overwrites


def test_starter_in_the_course_repository(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(ROOT)
    code, out, err = cli("starter", tmp_path / "me")
    assert code == 0, err
    assert (tmp_path / "me" / "attention.py").read_bytes() == (STARTER).read_bytes()
    code, _, err = cli("starter", tmp_path / "me")
    assert code == 2 and "exists; the starter never overwrites your file" in err


_EXPONENTIALS = {"exp", "expm1", "exp2", "logaddexp", "logaddexp2", "logsumexp"}


def test_the_wheel_holds_no_code_that_computes_the_chapter(built: dict[str, Path], tmp_path: Path) -> None:
    """Issue 24: what visible checks need is data (public.json), never code computing the chapter's functions.

    Every function of the wheel (module functions and methods) runs on every visible check's call
    (tests/wheel_probe.py, a process of its own); none may return the reference's result. And no
    module calls an exponential: softmax, attention and its backward all need one.
    """
    import ast

    folder = tmp_path / "wheel"
    with zipfile.ZipFile(built["wheel"]) as zf:
        zf.extractall(folder)
    calls = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in _EXPONENTIALS:
                    calls.append(f"{path.relative_to(folder)}, line {node.lineno}: {name}(...)")
    assert calls == []
    report = tmp_path / "hits.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "wheel_probe.py"), str(folder), str(folder / "g14" / "public.json")]
        + [str(REFERENCE), str(report)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        start_new_session=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Nothing left in its working folder (tempfile's probe files land there, in /tmp and /var/tmp alike).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hits.json", "wheel"]
    found = json.loads(report.read_text())
    assert found["hits"] == []
    modules = [n for n in member_names(built["wheel"]) if n.endswith(".py") and not n.endswith("__main__.py")]
    assert modules and not [n for n in modules if n.startswith(("grader/serve/", "grader/cli/commands/serve.py"))]
    assert found["imported"] == len(modules) and "cannot import" not in proc.stderr
    assert found["functions"] > 1000 and found["calls"] >= 15  # it did run: every function, most calls kept


def test_the_student_install_lists_the_students_commands_and_its_readme_is_the_guide(
    built: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 24: the wheel's 'grader --help' lists check, starter and init-ci only; its README is the student guide."""
    from grader.child.worker import LISTED
    from grader.cli import build_parser
    from grader.config.plugins import get_plugin_manager
    from grader.integrations.studenttool import student_help
    from grader.packs import load_pack

    folder = tmp_path / "wheel"
    with zipfile.ZipFile(built["wheel"]) as zf:
        zf.extractall(folder)
        readme = next(zf.read(n).decode() for n in zf.namelist() if n.endswith("METADATA"))
    pack = load_pack(folder / "g14", "")
    text = student_help(build_parser(get_plugin_manager([]), pack), pack).format_help()  # as main() lists them
    listed = re.findall(r"^    (\S+)", text, re.MULTILINE)  # the commands (their help is indented further)
    assert listed == ["check", "starter", "init-ci"], text
    assert "grade submissions" not in text and "Check your chapter G14 work" in text
    repo_help = student_help(build_parser(get_plugin_manager([]), find_pack()), find_pack()).format_help()
    assert "grade submissions and write reports" in repo_help and "build-student-package" in repo_help
    for heading in ("## Install", "## Start and check", "## pytest", "## Notebooks", "## CI", "## What your file may"):
        assert heading in readme, heading
    assert all(f" {m} " in readme or f"`{m}`" in readme or f"`{m} " in readme or f" {m}`" in readme for m in LISTED)
    assert "hidden checks" in readme and "For instructors" not in readme and "Security" not in readme
