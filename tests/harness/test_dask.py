"""``grade --dask ADDRESS``: a real dask.distributed cluster of worker processes runs the submissions, sandboxed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT
from scale_support import (
    assert_same_exports,
    grader_cmd,
    grader_env,
    ids_of,
    make_class,
    run,
)

from grader.fileio import remove_stale_scratch

distributed = pytest.importorskip("distributed", reason="the 'dask' extra is not installed")


def _sandboxed() -> list[bool]:
    """In a worker: whether each grader runner this process keeps has a running sandbox zygote."""
    from grader.builtin import dask_cluster
    from grader.builtin.sandbox import _ZYGOTE

    return [config.stash.get(_ZYGOTE) is not None for config in dask_cluster._RUNNERS.values()]


def _zygote_pids() -> list[int]:
    from grader.builtin import dask_cluster
    from grader.builtin.sandbox import _ZYGOTE

    return [config.stash[_ZYGOTE].proc.pid for config in dask_cluster._RUNNERS.values()]


@pytest.fixture(scope="module")
def cluster():
    with (
        distributed.LocalCluster(
            n_workers=3,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as local,
        distributed.Client(local) as client,
    ):
        yield local, client


def _slow_class(folder: Path) -> Path:
    """The generated class, each student's import taking a while (so a worker can be killed inside a chunk)."""
    make_class(folder)
    for path in folder.glob("*/attention.py"):
        path.write_text("import time\ntime.sleep(0.5)\n" + path.read_text())
    return folder


@pytest.mark.slow
def test_a_dask_cluster_grades_byte_identically_to_a_local_run(cluster, tmp_path: Path) -> None:
    local, client = cluster
    klass = make_class(tmp_path / "class")
    run("grade", klass, "--out", tmp_path / "local", "-q", "--staff")
    done = run(
        "grade",
        klass,
        "--out",
        tmp_path / "dask",
        "-q",
        "--staff",
        "--dask",
        local.scheduler_address,
        "--dask-chunk",
        "3",
    )
    assert "warning: the Dask cluster" not in done.stderr
    assert_same_exports(tmp_path / "local", tmp_path / "dask")
    # the work ran in the workers, each with its own sandbox zygote kept warm across its chunks
    zygotes = client.run(_sandboxed)
    assert sum(len(v) for v in zygotes.values()) >= 2 and all(all(v) for v in zygotes.values())
    before = client.run(_zygote_pids)
    run(
        "grade",
        klass,
        "--out",
        tmp_path / "again",
        "-q",
        "--dask",
        local.scheduler_address,
        "--regrade",
    )
    assert client.run(_zygote_pids) == before  # the same zygotes graded the second batch
    assert (tmp_path / "again" / "results.json").read_bytes() == (tmp_path / "local" / "results.json").read_bytes()


