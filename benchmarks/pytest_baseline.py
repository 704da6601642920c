"""Baseline for benchmarks/bench_grade.py: the same checks, the naive way.

Run as ``GRADER_BASELINE_SUBMISSION=FILE python -m pytest benchmarks/pytest_baseline.py``:
one pytest process per submission, importing the submission into the test
process (no isolation) and judging every check with the grader's own check
kinds. This is how many course autograders work; the benchmark compares
the grader against it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from grader.config.core import Config
from grader.config.parser import build_parser
from grader.config.plugins import get_plugin_manager
from grader.grading import session
from grader.grading.judging import judge
from grader.models import CallResult

ROOT = Path(__file__).resolve().parent.parent


def _collected():
    pm = get_plugin_manager(load_entrypoints=False)
    options = build_parser(pm).parse_args(
        ["check", "x.py", "--specs", str(ROOT / "exercises"), "--reference", str(ROOT / "reference/attention.py")]
    )
    return session.collect(Config("check", options, pm))


def _call(module, call) -> CallResult:
    fn = getattr(module, call.function, None)
    try:
        value = fn(*json.loads(json.dumps(list(call.args))))
    except NotImplementedError:
        return CallResult("not_implemented")
    except Exception as exc:  # noqa: BLE001 - the baseline judges like the grader
        return CallResult("raised", error_type=type(exc).__name__, value_error=isinstance(exc, ValueError))
    return CallResult("returned", value=json.loads(json.dumps(_plain(value))))


def _plain(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def test_submission() -> None:
    path = os.environ["GRADER_BASELINE_SUBMISSION"]
    spec = importlib.util.spec_from_file_location("attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    failed = 0
    for _exercise, items in _collected().checks:
        for pc in items:
            results = [_call(module, c) for c in pc.prepared.calls]
            verdict = judge(pc.check, pc.prepared, results, pc.kind, pc.context)
            failed += verdict.status != "passed"
    assert failed == 0, f"{failed} checks did not pass: the baseline grades correct submissions only"
