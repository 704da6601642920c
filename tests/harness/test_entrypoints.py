"""The entry points kept between runs (`grader.readers.entrypoints`): read again whenever an installation changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.readers import entrypoints

PROBE = (
    "import json, os, sys\n"
    "from grader.readers import entrypoints\n"
    "from grader.readers.entrypoints import entry_points\n"
    # The folders are made just before: kept at once unless a test asks for the real settling time.
    "entrypoints._SETTLE_NS = int(os.environ.get('PROBE_SETTLE_NS', '0'))\n"
    "print(json.dumps({'grader': entry_points('grader'), 'packs': entry_points('grader.packs'),\n"
    "                  'metadata_imported': 'importlib.metadata' in sys.modules}))\n"
)


def _dist(site: Path, name: str, text: str) -> Path:
    """A distribution's metadata folder in ``site`` with ``text`` as its entry_points.txt."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(text)
    return info


def _probe(site: Path, cache: Path | str, timeout: float | None = None, settle_ns: int = 0) -> dict:
    env = {**os.environ, "PYTHONPATH": str(site), "GRADER_CACHE_DIR": str(cache), "PROBE_SETTLE_NS": str(settle_ns)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True, timeout=timeout
    )
    return json.loads(proc.stdout)


def _ours(seen: dict, group: str = "grader") -> list[list[str]]:
    return [row for row in seen[group] if row[2].startswith("probe")]


