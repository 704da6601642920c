"""The checks are exactly as strong as the chapter (issue 12).

* Tolerances follow from the inputs: every standard float64 route passes every compare and
  literal check, and no check asks more than float64 can promise on its inputs.
* No vacuous points: the degenerate files (constants, uniform weights, ValueError always) earn
  only their shape and honest ValueError points.
* The scale and the mask are probed where the mistakes bite.
* The new mutants and correct variants score what they should, exercise by exercise.
* Diagnosis names a mistake only when the exercise's evidence singles it out, and the audit
  measures it leave-one-out.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, SPECS
from harness.test_checks import failed, make, passed, prepare
from spec_totals import G14

from grader.builtin.checks import RaisesKind
from grader.builtin.diagnosis import DiagnosisTable, Evidence
from grader.cli import main
from grader.compare import EPS, Mismatch, compare
from grader.config.core import Config
from grader.config.parser import build_parser
from grader.config.plugins import get_plugin_manager
from grader.grading import session
from grader.kinds import FLOOR_KEY, tolerance_of
from grader.models import CallResult, Check
from grader.packs.catalogue import Catalogue, Entry
from grader.readers.yamlfile import parse_yaml

MUTANTS = ROOT / "reference" / "mutants"
EXERCISES = ("G14.01", "G14.02", "G14.03", "G14.04", "G14.05", "G14.06")
FULL = (14, 11, 14, 10, 10, 27)

# Points per exercise, G14.01..G14.06, of the entries issue 12 added (and two earlier variants).
SCORES = {
    "scale_times_sqrt_dk": (6, 8, 9, 10, 10, 23),
    "constant_scale_heads": (6, 6, 7, 10, 10, 23),
    "divide_by_half_dk": (6, 6, 7, 10, 10, 24),
    "scale_after_softmax": (6, 8, 9, 10, 10, 18),
    "row_sums_no_keepdims": (2, 8, 4, 10, 10, 18),
    "causal_uniform_past": (14, 11, 4, 10, 10, 23),
    "mask_never_applied": (14, 11, 0, 10, 10, 20),
    "max_over_masked": (14, 11, 12, 10, 10, 24),
    "backward_p_minus_u": (14, 11, 14, 0, 10, 27),
    "memory_entries_only": (14, 11, 14, 10, 5, 27),
    "width_mismatch_type_error": (12, 11, 14, 10, 10, 26),
    # degenerate files: shape points (G14.01, 2) and honest ValueError points only
    "constant_outputs": (2, 0, 0, 0, 0, 0),
    "uniform_weights": (6, 0, 0, 0, 0, 13),
    "always_value_error": (0, 0, 0, 0, 0, 0),
    # correct variants at extreme magnitudes, and two earlier ones
    "correct_lse_lists": FULL,
    "correct_lse_numpy": FULL,
    "correct_logsumexp": FULL,
    "correct_renormalize": FULL,
}


def _run(*args: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import json

    out = tmp_path_factory.mktemp("strength")
    code, _, err = _run(
        "grade",
        *(MUTANTS / name for name in SCORES),
        "--out",
        out,
        "-q",
        "--no-diagnosis",
    )
    assert code == 0, err
    return {s["id"]: s for s in json.loads((out / "results.json").read_text())["submissions"]}


@pytest.fixture(scope="module")
def collected() -> Any:
    pm = get_plugin_manager([])
    options = build_parser(pm).parse_args(
        [
            "validate",
            "--specs",
            str(SPECS),
            "--reference",
            str(ROOT / "reference" / "attention.py"),
        ]
    )
    config = Config(command="validate", options=options, pluginmanager=pm)
    pm.hook.grader_configure(config=config)
    return session.collect(config)


def _kinds() -> dict[tuple[str, str], str]:
    kinds = {}
    for path in sorted(SPECS.glob("*.yaml")):
        data = parse_yaml(str(path))
        kinds.update({(data["exercise"], c["id"]): c["kind"] for c in data["checks"]})
    return kinds


# --- scores ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCORES))
def test_new_mutants_and_variants_score_per_exercise(graded: dict, name: str) -> None:
    sub = graded[name]
    assert sub["status"] == "graded"
    assert {e["id"]: e["score"] for e in sub["exercises"]} == dict(zip(EXERCISES, map(float, SCORES[name])))
    assert sub["max_score"] == G14.points


@pytest.mark.parametrize("name", ["constant_outputs", "uniform_weights", "always_value_error"])
def test_degenerate_files_earn_only_shape_and_honest_value_error_points(graded: dict, name: str) -> None:
    kinds = _kinds()
    paid = {(e["id"], c["id"]): c["score"] for e in graded[name]["exercises"] for c in e["checks"] if c["score"] > 0}
    assert {kinds[key] for key in paid} <= {"shape", "raises"}, paid
    # Constants raise nothing; ValueError on every input also raises on the valid twin: no ValueError point.
    if name != "uniform_weights":
        assert not [key for key in paid if kinds[key] == "raises"]


# --- tolerances -------------------------------------------------------------------------------


def _softmax_routes(s: list[float], allowed: list[bool] | None) -> list[np.ndarray]:
    """Correct float64 softmax routes the chapter allows, written independently of the reference."""
    mask = [True] * len(s) if allowed is None else list(allowed)
    ok = [x for x, a in zip(s, mask) if a]
    top = max(ok)
    out = []
    # max subtraction, math.fsum
    e = [math.exp(x - top) if a else 0.0 for x, a in zip(s, mask)]
    total = math.fsum(e)
    out.append(np.array([v / total for v in e]))
    # log-sum-exp in pure Python: exp(s - lse), lse = top + log(sum)
    lse = top + math.log(math.fsum(math.exp(x - top) for x in ok))
    out.append(np.array([math.exp(x - lse) if a else 0.0 for x, a in zip(s, mask)]))
    # log-sum-exp in numpy, masked scores -inf
    arr = np.where(mask, np.asarray(s, dtype=np.float64), -np.inf)
    lse_np = top + np.log(np.sum(np.exp(arr - top)))
    out.append(np.exp(arr - lse_np))
    # renormalising: exponentiate every score shifted by the allowed max, zero the masked, renormalise
    with np.errstate(over="ignore"):
        raw = np.exp(np.asarray(s, dtype=np.float64) - top)
    raw = np.where(mask, raw, 0.0)
    out.append(raw / raw.sum())
    return out


def _attention_routes(q: list, k: list, v: list, causal: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    d = len(q[0])
    routes = []
    for scores in (
        (np.asarray(q) @ np.asarray(k).T) / math.sqrt(d),  # BLAS
        np.array([[math.fsum(a * b for a, b in zip(qi, kj)) / math.sqrt(d) for kj in k] for qi in q]),  # exact sums
        np.array([[sum(a * b / math.sqrt(d) for a, b in zip(qi, kj)) for kj in k] for qi in q]),  # scaled terms
    ):
        for r in range(4):
            rows = []
            for i, row in enumerate(scores.tolist()):
                allowed = [j <= i for j in range(len(k))] if causal else None
                rows.append(_softmax_routes(row, allowed)[r])
            p = np.array(rows)
            routes.append((p @ np.asarray(v), p))
    return routes


def test_every_float64_route_passes_every_compare_and_literal_check(
    collected: Any,
) -> None:
    seen = 0
    for ex, items in collected.checks:
        for pc in items:
            if pc.check.kind not in ("compare", "literal") or pc.check.function not in (
                "softmax",
                "attention",
            ):
                continue
            args = pc.prepared.calls[0].args
            expected = pc.prepared.expected
            if pc.check.function == "softmax":
                allowed = args[1] if len(args) > 1 else None
                name = "weights" if "weights" in expected else "result"
                results = [{name: w} for w in _softmax_routes(args[0], allowed)]
            else:
                results = [
                    {"outputs": o, "weights": w}
                    for o, w in _attention_routes(*args[:3], bool(args[3]) if len(args) > 3 else False)
                ]
            for result in results:
                for part, value in expected.items():
                    if part.startswith("~"):
                        continue
                    rtol, atol, floor = tolerance_of(pc.check, expected, part)
                    err = np.abs(result[part] - np.asarray(value))
                    allowed = atol + rtol * np.abs(np.asarray(value)) + floor
                    assert np.all(err <= allowed), (
                        ex.id,
                        pc.check.id,
                        part,
                        float(np.max(err - allowed)),
                    )
            seen += 1
    assert seen == 26


def test_no_tolerance_is_tighter_than_float64_can_promise(collected: Any) -> None:
    """The log-sum-exp route rounds top + log(sum) to float64's spacing at the largest allowed score:
    each weight may be off by half that spacing, relatively; a d_k-term dot product by d_k ulps."""
    widened = []
    for ex, items in collected.checks:
        for pc in items:
            if pc.check.kind not in ("compare", "literal") or pc.check.function not in (
                "softmax",
                "attention",
            ):
                continue
            args, expected = pc.prepared.calls[0].args, pc.prepared.expected
            if pc.check.function == "softmax":
                s = np.asarray(args[0], dtype=np.float64)
                mask = np.ones(s.shape, bool) if len(args) < 2 or args[1] is None else np.asarray(args[1], bool)
                tops, weights = (
                    [float(np.max(np.abs(s[mask])))],
                    np.atleast_2d(expected["weights"] if "weights" in expected else expected["result"]),
                )
                part = "weights" if "weights" in expected else "result"
                single = [mask.sum() == 1]
            else:
                if "weights" not in expected:
                    continue
                q, k = np.asarray(args[0]), np.asarray(args[1])
                scores = q @ k.T / math.sqrt(q.shape[1])
                causal = bool(args[3]) if len(args) > 3 else False
                allowed = np.tril(np.ones(scores.shape, bool)) if causal else np.ones(scores.shape, bool)
                tops = [float(np.max(np.abs(row[a]))) for row, a in zip(scores, allowed)]
                weights, part = np.asarray(expected["weights"]), "weights"
                single = [a.sum() == 1 for a in allowed]
            rtol, atol, floor = tolerance_of(pc.check, expected, part)
            floor = np.atleast_2d(floor)
            for i, (top, row) in enumerate(zip(tops, weights)):
                if single[i]:
                    continue  # one allowed key: weight exactly 1 in every route
                # top + log(sum) rounds by half a spacing of |top|, or drops log(sum) = -log(max p) whole
                drop = -math.log(float(np.max(row)))
                promise = min(0.5 * float(np.spacing(top)), drop) * row + 4 * EPS * row
                asked = atol + rtol * np.abs(row) + floor[i]
                assert np.all(asked >= promise), (ex.id, pc.check.id, i)
            if np.any(floor > 0):
                widened.append(f"{ex.id} {pc.check.id}")
    # Only the checks near 1e12 need more than the default tolerances.
    assert widened == [
        "G14.06 masked-scores-above-allowed",
        "G14.06 masked-scores-above-very-low-allowed",
    ]
    # ... and there the floor is small enough that every catalogued mistake still fails (the audit).
    for ex, items in collected.checks:
        for pc in items:
            if f"{ex.id} {pc.check.id}" in widened:
                assert float(np.max(pc.prepared.expected[FLOOR_KEY]["weights"])) < 1e-3


def test_the_property_kinds_tolerances_cover_float64(collected: Any) -> None:
    by_id = {(ex.id, pc.check.id): pc for ex, items in collected.checks for pc in items}
    shift = by_id[("G14.02", "shift-invariance")]
    first, second = shift.prepared.calls
    a = _softmax_routes(list(first.args[0]), None)[1]  # the log-sum-exp route, the least accurate here
    b = _softmax_routes(list(second.args[0]), None)[1]
    rtol = shift.prepared.expected["~rtol"]
    assert np.all(np.abs(a - b) <= 1e-9 + rtol * np.abs(b))
    assert rtol >= 2 * EPS * (max(map(abs, first.args[0])) + 100.0)
    fd = by_id[("G14.04", "finite-difference")]
    u = np.asarray(fd.prepared.calls[0].args[1])
    assert fd.prepared.expected["~atol"] >= 2 * EPS * float(np.sum(np.abs(u))) / 1e-6  # the difference's rounding


def test_every_explicit_tolerance_in_the_specs_carries_its_reason() -> None:
    for path in sorted(SPECS.glob("*.yaml")):
        for c in parse_yaml(str(path))["checks"]:
            if {"rtol", "atol"} & set(c):
                assert len(c.get("why", "")) > 20, (path.name, c["id"])


def test_a_failed_tolerance_says_what_was_asked_and_why() -> None:
    with pytest.raises(Mismatch) as info:
        compare("weights", np.array([0.5, 0.5]), [0.6, 0.4], 1e-6, 1e-9)
    assert info.value.message == (
        "weights differs from the expected value by up to 0.1 (at weights[0]); asked: within rtol=1e-06, atol=1e-09 "
        "(float64 code is accurate to about 1e-13 here; float16 or a wrong formula is not)"
    )
    with pytest.raises(Mismatch) as info:
        compare(
            "weights",
            np.array([0.5, 0.5]),
            [0.6, 0.4],
            1e-6,
            1e-9,
            np.array([1e-3, 2e-3]),
            "near 1e12",
        )
    assert info.value.message.endswith(
        "asked: within rtol=1e-06, atol=1e-09, plus up to 0.002 for float64 rounding (near 1e12)"
    )
    assert dict(info.value.details)["tolerance"] == "rtol=1e-06, atol=1e-09, plus up to 0.002 for float64 rounding"


def test_log_sum_exp_near_1e12_passes_and_a_finite_fill_still_fails(
    collected: Any,
) -> None:
    pc = next(pc for ex, items in collected.checks for pc in items if pc.check.id == "masked-scores-above-allowed")
    scores, allowed = pc.prepared.calls[0].args
    lse = _softmax_routes(scores, allowed)[1]
    assert pc.kind.check_value(pc.check, pc.prepared.expected, lse.tolist(), pc.context).status == "passed"
    # Without its floor the same route fails: the default tolerance alone is too strict here.
    bare = {k: v for k, v in pc.prepared.expected.items() if not k.startswith("~")}
    assert pc.kind.check_value(pc.check, bare, lse.tolist(), pc.context).status == "failed"
    fill = [1.0, 0.0, 0.0]  # -1e9 for the masked score: it takes all the weight
    message = pc.kind.check_value(pc.check, pc.prepared.expected, fill, pc.context).message
    assert "plus up to 0.000782 for float64 rounding" in message and "near a score of 1e12" in message


# --- ValueError checks with a valid twin -----------------------------------------------------------


def test_a_value_error_check_pays_only_if_the_valid_twin_returns() -> None:
    check, ctx = make(
        "raises",
        "softmax",
        {"scores": []},
        {"reason": "an empty row", "valid": {"scores": [0.0]}},
    )
    prepared = prepare(check, ctx)
    assert [c.args for c in prepared.calls] == [([],), ([0.0],)]
    error = CallResult("raised", error_type="ValueError", value_error=True, message="bad")
    passed(RaisesKind().judge(check, prepared, [error, CallResult("returned", value=[1.0])], ctx))
    message = failed(RaisesKind().judge(check, prepared, [error, error], ctx))
    assert message == (
        "raised ValueError, but also ValueError for the valid input next to it: an error on every input does not "
        "show that the invalid one was checked"
    )


# --- probes ------------------------------------------------------------------------------------


SCALES = {
    "d_k": lambda d, dv: d,
    "d_k / 2": lambda d, dv: d / 2,
    "sqrt(d_v)": lambda d, dv: math.sqrt(dv),
    "sqrt(8) (heads)": lambda d, dv: math.sqrt(8),
    "1 (no scale)": lambda d, dv: 1.0,
    "1/sqrt(d_k) (times sqrt(d_k))": lambda d, dv: 1 / math.sqrt(d),
}


@pytest.mark.parametrize("exercise", ["G14.01", "G14.02", "G14.03", "G14.06"])
def test_each_attention_exercise_separates_sqrt_dk_from_every_wrong_scale(collected: Any, exercise: str) -> None:
    items = next(items for ex, items in collected.checks if ex.id == exercise)
    probes = []
    for pc in items:
        if pc.check.function != "attention" or pc.check.kind not in (
            "compare",
            "literal",
        ):
            continue
        q, k, v = (np.asarray(a, dtype=np.float64) for a in pc.prepared.calls[0].args[:3])
        if np.max(np.abs(q @ k.T)) > 0.1:  # nonzero scores
            probes.append((q.shape[1], v.shape[1], pc.check.visibility))
    for name, scale in SCALES.items():
        assert any(abs(scale(d, dv) - math.sqrt(d)) > 0.05 * math.sqrt(d) for d, dv, _ in probes), (exercise, name)
    assert len({d for d, _, _ in probes}) >= 2, exercise  # several d_k


def test_a_visible_check_has_d_k_above_1_and_nonzero_scores(collected: Any) -> None:
    found = []
    for ex, items in collected.checks:
        for pc in items:
            if pc.check.visibility == "visible" and pc.check.function == "attention" and pc.check.kind == "compare":
                q, k = (np.asarray(a, dtype=np.float64) for a in pc.prepared.calls[0].args[:2])
                if q.shape[1] > 1 and np.max(np.abs(q @ k.T)) > 0.1:
                    found.append(f"{ex.id} {pc.check.id}")
    assert "G14.02 scaled-scores-dk3" in found


@pytest.mark.parametrize("exercise", ["G14.03", "G14.06"])
def test_causal_checks_put_a_future_score_far_above_the_allowed_maximum(collected: Any, exercise: str) -> None:
    items = next(items for ex, items in collected.checks if ex.id == exercise)
    gaps = []
    for pc in items:
        args = pc.prepared.calls[0].args
        if (
            pc.check.function != "attention"
            or pc.check.kind not in ("compare", "literal")
            or len(args) < 4
            or args[3] is not True
        ):
            continue
        q, k = (np.asarray(a, dtype=np.float64) for a in args[:2])
        scores = q @ k.T / math.sqrt(q.shape[1])
        for i, row in enumerate(scores[:-1]):
            gaps.append(float(np.max(row[i + 1 :]) - np.max(row[: i + 1])))
    # exp(-745) underflows to 0: a maximum over the masked entries too turns the row to 0/0.
    assert max(gaps) > 745, exercise


# --- diagnosis ---------------------------------------------------------------------------------


def _entry(name: str, misconception: str) -> Entry:
    return Entry(
        name=name,
        kind="mutant",
        file="",
        sha256="",
        misconception=misconception,
        section="S",
    )


def test_a_mistake_is_named_only_when_the_whole_exercise_singles_it_out() -> None:
    a, b = _entry("a", "Mistake A here."), _entry("b", "Mistake B here.")
    same = (CallResult("returned", value=[1.0, 0.0]),)
    table = DiagnosisTable(
        {("E", "c1"): [(a, same), (b, same)], ("E", "c2"): [(a, same)]},
        Catalogue("x", (a, b)),
    )
    check = Check(
        id="c1",
        kind="compare",
        function="f",
        points=1.0,
        visibility="hidden",
        hint="",
        timeout=2.0,
    )
    both = table.evidence("E", check, same, passed=False)
    assert both == Evidence(False, frozenset({"a", "b"}))
    # c2: the submission passed where a fails: only b is consistent with everything.
    assert [d.mistake for d in table.name("E", {"c1": both, "c2": Evidence(True, frozenset({"b"}))})["c1"]] == ["b"]
    # c2 failed like a: a is named, on both checks.
    named = table.name("E", {"c1": both, "c2": Evidence(False, frozenset({"a"}))})
    assert {k: [d.mistake for d in v] for k, v in named.items()} == {
        "c1": ["a"],
        "c2": ["a"],
    }
    # c2 failed like neither (an uncatalogued mistake, or two at once): nothing is named.
    assert table.name("E", {"c1": both, "c2": Evidence(False, frozenset())}) == {}
    # Left out, a mutant is not misnamed as the other: the audit's leave-one-out.
    assert (
        table.without({"a"}).name(
            "E",
            {
                "c1": table.without({"a"}).evidence("E", check, same, False),
                "c2": Evidence(False, frozenset()),
            },
        )
        == {}
    )


def test_raised_errors_match_on_their_message_except_where_the_error_is_asked_for() -> None:
    a = _entry("a", "Mistake A here.")
    numpy_error = (
        CallResult(
            "raised",
            error_type="ValueError",
            value_error=True,
            message="operands could not be",
        ),
    )
    table = DiagnosisTable(
        {("E", "c"): [(a, numpy_error)], ("E", "r"): [(a, numpy_error)]},
        Catalogue("x", (a,)),
    )
    other = (
        CallResult(
            "raised",
            error_type="ValueError",
            value_error=True,
            message="matmul: mismatch",
        ),
    )
    compare_check = Check(
        id="c",
        kind="compare",
        function="f",
        points=1.0,
        visibility="hidden",
        hint="",
        timeout=2.0,
    )
    raises_check = Check(
        id="r",
        kind="raises",
        function="f",
        points=1.0,
        visibility="hidden",
        hint="",
        timeout=2.0,
    )
    assert table.evidence("E", compare_check, other, passed=False).matches == frozenset()
    assert table.evidence("E", compare_check, numpy_error, passed=False).matches == {"a"}
    assert table.evidence("E", raises_check, other, passed=False).matches == {"a"}  # the type is what is asked


# --- the audit's new tables ----------------------------------------------------------------------


def _mini(tmp_path: Path, catalogue: str, names: tuple[str, ...], contract: str | None = None) -> Path:
    folder = tmp_path / "mutants"
    for name in names:
        shutil.copytree(MUTANTS / name, folder / name)
    (folder / "catalogue.yaml").write_text(catalogue)
    if contract is not None:
        (folder / "contract.yaml").write_text(contract)
    return folder


def test_the_audit_fails_on_an_uncovered_contract_clause(tmp_path: Path) -> None:
    folder = _mini(
        tmp_path,
        """
