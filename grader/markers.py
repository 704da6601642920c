"""The two pluggy markers of the ``grader`` project: a leaf module every plugin and the contract import.

``hookimpl`` marks a plugin's hook implementation (``from grader import hookimpl``); ``hookspec``
marks a hook of the contract (`grader.hookspecs`).
"""

from __future__ import annotations

import pluggy

__all__ = ["hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("grader")
"""Marks a function of `grader.hookspecs` as a hook specification."""
hookimpl = pluggy.HookimplMarker("grader")
"""Marks a plugin's function as the implementation of the hook of the same name."""
