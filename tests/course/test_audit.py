"""``grader audit`` and the catalogue of mutants (``mutants/``).

The real audit runs once (fixture ``audited``): every mutant must be killed
on exactly the exercises it is tagged for, every correct variant must score
full marks, and every mutant's own report must name its misconception.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import ROOT
from spec_totals import G14

from grader.cli import main
from grader.errors import ConfigError
from grader.packs.catalogue import load_catalogue

pytestmark = pytest.mark.slow  # the audit of every mutant, run once for the module

MUTANTS = ROOT / "reference" / "mutants"
EXERCISES = ("G14.01", "G14.02", "G14.03", "G14.04", "G14.05", "G14.06")

# The whole kill matrix, one letter per exercise G14.01..G14.06:
# K = killed (tagged, lost points), - = not tagged and untouched.
MATRIX = {
    "unnormalized_scores": "KKK--K",
    "no_max_subtraction": "--K--K",  # G14.03: exp(800) in the causal row with a future score far above
    "softmax_query_axis": "KKK--K",
    "no_sqrt_dk": "KKK--K",
    "divide_by_dk": "KKK--K",
    "sqrt_model_width": "KKK--K",
    "k_reshaped_not_transposed": "KKK--K",
    "q_k_swapped": "KKK--K",
    "values_from_keys": "KKK--K",
    "returns_weights_outputs": "KKK--K",
    "mask_after_softmax": "--K--K",
    "causal_excludes_self": "--K--K",
    "causal_sees_next": "--K--K",
    "anti_causal": "--K--K",
    "fill_minus_1e4": "-----K",
    "fill_minus_1e9": "-----K",
    "all_masked_nan": "-----K",
    "all_masked_zeros": "-----K",
    "all_masked_uniform": "-----K",
    "causal_unequal_accepted": "-----K",
    "no_finite_check": "-----K",
    "mutates_input": "-----K",
    "float16_arithmetic": "KKKK-K",
    "float32_arithmetic": "KKKK-K",
    "hardcoded_answers": "KKKKKK",
    "backward_diagonal_only": "---K--",
    "backward_drops_pk": "---K--",
    "backward_overwrites_u": "---K--",
    "mib_decimal": "----K-",
    "forgets_batch": "----K-",
    "forgets_heads": "----K-",
    # mistakes seen in public code (issue 12)
    "scale_times_sqrt_dk": "KKK--K",
    "constant_scale_heads": "KKK--K",
    "divide_by_half_dk": "KKK--K",
    "scale_after_softmax": "KKK--K",
    "row_sums_no_keepdims": "KKK--K",
    "causal_uniform_past": "--K--K",
    "mask_never_applied": "--K--K",
    "max_over_masked": "--K--K",
    "backward_p_minus_u": "---K--",
    "memory_entries_only": "----K-",
    "width_mismatch_type_error": "K----K",
    # degenerate files
    "constant_outputs": "KKKKKK",
    "uniform_weights": "KKKKKK",
    "always_value_error": "KKKKKK",
}
CORRECT = (
    "correct_lists",
    "correct_numpy",
    "correct_neg_inf",
    "correct_renormalize",
    "correct_logsumexp",
    "correct_batched",
    "correct_lse_lists",
    "correct_lse_numpy",
)
LAST_LINE = (
    "124/124 tagged cells killed; 8/8 correct variants at full marks; 45/45 mutants fail a visible check; "
    "45/45 mutants named; 3/3 degenerate files at their figure; 33/33 contract clauses covered; "
    "leave-one-out diagnosis precision 100% (4 namings, 0 misnamed): OK"
)

# The chapter's section headings (G14: Attention, embeddings, and transformer reasoning).
CHAPTER_SECTIONS = {
    "Prerequisites and observable goals",
    "The central question: which values should this position combine?",
    "A numerical example before the general architecture",
    "Mask before normalization",
    "Differentiate the mixing operation",
    "What a transformer adds, and what it does not establish",
    "Count computation and memory before claiming acceleration",
    "Independent practice",
    "Smallest useful hints",
    "Complete solutions: G14",
    "Readiness and continuation",
    # headings of the solutions
    "Shapes follow from the summation indices",
    "Normalize scores before mixing values",
    "Causality constrains the denominator too",
    "The constant-shift direction has zero sensitivity",
    "One tensor is not the entire memory budget",
    "A bounded forward reference",
}


def run_cli(*args: str) -> tuple[int, str, str]:
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
def audited() -> tuple[int, list[str]]:
    code, out, err = run_cli("audit")
    assert err == ""
    return code, out.splitlines()


def test_the_audit_passes(audited) -> None:  # noqa: ANN001
    code, lines = audited
    assert code == 0
    assert (
        lines[0]
        == f"audit of reference/mutants/catalogue.yaml: 45 mutants, 8 correct variants; 6 exercises, {G14.checks} checks"
    )
    assert lines[-1] == LAST_LINE
    assert not any(line.startswith("FAIL") for line in lines)


def test_the_whole_kill_matrix(audited) -> None:  # noqa: ANN001
    _, lines = audited
    width = len("k_reshaped_not_transposed")
    cell = {"K": "killed", "-": "-"}
    expected = [f"{'mutant':{width}}  " + "  ".join(f"{e:8}" for e in EXERCISES) + "  visible  named"]
    for name, row in MATRIX.items():
        expected.append(f"{name:{width}}  " + "  ".join(f"{cell[c]:8}" for c in row) + "  yes      yes")
    assert lines[2 : 3 + len(MATRIX)] == expected
    correct_at = lines.index(f"{'correct variant':{width}}  score")
    assert lines[correct_at + 1 : correct_at + 1 + len(CORRECT)] == [
        f"{n:{width}}  {G14.points:g}/{G14.points:g}" for n in CORRECT
    ]


def test_tags_in_the_catalogue_are_the_killed_cells() -> None:
    catalogue = load_catalogue(MUTANTS)
    assert [e.name for e in catalogue.mutants] == list(MATRIX)
    assert [e.name for e in catalogue.correct] == list(CORRECT)
    for entry in catalogue.mutants:
        assert entry.exercises == tuple(ex for ex, c in zip(EXERCISES, MATRIX[entry.name]) if c == "K"), entry.name


def test_the_checks_that_catch_each_mistake(audited) -> None:  # noqa: ANN001
    _, lines = audited
    start = lines.index("caught by (exercise: checks not passed)") + 1
    section = lines[start : lines.index("", start)]
    caught = dict(line.strip().split(": ", 1) for line in section)
    assert set(caught) == set(MATRIX)
    assert caught["mutates_input"] == "G14.06 softmax-leaves-scores-unchanged"
    assert caught["backward_overwrites_u"] == "G14.04 backward-leaves-inputs-unchanged"
    assert (
        caught["fill_minus_1e4"]
        == caught["fill_minus_1e9"]
        == ("G14.06 masked-scores-above-allowed masked-scores-above-very-low-allowed")
    )
    assert caught["causal_unequal_accepted"] == "G14.06 rejects-causal-unequal rejects-causal-more-queries"
    assert caught["width_mismatch_type_error"] == "G14.01 q-k-widths-must-match; G14.06 rejects-width-mismatch"
    # Uniform causal rows keep the causal properties, but break the contract (weights ordered like the scores).
    assert caught["causal_uniform_past"] == (
        "G14.03 causal-two-positions causal-random causal-future-score-far-above causal-random-dk5; "
        "G14.06 causal-rows-sum-to-one causal-noninterference attention-leaves-inputs-unchanged "
        "causal-masked-scores-above-max"
    )
    assert caught["max_over_masked"] == (
        "G14.03 causal-future-score-far-above; G14.06 masked-scores-above-allowed masked-scores-above-very-low-allowed "
        "causal-masked-scores-above-max"
    )
    # d_k / 2 equals sqrt(d_k) at d_k = 4 (unequal-counts, huge-scores): only the other d_k catch it in G14.06.
    assert caught["divide_by_half_dk"].endswith(
        "G14.06 unequal-counts-dk2 unequal-counts-dk9 causal-masked-scores-above-max"
    )
    assert caught["no_finite_check"] == "G14.06 rejects-nan-score rejects-nan-value"
    assert caught["mib_decimal"] == "G14.05 mib-n1024 mib-n2048 one-mib"
    assert caught["forgets_batch"] == "G14.05 bytes-n1024 bytes-n2048 itemsize"
    assert caught["backward_drops_pk"] == "G14.04 chapter-example sums-to-zero finite-difference random-compare"
    assert caught["mask_after_softmax"] == (
        "G14.03 causal-two-positions one-allowed-key causal-random masked-softmax-random causal-future-score-far-above "
        "causal-random-dk5; G14.06 causal-rows-sum-to-one masked-scores-above-allowed causal-noninterference "
        "softmax-leaves-scores-unchanged attention-leaves-inputs-unchanged masked-scores-above-very-low-allowed "
        "causal-masked-scores-above-max"
    )
    assert caught["no_sqrt_dk"] == (
        "G14.01 unequal-counts-and-widths more-queries-than-keys dk5-against-dv2; G14.02 random-outputs "
        "scaled-scores-dk3 scaled-scores-dk6; G14.03 causal-random causal-random-dk5; G14.06 unequal-counts "
        "unequal-counts-dk2 unequal-counts-dk9 causal-masked-scores-above-max"
    )
    # Hard-coded chapter answers pass no hand value with a companion, and fail everything seeded.
    assert (
        "G14.02 shift-invariance random-softmax random-outputs scaled-scores-dk3 scaled-scores-dk6;"
        in (caught["hardcoded_answers"])
    )
    assert "G14.05 one-mib itemsize;" in caught["hardcoded_answers"]


def test_each_mutant_is_one_small_change_of_its_base() -> None:
    """Apart from its docstring, a mutant differs from its correct base in at most 3 lines."""

    def code(path: Path) -> list[str]:
        text = path.read_text()
        return text[text.index('"""', 3) + 3 :].splitlines()

    for entry in load_catalogue(MUTANTS).mutants:
        text = Path(entry.file).read_text()
        assert text.startswith('"""Mutant: '), entry.name
        if entry.name == "hardcoded_answers" or entry.degenerate:
            assert not entry.base  # nothing is computed: there is no base to differ from
            continue
        assert f"Derived from mutants/{entry.base}/attention.py" in text
        diff = difflib.unified_diff(
            code(ROOT / "reference" / "mutants" / entry.base / "attention.py"), code(Path(entry.file)), n=0
        )
        changed = [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]
        assert 1 <= len(changed) <= 4, (entry.name, changed)