entries:
  - {name: correct_lists, kind: correct, description: lists}
""",
        ("correct_lists",),
        """
clauses:
  - {id: covered, function: softmax, text: rejects an empty row, checks: [G14.06 rejects-empty]}
  - {id: uncovered, function: attention, text: raises ValueError on a Q/K width mismatch, checks: []}
  - {id: gone, function: softmax, text: something else entirely, checks: [G14.06 no-such-check]}
""",
    )
    code, out, err = _run("audit", "--mutants", folder, "--no-diagnosis")
    assert code == 1, err
    lines = out.splitlines()
    assert "covered    softmax    1: G14.06 rejects-empty" in lines
    assert "uncovered  attention  0: NONE" in lines
    assert (
        "FAIL clause uncovered has no check: code breaking it (raises ValueError on a Q/K width mismatch) keeps "
        "every point"
    ) in lines
    assert "FAIL clause gone names checks the specs do not have: G14.06 no-such-check" in lines
    assert lines[-1].endswith("; 1/3 contract clauses covered: FAILED")


def test_the_audit_fails_when_a_left_out_mutant_is_misnamed(tmp_path: Path) -> None:
    """Two fills with different misconceptions look alike on all the evidence: each is misnamed as the other."""
    folder = _mini(
        tmp_path,
        """
