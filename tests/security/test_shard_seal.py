"""A shard's records are sealed under the course secret: an edited record is refused, never merged.

A shard folder travels between machines (an artifact, a shared volume); the
merge must not take a score, a status or a returned value someone changed
after grading. Each shard writes ``shard/seal``, HMAC-SHA256 under the course
secret of its manifest and of its records' SHA-256, and ``grader merge``
checks it before reading a record.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from grader.config.secret import CourseSecret

PACK = ROOT / "tests" / "packs" / "r3"
SECRET = "seal-test-secret-0123456789"


def test_seal_is_hmac_sha256_of_the_length_prefixed_parts() -> None:
    secret = CourseSecret(SECRET.encode())
    by_hand = hmac.new(SECRET.encode(), b"label", hashlib.sha256)
    for part in (b"ab", b"c"):
        by_hand.update(len(part).to_bytes(8, "big") + part)
    assert secret.seal(b"label", b"ab", b"c") == by_hand.hexdigest()
    assert secret.seal(b"label", b"a", b"bc") != secret.seal(b"label", b"ab", b"c")  # no ambiguity
    assert secret.seal(b"other", b"ab", b"c") != secret.seal(b"label", b"ab", b"c")
    assert CourseSecret((SECRET + "x").encode()).seal(b"label", b"ab", b"c") != secret.seal(b"label", b"ab", b"c")
    assert len(CourseSecret().seal(b"label")) == 64  # the default: a public key, still a digest


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import contextlib
    import io
    import os

    from grader.cli import main

    tmp = tmp_path_factory.mktemp("sealed")
    old = os.environ.get("GRADER_COURSE_SECRET")
    os.environ["GRADER_COURSE_SECRET"] = SECRET
    try:
        for k in (1, 2):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = main(
                    [
                        "grade",
                        "--pack",
                        str(PACK),
                        str(PACK / "submissions"),
                        "--shard",
                        f"{k}/2",
                        "--out",
                        str(tmp / f"s{k}"),
                        "-q",
                    ]
                )
            assert code == 0
    finally:
        if old is None:
            os.environ.pop("GRADER_COURSE_SECRET")
        else:
            os.environ["GRADER_COURSE_SECRET"] = old
    return {"tmp": tmp, "s1": tmp / "s1", "s2": tmp / "s2"}


def _merge(cli, monkeypatch, *args: object) -> tuple[int, str, str]:  # noqa: ANN001
    monkeypatch.setenv("GRADER_COURSE_SECRET", SECRET)
    return cli("merge", "--pack", PACK, *args)


def _holding_wrong(shards: dict[str, Path]) -> tuple[str, str]:
    """(the shard holding the sample ``wrong``, the other one)."""
    k = next(
        k for k in ("s1", "s2") if "wrong" in json.loads((shards[k] / "shard" / "manifest.json").read_text())["ids"]
    )
    return k, "s2" if k == "s1" else "s1"


def _edited(shards: dict[str, Path], name: str, edit) -> Path:  # noqa: ANN001
    """A copy of the shard holding ``wrong`` with that record's result edited by ``edit``."""
    k, _ = _holding_wrong(shards)
    copy = shards["tmp"] / name
    shutil.copytree(shards[k], copy)
    records = copy / "shard" / "records.jsonl.gz"
    lines = [json.loads(line) for line in gzip.decompress(records.read_bytes()).splitlines()]
    for record in lines:
        if record["submission"]["id"] == "wrong":
            edit(record["result"])
    records.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in lines).encode(), mtime=0))
    return copy


def _forge(result: dict) -> None:  # a full mark, consistent everywhere
    result["score"] = result["raw_score"] = result["max_score"]
    for ex in result["exercises"]:
        ex["score"] = ex["max_score"]
        for c in ex["checks"]:
            c.update(status="passed", score=c["max_score"], message="", details=[], diagnosis=[])


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        ("forged", _forge),
        ("huge", lambda r: r.update(score=10**400)),
        ("wrong-type", lambda r: r["exercises"][0]["checks"][0].update(score="2")),
        ("nan", lambda r: r["exercises"][0].update(score=float("nan"))),
    ],
)
@pytest.mark.slow
def test_an_edited_record_is_refused_in_one_line(cli, monkeypatch, shards, tmp_path, name, edit) -> None:  # noqa: ANN001
    edited = _edited(shards, name, edit)
    other = shards[_holding_wrong(shards)[1]]
    code, out, err = _merge(cli, monkeypatch, edited, other, "--out", tmp_path / "m")
    assert code == 2, err
    assert err.strip() == (
        f"grader: error: {edited / 'shard'}: the seal does not match its manifest and records (they were "
        "changed after grading, or sealed under another course secret); never merge an edited shard: "
        f"grade shard {json.loads((edited / 'shard' / 'manifest.json').read_text())['shard']['k']}/2 again"
    )
    assert not (tmp_path / "m").exists()


