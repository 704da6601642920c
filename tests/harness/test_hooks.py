"""The typed hook facade (grader.config.core) and the subcommand options plugins add (grader_addoption)."""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import pytest

from grader import hookspecs
from grader.cli import main
from grader.config.core import Hooks
from grader.config.parser import build_parser
from grader.config.plugins import get_plugin_manager
from grader.errors import UsageError
from grader.markers import hookimpl


def test_every_hook_has_a_typed_method_with_the_specs_parameters() -> None:
    for name in hookspecs.HOOK_NAMES:
        method = getattr(Hooks, name.removeprefix("grader_"), None)
        assert method is not None, f"grader.config.core.Hooks has no method for {name}"
        spec = list(inspect.signature(getattr(hookspecs, name)).parameters)
        mine = list(inspect.signature(method).parameters)[1:]  # without self
        assert mine == spec, name


def test_a_facade_call_reaches_the_implementations_and_returns_their_result(monkeypatch) -> None:  # noqa: ANN001
    module = types.ModuleType("kinds_plugin")
    module.grader_check_kinds = hookimpl(lambda: ["a kind"])
    monkeypatch.setitem(sys.modules, "kinds_plugin", module)
    pm = get_plugin_manager(["kinds_plugin"], load_entrypoints=False)
    hooks = Hooks(pm)
    assert ["a kind"] in hooks.check_kinds()
    assert [impl.plugin_name for impl in hooks.implementations("grader_check_kinds")][-1] == "kinds_plugin"


def _help(command: str, plugins: tuple[str, ...] = ()) -> str:
    pm = get_plugin_manager(plugins, load_entrypoints=False)
    parser = build_parser(pm)
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[union-attr]
    return sub.format_help()


def test_each_subcommand_lists_the_options_it_uses() -> None:
    grade, check, doctor, validate = _help("grade"), _help("check"), _help("doctor"), _help("validate")
    assert "--gradebook" in grade and "--roster" in grade and "--jobs" in grade and "--junit" in grade
    assert "--gradebook" not in check and "--roster" not in check and "--jobs" not in check
    assert "--points-notice" in check and "--junit" in check and "--public" in check
    assert "--points-notice" not in grade
    assert "--specs" not in doctor and "--import-timeout" not in doctor and "--insecure" in doctor
    assert "--secret-file" in validate and "--mutants" not in validate and "--junit" not in validate


def test_an_option_of_another_subcommand_is_a_usage_error(capsys) -> None:  # noqa: ANN001
    assert main(["check", "submissions/correct_numpy", "--gradebook", "x.sqlite"]) == UsageError.exit_code
    assert "unrecognized arguments: --gradebook" in capsys.readouterr().err


def test_a_plugin_adds_options_to_the_subcommands_it_serves(monkeypatch) -> None:  # noqa: ANN001
    served = types.ModuleType("served_plugin")

    def grader_addoption(parser, command):  # noqa: ANN001, ANN202
        if command == "audit":
            parser.add_argument("--audit-only-flag", action="store_true")

    served.grader_addoption = hookimpl(grader_addoption)
    everywhere = types.ModuleType("everywhere_plugin")
    everywhere.grader_addoption = hookimpl(lambda parser: parser.add_argument("--everywhere-flag"))
    monkeypatch.setitem(sys.modules, "served_plugin", served)
    monkeypatch.setitem(sys.modules, "everywhere_plugin", everywhere)
    plugins = ("served_plugin", "everywhere_plugin")
    assert "--audit-only-flag" in _help("audit", plugins)
    assert "--audit-only-flag" not in _help("grade", plugins)
    # An implementation that does not take the command (the old signature) serves every subcommand.
    assert "--everywhere-flag" in _help("grade", plugins) and "--everywhere-flag" in _help("doctor", plugins)


@pytest.mark.parametrize("name", ["sandbox", "runner", "grader.builtin.sandbox"])
def test_blocking_an_essential_plugin_is_a_one_line_usage_error(name: str, capsys) -> None:  # noqa: ANN001
    assert main(["grade", "submissions/correct_numpy", "-p", f"no:{name}"]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "cannot be blocked" in err


@pytest.mark.parametrize("order", [1, -1])
def test_one_runner_answers_whatever_the_registration_order(monkeypatch, order: int) -> None:  # noqa: ANN001
    """Only the runner answers run_calls; outcomes that exist (--dask, grader merge) reach it through
    grader_known_outcome."""
    import argparse

    from grader.config import plugins
    from grader.config.core import Config
    from grader.models import RunOutcome, Submission

    monkeypatch.setattr(plugins, "BUILTIN_PLUGINS", plugins.BUILTIN_PLUGINS[::order])
    pm = get_plugin_manager(load_entrypoints=False)
    config = Config("grade", argparse.Namespace(insecure=True, dask=None), pm)
    ann = Submission("ann", "ann", "/nonexistent/attention.py")
    impls = [i for i in pm.hook.grader_run_calls.get_hookimpls() if not i.wrapper]
    assert [pm.get_name(i.plugin) for i in impls] == ["runner"]
    outcome = pm.hook.grader_run_calls(submission=ann, calls=[], config=config)
    assert isinstance(outcome, RunOutcome) and "No such file" in outcome.import_error
    # A plugin that has this submission's outcome answers instead, and nothing runs; one without it is passed.
    recorded = RunOutcome(results=[], import_error="recorded")

    def knowing(answer: Any) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            grader_known_outcome=hookimpl(lambda submission, calls, config: answer(submission))
        )

    pm.register(knowing(lambda sub: recorded if sub.id == "ann" else None), name="knows_ann")
    pm.register(knowing(lambda sub: None), name="knows_nothing")  # asked first (registered last): passes
    assert pm.hook.grader_run_calls(submission=ann, calls=[], config=config) is recorded
    bob = Submission("bob", "bob", "/nonexistent/attention.py")
    assert "No such file" in pm.hook.grader_run_calls(submission=bob, calls=[], config=config).import_error


