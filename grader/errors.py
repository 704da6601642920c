"""The grader's own errors, and the exit code each one maps to.

A student's failure is never an exception here: it becomes a check result.
These exceptions are for the grader's callers (instructors): a bad command
line, a malformed spec, a missing reference. ``grader.cli.main`` turns each
into a single line on stderr and the exit code below.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "EXIT_CHECKS_FAILED",
    "EXIT_CONFIG",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "ConfigError",
    "GraderError",
    "Interrupted",
    "JobStarterLost",
    "PluginError",
    "SpecError",
    "STOPPING_SIGNALS",
    "UsageError",
    "WriterError",
    "catch_interrupts",
    "deferred_interrupts",
    "describe_failure",
    "internal_error_id",
    "interrupt_received",
    "log_internal_error",
]

EXIT_OK = 0
"""Everything ran; for ``check`` and ``validate``, every check passed."""
EXIT_CHECKS_FAILED = 1
"""``check`` or ``validate`` ran, and at least one check did not pass."""
EXIT_USAGE = 2
"""The command line is wrong: unknown option, missing or unreadable path."""
EXIT_CONFIG = 3
"""An exercise spec, the reference or a plugin is broken."""
EXIT_INTERNAL = 4
"""A bug in the grader or in a plugin: a traceback is printed."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports a command its SIGINT ended."""


class GraderError(Exception):
    """Base class of every error the grader reports in one line.

    Parameters
    ----------
    message : str
        A complete sentence that names the file, key or option at fault and,
        where possible, the fix.
    """

    exit_code: int = EXIT_CONFIG

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(GraderError):
    """A wrong command line: bad option, missing path, unwritable output."""

    exit_code = EXIT_USAGE


class ConfigError(GraderError):
    """The grading setup (specs folder, reference) cannot be used."""

    exit_code = EXIT_CONFIG


class SpecError(ConfigError):
    """A malformed exercise spec.

    Parameters
    ----------
    path : str
        The spec file.
    where : str
        The key or check at fault, e.g. ``"checks[2].points"``; may be empty.
    problem : str
        What is wrong and how to fix it.
    """

    def __init__(self, path: str, where: str, problem: str) -> None:
        self.path = str(path)
        self.where = where
        self.problem = problem
        location = f"{self.path}: {where}: " if where else f"{self.path}: "
        super().__init__(location + problem)


class PluginError(ConfigError):
    """A plugin could not be loaded or registers an unknown hook."""


class JobStarterLost(ConfigError):
    """The process that starts the jobs (the sandbox's zygote, ``--insecure``'s fork server) ended during the run.

    Not a submission's fault (jobs cannot signal it): the run stops with one line, the submissions
    graded so far kept in the gradebook for the same command to resume.
    """

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} ended during the run (killed from outside the grader, or by the out-of-memory killer?): "
            "the submissions graded so far are kept in the gradebook; run the same command again to grade the rest"
        )