entries:
  - name: fill_minus_1e4
    kind: mutant
    misconception: Masked scores are set to -1e4.
    section: Mask before normalization
    exercises: [G14.06]
  - name: fill_minus_1e9
    kind: mutant
    misconception: Masked scores are set to -1e9.
    section: Mask before normalization
    exercises: [G14.06]
""",
        ("fill_minus_1e4", "fill_minus_1e9"),
    )
    code, out, err = _run("audit", "--mutants", folder)
    assert code == 1, err
    lines = out.splitlines()
    assert "FAIL fill_minus_1e4 left out is misnamed fill_minus_1e9 on G14.06 masked-scores-above-allowed" in lines
    assert lines[-1].endswith("; leave-one-out diagnosis precision 0% (4 namings, 4 misnamed): FAILED")


def test_the_audit_fails_a_degenerate_file_above_its_figure(tmp_path: Path) -> None:
    folder = _mini(
        tmp_path,
        """
entries:
  - name: mib_decimal
    kind: mutant
    degenerate: true
    misconception: Claimed to compute nothing, but it does.
    section: Count computation and memory before claiming acceleration
    exercises: [G14.05]
""",
        ("mib_decimal",),
    )
    code, out, err = _run("audit", "--mutants", folder, "--no-diagnosis")
    assert code == 1, err
    lines = out.splitlines()
    assert "mib_decimal              81/86    19  FAIL: points on other checks are vacuous" in lines
    assert "0/1 degenerate files at their figure" in lines[-1]
