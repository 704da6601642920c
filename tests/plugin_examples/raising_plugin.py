"""A plugin whose report writer or terminal summary raises (``--raise-in HOOK``), to show that a
plugin's bug costs only its own output (tests/harness/test_fault_isolation.py): the other writers'
files and results.json are written, the other summaries printed, and the run exits 4 naming it."""

from __future__ import annotations

from grader import hookimpl

OWN_FILE = "raising-plugin.txt"


@hookimpl
def grader_addoption(parser, command):  # noqa: ANN001
    if command == "grade":
        parser.add_argument("--raise-in", choices=("write_reports", "terminal_summary"), default=None)


@hookimpl
def grader_write_reports(report, config):  # noqa: ANN001
    if config.option("raise_in") == "write_reports":
        raise RuntimeError("a bug in the raising plugin's writer")
    (config.out_dir / OWN_FILE).write_text(f"{len(report.submissions)} submission(s)\n", encoding="utf-8")


@hookimpl
def grader_terminal_summary(report, config, write):  # noqa: ANN001
    write("raising plugin: its own summary line")
    if config.option("raise_in") == "terminal_summary":
        raise KeyError("a bug in the raising plugin's summary")