def test_the_runner_never_falls_back_to_plain_processes_when_grade_has_no_sandbox() -> None:
    import argparse

    from grader.builtin.runner import grader_run_calls
    from grader.config.core import Config
    from grader.errors import ConfigError
    from grader.models import Submission

    pm = get_plugin_manager(load_entrypoints=False)
    config = Config("grade", argparse.Namespace(insecure=False), pm)  # configured without the sandbox started
    with pytest.raises(ConfigError, match="the sandbox is not running"):
        grader_run_calls(Submission("ann", "ann", "/nonexistent/attention.py"), [], config)


def test_grading_ready_comes_after_the_checks_are_prepared_and_before_the_out_folder(
    tmp_path,
    monkeypatch,
    capsys,  # noqa: ANN001
) -> None:
    """The sandbox starts at configure time and gets ready while the specs load: the first spec is
    read before the sandbox's workers are lent, grader_grading_ready sees no --out folder yet, and
    by collection_finish the runner has its workers."""
    from grader.execution.keys import JOB_LAUNCHERS

    seen: list[tuple[str, bool, bool]] = []
    out = tmp_path / "out"
    module = types.ModuleType("order_plugin")

    def record(name: str, config) -> None:  # noqa: ANN001
        seen.append((name, config.stash[JOB_LAUNCHERS]._slots is not None, out.exists()))  # the workers lent yet?

    module.grader_load_exercise = hookimpl(tryfirst=True)(lambda path, config: record("load_exercise", config))
    module.grader_grading_ready = hookimpl(tryfirst=True)(lambda config: record("grading_ready", config))
    module.grader_collection_finish = hookimpl(
        lambda submissions, collected, config: record("collection_finish", config)
    )
    monkeypatch.setitem(sys.modules, "order_plugin", module)
    monkeypatch.setenv("GRADER_COURSE_SECRET", "hooks-test-secret-2026")
    code = main(["grade", "submissions/correct_numpy", "--out", str(out), "-q", "-p", "order_plugin"])
    assert code == 0, capsys.readouterr().err
    names = [name for name, _, _ in seen]
    assert names.count("grading_ready") == 1 and names[-1] == "collection_finish"
    assert names.index("grading_ready") > max(i for i, name in enumerate(names) if name == "load_exercise")
    assert seen[0] == ("load_exercise", False, False)  # the sandbox not waited for yet
    assert ("grading_ready", False, False) in seen  # tryfirst: before the sandbox's own implementation
    assert seen[-1] == ("collection_finish", True, True)


def test_class_pages_link_what_each_plugin_names_through_report_links(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The built-in pages' links (the summary, the staff and similarity pages) and a third-party plugin's."""
    import argparse

    from grader.config.core import Config

    module = types.ModuleType("links_plugin")
    module.grader_report_links = hookimpl(lambda config, page: [("Extra", f"extra-{page}.html")])
    monkeypatch.setitem(sys.modules, "links_plugin", module)
    pm = get_plugin_manager(["links_plugin"], load_entrypoints=False)
    options = argparse.Namespace(out=str(tmp_path), staff=True, similarity=True)
    config = Config("grade", options, pm)
    assert config.hooks.report_links(config=config, page="index") == [
        ("Extra", "extra-index.html"),  # registered last, asked first (pluggy's order)
        ("Class summary (charts)", "summary.html"),
        ("Similarity (staff)", "similarity.html"),
    ]
    assert config.hooks.report_links(config=config, page="summary") == [
        ("Extra", "extra-summary.html"),
        ("Staff: who and item analysis", "staff/class/index.html"),
        ("Similarity (staff)", "similarity.html"),
    ]
    # Without --staff, --similarity and the HTML report, the built-ins link nothing.
    bare = Config(
        "grade", argparse.Namespace(out=str(tmp_path)), get_plugin_manager(["no:html_report"], load_entrypoints=False)
    )
    assert bare.hooks.report_links(config=bare, page="index") == []
    assert bare.hooks.report_links(config=bare, page="summary") == []
