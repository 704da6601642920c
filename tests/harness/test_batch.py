"""Batches: parallel grading, the resumable SQLite gradebook, zip exports, rosters."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, SUBMISSIONS, load_stretch

import grader.intake.archive
from grader.intake.archive import ArchiveError, safe_extract

SAMPLES = (
    "correct_numpy",
    "correct_lists",
    "mib_decimal",
    "no_sqrt_dk",
    "starter",
    "syntax_error",
    "mask_after_softmax",
)


def _class_folder(tmp_path: Path, copies: int = 1) -> Path:
    folder = tmp_path / "class"
    for n in range(copies):
        for name in SAMPLES:
            student = folder / f"{name}-{n}"
            student.mkdir(parents=True)
            source = (SUBMISSIONS / name / "attention.py").read_text()
            # Each copy differs by a comment, so no two files share a hash.
            (student / "attention.py").write_text(source + f"\n# copy {n}\n")
    return folder


@pytest.mark.slow
def test_parallel_results_are_byte_identical_to_sequential(cli, tmp_path: Path) -> None:
    folder = _class_folder(tmp_path)
    for jobs in ("1", "2"):
        code, _, err = cli("grade", folder, "--out", tmp_path / f"j{jobs}", "--jobs", jobs, "-q")
        assert code == 0, err
    one = (tmp_path / "j1" / "results.json").read_bytes()
    assert one == (tmp_path / "j2" / "results.json").read_bytes()
    ids = [s["id"] for s in json.loads(one)["submissions"]]
    assert ids == sorted(f"{name}-0" for name in SAMPLES)


@pytest.mark.slow
def test_rerun_reuses_the_gradebook_and_regrade_forces(cli, tmp_path: Path) -> None:
    folder = _class_folder(tmp_path)
    out = tmp_path / "out"
    code, stdout, _ = cli("grade", folder, "--out", out, "-q")
    assert code == 0
    first = (out / "results.json").read_bytes()
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        rows = db.execute("SELECT student, sha256, grader_version FROM results ORDER BY student").fetchall()
    # syntax_error is graded ("error" status, but a result) and stored too.
    assert [r[0] for r in rows] == sorted(f"{name}-0" for name in SAMPLES)
    assert all(r[2] == "0.1.0" and len(r[1]) == 64 for r in rows)
    code, stdout, _ = cli("grade", folder, "--out", out, "-q")
    assert f"gradebook: {len(SAMPLES)} result(s) reused" in stdout
    assert (out / "results.json").read_bytes() == first
    code, stdout, _ = cli("grade", folder, "--out", out, "-q", "--regrade")
    assert "reused" not in stdout
    assert (out / "results.json").read_bytes() == first


def test_a_changed_file_is_graded_again(cli, tmp_path: Path) -> None:
    folder = _class_folder(tmp_path)
    out = tmp_path / "out"
    cli("grade", folder, "--out", out, "-q")
    (folder / "starter-0" / "attention.py").write_bytes((SUBMISSIONS / "correct_numpy" / "attention.py").read_bytes())
    code, stdout, _ = cli("grade", folder, "--out", out, "-q")
    assert f"gradebook: {len(SAMPLES) - 1} result(s) reused" in stdout
    results = {s["id"]: s for s in json.loads((out / "results.json").read_text())["submissions"]}
    assert results["starter-0"]["score"] == results["correct_numpy-0"]["score"] == results["starter-0"]["max_score"]


@pytest.mark.slow
def test_kill_9_midway_then_resume(tmp_path: Path) -> None:
    """Kill a batch with SIGKILL; the rerun grades only what is left, with identical results."""
    folder = _class_folder(tmp_path, copies=4)
    total = 4 * len(SAMPLES)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "--jobs", "2", "-q"]
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    book = out / "gradebook.sqlite"
    deadline = time.monotonic() + 120
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if book.exists():
            try:
                with sqlite3.connect(book, timeout=1) as db:
                    done = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.Error:
                done = 0
            if done >= 5:
                break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 5 <= done < total, f"the batch was not killed midway ({done} of {total})"
    assert not (out / "results.json").exists()

    rerun = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    reused = int(rerun.stdout.split("gradebook: ")[1].split(" result(s) reused")[0])
    assert done <= reused < total
    with sqlite3.connect(book) as db:
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == total

    clean = subprocess.run(
        command[:6] + [str(tmp_path / "clean")] + command[7:], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert clean.returncode == 0, clean.stderr
    assert (out / "results.json").read_bytes() == (tmp_path / "clean" / "results.json").read_bytes()


def _zip(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, target)
    return path


def test_grade_a_zip_export_with_a_roster(cli, tmp_path: Path) -> None:
    numpy_src = (SUBMISSIONS / "correct_numpy" / "attention.py").read_bytes()
    mib_src = (SUBMISSIONS / "mib_decimal" / "attention.py").read_bytes()
    archive = _zip(
        tmp_path / "class.zip",
        {
            "export/alice/attention.py": numpy_src,
            "export/bob.py": mib_src,
            "export/dave/attention.py": numpy_src,
            "export/../../escape.py": b"x = 1\n",
            "__MACOSX/export/._alice.py": b"junk",
        },
        links={"export/erin/attention.py": "/etc/passwd"},
    )
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\nalice,Alice\nbob,Bob\ncarol,Carol\nerin,Erin\n")
    code, out, err = cli("grade", archive, "--out", tmp_path / "out", "--roster", roster, "-q")
    assert code == 0, err
    assert (
        f"grader: warning: {archive}: skipped export/../../escape.py: an absolute path or one with '..', "
        "refused (it may lead outside)"
    ) in err
    assert f"grader: warning: {archive}: skipped export/erin/attention.py: a symbolic link" in err
    assert "grader: warning: not on the roster: dave" in err
    # erin's only file was a symbolic link: skipped, and erin is listed with the reason.
    assert "grader: warning: 1 student(s) on the roster sent nothing: carol" in err
    assert not (tmp_path / "escape.py").exists()
    results = {s["id"]: s for s in json.loads((tmp_path / "out" / "results.json").read_text())["submissions"]}
    assert list(results) == ["alice", "bob", "dave", "erin", "carol"]
    assert results["alice"]["score"] == results["alice"]["max_score"]
    assert results["alice"]["path"] == f"{archive}:alice"
    assert results["bob"]["path"] == f"{archive}:bob.py"
    g1405 = {e["id"]: e for e in results["bob"]["exercises"]}["G14.05"]
    assert g1405["score"] == g1405["max_score"] - 5
    assert results["erin"]["status"] == "error"
    assert results["erin"]["error"] == f"attention.py was left out of {archive}: it is a symbolic link"
    assert results["erin"]["path"] == f"{archive}:erin"
    assert results["carol"]["status"] == "error" and results["carol"]["error"] == "no submission from this student"


def test_zip_bomb_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grader.intake.archive, "MAX_TOTAL_BYTES", 8 << 20)
    zeros = bytes(1 << 20)
    archive = _zip(tmp_path / "bomb.zip", {f"s{i}/attention.py": zeros for i in range(12)})
    assert archive.stat().st_size < 200_000
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(ArchiveError, match=r"extracts to more than 8 MiB \(a zip bomb\?\)"):
        safe_extract(archive, dest, "attention.py")


def test_oversized_member_is_skipped(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "big.zip", {"a/attention.py": bytes(3 << 20), "b/attention.py": b"x = 1\n"})
    dest = tmp_path / "x"
    dest.mkdir()
    extracted = safe_extract(archive, dest, "attention.py")
    assert extracted.skipped == ["a/attention.py: larger than 2 MiB"]
    a, b = extracted.students
    assert (a.name, a.file, a.problem) == (
        "a",
        None,
        f"attention.py was left out of {archive}: it is larger than 2 MiB",
    )
    assert (b.name, b.problem) == ("b", "")
    assert b.file == dest / "00001" / "attention.py" and b.file.read_bytes() == b"x = 1\n"
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == ["00001", "00001/attention.py"]


def test_not_a_zip_is_a_usage_error(cli, tmp_path: Path) -> None:
    fake = tmp_path / "class.zip"
    fake.write_text("not a zip")
    code, out, err = cli("grade", fake, "--out", tmp_path / "out")
    assert code == 2
    assert err.strip().startswith(f"grader: error: {fake}: not a readable zip archive")
    code, out, err = cli("grade", tmp_path / "missing.zip", "--out", tmp_path / "out")
    assert code == 2 and "no such file or folder" in err


def test_progress_lines_when_not_a_terminal(cli, tmp_path: Path) -> None:
    folder = _class_folder(tmp_path)
    code, out, err = cli("grade", folder, "--out", tmp_path / "out", "--jobs", "2")
    lines = [line for line in err.splitlines() if "no course secret set" not in line]  # tests use no secret
    assert lines[0].startswith(f"[1/{len(SAMPLES)}] ")
    assert lines[-1].startswith(f"[{len(SAMPLES)}/{len(SAMPLES)}] ")
    assert any("error: importing the file failed with SyntaxError" in line for line in lines)


def test_a_roster_without_an_id_column_is_refused(cli, tmp_path: Path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("name\nx\n")
    code, out, err = cli("grade", SUBMISSIONS / "correct_numpy", "--out", tmp_path / "out", "--roster", roster)
    assert code == 2
    assert err.strip() == (
        f"grader: error: --roster {roster}: line 1: no student id column (found 'name', comma-separated); "
        "the first row must name the columns, "
        "one of them 'id', 'student', 'student_id', 'username', 'login', 'sis_user_id'"
    )
    roster.write_text("Name,Username\nAlice A,alice\n")
    code, out, err = cli("grade", SUBMISSIONS / "correct_numpy", "--out", tmp_path / "out", "--roster", roster, "-q")
    assert code == 0
    assert "not on the roster: correct_numpy" in err
    assert "1 student(s) on the roster sent nothing: alice" in err


def test_a_zip_student_without_a_python_file_is_listed(cli, tmp_path: Path) -> None:
    archive = _zip(
        tmp_path / "c.zip",
        {
            "export/alice/attention.py": (SUBMISSIONS / "correct_numpy" / "attention.py").read_bytes(),
            "export/bob/README.txt": b"I could not finish",
        },
    )
    code, out, err = cli("grade", archive, "--out", tmp_path / "out", "-q")
    assert code == 0, err
    results = {s["id"]: s for s in json.loads((tmp_path / "out" / "results.json").read_text())["submissions"]}
    assert list(results) == ["alice", "bob"]
    assert results["bob"]["error"] == (
        f"no attention.py in {archive}:bob: it holds README.txt, no attention.py; "
        "the student folder must hold attention.py"
    )


def test_an_empty_zip_names_the_archive(cli, tmp_path: Path) -> None:
    archive = _zip(tmp_path / "empty.zip", {"notes.txt": b"nothing here"})
    code, out, err = cli("grade", archive, "--out", tmp_path / "out")
    assert code == 2
    assert err.strip() == f"grader: error: {archive}: holds no attention.py, no student folders and no .py files"


def test_folders_left_by_a_killed_grader_are_removed_by_the_next(tmp_path: Path) -> None:
    import subprocess

    from grader.fileio import remove_stale_scratch, scratch_prefix

    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid names no process now
    mine = tmp_path / f"{scratch_prefix('sandbox')}abc"
    gone = tmp_path / f"grader-sandbox-{dead.pid}-xyz"
    other = tmp_path / f"grader-notes-{dead.pid}"  # not a scratch name
    for folder in (mine, gone / "job3", other):
        folder.mkdir(parents=True)
    assert remove_stale_scratch(str(tmp_path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, other.name])


SWAP_PLUGIN = """
from pathlib import Path
from grader import hookimpl

