"""Shards of a class (``grade --shard K/N``) and their merge (``grader merge``): one unsharded run's files."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, SPECS
from scale_support import (
    assert_same_exports,
    exports,
    grader_cmd,
    grader_env,
    ids_of,
    make_class,
    run,
    without_times,
)

from grader.errors import UsageError
from grader.grading.slices import parse_shard, shard_of

pytestmark = pytest.mark.slow  # a class graded unsharded and in shards, once for the module

N = 4
OPTIONS = ("--staff", "-q", "--jobs", "1")
ROSTER: list[str] = []
"""``--roster FILE`` of the class (set by the fixture): two students on it sent nothing."""


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A class of 16 graded once unsharded and as 4 shards in 4 parallel processes, then merged."""
    tmp = tmp_path_factory.mktemp("shards")
    klass = make_class(tmp / "class")
    roster = tmp / "roster.csv"
    ids = sorted(p.name for p in klass.iterdir())
    roster.write_text("id\n" + "".join(f"{i}\n" for i in [*ids, "absent-one", "absent-two"]))
    ROSTER[:] = ["--roster", str(roster)]
    env = grader_env()
    shards = [tmp / f"shard{k}" for k in range(1, N + 1)]
    procs = [
        subprocess.Popen(
            grader_cmd("grade", klass, "--out", out, "--shard", f"{k}/{N}", *OPTIONS, *ROSTER),
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k, out in enumerate(shards, start=1)
    ]
    run("grade", klass, "--out", tmp / "full", *OPTIONS, *ROSTER)
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    run("merge", *shards, "--out", tmp / "merged", "-q")
    return {
        "tmp": tmp,
        "class": klass,
        "full": tmp / "full",
        "merged": tmp / "merged",
        **{f"shard{k}": out for k, out in enumerate(shards, start=1)},
    }


def test_four_shards_merged_are_one_unsharded_run(graded: dict[str, Path]) -> None:
    assert_same_exports(graded["full"], graded["merged"])
    merged = exports(graded["merged"])
    # every export is there: results, CSV gradebook, JUnit, Gradescope, index, summary, pages, staff pages
    for name in (
        "results.json",
        "gradebook.csv",
        "junit.xml",
        "index.html",
        "summary.html",
        "gradescope/correct_numpy-0.json",
        "correct_numpy-0.html",
        "staff/correct_numpy-0.html",
    ):
        assert name in merged
    assert len(ids_of(graded["merged"])) == 18 and "absent-two" in ids_of(graded["merged"])
    # the class's order: the folder's students sorted, then those on the roster who sent nothing
    assert ids_of(graded["merged"]) == [
        *sorted(p.name for p in graded["class"].iterdir()),
        "absent-one",
        "absent-two",
    ]


def test_the_merged_gradebook_is_the_unsharded_runs(graded: dict[str, Path]) -> None:
    """Same keys, same stored results: an unsharded run into the merged folder resumes from it."""
    rows = []
    for name in ("full", "merged"):
        book = sqlite3.connect(graded[name] / "gradebook.sqlite")
        rows.append(sorted(book.execute("SELECT key, sha256, spec_hash, student, result FROM results")))
        book.close()
    assert len(rows[0]) == 16 and rows[0] == rows[1]  # every student of the class (an import error is a result)
    resumed = graded["tmp"] / "resumed"
    shutil.copytree(graded["merged"], resumed)
    done = run("grade", graded["class"], "--out", resumed, *OPTIONS[:-2], *ROSTER)
    assert "16 result(s) reused" in done.stdout  # the two absent students have no file
    assert (resumed / "results.json").read_bytes() == (graded["full"] / "results.json").read_bytes()


def test_each_student_is_in_exactly_one_shard_by_its_id(
    graded: dict[str, Path],
) -> None:
    everyone = ids_of(graded["full"])
    held = [sid for k in range(1, N + 1) for sid in ids_of(graded[f"shard{k}"])]
    assert sorted(held) == sorted(everyone)
    for k in range(1, N + 1):
        assert all(shard_of(sid, N) == k for sid in ids_of(graded[f"shard{k}"]))
        manifest = json.loads((graded[f"shard{k}"] / "shard" / "manifest.json").read_text())
        assert manifest["shard"] == {"k": k, "n": N, "source": "--shard"}
        assert manifest["class_ids"] == everyone
        assert manifest["ids"] == ids_of(graded[f"shard{k}"])
        assert manifest["settings"]["import_timeout"] == 10.0 and manifest["options"]["staff"] is True


def test_merged_files_carry_the_shards_own_measured_times(
    graded: dict[str, Path],
) -> None:
    """A student's Gradescope file in the merge is the byte-for-byte file their shard wrote (times included)."""
    for k in range(1, N + 1):
        for sid in ids_of(graded[f"shard{k}"]):
            name = f"gradescope/{sid}.json"
            assert (graded["merged"] / name).read_bytes() == (graded[f"shard{k}"] / name).read_bytes()


def test_a_shard_keeps_a_resumable_gradebook(graded: dict[str, Path]) -> None:
    shard = graded["shard1"]
    before = (shard / "results.json").read_bytes()
    done = run(
        "grade",
        graded["class"],
        "--out",
        shard,
        "--shard",
        f"1/{N}",
        *OPTIONS[:-3],
        *ROSTER,
    )
    assert "reused" in done.stdout
    assert (shard / "results.json").read_bytes() == before


def test_the_slice_of_an_id_does_not_move_when_students_are_added() -> None:
    from types import SimpleNamespace

    from grader.grading.slices import select
    from grader.models import Submission

    def shard_ids(ids: list[str], k: int) -> list[str]:
        config = SimpleNamespace(option=lambda name: f"{k}/8" if name == "shard" else None, stash={})
        return [s.id for s in select([Submission(i, "", None) for i in ids], config)]

    ids = [f"student{i}" for i in range(200)]
    more = [*ids[:50], "newcomer", *ids[50:], "late-one"]
    for k in range(1, 9):
        assert shard_ids(ids, k) == [i for i in shard_ids(more, k) if i in ids]
    assert sorted(sid for k in range(1, 9) for sid in shard_ids(ids, k)) == sorted(ids)
    sizes = [len(shard_ids(ids, k)) for k in range(1, 9)]
    assert min(sizes) >= 10 and max(sizes) <= 45  # a hash spreads 200 ids over 8 shards (25 each on average)
    # fixed values: the slice is a keyed SHA-256 of the id, the same on every machine and Python
    assert [shard_of(f"student{i}", 4) for i in range(6)] == [shard_of(f"student{i}", 4) for i in range(6)]


def test_scheduler_indices_are_read_from_the_environment() -> None:
    assert parse_shard("2/4") == parse_shard("2/4") and (
        parse_shard("2/4").k,
        parse_shard("2/4").n,
    ) == (2, 4)
    assert parse_shard("auto/4", {"JOB_COMPLETION_INDEX": "0"}).k == 1
    assert (
        parse_shard(
            "auto/4",
            {
                "SLURM_ARRAY_TASK_ID": "7",
                "SLURM_ARRAY_TASK_MIN": "4",
                "SLURM_ARRAY_TASK_COUNT": "4",
            },
        ).k
        == 4
    )
    assert parse_shard("auto/3", {"GRADER_SHARD_INDEX": "2"}).source == "GRADER_SHARD_INDEX"
    for text, env, words in (
        ("5/4", {}, "K must be a whole number from 1 to 4"),
        ("0/4", {}, "shards are counted from 1"),
        ("2", {}, "give K/N"),
        ("auto/4", {}, "no scheduler index"),
        ("auto/4", {"JOB_COMPLETION_INDEX": "4"}, "outside 0..3"),
        (
            "auto/4",
            {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "8"},
            "the Slurm array has 8 tasks",
        ),
    ):
        with pytest.raises(UsageError, match=words):
            parse_shard(text, env)


def _merge_error(*args: object) -> str:
    done = run("merge", *args, check=False)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("grader: warning:")]
    assert len(lines) == 1 and lines[0].startswith("grader: error: "), lines
    return lines[0]