def test_the_untouched_shards_merge_and_a_missing_seal_is_refused(cli, monkeypatch, shards, tmp_path) -> None:  # noqa: ANN001
    code, out, err = _merge(cli, monkeypatch, shards["s1"], shards["s2"], "--out", tmp_path / "m")
    assert code == 0, err
    scores = {s["id"]: s["score"] for s in json.loads((tmp_path / "m" / "results.json").read_text())["submissions"]}
    assert scores == {"right": 6.0, "wrong": 2.0}  # what tests/harness/test_second_pack.py gives unsharded
    unsealed = shards["tmp"] / "unsealed"
    shutil.copytree(shards["s1"], unsealed)
    (unsealed / "shard" / "seal").unlink()
    code, out, err = _merge(cli, monkeypatch, unsealed, shards["s2"], "--out", tmp_path / "m2")
    assert code == 2 and err.strip().startswith(f"grader: error: {unsealed / 'shard' / 'seal'}: missing")


def _wrong_result(shards: dict[str, Path]) -> dict:
    k, _ = _holding_wrong(shards)
    records = gzip.decompress((shards[k] / "shard" / "records.jsonl.gz").read_bytes()).splitlines()
    return next(json.loads(r)["result"] for r in records if json.loads(r)["submission"]["id"] == "wrong")


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda r: r.update(score=10**400), "result.score is not a number of points"),
        (lambda r: r.update(score=True), "result.score is not a number of points"),
        (lambda r: r["exercises"][0].update(max_score=float("inf")), "result.exercises[0].max_score is not a number"),
        (lambda r: r["exercises"][0]["checks"][0].update(score="2"), "result.exercises[0].checks[0].score is not"),
        (lambda r: r["exercises"][0]["checks"][0].update(message=7), "result.exercises[0].checks[0].message is not a"),
        (lambda r: r["exercises"][0]["checks"][0].update(shown="yes"), "checks[0].shown is not true or false"),
        (lambda r: r["exercises"][0]["checks"][0].update(details=[["a"]]), "details holds something other than"),
        (lambda r: r.update(lms={"a": 1}), "result.lms is not a mapping of strings to strings"),
        (lambda r: r.update(exercises={}), "result.exercises is not a list"),
        (lambda r: r.update(extra=1), "result has unknown keys ['extra']"),
    ],
)
def test_a_recorded_result_is_decoded_strictly(shards, edit, words: str) -> None:  # noqa: ANN001
    from grader.shards import check_result_data

    result = _wrong_result(shards)
    check_result_data(result)  # as recorded: accepted
    edit(result)
    with pytest.raises(ValueError, match=None) as info:
        check_result_data(result)
    assert words in str(info.value)


@pytest.mark.slow
def test_without_a_secret_a_resealed_malformed_record_is_still_one_line(cli, monkeypatch, shards, tmp_path) -> None:  # noqa: ANN001
    """With no course secret the seal's key is public: a record edited and sealed again is decoded strictly."""
    from grader.shards import SEAL, seal_of

    plain = {}
    for k in ("s1", "s2"):  # the shards graded again without a secret
        monkeypatch.delenv("GRADER_COURSE_SECRET", raising=False)
        code, out, err = cli(
            "grade", "--pack", PACK, PACK / "submissions", "--shard", f"{k[1]}/2", "--out", tmp_path / k, "-q"
        )
        assert code == 0, err
        plain[k] = tmp_path / k
    plain["tmp"] = tmp_path
    edited = _edited(plain, "resealed", lambda r: r.update(score=10**400))
    folder = edited / "shard"
    (folder / SEAL).write_text(seal_of(folder, (folder / "manifest.json").read_bytes(), CourseSecret()) + "\n")
    code, out, err = cli("merge", "--pack", PACK, edited, plain[_holding_wrong(plain)[1]], "--out", tmp_path / "m")
    lines = [line for line in err.splitlines() if not line.startswith("grader: warning: no course secret set")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("grader: error: "), err
    assert "records.jsonl.gz: line" in err and "not a shard record (result.score is not a number of points)" in err
    assert not (tmp_path / "m").exists()
