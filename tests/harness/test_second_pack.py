"""A second course pack (tests/packs/r3) through the same CLI: nothing of G14 leaks into it.

R3 has another chapter name and title, another submission file (``activations.py``),
other functions (``relu``, ``relu_grad``) and a check kind of its own
(``nondecreasing``, in the pack's plugin ``kinds.py``, loaded by path).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

PACK = ROOT / "tests" / "packs" / "r3"
TITLE = "Rectifiers and their gradients"


def _texts(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix != ".sqlite"
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import contextlib
    import io
    import os

    from grader.cli import main

    out = tmp_path_factory.mktemp("r3")
    stdout, stderr = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(
                ["grade", "--pack", str(PACK), str(PACK / "submissions"), "--out", str(out), "-q", "--similarity"]
            )
    finally:
        os.chdir(old)
    return {
        "code": code,
        "out": out,
        "stdout": stdout.getvalue(),
        "stderr": stderr.getvalue(),
        "results": json.loads((out / "results.json").read_text(encoding="utf-8")),
    }


def test_grade_scores_the_samples_with_the_packs_own_kind(graded: dict) -> None:
    assert graded["code"] == 0, graded["stderr"]
    by_id = {s["id"]: s for s in graded["results"]["submissions"]}
    assert {sid: (s["score"], s["max_score"], s["status"]) for sid, s in by_id.items()} == {
        "right": (6.0, 6.0, "graded"),
        "wrong": (2.0, 6.0, "graded"),
    }
    checks = {c["id"]: c for c in by_id["wrong"]["exercises"][0]["checks"]}
    # |x| instead of max(x, 0): the pack's own kind sees the result go down on sorted inputs.
    assert checks["relu-monotone"]["status"] == "failed"
    assert checks["relu-monotone"]["message"].startswith("the result goes down from position 0 to 1")
    assert checks["grad-hand"]["status"] == "passed" and checks["relu-empty"]["status"] == "passed"
    assert by_id["right"]["path"].endswith("submissions/right")


def test_pages_exports_and_terminal_name_the_pack_never_g14(graded: dict) -> None:
    texts = _texts(graded["out"])
    assert {
        "index.html",
        "right.html",
        "wrong.html",
        "summary.html",
        "results.json",
        "junit.xml",
        "gradebook.csv",
        "similarity.html",
        "gradescope/wrong.json",
    } <= set(texts)
    for name, text in texts.items():
        assert "G14" not in text and "attention" not in text.lower(), name
    for page in ("right.html", "wrong.html"):
        assert f'<p class="sub">{TITLE}</p>' in texts[page] and "<h1>Chapter R3 feedback:" in texts[page]
    assert "<h1>Chapter R3: class results</h1>" in texts["index.html"]
    assert "<h1>Chapter R3: class summary</h1>" in texts["summary.html"]
    assert "<h1>Chapter R3: similarity (staff only)</h1>" in texts["similarity.html"]
    assert texts["gradebook.csv"].splitlines()[0] == '"student","R3.01","total","max_score","status"'
    terminal = graded["stdout"] + graded["stderr"]
    assert graded["stdout"].splitlines()[0] == f"R3: {TITLE}"
    assert "G14" not in terminal and "attention" not in terminal


def test_check_validate_audit_and_publish(cli, tmp_path: Path) -> None:  # noqa: ANN001
    code, out, err = cli("check", "--pack", PACK, PACK / "submissions" / "wrong" / "activations.py")
    assert code == 1, err
    assert out.splitlines()[0] == "R3.01 Rectified linear units: 1/3"
    assert "fail as it does): relu flips negative inputs to positive instead of cutting them to zero." in " ".join(
        out.split()
    )
    assert "visible checks: 1/3 points; 2 hidden checks run at grading" in out
    assert "G14" not in out + err and "attention" not in out + err

    code, out, err = cli("validate", "--pack", PACK)
    assert (code, out.splitlines()) == (
        0,
        ["specs: 1 exercises, 5 checks; 2 hand values agree with the reference", "reference scores 6/6: valid"],
    ), err

    code, out, err = cli("audit", "--pack", PACK)
    assert code == 0, err
    assert out.splitlines()[0] == (
        "audit of tests/packs/r3/mutants/catalogue.yaml: 2 mutants, 1 correct variants; 1 exercises, 5 checks"
    )
    assert out.splitlines()[-1].endswith(": OK") and "G14" not in out

    code, out, err = cli("publish", "--pack", PACK, "--out", tmp_path / "public.json")
    assert code == 0, err
    assert out.strip() == (
        f"{tmp_path / 'public.json'}: 3 visible checks, prepared; 2 hidden checks left out; "
        "2 catalogued mistakes' results on them, for diagnosis"
    )
    assert (tmp_path / "public.json").read_bytes() == (PACK / "public.json").read_bytes(), (
        "tests/packs/r3/public.json is stale: run 'grader publish --pack tests/packs/r3' and commit it"
    )
    # A student's folder: no specs there, so check runs the pack's public checks.
    student = tmp_path / "student"
    student.mkdir()
    (student / "activations.py").write_text((PACK / "submissions" / "right" / "activations.py").read_text())
    code, out, err = cli("check", "--pack", PACK, student / "activations.py", "--public", tmp_path / "public.json")
    assert code == 0 and "3 passed, 0 failed" in out, err


def test_starter_and_ci_files_name_the_packs_file(cli, tmp_path: Path) -> None:  # noqa: ANN001
    code, out, err = cli("starter", tmp_path, "--pack", PACK)
    assert code == 0, err
    assert (tmp_path / "activations.py").read_bytes() == (PACK / "starter" / "activations.py").read_bytes()
    assert "fill in the two functions" in out
    code, out, err = cli("init-ci", "github", "--dir", tmp_path, "--pack", PACK, "--package", "r3-grader==1.0")
    assert code == 0, err
    workflow = (tmp_path / ".github" / "workflows" / "r3-checks.yml").read_text()
    assert "name: R3 checks" in workflow and "grader check activations.py" in workflow
    assert 'pip install "r3-grader==1.0"' in workflow and "G14" not in workflow and "attention" not in workflow


def test_the_manifest_is_checked_key_by_key(cli, tmp_path: Path) -> None:  # noqa: ANN001
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "course.yaml").write_text(
        (PACK / "course.yaml").read_text().replace("file: activations.py", "file: activations.txt")
    )
    code, out, err = cli("validate", "--pack", bad)
    assert code == 3
    assert err.strip().startswith(
        f"grader: error: {bad / 'course.yaml'}: submission.file: 'activations.txt' does not match"
    )
    assert err.strip().endswith("; give the file students hand in, e.g. solution.py")
    code, out, err = cli("validate", "--pack", tmp_path / "nowhere")
    assert code == 3 and "no such folder and no installed course pack of that name" in err


@pytest.mark.slow
def test_the_student_package_holds_the_packs_public_part_only(cli, tmp_path: Path) -> None:  # noqa: ANN001
    import zipfile

    code, out, err = cli("build-student-package", "--pack", PACK, "--out", tmp_path)
    assert code == 0, err
    (wheel,) = tmp_path.glob("r3_grader-0.1.0-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = zf.read("r3_grader-0.1.0.dist-info/entry_points.txt").decode()
        assert json.loads(zf.read("r3/public.json"))["hidden_count"] == 2
    assert sorted(n for n in names if n.startswith("r3/")) == [
        "r3/__init__.py",
        "r3/course.yaml",
        "r3/kinds.py",
        "r3/public.json",
        "r3/starter/activations.py",
    ]
    assert not [n for n in names if n.startswith("g14/")]
    assert "[grader.packs]\nr3 = r3" in entry_points


def test_validate_holds_the_specs_to_the_manifest(cli, tmp_path: Path) -> None:  # noqa: ANN001
    import shutil

    pack = tmp_path / "r3"
    shutil.copytree(PACK, pack, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = (pack / "course.yaml").read_text()
    (pack / "course.yaml").write_text(
        manifest.replace("R3.01: Rectified linear units", "R3.01: Rectifiers").replace(
            "functions: [relu, relu_grad]", "functions: [relu]"
        )
    )
    code, out, err = cli("validate", "--pack", pack)
    assert code == 1, err
    assert out.splitlines()[1:] == [
        f"FAIL R3.01: checks call relu_grad, not among the functions of {pack / 'course.yaml'} (relu); list them there",
        "FAIL R3.01: its section is 'Rectified linear units' but course.yaml's sections say 'Rectifiers'; make "
        "them agree",
        "reference scores 6/6: INVALID",
    ]


def test_finding_a_pack() -> None:
    from grader.packs import find_pack, load_pack, pack_option

    assert pack_option(["grade", "x", "--pack", "tests/packs/r3"]) == "tests/packs/r3"
    assert pack_option(["check", "--pack=r3", "f.py"]) == "r3" and pack_option(["check", "f.py"]) is None
    assert pack_option(["check", "--", "--pack", "x"]) is None
    from grader.packs import installed_packs

    course = find_pack()  # the course the tests run for: G14, the repository's root (GRADER_COURSE, conftest.py)
    assert (course.id, course.chapter, course.submission, course.package, course.root) == (
        "g14",
        "G14",
        "attention.py",
        "",
        ROOT,
    )
    assert find_pack(str(ROOT)) is course  # by its folder
    assert "g14" not in installed_packs()  # the harness distribution holds no course (issue 25)
    r3 = load_pack(PACK)
    assert (r3.id, r3.title, r3.submission, r3.module, r3.notebook, r3.functions, r3.package) == (
        "r3",
        TITLE,
        "activations.py",
        "activations",
        "activations.ipynb",
        ("relu", "relu_grad"),
        "",
    )
    assert r3.specs == PACK / "specs" and r3.plugin == PACK / "kinds.py" and find_pack(str(PACK)) is r3
