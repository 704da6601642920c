"""Built-in plugin: load the instructor's reference implementation.

The reference is trusted instructor code: it runs in the grader's process,
on seeded inputs, to compute expected values. It is loaded under a private
module name so it can never be mistaken for a student's module (e.g. ``attention``).
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.errors import ConfigError, Interrupted, describe_failure
from grader.markers import hookimpl


def load_reference(path: str) -> dict[str, Callable[..., Any]]:
    """Import the reference file and return its public functions.

    Parameters
    ----------
    path : str
        A Python file, e.g. ``reference/attention.py``.

    Returns
    -------
    dict of str to callable
        Every public function defined in the file, by name.

    Raises
    ------
    grader.errors.ConfigError
        If the file is missing or fails to import: any exception, a
        `SyntaxError`, a `SystemExit` or a `KeyboardInterrupt` raised while it
        runs becomes one line naming the file and line.
    """
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{path}: reference not found; pass --reference PATH to the reference implementation")
    spec = importlib.util.spec_from_file_location("_grader_reference", file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot load the reference as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Interrupted:  # the user's Ctrl-C, landed in its import: the run stops, the reference is not blamed
        raise
    except BaseException as exc:  # noqa: BLE001 - instructor code, even sys.exit() or raise KeyboardInterrupt: one line
        raise ConfigError(
            f"{path}: the reference failed to import at {describe_failure(exc, str(file))}; "
            "fix the reference (grader validate checks it)"
        ) from None
    return {
        name: obj
        for name, obj in vars(module).items()
        if inspect.isfunction(obj) and not name.startswith("_") and obj.__module__ == module.__name__
    }


@hookimpl(trylast=True)
def grader_load_reference(path: str) -> dict[str, Callable[..., Any]]:
    """Load a reference Python file with `load_reference`."""
    return load_reference(path)
