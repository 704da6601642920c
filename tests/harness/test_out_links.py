"""A link planted in --out where a student's file goes stops the run with one line, not a traceback.

The writers refuse to write over a symbolic link (`grader.fileio.write_atomic`): that is bad instructor
input (the output folder), so the run stops with ONE line naming the file (exit 2), the link's target
untouched; it is no fault of the grader's, and no "internal error" with a traceback is logged for it.
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import ROOT, SUBMISSIONS


def test_a_link_where_a_student_file_goes_is_refused_in_one_line(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    folder = tmp_path / "class"
    for name in ("alice", "bob"):
        (folder / name).mkdir(parents=True)
        (folder / name / "attention.py").write_bytes((SUBMISSIONS / "correct_numpy" / "attention.py").read_bytes())
    out = tmp_path / "out"
    code, _, err = cli("grade", folder, "--out", out, "-q")
    assert code == 0, err
    victim = tmp_path / "victim.txt"
    victim.write_text("not a grader file\n")
    planted = out / "gradescope" / "bob.json"
    planted.unlink()
    os.symlink(victim, planted)
    code, _, err = cli("grade", folder, "--out", out, "-q", "--regrade")
    assert code == 2
    assert victim.read_text() == "not a grader file\n" and planted.is_symlink()
    lines = [line for line in err.splitlines() if not line.startswith("grader: warning:")]
    assert lines == [
        f"grader: error: --out {out}: cannot write gradescope/ ({planted} is a symbolic link, not a regular file)"
    ]