def _tampered(graded: dict[str, Path], k: int, **changes: object) -> Path:
    copy = graded["tmp"] / f"tampered{k}-{'-'.join(changes)}"
    if not copy.exists():
        shutil.copytree(graded[f"shard{k}"], copy)
    path = copy / "shard" / "manifest.json"
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path.write_text(json.dumps(data))
    return copy


def test_merge_names_a_missing_shard(graded: dict[str, Path], tmp_path: Path) -> None:
    line = _merge_error(graded["shard1"], graded["shard2"], graded["shard4"], "--out", tmp_path / "m")
    assert "1 of 4 shards missing: 3/4" in line and "--shard K/4" in line
    assert not (tmp_path / "m").exists()


def test_merge_never_writes_into_a_shard(graded: dict[str, Path]) -> None:
    shards = [graded[f"shard{k}"] for k in range(1, N + 1)]
    before = (graded["shard2"] / "results.json").read_bytes()
    line = _merge_error(*shards, "--out", graded["shard2"])
    assert "that is shard 2/4's own folder; merge into another folder" in line
    assert (graded["shard2"] / "results.json").read_bytes() == before


def test_merge_names_a_shard_given_twice(graded: dict[str, Path], tmp_path: Path) -> None:
    line = _merge_error(
        graded["shard1"],
        graded["shard2"],
        graded["shard2"],
        graded["shard3"],
        graded["shard4"],
        "--out",
        tmp_path / "m",
    )
    assert "shard 2/4 is given twice" in line and str(graded["shard2"]) in line


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"spec_hash": "0" * 64}, "different specs or reference (spec hash)"),
        ({"reference_sha256": "1" * 64}, "different reference"),
        ({"grader_version": "9.9.9"}, "different grader version"),
        ({"secret_fingerprint": "2" * 16}, "different course secret"),
        (
            {"settings": {"import_timeout": 99.0}},
            "different settings (import-timeout: 10.0 vs 99.0)",
        ),
        (
            {"options": {"after_due_date": True}},
            "different options (after-due-date: false vs true)",
        ),
        ({"plugins": ["my.plugin"]}, "different plugins (-p)"),
    ],
)
def test_merge_refuses_shards_made_differently(
    graded: dict[str, Path], tmp_path: Path, changes: dict, words: str
) -> None:
    odd = _tampered(graded, 3, **changes)
    line = _merge_error(
        graded["shard1"],
        graded["shard2"],
        odd,
        graded["shard4"],
        "--out",
        tmp_path / "m",
    )
    assert words in line and "3/4" in line and not (tmp_path / "m").exists()


