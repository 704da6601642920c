"""The per-run configuration object handed to every hook."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from grader.config.hooks import Hooks
from grader.stash import Stash

__all__ = ["Config"]


@dataclass
class Config:
    """Options and shared state of one grader run.

    Attributes
    ----------
    command : str
        ``"grade"``, ``"check"`` or ``"validate"``.
    options : argparse.Namespace
        Parsed command-line options, including those added by plugins.
    pluginmanager : pluggy.PluginManager
        The run's own plugin manager (a fresh one per run).
    stash : grader.stash.Stash
        Per-run state of plugins, under typed keys (`grader.stash.StashKey`).
    """

    command: str
    options: argparse.Namespace
    pluginmanager: pluggy.PluginManager
    stash: Stash = field(default_factory=Stash)
    _pack: Any = field(default=None, repr=False, compare=False)

    @property
    def pack(self) -> Any:
        """The course pack this run grades (`grader.packs.Pack`): ``--pack``, else the one installed.

        Raises
        ------
        grader.errors.ConfigError
            If there is none, or several and ``--pack`` chose none.
        """
        if self._pack is None:
            from grader.packs import find_pack

            self._pack = find_pack(self.option("pack"))
        return self._pack

    @property
    def hook(self) -> Any:
        """The plugin manager's hook relay (``config.hook.grader_...``), untyped; the core uses `hooks`."""
        return self.pluginmanager.hook

    @property
    def hooks(self) -> Hooks:
        """The hooks as typed methods (`grader.config.hooks.Hooks`): ``config.hooks.run_calls(...)``."""
        return Hooks(self.pluginmanager)

    @property
    def out_dir(self) -> Path | None:
        """Folder for report files, or None when the command writes none."""
        out = getattr(self.options, "out", None)
        return Path(out) if out else None

    def option(self, name: str, default: Any = None) -> Any:
        """Return option ``name``, or ``default`` when the command lacks it."""
        return getattr(self.options, name, default)
