"""The import walls between the layers, read from every module's imports.

- The core (every subpackage but the command line, ``grader.cli``) imports no built-in plugin
  (``grader.builtin.*``); the command line may (``grader term`` writes the built-in writers' files).
- A built-in plugin imports only the core, never another built-in (a plugin that is a package, such as
  ``grader.builtin.sandbox``, imports its own modules).
- The sandbox child (``grader/child/zygote.py``, ``grader/child/worker.py``) imports nothing of the grader.
- Nothing in ``grader/`` imports a course pack (the test packs; the G14 course at the root is no
  package): packs are found by the loader (`grader.packs`), by path or entry point.

The layer contract between the subpackages is import-linter's (``[tool.importlinter]`` in
pyproject.toml); ``tests/harness/test_layout.py`` fails on any import cycle.
- ``import grader.grading.session`` loads no numpy (a cheap ``grader check`` start).

Imports are read with `ast` (module level, inside functions and under ``TYPE_CHECKING`` alike), so
a lazy import inside a function is a wall crossing like any other.
"""

from __future__ import annotations

import ast
import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "grader"
CHILD = {"grader.child.zygote", "grader.child.worker", "grader.child.forkserver"}
"""Scripts of the sandbox child (with ``grader/child/``): run by path in the job, they import nothing
of the grader outside the child."""
CHILD_DATA = {"grader.child.limits", "grader.child.worker"}
"""The child's modules the grader imports too: the limits both sides agree on, and the worker, for
its list of what a submission may import (`grader.child.worker.LISTED`, in the student guide)."""


def module_name(path: Path, package: Path) -> str:
    """``grader.builtin.runner`` for ``<package>/builtin/runner.py``."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_of(package: Path) -> set[str]:
    """The module names of every file of the package."""
    return {module_name(p, package) for p in package.rglob("*.py")}


def imported(path: Path, package: Path, existing: set[str] | None = None) -> set[str]:
    """The grader modules a file imports (absolute names; ``from grader import x`` gives ``grader.x``).

    ``existing`` is `modules_of` the package, when the caller reads many of its files (computed once).
    """
    name = module_name(path, package)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            # "from grader import session" and "from grader.builtin import runner" import submodules.
            found.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
    top = package.name
    modules = {m for m in found if m == top or m.startswith(top + ".")}
    existing = modules_of(package) if existing is None else existing
    # Keep names that are modules (drop "grader.hookimpl", which is an attribute of grader).
    return {m for m in modules if m in existing or m == top}


def layer(module: str) -> str:
    """``child``, ``builtin``, ``cli`` or ``core``."""
    if module in CHILD or module == "grader.child" or module.startswith("grader.child."):
        return "child"
    if module.startswith("grader.builtin.") or module == "grader.builtin":
        return "builtin"
    if module == "grader.cli" or module.startswith("grader.cli."):
        return "cli"
    return "core"


def plugin(module: str) -> str:
    """The built-in plugin a module belongs to: ``grader.builtin.sandbox`` for ``grader.builtin.sandbox.slots``."""
    return ".".join(module.split(".")[:3])


def violations(package: Path) -> list[str]:
    """Every import that crosses a wall, as ``importer -> imported: rule`` lines."""
    out = []
    existing = modules_of(package)
    for path in sorted(package.rglob("*.py")):
        importer = module_name(path, package)
        kind = layer(importer)
        for target in sorted(imported(path, package, existing)):
            if target == importer or target in ("grader", "grader.builtin", "grader.child", "grader.cli"):
                if kind == "child" and target == "grader":
                    out.append(f"{importer} -> {target}: the child imports nothing of the grader")
                continue
            other = layer(target)
            if kind == "child" and other != "child":
                out.append(f"{importer} -> {target}: the child imports nothing of the grader")
            elif kind != "child" and other == "child" and target not in CHILD_DATA:
                out.append(f"{importer} -> {target}: the child is started by path, never imported")
            elif kind == "core" and other == "builtin":
                out.append(f"{importer} -> {target}: the core imports no built-in")
            elif kind == "builtin" and other == "builtin" and plugin(importer) != plugin(target):
                out.append(f"{importer} -> {target}: a built-in imports only the core")
    return out


PACKS = {p.parent.name for p in [*ROOT.glob("*/course.yaml"), *ROOT.glob("tests/packs/*/course.yaml")]}
"""Top-level names of the course packs in this repository."""


def pack_imports(package: Path) -> list[str]:
    """Every import of a course pack by a module of the package."""
    out = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            out += [
                f"{module_name(path, package)} -> {n}: the grader imports no pack"
                for n in names
                if n.split(".")[0] in PACKS
            ]
    return out


def import_map(package: Path) -> dict[str, set[str]]:
    """Each module's grader imports (what a reader of this file sees as the map of the layers)."""
    existing = modules_of(package)
    return {module_name(p, package): imported(p, package, existing) for p in sorted(package.rglob("*.py"))}


