"""``grader publish``: the visible checks, prepared, for ``grader check`` anywhere."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from grader.cli.common import write
from grader.config.commands import Commands
from grader.config.core import Config
from grader.errors import EXIT_OK, ConfigError, UsageError
from grader.markers import hookimpl
from grader.packs import mutants_dir


def public_checks(config: Config) -> dict[str, Any]:
    """The public checks of the specs, with each catalogued mistake's results on them (see `grader.packs.public`)."""
    from grader.grading import session
    from grader.packs.catalogue import load_catalogue
    from grader.packs.public import publish, visible_part

    collected = session.collect(config)
    table = None
    if config.pluginmanager.get_plugin("diagnosis") is not None and not config.option("no_diagnosis", False):
        folder, explicit = mutants_dir(config)
        try:
            catalogue = (
                load_catalogue(folder, config.pack.submission, config.pack.chapter_url) if folder is not None else None
            )
        except ConfigError:
            if explicit:
                raise
            catalogue = None
        if catalogue is not None:  # each mistake's results on the visible checks: data for 'check' anywhere
            table = config.hooks.mistake_table(
                collected=visible_part(collected), catalogue=catalogue, outcomes=None, config=config
            )
    return publish(collected, table)


def run(config: Config) -> int:
    from grader.fileio import write_atomic
    from grader.packs.public import dumps

    bundle = public_checks(config)
    target = Path(config.option("bundle") or config.pack.public)
    try:
        write_atomic(target, dumps(bundle))
    except OSError as exc:
        raise UsageError(f"--out {target}: cannot write the file ({exc.strerror})") from None
    visible = sum(len(e["checks"]) for e in bundle["exercises"])
    mistakes = len({m["name"] for e in bundle["exercises"] for c in e["checks"] for m in c["mistakes"]})
    write(
        f"{target}: {visible} visible checks, prepared; {bundle['hidden_count']} hidden checks left out; "
        f"{mistakes} catalogued mistakes' results on them, for diagnosis"
    )
    return EXIT_OK


def arguments(parser: argparse.ArgumentParser, pack: Any) -> None:
    """``publish``'s own arguments."""
    parser.add_argument(
        "--out",
        dest="bundle",
        default=None,
        metavar="FILE",
        help="where to write it (default: the course's public-checks file)",
    )


@hookimpl
def grader_add_commands(commands: Commands) -> None:
    commands.add(
        "publish",
        help="write the visible checks, prepared, for 'grader check'",
        description="Prepare the visible checks (calls and expected values) into one JSON file that "
        "'grader check' runs without the specs or the reference.",
        handler=run,
        arguments=arguments,
        uses=("pack", "specs", "mutants"),
    )