def test_sections_are_chapter_headings_and_mutants_use_stdlib_and_numpy_only() -> None:
    catalogue = load_catalogue(MUTANTS)
    for entry in catalogue.mutants:
        assert entry.section in CHAPTER_SECTIONS, (entry.name, entry.section)
        assert entry.misconception.endswith(".") and len(entry.misconception) < 260
    for entry in catalogue.entries:
        imports = set(re.findall(r"^(?:import|from) (\w+)", Path(entry.file).read_text(), re.MULTILINE))
        assert imports <= {"math", "numpy"}, (entry.name, imports)


def _mini_catalogue(tmp_path: Path, text: str, names: tuple[str, ...]) -> Path:
    folder = tmp_path / "mutants"
    for name in names:
        shutil.copytree(MUTANTS / name, folder / name)
    (folder / "catalogue.yaml").write_text(text)
    return folder


def test_a_surviving_mutant_or_a_losing_correct_variant_fails_the_audit(tmp_path: Path) -> None:
    folder = _mini_catalogue(
        tmp_path,
        """
entries:
  - {name: correct_lists, kind: correct, description: lists}
  - {name: no_sqrt_dk, kind: correct, description: claims to be correct}
  - name: mib_decimal
    kind: mutant
    misconception: One MiB taken as 10^6 bytes.
    section: Count computation and memory before claiming acceleration
    exercises: [G14.04, G14.05]
""",
        ("correct_lists", "no_sqrt_dk", "mib_decimal"),
    )
    code, out, err = run_cli("audit", "--mutants", folder, "--no-diagnosis")
    assert code == 1, err
    lines = out.splitlines()
    assert (
        lines[2] == "mutant         G14.01    G14.02    G14.03    G14.04    G14.05    G14.06    visible"
    )  # no "named"
    assert lines[3] == "mib_decimal    -         -         -         SURVIVED  killed    -         yes"
    assert (
        "no_sqrt_dk     66/86  LOST POINTS: G14.01 unequal-counts-and-widths more-queries-than-keys "
        "dk5-against-dv2; G14.02 random-outputs scaled-scores-dk3 scaled-scores-dk6; G14.03 causal-random "
        "causal-random-dk5; G14.06 unequal-counts unequal-counts-dk2 unequal-counts-dk9 "
        "causal-masked-scores-above-max" in lines
    )
    assert "FAIL mib_decimal survives G14.04, which it is tagged for: the checks of G14.04 do not catch it" in lines
    assert "FAIL correct variant no_sqrt_dk loses points" in lines
    assert lines[-1] == (
        "1/2 tagged cells killed; 1/2 correct variants at full marks; 1/1 mutants fail a visible check: FAILED"
    )


