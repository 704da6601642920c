"""`grader.fileio.write_atomic`: whole files or none, mode 0644, never over a link, FIFO or folder."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from grader import fileio
from grader.fileio import write_atomic


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_text_and_pieces_are_written_whole_with_mode_0644_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_atomic(tmp_path / "a.txt", "héllo\n")
        write_atomic(tmp_path / "sub" / "b.txt", iter(["one ", "two\n"]))
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").read_bytes() == "héllo\n".encode()
    assert (tmp_path / "sub" / "b.txt").read_text() == "one two\n"
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "sub" / "b.txt").stat().st_mode) == 0o644
    assert _left(tmp_path) == ["a.txt", "sub"] and _left(tmp_path / "sub") == ["b.txt"]  # no temporary file left


def test_a_short_write_goes_on_until_every_byte_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, bytes(data[:3])))  # 3 bytes a call at most
    write_atomic(tmp_path / "a.txt", "0123456789")
    monkeypatch.undo()
    assert (tmp_path / "a.txt").read_text() == "0123456789"


def test_a_failure_midway_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old\n")

    def pieces() -> Iterator[str]:
        yield "new, half"
        raise RuntimeError("the writer failed")

    with pytest.raises(RuntimeError):
        write_atomic(target, pieces())
    assert target.read_text() == "old\n" and _left(tmp_path) == ["a.txt"]


@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
def test_a_destination_that_is_no_regular_file_is_refused_and_left_as_it_is(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "a.txt"
    (tmp_path / "elsewhere").write_text("kept\n")
    if kind == "link":
        target.symlink_to(tmp_path / "elsewhere")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    with pytest.raises(OSError, match="not a regular file"):
        write_atomic(target, "new\n")
    assert (tmp_path / "elsewhere").read_text() == "kept\n"
    assert {"link": target.is_symlink(), "fifo": target.is_fifo(), "folder": target.is_dir()}[kind]
    assert _left(tmp_path) == ["a.txt", "elsewhere"]


def test_temporary_names_carry_the_pid_of_the_process_writing_even_after_a_fork(tmp_path: Path) -> None:
    """The pid in a temporary file's name (kept once, `fileio._PID`) is the child's own after a fork: two
    processes never pick the same temporary name."""
    assert fileio._PID[0] == os.getpid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its kept pid and its real one
        os.close(read)
        os.write(write, f"{fileio._PID[0]} {os.getpid()}".encode())
        os._exit(0)
    os.close(write)
    kept, real = os.read(read, 100).decode().split()
    os.close(read)
    os.waitpid(pid, 0)
    assert kept == real and int(real) != os.getpid()


def test_submission_files_look_up_only_the_names_their_folder_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SubmissionFiles` lists its folder once: a name that was not there is written without a lookup of its
    destination, one that was is checked (a link there is refused and left as it is)."""
    from types import SimpleNamespace

    from grader.errors import UsageError
    from grader.reporting.files import SubmissionFiles

    (tmp_path / "ELSEWHERE").write_text("kept\n")
    (tmp_path / "b.txt").symlink_to(tmp_path / "ELSEWHERE")  # a link the instructor left in the folder
    (tmp_path / "C.TXT").write_text("old\n")  # a regular file, named in another case
    items = [SimpleNamespace(id=i, slug=i) for i in ("a", "b", "c")]
    looked_up: list[str] = []
    real = fileio.not_regular
    monkeypatch.setattr(fileio, "not_regular", lambda path: looked_up.append(os.path.basename(path)) or real(path))
    files = SubmissionFiles(tmp_path, items, ".txt", lambda r: f"{r.id}\n", "cannot write")
    files.write(items[0])
    with pytest.raises(UsageError, match="cannot write"):
        files.write(items[1])
    files.write(items[2])
    assert looked_up == ["b.txt", "c.txt"]  # "a.txt" was not there; "c.txt" is checked (C.TXT, case aside)
    assert (tmp_path / "a.txt").read_text() == "a\n" and (tmp_path / "c.txt").read_text() == "c\n"
    assert (tmp_path / "b.txt").is_symlink() and (tmp_path / "ELSEWHERE").read_text() == "kept\n"


def test_a_folder_that_cannot_be_listed_has_each_file_s_place_looked_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder searchable but not readable: its listing fails, and a link planted there is still refused."""
    from grader.fileio import names_in, write_atomic
    from grader.reporting.files import SubmissionFiles

    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / "bob.json")
    real_scandir = os.scandir

    def unreadable(path: Any) -> Any:
        if os.fspath(path) == os.fspath(out):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", unreadable)
    listed = names_in(out)
    assert "bob.json" in listed and "anything" in listed  # not listed: every place is looked up
    assert "bob.json" not in names_in(tmp_path / "missing")  # a folder not there holds nothing
    with pytest.raises(OSError, match="symbolic link"):
        write_atomic(out / "bob.json", "x", absent="bob.json" not in listed)
    files = SubmissionFiles(out, [SimpleNamespace(id="bob", slug="bob")], ".json", lambda r: "{}", "--out out")
    with pytest.raises(Exception, match="symbolic link"):
        files.write(SimpleNamespace(id="bob"))
    assert victim.read_text() == "keep\n" and (out / "bob.json").is_symlink()