def test_no_import_crosses_a_wall() -> None:
    assert violations(PACKAGE) == []


def test_the_grader_imports_no_pack(copy_of_grader: Path) -> None:
    assert PACKS >= {"r3"}
    assert pack_imports(PACKAGE) == []
    kinds = copy_of_grader / "kinds" / "__init__.py"
    kinds.write_text(kinds.read_text(encoding="utf-8") + "\n\ndef _late():\n    import r3.kinds\n", encoding="utf-8")
    assert pack_imports(copy_of_grader) == ["grader.kinds -> r3.kinds: the grader imports no pack"]


def test_the_map_holds_every_layer() -> None:
    """The map reads real imports: a built-in imports the core; the core's hub modules are there."""
    graph = import_map(PACKAGE)
    assert "grader.markers" in graph["grader.builtin.runner"]
    assert "grader.models" in graph["grader.grading.session"]
    assert graph["grader.child.zygote"] == set()
    assert graph["grader.child.worker"] == set()
    assert {layer(m) for m in graph} == {"core", "builtin", "child", "cli"}


@functools.cache
def _package_violations() -> frozenset[str]:
    """`violations` of the package itself (read once per run: the tests change copies only)."""
    return frozenset(violations(PACKAGE))


def added(copy: Path) -> list[str]:
    """The violations of a changed copy of the package that the package itself does not have."""
    return sorted(set(violations(copy)) - _package_violations())


@pytest.fixture
def copy_of_grader(tmp_path: Path) -> Path:
    target = tmp_path / "grader"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "data", "templates"))
    return target


def test_a_builtin_importing_a_builtin_is_found(copy_of_grader: Path) -> None:
    scoring = copy_of_grader / "builtin" / "scoring.py"
    scoring.write_text(
        scoring.read_text(encoding="utf-8") + "\nfrom grader.builtin.judge import hookimpl\n", encoding="utf-8"
    )
    assert added(copy_of_grader) == ["grader.builtin.scoring -> grader.builtin.judge: a built-in imports only the core"]


def test_a_plugin_package_imports_its_own_modules_but_no_other_builtin(copy_of_grader: Path) -> None:
    assert "grader.builtin.sandbox.handle" in import_map(PACKAGE)["grader.builtin.sandbox.slots"]
    slots = copy_of_grader / "builtin" / "sandbox" / "slots.py"
    slots.write_text(
        slots.read_text(encoding="utf-8") + "\nfrom grader.builtin.runner import hookimpl\n", encoding="utf-8"
    )
    assert added(copy_of_grader) == [
        "grader.builtin.sandbox.slots -> grader.builtin.runner: a built-in imports only the core"
    ]


@pytest.mark.slow
def test_a_relative_and_a_lazy_import_are_found(copy_of_grader: Path) -> None:
    junit = copy_of_grader / "builtin" / "junit.py"
    junit.write_text(
        junit.read_text(encoding="utf-8") + "\n\ndef _late():\n    from . import scoring\n", encoding="utf-8"
    )
    session = copy_of_grader / "grading" / "session.py"
    session.write_text(
        session.read_text(encoding="utf-8") + "\n\ndef _late():\n    from grader.builtin import runner\n",
        encoding="utf-8",
    )
    assert added(copy_of_grader) == [
        "grader.builtin.junit -> grader.builtin.scoring: a built-in imports only the core",
        "grader.grading.session -> grader.builtin.runner: the core imports no built-in",
    ]