def test_an_untagged_loss_is_shown_but_allowed(tmp_path: Path) -> None:
    folder = _mini_catalogue(
        tmp_path,
        """
entries:
  - name: float16_arithmetic
    kind: mutant
    misconception: Arithmetic in float16 instead of float64.
    section: A bounded forward reference
    exercises: [G14.04]
""",
        ("float16_arithmetic",),
    )
    code, out, err = run_cli("audit", "--mutants", folder)
    assert code == 0, out + err
    assert (
        "float16_arithmetic  lost      lost      lost      killed    -         lost      yes      yes"
        in out.splitlines()
    )


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("entries: []\n", "entries: [] should be non-empty"),
        ("entries:\n  - {name: correct_lists, kind: correct}\n", "entries[0] 'correct_lists': a mutant needs"),
        (
            "entries:\n  - {name: correct_lists, kind: mutant, misconception: Something wrong here., section: X}\n",
            "entries[0] 'correct_lists': a mutant needs misconception, section and exercises",
        ),
        (
            "entries:\n  - {name: Bad-Name, kind: correct, description: x}\n",
            "entries[0] 'Bad-Name'.name: 'Bad-Name' does not match",
        ),
        ("entries:\n  - {name: nowhere, kind: correct, description: x}\n", "entries[0] 'nowhere': "),
        (
            "entries:\n  - {name: correct_lists, kind: correct, description: x}\n"
            "  - {name: correct_lists, kind: correct, description: y}\n",
            "entries[1] 'correct_lists': the name is used twice",
        ),
        (
            "entries:\n  - {name: mib_decimal, kind: mutant, base: nope, misconception: One MiB is 10^6 bytes., "
            "section: S, exercises: [G14.05]}\n",
            "entries[0] 'mib_decimal'.base: 'nope' is not a correct variant here",
        ),
    ],
)
def test_a_malformed_catalogue_is_one_line_naming_the_key(tmp_path: Path, text: str, phrase: str) -> None:
    folder = _mini_catalogue(tmp_path, text, ("correct_lists", "mib_decimal"))
    with pytest.raises(ConfigError, match=re.escape(phrase)):
        load_catalogue(folder)
    code, out, err = run_cli("audit", "--mutants", folder)
    assert code == 3 and len(err.strip().splitlines()) == 1 and phrase in err


