"""The diagnosis plugin (``grader.builtin.diagnosis``): name the known mistake.

A sample of catalogued mutants is graded like a class (fixture
``diagnosed``); each report must name the mutant's misconception and its
chapter section, in the JSON and in the HTML, on hidden checks too, without
showing a hidden input or expected value. The independently written samples
in ``submissions/`` must be recognized as well.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, SUBMISSIONS
from markupsafe import escape

from grader.builtin.diagnosis import DiagnosisTable, same_data
from grader.config.core import Config
from grader.config.parser import build_parser
from grader.config.plugins import get_plugin_manager
from grader.markers import hookimpl
from grader.models import Call, CallResult, Check
from grader.packs.catalogue import Catalogue, Entry, load_catalogue, run_entries

MUTANTS = ROOT / "reference" / "mutants"
CATALOGUE = {e.name: e for e in load_catalogue(MUTANTS).entries}

# mutant -> a check whose report must carry the mutant's diagnosis: (exercise, check, visibility)
SAMPLE = {
    "mask_after_softmax": ("G14.03", "causal-random", "hidden"),
    "no_sqrt_dk": ("G14.02", "random-outputs", "hidden"),
    "k_reshaped_not_transposed": ("G14.01", "unequal-counts-and-widths", "hidden"),
    "fill_minus_1e9": ("G14.06", "masked-scores-above-allowed", "hidden"),
    "causal_excludes_self": ("G14.06", "causal-rows-sum-to-one", "hidden"),
    "mutates_input": ("G14.06", "softmax-leaves-scores-unchanged", "visible"),
    "all_masked_zeros": ("G14.06", "rejects-all-masked", "visible"),
    "hardcoded_answers": ("G14.04", "random-compare", "hidden"),
    "backward_drops_pk": ("G14.04", "finite-difference", "hidden"),
    "float16_arithmetic": ("G14.02", "random-softmax", "hidden"),
    "float32_arithmetic": ("G14.06", "rows-sum-to-one", "visible"),
    "backward_overwrites_u": ("G14.04", "backward-leaves-inputs-unchanged", "visible"),
    "mib_decimal": ("G14.05", "one-mib", "hidden"),
}


def _checks(sub: dict) -> dict[tuple[str, str], dict]:
    return {(e["id"], c["id"]): c for e in sub["exercises"] for c in e["checks"]}


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from grader.cli import main

    out = tmp_path_factory.mktemp("diagnosed")
    code = main(["grade", *(str(MUTANTS / name) for name in SAMPLE), "--out", str(out), "-q"])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    return {"out": out, "by_id": {s["id"]: s for s in results["submissions"]}}


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_json_names_the_misconception_and_section(diagnosed: dict, name: str) -> None:
    entry = CATALOGUE[name]
    exercise, check_id, visibility = SAMPLE[name]
    check = _checks(diagnosed["by_id"][name])[(exercise, check_id)]
    assert check["status"] == "failed" and check["visibility"] == visibility
    assert {"misconception": entry.misconception, "section": entry.section} in [
        {k: d[k] for k in ("misconception", "section")} for d in check["diagnosis"]
    ]
    assert entry.misconception not in check["message"]  # a separate field, not the message


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_html_shows_the_diagnosis_once_per_exercise(diagnosed: dict, name: str) -> None:
    """One likely mistake per exercise, above its failing checks (issue 24): never once per check."""
    entry = CATALOGUE[name]
    exercise, check_id, visibility = SAMPLE[name]
    page = (diagnosed["out"] / f"{name}.html").read_text()
    section = page[page.index(f'<section class="exercise" id="{exercise}">') :]
    section = section[: section.index("</section>")]
    assert section.count('<p class="diagnosis">') == 1
    box = section[section.index('<p class="diagnosis">') :]
    box = box[: box.index("</p>")]
    assert str(escape(entry.misconception)) in box and "as it does):</strong>" in box
    assert f"See the chapter section &ldquo;{escape(entry.section)}&rdquo;." in box
    block = section[section.index(f'<span class="name">{check_id}</span>') :]
    block = block[: block.index('<div class="check')] if '<div class="check' in block else block
    if visibility == "hidden":
        assert '<dl class="details">' not in block


def _collected():  # noqa: ANN202
    from grader.grading import session

    pm = get_plugin_manager(load_entrypoints=False)
    options = build_parser(pm).parse_args(["validate"])
    return session.collect(Config("validate", options, pm))


def _distinctive_numbers(value: object) -> set[str]:
    """Numbers as a report would print them (10 significant digits), when unlikely to appear by chance."""
    found = set()
    flat, stack = [], [value.tolist() if isinstance(value, np.ndarray) else value]
    while stack:  # ragged lists too
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            flat.append(item)
    for x in flat:
        if math.isfinite(x):
            text = repr(float(f"{x:.10g}"))
            if len(text.lstrip("-").replace(".", "").rstrip("0").lstrip("0")) >= 6:
                found.add(text)
    return found


def test_reports_never_show_hidden_inputs_or_expected_values(diagnosed: dict) -> None:
    secrets: set[str] = set()
    for _, items in _collected().checks:
        for pc in items:
            if pc.check.visibility == "visible":
                continue
            secrets.add(pc.prepared.shown_call)
            for call in pc.prepared.calls:
                for arg in call.args:
                    if not isinstance(arg, bool) and isinstance(arg, (list, float)):
                        secrets |= _distinctive_numbers(arg)
            if isinstance(pc.prepared.expected, dict):
                for part in pc.prepared.expected.values():
                    if isinstance(part, np.ndarray) and part.dtype.kind == "f":
                        secrets |= _distinctive_numbers(part)
    assert len(secrets) > 100
    for name in SAMPLE:
        page = (diagnosed["out"] / f"{name}.html").read_text()
        leaked = {s for s in secrets if str(escape(s)) in page}
        assert not leaked, (name, sorted(leaked)[:5])
    # Nor does the JSON (statuses, one-sentence messages, diagnoses).
    results = (diagnosed["out"] / "results.json").read_text()
    assert not {s for s in secrets if s in results}


def test_the_independent_samples_are_recognized(graded: dict) -> None:
    """The samples in submissions/ were written separately from the mutants."""
    want = {
        "no_sqrt_dk": (("G14.02", "random-outputs"), "no_sqrt_dk"),
        "mask_after_softmax": (("G14.06", "masked-scores-above-allowed"), "mask_after_softmax"),
        "masked_row_nan": (("G14.06", "rejects-all-masked"), "all_masked_nan"),
        "mib_decimal": (("G14.05", "mib-n2048"), "mib_decimal"),
        "no_max_subtraction": (("G14.06", "huge-scores"), "no_max_subtraction"),
        "unnormalized_scores": (("G14.01", "unequal-counts-and-widths"), "unnormalized_scores"),
    }
    for sid, (key, mistake) in want.items():
        check = _checks(graded["by_id"][sid])[key]
        assert [d["mistake"] for d in check["diagnosis"]] == [mistake], (sid, key)
    # sqrt_model_width gives the same output when d_v = 1 (sqrt(d_v) = 1), but not on the other checks of
    # G14.01 (d_v = 4, 2): the exercise's evidence singles out no_sqrt_dk, and only it is named.
    one = _checks(graded["by_id"]["no_sqrt_dk"])[("G14.01", "more-queries-than-keys")]["diagnosis"]
    assert [d["mistake"] for d in one] == ["no_sqrt_dk"]
    # Transposition slips that only raise are not in the catalogue: nothing is claimed.
    for sid in ("transposed_shapes", "correct_lists", "correct_numpy", "starter", "syntax_error", "hangs"):
        assert not any("diagnosis" in c for c in _checks(graded["by_id"][sid]).values()), sid


def test_check_prints_the_likely_mistake(cli) -> None:
    code, out, err = cli("check", MUTANTS / "mask_after_softmax" / "attention.py")
    assert code == 1
    text = " ".join(out.split())
    entry = CATALOGUE["mask_after_softmax"]
    # once per exercise that fails: G14.03 (3 failing checks) and G14.06 (4), never once per check
    assert f'likely mistake (all 3 failing checks fail as it does): {entry.misconception} Reread "' in text
    assert "likely mistake (all 4 failing checks fail as it does): the same as G14.03's." in text
    assert text.count("likely mistake") == 2 and "hint:" not in text  # the mistake says what to change


def test_no_diagnosis_option(cli, tmp_path: Path) -> None:
    code, out, err = cli("grade", MUTANTS / "mib_decimal", "--out", tmp_path, "-q", "--no-diagnosis")
    assert code == 0
    assert "diagnosis" not in (tmp_path / "results.json").read_text()
    assert 'class="diagnosis"' not in (tmp_path / "mib_decimal.html").read_text()
    code, out, err = cli("check", MUTANTS / "mib_decimal" / "attention.py", "--no-diagnosis")
    assert code == 1 and "likely mistake" not in out and "mib differs" in out


def test_without_a_catalogue_diagnosis_is_off_unless_asked_for(cli, tmp_path: Path, monkeypatch) -> None:
    pack = tmp_path / "pack"  # the G14 course without its mutants/ (and its samples)
    for part in ("exercises", "reference"):
        shutil.copytree(ROOT / part, pack / part, ignore=shutil.ignore_patterns("mutants", "__pycache__"))
    shutil.copy(ROOT / "course.yaml", pack / "course.yaml")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("check", SUBMISSIONS / "mib_decimal" / "attention.py", "--pack", pack)
    assert code == 1 and "mib differs" in out and "likely mistake" not in out and err == ""
    code, out, err = cli(
        "check", SUBMISSIONS / "mib_decimal" / "attention.py", "--pack", pack, "--mutants", tmp_path / "nope"
    )
    assert code == 3 and f"{tmp_path / 'nope' / 'catalogue.yaml'}: catalogue not found" in err


# --- matching ---------------------------------------------------------------------------------


def test_same_data() -> None:
    assert same_data([[1.0, 2.0]], [[1.0, 2.0 + 1e-9]], 1e-6, 1e-9)
    assert not same_data([[1.0, 2.0]], [[1.0, 2.1]], 1e-6, 1e-9)
    assert same_data([math.nan, math.inf, -math.inf], [math.nan, math.inf, -math.inf], 1e-6, 1e-9)
    assert not same_data([math.nan], [0.0], 1e-6, 1e-9) and not same_data([math.inf], [-math.inf], 1e-6, 1e-9)
    assert not same_data([1.0, 2.0], [1.0, 2.0, 3.0], 1e-6, 1e-9) and not same_data([[1.0]], [1.0], 1e-6, 1e-9)
    assert same_data(5, 5.0, 0.0, 0.0) and not same_data(True, 1, 0.0, 0.0) and same_data(None, None, 0, 0)


def _table(theirs: list[CallResult]) -> tuple[DiagnosisTable, Check]:
    entry = Entry(
        "m",
        "mutant",
        "mutants/m/attention.py",
        "0" * 64,
        "Masks after softmax.",
        "Mask before normalization",
        ("G14.03",),
    )
    check = Check("c", "compare", "softmax", 1.0, "hidden", "hint", 2.0, params={"rtol": 0, "atol": 0})
    catalogue = Catalogue("mutants/catalogue.yaml", (entry,), chapter_url="https://example.org/g14")
    return DiagnosisTable({("G14.03", "c"): [(entry, tuple(theirs))]}, catalogue), check


def test_diagnose_needs_every_call_to_match() -> None:
    table, check = _table([CallResult("returned", value=[0.25, 0.0, 0.75])])
    (d,) = table.diagnose("G14.03", check, [CallResult("returned", value=[0.25 + 1e-12, 0.0, 0.75])])
    assert (d.mistake, d.misconception, d.section) == ("m", "Masks after softmax.", "Mask before normalization")
    assert d.url == "https://example.org/g14#mask-before-normalization"
    assert table.diagnose("G14.03", check, [CallResult("returned", value=[0.3, 0.0, 0.7])]) == ()
    assert table.diagnose("G14.99", check, [CallResult("returned", value=[0.25, 0.0, 0.75])]) == ()
    assert table.diagnose("G14.03", check, [CallResult("raised", error_type="ValueError")]) == ()
    changed = CallResult("returned", value=[0.25, 0.0, 0.75], mutated_args=(0,))
    assert table.diagnose("G14.03", check, [changed]) == ()  # the mutant left its arguments alone


# --- running the catalogue ----------------------------------------------------------------------


class _Counter:
    def __init__(self) -> None:
        self.runs: list[tuple[str, int]] = []

    @hookimpl(wrapper=True)
    def grader_run_calls(self, submission, calls, config):  # noqa: ANN001, ANN201
        self.runs.append((submission.id, len(calls)))
        return (yield)


def test_catalogue_runs_through_the_runner_hook_and_is_cached(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    pm = get_plugin_manager(load_entrypoints=False)
    counter = _Counter()
    pm.register(counter)
    config = Config("check", argparse.Namespace(), pm)
    entries = [CATALOGUE["mib_decimal"], CATALOGUE["correct_lists"]]
    calls = [Call("bytes_to_mib", (1048576,), 2.0), Call("softmax", ([0.0, math.log(3.0)],), 2.0)]

    def data(outcomes):  # noqa: ANN001, ANN202
        return {k: [(r.status, r.value, r.error_type) for r in v.results] for k, v in outcomes.items()}

    first = run_entries(config, entries, calls)
    assert sorted(counter.runs) == [("correct_lists", 2), ("mib_decimal", 2)]
    assert first["mib_decimal"].results[0].value == 1.048576 and first["correct_lists"].results[0].value == 1.0
    counter.runs.clear()
    again = run_entries(config, entries, calls)
    assert counter.runs == [] and data(again) == data(first)
    more = run_entries(config, entries, [*calls, Call("bytes_to_mib", (-1,), 2.0)])
    assert sorted(counter.runs) == [("correct_lists", 1), ("mib_decimal", 1)]
    assert (
        more["mib_decimal"].results[2].status == "raised"
        and data(more)["mib_decimal"][:2] == data(first)["mib_decimal"]
    )
    for path in (tmp_path / "cache" / "catalogue").iterdir():
        path.write_text("{not json")  # a damaged cache is ignored, and rewritten
    counter.runs.clear()
    assert data(run_entries(config, entries, calls)) == data(first) and len(counter.runs) == 2
    monkeypatch.setenv("GRADER_CACHE_DIR", "")  # off
    counter.runs.clear()
    run_entries(config, entries, calls)
    run_entries(config, entries, calls)
    assert len(counter.runs) == 4


def test_results_that_depend_on_timing_are_not_cached(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    slow = tmp_path / "slow" / "attention.py"
    slow.parent.mkdir()
    slow.write_text("import time\n\ndef softmax(scores, allowed=None):\n    time.sleep(5)\n")
    entry = Entry("slow", "mutant", str(slow), "1" * 64, "Sleeps.", "S", ("G14.02",))
    pm = get_plugin_manager(load_entrypoints=False)
    config = Config("check", argparse.Namespace(), pm)
    out = run_entries(config, [entry], [Call("softmax", ([0.0],), 0.2)])
    assert out["slow"].results[0].status == "timeout"
    cached = (
        [json.loads(p.read_text()) for p in (tmp_path / "cache" / "catalogue").glob("*.json")]
        if (tmp_path / "cache" / "catalogue").exists()
        else []
    )
    assert all(not c["results"] for c in cached)


def test_section_urls() -> None:
    catalogue = Catalogue("c.yaml", (), chapter_url="https://example.org/g14/")
    assert catalogue.section_url("The central question: which values should this position combine?") == (
        "https://example.org/g14/#the-central-question-which-values-should-this-position-combine"
    )
    assert Catalogue("c.yaml", ()).section_url("Mask before normalization") == ""
    assert re.fullmatch(r"[a-z0-9_]+", "mask_after_softmax")


def test_diagnoses_survive_the_stored_result_round_trip(tmp_path: Path) -> None:
    """A stored grade (the gradebook) keeps its diagnoses, and a changed catalogue changes its key."""
    import shutil

    from grader.models import CheckResult, Diagnosis, ExerciseResult, SubmissionResult, result_from_dict, result_to_dict
    from grader.packs.catalogue import fingerprint

    d = Diagnosis("mib_decimal", "One MiB taken as 10^6 bytes.", "Count computation", "")
    check = CheckResult("one-mib", "", "failed", 0.0, 1.0, "hidden", "mib differs", "hint", False, (), (d,))
    result = SubmissionResult(
        "s", "p", "0" * 64, "graded", 0.0, 1.0, (ExerciseResult("G14.05", "t", "s", 0.0, 1.0, (check,)),)
    )
    assert result_from_dict(json.loads(json.dumps(result_to_dict(result)))) == result
    copy = tmp_path / "mutants"
    shutil.copytree(MUTANTS, copy)
    before = fingerprint(copy)
    assert before == fingerprint(MUTANTS) and len(before) == 64 and fingerprint(tmp_path) == ""
    (copy / "mib_decimal" / "attention.py").write_text("# changed\n")
    assert fingerprint(copy) != before


# Real implementations (the sample submissions, and tests/real_implementations) and the catalogued
# mistakes each one makes: left out of the catalogue, none may be named in their place (issue 24).
REAL = {
    ROOT / "submissions" / "mask_after_softmax": {"mask_after_softmax"},
    ROOT / "submissions" / "mib_decimal": {"mib_decimal"},
    ROOT / "submissions" / "no_max_subtraction": {"no_max_subtraction"},
    ROOT / "submissions" / "no_sqrt_dk": {"no_sqrt_dk"},
    ROOT / "submissions" / "unnormalized_scores": {"unnormalized_scores"},
    ROOT / "submissions" / "masked_row_nan": {"all_masked_nan"},
    ROOT / "submissions" / "transposed_shapes": set(),
    ROOT / "submissions" / "correct_lists": set(),
    ROOT / "submissions" / "correct_numpy": set(),
    ROOT / "tests" / "real_implementations" / "jacobian_sum": set(),  # zeros, not "every function a constant"
}


@pytest.mark.slow
def test_leave_one_out_over_every_real_implementation_names_nothing_wrong(cli, tmp_path: Path) -> None:
    """Each real implementation graded with its own mistakes left out of the catalogue: no name is left to give."""
    import yaml

    left_out = set().union(*REAL.values())
    folder = tmp_path / "mutants"
    shutil.copytree(MUTANTS, folder, ignore=shutil.ignore_patterns(*left_out, "__pycache__"))
    data = yaml.safe_load((MUTANTS / "catalogue.yaml").read_text())
    data["entries"] = [e for e in data["entries"] if e["name"] not in left_out]
    (folder / "catalogue.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    klass = tmp_path / "class"
    for path in REAL:
        shutil.copytree(path, klass / path.name)
    code, _, err = cli("grade", klass, "--out", tmp_path / "out", "--mutants", folder, "-q")
    assert code == 0, err
    results = json.loads((tmp_path / "out" / "results.json").read_text())["submissions"]
    named = {
        (s["id"], e["id"], c["id"]): [d["mistake"] for d in c["diagnosis"]]
        for s in results
        for e in s["exercises"]
        for c in e["checks"]
        if c.get("diagnosis")
    }
    assert named == {}
    assert len(results) == len(REAL) and all(s["status"] == "graded" for s in results)
    jacobian = next(s for s in results if s["id"] == "jacobian_sum")
    assert [e["score"] for e in jacobian["exercises"]] == [14, 11, 14, 0, 10, 27]  # only G14.04 fails
    # With the whole catalogue, the file of constants is still named (its whole file fits it).
    code, _, err = cli("grade", MUTANTS / "constant_outputs", "--out", tmp_path / "const", "-q")
    sub = json.loads((tmp_path / "const" / "results.json").read_text())["submissions"][0]
    names = {d["mistake"] for e in sub["exercises"] for c in e["checks"] for d in c.get("diagnosis", [])}
    assert names == {"constant_outputs"}
