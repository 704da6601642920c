"""Built-in plugin: the runner, the one answer to ``grader_run_calls``, choosing its launcher.

Which launcher runs a submission's calls is read from the configuration, never from the order in
which plugins were registered (`grader.execution.jobs.sandboxed`):

* ``grader grade`` runs them in the sandbox: a job of the zygote that the sandbox plugin started
  (``grader.builtin.sandbox``), lent through `grader.stash.JOB_LAUNCHERS`. Without it the
  submission is an internal error, never run unsandboxed.
* ``grader merge`` and ``grade --dask`` take outcomes that already exist: the shards' records and the
  cluster's answers, which the runner asks for first (the hook ``grader_known_outcome``).
* ``--insecure``, and the commands that run trusted code only (``check`` on a student's own file,
  ``validate``, ``audit``, ``publish``), run them in plain child processes (`grader.execution.jobs.PlainJob`);
  ``grade --insecure`` and ``check`` fork them from a warm fork server (`grader.execution.jobs.ForkJob`)
  where there is ``os.fork``: the same rules, without an interpreter start per job.

Either way `grader.execution.calls.run_calls` makes the calls, one at a time, with the same timeouts. The
runner is essential: ``-p no:runner`` is refused (`grader.config.plugins.ESSENTIAL`). A third-party
runner still overrides it (this implementation is ``trylast``).
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from grader.errors import ConfigError, JobStarterLost
from grader.execution.calls import WALL_BACKSTOP_FACTOR, run_calls
from grader.execution.jobs import ForkJob, ForkServer, positive_seconds, sandboxed
from grader.execution.keys import FORK_SERVER, JOB_LAUNCHERS
from grader.fileio import unreachable_folder
from grader.markers import hookimpl
from grader.models import Call, RunOutcome, Submission
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command in ("doctor", "merge"):  # merge runs no code: the shards ran it
        return
    group = parser.add_argument_group("running submissions")
    group.add_argument(
        "--import-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="CPU seconds a submission may take to start and import (default: 10)",
    )
    group.add_argument(
        "--submission-timeout",
        type=positive_seconds,
        default=120.0,
        metavar="SECONDS",
        help="CPU-time budget of one submission, all calls included, with a wall-clock backstop "
        f"{WALL_BACKSTOP_FACTOR:g} times larger for code that waits (default: 120)",
    )


_FORK_SERVER = StashKey[ForkServer]()
_FORK_CLOSED = StashKey[bool]()
"""Set by `grader_unconfigure`: the run is ending, and no grading thread starts a fork server after it."""
_FORK_LOCK = threading.Lock()


def _fork_server(config: Config) -> ForkServer | None:
    """The run's warm fork server for ``grade --insecure`` (started on first use) or ``check``; None where there is none.

    ``check`` takes the one the command line started at once (`grader.stash.FORK_SERVER`), so that
    numpy is imported there while the grader starts; ``grade --insecure`` and a ``check`` run by
    another tool (the pytest plugin, `grader.integrations.student.run_check`) start their own. The fork server's
    jobs are walled in and swept (``grader/child/plain.py``). The
    other commands run few submissions, in fresh interpreters; where ``os.fork`` is missing
    (Windows) each submission gets a fresh ``python worker.py``, as before (`grader.execution.jobs.PlainJob`).
    """
    early = config.stash.get(FORK_SERVER)  # 'grader check': started by the command line before the plugins loaded
    if early is not None:
        return early if early.proc.poll() is None else None  # gone: a fresh interpreter per submission
    if config.command not in ("grade", "check") or not ForkServer.available():
        return None  # 'check' from a tool (the pytest plugin) starts one here: its jobs get the same walls
    with _FORK_LOCK:
        if config.stash.get(_FORK_CLOSED):  # a grading thread of a run stopped (Ctrl-C) meanwhile
            raise JobStarterLost("the fork server (the process that starts every job)")
        server = config.stash.get(_FORK_SERVER)
        if server is None:
            try:
                server = ForkServer()
            except OSError:
                return None
            config.stash[_FORK_SERVER] = server
        return server


@hookimpl
def grader_grading_ready(config: Config) -> None:
    """``check`` started as root: refuse, before any job runs, a TMPDIR the jobs' uid cannot enter."""
    if config.command == "check" and not sandboxed(config) and ForkServer.available():
        _check_reachable_as_nobody()


