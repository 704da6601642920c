"""Commands are plugins: a module of grader.cli.commands, or a plugin's ``grader_add_commands``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.cli import main
from grader.config import plugins
from grader.config.parser import build_parser, commands_of
from grader.config.plugins import get_plugin_manager

EXAMPLES = Path(__file__).resolve().parents[1] / "plugin_examples"

BUILTIN = [
    "audit", "build-student-package", "check", "diff", "doctor", "grade", "init-ci", "merge", "publish",
    "similarity", "starter", "validate",
]  # fmt: skip


def test_every_builtin_command_is_a_module_of_the_commands_package() -> None:
    names = [c.name for c in commands_of(get_plugin_manager(load_entrypoints=False))]
    assert set(BUILTIN) <= set(names)
    assert {n.replace("_", "-") for n in plugins.builtin_commands()} == set(names)


def test_a_module_added_to_the_commands_package_is_a_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(plugins, "COMMANDS_PACKAGE", "more_commands")
    plugins.builtin_commands.cache_clear()
    try:
        assert plugins.builtin_commands() == ("hello",)
        assert main(["hello", "Ada"]) == 0
    finally:
        plugins.builtin_commands.cache_clear()
    assert capsys.readouterr().out.strip() == "hello Ada, from G14"


def test_adding_a_subcommand_is_one_new_module_in_cli_commands_and_nothing_else(tmp_path: Path) -> None:
    """The done-when of the commands-as-plugins design, literally: a copy of the grader package with one more
    file, ``grader/cli/commands/hello.py`` (the fixture plugin ``more_commands/hello.py``), and no other file
    changed, has the subcommand ``hello`` beside every built-in one, in its help and as a command."""
    import shutil
    import subprocess

    package = Path(__file__).resolve().parents[2] / "grader"
    copy = tmp_path / "site" / "grader"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(EXAMPLES / "more_commands" / "hello.py", copy / "cli" / "commands" / "hello.py")

    def files(root: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }

    mine, theirs = files(copy), files(package)
    assert sorted(set(mine) - set(theirs)) == [str(Path("cli/commands/hello.py"))]
    assert all(mine[name] == data for name, data in theirs.items())  # nothing else edited
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import grader; assert grader.__file__.startswith(sys.argv[1])\n"
        "from grader.cli import main; sys.exit(main(sys.argv[2:]))"
    )

    def grader(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-c", code, str(copy.parent), *args]
        return subprocess.run(argv, capture_output=True, text=True, cwd=package.parent, timeout=120)

    said = grader("hello", "Ada")
    assert (said.returncode, said.stdout.strip()) == (0, "hello Ada, from G14"), said.stderr
    helped = grader("--help")
    assert helped.returncode == 0, helped.stderr
    listed = helped.stdout
    assert "hello" in listed and all(name in listed for name in BUILTIN)
    # The unchanged package has no such command: what made it is the one module.
    assert "hello" not in grader_help()


def grader_help() -> str:
    """``grader --help`` of this repository's package."""
    from contextlib import redirect_stdout
    from io import StringIO

    buffer = StringIO()
    with redirect_stdout(buffer), pytest.raises(SystemExit):
        main(["--help"])
    return buffer.getvalue()


def test_a_third_party_plugin_adds_a_command_with_p(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES / "more_commands"))
    assert main(["hello", "Grace", "-p", "hello"]) == 0
    assert capsys.readouterr().out.strip() == "hello Grace, from G14"
    sys.modules.pop("hello", None)


def test_two_plugins_defining_one_command_are_both_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    assert main(["grade", "x", "-p", "clashing_command"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "two plugins define the command 'grade'" in err
    assert "command:grade" in err and "clashing_command" in err


def test_each_command_lists_only_the_options_it_uses() -> None:
    parser = build_parser(get_plugin_manager(load_entrypoints=False))
    actions = {a.dest: a for a in parser._actions}
    sub = actions["command"].choices  # type: ignore[union-attr]
    assert "--jobs" in sub["grade"].format_help()
    assert "--jobs" not in sub["check"].format_help()
    assert "--specs" not in sub["diff"].format_help() and "--pack" not in sub["diff"].format_help()


def test_grade_outside_any_course_is_one_line_and_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRADER_COURSE", raising=False)
    (tmp_path / "alice").mkdir()
    assert main(["grade", "alice", "--out", str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no course: run in a course folder" in err and "GRADER_COURSE" in err
    assert not (tmp_path / "out").exists()


def test_the_course_is_found_above_the_working_folder_and_named_in_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[2]
    monkeypatch.delenv("GRADER_COURSE", raising=False)
    monkeypatch.chdir(root / "submissions" / "correct_numpy")
    assert main(["grade", "attention.py", "--insecure", "--out", str(tmp_path / "out"), "-q"]) == 0
    out = capsys.readouterr().out
    assert f"course: {root}" in out.splitlines()