@hookimpl
def grader_collection_finish(submissions, collected, config):
    # After every file was located and hashed, one student overwrites theirs.
    for sub in submissions:
        if sub.id == "swapped":
            Path(sub.file).write_bytes(Path(config.option("swap_with")).read_bytes())

@hookimpl
def grader_addoption(parser):
    parser.add_argument("--swap-with")
"""


def test_a_file_changed_after_it_was_located_is_graded_as_read_and_not_kept(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result names the bytes that ran; the gradebook keeps it under no other content's key."""
    import hashlib

    (tmp_path / "g14_swap.py").write_text(SWAP_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = tmp_path / "class"
    correct = (SUBMISSIONS / "correct_numpy" / "attention.py").read_bytes()
    for name in ("swapped", "twin"):
        (folder / name).mkdir(parents=True)
        (folder / name / "attention.py").write_bytes(correct)
    starter = SUBMISSIONS / "starter" / "attention.py"
    out = tmp_path / "out"
    code, _, err = cli("grade", folder, "--out", out, "-q", "-p", "g14_swap", "--swap-with", starter)
    assert code == 0, err
    results = {s["id"]: s for s in json.loads((out / "results.json").read_text())["submissions"]}
    assert results["swapped"]["score"] == 0 and results["twin"]["score"] == 86
    assert results["swapped"]["sha256"] == hashlib.sha256(starter.read_bytes()).hexdigest()
    # Only the twin's result was kept: the starter's score is not filed under the correct file's hash.
    rows = sqlite3.connect(out / "gradebook.sqlite").execute("SELECT student, sha256 FROM results").fetchall()
    assert rows == [("twin", hashlib.sha256(correct).hexdigest())]


def test_a_file_gone_before_its_turn_costs_only_its_grade(tmp_path: Path) -> None:
    from grader.execution.calls import run_calls
    from grader.models import Call

    out = run_calls(str(tmp_path / "attention.py"), [Call("softmax", ([1.0],), 2.0)])
    assert out.import_error == (
        "attention.py could not be read (No such file or directory); was it moved or changed during grading?"
    )
    assert [r.status for r in out.results] == ["skipped"] and out.sha256 == ""


def test_a_batch_of_gradebook_rows_does_not_hold_the_write_lock_while_no_row_comes(tmp_path: Path) -> None:
    """Rows are committed in batches (one transaction for up to COMMIT_SECONDS); a batch left open while
    no row comes (a slow or hanging submission, the run's tail) held SQLite's write lock: a second
    grader run on the same gradebook waited its 5 s and ended with "database is locked". The batch is
    committed COMMIT_SECONDS after its first row whether or not another row comes."""
    from grader.builtin import gradebook
    from grader.models import SubmissionResult

    path = tmp_path / "gradebook.sqlite"
    book = gradebook.Gradebook(path)
    try:
        result = SubmissionResult("s1", "s1.py", "a" * 64, "graded", 1.0, 1.0, ())
        book.put("k1", "spec", result)
        other = sqlite3.connect(str(path), timeout=0, isolation_level=None)
        try:
            deadline = time.monotonic() + gradebook.COMMIT_SECONDS + 5.0 * load_stretch()
            while True:
                try:
                    other.execute("BEGIN IMMEDIATE")  # the write lock, without waiting
                    break
                except sqlite3.OperationalError:
                    assert time.monotonic() < deadline, "the first run's batch still holds the write lock"
                    time.sleep(0.05)
            other.execute("INSERT OR IGNORE INTO arrivals VALUES ('s2', ?, 'now')", ("b" * 64,))
            other.execute("COMMIT")
            assert other.execute("SELECT count(*) FROM results").fetchone() == (1,)  # the batch's row, committed
        finally:
            other.close()
        assert book.get("k1") is not None
    finally:
        book.close()


def test_a_gradebook_that_cannot_commit_at_the_end_says_so_in_one_line(tmp_path: Path) -> None:
    """A disk that fills up midway (``--out`` on a full disk): the reports' one line came, then the gradebook's last
    commit at the run's end raised sqlite3.OperationalError out of the unconfigure hooks: a traceback, exit 1."""
    from grader.builtin import gradebook
    from grader.errors import UsageError
    from grader.models import SubmissionResult

    class Full:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __getattr__(self, name: str) -> object:
            return getattr(self.db, name)

        def execute(self, sql: str, *args: object) -> object:
            if sql == "COMMIT":
                raise sqlite3.OperationalError("database or disk is full")
            return self.db.execute(sql, *args)

    path = tmp_path / "gradebook.sqlite"
    book = gradebook.Gradebook(path)
    real = book.db
    book.put("k1", "spec", SubmissionResult("s1", "s1.py", "a" * 64, "graded", 1.0, 1.0, ()))
    book.db = Full(real)  # type: ignore[assignment]
    with pytest.raises(UsageError) as raised:
        book.close()
    assert str(raised.value) == (
        f"--gradebook {path}: cannot save the last results (database or disk is full); grade again to grade them"
    )
    with pytest.raises(sqlite3.ProgrammingError):
        real.execute("SELECT 1")  # closed
    assert sqlite3.connect(str(path)).execute("SELECT count(*) FROM results").fetchone() == (0,)  # rolled back


def test_an_error_at_the_runs_end_is_one_line_and_its_exit_code(tmp_path: Path) -> None:
    (tmp_path / "endfails.py").write_text(
        "from grader import hookimpl\n"
        "from grader.errors import UsageError\n"
        "@hookimpl\n"
        "def grader_unconfigure(config):\n"
        "    raise UsageError('--gradebook g.sqlite: cannot save the last results (disk full)')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "grader", "check", str(SUBMISSIONS / "correct_numpy"), "-p", "endfails"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2
    assert (
        done.stderr.splitlines()[-1] == "grader: error: --gradebook g.sqlite: cannot save the last results (disk full)"
    )
    assert "Traceback" not in done.stderr
