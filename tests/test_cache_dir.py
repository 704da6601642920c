"""The grader's cache folder (`grader.fileio.cache_dir`): the user's, never the working folder or ``/``."""

from __future__ import annotations

import os
from pathlib import Path

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
