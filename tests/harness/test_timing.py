"""Call durations for the exporters (timing): recorded around any runner, never changing it."""

from __future__ import annotations

import argparse
import sys
import types

from grader.collected import COLLECTED, Collected, PreparedCheck
from grader.config.core import Config
from grader.config.plugins import get_plugin_manager
from grader.grading.timing import check_seconds, submission_seconds
from grader.markers import hookimpl
from grader.models import Call, CallResult, Check, Exercise, Prepared, RunOutcome, Submission


def _stub_runner() -> types.ModuleType:
    module = types.ModuleType("stub_runner")

    @hookimpl
    def grader_run_calls(submission, calls, config):  # noqa: ANN001, ANN202
        return RunOutcome(tuple(CallResult("returned", value=1, seconds=s) for s in (0.5, 0.25, 0.125)))

    module.grader_run_calls = grader_run_calls
    return module


def test_the_wrapper_records_seconds_and_returns_the_outcome_unchanged(monkeypatch, request) -> None:  # noqa: ANN001
    monkeypatch.setitem(sys.modules, "stub_runner", _stub_runner())
    pm = get_plugin_manager(["stub_runner"], load_entrypoints=False)
    config = Config(command="grade", options=argparse.Namespace(), pluginmanager=pm)
    pm.hook.grader_configure(config=config)
    # The built-in plugins configured: the sandbox started its zygote and its folder; stopped as a run ends.
    request.addfinalizer(lambda: pm.hook.grader_unconfigure(config=config))
    calls = [Call("softmax", ([0.0],), 1.0)] * 3
    outcome = pm.hook.grader_run_calls(submission=Submission("ann", "ann", "x.py"), calls=calls, config=config)
    assert [r.seconds for r in outcome.results] == [0.5, 0.25, 0.125]
    assert submission_seconds(config, "ann") == 0.875
    assert submission_seconds(config, "nobody") == 0.0
    # What the timing plugin answers through grader_call_seconds (float32: these are exact); None when unknown.
    assert list(config.hooks.call_seconds(submission_id="ann", config=config) or ()) == [0.5, 0.25, 0.125]
    assert config.hooks.call_seconds(submission_id="nobody", config=config) is None

    # Per check: each check owns its calls' place in the run order, visible checks first.
    def check(cid: str, visibility: str = "visible") -> Check:
        return Check(cid, "compare", "softmax", 1.0, visibility, "h", 1.0)

    def collected(*checks: Check) -> Collected:
        exercise = Exercise("E1", "t", "s", "p", checks)
        items = tuple(PreparedCheck(c, None, None, Prepared(calls=(calls[0],))) for c in checks)
        return Collected((exercise,), ((exercise, items),), "hash")

    # Spec order a, h (hidden), b: the calls run a, b, h.
    config.stash[COLLECTED] = collected(check("a"), check("h", "hidden"), check("b"))
    assert check_seconds(config, "ann") == {("E1", "a"): 0.5, ("E1", "b"): 0.25, ("E1", "h"): 0.125}
    # A mismatch (another runner made other calls) gives no per-check times rather than wrong ones.
    config.stash[COLLECTED] = collected(check("a"))
    assert check_seconds(config, "ann") == {}
