"""The documentation: the site builds with warnings as errors, its generated reference is complete,
and the README stays a short start page whose links lead somewhere.

The build needs the ``docs`` extra (``pip install '.[docs]'``). Without it these tests are skipped on
a developer's machine and fail under ``CI=true`` (``.ci/run`` installs the extra).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader import hookspecs
from grader.builtin.yaml_spec import SCHEMA
from grader.config.parser import build_parser
from grader.config.plugins import get_plugin_manager

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 150


def _require_mkdocs() -> None:
    """Skip (fail under CI) when the docs tools are not installed."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        why = "mkdocs is not installed: pip install '.[docs]' (.ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


def _build(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``out``."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module with warnings as errors."""
    _require_mkdocs()
    out = tmp_path_factory.mktemp("site")
    proc = _build(ROOT / "mkdocs.yml", out)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    return out


def _page(site: Path, path: str) -> str:
    return (site / path / "index.html").read_text(encoding="utf-8")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser(get_plugin_manager(load_entrypoints=False))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the parser has no subcommands")


@pytest.mark.slow
def test_the_site_builds_with_every_page_of_the_nav(site: Path) -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in pages(value)]
        return []

    listed = pages(config["nav"])
    assert len(listed) >= 20
    for page in listed:
        built = site / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert built.is_file(), f"{page} was not built"
    # The generated pages are in the nav and the site, and are not in the repository.
    for generated in ("reference/commands.md", "reference/spec.md", "reference/course-yaml.md", "reference/hooks.md"):
        assert generated in listed
        assert not (ROOT / "docs" / generated).exists(), f"{generated} is generated at build time, not committed"


def test_every_hook_is_in_the_hooks_reference(site: Path) -> None:
    html = _page(site, "reference/hooks")
    hooks = [name for name, obj in vars(hookspecs).items() if name.startswith("grader_") and callable(obj)]
    assert len(hooks) >= 20
    for name in hooks:
        # Its section (mkdocstrings renders the docstring under this id) and its row of the table.
        assert f'id="grader.hookspecs.{name}"' in html, f"hook {name} has no section in the hooks reference"
        assert f'href="#grader.hookspecs.{name}"' in html, f"hook {name} has no row in the hooks table"
        first_line = (getattr(hookspecs, name).__doc__ or "").strip().splitlines()[0]
        words = re.sub(r"[`*]", "", first_line).split()[:4]
        assert " ".join(words) in re.sub(r"<[^>]+>", "", html), f"the docstring of {name} is not rendered"


def test_every_subcommand_and_option_is_in_the_commands_reference(site: Path) -> None:
    html = _page(site, "reference/commands")
    subcommands = _subcommands()
    assert {"grade", "check", "merge", "audit", "validate", "publish"} <= set(subcommands)
    starts = {name: html.find(f'<h2 id="{name}">') for name in subcommands}
    for name, start in starts.items():
        assert start >= 0, f"subcommand {name} has no section in the commands reference"
    order = sorted(starts.values())
    for name, sub in subcommands.items():
        start = starts[name]
        later = [s for s in order if s > start]
        section = html[start : later[0] if later else len(html)]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue  # -h is in every command's usage line, not in its table
            for option in action.option_strings:
                assert f"<code>{option}" in section, f"{name}: option {option} is not in its section"


def _keys(schema: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, sub in schema.get("properties", {}).items():
        keys.append(prefix + key)
        keys += _keys(sub, f"{prefix}{key}.")
        if isinstance(sub.get("items"), dict):
            keys += _keys(sub["items"], f"{prefix}{key}[].")
    return keys


def test_every_spec_key_is_in_the_spec_reference(site: Path) -> None:
    html = _page(site, "reference/spec")
    keys = _keys(SCHEMA)
    assert {"exercise", "checks[].points", "defaults.timeout"} <= set(keys)
    for key in keys:
        assert f"<code>{key}</code>" in html, f"spec key {key} is not in the spec reference"
    for kind in ("compare", "literal", "shape", "raises", "no_mutation"):
        assert f'id="kind-{kind}"' in html


@pytest.mark.slow
def test_a_broken_anchor_fails_the_strict_build(tmp_path: Path) -> None:
    """The link check is real: a link to a missing anchor of a generated page stops the build."""
    _require_mkdocs()
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("hooks.py", "__pycache__"))
    with (docs / "tutorials" / "student.md").open("a", encoding="utf-8") as page:
        page.write("\n[every option](../reference/commands.md#no-such-command)\n")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["docs_dir"] = str(docs)
    config["hooks"] = [str(ROOT / "docs" / "hooks.py")]
    config["plugins"][1]["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT)]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode != 0
    assert "does not contain an anchor '#no-such-command'" in proc.stderr


def test_the_readme_is_a_short_start_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; keep it to {README_MAX_LINES}"
    # Its two set-up commands, exactly as CI and a newcomer run them.
    assert (
        "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/grader grade submissions --out reports" in lines
    )
    assert "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/python -m pytest" in lines
    # No development history in user docs: that is the CHANGELOG's.
    history = re.compile(r"\b(?:first|second|third|fourth|fifth) round\b|\bissue \d+\b|\blast session\b", re.I)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in pages for m in history.finditer(p.read_text("utf-8"))]
    assert not found, "development history in user docs (move it to CHANGELOG.md): " + "; ".join(found)


def test_every_link_of_the_readme_leads_to_a_file() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    for link in local:
        assert (ROOT / link).is_file(), f"README.md links to {link}, which does not exist"


def test_a_new_page_not_in_the_nav_is_added_under_how_to_guides(tmp_path: Path) -> None:
    """A feature's new ``docs/<topic>.md`` is built and linked before anyone edits the nav."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    (tmp_path / "index.md").write_text("# Home\n", encoding="utf-8")
    (tmp_path / "listed.md").write_text("# Listed\n", encoding="utf-8")
    (tmp_path / "ctrf.md").write_text("<!-- a comment -->\n# Export to `CTRF`\n\ntext\n", encoding="utf-8")
    nav = [{"Home": "index.md"}, {"How-to guides": [{"Listed": "listed.md"}]}, {"Reference": ["x.md"]}]
    config = hooks.on_config({"nav": nav, "docs_dir": str(tmp_path)})
    assert config["nav"][1] == {"How-to guides": [{"Listed": "listed.md"}, {"Export to CTRF": "ctrf.md"}]}
    assert config["nav"][0] == {"Home": "index.md"} and config["nav"][2] == {"Reference": ["x.md"]}