def test_the_child_importing_the_grader_is_found(copy_of_grader: Path) -> None:
    worker = copy_of_grader / "child" / "worker.py"
    worker.write_text(worker.read_text(encoding="utf-8") + "\nimport grader.models\n", encoding="utf-8")
    assert added(copy_of_grader) == ["grader.child.worker -> grader.models: the child imports nothing of the grader"]


def test_import_session_loads_no_numpy() -> None:
    code = "import sys, grader.grading.session; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_plugins_share_state_under_typed_keys_not_strings() -> None:
    from grader.stash import Stash, StashKey

    stash = Stash()
    count = StashKey[int]()
    other = StashKey[int]()
    stash[count] = 1
    assert stash[count] == 1 and count in stash and other not in stash
    assert stash.get(other) is None and stash.get(other, 5) == 5
    assert stash.setdefault(other, 2) == 2 and len(stash) == 2
    assert stash.pop(count) == 1 and stash.pop(count, None) is None
    with pytest.raises(KeyError):
        stash.pop(count)
    with pytest.raises(TypeError, match="StashKey"):
        stash["collected"] = 1  # type: ignore[index]


def test_no_plugin_uses_a_string_stash_key() -> None:
    """Every ``config.stash[...]`` of the package is a `StashKey`, never a string literal."""
    import re

    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"stash(\[|\.get\(|\.setdefault\(|\.pop\()\s*['\"]", line)
    ]
    assert found == []


def _shared_stash_keys() -> set[str]:
    """``module.NAME`` of every `grader.stash.StashKey` a module of the package imports from another."""
    import importlib

    from grader.stash import StashKey

    shared = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("grader"):
                module = importlib.import_module(node.module)
                shared |= {
                    f"{node.module}.{a.name}" for a in node.names if isinstance(getattr(module, a.name, None), StashKey)
                }
    return shared


def test_plugins_share_state_through_hooks_and_every_shared_key_is_listed() -> None:
    """What one plugin asks of another is a hook (``grader_known_outcome``, ``grader_report_links``,
    ``grader_call_seconds``); the few stash keys shared between modules are the core's own state, each
    named in grader/stash.py's docstring, so a new channel between plugins cannot appear unseen."""
    import grader.stash

    shared = _shared_stash_keys()
    doc = grader.stash.__doc__ or ""
    assert "grader.collected.COLLECTED" in shared and "grader.execution.keys.JOB_LAUNCHERS" in shared  # it finds them
    unlisted = sorted(key for key in shared if key.rsplit(".", 1)[1] not in doc)
    assert unlisted == [], f"shared stash keys not named in grader/stash.py: {unlisted}"
    for gone in ("OUTCOME_SOURCES", "INDEX_LINKS", "SUMMARY_LINKS", "CALL_SECONDS"):
        assert gone not in doc and not any(key.endswith(f".{gone}") for key in shared)


def test_the_dask_worker_and_the_pytest_plugin_get_a_config_without_the_command_line() -> None:
    """`grader.config.parser.for_command` builds a run's Config for one command; no built-in or integration
    builds the command line's parser (``build_parser``) or imports ``grader.cli`` to get one."""
    from grader.config.parser import for_command

    config = for_command("check", ["attention.py", "-q"])
    assert config.command == "check" and config.options.paths == ["attention.py"] and config.option("quiet")
    assert config.option("out") is None and config.pluginmanager.get_plugin("runner") is not None

    def names(path: Path) -> set[str]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        return {getattr(n, "id", None) or getattr(n, "attr", None) or getattr(n, "name", "") for n in ast.walk(tree)}

    assert "build_parser" in names(PACKAGE / "cli" / "app.py")  # the scan finds a call where there is one
    found = []
    for folder in ("builtin", "integrations", "shards"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            if "build_parser" in names(path):
                found.append(f"{path.relative_to(ROOT)}: calls build_parser")
            cli = [m for m in imported(path, PACKAGE) if m.split(".")[:2] == ["grader", "cli"]]
            found += [f"{path.relative_to(ROOT)}: imports {m}" for m in cli]
    assert found == []
    assert any("for_command" in p.read_text(encoding="utf-8") for p in (PACKAGE / "integrations").rglob("*.py"))
    assert "for_command" in (PACKAGE / "shards" / "cluster.py").read_text(encoding="utf-8")  # the Dask worker
