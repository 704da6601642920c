"""The course secret (grader.config.secret): hidden inputs the specs alone do not reproduce."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest
from conftest import REFERENCE, SPECS, SUBMISSIONS
from course_plugin import KINDS as G14_KINDS

from grader.builtin.checks import BUILTIN_KINDS
from grader.builtin.reference import load_reference
from grader.builtin.yaml_spec import exercise_from_data
from grader.config.secret import DEFAULT_FINGERPRINT, WARNING, CourseSecret, read_secret
from grader.errors import UsageError
from grader.kinds import KindContext
from grader.readers.yamlfile import parse_yaml

KINDS = {k.name: k for k in (*BUILTIN_KINDS, *G14_KINDS)}
S1 = "a" * 32
S2 = "b" * 32


def _inputs(secret: CourseSecret) -> dict[str, tuple]:
    """Each G14.02 check's (visibility, seed, call arguments) under ``secret``."""
    path = str(SPECS / "G14.02.yaml")
    exercise = exercise_from_data(path, parse_yaml(path), KINDS, secret)
    ctx = KindContext(exercise, load_reference(str(REFERENCE)))
    return {
        c.id: (c.visibility, c.seed, [call.args for call in KINDS[c.kind].prepare(c, ctx).calls])
        for c in exercise.checks
    }


def test_two_secrets_give_different_hidden_inputs_and_the_same_visible_ones() -> None:
    default, one, two = (
        _inputs(CourseSecret()),
        _inputs(CourseSecret(S1.encode(), "t")),
        _inputs(CourseSecret(S2.encode(), "t")),
    )
    assert [v for v, _, _ in default.values()] == ["visible"] * 3 + ["hidden"] * 4 + ["visible", "hidden"]
    # The default keeps every spec seed (exercise seed * 1000 + index).
    assert [s for _, s, _ in default.values()] == [1402000 + i for i in range(9)]
    for cid, (visibility, seed, args) in default.items():
        if visibility == "visible":
            assert one[cid] == two[cid] == default[cid]
        else:
            assert one[cid][1] != seed and two[cid][1] != seed and one[cid][1] != two[cid][1]
    # The hidden checks with generated inputs draw other inputs with another secret; the
    # hand-written one (softmax-log3: literal arguments) does not depend on any seed.
    seeded = [cid for cid, (v, _, args) in default.items() if v == "hidden" and args != one[cid][2]]
    assert seeded == ["shift-invariance", "random-softmax", "random-outputs", "scaled-scores-dk6"]
    assert one["softmax-log3"][2] == default["softmax-log3"][2]
    for cid in seeded:
        assert one[cid][2] != two[cid][2]
    # The same secret gives the same inputs (determinism).
    assert _inputs(CourseSecret(S1.encode(), "t")) == one


def test_hidden_seed_is_the_documented_hmac() -> None:
    secret = CourseSecret(S1.encode(), "t")
    mac = hmac.new(S1.encode(), b"G14.02/random-softmax/1402005", hashlib.sha256).digest()
    assert secret.hidden_seed("G14.02", "random-softmax", 1402005) == int.from_bytes(mac[:8], "big")
    assert CourseSecret().hidden_seed("G14.02", "random-softmax", 1402005) == 1402005
    label = hmac.new(S1.encode(), b"grader course secret fingerprint v1", hashlib.sha256).digest()
    assert secret.fingerprint == hashlib.sha256(label).hexdigest()[:16]
    assert CourseSecret().fingerprint == DEFAULT_FINGERPRINT == "default"
    assert S1 not in repr(secret) and secret.fingerprint in repr(secret)


def test_where_the_secret_comes_from(tmp_path: Path) -> None:
    key = tmp_path / "course.key"
    key.write_text(S2 + "\n")
    key.chmod(0o600)
    assert read_secret(environ={}) == CourseSecret()
    assert read_secret(environ={"GRADER_COURSE_SECRET": S1}).key == S1.encode()
    env = {"GRADER_COURSE_SECRET": S1, "GRADER_COURSE_SECRET_FILE": str(key)}
    assert read_secret(environ=env).key == S2.encode()  # the key file wins over the variable
    other = tmp_path / "other.key"
    other.write_text(S1)
    warned: list[str] = []
    got = read_secret(other, environ=env, warn=warned.append)  # --secret-file wins over both
    assert got.key == S1.encode() and got.source == f"--secret-file {other}"
    assert warned == [f"--secret-file {other}: the key file can be read by other users; chmod 600 {other}"]
    with pytest.raises(UsageError, match=r"^GRADER_COURSE_SECRET: the course secret has 5 characters, at least 16"):
        read_secret(environ={"GRADER_COURSE_SECRET": "short"})
    with pytest.raises(UsageError, match=r"cannot read the key file \(No such file or directory\)$"):
        read_secret(tmp_path / "missing.key", environ={})


def _grade(cli, out: Path, *extra: str) -> tuple[int, str]:
    code, _, err = cli("grade", SUBMISSIONS / "correct_numpy", SUBMISSIONS / "no_sqrt_dk", "--out", out, "-q", *extra)
    return code, err


@pytest.mark.slow
def test_default_secret_warns_once_and_a_secret_grades_the_same_bytes(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = _grade(cli, tmp_path / "default")
    assert code == 0
    assert err.splitlines().count(f"grader: warning: {WARNING}") == 1
    monkeypatch.setenv("GRADER_COURSE_SECRET", S1)
    for run in ("a", "b"):
        code, err = _grade(cli, tmp_path / run)
        assert code == 0 and WARNING not in err
    assert (tmp_path / "a" / "results.json").read_bytes() == (tmp_path / "b" / "results.json").read_bytes()
    results = {s["id"]: s for s in json.loads((tmp_path / "a" / "results.json").read_text())["submissions"]}
    assert results["correct_numpy"]["score"] == results["correct_numpy"]["max_score"]  # any secret: full marks
    code, out, err = cli("validate")  # the reference still agrees with itself on the secret's inputs
    assert code == 0 and "valid" in out, err
    code, _, err = cli(
        "grade", SUBMISSIONS / "correct_numpy", "--out", tmp_path / "c", "-q", "--secret-file", tmp_path / "none.key"
    )
    assert code == 2 and err.strip() == (
        f"grader: error: --secret-file {tmp_path / 'none.key'}: cannot read the key file (No such file or directory)"
    )


@pytest.mark.slow
def test_a_stored_result_is_reused_only_under_the_same_secret(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gradebook key holds the secret's fingerprint: results graded on other hidden inputs are not reused."""
    out = tmp_path / "out"
    runs = []
    for secret in (S1, S2, S2):
        monkeypatch.setenv("GRADER_COURSE_SECRET", secret)
        code, stdout, err = cli("grade", SUBMISSIONS / "correct_numpy", "--out", out, "--insecure")
        assert code == 0, err
        runs.append("result(s) reused" in stdout)
    assert runs == [False, False, True]
