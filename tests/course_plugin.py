"""The course's own check kinds (``exercises/kinds.py``), loaded from the course folder as the harness loads them.

``from course_plugin import KINDS`` gives the names of that module (PEP 562); ``error_bounds`` is the
reference's float64 error analysis (``reference/error_bounds.py``), which stays out of the student wheel.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from grader.packs import load_pack

ROOT = Path(__file__).resolve().parent.parent
_MODULE = load_pack(ROOT).load_plugin()


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


error_bounds = _load(ROOT / "reference" / "error_bounds.py", "course_error_bounds")


def __getattr__(name: str) -> Any:
    return getattr(_MODULE, name)
