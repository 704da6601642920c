"""The plugin system: built-ins are plugins, hooks are documented and
tested, and third-party plugins extend the grader from outside the package."""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SPECS, SUBMISSIONS

from grader import hookspecs
from grader.config.plugins import BUILTIN_PLUGINS, get_plugin_manager
from grader.errors import PluginError

EXAMPLES = Path(__file__).resolve().parents[1] / "plugin_examples"


@pytest.fixture
def examples_on_path(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    for name in ("g14_extras", "g14_fake_runner"):
        sys.modules.pop(name, None)
    yield
    for name in ("g14_extras", "g14_fake_runner"):
        sys.modules.pop(name, None)


# Code under tests/ that is not the tests' own: submissions, hostile files, other packs.
_NOT_TEST_CODE = {"adversarial", "malformed", "real_implementations", "packs", "ci_attack"}


def _test_sources() -> dict[Path, str]:
    """Every Python file of the tests (test modules, helpers, the example plugins), by path."""
    tests = Path(__file__).resolve().parents[1]
    return {
        path: path.read_text(encoding="utf-8")
        for path in sorted(tests.rglob("*.py"))
        if not _NOT_TEST_CODE & set(path.relative_to(tests).parts)
    }


def _tests_calling(name: str, sources: dict[Path, str]) -> list[str]:
    """The test modules that call hook ``name``: by its name (a plugin of the test's own, ``pm.hook.<name>``)
    or its facade method (``config.hooks.<name without grader_>``), or by loading an example plugin of
    tests/plugin_examples that implements it."""
    facade = name.removeprefix("grader_")
    modules = {path: text for path, text in sources.items() if path.name.startswith("test_")}
    direct = [path.name for path, text in modules.items() if re.search(rf"\b{name}\b|\bhooks\.{facade}\(", text)]
    plugins = [
        path.stem
        for path, text in sources.items()
        if path.parent.name == "plugin_examples" and re.search(rf"^def {name}\(", text, re.MULTILINE)
    ]
    loading = [path.name for path, text in modules.items() for stem in plugins if re.search(rf"\b{stem}\b", text)]
    return direct + loading


def test_every_hook_is_documented_and_called_from_a_test() -> None:
    """Datasette's way: each hook of grader/hookspecs.py has a docstring, a row and a section in the generated
    hooks reference (docs/hooks.py, what ``mkdocs build`` renders; tests/harness/test_docs.py checks the
    built page), and the tests' source calls it."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    docs_hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs_hooks)
    page = docs_hooks.hooks_page(hookspecs, get_plugin_manager(load_entrypoints=False))
    assert "::: grader.hookspecs" in page  # the sections: mkdocstrings renders every docstring of the module
    sources = _test_sources()
    assert hookspecs.HOOK_NAMES == tuple(n for n in vars(hookspecs) if n.startswith("grader_"))
    assert len(hookspecs.HOOK_NAMES) >= 20
    for name in hookspecs.HOOK_NAMES:
        doc = inspect.getdoc(getattr(hookspecs, name))
        assert doc and len(doc) > 40, f"{name} has no docstring in grader/hookspecs.py"
        assert f"| [`{name}`](#grader.hookspecs.{name}) |" in page, f"{name} has no row in the hooks reference"
        assert _tests_calling(name, sources), f"no test calls {name} (nor config.hooks.{name[7:]})"
    # the scan can fail: a name no test holds (spelled in two parts, so this file does not hold it) is not found
    assert not _tests_calling("grader_" + "no_such_hook", sources)


# Calls of pluggy's untyped relay (``config.hook.grader_...(``) outside the facade still to move to it: the Dask
# worker's runner call, which the Dask worker's move into a WorkerPlugin rewrites.
_RELAY_CALLS_LEFT: set[tuple[str, str]] = set()


def _grader_sources() -> dict[str, str]:
    """Every module of the package but the contract and the facade, by path from the repository root."""
    skip = {"grader/hookspecs.py", "grader/config/core.py"}
    paths = sorted((ROOT / "grader").rglob("*.py"))
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in paths} | dict.fromkeys(skip, "")


def test_the_grader_calls_every_hook_and_through_the_typed_facade() -> None:
    """No hook is specified and never called: the core (or a built-in asking another plugin) calls each one,
    through `grader.config.core.Hooks` (``config.hooks.<hook>(...)``), or one implementation at a time by its
    name (``call_each``, ``implementations``) where each plugin's fault is named. pluggy's untyped relay
    (``config.hook.grader_...(``) is called nowhere else, so mypy checks every call's arguments and result."""
    sources = _grader_sources()
    calls = re.compile(
        r"\bhooks\.(\w+)\(|\bHooks\([^()]*\)\.(\w+)\(|[\"']grader_(\w+)[\"']|\.hook\.grader_(\w+)\.get_hookimpls\("
    )
    called = {f"grader_{name}" for text in sources.values() for found in calls.findall(text) for name in found if name}
    uncalled = [name for name in hookspecs.HOOK_NAMES if name not in called]
    assert uncalled == [], f"nothing in grader/ calls {uncalled} (config.hooks.<hook>(...))"
    relay = {(path, hook) for path, text in sources.items() for hook in re.findall(r"\.hook\.(grader_\w+)\(", text)}
    assert relay == _RELAY_CALLS_LEFT, "call hooks through config.hooks (grader/config/core.py), not config.hook"
    # the scans can fail: a facade call and a relay call are found where they are, a hook nothing calls is not
    assert "grader_doctor" in called and "grader_" + "no_such_hook" not in called
    assert re.search(r"\bhooks\.submission_time\(", sources["grader/builtin/policy.py"])
    assert re.findall(r"\.hook\.(grader_\w+)\(", "x = config.hook.grader_doctor(write=w)") == ["grader_doctor"]


def test_builtins_are_registered_through_the_same_hooks() -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    names = {pm.get_name(p) for p in pm.get_plugins()}
    assert set(BUILTIN_PLUGINS) <= names
    impls = {
        name: [pm.get_name(i.plugin) for i in getattr(pm.hook, name).get_hookimpls()] for name in hookspecs.HOOK_NAMES
    }
    runs = pm.hook.grader_run_calls.get_hookimpls()
    # One runner answers: it chooses its launcher from the configuration, and takes outcomes that already
    # exist (a Dask cluster's with --dask, a shard's recorded ones in grader merge) from grader_known_outcome,
    # so no answer depends on the order in which plugins were registered.
    assert [pm.get_name(i.plugin) for i in runs if not i.wrapper] == ["runner"]
    # timing only wraps whichever runner answers, to record call durations for the exporters;
    # the staff pages and similarity keep what came back (staff: values; similarity: digests);
    # submission relocates a notebook's line numbers to its cells.
    # shard_record keeps, for a shard's record, the outcome every other wrapper saw (outermost).
    assert sorted(pm.get_name(i.plugin) for i in runs if i.wrapper) == [
        "shard_record",
        "similarity",
        "staff",
        "submission",
        "timing",
    ]
    assert pm.get_name(runs[-1].plugin) == "shard_record" and runs[-1].wrapper
    assert impls["grader_load_exercise"] == ["yaml_spec"]
    assert sorted(impls["grader_write_reports"]) == [
        "class_insight",
        "classroom",
        "csv_gradebook",
        "ctrf",
        "github",
        "gradescope",
        "html_report",
        "json_report",
        "junit",
        "lms",
        "shard_record",
        "similarity",
        "staff",
        "summary_page",
    ]


def test_first_result_builtins_are_trylast() -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    for name in hookspecs.HOOK_NAMES:
        hook = getattr(pm.hook, name)
        if hook.spec.opts.get("firstresult"):
            for impl in hook.get_hookimpls():
                if impl.wrapper or impl.hookwrapper:  # wrappers amend an answer; they give none
                    continue
                assert impl.trylast, f"{name} in {pm.get_name(impl.plugin)} must be trylast to be overridable"


def _outputs(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_blocking_a_builtin_with_p_no(cli, tmp_path: Path) -> None:
    code, out, err = cli("grade", SUBMISSIONS / "correct_numpy", "--out", tmp_path, "-q", "-p", "no:html_report")
    assert code == 0
    assert not any(p.suffix == ".html" for p in _outputs(tmp_path))
    assert (tmp_path / "results.json").is_file()


def test_unknown_plugin_module_is_one_line_exit_3(cli) -> None:
    code, out, err = cli("validate", "-p", "no_such_plugin_module")
    assert code == 3
    assert err.strip().splitlines() == [err.strip()]
    assert "-p no_such_plugin_module: no module named 'no_such_plugin_module'; check the name" in err


def test_misspelled_hook_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "typo_plugin.py").write_text(
        "from grader import hookimpl\n@hookimpl\ndef grader_write_report(report, config):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match="grader_write_report"):
        get_plugin_manager(["typo_plugin"], load_entrypoints=False)


def _specs_with_extras(tmp_path: Path) -> Path:
    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    (specs / "X01.json").write_text(
        json.dumps(
            {
                "exercise": "X01",
                "title": "Extra: weights form a distribution",
                "section": "Mask before normalization",
                "checks": [
                    {
                        "id": "softmax-is-probability",
                        "kind": "is_probability",
                        "function": "softmax",
                        "points": 4,
                        "hint": "Weights are nonnegative and sum to one.",
                        "args": {"scores": {"normal": [5]}, "allowed": {"mask": 5}},
                    }
                ],
            }
        )
    )
    return specs


def test_third_party_check_kind_spec_format_and_writer_via_p(cli, tmp_path: Path, examples_on_path) -> None:
    import g14_extras

    specs = _specs_with_extras(tmp_path)
    out = tmp_path / "out"
    code, stdout, err = cli(
        "grade",
        SUBMISSIONS / "correct_numpy",
        SUBMISSIONS / "mib_decimal",
        "--specs",
        specs,
        "--out",
        out,
        "-q",
        "-p",
        "g14_extras",
        "--csv-name",
        "book.csv",
    )
    assert code == 0, err
    assert (out / "book.csv").read_text().splitlines() == [
        "student,G14.01,G14.02,G14.03,G14.04,G14.05,G14.06,X01,total",
        "correct_numpy,14,11,14,10,10,27,4,90",
        "mib_decimal,14,11,14,10,5,27,4,85",
    ]
    assert "extras: 2 submission(s) seen" in stdout
    assert g14_extras.EVENTS[0] == "configure:grade"
    assert g14_extras.EVENTS[-1] == "unconfigure"
    assert "judged:softmax-is-probability:passed" in g14_extras.EVENTS
    assert "graded:mib_decimal:85" in g14_extras.EVENTS
    # 2 submissions and 7 exercises (the spec of the extra kind included) are known before any is graded.
    first_judged = next(i for i, e in enumerate(g14_extras.EVENTS) if e.startswith("judged:"))
    assert g14_extras.EVENTS.index("collected:2:7") < first_judged
    batch = next(i for i, e in enumerate(g14_extras.EVENTS) if e.startswith("batch:2:"))  # both to run, every call
    assert g14_extras.EVENTS.index("collected:2:7") < batch < first_judged
    assert g14_extras.EVENTS.index("ready") < g14_extras.EVENTS.index("collected:2:7")  # before --out is made
    results = json.loads((out / "results.json").read_text())
    assert [e["id"] for e in results["submissions"][0]["exercises"]][-1] == "X01"


@pytest.mark.slow
def test_third_party_plugin_via_entry_point(cli, tmp_path: Path, examples_on_path, monkeypatch) -> None:
    site = tmp_path / "site"
    dist = site / "g14_extras-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: g14-extras\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[grader]\nextras = g14_extras\n")
    monkeypatch.syspath_prepend(str(site))
    pm = get_plugin_manager()
    assert pm.get_plugin("extras") is not None
    specs = _specs_with_extras(tmp_path)
    code, stdout, err = cli("grade", SUBMISSIONS / "correct_lists", "--specs", specs, "--out", tmp_path / "o", "-q")
    assert code == 0, err
    assert (tmp_path / "o" / "grades.csv").read_text().splitlines()[1] == "correct_lists,14,11,14,10,10,27,4,90"
    code, stdout, err = cli("validate", "--specs", specs)
    assert code == 0 and "specs: 7 exercises, 60 checks" in stdout
    # Blocked, the plugin's JSON spec is not read at all: no plugin claims it.
    code, stdout, err = cli("validate", "--specs", specs, "-p", "no:extras")
    assert code == 0 and "specs: 6 exercises, 59 checks" in stdout


def test_runner_locator_reference_and_scorer_are_overridable(cli, tmp_path: Path, examples_on_path) -> None:
    import g14_fake_runner

    code, stdout, err = cli("grade", "fake:ghost", "--out", tmp_path, "-q", "-p", "g14_fake_runner")
    assert code == 0, err
    results = json.loads((tmp_path / "results.json").read_text())
    sub = results["submissions"][0]
    assert sub["id"] == "ghost" and sub["score"] == 0.0
    assert {c["status"] for e in sub["exercises"] for c in e["checks"]} == {"not_attempted"}
    # 59 checks, of which shift_invariance and causal_noninterference make 2 calls each, as do the 15
    # ValueError checks with a valid twin and the 4 hand values with a companion.
    assert g14_fake_runner.SEEN["calls"] == 80
    # Its grader_float64_error answers None, so the pack's error analysis still gives the floors.
    assert {"softmax", "attention"} <= g14_fake_runner.SEEN["error_bounds"]
    assert g14_fake_runner.SEEN["reference"] == "reference/attention.py"
    [(sid, key)] = g14_fake_runner.SEEN["keys"]
    assert sid == "ghost" and len(key) == 64
    assert g14_fake_runner.SEEN["scored"] == ["G14.01", "G14.02", "G14.03", "G14.04", "G14.05", "G14.06"]


def test_doctor_and_the_mistake_table_are_overridable(cli, tmp_path: Path, examples_on_path) -> None:
    import g14_fake_runner

    code, stdout, err = cli("doctor", "-p", "g14_fake_runner")
    assert (code, stdout) == (0, "fake: no sandbox here; every call is 'not implemented'\n"), err
    # publish asks for the table through the hook: the fake runner's mutants return nothing, so no
    # catalogued mistake fails a visible check (the built-in diagnosis still answers).
    code, stdout, err = cli("publish", "--out", tmp_path / "public.json", "-p", "g14_fake_runner")
    assert code == 0, err
    from grader.packs.catalogue import load_catalogue

    mutants, rows = g14_fake_runner.SEEN["mistake_table"]
    assert mutants == len(load_catalogue(ROOT / "reference" / "mutants").mutants) and rows == {}
    published = json.loads((tmp_path / "public.json").read_text())
    assert all(c["mistakes"] == [] for e in published["exercises"] for c in e["checks"])


def test_a_module_without_hooks_given_with_p_is_named_in_a_warning(capsys) -> None:  # noqa: ANN001
    get_plugin_manager(["json"], load_entrypoints=False)
    assert capsys.readouterr().err == (
        "grader: warning: -p json: the module implements no grader hook (no function marked @grader.hookimpl "
        "named grader_...), so it changes nothing\n"
    )


def test_the_plugin_manager_finds_the_implementations_pluggy_finds() -> None:
    """`grader.config.plugins` reads a module's hook implementations from its ``__dict__`` (issue 29):
    the same ones pluggy's own lookup finds, for every built-in, an implementation under another
    name (``specname``), an alias, and a plugin object that is not a module."""
    import types

    import pluggy

    from grader import hookspecs
    from grader.config.plugins import get_plugin_manager
    from grader.markers import hookimpl

    extra = types.ModuleType("extra_plugin")

    @hookimpl(specname="grader_configure")
    def configure_under_another_name(config: object) -> None: ...

    @hookimpl
    def grader_unconfigure(config: object) -> None: ...

    def grader_addoption(parser: object, command: str) -> None: ...  # not marked: not an implementation

    class Holder:
        @staticmethod
        @hookimpl
        def grader_configure(config: object) -> None: ...

    extra.__dict__.update(
        other=configure_under_another_name,
        grader_unconfigure=grader_unconfigure,
        alias=grader_unconfigure,
        grader_addoption=grader_addoption,
        holder=Holder,
        number=3,
    )
    ours = get_plugin_manager(load_entrypoints=False)
    plain = pluggy.PluginManager("grader")
    plain.add_hookspecs(hookspecs)
    for name, plugin in ours.list_name_plugin():
        plain.register(plugin, name=name)
    for pm in (ours, plain):
        pm.register(extra, name="extra")
        pm.register(Holder(), name="holder")

    def found(pm: pluggy.PluginManager) -> dict[str, list[tuple[str, str]]]:
        return {
            hook: sorted((i.plugin_name, i.function.__qualname__) for i in getattr(pm.hook, hook).get_hookimpls())
            for hook in dir(pm.hook)
            if hook.startswith("grader_")
        }

    assert type(ours) is not pluggy.PluginManager and found(ours) == found(plain)
    extra_impls = {(h, f) for h, impls in found(ours).items() for p, f in impls if p in ("extra", "holder")}
    assert extra_impls == {
        (
            "grader_configure",
            "test_the_plugin_manager_finds_the_implementations_pluggy_finds.<locals>.configure_under_another_name",
        ),
        (
            "grader_unconfigure",
            "test_the_plugin_manager_finds_the_implementations_pluggy_finds.<locals>.grader_unconfigure",
        ),
        (
            "grader_configure",
            "test_the_plugin_manager_finds_the_implementations_pluggy_finds.<locals>.Holder.grader_configure",
        ),
    }