@pytest.mark.slow
def test_killing_a_worker_mid_batch_loses_and_duplicates_nothing(cluster, tmp_path: Path) -> None:
    local, client = cluster
    klass = _slow_class(tmp_path / "class")
    run("grade", klass, "--out", tmp_path / "local", "-q")
    scratch = Path(tempfile.gettempdir())
    before = {p.name for p in scratch.glob("grader-dask-*")}
    proc = subprocess.Popen(
        grader_cmd(
            "grade",
            klass,
            "--out",
            tmp_path / "dask",
            "-q",
            "--dask",
            local.scheduler_address,
            "--dask-chunk",
            "2",
        ),
        cwd=ROOT,
        env=grader_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = client.run(os.getpid)
    victim = None
    deadline = time.monotonic() + 120
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        busy = [
            address
            for address, tasks in client.processing().items()
            if any(str(t).startswith("grader-chunk-") for t in tasks)
        ]
        if busy:
            victim = busy[0]
        else:
            time.sleep(0.05)
    assert victim is not None, "no worker ever ran a chunk"
    time.sleep(0.3)  # inside its chunk
    os.kill(pids[victim], signal.SIGKILL)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert "graded here" not in err  # the scheduler ran the lost chunk again on another worker
    assert ids_of(tmp_path / "dask") == ids_of(tmp_path / "local")
    assert len(ids_of(tmp_path / "dask")) == len(set(ids_of(tmp_path / "dask"))) == 16
    assert (tmp_path / "dask" / "results.json").read_bytes() == (tmp_path / "local" / "results.json").read_bytes()
    counts = []
    for name in ("local", "dask"):
        book = sqlite3.connect(tmp_path / name / "gradebook.sqlite")
        counts.append(book.execute("SELECT COUNT(*), COUNT(DISTINCT student) FROM results").fetchone())
        book.close()
    assert counts[0] == counts[1] and counts[1][0] == counts[1][1] >= 14
    lines = (tmp_path / "dask" / "gradebook.csv").read_text().splitlines()
    assert len(lines) == 1 + 16 and len(set(lines)) == len(lines)
    # The killed worker's chunk folder is named by its pid, so the next grader to start removes it.
    remove_stale_scratch()
    left = {p.name for p in scratch.glob("grader-dask-*")} - before
    live = {str(pid) for pid in client.run(os.getpid).values()}
    assert {name for name in left if name.split("-")[2] not in live} == set()


def test_an_unreachable_scheduler_is_one_line(tmp_path: Path) -> None:
    klass = make_class(tmp_path / "class", copies=1)
    done = run(
        "grade",
        klass,
        "--out",
        tmp_path / "out",
        "--dask",
        "tcp://127.0.0.1:9",
        "--insecure",
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("grader: error: --dask tcp://127.0.0.1:9: cannot reach")
    assert not (tmp_path / "out").exists()


def test_the_cluster_sends_data_only_and_is_decoded_strictly() -> None:
    """What a chunk brings back is checked key by key, value by value, against each call's budget."""
    from grader.execution.boundary import ResultBudget
    from grader.models import Call, CallResult, RunOutcome
    from grader.shards import OutcomeError, decode_outcome, encode_outcome

    calls = [
        Call("f", ([1.0],), 1.0, ResultBudget(8, 2, 4096)),
        Call("f", ([2.0],), 1.0),
    ]
    outcome = RunOutcome(
        (
            CallResult("returned", [1.0, float("nan")], seconds=0.25),
            CallResult("raised", error_type="ValueError", value_error=True, message="bad"),
        )
    )
    data = json.loads(json.dumps(encode_outcome(outcome), allow_nan=False))
    back = decode_outcome(data, calls)
    assert back.results[0].value[0] == 1.0 and back.results[0].value[1] != back.results[0].value[1]
    assert back.results[1] == outcome.results[1] and back.results[0].seconds == 0.25
    for bad, words in (
        ({**data, "extra": 1}, "not an outcome"),
        ({**data, "results": data["results"][:1]}, "1 results for 2 calls"),
        (
            {
                **data,
                "results": [
                    {**data["results"][0], "value": list(range(100))},
                    data["results"][1],
                ],
            },
            "larger than",
        ),
        (
            {
                **data,
                "results": [
                    {**data["results"][0], "value": "text"},
                    data["results"][1],
                ],
            },
            "holds a string",
        ),
        (
            {
                **data,
                "results": [
                    {**data["results"][0], "status": "passed"},
                    data["results"][1],
                ],
            },
            "not a call's",
        ),
        (
            {
                **data,
                "results": [data["results"][0], {**data["results"][1], "value": [1]}],
            },
            "did not return",
        ),
        ({**data, "sha256": "x"}, "not a SHA-256"),
    ):
        with pytest.raises(OutcomeError, match=words):
            decode_outcome(bad, calls)


def test_a_worker_killed_mid_chunk_leaves_a_folder_the_next_grader_removes(tmp_path: Path) -> None:
    """A chunk's scratch folder is named by its worker's pid: before, a worker killed mid-chunk left a
    ``grader-dask-*`` folder in the temporary folder for good (one per test-suite run)."""
    script = (
        "import json, os, signal, types\n"
        "from grader.builtin import dask_cluster\n"
        "def killed(**kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "hook = types.SimpleNamespace(grader_run_calls=killed)\n"
        "dask_cluster._runner = lambda settings: types.SimpleNamespace(hook=hook)\n"
        "item = {'id': 's1', 'name': 'attention.py', 'sha256': '0' * 64, 'data': ''}\n"
        "dask_cluster.run_chunk(json.dumps([item]), dask_cluster.encode_calls([]), {})\n"
    )
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(scratch)}, cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    [left] = scratch.iterdir()
    assert left.name.startswith("grader-dask-") and (left / "0" / "attention.py").is_file()
    assert remove_stale_scratch(str(scratch)) == 1
    assert list(scratch.iterdir()) == []
