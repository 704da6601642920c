"""The public checks file: what `grader check` runs where the specs are not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, SPECS, SUBMISSIONS
from spec_totals import G14

from grader.packs import find_pack
from grader.packs.public import decode, encode

BUNDLE = find_pack().public


def test_the_shipped_file_is_up_to_date(cli, tmp_path: Path) -> None:
    """A spec or reference change must come with 'grader publish' (this test says so)."""
    code, out, err = cli("publish", "--out", tmp_path / "public.json")
    assert code == 0, err
    assert out.strip() == (
        f"{tmp_path / 'public.json'}: {G14.visible_checks} visible checks, prepared; {G14.hidden_checks} hidden checks left out; "
        "45 catalogued mistakes' results on them, for diagnosis"
    )
    assert (tmp_path / "public.json").read_bytes() == BUNDLE.read_bytes(), (
        "exercises/public.json is stale: run 'grader publish' and commit it"
    )


def test_it_holds_only_visible_checks() -> None:
    data = json.loads(BUNDLE.read_text())
    visible = set()
    hidden = set()
    for spec in sorted(SPECS.glob("*.yaml")):
        import yaml

        for check in yaml.safe_load(spec.read_text())["checks"]:
            (visible if check.get("visibility") == "visible" else hidden).add(check["id"])
    published = {c["id"] for e in data["exercises"] for c in e["checks"]}
    assert published == visible
    assert not published & hidden
    assert data["hidden_count"] == G14.hidden_checks


def test_encode_round_trip() -> None:
    import numpy as np

    value = {"outputs": np.array([[1.5, float("nan")]]), "shape": (3, 5), "n": 7, "names": ["a"]}
    back = decode(json.loads(json.dumps(encode(value))))
    assert back["shape"] == (3, 5) and back["n"] == 7 and back["names"] == ["a"]
    assert back["outputs"].dtype == np.float64 and back["outputs"][0, 0] == 1.5 and np.isnan(back["outputs"][0, 1])
    with pytest.raises(TypeError):
        encode({"x": object()})


@pytest.mark.parametrize("name", ["correct_numpy", "mask_after_softmax", "mib_decimal", "starter"])
def test_check_in_a_student_folder_matches_the_repository(cli, tmp_path: Path, monkeypatch, name: str) -> None:
    source = SUBMISSIONS / name / "attention.py"
    code_repo, out_repo, _ = cli("check", source, "--no-diagnosis")
    student = tmp_path / "student"
    student.mkdir()
    (student / "attention.py").write_bytes(source.read_bytes())
    monkeypatch.chdir(student)
    code, out, err = cli("check", "attention.py", "--no-diagnosis")
    assert (code, out) == (code_repo, out_repo.replace(str(source), "attention.py")), err
    assert out.splitlines()[-1].endswith("; 36 hidden checks run at grading")


def test_public_option_and_a_broken_file(cli, tmp_path: Path) -> None:
    bad = tmp_path / "public.json"
    bad.write_text("{}")
    code, out, err = cli("check", SUBMISSIONS / "correct_numpy" / "attention.py", "--public", bad)
    assert code == 3
    assert err.strip() == f"grader: error: {bad}: not a public-checks file of format 1; run 'grader publish' again"
    code, out, err = cli("check", SUBMISSIONS / "correct_numpy" / "attention.py", "--public", BUNDLE)
    assert code == 0 and "23 passed, 0 failed" in out


def test_check_names_the_likely_mistake_offline_from_the_shipped_data(cli, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A student's folder: no specs, no reference, no mutants; the diagnosis comes from the public file."""
    import shutil

    shutil.copy(ROOT / "reference" / "mutants" / "divide_by_dk" / "attention.py", tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRADER_CACHE_DIR", "")
    code, out, err = cli("check", "attention.py")
    assert code == 1, err
    text = " ".join(out.split())
    assert "as it does): The scores are divided by d_k instead of sqrt(d_k)" in text
    assert f"visible checks: {G14.visible_points - 2:g}/{G14.visible_points:g} points" in text
    code, out, _ = cli("check", "attention.py", "--no-diagnosis")
    assert "likely mistake" not in out
