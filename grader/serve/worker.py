"""A grading worker process: takes queued submissions from the database and grades them.

It builds the ``grader grade`` run once (`grader.config.parser.for_command`: the same plugins,
specs, reference and sandboxed runner, with ``serve.yaml``'s ``grading.submission_seconds`` as
``--submission-timeout``) and grades one stored upload at a time with
`grader.grading.session.grade_submission`, as a batch does. The student's code runs in the
runner's job processes, never here and never in the web process. When the specs or the reference
change (a fix before a regrade), the run is built again. Between submissions it sends the scores
waiting for the LMS (`grader.serve.pushes`).

With ``grader serve --dask ADDRESS`` (`Cluster`) a worker runs no student code at all: it sends each
submission to the Dask cluster as ``grade --dask`` does (`grader.builtin.dask_cluster`, whose
``distributed.WorkerPlugin`` keeps a sandboxed runner warm on every Dask worker), judges the calls'
results that come back, and stores the result. The database stays the queue: a submission the
cluster could not finish (a worker lost, the scheduler gone) is queued again, never graded here,
and the worker connects again before it takes the next one.

Run as ``python -m grader.serve.worker --course DIR [--db URL] [--dask ADDRESS]`` (``grader serve``
starts them, with the URL in ``GRADER_SERVE_DB``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import hashlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import select, update

from grader.errors import JobStarterLost
from grader.serve.db import Push, Submission, User, now
from grader.serve.grades import visible_part
from grader.serve.state import ServerState, open_state
from grader.serve.store import upload_path

__all__ = ["DB_ENV", "Cluster", "ClusterUnavailable", "Grading", "claim", "grade_one", "main", "work"]

log = logging.getLogger("grader.serve")

DB_ENV = "GRADER_SERVE_DB"
"""The environment variable that gives a worker the server's database URL (never its command line)."""

POLL_SECONDS = 0.1
"""How often an idle worker looks at the queue."""

STALE_AFTER = dt.timedelta(minutes=3)
"""A submission whose worker has not said it is alive for this long lost its worker: it is queued again."""

HEARTBEAT_SECONDS = 30.0
"""How often a worker grading a submission renews its ``started`` time (its sign of life).

Grading one hostile submission can take longer than `STALE_AFTER` (each call's timeout, then the
submission's wall-clock backstop, stretched on a loaded machine): without this, a second worker
would take it again while the first still grades it, and two such submissions would hold every
worker."""


CLUSTER_RETRY_SECONDS = 5.0
"""How long a worker whose Dask cluster is unreachable waits before it connects again (the queue waits too)."""

CLUSTER_ATTEMPTS = 3
"""Times one worker sends a submission to the cluster (or to a sandbox whose zygote ends under it) before it
stores it as not graded (a submission that kills the cluster's workers each time must not go round the queue
for ever)."""


class ClusterUnavailable(Exception):
    """The Dask cluster did not grade this submission (a worker lost, the scheduler gone): it is queued again."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The Dask scheduler a server grades on (``grader serve --dask``), with its ``--dask-tls-*`` files.

    Attributes
    ----------
    address : str
        The scheduler's address (``tcp://HOST:8786``, ``tls://...``).
    tls : tuple of (str, str)
        ``("ca" | "cert" | "key", PEM file)`` pairs for a ``tls://`` scheduler.
    """

    address: str
    tls: tuple[tuple[str, str], ...] = ()

    def argv(self) -> list[str]:
        """The options that give this cluster to ``grade`` (and to a worker process)."""
        argv = ["--dask", self.address]
        for name, path in self.tls:
            argv += [f"--dask-tls-{name}", path]
        return argv


