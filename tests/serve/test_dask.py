"""``grader serve --dask``: the workers send each submission to a Dask cluster (a real ``LocalCluster`` of worker
processes here) and store what comes back, equal to a local worker's result; a lost cluster leaves the submission
queued and it is graded once when a cluster is back; a cluster that is down stops the start in one line."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from grader.cli import main
from grader.fileio import remove_stale_scratch
from grader.markers import hookimpl
from grader.serve.app import create_app
from grader.serve.db import Submission
from grader.serve.state import open_state
from grader.serve.testing import free_port
from grader.serve.worker import Cluster, Grading, work

from .conftest import ROOT, SAMPLES, Served, make_settings
from .test_cli import course_copy
from .test_student import text_of

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow


def local_cluster() -> Any:
    """A Dask cluster of one worker process (the grader's sandboxed runner inside it)."""
    return distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster() as running:
        yield running


@pytest.fixture(scope="module")
def on_cluster(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grading]:
    """The server's grading run with ``--dask``: its calls run on ``cluster``."""
    state = open_state(ROOT, "sqlite://", tmp_path_factory.mktemp("dask"), migrate=False)
    run = Grading(state, Cluster(cluster.scheduler_address))
    yield run
    run.close()


def chunks_run(cluster: Any) -> int:
    """How many grading tasks the cluster's scheduler has seen."""
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        counts = client.run_on_scheduler(
            lambda dask_scheduler: {
                name: dict(prefix.state_counts) for name, prefix in dask_scheduler.task_prefixes.items()
            }
        )
        return sum(c.get("memory", 0) for name, c in counts.items() if name.startswith("grader-chunk"))


@pytest.fixture
def make_served(tmp_path: Path, grading: Grading) -> Iterator[Callable[[str], Served]]:
    """Servers on fresh SQLite databases (the cluster's path does not depend on the database)."""
    made: list[Served] = []

    def make(name: str) -> Served:
        settings = make_settings(tmp_path / name)
        state = open_state(ROOT, f"sqlite:///{tmp_path / name}.db", settings.state, settings=settings)
        made.append(Served(state, create_app(ROOT, state=state), grading))
        return made[-1]

    yield make
    for serve in made:
        for client in serve.clients:
            client.close()
        serve.state.engine.dispose()


def stored(served: Served) -> list[tuple[Any, ...]]:
    with served.state.db() as db:
        return [
            (s.state, s.score, s.max_score, s.visible_score, s.visible_max, s.full, s.visible)
            for s in db.execute(select(Submission).order_by(Submission.id)).scalars()
        ]


def test_an_upload_graded_on_the_cluster_equals_the_local_workers_result(
    make_served: Callable[[str], Served], on_cluster: Grading, cluster: Any
) -> None:
    served, remote = make_served("local"), make_served("dask")
    before = chunks_run(cluster)
    for serve in (served, remote):
        client = serve.client("alice")
        for sample in ("no_sqrt_dk", "correct_numpy"):
            assert serve.submit(client, sample).status_code == 200
    assert served.drain() == 2

    ran_here: list[str] = []

    class Here:  # the server's worker runs no student code: its own runner is never asked
        @hookimpl(tryfirst=True)
        def grader_run_calls(self, submission: Any, calls: Any, config: Any) -> None:
            ran_here.append(submission.id)

    on_cluster.config.pluginmanager.register(Here(), name="test-ran-here")
    try:
        assert work(remote.state, once=True, grading=on_cluster) == 2
    finally:
        on_cluster.config.pluginmanager.unregister(name="test-ran-here")
    assert ran_here == []
    assert chunks_run(cluster) == before + 2  # the scheduler ran one grading task per upload
    local, remote_rows = stored(served), stored(remote)
    assert [row[:5] for row in remote_rows] == [row[:5] for row in local]
    (_, buggy, top, *_), (_, correct, _, shown, shown_top, *_) = remote_rows
    assert (buggy, correct, top) == (66, 86, 86) and shown == shown_top
    assert [row[5] for row in remote_rows] == [row[5] for row in local]  # the stored full results, equal
    assert [row[6] for row in remote_rows] == [row[6] for row in local]
    page = text_of(remote.clients[0].get("/submissions/1").text)
    assert f"Visible checks: {local[0][3]:g} / {local[0][4]:g}" in page


def test_a_lost_cluster_leaves_the_upload_queued_and_it_is_graded_once_later(
    make_served: Callable[[str], Served], cluster: Any
) -> None:
    served = make_served("lost")
    lost = local_cluster()
    gone = Grading(served.state, Cluster(lost.scheduler_address))
    lost.close()
    client = served.client("bob")
    assert served.submit(client, "no_sqrt_dk").status_code == 200
    assert work(served.state, once=True, grading=gone) == 0
    [(state, score, *_)] = stored(served)
    assert (state, score) == ("queued", None)
    page = client.get("/submissions/1").text
    assert "Submission 1 is queued" in page and 'http-equiv="refresh"' in page  # the student's page says it waits
    # the cluster is back (here: another one): the same submission is graded, once
    assert work(served.state, once=True, cluster=Cluster(cluster.scheduler_address)) == 1
    [(state, score, *_)] = stored(served)
    assert state == "done" and score is not None and score < 86


def test_a_dask_worker_lost_mid_grading_costs_a_rerun_not_the_submission(make_served: Callable[[str], Served]) -> None:
    served = make_served("killed")
    slow = b"import time\ntime.sleep(4)\n" + (SAMPLES / "correct_numpy" / "attention.py").read_bytes()
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as two,
        distributed.Client(two.scheduler_address, set_as_default=False) as watcher,
    ):
        grading = Grading(served.state, Cluster(two.scheduler_address))
        try:
            assert served.submit(served.client("carol"), slow).status_code == 200
            graded: list[int] = []
            thread = threading.Thread(target=lambda: graded.append(work(served.state, once=True, grading=grading)))
            thread.start()
            deadline = time.monotonic() + 60
            while not (busy := [w for w, keys in watcher.processing().items() if keys]):
                assert time.monotonic() < deadline and thread.is_alive(), "the cluster never took the submission"
                time.sleep(0.05)
            time.sleep(0.3)  # inside the submission's import
            os.kill(watcher.run(os.getpid)[busy[0]], signal.SIGKILL)  # the worker grading it dies mid-submission
            thread.join(120)
            assert not thread.is_alive() and graded == [1]
        finally:
            grading.close()
        assert busy[0] not in watcher.scheduler_info()["workers"]  # it really was lost
    [(state, score, top, *_)] = stored(served)
    assert (state, score, top) == ("done", 86, 86)  # graded on the other worker, stored once
    # The worker killed with SIGKILL could not remove its sandbox's folder; a later run's sweep would.
    # Swept here, so that the test leaves nothing behind.
    assert remove_stale_scratch() >= 1


def test_a_cluster_that_is_down_stops_the_start_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    course = course_copy(tmp_path)
    address = f"tcp://127.0.0.1:{free_port()}"
    assert main(["serve", "--course", str(course), "--port", str(free_port()), "--dask", address]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"grader: error: serve: --dask {address}: cannot reach the Dask scheduler (")
    assert err[0].endswith("; start the scheduler or drop --dask")
    assert not (course / ".grader-serve").exists()
