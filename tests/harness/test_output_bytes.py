"""Every byte of every file ``grader grade`` writes, pinned: the samples and a generated class, graded then resumed.

The writers keep work between students (fragments per distinct result, compiled templates,
a smaller gradebook row); none of that may change a byte a user reads. This test grades the
samples (but ``hangs``, whose timeouts would make it slow) and a class of generated submissions,
with every call's time fixed (``-p fixed_seconds``) and ``SOURCE_DATE_EPOCH`` set, and compares
each output file's SHA-256 with the digests recorded from the code before those changes
(``tests/harness/data/output_digests.json``). It then runs the same command again: every result
comes from the gradebook (a resume), and each file must again be the recorded one (a result taken
from the gradebook has no call times, so the timed exports differ from the first run's, as they
always have).

An intended change of an output is made by naming it in a test of its own and recording the digests
again: ``GRADER_RECORD_DIGESTS=1 pytest tests/harness/test_output_bytes.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import SUBMISSIONS

from grader.cli import main

DIGESTS = Path(__file__).parent / "data" / "output_digests.json"
MIX = (
    "correct_numpy",
    "correct_lists",
    "correct_numpy",
    "mib_decimal",
    "correct_numpy",
    "no_sqrt_dk",
    "correct_lists",
    "mask_after_softmax",
    "correct_numpy",
    "transposed_shapes",
    "starter",
    "syntax_error",
)
CLASS_SIZE = 36


def _make_class(folder: Path) -> None:
    for sample in sorted(SUBMISSIONS.iterdir()):
        if sample.is_dir() and sample.name != "hangs":
            shutil.copytree(sample, folder / sample.name)
    for i in range(CLASS_SIZE):
        name = MIX[i % len(MIX)]
        student = folder / f"s{i:03d}-{name}"
        student.mkdir()
        source = (SUBMISSIONS / name / "attention.py").read_text()
        (student / "attention.py").write_text(source + f"\n# student {i}\n")


def _digests(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and not p.name.startswith("gradebook.sqlite")
    }


@pytest.mark.slow
def test_every_output_file_of_a_graded_and_a_resumed_class_keeps_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _make_class(tmp_path / "class")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    monkeypatch.delenv("GRADER_COURSE_SECRET", raising=False)  # hidden inputs as the specs make them
    monkeypatch.syspath_prepend(str(Path(__file__).parent.parent))  # tests/fixed_seconds.py
    argv = ["grade", "class", "--out", "out", "-q", "-p", "fixed_seconds"]
    assert main(argv) == 0
    graded = _digests(tmp_path / "out")
    with sqlite3.connect(tmp_path / "out" / "gradebook.sqlite") as db:
        rows = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    students = len(list((tmp_path / "class").iterdir()))
    assert students == CLASS_SIZE + 11 and rows == students  # every result kept (syntax_error's too: it is one)
    assert main(argv) == 0
    resumed = _digests(tmp_path / "out")
    assert resumed["results.json"] == graded["results.json"]  # the same results, from the gradebook
    if os.environ.get("GRADER_RECORD_DIGESTS"):
        DIGESTS.write_text(json.dumps({"graded": graded, "resumed": resumed}, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(DIGESTS.read_text())
    assert sorted(graded) == sorted(recorded["graded"])  # the same files
    for run, found in (("graded", graded), ("resumed", resumed)):
        changed = [name for name in found if found[name] != recorded[run][name]]
        assert not changed, f"{run}: these files' bytes changed: {changed}"
