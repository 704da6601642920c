"""The grader's cache folder (`grader.fileio.cache_dir`): the user's, never the working folder or ``/``."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from grader.fileio import cache_dir


@pytest.fixture
def no_override(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("GRADER_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return monkeypatch


def test_the_override_the_xdg_folder_then_home(no_override: pytest.MonkeyPatch, tmp_path: Path) -> None:
    no_override.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "grader"
    no_override.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "grader"
    no_override.setenv("GRADER_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    no_override.setenv("GRADER_CACHE_DIR", "")
    assert cache_dir() is None


def test_a_relative_xdg_cache_home_is_ignored(no_override: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """It would put the cache in the working folder: a student's, zipped and handed in."""
    no_override.setenv("HOME", str(tmp_path / "home"))
    no_override.setenv("XDG_CACHE_HOME", "rel")
    assert cache_dir() == tmp_path / "home" / ".cache" / "grader"


@pytest.mark.parametrize("home", ["", "/"])
def test_no_home_folder_no_cache(no_override: pytest.MonkeyPatch, home: str) -> None:
    """HOME="" is "/" to os.path.expanduser: a /.cache folder, made at the root as root."""
    no_override.setenv("HOME", home)
    assert cache_dir() is None


def test_a_user_without_home_or_password_entry_gets_no_cache(no_override: pytest.MonkeyPatch) -> None:
    """A container's arbitrary uid: expanduser gives "~" back, and the cache would be ./~/.cache/grader."""
    no_override.delenv("HOME", raising=False)
    no_override.setattr(os.path, "expanduser", lambda path: path)
    assert cache_dir() is None


def _mutant_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Path]]:
    """Run two catalogue entries once with the cache in ``tmp_path``; a function running them again, the files."""
    import argparse

    from conftest import ROOT

    from grader.config.core import Config
    from grader.config.plugins import get_plugin_manager
    from grader.models import Call
    from grader.packs.catalogue import load_catalogue, run_entries

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    entries = [
        e for e in load_catalogue(ROOT / "reference" / "mutants").entries if e.name in ("mib_decimal", "correct_lists")
    ]
    config = Config("check", argparse.Namespace(), get_plugin_manager(load_entrypoints=False))
    calls = [Call("bytes_to_mib", (1048576,), 2.0)]

    def again() -> dict[str, float]:
        return {name: outcome.results[0].value for name, outcome in run_entries(config, entries, calls).items()}

    first = again()
    assert first == {"mib_decimal": 1.048576, "correct_lists": 1.0}
    return again, sorted((tmp_path / "cache" / "catalogue").glob("*.json"))


def test_the_mutants_cache_reads_a_file_nested_too_deep_as_a_miss(tmp_path: Path, monkeypatch) -> None:
    """json raises RecursionError (not ValueError) past its depth: it stopped the whole grading run."""
    again, files = _mutant_cache(tmp_path, monkeypatch)
    for path in files:
        path.write_text("[" * 100_000)
    assert again() == {"mib_decimal": 1.048576, "correct_lists": 1.0}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_the_mutants_cache_ignores_another_user_s_file(tmp_path: Path, monkeypatch) -> None:
    """In a shared cache folder, another user's file would choose the outcome a diagnosis is read from."""
    again, files = _mutant_cache(tmp_path, monkeypatch)
    for path in files:
        data = json.loads(path.read_text())
        for frame in data["results"].values():
            frame["value"] = 42.0
        path.write_text(json.dumps(data))
        os.chown(path, 54_321, 54_321)
    assert again() == {"mib_decimal": 1.048576, "correct_lists": 1.0}


def test_the_mutants_cache_does_not_wait_on_a_fifo(tmp_path: Path, monkeypatch) -> None:
    again, files = _mutant_cache(tmp_path, monkeypatch)
    for path in files:
        path.unlink()
        os.mkfifo(path)
    seen: list[dict[str, float]] = []
    worker = threading.Thread(target=lambda: seen.append(again()), daemon=True)
    worker.start()
    worker.join(30)
    hung = worker.is_alive()
    while worker.is_alive():  # unblock a reader waiting for a writer: open each FIFO's other end
        for path in files:
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        worker.join(1)
    assert not hung
    assert seen == [{"mib_decimal": 1.048576, "correct_lists": 1.0}]


def test_read_regular_allocates_what_the_file_holds_not_its_limit(tmp_path: Path) -> None:
    """It read ``limit + 1`` bytes at once: each read of the entry points' few kilobytes allocated
    4 MiB, and each of the mutants' cache files 256 MiB (``tests/security/test_malformed_specs.py`` caught the first)."""
    import tracemalloc

    from grader.fileio import read_regular

    small = tmp_path / "small.json"
    small.write_bytes(b'{"key": 1}')
    tracemalloc.start()
    try:
        assert read_regular(small, 256 << 20) == b'{"key": 1}'
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10
    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * 1000)
    assert read_regular(exact, 1000) == b"x" * 1000
    with pytest.raises(OSError, match="not a regular file of at most 999 bytes"):
        read_regular(exact, 999)
