"""``grader term``: one gradebook across a term's assignments, with late days spent from one budget."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from grader.builtin.csv_gradebook import gradebook_csv
from grader.builtin.lms import CANVAS_FILE, MOODLE_FILE, canvas_csv, moodle_csv
from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.errors import EXIT_OK, UsageError
from grader.fileio import write_atomic
from grader.markers import hookimpl
from grader.safetext import display


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``term``'s own arguments."""
    parser.add_argument("sources", nargs="+", metavar="RESULTS", help="each assignment's results, in order")
    parser.add_argument(
        "--out", dest="term_out", default="term", metavar="DIR", help="folder for ledger.json and gradebook.csv"
    )
    parser.add_argument(
        "--missing",
        choices=("error", "zero"),
        default="error",
        help="a student without a result for an assignment: an error (default), or 0 points",
    )
    parser.add_argument(
        "--canvas-assignment",
        default="Term total",
        metavar="NAME",
        help="the assignment column of DIR/canvas.csv, as Canvas names it (default: Term total)",
    )


def run(config: Config) -> int:
    """``grader term``: read, charge, and write ``ledger.json`` and ``gradebook.csv`` (all or nothing)."""
    # here: every command registers this module, only 'grader term' reads a ledger (issue 29)
    from grader.term.ledger import GRADEBOOK_FILE, LEDGER_FILE, build_ledger, ledger_json, load_assignment, term_report

    ledger = build_ledger([load_assignment(s) for s in config.option("sources")], config.option("missing"))
    out = Path(config.option("term_out"))
    report = term_report(ledger)
    texts = {LEDGER_FILE: ledger_json(ledger), GRADEBOOK_FILE: gradebook_csv(report)}
    systems = {s.lms.get("system") for s in report.submissions}
    if systems & {"canvas", "moodle"}:
        if "canvas" in systems:
            texts[CANVAS_FILE] = canvas_csv(report, config.option("canvas_assignment"))
        if "moodle" in systems:
            texts[MOODLE_FILE] = moodle_csv(report, f"{ledger.course or 'term'} total")
    try:
        for name, text in texts.items():
            write_atomic(out / name, text)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write the ledger ({exc.strerror})") from None
    ids = [a.id for a in ledger.assignments]
    write(f"term of {len(ids)} assignment(s): {', '.join(ids)}; late days per student: {ledger.budget}")
    for student, per in ledger.rows.items():
        scores = " ".join(f"{a} {r['score']:g}/{r['max_score']:g}" for a, r in per.items())
        used = sum(r["late_days_used"] for r in per.values())
        total = sum(r["score"] for r in per.values())
        write(display(f"{student}: {scores}; total {total:g}; late days used {used}, left {ledger.left[student]}"))
    write(f"wrote {', '.join(str(out / name) for name in texts)}")
    return EXIT_OK


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "term",
        help="one gradebook across a term's assignments, with late days from one budget",
        description="Read several assignments' results (grade --out folders or results.json files), in the "
        "term's order, and write one gradebook: each student's score per assignment, late days used and left "
        "from the term's budget (a policy's late_days: {term: N}), and the totals.",
        handler=run,
        arguments=arguments,
        plugin_options=False,
    )
