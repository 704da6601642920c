"""The ``grader`` command line: one module per subcommand in ``grader.cli.commands``.

Each subcommand registers itself, its options and its handler (``grader_add_commands``); each lists in
its ``--help``, and accepts, only the options it uses: a plugin adds its options to the subcommands it
serves (``grader_addoption(parser, command)``). ``grader --help`` in a student's installation (a course
with no specs at hand) lists the students' commands only.

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
130  stopped by Ctrl-C (SIGINT, `grader.errors.Interrupted`), wherever it landed: ``grader: interrupted``
143  stopped by SIGTERM, as by Ctrl-C: ``grader: terminated``
129  stopped by SIGHUP (its terminal closed), as by Ctrl-C: ``grader: hung up (its terminal closed)``

A refused run (2 or 3) leaves nothing behind: ``--out`` is created only when grading starts.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import Any

from grader.cli.common import prepare_out
from grader.config.core import Config
from grader.config.parser import build_parser, commands_of, plugin_args
from grader.config.plugins import get_plugin_manager
from grader.errors import (
    EXIT_INTERNAL,
    GraderError,
    Interrupted,
    UsageError,
    deferred_interrupts,
    interrupt_received,
)
from grader.execution.jobs import ForkServer
from grader.execution.keys import EARLY_ZYGOTE, FORK_SERVER
from grader.execution.servers import check_fork_server, stop_zygote
from grader.integrations.studenttool import student_help
from grader.packs import discover_course, find_pack
from grader.safetext import display

__all__ = ["console_main", "main"]


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


def _pack_or_none(course: str | None) -> Any:
    """The run's course for the help texts, or None when there is none (yet): the commands that need one say so."""
    try:
        return find_pack(course)
    except GraderError:
        return None


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
    ended: list[int] = []
    code = _main(argv, fork_server, zygote, gc_paused, ended)
    return ended[-1] if ended else code


def _main(argv: Sequence[str] | None, fork_server: Any, zygote: Any, gc_paused: bool, ended: list[int]) -> int:
    """`main`'s run; an error of the unconfigure hooks (their one line printed) puts its exit code in ``ended``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    config = None
    stopped = False  # "grader: interrupted" said
    early = _early_fork_server(argv, fork_server)
    try:
        refuse_empty(argv)
        course = discover_course(argv)  # --pack, else the course.yaml above the working folder, as pytest's rootdir
        pm = get_plugin_manager(plugin_args(argv), pack=course)
        pack = _pack_or_none(course)
        parser = build_parser(pm, pack, only=argv[0] if argv else None)
        options = student_help(parser, pack).parse_args(argv)  # a student's installation lists their commands only
        if getattr(options, "pack", None) is None:
            options.pack = course
        command = commands_of(pm)[options.command]
        if command.prepare is not None:  # 'similarity' and 'merge' run as 'grade'
            options = command.prepare(options, pm)
        config = Config(command=options.command, options=options, pluginmanager=pm)
        if early is not None:
            config.stash[FORK_SERVER] = early
            early = None
        if zygote is not None:
            config.stash[EARLY_ZYGOTE] = zygote
            zygote = None
        if config.command == "grade":
            prepare_out(config)  # refused before anything starts; made by session.grade once grading starts
        config.hooks.configure(config)
        if gc_paused:
            _resume_collecting()
            gc_paused = False
        return command.handler(config)
    except KeyboardInterrupt as exc:
        stopped = True
        stop = exc if isinstance(exc, Interrupted) else Interrupted()  # one raised outside the handler: SIGINT's
        stop.say(sys.stderr)
        return stop.exit_code
    except Exception as exc:  # noqa: BLE001 - any other fault: a traceback and exit code 4, never a hang
        received = interrupt_received()
        if received is not None:  # an error the stop caused where it landed (numpy's import: ImportError), no fault
            stopped = True
            received.say(sys.stderr)
            return received.exit_code
        if isinstance(exc, GraderError):
            print(f"grader: error: {display(str(exc))}", file=sys.stderr)
            return exc.exit_code
        traceback.print_exc()
        print(
            "grader: internal error: this is a bug in the grader or a plugin; please report it with the traceback above",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        with deferred_interrupts() as late:  # a Ctrl-C now (a second one, say) waits for the clean-up's end
            _clean_up(config, early, zygote, gc_paused, ended)
        if late:
            stop = Interrupted(late[0])
            if not stopped:
                stop.say(sys.stderr)
            ended.append(stop.exit_code)


def _clean_up(config: Config | None, early: Any, zygote: Any, gc_paused: bool, ended: list[int]) -> None:
    """`_main`'s end, whatever stopped the run: the unconfigure hooks, the servers started for it stopped."""
    if gc_paused:  # stopped before grading: the unconfigure hooks run with the collector on
        _resume_collecting()
    if config is not None:
        try:
            config.hooks.unconfigure(config)
        except GraderError as exc:  # the gradebook's last commit on a full disk: one line, its exit code
            print(f"grader: error: {display(str(exc))}", file=sys.stderr)
            ended.append(exc.exit_code)
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
