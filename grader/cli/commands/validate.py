"""``grader validate``: check the specs against the reference; the reference must score full marks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.errors import EXIT_CHECKS_FAILED, EXIT_OK, GraderError
from grader.markers import hookimpl
from grader.packs import reference_file


def run(config: Config) -> int:
    """Hand values are checked while preparing; then grade the reference."""
    from grader.grading import session

    config.options.out = None
    config.options.paths = [str(reference_file(config))]
    collected = session.collect(config)
    literals = sum(1 for ex in collected.exercises for c in ex.checks if c.kind == "literal")
    write(
        f"specs: {len(collected.exercises)} exercises, {sum(len(e.checks) for e in collected.exercises)} checks; "
        f"{literals} hand values agree with the reference"
    )
    report = session.grade(config, config.options.paths)
    result = report.submissions[0]
    bad = [(e.id, c) for e in result.exercises for c in e.checks if c.status != "passed"]
    for ex_id, c in bad:
        write(f"FAIL {ex_id} {c.id}: {c.status}: {c.message}")
    if result.error:
        write(f"FAIL the reference could not run: {result.error}")
    manifest = _manifest_problems(config, collected.exercises)
    for line in manifest:
        write(f"FAIL {line}")
    ok = not bad and not result.error and result.score == result.max_score and not manifest
    write(f"reference scores {result.score:g}/{result.max_score:g}: " + ("valid" if ok else "INVALID"))
    return EXIT_OK if ok else EXIT_CHECKS_FAILED


def _manifest_problems(config: Config, exercises: Sequence[Any]) -> list[str]:
    """Where the specs and the pack's manifest disagree: a function no student writes, a section renamed."""
    try:
        pack = config.pack
    except GraderError:
        return []
    problems = []
    for ex in exercises:
        unknown = sorted({c.function for c in ex.checks} - set(pack.functions))
        if unknown:
            problems.append(
                f"{ex.id}: checks call {', '.join(unknown)}, not among the functions of "
                f"{pack.root / 'course.yaml'} ({', '.join(pack.functions)}); list them there"
            )
        if ex.id in pack.sections and pack.sections[ex.id] != ex.section:
            problems.append(
                f"{ex.id}: its section is {ex.section!r} but course.yaml's sections say "
                f"{pack.sections[ex.id]!r}; make them agree"
            )
    return problems


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "validate",
        help="check the specs against the reference",
        description="Check every hand value against the reference, then grade the reference: it must score full marks.",
        handler=run,
        uses=("pack", "specs"),
    )
