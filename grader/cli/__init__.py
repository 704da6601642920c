"""The ``grader`` command line: ``grade``, ``check``, ``validate``, ``publish``, ``audit``, ``doctor``,
``build-student-package`` and ``init-ci``.

Each command lists in its ``--help``, and accepts, only the options it uses: a plugin adds its options
to the subcommands it serves (``grader_addoption(parser, command)``).

``main(argv)`` returns an exit code and never lets a `GraderError` escape as
a traceback: it prints one line, ``grader: error: ...``, and returns the
error's exit code.

Exit codes
----------
0  everything ran (``grade``), or every check passed (``check``, ``validate``),
   or every sandbox layer is active (``doctor``)
1  ``check`` or ``validate``: at least one check did not pass; ``doctor``: a
   layer is missing; ``audit``: a mutant survived an exercise it is tagged
   for, or a correct variant lost a point
2  usage error: wrong option or --jobs, missing path, a folder with nothing to grade, an --out
   or --json that cannot be written, an unreadable roster or one listing an id twice,
   ``-p no:sandbox`` or ``-p no:runner`` (only ``--insecure`` grades without the sandbox)
3  configuration error: a student package that fails to build or would hold something non-public,
   a malformed spec, a missing reference, a reference or plugin that fails
   to import (any exception, SyntaxError, SystemExit, KeyboardInterrupt), a reference that fails
   or is over its budget on a check's arguments, a sandbox that cannot run a job here (``grade``
   runs one before grading)
4  internal error in the grader or a plugin (a traceback is printed)

A refused run (2 or 3) leaves nothing behind: ``--out`` is created only when grading starts.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pluggy

from grader._version import __version__
from grader.config.core import Config, Hooks
from grader.config.plugins import get_plugin_manager
from grader.errors import (
    EXIT_CHECKS_FAILED,
    EXIT_INTERNAL,
    EXIT_OK,
    ConfigError,
    GraderError,
    UsageError,
)
from grader.execution.jobs import ForkServer, positive_int
from grader.execution.keys import EARLY_ZYGOTE, FORK_SERVER
from grader.execution.servers import check_fork_server, stop_zygote
from grader.grading.session import INTERNAL_ERRORS
from grader.integrations.studenttool import student_help
from grader.packs import discover_course, find_pack, mutants_dir, reference_file, specs_dir
from grader.reporting.fileio import check_out_dir, output_file, remove_stale_scratch
from grader.reporting.safetext import display

__all__ = ["console_main", "main"]


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one-line `UsageError` exceptions."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _shard(text: str) -> object:
    """``--shard K/N`` or ``auto/N`` as a `grader.shards.ShardSpec`, read with the command line (a wrong one is
    refused before anything runs)."""
    from grader.grading.slices import parse_shard

    return parse_shard(text)


MAX_JOBS = 256
"""The most submissions graded at once (``--jobs``): each needs threads and a sandboxed process of its own."""


def job_count(text: str) -> int:
    """argparse type of ``--jobs``: a whole number from 1 to `MAX_JOBS`."""
    value = positive_int(text)
    if value > MAX_JOBS:
        raise argparse.ArgumentTypeError(f"at most {MAX_JOBS} submissions are graded at once, got {value}")
    return value


def refuse_empty(argv: Sequence[str]) -> None:
    """Refuse an empty argument (``--pack ''``, ``--dask ''``: an unset variable) instead of ignoring it.

    Raises
    ------
    grader.errors.UsageError
        Naming the option whose value is empty.
    """
    for i, arg in enumerate(argv):
        if arg == "--":
            return
        if arg.startswith("--") and arg.endswith("=") and len(arg) > 3:
            option = arg[:-1]
        elif not arg.strip() and (i == 0 or argv[i - 1] != "--"):
            option = argv[i - 1] if i > 0 and argv[i - 1].startswith("-") else f"argument {i + 1}"
        else:
            continue
        raise UsageError(f"{option}: empty (an unset variable?); give a value, or leave the option out")


def _plugin_args(argv: Sequence[str]) -> list[str]:
    """The ``-p`` values, read before the full parser exists."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("-p", action="append", default=[])
    known, _ = pre.parse_known_args(list(argv))
    return [str(p) for p in known.p]


GRADING = ("grade", "similarity")
"""The commands that grade a class (hidden checks, its gradebook and its files)."""

