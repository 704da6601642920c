"""What a new instructor writing a pack, and a student with an incomplete file, read: one line naming the fix.

A manifest key missing or unknown names the key and what to write; a path in
the manifest may not leave the pack's folder (absolute, ``..``, or a symbolic
link out): the pack is what the student package and the audit take, and a
path out of it would grade with files nobody reviewed with the pack.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import ROOT

PACK = ROOT / "tests" / "packs" / "r3"


def _pack(tmp_path: Path, old: str = "", new: str = "") -> Path:
    pack = tmp_path / "r3"
    shutil.copytree(PACK, pack, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = pack / "course.yaml"
    text = manifest.read_text()
    assert old in text
    manifest.write_text(text.replace(old, new))
    return pack


def _one_line(cli, pack: Path) -> str:  # noqa: ANN001
    code, out, err = cli("validate", "--pack", pack)
    assert code == 3 and out == "", (code, out, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err.strip().removeprefix("grader: error: ")


def test_a_missing_key_is_named_with_what_to_write(cli, tmp_path: Path) -> None:  # noqa: ANN001
    pack = _pack(tmp_path, "chapter: R3\n", "")
    assert _one_line(cli, pack) == f"{pack / 'course.yaml'}: chapter: missing; give the chapter's short name, e.g. CH3"
    pack = _pack(tmp_path / "b", "  file: activations.py\n", "  module: activations\n")
    assert _one_line(cli, pack) == (
        f"{pack / 'course.yaml'}: submission.file: missing; give the file students hand in, e.g. solution.py"
    )


def test_an_unknown_key_is_named_with_the_keys_there_are(cli, tmp_path: Path) -> None:  # noqa: ANN001
    pack = _pack(tmp_path, "plugin: kinds.py\n", "plugin: kinds.py\ncolour: blue\n")
    assert _one_line(cli, pack) == (
        f"{pack / 'course.yaml'}: colour: not a key of the manifest; remove it or fix its spelling (the keys are "
        "id, title, chapter, chapter_url, sections, submission, functions, imports, distribution, specs, reference, "
        "starter, mutants, samples, public, plugin)"
    )
    pack = _pack(tmp_path / "b", "  file: activations.py\n", "  file: activations.py\n  fiel: x.py\n")
    assert _one_line(cli, pack) == (
        f"{pack / 'course.yaml'}: submission.fiel: not a key of the manifest here; remove it or fix its spelling "
        "(the keys are file, module, notebook)"
    )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (
            "../../r3/reference/activations.py",
            "leads out of the pack's folder; give a path relative to {root}, e.g. reference/activations.py",
        ),
        ("{outside}", "is an absolute path; give a path relative to {root}, e.g. reference/activations.py"),
    ],
)
def test_a_path_out_of_the_pack_is_refused(cli, tmp_path: Path, value: str, words: str) -> None:  # noqa: ANN001
    outside = tmp_path / "elsewhere" / "activations.py"  # a real file: refused for where it is, not as missing
    outside.parent.mkdir()
    shutil.copyfile(PACK / "reference" / "activations.py", outside)
    shutil.copytree(PACK, tmp_path / "r3", ignore=shutil.ignore_patterns("__pycache__"))  # what ../r3/ reaches
    pack = _pack(tmp_path / "p", "reference: reference/activations.py", "reference: " + value.format(outside=outside))
    shown = value.format(outside=outside)
    assert _one_line(cli, pack) == f"{pack / 'course.yaml'}: reference: '{shown}' " + words.format(root=pack)


def test_a_symbolic_link_out_of_the_pack_is_refused(cli, tmp_path: Path) -> None:  # noqa: ANN001
    pack = _pack(tmp_path)
    (pack / "reference" / "activations.py").unlink()
    (pack / "reference" / "activations.py").symlink_to(PACK / "reference" / "activations.py")
    assert _one_line(cli, pack) == (
        f"{pack / 'course.yaml'}: reference: 'reference/activations.py' leads out of the pack's folder through a "
        "symbolic link; copy what it links to into the pack"
    )
    pack = _pack(tmp_path / "b")
    shutil.rmtree(pack / "specs")
    (pack / "specs").symlink_to(PACK / "specs", target_is_directory=True)
    assert _one_line(cli, pack).startswith(f"{pack / 'course.yaml'}: specs: 'specs' leads out of the pack's folder")


def test_a_link_inside_the_pack_and_the_pack_itself_still_load(cli, tmp_path: Path) -> None:  # noqa: ANN001
    pack = _pack(tmp_path)
    (pack / "ref").symlink_to(pack / "reference", target_is_directory=True)  # stays inside: fine
    (pack / "course.yaml").write_text(
        (pack / "course.yaml").read_text().replace("reference: reference/", "reference: ref/")
    )
    code, out, err = cli("validate", "--pack", pack)
    assert code == 0 and out.splitlines()[-1] == "reference scores 6/6: valid", err


def test_check_names_a_function_the_file_does_not_define(cli, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "100")  # the line is cut to the terminal's width: the default one, whoever runs this
    student = tmp_path / "activations.py"
    student.write_text("def relu(xs):\n    return [x if x > 0 else 0.0 for x in xs]\n")
    code, out, err = cli("check", "--pack", PACK, student)
    assert code == 1
    lines = out.splitlines()
    assert "  TODO    relu_grad: 1 check not attempted (R3.01): activations.py defines no function relu_grad" in lines
    assert not any("still raises NotImplementedError" in line for line in lines)
    assert lines[-2:] == [
        "2 passed, 0 failed, 1 not attempted",
        "visible checks: 2/3 points; 2 hidden checks run at grading",
    ]


@pytest.mark.slow
def test_the_student_package_of_another_pack_describes_that_pack(cli, tmp_path: Path) -> None:  # noqa: ANN001
    import zipfile

    code, out, err = cli("build-student-package", "--pack", PACK, "--out", tmp_path)
    assert code == 0, err
    (wheel,) = tmp_path.glob("r3_grader-0.1.0-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read("r3_grader-0.1.0.dist-info/METADATA").decode()
    assert "Summary: R3 (Rectifiers and their gradients): visible checks for students' activations.py" in metadata
    readme = metadata.split("\n\n", 1)[1]
    assert readme.lstrip().startswith("# R3 grader for students")
    assert "grader check activations.py       # or activations.ipynb" in readme  # the guide (student_guide)
    assert "(`relu`, `relu_grad`)" in readme and "python -m pip install r3-grader" in readme
    assert "G14" not in metadata and "attention" not in metadata


def test_build_student_package_says_what_to_install(cli, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    import importlib.util

    from grader.packs.student import _build_needs

    assert _build_needs(ROOT) == ["build", "'setuptools>=68'"]  # pyproject.toml's [build-system] requires
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "build" else real(name, *a))
    code, out, err = cli("build-student-package", "--pack", PACK, "--out", tmp_path / "dist")
    assert code == 3 and err == (
        "grader: error: build-student-package needs the 'build' package in this environment (it builds offline, "
        "with this environment's backend): pip install build 'setuptools>=68'\n"
    )
    assert not (tmp_path / "dist").exists()


@pytest.mark.parametrize(
    ("plugin", "hook"),
    [
        ("judge", "grader_judge_check"),
        ("scoring", "grader_score_exercise"),
        ("submission", "grader_locate_submissions"),
        ("yaml_spec", "grader_load_exercise"),
        ("reference", "grader_load_reference"),
    ],
)
def test_blocking_a_builtin_nothing_replaces_is_one_line(cli, tmp_path: Path, plugin: str, hook: str) -> None:  # noqa: ANN001
    code, out, err = cli(
        "grade", "--pack", PACK, PACK / "submissions", "--out", tmp_path / "o", "-q", "-p", f"no:{plugin}"
    )
    assert code == 2 and out == ""
    assert err == (
        f"grader: error: -p no:{plugin}: then no plugin answers {hook} (the {plugin} plugin did); unblock it, "
        f"or load one that implements {hook} with -p MODULE\n"
    )
    assert not (tmp_path / "o").exists()


def test_a_block_naming_no_plugin_is_a_warning(cli, tmp_path: Path) -> None:  # noqa: ANN001
    code, out, err = cli("validate", "--pack", PACK, "-p", "no:diagnosys")
    assert code == 0 and out.splitlines()[-1] == "reference scores 6/6: valid"
    assert err.startswith("grader: warning: -p no:diagnosys: no plugin is named 'diagnosys', so nothing was blocked")
    for name in ("diagnosis", "numpy"):  # a built-in, a module: no warning
        code, out, err = cli("validate", "--pack", PACK, "-p", f"no:{name}")
        assert code == 0 and err == "", (name, err)
    code, out, err = cli("validate", "--pack", PACK, "-p", "no:r3")  # the pack's plugin: blocked indeed
    assert code == 3 and "warning" not in err and "unknown check kind 'nondecreasing'" in err


def test_check_warns_about_a_file_another_pack_grades(cli, tmp_path: Path) -> None:  # noqa: ANN001
    student = tmp_path / "norms.py"
    student.write_text((PACK / "submissions" / "right" / "activations.py").read_text())
    code, out, err = cli("check", "--pack", PACK, student)
    assert err == (
        f"grader: warning: {student}: the course r3 (R3) grades activations.py; pass --pack DIR if norms.py "
        "is another course's\n"
    )
    assert out.splitlines()[-2] == "3 passed, 0 failed"  # still checked, as the pack's file
    right = tmp_path / "activations.py"
    right.write_text(student.read_text())
    code, out, err = cli("check", "--pack", PACK, right)
    assert code == 0 and err == ""


@pytest.mark.parametrize(
    ("text", "environ", "words"),
    [
        ("²/3", {}, "--shard ²/3: K must be a whole number from 1 to 3"),  # isdigit() took it; int() refused
        ("١/3", {}, "--shard ١/3: K must be a whole number from 1 to 3"),  # int() read it as 1
        ("1/³", {}, "--shard 1/³: give K/N"),
        ("auto/3", {"JOB_COMPLETION_INDEX": "²"}, "JOB_COMPLETION_INDEX='²' (a Kubernetes Indexed Job) is not a whole"),
        (
            "auto/3",
            {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "١"},
            "SLURM_ARRAY_TASK_MIN='١' is not a whole",
        ),
    ],
)
def test_shard_numbers_are_ascii_digits(text: str, environ: dict, words: str) -> None:
    from grader.errors import UsageError
    from grader.grading.slices import parse_shard

    with pytest.raises(UsageError) as info:
        parse_shard(text, environ)
    assert words in str(info.value)
    assert (parse_shard("2/3", {}).k, parse_shard("auto/3", {"JOB_COMPLETION_INDEX": "2"}).k) == (2, 3)


def test_a_superscript_shard_is_one_line_naming_the_variable(cli, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "²")
    code, out, err = cli("grade", "--pack", PACK, PACK / "submissions", "--shard", "auto/3", "--out", tmp_path / "o")
    assert code == 2 and err == (
        "grader: error: --shard auto/3: JOB_COMPLETION_INDEX='²' (a Kubernetes Indexed Job) is not a whole number\n"
    )


def test_a_pack_id_may_not_be_a_builtins_name(cli, tmp_path: Path) -> None:  # noqa: ANN001
    pack = _pack(tmp_path, "id: r3\n", "id: judge\n")  # its plugin would be registered under 'judge': never loaded
    assert _one_line(cli, pack) == (
        f"{pack / 'course.yaml'}: id: 'judge' is the name of a built-in plugin; give the course another id, "
        "e.g. judge-pack"
    )


def test_starter_and_init_ci_never_write_through_a_link(cli, tmp_path: Path) -> None:  # noqa: ANN001
    target = tmp_path / "elsewhere.py"  # dangling: 'exists()' is False, yet a copy would create it
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "activations.py").symlink_to(target)
    code, out, err = cli("starter", "--pack", PACK, tmp_path / "st")
    assert code == 2 and not target.exists()
    assert err == (
        f"grader: error: {tmp_path / 'st' / 'activations.py'}: a symbolic link; the starter writes only a file of "
        "its own (remove the link)\n"
    )
    workflow = tmp_path / "repo" / ".github" / "workflows" / "r3-checks.yml"
    workflow.parent.mkdir(parents=True)
    workflow.symlink_to(target)
    code, out, err = cli(
        "init-ci", "github", "--pack", PACK, "--dir", tmp_path / "repo", "--force", "--package", "dist/r3.whl"
    )
    assert code == 2 and not target.exists()
    assert err == f"grader: error: {workflow}: a symbolic link; remove it (init-ci writes only files of its own)\n"


def test_two_schedulers_indices_must_agree() -> None:
    from grader.errors import UsageError
    from grader.grading.slices import parse_shard

    agree = parse_shard("auto/3", {"JOB_COMPLETION_INDEX": "1", "GRADER_SHARD_INDEX": "1"})
    assert (agree.k, agree.n, agree.source) == (2, 3, "JOB_COMPLETION_INDEX")
    with pytest.raises(UsageError) as info:
        parse_shard("auto/3", {"JOB_COMPLETION_INDEX": "1", "SLURM_ARRAY_TASK_ID": "2"})
    assert str(info.value) == (
        "--shard auto/3: JOB_COMPLETION_INDEX says shard 2 but SLURM_ARRAY_TASK_ID says shard 3; unset the "
        "variable that is not this job's, or give K/N"
    )


@pytest.mark.slow
def test_build_student_package_never_writes_through_a_link(cli, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "dist"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere.whl"
    (out / "r3_grader-0.1.0-py3-none-any.whl").symlink_to(elsewhere)
    code, _, err = cli("build-student-package", "--pack", PACK, "--out", out)
    assert (
        code == 3
        and not elsewhere.exists()
        and sorted(p.name for p in out.iterdir()) == ["r3_grader-0.1.0-py3-none-any.whl"]
    )
    assert err == (
        f"grader: error: {out / 'r3_grader-0.1.0-py3-none-any.whl'}: a symbolic link where the artifact goes; "
        "remove it\n"
    )