def test_an_unknown_exercise_tag_is_a_config_error(tmp_path: Path) -> None:
    folder = _mini_catalogue(
        tmp_path,
        "entries:\n  - {name: mib_decimal, kind: mutant, misconception: One MiB is 10^6 bytes., "
        "section: S, exercises: [G14.5]}\n",
        ("mib_decimal",),
    )
    code, out, err = run_cli("audit", "--mutants", folder)
    assert code == 3
    assert "entries[0] 'mib_decimal'.exercises: unknown exercise(s) ['G14.5']" in err


def test_a_missing_catalogue_is_a_config_error(tmp_path: Path) -> None:
    code, out, err = run_cli("audit", "--mutants", tmp_path)
    assert code == 3
    assert f"{tmp_path / 'catalogue.yaml'}: catalogue not found; pass --mutants DIR" in err


def test_the_audit_guide_shows_this_output(audited) -> None:  # noqa: ANN001
    """docs/how-to/audit.md shows what ``grader audit`` prints, all but the ``caught by`` lines."""
    _, lines = audited
    guide = (ROOT / "docs" / "how-to" / "audit.md").read_text()
    block = guide[guide.index("$ grader audit\n") :]
    block = block[: block.index("```")].splitlines()
    caught = lines.index("caught by (exercise: checks not passed)")
    shown = lines[:caught] + lines[lines.index("correct variant            score") :]
    assert block[1:] == shown


def test_a_mutant_that_passes_every_visible_check_fails_the_audit(tmp_path: Path) -> None:
    """Without its visible twin, fill_minus_1e9 is caught by a hidden check only: CI would stay green."""
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "exercises", specs)
    g14_06 = specs / "G14.06.yaml"
    text = g14_06.read_text()
    start = text.index("  - id: masked-scores-above-very-low-allowed")
    g14_06.write_text(text[:start] + text[text.index("  - id: rejects-nan-value") :])
    folder = _mini_catalogue(
        tmp_path,
        """
entries:
  - name: fill_minus_1e9
    kind: mutant
    misconception: Masked scores are set to -1e9 instead of being left out.
    section: Mask before normalization
    exercises: [G14.06]
""",
        ("fill_minus_1e9",),
    )
    code, out, err = run_cli("audit", "--specs", specs, "--mutants", folder, "--no-diagnosis")
    assert code == 1, err
    lines = out.splitlines()
    assert lines[3] == "fill_minus_1e9  -         -         -         -         -         killed    NO"
    assert "FAIL fill_minus_1e9 passes every visible check: a student's 'grader check' and CI stay green on it" in lines
    assert lines[-1] == (
        "1/1 tagged cells killed; 0/0 correct variants at full marks; 0/1 mutants fail a visible check: FAILED"
    )