USES_SPECS = ("grade", "similarity", "check", "validate", "publish", "audit", "build-student-package", "merge")
"""The commands that read the specs and the reference."""

USES_MUTANTS = ("grade", "similarity", "check", "publish", "audit", "build-student-package", "merge")
"""The commands that read the catalogue of known mistakes (diagnosis, audit)."""


def _pack_argument(parser: argparse.ArgumentParser) -> None:
    """``--pack``: the course pack to grade (read before the parser too: it registers the pack's plugin)."""
    parser.add_argument(
        "--pack",
        default=None,
        metavar="DIR",
        help="the course pack: its folder (holding course.yaml) or an installed pack's id (default: the one installed)",
    )


def _common(pm: pluggy.PluginManager, command: str) -> _Parser:
    """The options of ``command``: the core's, then those the plugins add for it (``grader_addoption``)."""
    common = _Parser(add_help=False)
    _pack_argument(common)
    if command in USES_SPECS:
        common.add_argument("--specs", default=None, metavar="DIR", help="exercise specs folder (default: the pack's)")
        common.add_argument(
            "--reference", default=None, metavar="FILE", help="reference implementation (default: the pack's)"
        )
    if command in GRADING:
        common.add_argument(
            "-j",
            "--jobs",
            type=job_count,
            default=None,
            metavar="N",
            help=f"submissions graded at once, 1 to {MAX_JOBS} (default: one per core)",
        )
    if command in USES_MUTANTS:
        common.add_argument(
            "--mutants",
            default=None,
            metavar="DIR",
            help="catalogue of known mistakes, for diagnosis and 'audit' (default: the pack's, if it has one)",
        )
    common.add_argument(
        "-p",
        action="append",
        default=[],
        metavar="PLUGIN",
        help="load a plugin module by name, or block one with -p no:NAME (repeatable)",
    )
    Hooks(pm).addoption(parser=common, command=command)
    return common


