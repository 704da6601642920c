"""The ``grader`` command line: `main` and `console_main` (in `grader.cli.app`), one module per subcommand.

This package imports nothing on its own: `grader.cli.launch`, the ``grader`` script's entry point, is
imported first and starts ``grader check``'s fork server before the grader's modules load (issue 16).
``from grader.cli import main`` loads `grader.cli.app` then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.cli.app import console_main, main

__all__ = ["console_main", "main"]


def __getattr__(name: str) -> Any:
    """`grader.cli.app`'s names (``main``, ``console_main``...), imported on first use."""
    import importlib

    if name.startswith("__") or name == "app":  # 'app' itself: the import system asks before loading it
        raise AttributeError(f"module 'grader.cli' has no attribute {name!r}")
    app = importlib.import_module("grader.cli.app")
    try:
        return getattr(app, name)
    except AttributeError:
        raise AttributeError(f"module 'grader.cli' has no attribute {name!r}") from None