class Grading:
    """The ``grade`` run a worker reuses for every submission (collected checks, the runner's jobs).

    With a `Cluster`, the run is ``grade --dask``'s: each submission's calls run on the cluster, and a
    submission it does not finish raises `ClusterUnavailable` (never run here instead).
    """

    def __init__(self, state: ServerState, cluster: Cluster | None = None) -> None:
        from grader.collected import COLLECTED
        from grader.config.parser import for_command
        from grader.grading import session

        pack = state.pack
        self.fingerprint = specs_fingerprint(state)
        # the server's own budget per submission (serve.yaml grading.submission_seconds), shorter than grade's:
        # a submission that hangs every call frees its worker after the budget's wall-clock backstop
        budget = repr(float(state.settings.submission_seconds))
        argv = [str(pack.starter), "--jobs", "1", "--submission-timeout", budget]
        self.cluster = cluster
        if cluster is not None:  # grade --dask's client: connects, registers its WorkerPlugin (or one line why not)
            argv += cluster.argv()
        self.wait_seconds = float(state.settings.submission_seconds) * 4 + 60  # the calls' wall backstop, and slack
        self.config = for_command("grade", argv, pack=str(pack.root))
        self.config.hooks.configure(self.config)
        self.collected = session.collect(self.config)
        self.config.stash[COLLECTED] = self.collected
        self.config.hooks.grading_ready(config=self.config)
        self._warm_up(state)

    def _warm_up(self, state: ServerState) -> None:
        """Grade one of the course's known mistakes once, so what a failing submission first needs (the
        mistakes' results, for the diagnosis) is ready before a student waits for it."""
        pack = state.pack
        mutants = sorted(pack.mutants.glob(f"*/{pack.submission}")) if pack.mutants.is_dir() else []
        if not mutants:
            return
        scratch = Path(tempfile.mkdtemp(prefix="grader-serve-"))
        try:
            shutil.copyfile(mutants[0], scratch / pack.submission)
            self.grade(scratch / pack.submission)
        except ClusterUnavailable:
            log.warning("grader serve: the Dask cluster did not grade the warm-up submission")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def grade(self, path: Path) -> dict[str, Any]:
        """Grade one file (named as the course names it) and return its result as a dict."""
        from grader.grading import session
        from grader.models import result_to_dict

        submission = session.locate_all([str(path)], self.config)[0]
        outcome = self._on_cluster(submission) if self.cluster is not None and submission.file else None
        result = session.grade_submission(submission, self.collected, self.config, outcome=outcome)
        return result_to_dict(result)

    def _on_cluster(self, submission: Any) -> Any:
        """The submission's calls run on the cluster, through ``grade --dask``'s hooks (`grader.builtin.dask_cluster`):
        ``grader_batch_start`` sends it, ``grader_known_outcome`` brings its outcome back.

        Raises
        ------
        ClusterUnavailable
            When the cluster did not answer within `wait_seconds` or could not finish it: the
            submission is never run here instead (the server's worker runs no student code).
        """
        calls, hooks = list(self.collected.calls), self.config.hooks
        answer: list[Any] = []
        failed: list[str] = []

        def wait() -> None:
            try:
                hooks.batch_start(submissions=[submission], calls=calls, config=self.config)
                answer.append(hooks.known_outcome(submission=submission, calls=calls, config=self.config))
            except Exception as exc:  # noqa: BLE001 - the scheduler gone (the client's own timeout): queued again
                failed.append(f"{type(exc).__name__}: {str(exc)[:200]}")

        waiting = threading.Thread(target=wait, name="grader-serve-dask", daemon=True)
        waiting.start()
        waiting.join(self.wait_seconds)
        if waiting.is_alive():  # no worker to run it (all lost): closing the client ends the wait
            self.close()
            raise ClusterUnavailable(f"no answer from the Dask cluster in {self.wait_seconds:g} s")
        if not answer or answer[0] is None:
            raise ClusterUnavailable(failed[0] if failed else "the Dask cluster could not run it")
        return answer[0]

    def close(self) -> None:
        """End the runner's jobs (and the Dask client); closing twice does nothing."""
        if not getattr(self, "_closed", False):
            self._closed = True
            self.config.hooks.unconfigure(self.config)


def specs_fingerprint(state: ServerState) -> str:
    """Names, sizes and times of the specs, the reference and the course plugin: a change means collect again."""
    pack = state.pack
    files = sorted(p for p in pack.specs.rglob("*") if p.is_file())
    files += [p for p in (pack.reference, pack.plugin) if p is not None and p.is_file()]
    h = hashlib.sha256()
    for path in files:
        stat = path.stat()
        h.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return h.hexdigest()


def claim(state: ServerState) -> int | None:
    """Take the oldest queued submission, new ones before regrades (one atomic update: two workers never take
    the same one)."""
    with state.db() as db:
        stale = now() - STALE_AFTER
        db.execute(
            update(Submission)
            .where(Submission.state == "running", Submission.started < stale)
            .values(state="queued", started=None)
        )
        db.execute(update(Push).where(Push.state == "sending", Push.created < stale).values(state="pending"))
        db.commit()
        for sub_id in db.execute(
            select(Submission.id)
            .where(Submission.state == "queued")
            # students' new submissions before a staff regrade's: a regrade of the class never delays feedback
            .order_by(Submission.regrade_id.is_not(None), Submission.id)
            .limit(5)
        ).scalars():
            taken = db.execute(
                update(Submission)
                .where(Submission.id == sub_id, Submission.state == "queued")
                .values(state="running", started=now())
            )
            db.commit()
            if getattr(taken, "rowcount", 0) == 1:
                return int(sub_id)
    return None