def build_parser(pm: pluggy.PluginManager, pack: Any = None, only: str | None = None) -> argparse.ArgumentParser:
    """Build the parser; plugins add each subcommand's options through ``grader_addoption``.

    Each command lists (and accepts) only the options it uses: the core's own
    (`USES_SPECS`, `GRADING`, `USES_MUTANTS`) and those its plugins add for it.
    ``pack`` (a `grader.packs.Pack`, if one was found) names the chapter
    and the submission file in the help. ``only`` names the command about to
    be parsed: the other commands are listed with their help but get none of
    their options (nothing parses them; the plugins are asked once, not once
    per command).
    """

    def common(command: str) -> _Parser:
        return _common(pm, command) if only in (None, command) else _Parser(add_help=False)

    file = pack.submission if pack is not None else "submission file"
    notebook = pack.notebook if pack is not None else "notebook"
    what = f"chapter {pack.chapter} ({pack.title})" if pack is not None else "a course pack's"
    parser = _Parser(prog="grader", description=f"Grade {what} exercises.")
    parser.add_argument("--version", action="version", version=f"grader {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    grade = sub.add_parser(
        "grade",
        parents=[common("grade")],
        help="grade submissions and write reports",
        description=f"Grade one {file}, a student folder, or a folder of student folders.",
    )
    grade.add_argument("paths", nargs="+", metavar="PATH", help=f"{file}, a student folder, or a folder of them")
    grade.add_argument(
        "--out", default="reports", metavar="DIR", help="folder for the HTML and JSON reports (default: reports)"
    )
    grade.add_argument(
        "--json", metavar="FILE", type=output_file, help="write the JSON results here (default: DIR/results.json)"
    )
    grade.add_argument(
        "--only",
        nargs="+",
        metavar="ID",
        help="grade only these students again; the others' results come from the gradebook (left out when it has none)",
    )
    grade.add_argument(
        "--shard",
        metavar="K/N",
        type=_shard,
        help="grade only the K-th of N slices of the class (K from 1; auto/N: K from "
        "JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID or GRADER_SHARD_INDEX) and write DIR/shard/ "
        "for 'grader merge'",
    )
    similarity = sub.add_parser(
        "similarity",
        parents=[common("similarity")],
        help="grade and write DIR/similarity.html: copied code, identical wrong values",
        description="Grade the class (like 'grade --similarity') and flag pairs of submissions: code that shares "
        "most of its tokens (copydetect, starter as boilerplate) and identical wrong values on hidden checks.",
    )
    similarity.add_argument("paths", nargs="+", metavar="PATH", help="a folder of student folders, or a zip export")
    similarity.add_argument("--out", default="reports", metavar="DIR", help="folder for the reports (default: reports)")
    similarity.add_argument("--json", metavar="FILE", type=output_file, help="write the JSON results here")
    merge = sub.add_parser(
        "merge",
        parents=[common("merge")],
        help="merge the folders of 'grade --shard K/N' runs into one run's files",
        description="Combine the --out folders of every shard of a class into exactly the files one unsharded "
        "'grader grade' writes. Refuses shards made with other specs, reference, grader, secret or settings, and "
        "names shards missing or given twice.",
    )
    merge.add_argument("shard_dirs", nargs="+", metavar="SHARD_DIR", help="the --out folder of each shard")
    merge.add_argument(
        "--out", default="reports", metavar="DIR", help="folder for the merged reports (default: reports)"
    )
    merge.add_argument(
        "--json", metavar="FILE", type=output_file, help="write the JSON results here (default: DIR/results.json)"
    )
    diff = sub.add_parser(
        "diff",
        help="compare two results.json: who changed, by how much, on which checks",
        description="List the students whose score or checks differ between two results files (a regrade).",
    )
    diff.add_argument("old", metavar="OLD.json")
    diff.add_argument("new", metavar="NEW.json")
    from grader.term.ledger import add_parser as add_term_parser  # issue 27: the term ledger

    add_term_parser(sub)
    check = sub.add_parser(
        "check",
        parents=[common("check")],
        help=f"run the visible checks on your own {file}",
        description=f"Run the visible checks on one {file} and print a summary.",
    )
    check.add_argument("paths", nargs=1, metavar="FILE", help=f"your {file}, {notebook}, or the folder holding it")
    check.add_argument(
        "--public",
        metavar="FILE",
        help="public checks made by 'grader publish' (default: the specs folder if present, "
        "else the checks shipped with the grader)",
    )
    publish = sub.add_parser(
        "publish",
        parents=[common("publish")],
        help="write the visible checks, prepared, for 'grader check'",
        description="Prepare the visible checks (calls and expected values) into one JSON file that "
        "'grader check' runs without the specs or the reference.",
    )
    publish.add_argument(
        "--out",
        dest="bundle",
        default=None,
        metavar="FILE",
        help="where to write it (default: the pack's public-checks file, shipped with it)",
    )
    package = sub.add_parser(
        "build-student-package",
        parents=[common("build-student-package")],
        help="build the wheel and sdist a course gives its students (public checks, starter, diagnosis data)",
        description="Publish the visible checks afresh, then build the student wheel and sdist: the grader, the "
        "public checks with each catalogued mistake's results on them, and the starter; never the reference, a "
        "spec, a hidden input or expected value, or mutant code. Every artifact is opened and inspected.",
    )
    package.add_argument(
        "--out",
        dest="package_out",
        default="dist",
        metavar="DIR",
        help="folder for the .whl and .tar.gz (default: dist)",
    )
    starter = sub.add_parser(
        "starter",
        help=f"copy the starter {file} into a folder (default: here)",
        description=f"Copy the starter {file} (shipped in the student package) into DIR; an existing "
        f"{file} is never overwritten.",
    )
    starter.add_argument("starter_dir", nargs="?", default=".", metavar="DIR", help="where to put it (default: .)")
    _pack_argument(starter)
    init_ci = sub.add_parser(
        "init-ci",
        help="write CI files for a student repository (github, gitlab or classroom50)",
        description="Write the CI files of a student template repository. CI runs the visible checks only "
        "(grader check); the grade comes from 'grader grade'.",
    )
    init_ci.add_argument("target", choices=("github", "gitlab", "classroom50"), help="the CI to write files for")
    init_ci.add_argument(
        "--dir",
        dest="ci_dir",
        default=".",
        metavar="DIR",
        help="the repository to write into (default: the current folder)",
    )
    init_ci.add_argument(
        "--package",
        default=None,
        metavar="SPEC",
        help="required: what CI installs with pip, "
        "the course's student wheel as a path in the repository (dist/NAME.whl), an https:// URL, "
        "or the name the course publishes it under on its index",
    )
    init_ci.add_argument("--force", action="store_true", help="overwrite files that exist")
    _pack_argument(init_ci)
    from grader.integrations.gradescope_bundle import add_parser as add_gradescope_bundle

    add_gradescope_bundle(sub, common)
    sub.add_parser(
        "doctor",
        parents=[common("doctor")],
        help="show which sandbox layers are active on this machine",
        description="Start the sandbox, run an empty job in it, and list every isolation layer.",
    )
    sub.add_parser(
        "audit",
        parents=[common("audit")],
        help="grade the catalogued mutants and correct variants; print the kill matrix",
        description="Grade every mutant and correct variant of the catalogue (--mutants). Fails if a mutant "
        "survives an exercise it is tagged for, or a correct variant loses a point.",
    )
    sub.add_parser(
        "validate",
        parents=[common("validate")],
        help="check the specs against the reference",
        description="Check every hand value against the reference, then grade the reference: it must score full marks.",
    )
    return student_help(parser, pack)  # the student package lists the student's commands only


