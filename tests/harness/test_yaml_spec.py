"""The YAML spec loader: safe parsing, schema validation, kind keys, and the
errors `grader validate` reports in one line (exit code 3)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import REFERENCE, SPECS, STARTER
from course_plugin import KINDS as G14_KINDS
from spec_totals import G14

from grader.builtin.checks import BUILTIN_KINDS
from grader.builtin.yaml_spec import exercise_from_data
from grader.errors import EXIT_CONFIG, SpecError
from grader.readers.yamlfile import MAX_SPEC_BYTES, parse_yaml

KINDS = {kind.name: kind for kind in (*BUILTIN_KINDS, *G14_KINDS)}

G14_02_IDS = (
    "zero-scores",
    "log3-scores",
    "softmax-zero-scores",
    "softmax-log3",
    "shift-invariance",
    "random-softmax",
    "random-outputs",
    "scaled-scores-dk3",
    "scaled-scores-dk6",
)


# --- helpers -------------------------------------------------------------


def spec_copy(tmp_path: Path, name: str = "G14.02.yaml") -> Path:
    """Copy one real spec into tmp_path/specs and return the copy."""
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    return Path(shutil.copy(SPECS / name, folder / name))


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    """Replace ``old`` by ``new`` in ``path``; the text must occur exactly ``count`` times."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == count, f"{old!r} occurs {text.count(old)} times in {path.name}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def roundtrip(path: Path, change) -> None:  # noqa: ANN001
    """Load the spec, apply ``change(data)``, write it back as YAML."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def validate_error(cli, folder: Path) -> str:  # noqa: ANN001
    """Run ``grader validate`` on ``folder``; expect exit 3 and one stderr line; return it."""
    code, out, err = cli("validate", "--specs", folder, "--reference", REFERENCE)
    assert code == EXIT_CONFIG, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("grader: error: ")
    assert "Traceback" not in err
    return lines[0]


# --- the real specs --------------------------------------------------------


def test_real_g14_02_loads_with_defaults_filled_in() -> None:
    path = str(SPECS / "G14.02.yaml")
    exercise = exercise_from_data(path, parse_yaml(path), KINDS)
    assert exercise.id == "G14.02"
    assert exercise.title == "Softmax weights and mixed outputs"
    assert exercise.section == "A numerical example before the general architecture"
    assert exercise.path == path
    assert exercise.returns["attention"] == ("outputs", "weights")
    assert tuple(c.id for c in exercise.checks) == G14_02_IDS
    assert [c.kind for c in exercise.checks] == [
        "literal",
        "literal",
        "literal",
        "literal",
        "shift_invariance",
        "compare",
        "compare",
        "compare",
        "compare",
    ]
    assert [c.points for c in exercise.checks] == [2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert exercise.max_score == 11.0
    assert [c.visibility for c in exercise.checks] == [
        "visible",
        "visible",
        "visible",
        "hidden",
        "hidden",
        "hidden",
        "hidden",
        "visible",
        "hidden",
    ]
    # defaults fill in timeout and hint; a check's own hint wins
    assert all(c.timeout == 2.0 and isinstance(c.timeout, float) for c in exercise.checks)
    default_hint = exercise.checks[0].hint
    assert default_hint.startswith("Normalize the scores with softmax first")
    assert default_hint.endswith('Reread "A numerical example before the general architecture".')
    assert default_hint == parse_yaml(path)["defaults"]["hint"]
    raw = parse_yaml(path)["checks"]
    own_hint = ["hint" in r for r in raw]
    assert own_hint[4] and not any(own_hint[:4]) and not own_hint[5] and own_hint[7]
    assert [c.hint == default_hint for c in exercise.checks] == [not h for h in own_hint]
    assert exercise.checks[4].hint.startswith("The common factor exp(c) cancels")
    # seeds: exercise seed * 1000 + index; kind-specific keys go to params
    assert [c.seed for c in exercise.checks] == [1402000 + i for i in range(9)]
    zero = exercise.checks[0]
    assert zero.function == "attention"
    assert zero.args == {"Q": [[0.0]], "K": [[0.0], [0.0]], "V": [[2.0], [8.0]]}
    assert zero.params == {
        "expect": {"outputs": [[5.0]], "weights": [[0.5, 0.5]]},
        "companion": {"Q": [[1.0]], "K": [[2.0], [0.0]], "V": [[2.0], [8.0]]},
    }
    assert exercise.checks[4].params == {"shift": 100.0}
    assert exercise.checks[5].args == {"scores": {"normal": [7], "scale": 3.0}}
    assert exercise.checks[5].params == {}


def test_check_seed_overrides_the_derived_seed(tmp_path: Path) -> None:
    path = spec_copy(tmp_path)
    edit(path, "  - id: random-softmax\n", "  - id: random-softmax\n    seed: 77\n")
    exercise = exercise_from_data(str(path), parse_yaml(str(path)), KINDS)
    assert [c.seed for c in exercise.checks] == [
        1402000,
        1402001,
        1402002,
        1402003,
        1402004,
        77,
        1402006,
        1402007,
        1402008,
    ]


def test_validate_real_specs(cli) -> None:  # noqa: ANN001
    code, out, err = cli("validate")
    assert code == 0, err
    assert err == ""
    assert f"specs: 6 exercises, {G14.checks} checks; 13 hand values agree with the reference" in out
    assert f"reference scores {G14.points:g}/{G14.points:g}: valid" in out


def test_validate_a_copied_spec_alone(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    code, out, err = cli("validate", "--specs", path.parent, "--reference", REFERENCE)
    assert code == 0, err
    assert "specs: 1 exercises, 9 checks; 4 hand values agree with the reference" in out
    assert "reference scores 11/11: valid" in out


# --- parse_yaml ----------------------------------------------------------


def _parse_error(tmp_path: Path, text: str | bytes) -> SpecError:
    path = tmp_path / "bad.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        parse_yaml(str(path))
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}: ")
    return info.value


def test_parse_yaml_plain_data(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("a: 1\nb: [1.5, .nan, .inf, true, null]\nc: {d: x, e: &anchor 2}\n", encoding="utf-8")
    data = parse_yaml(str(path))
    assert data["a"] == 1 and data["c"] == {"d": "x", "e": 2}
    b = data["b"]
    assert b[0] == 1.5 and b[1] != b[1] and b[2] == float("inf") and b[3] is True and b[4] is None


def test_parse_yaml_rejects_invalid_yaml(tmp_path: Path) -> None:
    err = _parse_error(tmp_path, "exercise: G14.02\nchecks: [unclosed\n")
    assert "invalid YAML" in err.problem


def test_parse_yaml_rejects_python_tags(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    err = _parse_error(tmp_path, f"title: !!python/object/apply:os.system ['touch {marker}']\n")
    assert "invalid YAML" in err.problem
    assert "python/object/apply:os.system" in err.problem
    assert not marker.exists()


def test_parse_yaml_rejects_aliases(tmp_path: Path) -> None:
    bomb = 'a: &a ["x", "x", "x"]\nb: &b [*a, *a, *a]\nc: &c [*b, *b, *b]\n'
    err = _parse_error(tmp_path, bomb)
    assert "aliases (*name) are not allowed in specs (line 2)" in err.problem


def test_parse_yaml_rejects_duplicate_keys(tmp_path: Path) -> None:
    err = _parse_error(tmp_path, "exercise: G14.02\ntitle: a\ntitle: b\n")
    assert "duplicate key 'title' (line 3)" in err.problem
    nested = _parse_error(tmp_path, "checks:\n  - id: x\n    kind: literal\n    id: y\n")
    assert "duplicate key 'id' (line 4)" in nested.problem


def test_parse_yaml_rejects_non_utf8(tmp_path: Path) -> None:
    err = _parse_error(tmp_path, b"exercise: G14.02\ntitle: caf\xe9\n")
    assert "not UTF-8 text (invalid continuation byte at byte 27)" in err.problem


def test_parse_yaml_rejects_huge_files(tmp_path: Path) -> None:
    err = _parse_error(tmp_path, "# " + "x" * MAX_SPEC_BYTES + "\n")
    assert f"specs are limited to {MAX_SPEC_BYTES} bytes" in err.problem


def test_parse_yaml_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(SpecError, match="cannot read the file: No such file or directory"):
        parse_yaml(str(path))


# --- exercise_from_data ----------------------------------------------------


def _g14_02_data() -> dict:
    return parse_yaml(str(SPECS / "G14.02.yaml"))


def _data_error(data: object) -> SpecError:
    with pytest.raises(SpecError) as info:
        exercise_from_data("x/G14.02.yaml", data, KINDS)
    assert str(info.value).startswith("x/G14.02.yaml: ")
    return info.value


def test_exercise_from_data_not_a_mapping() -> None:
    err = _data_error(None)
    assert "a spec must be a mapping with keys exercise, title, section, seed and checks" in err.problem
    assert _data_error(["exercise"]).where == ""


def test_exercise_from_data_schema_errors_name_the_key() -> None:
    data = _g14_02_data()
    data["checks"][3]["points"] = "x"
    err = _data_error(data)
    assert err.where == "checks[3] 'softmax-log3'.points"
    assert err.problem == "'x' is not of type 'number'; give a number > 0"

    data = _g14_02_data()
    data["checks"][2]["visibility"] = "secret"
    err = _data_error(data)
    assert err.where == "checks[2] 'softmax-zero-scores'.visibility"
    assert "'secret' is not one of ['visible', 'hidden', 'after_due_date', 'after_published']" in err.problem

    data = _g14_02_data()
    data["defaults"]["timeout"] = 0
    err = _data_error(data)
    assert err.where == "defaults.timeout"
    assert "0 is less than or equal to the minimum of 0" in err.problem


def test_exercise_from_data_missing_defaultable_key() -> None:
    data = _g14_02_data()
    del data["defaults"]["hint"]
    err = _data_error(data)
    assert err.where == "checks[0] 'zero-scores'"
    assert err.problem == "missing 'hint': give it in the check or in 'defaults'"


def test_exercise_from_data_kind_keys() -> None:
    data = _g14_02_data()
    data["checks"][4]["shift"] = None
    del data["checks"][4]["shift"]
    err = _data_error(data)
    assert err.where == "checks[4] 'shift-invariance'"
    assert err.problem == "kind 'shift_invariance' needs key 'shift': add it"

    data = _g14_02_data()
    data["checks"][5]["expect"] = [1.0]
    err = _data_error(data)
    assert err.where == "checks[5] 'random-softmax'.expect"
    assert err.problem == "unknown key for kind 'compare' (its keys: atol, rtol, select, why)"


# --- grader validate on broken specs (exit 3, one line) ----------------------


def test_cli_invalid_yaml(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(
        path,
        "      V: [[2.0], [8.0]]\n    expect:\n      outputs: [[5.0]]",
        "      V: [[2.0], [8.0]\n    expect:\n      outputs: [[5.0]]",
    )
    line = validate_error(cli, path.parent)
    assert f"{path}: invalid YAML" in line


def test_cli_python_tag(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    marker = tmp_path / "pwned"
    edit(path, "title: Softmax weights and mixed outputs", f"title: !!python/object/apply:os.system ['touch {marker}']")
    line = validate_error(cli, path.parent)
    assert f"{path}: invalid YAML" in line
    assert "tag:yaml.org,2002:python/object/apply:os.system" in line
    assert not marker.exists()


def test_cli_alias_bomb(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    bomb = (
        'lol1: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
        "lol2: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "lol3: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "lol4: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    )
    path.write_text(bomb + path.read_text(encoding="utf-8"), encoding="utf-8")
    line = validate_error(cli, path.parent)
    assert f"{path}: invalid YAML: aliases (*name) are not allowed in specs (line 2)" in line


def test_cli_duplicate_key(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(path, "seed: 1402\n", "seed: 1402\nseed: 1403\n")
    line = validate_error(cli, path.parent)
    assert f"{path}: invalid YAML: duplicate key 'seed' (line 6)" in line


def test_cli_unknown_top_level_key(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    roundtrip(path, lambda d: d.update(tolerance=1e-6))
    line = validate_error(cli, path.parent)
    assert f"{path}: top level: Additional properties are not allowed ('tolerance' was unexpected)" in line


def test_cli_missing_required_key(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    roundtrip(path, lambda d: d.pop("seed"))
    line = validate_error(cli, path.parent)
    assert f"{path}: top level: 'seed' is a required property" in line


def test_cli_wrong_type(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(
        path,
        "    visibility: visible\n    points: 2\n    args:\n      Q: [[0.0]]",
        '    visibility: visible\n    points: "many"\n    args:\n      Q: [[0.0]]',
    )
    line = validate_error(cli, path.parent)
    assert f"{path}: checks[0] 'zero-scores'.points: 'many' is not of type 'number'" in line


def test_cli_duplicate_check_id(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(path, "  - id: log3-scores\n", "  - id: zero-scores\n")
    line = validate_error(cli, path.parent)
    assert f"{path}: checks[1] 'zero-scores': duplicate check id 'zero-scores'" in line


def test_cli_unknown_kind(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(path, "    kind: shift_invariance\n", "    kind: shift_invariant\n")
    line = validate_error(cli, path.parent)
    assert f"{path}: checks[4] 'shift-invariance'.kind: unknown check kind 'shift_invariant'" in line
    assert (
        "(known kinds: causal_noninterference, compare, finite_difference, literal, no_mutation, raises, "
        "row_sums, shape, shift_invariance, sum_to_zero)" in line
    )


def test_cli_unknown_kind_key(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    roundtrip(path, lambda d: d["checks"][0].update(tolerance=0.1))
    line = validate_error(cli, path.parent)
    assert (
        f"{path}: checks[0] 'zero-scores'.tolerance: unknown key for kind 'literal' (its keys: atol, companion, expect, rtol, why)"
        in line
    )


def test_cli_missing_expect_on_literal(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    roundtrip(path, lambda d: d["checks"][1].pop("expect"))
    line = validate_error(cli, path.parent)
    assert f"{path}: checks[1] 'log3-scores': kind 'literal' needs key 'expect'" in line


def test_cli_missing_reason_on_raises(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path, "G14.01.yaml")
    edit(path, "    reason: a V with 4 rows for 5 keys\n", "")
    line = validate_error(cli, path.parent)
    assert f"{path}: checks[1] 'value-rows-must-match-keys': kind 'raises' needs key 'reason'" in line


def test_cli_function_the_reference_lacks(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(
        path,
        "    function: softmax\n    args:\n      scores: {normal: [7], scale: 3.0}",
        "    function: soft_max\n    args:\n      scores: {normal: [7], scale: 3.0}",
    )
    line = validate_error(cli, path.parent)
    assert f"{path}: check 'random-softmax'.function: the reference has no function 'soft_max'" in line
    assert "(it has: attention, bytes_to_mib, score_array_bytes, softmax, softmax_backward)" in line


def test_cli_arguments_do_not_fit_the_signature(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(path, "      Q: {normal: [4, 3]}\n", "      Query: {normal: [4, 3]}\n")
    line = validate_error(cli, path.parent)
    assert f"{path}: check 'random-outputs'.args: do not fit attention(Q, K, V, causal=False)" in line
    assert "Q" in line.split("do not fit", 1)[1]


def test_cli_missing_argument(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(path, "      K: {normal: [4, 3]}\n", "")
    line = validate_error(cli, path.parent)
    assert f"{path}: check 'random-outputs'.args: do not fit attention(Q, K, V, causal=False)" in line
    assert "missing a required argument: 'K'" in line


def test_cli_hand_value_the_reference_disagrees_with(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(path, "      outputs: [[5.0]]\n", "      outputs: [[6.0]]\n")
    line = validate_error(cli, path.parent)
    assert f"{path}: check 'zero-scores'.expect: the reference disagrees with this hand value" in line
    # the comparison's message: the part, the largest error (1) and where it is
    reason = line.split("hand value: ", 1)[1]
    assert reason.startswith("outputs ")
    assert re.search(r"\b1\b", reason) and "outputs[0][0]" in reason


def test_cli_integer_hand_value_the_reference_disagrees_with(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path, "G14.05.yaml")
    edit(path, "    expect: 67108864\n", "    expect: 67108865\n")
    line = validate_error(cli, path.parent)
    assert f"{path}: check 'bytes-n1024'.expect: the reference disagrees with this hand value: " in line
    assert line.endswith(" is wrong")


def test_cli_raises_check_the_reference_accepts(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path, "G14.01.yaml")
    edit(path, "      V: {normal: [4, 5]}\n", "      V: {normal: [5, 5]}\n")
    line = validate_error(cli, path.parent)
    assert (
        f"{path}: check 'value-rows-must-match-keys'.args: the reference does not raise ValueError on these arguments"
        in line
    )


def test_cli_reference_raises_on_compare_arguments(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(path, "      V: {normal: [4, 2]}\n", "      V: {normal: [3, 2]}\n")
    line = validate_error(cli, path.parent)
    assert f"{path}: check 'random-outputs'.args: the reference raised ValueError on these arguments" in line
    assert "K has 4 rows but V has 3" in line


def test_cli_exercise_defined_twice(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    twin = path.with_name("G14.02b.yaml")
    shutil.copy(path, twin)
    os.utime(path, ns=(10**18, 10**18))
    os.utime(twin, ns=(2 * 10**18, 2 * 10**18))  # the stray copy is the newer: named first
    line = validate_error(cli, path.parent)
    assert f"{twin}: exercise 'G14.02' is also defined in {path} (this file is the newer)" in line


def test_cli_empty_spec_file(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    path.write_text("# nothing here\n", encoding="utf-8")
    line = validate_error(cli, path.parent)
    assert f"{path}: a spec must be a mapping" in line


def test_cli_specs_folder_without_yaml(cli, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "README.txt").write_text("no specs here\n", encoding="utf-8")
    shutil.copy(STARTER, folder / "attention.py")
    line = validate_error(cli, folder)
    assert f"{folder}: no exercise specs (*.yaml) found" in line


def test_cli_missing_specs_folder(cli, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "no-such-specs"
    line = validate_error(cli, folder)
    assert f"{folder}: specs folder not found" in line
    assert "--specs DIR" in line


def test_cli_spec_not_utf8(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    path.write_bytes(path.read_bytes().replace(b"Softmax weights", b"Softmax w\xe9ights", 1))
    line = validate_error(cli, path.parent)
    assert f"{path}: not UTF-8 text (invalid continuation byte at byte" in line


# --- keys and tags that are not plain data ---------------------------------------


def test_cli_unhashable_key(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    edit(path, "seed: 1402\n", "seed: 1402\n[1, 2]: 3\n")
    line = validate_error(cli, path.parent)
    assert f"{path}: invalid YAML: a key must be a plain string or number (line " in line


def test_dates_stay_text_and_binary_is_refused(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "x.yaml"
    path.write_text("when: 2001-12-14\n")
    assert parse_yaml(str(path)) == {"when": "2001-12-14"}
    path.write_text("blob: !!binary aGVsbG8=\n")
    with pytest.raises(SpecError, match="the tag tag:yaml.org,2002:binary is not allowed in specs"):
        parse_yaml(str(path))


def test_cli_date_argument(cli, tmp_path: Path) -> None:  # noqa: ANN001
    """A date in arguments reaches the student as the text it was written as."""
    path = spec_copy(tmp_path, "G14.05.yaml")
    path.write_text(
        path.read_text(encoding="utf-8") + "\n  - id: rejects-date\n    kind: raises\n    function: bytes_to_mib\n"
        "    args: {nbytes: 2001-12-14}\n    reason: a date\n",
        encoding="utf-8",
    )
    code, out, err = cli("validate", "--specs", path.parent, "--reference", REFERENCE)
    assert code == 0, err
    assert "reference scores 12/12: valid" in out


def test_cli_misspelt_key_gets_a_did_you_mean(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = spec_copy(tmp_path)
    roundtrip(path, lambda d: d["checks"][0].update(visiblity="visible"))
    line = validate_error(cli, path.parent)
    assert line.endswith(
        f"{path}: checks[0] 'zero-scores'.visiblity: unknown key for kind 'literal' (its keys: atol, companion, "
        "expect, rtol, why); did you mean 'visibility'?"
    )


# --- libyaml's parser under the same strict rules (issue 16) ---------------------------------------

_ROOT = Path(__file__).resolve().parents[2]
_YAML_FILES = sorted(
    str(p.relative_to(_ROOT))
    for pattern in ("g14/**/*.yaml", "tests/**/*.yaml", "tests/**/*.yml")
    for p in _ROOT.glob(pattern)
)


def _both_loaders(path: str) -> tuple[object, object]:
    """What parse_yaml gives (data, or its SpecError's text) with libyaml's parser, and with the pure-Python one."""
    import grader.readers.yamlfile as yamlfile

    def read() -> object:
        try:
            return repr(parse_yaml(path))
        except SpecError as exc:
            return f"SpecError: {exc}"

    fast = read()
    saved, yamlfile._StrictCLoader = yamlfile._StrictCLoader, None
    try:
        return fast, read()
    finally:
        yamlfile._StrictCLoader = saved


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml reads every file the pure-Python way")
def test_every_yaml_file_reads_the_same_with_libyaml_s_parser() -> None:
    assert len(_YAML_FILES) > 50  # the specs, manifests, catalogues and every malformed spec of the tests
    pairs = {p: _both_loaders(str(_ROOT / p)) for p in _YAML_FILES}
    assert [p for p, (fast, pure) in pairs.items() if fast != pure] == []


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml reads every file the pure-Python way")
@pytest.mark.parametrize(
    "text, expected",
    [
        ("a: &x [1]\nb: *x\n", "invalid YAML: aliases (*name) are not allowed in specs (line 2)"),
        ("a: 1\na: 2\n", "invalid YAML: duplicate key 'a' (line 2)"),
        ("a: !!binary aGk=\n", "invalid YAML: the tag tag:yaml.org,2002:binary is not allowed in specs (line 1)"),
        ("[" * 40 + "]" * 40, "invalid YAML: nested more than 32 levels deep (line 1)"),
        ("a: [1, 2\n", "invalid YAML: while parsing a flow sequence"),
        ("a:\tb\nc: d\t\n", None),  # a tab: the pure-Python loader decides (libyaml accepts more)
        ("a: !\nb: ! x\n", None),  # a bare tag: libyaml's events resolve it otherwise
    ],
)
def test_libyaml_s_parser_refuses_and_words_errors_as_before(tmp_path: Path, text: str, expected: str | None) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    fast, pure = _both_loaders(str(path))
    assert fast == pure
    if expected is not None:
        assert isinstance(fast, str) and fast.startswith("SpecError: ") and expected in fast


# --- a YAML file parsed before is read back from the cache (grader.readers.keptyaml, issue 29) ----------


def test_a_yaml_file_parsed_before_is_read_back_without_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import marshal

    import grader.readers.yamlfile as yamlfile
    from grader.readers.keptyaml import parse_yaml_kept

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    spec = tmp_path / "E.yaml"
    spec.write_text("a: 1\nb: [x, 2.5, null, true]\n3: '2024-01-01'\nc: 2024-01-01\n")
    want = yamlfile.parse_yaml(str(spec))
    assert parse_yaml_kept(str(spec)) == want and type(want[3]) is str and want["c"] == "2024-01-01"
    [entry] = (tmp_path / "cache" / "yaml").iterdir()

    def refuse(*_: object) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(yamlfile, "parse_yaml_text", refuse)
    assert parse_yaml_kept(str(spec)) == want  # the same bytes: from the kept entry
    spec.write_text("a: 2\n")  # other bytes: parsed (and refused here, so the parse is seen)
    with pytest.raises(AssertionError, match="parsed again"):
        parse_yaml_kept(str(spec))
    monkeypatch.undo()
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    spec.write_text("a: 1\nb: [x, 2.5, null, true]\n3: '2024-01-01'\nc: 2024-01-01\n")
    for damaged in (b"\x00garbage", marshal.dumps({"a": (1, 2)}), marshal.dumps({"a": b"x"}), _system_error()):
        entry.write_bytes(damaged)  # unreadable, or not plain data: parsed again, and kept anew
        assert parse_yaml_kept(str(spec)) == want
        assert marshal.loads(entry.read_bytes()) == want


def _system_error() -> bytes:
    """Bytes one changed byte away from a marshalled code object on which `marshal.loads` raises SystemError
    (not ValueError: a disk's changed byte crashed the whole run)."""
    import marshal

    code = marshal.dumps(compile("x = 1", "<s>", "exec"))
    for at in range(len(code)):
        for byte in range(256):
            damaged = code[:at] + bytes([byte]) + code[at + 1 :]
            try:
                marshal.loads(damaged)
            except SystemError:
                return damaged
            except Exception:  # noqa: BLE001, S112 - the others are caught already
                continue
    raise AssertionError("no byte makes marshal raise SystemError here")


def test_a_yaml_file_in_error_says_what_it_always_said_and_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.errors import SpecError
    from grader.readers.keptyaml import parse_yaml_kept
    from grader.readers.yamlfile import parse_yaml

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "bad.yaml"
    for text in (b"a: 1\na: 2\n", b"a: &x 1\nb: *x\n", b"\xff\xfe", b"a: [1\n"):
        bad.write_bytes(text)
        with pytest.raises(SpecError) as plain:
            parse_yaml(str(bad))
        with pytest.raises(SpecError) as kept:
            parse_yaml_kept(str(bad))
        assert str(kept.value) == str(plain.value)
    with pytest.raises(SpecError) as missing:
        parse_yaml_kept(str(tmp_path / "none.yaml"))
    assert "cannot read the file" in str(missing.value)
    assert not list((tmp_path / "cache").rglob("*.marshal"))
    monkeypatch.setenv("GRADER_CACHE_DIR", "")  # the cache turned off: parsed, nothing written
    bad.write_text("a: 1\n")
    assert parse_yaml_kept(str(bad)) == {"a": 1} and not list((tmp_path / "cache").rglob("*.marshal"))


def test_a_kept_entry_that_is_not_a_regular_file_of_this_user_s_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO or a link in a kept entry's place (a cache folder others can write) is parsed around, never read."""
    from grader.readers.keptyaml import parse_yaml_kept

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    spec = tmp_path / "E.yaml"
    spec.write_text("a: 1\n")
    assert parse_yaml_kept(str(spec)) == {"a": 1}
    [entry] = (tmp_path / "cache" / "yaml").iterdir()
    entry.unlink()
    os.mkfifo(entry)  # a plain read would wait for a writer forever
    assert parse_yaml_kept(str(spec)) == {"a": 1}
    entry.unlink()
    entry.symlink_to("/dev/zero")
    assert parse_yaml_kept(str(spec)) == {"a": 1}