def grade_one(state: ServerState, grading: Grading, sub_id: int) -> None:
    """Grade the claimed submission ``sub_id`` and store both parts of its result."""
    from grader.serve.pushes import enqueue_push

    with state.db() as db:  # read, then let go of the database while the submission runs
        sub = db.get(Submission, sub_id)
        if sub is None:
            return
        source, filename = upload_path(state.uploads, sub.sha256, sub.filename), sub.filename
    scratch = Path(tempfile.mkdtemp(prefix="grader-serve-"))
    alive = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(state, sub_id, alive), daemon=True)
    beat.start()
    try:
        target = scratch / filename
        shutil.copyfile(source, target)
        full = grading.grade(target)
    finally:
        alive.set()
        beat.join()
        shutil.rmtree(scratch, ignore_errors=True)
    full["id"] = full["slug"] = f"submission-{sub_id}"
    full["path"] = filename
    visible = visible_part(full)
    with state.db() as db:
        sub = db.get(Submission, sub_id)
        if sub is None:
            return
        sub.full, sub.visible = full, visible
        sub.score, sub.max_score = full["score"], full["max_score"]
        sub.visible_score, sub.visible_max = visible["score"], visible["max_score"]
        sub.spec_hash = grading.collected.spec_hash
        sub.state = "done" if full["status"] == "graded" else "error"
        sub.graded = now()
        user = db.get(User, sub.user_id)
        if user is not None and state.flag(db, "released"):
            enqueue_push(db, user, "regrade" if sub.regrade_id else "graded")
        db.commit()


def _heartbeat(state: ServerState, sub_id: int, done: threading.Event) -> None:
    """Renew ``sub_id``'s ``started`` every `HEARTBEAT_SECONDS` until ``done``: its worker still grades it."""
    while not done.wait(HEARTBEAT_SECONDS):
        try:
            with state.db() as db:
                db.execute(
                    update(Submission)
                    .where(Submission.id == sub_id, Submission.state == "running")
                    .values(started=now())
                )
                db.commit()
        except Exception:  # noqa: BLE001 - a missed beat only risks a second grading, never the first
            log.exception("grader serve: could not renew submission %s", sub_id)


def _failed(state: ServerState, sub_id: int) -> None:
    """Mark a submission the grader failed on (its page says so; the log has the traceback)."""
    with state.db() as db:
        db.execute(update(Submission).where(Submission.id == sub_id).values(state="error", graded=now()))
        db.commit()


def _requeue(state: ServerState, sub_id: int) -> None:
    """Put a claimed submission back in the queue (the cluster did not grade it; its page says it waits)."""
    with state.db() as db:
        db.execute(
            update(Submission)
            .where(Submission.id == sub_id, Submission.state == "running")
            .values(state="queued", started=None)
        )
        db.commit()


def _connect(state: ServerState, cluster: Cluster | None) -> Grading | None:
    """A new run on ``cluster``, or None (logged) when it cannot be reached now: the queue waits for it."""
    from grader.errors import GraderError

    if cluster is None:
        return Grading(state)
    try:
        return Grading(state, cluster)
    except (GraderError, OSError, TimeoutError) as exc:
        log.warning("grader serve: the Dask cluster is unreachable (%s); submissions wait in the queue", exc)
        return None