def _prepare_out(config: Config) -> None:
    """Refuse an unusable ``--out`` or ``--json`` now; the folder itself is made when grading starts."""
    out = config.out_dir
    if out is None:
        return
    check_out_dir(out)
    json_path = config.option("json")
    if json_path and Path(json_path).is_dir():
        raise UsageError(f"--json {json_path}: is a folder; give a file name")


def _run(config: Config) -> int:
    from grader.grading import session

    if config.command == "validate":
        return _validate(config)
    if config.command == "audit":
        from grader.grading.audit import audit

        return audit(config, _write)
    if config.command == "publish":
        return _publish(config)
    if config.command == "diff":
        from grader.grading.regrade import diff_results, load_results

        for line in diff_results(load_results(config.option("old")), load_results(config.option("new"))):
            _write(display(line))
        return EXIT_OK
    if config.command == "term":
        from grader.term.ledger import run as run_term

        return run_term(config, _write)
    if config.command == "build-student-package":
        return _build_student_package(config)
    if config.command == "starter":
        return _starter(config)
    if config.command == "init-ci":
        from grader.integrations.ci import NOTE, init_ci

        check_out_dir(Path(config.option("ci_dir")), "--dir")  # before anything is written

        for path in init_ci(
            config.option("target"),
            Path(config.option("ci_dir")),
            config.option("package"),
            bool(config.option("force")),
            config.pack,
        ):
            _write(f"wrote {display(str(path))}")
        _write(NOTE)
        return EXIT_OK
    if config.command == "gradescope-bundle":
        from grader.integrations.gradescope_bundle import run as gradescope_bundle

        return gradescope_bundle(config, _write)
    if config.command == "doctor":
        code = config.hooks.doctor(write=_write, config=config)
        if code is None:
            raise ConfigError("no plugin can say which sandbox layers are active (grader_doctor)")
        return code
    if getattr(config.options, "_shards", None) is not None:  # grader merge
        from grader.shards.merge import merge

        report = merge(config)
        config.hooks.terminal_summary(report=report, config=config, write=_write)
        return EXIT_OK
    remove_stale_scratch()  # what graders killed with kill -9 left in the temporary folder
    if config.command == "check":
        config.options.out = None
        pack = config.pack
        for path in config.options.paths:  # a file of another pack: every function would read as missing
            if Path(path).is_file() and Path(path).name not in (pack.submission, pack.notebook):
                print(
                    f"grader: warning: {display(path)}: the course pack {pack.id} ({pack.chapter}) grades "
                    f"{pack.submission}; pass --pack DIR if {display(Path(path).name)} is another pack's",
                    file=sys.stderr,
                )
        report = session.grade(config, config.options.paths, visible_only=True)
    else:
        report = session.grade(config, config.options.paths)
    config.hooks.terminal_summary(report=report, config=config, write=_write)
    faults = config.stash.get(INTERNAL_ERRORS, [])
    if faults:
        shown = ", ".join(f"{display(repr(sub_id))} ({fault})" for sub_id, fault in faults[:5])
        more = f" and {len(faults) - 5} more" if len(faults) > 5 else ""
        print(
            f"grader: internal error on {len(faults)} submission(s): {shown}{more}; they are graded 'error', every "
            f"other result and every class file was written (the tracebacks are above)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    if config.command == "check":
        passed = all(c.status == "passed" for s in report.submissions for e in s.exercises for c in e.checks)
        return EXIT_OK if passed and all(s.status == "graded" for s in report.submissions) else EXIT_CHECKS_FAILED
    return EXIT_OK


def _validate(config: Config) -> int:
    """Hand values are checked while preparing; then grade the reference."""
    from grader.grading import session

    config.options.out = None
    config.options.paths = [str(reference_file(config))]
    collected = session.collect(config)
    literals = sum(1 for ex in collected.exercises for c in ex.checks if c.kind == "literal")
    _write(
        f"specs: {len(collected.exercises)} exercises, {sum(len(e.checks) for e in collected.exercises)} checks; "
        f"{literals} hand values agree with the reference"
    )
    report = session.grade(config, config.options.paths)
    result = report.submissions[0]
    bad = [(e.id, c) for e in result.exercises for c in e.checks if c.status != "passed"]
    for ex_id, c in bad:
        _write(f"FAIL {ex_id} {c.id}: {c.status}: {c.message}")
    if result.error:
        _write(f"FAIL the reference could not run: {result.error}")
    manifest = _manifest_problems(config, collected.exercises)
    for line in manifest:
        _write(f"FAIL {line}")
    ok = not bad and not result.error and result.score == result.max_score and not manifest
    _write(f"reference scores {result.score:g}/{result.max_score:g}: " + ("valid" if ok else "INVALID"))
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


def _starter(config: Config) -> int:
    """Copy the starter: the student package's copy, else the specs folder's (in the course repository)."""
    import shutil

    pack = config.pack
    source = pack.starter
    if not source.is_file():
        raise ConfigError(f"{source}: the pack has no starter; install the course's student package (it ships one)")
    target = Path(config.option("starter_dir")) / pack.submission
    if target.is_symlink():  # even a dangling one: copying would create the file it points to, elsewhere
        raise UsageError(f"{target}: a symbolic link; the starter writes only a file of its own (remove the link)")
    if target.exists():
        raise UsageError(f"{target}: exists; the starter never overwrites your file")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    count = len(pack.functions)
    _write(
        f"wrote {display(str(target))}: fill in the {_NUMBERS.get(count, str(count))} function{'s' if count != 1 else ''}, "
        f"then run 'grader check {display(str(target))}'"
    )
    return EXIT_OK


_NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def _bundle(config: Config) -> dict[str, Any]:
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


def _build_student_package(config: Config) -> int:
    from grader.packs.public import dumps
    from grader.packs.student import build_student_package, member_names

    check_out_dir(Path(config.option("package_out")), "--out")  # before the checks are published and built

    bundle = _bundle(config)
    mutants, _ = mutants_dir(config)
    artifacts = build_student_package(
        Path(config.option("package_out")),
        dumps(bundle),
        config.pack,
        specs_dir(config),
        reference_file(config),
        mutants or config.pack.mutants,
    )
    visible = sum(len(e["checks"]) for e in bundle["exercises"])
    for artifact in artifacts:
        _write(
            f"{display(str(artifact))}: {len(member_names(artifact))} files; inspected: no reference, spec, "
            "hidden check or mutant code"
        )
    _write(f"the public checks: {visible} visible checks; {bundle['hidden_count']} hidden checks left out")
    return EXIT_OK


def _publish(config: Config) -> int:
    from grader.packs.public import dumps
    from grader.reporting.fileio import write_atomic

    bundle = _bundle(config)
    target = Path(config.option("bundle") or config.pack.public)
    try:
        write_atomic(target, dumps(bundle))
    except OSError as exc:
        raise UsageError(f"--out {target}: cannot write the file ({exc.strerror})") from None
    visible = sum(len(e["checks"]) for e in bundle["exercises"])
    mistakes = len({m["name"] for e in bundle["exercises"] for c in e["checks"] for m in c["mistakes"]})
    _write(
        f"{target}: {visible} visible checks, prepared; {bundle['hidden_count']} hidden checks left out; "
        f"{mistakes} catalogued mistakes' results on them, for diagnosis"
    )
    return EXIT_OK


def _pack_or_none(course: str | None) -> Any:
    """The run's course pack for the help texts, or None when there is none (yet): the commands that need one say so."""
    try:
        return find_pack(course)
    except GraderError:
        return None


def _write(line: str) -> None:
    """Print one line of the summary; once the reader has gone (``grader ... | head``), print no more."""
    if sys.stdout is None or getattr(_write, "closed", False):
        return
    try:
        print(line, flush=True)
    except BrokenPipeError:
        _write.closed = True  # type: ignore[attr-defined]
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that flushing at exit fails no more
        os.close(devnull)


def main(
    argv: Sequence[str] | None = None, fork_server: Any = None, zygote: Any = None, gc_paused: bool = False
) -> int:
    """Run the grader with ``argv`` (default: ``sys.argv[1:]``).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments, without the program's name.
    fork_server : (subprocess.Popen, socket.socket), optional
        ``grader check``'s fork server, as `grader.cli.launch` started it before anything was
        imported (`grader.execution.servers.check_fork_server`); without it, ``check`` starts it here.
    zygote : (subprocess.Popen, socket.socket, file), optional
        ``grade``'s sandbox zygote, as `grader.cli.launch` started it (`grader.execution.servers.grade_zygote`);
        the sandbox plugin takes it (`grader.stash.EARLY_ZYGOTE`), else it is stopped here.
    gc_paused : bool, optional
        True when `grader.cli.launch` paused the garbage collector for start-up: it is resumed here,
        once the plugins are configured and before anything is graded, with start-up's objects
        frozen (`gc.freeze`).

    Returns
    -------
    int
        The exit code (see the module docstring).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    config = None
    early = _early_fork_server(argv, fork_server)
    try:
        refuse_empty(argv)
        course = discover_course(argv)  # --pack, else the course.yaml above the working folder, as pytest's rootdir
        pm = get_plugin_manager(_plugin_args(argv), pack=course)
        options = build_parser(pm, _pack_or_none(course), only=argv[0] if argv else None).parse_args(argv)
        if getattr(options, "pack", None) is None:
            options.pack = course
        if options.command == "similarity":  # 'grade --similarity' under its own name
            options.command, options.similarity = "grade", True
        if options.command == "merge":  # an unsharded 'grade' run's writers, fed from the shards' records
            from grader.shards.merge import merge_options

            options = merge_options(options, build_parser(pm))
            options.command = "grade"
        config = Config(command=options.command, options=options, pluginmanager=pm)
        if early is not None:
            config.stash[FORK_SERVER] = early
            early = None
        if zygote is not None:
            config.stash[EARLY_ZYGOTE] = zygote
            zygote = None
        if config.command == "grade":
            _prepare_out(config)  # refused before anything starts; made by session.grade once grading starts
        config.hooks.configure(config)
        if gc_paused:
            _resume_collecting()
            gc_paused = False
        return _run(config)
    except GraderError as exc:
        print(f"grader: error: {display(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("grader: interrupted", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001 - any other fault: a traceback and exit code 4, never a hang
        traceback.print_exc()
        print(
            "grader: internal error: this is a bug in the grader or a plugin; please report it with the traceback above",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        if gc_paused:  # stopped before grading: the unconfigure hooks run with the collector on
            _resume_collecting()
        if config is not None:
            config.hooks.unconfigure(config)
        if early is not None:
            early.close()
        if zygote is None and config is not None:
            zygote = config.stash.get(EARLY_ZYGOTE)  # not taken: the run stopped before the sandbox started
        if zygote is not None:
            stop_zygote(zygote)


def _resume_collecting() -> None:
    """Resume the garbage collector `grader.cli.launch` paused, start-up's objects frozen first."""
    import gc

    gc.freeze()
    gc.enable()


def _early_fork_server(argv: Sequence[str], started: Any = None) -> ForkServer | None:
    """For ``check``, a warm fork server (`grader.execution.jobs.ForkServer`) started before anything else.

    It imports numpy while the grader loads its plugins, the pack and the checks, so the student's
    calls start at once (issue 16: ``grader check attention.py`` in 200 ms). It holds no check: it
    is started before any is read, and its jobs follow `grader.execution.jobs.PlainJob`'s rules (their own
    session and folder, the children's environment, rlimits, the same timeouts and output caps).
    None for any other command, for ``--help``, or where there is no ``os.fork`` (Windows).
    ``started`` is one `grader.cli.launch` started even earlier.
    """
    started = started if started is not None else check_fork_server(list(argv))
    return ForkServer(wait=False, started=started) if started is not None else None


def console_main() -> None:
    """Entry point of the ``grader`` script."""
    sys.exit(main())