def test_merge_refuses_a_shard_graded_with_other_settings(graded: dict[str, Path], tmp_path: Path) -> None:
    """Not a tampered manifest: shard 3 graded again with another import timeout."""
    odd = tmp_path / "shard3-timeout"
    run(
        "grade",
        graded["class"],
        "--out",
        odd,
        "--shard",
        f"3/{N}",
        "--import-timeout",
        "5",
        *OPTIONS,
        *ROSTER,
    )
    line = _merge_error(
        graded["shard1"],
        graded["shard2"],
        odd,
        graded["shard4"],
        "--out",
        tmp_path / "m",
    )
    assert "graded with different settings (import-timeout: 10.0 vs 5.0)" in line and str(odd) in line


def test_merge_refuses_other_specs_than_its_own(graded: dict[str, Path], tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    spec = specs / "G14.05.yaml"
    spec.write_text(spec.read_text() + "\n# changed\n")
    shards = [graded[f"shard{k}"] for k in range(1, N + 1)]
    line = _merge_error(*shards, "--specs", specs, "--out", tmp_path / "m")
    assert "other specs or another reference than --specs" in line


def test_merge_refuses_what_is_not_a_shard(graded: dict[str, Path], tmp_path: Path) -> None:
    line = _merge_error(graded["full"], "--out", tmp_path / "m")
    assert "not a shard folder" in line and str(graded["full"]) in line
    broken = _tampered(graded, 2, format="grader-shard/0")
    assert "shard format 'grader-shard/0'" in _merge_error(broken, "--out", tmp_path / "m")
    # a record cut short (a shard killed while writing is never taken as complete)
    cut = graded["tmp"] / "cut"
    shutil.copytree(graded["shard1"], cut, dirs_exist_ok=True)
    records = cut / "shard" / "records.jsonl.gz"
    lines = gzip.decompress(records.read_bytes()).splitlines(keepends=True)
    records.write_bytes(gzip.compress(b"".join(lines[:-1])))
    others = [graded[f"shard{k}"] for k in range(2, N + 1)]
    line = _merge_error(cut, *others, "--out", tmp_path / "m")
    # the seal (tests/security/test_shard_seal.py) is checked before any record is read
    assert "the seal does not match its manifest and records" in line and "grade shard 1/4 again" in line


def test_an_empty_shard_merges(tmp_path: Path) -> None:
    """A shard that holds no student (a small class) still writes its record, and the merge takes it."""
    klass = make_class(tmp_path / "class", copies=1)
    ids = sorted(p.name for p in klass.iterdir())
    n = 12  # more shards than students: some are empty
    empty = next(k for k in range(1, n + 1) if all(shard_of(sid, n) != k for sid in ids))
    run(
        "grade",
        klass,
        "--out",
        tmp_path / "e",
        "--shard",
        f"{empty}/{n}",
        "-q",
        "--insecure",
    )
    manifest = json.loads((tmp_path / "e" / "shard" / "manifest.json").read_text())
    assert manifest["ids"] == [] and manifest["class_ids"] == ids
    assert without_times("results.json", (tmp_path / "e" / "results.json").read_bytes()).count(b'"id"') == 0


def test_an_lms_export_with_a_policy_and_manual_scores_merges(tmp_path: Path) -> None:
    """A Canvas zip, late penalties and TA scores: canvas.csv and every other file as one unsharded run's."""
    import zipfile

    from conftest import SUBMISSIONS

    numpy = (SUBMISSIONS / "correct_numpy" / "attention.py").read_text()
    wrong = (SUBMISSIONS / "no_sqrt_dk" / "attention.py").read_text()
    export = tmp_path / "canvas.zip"
    with zipfile.ZipFile(export, "w") as zf:
        zf.writestr("smithbob_340934_208490284_attention.py", numpy)
        zf.writestr("smithbob_340934_208490299_attention-1.py", wrong)  # the latest attempt is graded
        zf.writestr("jonesann_LATE_340935_208490300_attention.py", numpy)
        zf.writestr("leeamy_340936_208490301_attention.py", wrong + "\n# amy\n")
        zf.writestr("kimdan_LATE_340937_208490302_attention.py", numpy + "\n# dan\n")
    (tmp_path / "policy.yaml").write_text("due: 2026-03-01T23:59:00+00:00\npenalty: {per: day, percent: 10, cap: 50}\n")
    (tmp_path / "manual.csv").write_text(
        'student,check,points,comment,grader\nsmithbob,G14.01,8,"partial credit",ta-lee\n'
        'jonesann,G14.02/zero-scores,0,"copied",prof\n'
    )
    common = (
        "--policy",
        tmp_path / "policy.yaml",
        "--manual",
        tmp_path / "manual.csv",
        "-q",
        "--insecure",
    )
    run("grade", export, "--out", tmp_path / "full", *common)
    for k in (1, 2):
        run("grade", export, "--out", tmp_path / f"s{k}", "--shard", f"{k}/2", *common)
    run("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "merged", "-q")
    assert_same_exports(tmp_path / "full", tmp_path / "merged")
    canvas = (tmp_path / "merged" / "canvas.csv").read_text()
    assert "marked LATE" in canvas and "340937" in canvas and "partial credit" in canvas


def test_odd_names_keep_their_slugs_across_shards(tmp_path: Path) -> None:
    """Ids that collide by case, RTL and non-UTF-8 names: slugs are made class-wide, so the merge is the same."""
    import os

    from conftest import SUBMISSIONS

    source = (SUBMISSIONS / "correct_numpy" / "attention.py").read_text()
    klass = tmp_path / "class"
    for i, name in enumerate(
        [b"zo\xc3\xab \xf0\x9f\x91\xa9", b"bad\xff\xfename", b"\xe2\x80\xaertl", b"Frank", b"frank"]
    ):
        folder = os.path.join(bytes(klass), name)
        os.makedirs(folder)
        with open(os.path.join(folder, b"attention.py"), "w") as f:
            f.write(source + f"\n# {i}\n")
    for k in (1, 2, 3):
        run("grade", klass, "--out", tmp_path / f"s{k}", "--shard", f"{k}/3", "-q", "--insecure")
    run("grade", klass, "--out", tmp_path / "full", "-q", "--insecure")
    run("merge", *(tmp_path / f"s{k}" for k in (1, 2, 3)), "--out", tmp_path / "merged", "-q")
    assert_same_exports(tmp_path / "full", tmp_path / "merged")
    assert {"Frank.html", "frank-2.html", "rtl.html"} <= {p.name for p in (tmp_path / "merged").iterdir()}


def test_merge_refuses_a_stale_shard_of_an_earlier_run(tmp_path: Path) -> None:
    """A sealed shard from before a student sent a new file, beside the newer run's: one line, exit 2."""
    names = [f"student{i}" for i in range(20)]
    first = names[0]
    second = next(name for name in names if shard_of(name, 2) != shard_of(first, 2))
    klass = tmp_path / "class"
    for name, sample in ((first, "correct_numpy"), (second, "starter")):
        (klass / name).mkdir(parents=True)
        shutil.copy(ROOT / "submissions" / sample / "attention.py", klass / name / "attention.py")

    def shards(tag: str) -> dict[int, Path]:
        out = {k: tmp_path / f"{tag}{k}" for k in (1, 2)}
        for k, folder in out.items():
            run("grade", klass, "--out", folder, "--shard", f"{k}/2", "-q", "--insecure")
        return out

    old = shards("old")
    # the student of the other shard sends a correct file; the class is graded again
    shutil.copy(ROOT / "submissions" / "correct_numpy" / "attention.py", klass / second / "attention.py")
    new = shards("new")
    old_manifest = json.loads((old[1] / "shard" / "manifest.json").read_text())
    new_manifest = json.loads((new[1] / "shard" / "manifest.json").read_text())
    assert old_manifest["class_listing"][0] == new_manifest["class_listing"][0]  # the first student did not change
    assert old_manifest["run"] != new_manifest["run"]
    k_second = shard_of(second, 2)
    stale, fresh = old[k_second], new[3 - k_second]
    line = _merge_error(fresh, stale, "--out", tmp_path / "m")
    assert f"belong to different runs: {second!r} was graded from other content" in line
    assert "grade every shard of one run from the same files" in line
    assert not (tmp_path / "m").exists()
    run("merge", new[1], new[2], "--out", tmp_path / "merged", "-q")
    scores = {
        s["id"]: s["score"] for s in json.loads((tmp_path / "merged" / "results.json").read_text())["submissions"]
    }
    assert scores == {first: 86.0, second: 86.0}