def work(
    state: ServerState,
    stop: threading.Event | None = None,
    once: bool = False,
    grading: Grading | None = None,
    cluster: Cluster | None = None,
) -> int:
    """Grade queued submissions (and send pending scores) until ``stop`` is set; return how many were graded.

    Parameters
    ----------
    state : ServerState
    stop : threading.Event, optional
    once : bool
        Return when the queue is empty, or the cluster cannot be reached (tests).
    grading : Grading, optional
        A run to reuse (left open unless its cluster fails); by default one is built and closed here.
    cluster : Cluster, optional
        Grade on this Dask cluster (default: ``grading``'s, else here).
    """
    from grader.serve.pushes import send_pending

    own = grading is None
    cluster = cluster if cluster is not None else (grading.cluster if grading is not None else None)
    grading = grading or _connect(state, cluster)
    graded = 0
    attempts: dict[int, int] = {}
    try:
        while stop is None or not stop.is_set():
            if grading is None:  # the cluster was lost: nothing is taken from the queue until it is back
                if once:
                    break
                if stop is not None and stop.wait(CLUSTER_RETRY_SECONDS):
                    break
                if stop is None:
                    time.sleep(CLUSTER_RETRY_SECONDS)
                grading, own = _connect(state, cluster), True
                continue
            sub_id = claim(state)
            if sub_id is not None:
                if specs_fingerprint(state) != grading.fingerprint:
                    grading.close()
                    grading, own = _connect(state, cluster), True
                    if grading is None:  # the cluster went away meanwhile: the submission waits for it
                        _requeue(state, sub_id)
                        continue
                try:
                    grade_one(state, grading, sub_id)
                except (ClusterUnavailable, JobStarterLost) as exc:
                    # The cluster is gone, or the sandbox's zygote ended (the OOM killer?): not the student's doing.
                    # The submission goes back to the queue (stored as not graded after CLUSTER_ATTEMPTS tries);
                    # a new local sandbox starts at once, a cluster is connected again when it can be reached.
                    attempts[sub_id] = attempts.get(sub_id, 0) + 1
                    lost = isinstance(exc, JobStarterLost)
                    log.warning("grader serve: submission %s not graded (%s)", sub_id, exc)
                    if attempts[sub_id] >= CLUSTER_ATTEMPTS:
                        _failed(state, sub_id)
                    else:
                        _requeue(state, sub_id)
                    grading.close()
                    grading, own = (_connect(state, cluster) if lost else None), True
                    continue
                except Exception:  # noqa: BLE001 - the grader's own fault: this submission fails, the worker goes on
                    log.exception("grader serve: internal error grading submission %s", sub_id)
                    _failed(state, sub_id)
                graded += 1
                continue
            if send_pending(state):
                continue
            if once:
                break
            time.sleep(POLL_SECONDS)
    finally:
        if own and grading is not None:
            grading.close()
    return graded


_PR_SET_PDEATHSIG = 1
"""Linux's ``prctl`` option: the signal this process gets when its parent ends."""
SERVER_PID_ENV = "GRADER_SERVE_PID"
"""The environment variable through which ``grader serve`` tells its grading workers its process id."""


def _stop_with_the_server(stop: threading.Event) -> None:
    """End this worker (as the server's SIGTERM does) once the server that started it is gone.

    Stopped gracefully, the server stops its workers itself. Killed (SIGKILL, the out-of-memory
    killer, a hang-up it does not survive), it left them grading from the database on their own,
    orphans of no server, holding its terminal. The kernel sends this process SIGTERM when its parent
    ends (``PR_SET_PDEATHSIG``, Linux); a server already gone before that was set is seen here too.
    """
    server = os.environ.get(SERVER_PID_ENV, "")
    if not server.isdigit():
        return  # started by hand, not by the server: nothing to follow
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):  # the process's own libc (no lookup, no subprocess)
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != int(server):
        stop.set()


def main(argv: list[str] | None = None) -> int:
    """``python -m grader.serve.worker --course DIR [--db URL] [--state DIR] [--settings FILE] [--dask ADDRESS]``."""
    parser = argparse.ArgumentParser(prog="grader-serve-worker")
    parser.add_argument("--course", required=True)
    parser.add_argument("--db", default=os.environ.get(DB_ENV) or None)
    parser.add_argument("--state", default=None)
    parser.add_argument("--settings", default=None)
    parser.add_argument("--dask", default=None, metavar="ADDRESS")
    for name in ("ca", "cert", "key"):
        parser.add_argument(f"--dask-tls-{name}", default=None)
    options = parser.parse_args(argv)
    cluster = None
    if options.dask:
        tls = ((n, getattr(options, f"dask_tls_{n}")) for n in ("ca", "cert", "key"))
        cluster = Cluster(options.dask, tuple((n, f) for n, f in tls if f))
    state = open_state(
        Path(options.course),
        options.db,
        Path(options.state) if options.state else None,
        migrate=False,
        settings=Path(options.settings) if options.settings else None,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # the server's stop: finish this submission, end the jobs
    _stop_with_the_server(stop)
    try:
        work(state, stop, cluster=cluster)
    except KeyboardInterrupt:
        stop.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
