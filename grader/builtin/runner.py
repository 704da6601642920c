"""Built-in plugin: the runner, the one answer to ``grader_run_calls``, choosing its launcher.

Which launcher runs a submission's calls is read from the configuration, never from the order in
which plugins were registered (`grader.jobs.sandboxed`):

* ``grader grade`` runs them in the sandbox: a job of the zygote that the sandbox plugin started
  (``grader.builtin.sandbox``), lent through `grader.stash.JOB_LAUNCHERS`. Without it the
  submission is an internal error, never run unsandboxed.
* ``--insecure``, and the commands that run trusted code only (``check`` on a student's own file,
  ``validate``, ``audit``, ``publish``), run them in plain child processes (`grader.jobs.PlainJob`).

Either way `grader.jobs.run_calls` makes the calls, one at a time, with the same timeouts. The
runner is essential: ``-p no:runner`` is refused (`grader.plugins.ESSENTIAL`). A third-party
runner still overrides it (this implementation is ``trylast``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any

from grader.errors import ConfigError
from grader.jobs import ForkJob, ForkServer, positive_seconds, run_calls, sandboxed
from grader.models import Call, RunOutcome, Submission
from grader.plugins import hookimpl
from grader.stash import JOB_LAUNCHERS, StashKey


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
        help="seconds a submission may take to start and import (default: 10)",
    )
    group.add_argument(
        "--submission-timeout",
        type=positive_seconds,
        default=120.0,
        metavar="SECONDS",
        help="wall-clock budget of one submission, all calls included (default: 120)",
    )


_FORK_SERVER = StashKey[ForkServer]()
_FORK_LOCK = threading.Lock()


def _fork_server(config: Any) -> ForkServer | None:
    """The run's warm fork server for ``grade --insecure``, started on first use; None where there is none.

    Only ``grade`` uses it (the other commands run few submissions); where ``os.fork`` is missing
    (Windows) each submission gets a fresh ``python worker.py``, as before (`grader.jobs.PlainJob`).
    """
    if config.command != "grade" or not ForkServer.available():
        return None
    with _FORK_LOCK:
        server = config.stash.get(_FORK_SERVER)
        if server is None:
            try:
                server = ForkServer()
            except OSError:
                return None
            config.stash[_FORK_SERVER] = server
        return server


@hookimpl
def grader_unconfigure(config: Any) -> None:
    """Stop the fork server, if one was started."""
    server = config.stash.get(_FORK_SERVER)
    if server is not None:
        server.close()


@hookimpl(trylast=True)
def grader_run_calls(submission: Submission, calls: Sequence[Call], config: Any) -> RunOutcome:
    """Run the calls with `grader.jobs.run_calls`, in the launcher the configuration asks for."""
    assert submission.file is not None
    import_timeout = float(config.option("import_timeout", 10.0))
    submission_timeout = float(config.option("submission_timeout", 120.0))
    if not sandboxed(config):
        server = _fork_server(config)
        if server is not None:  # grade --insecure: a warm fork server, not an interpreter per submission
            launch = functools.partial(ForkJob, server, filename=config.pack.submission)
            return run_calls(submission.file, calls, import_timeout, submission_timeout, launch=launch)
        return run_calls(submission.file, calls, import_timeout, submission_timeout, filename=config.pack.submission)
    pool = config.stash.get(JOB_LAUNCHERS)
    if pool is None:
        raise ConfigError(
            "the sandbox is not running, so no submission is run; grade with --insecure only for trusted code"
        )
    with pool.slot() as launch:
        return run_calls(submission.file, calls, import_timeout, submission_timeout, launch=launch, scratch=False)
