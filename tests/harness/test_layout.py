"""The harness's structure: no import cycle among its modules counting every import, the layer contract,
and modules and functions small enough to read."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "grader"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Every grader module each module imports: at the top, in functions and under TYPE_CHECKING alike."""
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def _cycle(edges: dict[str, set[str]], nodes: list[str]) -> list[str]:
    """One import cycle (its modules in order, the first repeated at the end), or [] when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in nodes:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_no_import_cycle_among_grader_modules_counting_every_import() -> None:
    modules = _modules()
    cycle = _cycle(_imports(modules), sorted(modules))
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(edges, ["d", "a", "b", "c"]) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}, ["a", "b"]) == []


def test_function_local_and_type_checking_imports_count() -> None:
    modules = _modules()
    edges = _imports(modules)
    # grader.hookspecs imports Config only under TYPE_CHECKING, grader.config.parser imports
    # get_plugin_manager only inside a function: both are edges all the same.
    assert "grader.config.core" in edges["grader.hookspecs"]
    assert "grader.config.plugins" in edges["grader.config.parser"]


@pytest.mark.skipif(
    shutil.which("lint-imports") is None and not (Path(sys.executable).parent / "lint-imports").exists(),
    reason="import-linter is not installed: pip install '.[lint]' (.ci/run does)",
)
def test_the_layer_contract_holds() -> None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    proc = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0 broken" in proc.stdout or "broken" not in proc.stdout.split("Contracts:")[-1].split("\n")[0]


MAX_MODULE_LINES = 800
"""Most lines a module of the harness may have (issue 25: a module a reader can hold in mind)."""
MAX_FUNCTION_LINES = 100
"""Most lines a function or method may have, from its ``def`` to its last line (decorators and docstring included)."""


def module_lines(source: str) -> int:
    """Lines of a module's source, as ``wc -l`` counts them (a last line without a newline counts too)."""
    return len(source.splitlines())


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of each function or method in ``source`` longer than ``limit`` lines."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    length = (child.end_lineno or child.lineno) - first + 1
                    if length > limit:
                        found.append((name, length))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_no_module_is_over_800_lines() -> None:
    over = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := module_lines(path.read_text(encoding="utf-8"))) > MAX_MODULE_LINES
    ]
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them at their seams): " + "; ".join(over)


def test_no_function_is_over_100_lines() -> None:
    over = [
        f"{path.relative_to(ROOT)}: {name} ({n} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, n in long_functions(path.read_text(encoding="utf-8"))
    ]
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines (split them into helpers): " + "; ".join(over)


def test_the_measures_find_a_long_module_and_long_functions() -> None:
    body = "".join(f"    x = {i}\n" for i in range(99))
    source = (
        f"def short():\n{body}\n"  # 100 lines: allowed
        f"@decorated\ndef decorated_long():\n{body}\n"  # 101 lines with its decorator
        f"class Holder:\n    def method():\n{''.join('    ' + line for line in body.splitlines(True))}        y = 0\n"
        "    async def inner_async():\n        def nested():\n" + "".join(f"            z = {i}\n" for i in range(100))
    )
    assert long_functions(source) == [
        ("decorated_long", 101),
        ("Holder.method", 101),
        ("Holder.inner_async", 102),
        ("Holder.inner_async.nested", 101),
    ]
    assert module_lines("a = 1\n" * 800) == 800
    assert module_lines("a = 1\n" * 800 + "b = 2") == 801
    assert module_lines("a = 1\n" * 801) > MAX_MODULE_LINES