class WriterError(GraderError):
    """A report writer failed on the whole report; the other writers' files were written."""

    exit_code = EXIT_INTERNAL


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C (SIGINT), a SIGTERM or a SIGHUP the ``grader`` command received: never blamed on the code it landed in.

    A reference, plugin or spec that raises `KeyboardInterrupt` itself is reported as broken (exit 3);
    this one, raised by `catch_interrupts`'s handler, stops the run wherever it lands, the reference's
    import included: "grader: interrupted" and exit 130 for SIGINT, "grader: terminated" and 143 for
    SIGTERM (128 + the signal's number, as a shell reports a command the signal ended).

    Parameters
    ----------
    signum : int
        The signal received.
    """

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        """128 + the signal's number."""
        return 128 + self.signum

    @property
    def line(self) -> str:
        """What the command says as it stops."""
        if self.signum == signal.SIGTERM:
            return "grader: terminated"
        if self.signum == getattr(signal, "SIGHUP", None):
            return "grader: hung up (its terminal closed)"
        return "grader: interrupted"

    def say(self, stream: Any) -> None:
        """Write `line` to ``stream``; on a terminal on a line of its own (after the ``^C`` the terminal
        echoed, at the end of a progress bar's line or of whatever was printed last)."""
        try:
            fresh = "\n" if stream.isatty() else ""
        except (AttributeError, ValueError, OSError):
            fresh = ""
        print(fresh + self.line, file=stream)


STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, *((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()))
"""The signals that stop the ``grader`` command with its clean-up (`catch_interrupts`): Ctrl-C, the
polite stop of ``kill``, ``timeout``, a CI job cancelled or a container stopped, and the hang-up of a
terminal closed (an SSH session lost) under a run. Ended at once, a run left its sandbox's folder in
TMPDIR (until the next run's sweep)."""


_RECEIVED: list[int] = []
"""The stopping signals `catch_interrupts`'s handler received in this process, in order."""


def _raise_interrupted(signum: int, frame: object) -> None:
    """The handler `catch_interrupts` installs."""
    _RECEIVED.append(signum)
    raise Interrupted(signum)


def interrupt_received() -> Interrupted | None:
    """The stop (`Interrupted`) this process received, if any: what any error raised after it comes from.

    Code a Ctrl-C lands in may turn the KeyboardInterrupt into another error: numpy's import, stopped
    in its C extension, raises ImportError ("PyCapsule_Import could not import module 'datetime'"),
    which the command reported as an internal error (exit 4).
    """
    return Interrupted(_RECEIVED[0]) if _RECEIVED else None


def catch_interrupts() -> None:
    """Make the `STOPPING_SIGNALS` raise `Interrupted` in this process (the ``grader`` command's first step).

    Only where the default is set (Python's own handler for SIGINT, the system's for SIGTERM): a
    signal the process was started ignoring (SIGINT for a command a shell runs in the background)
    stays ignored, and a handler someone else set stays theirs.
    """
    for signum in STOPPING_SIGNALS:
        if signal.getsignal(signum) in (signal.default_int_handler, signal.SIG_DFL):
            signal.signal(signum, _raise_interrupted)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[list[int]]:
    """Hold back the `STOPPING_SIGNALS` while the block runs: the clean-up of a run that is stopping, bounded in time.

    A second Ctrl-C (the first one's clean-up under way) raised in the middle of it stopped the
    clean-up halfway (the sandbox's temporary folder, the gradebook's last commit) and ended with a
    traceback. Here each signal is recorded in the list the block gets and raises nothing; the caller
    reports it after the block. Outside the main thread (no handler can be set there) nothing changes.

    Yields
    ------
    list of int
        The signals received during the block, in order (empty when none was).
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {signum: signal.signal(signum, lambda got, frame: received.append(got)) for signum in STOPPING_SIGNALS}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


def internal_error_id(exc: BaseException) -> str:
    """A short, stable id of a fault: 8 hex digits of the SHA-256 of its traceback's shape.

    The same bug at the same place gives the same id (file names, lines and
    the exception's type; not its message, which may hold student text), so
    an instructor can report it and a maintainer can find it.

    Parameters
    ----------
    exc : BaseException
        The fault, with its traceback.

    Returns
    -------
    str
        Eight lower-case hex digits.
    """
    import hashlib
    import os
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    shape = [type(exc).__name__] + [f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in frames]
    return hashlib.sha256("\n".join(shape).encode()).hexdigest()[:8]


def log_internal_error(line: str, exc: BaseException) -> None:
    """Write an internal-error note and its traceback to standard error (escaped: no student text raw).

    Parameters
    ----------
    line : str
        The one line that names the fault: ``"internal error <id> in the <plugin> plugin's <hook>"``.
    exc : BaseException
        The fault; its traceback follows the line, each row behind ``"  | "``.
    """
    import sys
    import traceback

    from grader.safetext import display

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    # Every line of the traceback behind a "|": no line of it can start a CI workflow command.
    lines = [f"  | {display(row)}" for row in text.splitlines()]
    try:
        print("\n".join([f"grader: {display(line)}", *lines]), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def describe_failure(exc: BaseException, path: str | None = None) -> str:
    """One line for an exception raised while loading instructor code: where, then what.

    Parameters
    ----------
    exc : BaseException
        Anything raised while importing a reference or a plugin, including
        `SyntaxError`, `SystemExit` and `KeyboardInterrupt`.
    path : str, optional
        The file being loaded; the innermost frame in it is named. Without
        it (or no frame in it), the innermost frame of the traceback.

    Returns
    -------
    str
        E.g. ``"reference/attention.py, line 12: SystemExit: 0"`` or
        ``"plugin.py, line 3: SyntaxError: invalid syntax"``.
    """
    import os

    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}, line {exc.lineno}"
        what = f"{type(exc).__name__}: {exc.msg}"
    else:
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
            tb = tb.tb_next
        mine = [f for f in frames if path and os.path.abspath(f[0]) == os.path.abspath(path)]
        outside = [f for f in frames if "importlib" not in f[0] and "pluggy" not in f[0]]
        chosen = (mine or outside or frames or [(path or "?", 0)])[-1]
        where = f"{chosen[0]}, line {chosen[1]}" if chosen[1] else chosen[0]
        if isinstance(exc, SystemExit):
            what = f"it called sys.exit({exc.code!r})" if exc.code is not None else "it called sys.exit()"
        else:
            what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return " ".join(f"{where}: {what}".split())