def _check_reachable_as_nobody() -> None:
    """Refuse, in one line, a ``check`` run as root whose temporary folder the ``nobody`` uid cannot enter.

    A job of root runs as ``nobody`` (``grader/child/plain.py``) in a folder made in TMPDIR: behind
    a private folder (``mktemp -d`` makes them mode 0700) it could not read the student's own file,
    and every check failed as if the student's code had done something forbidden.

    Raises
    ------
    grader.errors.ConfigError
        If a folder on the way to TMPDIR lets no other uid through.
    """
    if os.geteuid() != 0:
        return
    folder = tempfile.gettempdir()
    blocked = unreachable_folder(folder)
    if blocked is not None:
        where, mode = blocked
        raise ConfigError(
            f"grader check runs the code as the 'nobody' user when started as root, and {where} (mode "
            f"{mode:04o}) lets no other user into the temporary folder {folder}: set TMPDIR to a folder "
            "such as /tmp, or run grader check as yourself, not root"
        )


@hookimpl
def grader_unconfigure(config: Config) -> None:
    """Stop the fork server, if one was started, and let no grading thread start one after.

    A start under way in a grading thread (``grade --insecure`` stopped by a Ctrl-C as its first
    submissions begin) is waited for and stopped too: left to the thread, it ran a submission that
    hangs until that call's timeout, and the command could not end before.
    """
    with _FORK_LOCK:
        config.stash[_FORK_CLOSED] = True
    for key in (_FORK_SERVER, FORK_SERVER):
        server = config.stash.get(key)
        if server is not None:
            server.close()


@hookimpl(trylast=True)
def grader_run_calls(submission: Submission, calls: Sequence[Call], config: Config) -> RunOutcome:
    """Run the calls with `grader.execution.calls.run_calls`, in the launcher the configuration asks for.

    An outcome that already exists (`grader.hookspecs.grader_known_outcome`: a merge's shard records, a
    Dask cluster's answers) is taken instead, and nothing runs here. Those are students' outcomes, by
    id: a reference run (a catalogue entry, whose name a student may have) is never given one.
    """
    known = (
        None if submission.reference else config.hooks.known_outcome(submission=submission, calls=calls, config=config)
    )
    if known is not None:
        return known
    assert submission.file is not None
    import_timeout = float(config.option("import_timeout", 10.0))
    submission_timeout = float(config.option("submission_timeout", 120.0))
    if not sandboxed(config):
        server = _fork_server(config)
        if server is not None:  # grade --insecure: a warm fork server, not an interpreter per submission
            walls = config.command == "check"  # a student's code on a CI runner; --insecure is trusted code
            launch = functools.partial(ForkJob, server, filename=config.pack.submission, walls=walls)
            outcome = run_calls(submission.file, calls, import_timeout, submission_timeout, launch=launch)
            if server.proc.poll() is not None:  # its jobs ended with it: not the student's doing
                raise JobStarterLost("the fork server (the process that starts every job)")
            return outcome
        return run_calls(submission.file, calls, import_timeout, submission_timeout, filename=config.pack.submission)
    pool = config.stash.get(JOB_LAUNCHERS)
    if pool is None:
        raise ConfigError(
            "the sandbox is not running, so no submission is run; grade with --insecure only for trusted code"
        )
    with pool.slot() as lent:
        return run_calls(submission.file, calls, import_timeout, submission_timeout, launch=lent, scratch=False)
