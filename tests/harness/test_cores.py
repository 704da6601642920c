"""How many submissions `grader grade` grades at once by default: the cores it may use (`usable_cores`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.config.parser import for_command
from grader.execution.jobs import usable_cores
from grader.grading.session import default_jobs, worker_count

AFFINITY = len(os.sched_getaffinity(0))


def _tree(tmp_path: Path, cgroup: str, files: dict[str, str]) -> tuple[str, str]:
    proc = tmp_path / "cgroup"
    proc.write_text(cgroup)
    root = tmp_path / "fs"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return str(proc), str(root)


def test_without_a_quota_every_core_of_the_affinity_mask_counts(tmp_path: Path) -> None:
    proc, root = _tree(tmp_path, "0::/job\n", {"job/cpu.max": "max 100000\n", "cpu.max": "max 100000\n"})
    assert usable_cores(proc, root) == AFFINITY


@pytest.mark.parametrize(("quota", "cores"), [("50000 100000", 1), ("100000 100000", 1), ("150000 100000", 2)])
def test_a_v2_quota_caps_the_count_rounded_up(tmp_path: Path, quota: str, cores: int) -> None:
    proc, root = _tree(tmp_path, "0::/a/b\n", {"a/b/cpu.max": "max 100000\n", "a/cpu.max": f"{quota}\n"})
    assert usable_cores(proc, root) == min(AFFINITY, cores)  # the quota of the cgroup above counts too


def test_a_v1_quota_caps_the_count(tmp_path: Path) -> None:
    files = {"cpu,cpuacct/slice/cpu.cfs_quota_us": "100000\n", "cpu,cpuacct/slice/cpu.cfs_period_us": "100000\n"}
    proc, root = _tree(tmp_path, "4:memory:/x\n2:cpu,cpuacct:/slice\n0::/\n", files)
    assert usable_cores(proc, root) == 1


@pytest.mark.parametrize(
    "text", ["", "garbage", "0::/../../etc\n", "2:cpu:/slice\n"], ids=["empty", "garbage", "dots", "v1-no-files"]
)
def test_what_cannot_be_read_sets_no_cap(tmp_path: Path, text: str) -> None:
    proc, root = _tree(tmp_path, text, {"cpu,cpuacct/slice/cpu.cfs_quota_us": "-1\n"})
    assert usable_cores(proc, root) == AFFINITY
    assert usable_cores(str(tmp_path / "missing"), root) == AFFINITY


def test_a_cgroup_named_in_bytes_that_are_not_utf8_is_read_as_named(tmp_path: Path) -> None:
    """A cgroup's name is any bytes but "/": one not valid UTF-8 raised UnicodeDecodeError out of `grade`'s
    start (an internal error, exit 4) where its quota should have been read."""
    (tmp_path / "cgroup").write_bytes(b"0::/job\xff\n")
    folder = os.path.join(os.fsencode(tmp_path), b"fs", b"job\xff")
    os.makedirs(folder)
    with open(os.path.join(folder, b"cpu.max"), "w") as fh:
        fh.write("100000 100000\n")
    assert usable_cores(str(tmp_path / "cgroup"), str(tmp_path / "fs")) == 1


@pytest.mark.parametrize("cores", [255, 256, 1024])
def test_the_default_is_never_more_than_jobs_may_be(monkeypatch: pytest.MonkeyPatch, cores: int) -> None:
    """``--jobs`` is at most MAX_JOBS (each job has threads and a sandboxed process of its own); the default,
    one more than the usable cores, went past it on a machine of 256 or more."""
    import grader.grading.session as session
    from grader.config.parser import MAX_JOBS

    monkeypatch.setattr(session, "usable_cores", lambda: cores)
    assert default_jobs() == min(MAX_JOBS, cores + 1)


def _on_one_core(what: Callable[[], int]) -> int:
    """``what()`` in a child pinned to one core, as ``taskset -c 0`` pins a process."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        os.write(write, str(what()).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(write)
    answer = int(os.read(read, 16))
    os.close(read)
    return answer


def test_the_count_follows_the_affinity_mask() -> None:
    """One core usable, however many the machine has."""
    assert _on_one_core(lambda: usable_cores("/nonexistent")) == 1


def test_grade_grades_one_more_at_once_than_it_has_cores() -> None:
    """Without ``--jobs``: a job waiting for the grader leaves its core to the extra one."""
    assert _on_one_core(default_jobs) == 2
    assert default_jobs() == usable_cores() + 1
    assert worker_count(for_command("grade", ["submissions"])) == usable_cores() + 1
    assert worker_count(for_command("grade", ["submissions", "--jobs", "1"])) == 1