def test_a_second_run_reads_the_kept_file_without_importlib_metadata(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    _dist(site, "probe_plugin", "[grader]\nprobe = probe_plugin:hooks\n[console_scripts]\nx = y:z\n")
    _dist(site, "probe_pack", "[grader.packs]\nr9 = r9\n")
    first = _probe(site, cache)
    assert first["metadata_imported"] is True
    assert _ours(first) == [["probe", "probe_plugin:hooks", "probe_plugin"]]
    assert _ours(first, "packs") == [["r9", "r9", "probe_pack"]]
    [kept] = cache.glob("entry-points-*.json")
    written = kept.stat().st_mtime_ns
    second = _probe(site, cache)
    assert second == {**first, "metadata_imported": False}
    assert kept.stat().st_mtime_ns == written  # read, not rewritten
    assert [p.name for p in cache.iterdir()] == [kept.name]


def test_an_installation_that_changes_is_read_again(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    info = _dist(site, "probe_plugin", "[grader]\nprobe = probe_plugin\n")
    _probe(site, cache)
    # An entry_points.txt edited in place: the folders' times stay, the file's changes.
    stamp = os.stat(site).st_mtime_ns
    (info / "entry_points.txt").write_text("[grader]\nprobe = probe_plugin.v2\n")
    os.utime(info / "entry_points.txt", ns=(stamp + 10**9, stamp + 10**9))
    os.utime(site, ns=(stamp, stamp))
    edited = _probe(site, cache)
    assert edited["metadata_imported"] is True
    assert _ours(edited) == [["probe", "probe_plugin.v2", "probe_plugin"]]
    # A distribution installed beside it, then the first one removed.
    _dist(site, "probe_other", "[grader]\nother = probe_other\n")
    assert sorted(_ours(_probe(site, cache))) == [
        ["other", "probe_other", "probe_other"],
        ["probe", "probe_plugin.v2", "probe_plugin"],
    ]
    for file in info.iterdir():
        file.unlink()
    info.rmdir()
    assert _ours(_probe(site, cache)) == [["other", "probe_other", "probe_other"]]


def test_a_tool_that_puts_the_times_back_still_changes_the_key(tmp_path: Path) -> None:
    """``tar -x`` of a plugin's next version, its archive made with fixed times (as reproducible wheels are)."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    info = _dist(site, "probe_plugin", "[grader]\n")
    for path in (info / "entry_points.txt", site):
        os.utime(path, ns=(1_580_601_600 * 10**9, 1_580_601_600 * 10**9))
    assert _ours(_probe(site, cache)) == []
    (info / "entry_points.txt").write_text("[grader]\nprobe = probe_plugin\n")
    for path in (info / "entry_points.txt", site):
        os.utime(path, ns=(1_580_601_600 * 10**9, 1_580_601_600 * 10**9))
    seen = _probe(site, cache)
    assert seen["metadata_imported"] is True
    assert _ours(seen) == [["probe", "probe_plugin", "probe_plugin"]]


def test_a_file_made_beside_the_distributions_is_no_change(tmp_path: Path) -> None:
    """Under python -m grader the working folder is first on sys.path: saving attention.py there changes nothing installed."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    _dist(site, "probe_plugin", "[grader]\nprobe = probe_plugin\n")
    first = _probe(site, cache)
    (site / "attention.py").write_text("def softmax(x): ...\n")
    (site / "attention.py").rename(site / "attention2.py")  # as an editor saves, through a rename
    assert _probe(site, cache) == {**first, "metadata_imported": False}
    _dist(site, "probe_other", "[grader]\nother = probe_other\n")  # a distribution made there is one
    assert sorted(_ours(_probe(site, cache))) == [
        ["other", "probe_other", "probe_other"],
        ["probe", "probe_plugin", "probe_plugin"],
    ]


def test_what_is_read_under_a_time_of_the_last_seconds_is_not_kept(tmp_path: Path) -> None:
    """On a file system with times to the second, a change within the same second as the last keeps every time."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    info = _dist(site, "probe_plugin", "[grader]\nprobe = probe_plugin\n")
    settle = entrypoints._SETTLE_NS
    assert settle >= 2 * 10**9  # FAT keeps times to 2 s
    # A moment old however slow the machine: a time a minute ahead of the clock is not settled either.
    ahead = time.time_ns() + 60 * 10**9
    os.utime(info / "entry_points.txt", ns=(ahead, ahead))
    first = _probe(site, cache, settle_ns=settle)
    assert _ours(first) == [["probe", "probe_plugin", "probe_plugin"]]
    assert list(cache.glob("entry-points-*.json")) == []
    assert _probe(site, cache, settle_ns=settle)["metadata_imported"] is True
    # Once every time is older than that (here: as if two minutes had passed), the entry points are kept.
    assert _probe(site, cache, settle_ns=-120 * 10**9)["metadata_imported"] is True
    assert _probe(site, cache, settle_ns=-120 * 10**9)["metadata_imported"] is False


def test_in_one_process_what_is_not_settled_is_not_kept(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    info = _dist(site, "probe_late", "[grader]\nlate = probe_late\n")
    ahead = time.time_ns() + 60 * 10**9  # not settled, however slow the machine is
    os.utime(info / "entry_points.txt", ns=(ahead, ahead))
    monkeypatch.syspath_prepend(str(site))
    stamps = os.stat(info / "entry_points.txt"), os.stat(site)
    assert ("late", "probe_late", "probe_late") in entrypoints.entry_points("grader")
    # The same second, on a file system with times to the second: the edit leaves every time as it was.
    real_stat = os.stat
    (info / "entry_points.txt").write_text("[grader]\nlater = probe_late\n")

    def coarse_stat(path, *args, **kwargs):
        for before, where in zip(stamps, (info / "entry_points.txt", site)):
            if os.fspath(path) == str(where):
                return before
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(entrypoints.os, "stat", coarse_stat)
    assert ("later", "probe_late", "probe_late") in entrypoints.entry_points("grader")


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"{not json",
        b'{"key": 1}',
        b"[]",
        b'{"key": null, "groups": {"grader": [[1, 2, 3]]}}',
        b"\xff\xfe",
        b"[" * 100_000,  # deeper than json's recursion limit: a RecursionError, not a ValueError
        b'{"key": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
)
def test_a_damaged_file_is_a_miss_and_is_rewritten(tmp_path: Path, damage: bytes) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    _dist(site, "probe_plugin", "[grader]\nprobe = probe_plugin\n")
    first = _probe(site, cache)
    [kept] = cache.glob("entry-points-*.json")
    kept.write_bytes(damage)
    again = _probe(site, cache)
    assert again == first  # read through importlib.metadata again, the same entry points
    assert json.loads(kept.read_text())["groups"]["grader"] == first["grader"]


@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero", "folder", "huge"])
def test_a_cache_file_that_is_not_a_small_regular_file_is_a_miss_without_waiting(tmp_path: Path, kind: str) -> None:
    """A FIFO would block a plain read forever, /dev/zero fill memory, a folder or a huge file fail late."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    _dist(site, "probe_plugin", "[grader]\nprobe = probe_plugin\n")
    first = _probe(site, cache)
    [kept] = cache.glob("entry-points-*.json")
    key, groups = (json.loads(kept.read_text())[part] for part in ("key", "groups"))
    kept.unlink()
    if kind == "fifo":
        os.mkfifo(kept)
    elif kind == "link-to-dev-zero":
        kept.symlink_to("/dev/zero")
    elif kind == "folder":
        kept.mkdir()
    else:  # the right key and groups, after 8 MiB of blanks: not parsed (a file this size is no cache of ours)
        kept.write_text(" " * (8 << 20) + json.dumps({"key": key, "groups": groups}))
    assert _probe(site, cache, timeout=20) == first  # importlib.metadata read again


def _kept_with(site: Path, cache: Path, rows: list) -> tuple[dict, Path]:
    """A first probe's entry points, and its cache file rewritten with ``rows`` as group ``grader``."""
    _dist(site, "probe_plugin", "[grader]\nprobe = probe_plugin\n")
    first = _probe(site, cache)
    [kept] = cache.glob("entry-points-*.json")
    data = json.loads(kept.read_text())
    data["groups"]["grader"] = rows
    kept.write_text(json.dumps(data))
    return first, kept


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_another_user_s_file_is_a_miss(tmp_path: Path) -> None:
    """In a shared cache folder, another user's file with the right key would choose this user's plugins."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    first, kept = _kept_with(site, cache, [["probe", "attention", "probe_plugin"]])  # a student's file
    os.chown(kept, 54_321, 54_321)
    assert _probe(site, cache) == first  # read again through importlib.metadata
    assert kept.stat().st_uid == os.geteuid()  # and replaced by this user's


def test_wrong_types_under_the_right_key_are_a_miss(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    first, _ = _kept_with(site, cache, [["probe", 7, "probe_plugin"]])
    assert _probe(site, cache) == first


def test_no_cache_folder_or_an_unwritable_one_still_reads(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _dist(site, "probe_plugin", "[grader]\nprobe = probe_plugin\n")
    off = _probe(site, "")  # GRADER_CACHE_DIR= turns the cache off
    assert off["metadata_imported"] is True and _ours(off) == [["probe", "probe_plugin", "probe_plugin"]]
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    assert _probe(site, blocked / "cache") == off
    assert blocked.read_text() == "not a folder"


def test_in_one_process_a_new_sys_path_entry_is_seen(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    before = entrypoints.entry_points("grader")
    site = tmp_path / "site"
    _dist(site, "probe_late", "[grader]\nlate = probe_late\n")
    monkeypatch.syspath_prepend(str(site))
    after = entrypoints.entry_points("grader")
    assert [row for row in after if row not in before] == [("late", "probe_late", "probe_late")]


def test_load_names_a_module_or_an_attribute_path() -> None:
    import grader.fileio

    assert entrypoints.load("grader.fileio") is grader.fileio
    assert entrypoints.load("grader.fileio:write_atomic") is grader.fileio.write_atomic
    assert entrypoints.load("grader.fileio : write_atomic.__name__ [extra]") == "write_atomic"
    with pytest.raises(ModuleNotFoundError):
        entrypoints.load("grader.no_such_module")
    with pytest.raises(ValueError, match="entry-point group 'pytest11' is not kept; use one of grader, grader.packs"):
        entrypoints.entry_points("pytest11")


def test_a_path_object_on_sys_path_is_read_as_its_path(tmp_path: Path, monkeypatch) -> None:
    """importlib.metadata takes a `pathlib.Path` on sys.path; the key must too (json.dumps refused it)."""
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    _dist(site, "probe_path", "[grader]\npathy = probe_path\n")
    monkeypatch.setattr(sys, "path", [site, *sys.path])
    assert ("pathy", "probe_path", "probe_path") in entrypoints.entry_points("grader")


def test_a_finder_that_lists_distributions_of_its_own_is_asked(tmp_path: Path, monkeypatch) -> None:
    """As importlib.metadata (and pluggy before) asks it: a plugin's tests often register one in memory."""
    import importlib.metadata

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))

    class InMemory(importlib.metadata.Distribution):
        def read_text(self, filename):
            return {
                "METADATA": "Metadata-Version: 2.1\nName: probe-memory\nVersion: 1.0\n",
                "entry_points.txt": "[grader]\nmemory = probe_memory\n",
            }.get(filename)

        def locate_file(self, path):
            return tmp_path / path

    class Finder:
        @staticmethod
        def find_spec(*args, **kwargs):
            return None

        @staticmethod
        def find_distributions(context=None):
            name = getattr(context, "name", None)
            return iter([InMemory()] if name in (None, "probe-memory", "probe_memory") else [])

    before = entrypoints.entry_points("grader")
    assert ("memory", "probe_memory", "probe-memory") not in before
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    assert ("memory", "probe_memory", "probe-memory") in entrypoints.entry_points("grader")
    monkeypatch.undo()
    assert ("memory", "probe_memory", "probe-memory") not in entrypoints.entry_points("grader")
