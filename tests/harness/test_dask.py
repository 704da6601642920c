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


def _runners(worker) -> list:
    """In a worker: the grader runners its grader plugin keeps (`GraderWorker.runners`)."""
    from grader.shards.cluster import PLUGIN_NAME

    return list(worker.plugins[PLUGIN_NAME].runners.values())


def _sandboxed(dask_worker) -> list[bool]:
    """In a worker: whether each grader runner this process keeps has a running sandbox zygote."""
    from grader.builtin.sandbox import _ZYGOTE

    return [config.stash.get(_ZYGOTE) is not None for config in _runners(dask_worker)]


def _zygote_pids(dask_worker) -> list[int]:
    from grader.builtin.sandbox import _ZYGOTE

    return [config.stash[_ZYGOTE].proc.pid for config in _runners(dask_worker)]


def _live_zygote_pids(dask_worker) -> list[int]:
    """In a worker: the pids of its runners' zygotes that still run."""
    from grader.builtin.sandbox import _ZYGOTE

    zygotes = [config.stash[_ZYGOTE].proc for config in _runners(dask_worker)]
    return [proc.pid for proc in zygotes if proc.poll() is None]


def _profiling(dask_worker) -> list[str]:
    """In a worker: its periodic callbacks that sample stacks or system counters (the grader plugin stops them),
    and its event loop's tick and memory monitor if they still run more often than once a second."""
    callbacks = dask_worker.periodic_callbacks
    busy = [name for name in callbacks if name.startswith("profile") or name == "monitor"]
    slow = [name for name in ("tick", "memory_monitor") if name in callbacks and callbacks[name].callback_time < 1000]
    return busy + slow


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


@pytest.mark.slow
def test_workers_with_another_course_secret_do_not_judge_and_the_client_does(cluster, tmp_path: Path) -> None:
    """A worker whose course would judge differently (here: another course secret, so other hidden inputs)
    is told apart by its result settings; its chunks are judged by the client, and nothing differs."""
    local, _ = cluster
    klass = make_class(tmp_path / "class", copies=1)
    env = grader_env(GRADER_COURSE_SECRET="a secret the workers do not hold")
    run("grade", klass, "--out", tmp_path / "local", "-q", env=env)
    done = run(
        "grade", klass, "--out", tmp_path / "dask", "-q", "--dask", local.scheduler_address, "--dask-judge", env=env
    )
    assert "a Dask worker did not judge (the worker's settings differ from this run's: course_secret)" in done.stderr
    assert_same_exports(tmp_path / "local", tmp_path / "dask")


@pytest.mark.slow
def test_shards_graded_on_the_cluster_merge_into_the_local_run(cluster, tmp_path: Path) -> None:
    """Each shard's record keeps the frames its Dask workers' jobs wrote (one shard judged there too): the merge
    of the two is the local run, every file of it."""
    local, _ = cluster
    klass = make_class(tmp_path / "class", copies=1)
    run("grade", klass, "--out", tmp_path / "local", "-q")
    dask = ("--dask", local.scheduler_address)
    run("grade", klass, "--out", tmp_path / "s1", "--shard", "1/2", "-q", *dask, "--dask-chunk", "2")
    run("grade", klass, "--out", tmp_path / "s2", "--shard", "2/2", "-q", *dask, "--dask-judge")
    run("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "merged", "-q")
    assert_same_exports(tmp_path / "local", tmp_path / "merged")


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
    profiling = client.run(_profiling)
    assert len(profiling) == 3 and all(
        v == [] for v in profiling.values()
    )  # every worker's profiler and system monitor are off
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
        "--dask-chunk",
        "1",
        "--regrade",
    )
    assert client.run(_zygote_pids) == before  # the same zygotes graded the second batch
    assert (tmp_path / "again" / "results.json").read_bytes() == (tmp_path / "local" / "results.json").read_bytes()
    # --dask-judge: the workers judge and score too, and send back result records (with --staff the
    # values as well, for the staff pages); every export is still the local run's
    run(
        "grade", klass, "--out", tmp_path / "judged", "-q", "--staff", "--dask", local.scheduler_address, "--dask-judge"
    )
    assert_same_exports(tmp_path / "local", tmp_path / "judged")
    done = run("grade", klass, "--out", tmp_path / "records", "-q", "--dask", local.scheduler_address, "--dask-judge")
    assert "did not judge" not in done.stderr and "graded here" not in done.stderr
    assert_same_exports(tmp_path / "again", tmp_path / "records")  # without --staff: statuses and seconds came back


@pytest.mark.slow
def test_killing_a_worker_mid_batch_loses_and_duplicates_nothing(cluster, tmp_path: Path) -> None:
    local, client = cluster
    klass = _slow_class(tmp_path / "class")
    run("grade", klass, "--out", tmp_path / "local", "-q")
    from grader.fileio import MEMORY_FOLDER

    scratches = (Path(tempfile.gettempdir()), Path(MEMORY_FOLDER))  # a chunk's folder is in one of them

    def chunk_folders() -> set[str]:
        return {p.name for scratch in scratches for p in scratch.glob("grader-dask-*")}

    before = chunk_folders()
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
    # The killed worker's chunk folder is named by its pid, so the next grader to start removes it
    # (only this cluster's workers are looked at: other Dask workers may be grading on this machine).
    remove_stale_scratch()
    left = chunk_folders() - before
    live = {str(pid) for pid in client.run(os.getpid).values()}
    ours = {str(pid) for pid in pids.values()} | live
    assert {name for name in left if name.split("-")[2] in ours - live} == set()


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
    ``grader-dask-*`` folder in the temporary folder for good (one per test-suite run). It is made in
    memory (`grader.fileio.MEMORY_FOLDER`, here a stand-in folder) when that has room, else in the
    temporary folder."""
    memory = tmp_path / "shm"
    memory.mkdir()
    script = (
        "import json, os, signal, sys, types\n"
        "from grader import fileio\n"
        "fileio.MEMORY_FOLDER = sys.argv[1]\n"
        "from grader.shards import cluster\n"
        "def killed(**kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "hooks = types.SimpleNamespace(run_calls=killed)\n"
        "state = cluster.GraderWorker()\n"
        "state.runner = lambda settings, slots: types.SimpleNamespace(hooks=hooks)\n"
        "item = {'id': 's1', 'name': 'attention.py', 'sha256': '0' * 64, 'data': ''}\n"
        "state.run_chunk(json.dumps([item]), cluster.encode_calls([]), {})\n"
    )
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    for room in (str(memory), str(tmp_path / "no-such-memory-folder")):
        proc = subprocess.run(
            [sys.executable, "-c", script, room], env={**os.environ, "TMPDIR": str(scratch)}, cwd=ROOT
        )
        assert proc.returncode == -signal.SIGKILL
    [left] = memory.iterdir()  # the first run's, in memory
    [fallback] = scratch.iterdir()  # the second's: no memory folder, the temporary folder
    for folder in (left, fallback):
        assert folder.name.startswith("grader-dask-") and (folder / "0" / "attention.py").is_file()
    assert remove_stale_scratch(str(memory)) == 1 and remove_stale_scratch(str(scratch)) == 1
    assert list(memory.iterdir()) == [] and list(scratch.iterdir()) == []
    from grader.fileio import memory_scratch

    assert memory_scratch(1 << 60) is None  # no room four times over: the temporary folder


def _frames() -> list[bytes]:
    """Frames as a job writes them: a JSON answer, a binary array answer, a ValueError."""
    import numpy as np

    from grader.child.worker import to_data

    blobs: list = []
    header = json.dumps({"event": "call", "status": "returned", "value": to_data(np.eye(2), np, blobs=blobs)}).encode()
    binary = b"\x00" + len(header).to_bytes(4, "big") + header + b"".join(bytes(b) for b in blobs)
    return [
        json.dumps({"event": "call", "status": "returned", "value": [[1.0, 2.5]]}).encode(),
        binary,
        json.dumps(
            {"event": "call", "status": "raised", "type": "ValueError", "value_error": True, "message": "no"}
        ).encode(),
    ]


def test_a_chunk_answer_carries_the_jobs_frames_and_is_read_as_a_local_run_reads_them() -> None:
    """Each result keeps its frame (the verdict cache's key), each distinct frame travels once, and the
    outcome is what the local channel makes of the same frames; an answer that is not one is refused."""
    from grader.execution.boundary import FRAMES, ResultBudget
    from grader.execution.channel import result_of
    from grader.models import Call, CallResult, RunOutcome
    from grader.shards import OutcomeError, decode_outcome, encode_outcome
    from grader.shards.cluster import decode_answer, encode_answer

    frames = _frames()
    budget = ResultBudget(64, 4, 1 << 16)
    calls = [Call("f", ([1.0],), 1.0, budget) for _ in range(4)]
    local = [result_of(FRAMES.decode(w, "call", budget), 0.5, w) for w in (*frames, frames[0])]
    outcome = RunOutcome((*local[:3], CallResult("timeout", message="stopped", seconds=1.0)), sha256="a" * 64)
    again = RunOutcome((local[3], *local[1:3], local[0]))
    wires: dict[bytes, int] = {}
    items = [
        {"id": "s1", "outcome": encode_outcome(outcome, wires)},
        {"id": "s2", "outcome": encode_outcome(again, wires)},
    ]
    answer = encode_answer(items, wires)
    assert len(wires) == 3 and answer.count(frames[1]) == 1  # s2's frames are s1's: sent once
    got = decode_answer(answer, 1 << 20)
    got_items, got_wires = got.items, got.wires
    assert got.exercises == [] and got.refused == ""
    first = decode_outcome(got_items[0]["outcome"], calls, got_wires)
    second = decode_outcome(got_items[1]["outcome"], calls, got_wires)
    assert first == outcome and second == again
    assert [r.wire for r in first.results] == [*frames, b""]  # the verdict cache's keys, as in a local run
    assert first.results[1].value == [[1.0, 0.0], [0.0, 1.0]] and first.results[2].value_error is True
    # through a shard record (JSON): the frames in base64
    assert decode_outcome(json.loads(json.dumps(encode_outcome(outcome))), calls) == outcome
    for bad in (
        answer[:-1],
        b"grader-chunk/1\n" + answer[15:],
        answer + b"x",
        answer[:15] + (10**9).to_bytes(8, "big") + answer[23:],
        "text",
    ):
        assert decode_answer(bad, 1 << 20) is None
    assert decode_answer(answer, len(answer) - 1) is None  # over the chunk's limit
    row = got_items[0]["outcome"]
    for results, words in (
        ([{"wire": 7, "seconds": 0.1}, *row["results"][1:]], "no such frame"),
        ([{"wire": 0.5, "seconds": 0.1}, *row["results"][1:]], "not base64 text"),
        ([{"wire": 0, "seconds": -1}, *row["results"][1:]], "not a duration"),
        ([{"wire": 0, "seconds": 0.1, "x": 1}, *row["results"][1:]], "not a call's result"),
    ):
        with pytest.raises(OutcomeError, match=words):
            decode_outcome({**row, "results": results}, calls, got_wires)
    small = [Call("f", ([1.0],), 1.0, ResultBudget(1, 1, 64)), *calls[1:]]
    with pytest.raises(OutcomeError, match="larger than"):  # each frame is checked against its own call's budget
        decode_outcome(row, small, got_wires)
    with pytest.raises(OutcomeError, match="not base64"):
        decode_outcome({**row, "results": [{"wire": "%%%", "seconds": 0.1}, *row["results"][1:]]}, calls)


def test_an_exercise_text_nested_too_deep_is_refused_as_unreadable_not_a_crash() -> None:
    """A chunk's exercise results are JSON texts read lazily (grader-chunk/3): one nested past the
    interpreter's depth is an unreadable answer (ValueError: the submission is graded here), as the
    header itself is (`decode_answer`), never a RecursionError that ends the submission as a bug."""
    from grader.shards.cluster import Answer, ExerciseTable

    deep = "[" * 100_000 + "]" * 100_000
    for kept in (None, ExerciseTable()):
        with pytest.raises(ValueError):
            Answer([], [], [deep], "").exercise(0, kept)
        with pytest.raises(ValueError):
            Answer([], [], ['{"id": "e", "checks": ' + deep + "}"], "").exercise(0, kept)


@pytest.mark.slow
def test_a_tls_cluster_grades_byte_identically_with_the_certificates_given(tmp_path: Path) -> None:
    """``tls://`` with ``--dask-tls-ca/-cert/-key`` (a ``distributed.Security``): hidden inputs travel encrypted."""
    pytest.importorskip("cryptography", reason="Security.temporary() makes the certificates")
    security = distributed.Security.temporary()
    files = {}
    for name, pem in (
        ("ca", security.tls_ca_file),
        ("cert", security.tls_client_cert),
        ("key", security.tls_client_key),
    ):
        files[name] = tmp_path / f"{name}.pem"
        files[name].write_text(pem)
    klass = make_class(tmp_path / "class", copies=1)
    run("grade", klass, "--out", tmp_path / "local", "-q")
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        protocol="tls://",
        security=security,
        dashboard_address=None,
        worker_dashboard_address=None,
    ) as local:
        address = local.scheduler_address
        assert address.startswith("tls://")
        tls = ("--dask-tls-ca", files["ca"], "--dask-tls-cert", files["cert"], "--dask-tls-key", files["key"])
        run("grade", klass, "--out", tmp_path / "dask", "-q", "--dask", address, *tls)
        refused = run("grade", klass, "--out", tmp_path / "nocert", "-q", "--dask", address, check=False)
    assert_same_exports(tmp_path / "local", tmp_path / "dask")
    assert refused.returncode == 2 and "needs certificates" in refused.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "nocert").exists()


def _exercise(score: float):
    from grader.models import CheckResult, ExerciseResult

    check = CheckResult("c1", "shape", "passed" if score else "failed", score, 1.0, "visible", "", "", True)
    return ExerciseResult("E1", "Attention", "", score, 1.0, (check,))


def test_equal_exercise_results_are_one_object_for_the_whole_run_and_encoded_once() -> None:
    """A worker encodes an equal exercise result once (its text kept); the client builds one object per distinct
    result for the whole run, whichever chunk brought it, so the writers' per-result caches find it by identity."""
    from grader.models import SubmissionResult, exercise_to_dict
    from grader.shards.cluster import ExerciseTable, decode_answer, encode_answer, encode_result

    def result(score: float) -> SubmissionResult:
        return SubmissionResult("s", "p", "s", "a" * 64, score, 1.0, (_exercise(score),))

    texts: dict = {}
    raw = []
    for scores, positions in (((1.0, 1.0, 0.0), [[0], [0], [1]]), ((0.0, 1.0), [[0], [1]])):  # two chunks
        exercises: dict[str, int] = {}
        items = [{"id": "s", "result": encode_result(result(x), exercises, texts)} for x in scores]
        assert [item["result"]["exercises"] for item in items] == positions  # each distinct one once per chunk
        raw.append(encode_answer(items, {}, exercises))
    answers = [decode_answer(data, 1 << 20) for data in raw]
    assert len(texts) == 2  # each distinct result converted and encoded once by the worker
    assert sorted(texts.values()) == sorted(
        json.dumps(exercise_to_dict(_exercise(x)), sort_keys=True, allow_nan=False) for x in (0.0, 1.0)
    )
    first, second = answers
    assert all(type(text) is str for text in first.exercises)  # the table travels as JSON texts
    kept = ExerciseTable()
    passed, failed = first.exercise(0, kept), first.exercise(1, kept)
    assert passed == _exercise(1.0) and failed == _exercise(0.0)
    assert second.exercise(0, kept) is failed and second.exercise(1, kept) is passed  # across chunks: one object
    assert decode_answer(raw[1], 1 << 20).exercise(0) is not failed  # without the run's table: once per chunk only
    with pytest.raises(ValueError, match="no such exercise"):
        first.exercise(2, kept)
    bad = encode_answer([], {}, {'{"id": NaN}': 0})
    with pytest.raises(ValueError, match="NaN is not JSON"):
        decode_answer(bad, 1 << 20).exercise(0, kept)
    header = json.dumps({"items": [], "wires": [], "exercises": [{"id": "E1"}], "refused": ""}).encode()
    from grader.shards.cluster import ANSWER_MAGIC

    assert decode_answer(ANSWER_MAGIC + len(header).to_bytes(8, "big") + header, 1 << 20) is None  # texts only


def test_chunk_size_is_four_tasks_per_worker_thread_within_bounds() -> None:
    from grader.builtin.dask_cluster import DEFAULT_CHUNK, MAX_CHUNK, chunk_size

    assert (DEFAULT_CHUNK, MAX_CHUNK) == (8, 32)
    assert chunk_size(500, 2) == 32 and chunk_size(200, 2) == 25 and chunk_size(40, 2) == 8 and chunk_size(0, 0) == 8
    assert chunk_size(10_000, 100) == 25


def test_chunks_shrink_toward_the_class_end_so_the_workers_finish_together() -> None:
    from grader.builtin.dask_cluster import TAIL_CHUNK, chunk_size, chunk_sizes

    sizes = chunk_sizes(1000, 2)
    assert sizes[:28] == [32] * 28 and sizes[28:] == [26, 20, 15, 11, 8, 6, 5, 4, 3, 2, 2, 2]
    for n, threads in ((1000, 2), (40, 2), (1, 1), (7, 3), (10_000, 100), (5, 0)):
        sizes = chunk_sizes(n, threads)
        assert sum(sizes) == n and sizes == sorted(sizes, reverse=True) and sizes[0] <= chunk_size(n, threads)
        assert sizes[-1] <= TAIL_CHUNK
    assert chunk_sizes(0, 2) == []


class _Future:
    def __init__(self, key: str, answer: bytes) -> None:
        self.key, self.answer, self.reads = key, answer, 0

    def result(self) -> bytes:
        self.reads += 1
        return self.answer


class _Client:
    """A Dask client's ``submit``, answering each chunk at once with an empty outcome per submission."""

    def __init__(self) -> None:
        self.sent: list[_Future] = []

    def submit(self, fn, payload: str, *args, key: str, **kwargs) -> _Future:
        from grader.models import RunOutcome
        from grader.shards import encode_outcome
        from grader.shards.cluster import encode_answer

        items = [{"id": item["id"], "outcome": encode_outcome(RunOutcome(()))} for item in json.loads(payload)]
        self.sent.append(_Future(key, encode_answer(items, {})))
        return self.sent[-1]


def test_chunks_are_sent_as_grading_reaches_them_and_forgotten_once_taken(tmp_path: Path) -> None:
    """The client sends at most ``window`` chunks ahead of the one taken, reads each chunk's answer once, and
    forgets it (and its future) once each of its submissions has taken it; an unreadable file runs here."""
    from grader.builtin.dask_cluster import Batch
    from grader.models import Submission

    subs = []
    for i in range(10):
        path = tmp_path / f"s{i}.py"
        if i != 3:
            path.write_text(f"x = {i}\n")
        subs.append(Submission(f"s{i}", str(tmp_path), str(path), "a" * 64))
    client = _Client()
    chunks = [subs[start : start + 2] for start in range(0, 10, 2)]
    batch = Batch(client, ("calls", {}, None), chunks, window=1)
    batch.top_up(0)
    assert len(client.sent) == 2  # chunk 0 and one ahead
    answer, position = batch.take(0, subs[0], [])
    assert position == 0 and answer.items[0]["id"] == "s0" and 0 in batch.answers
    assert batch.take(0, subs[1], [])[1] == 1
    assert 0 not in batch.answers and batch.futures[0] is False  # both taken: forgotten
    assert len(client.sent) == 2
    assert batch.take(1, subs[2], [])[1] == 0 and len(client.sent) == 3  # chunk 2 sent as chunk 1 is taken
    answer, position = batch.take(1, subs[3], [])
    assert position is None and len(answer.items) == 1  # s3's file is unreadable: not sent, graded here
    for index in (2, 3, 4):
        for sub in chunks[index]:
            batch.take(index, sub, [])
    assert len(client.sent) == 5 and all(f.reads == 1 for f in client.sent)  # each chunk read once
    assert batch.answers == {} and batch.futures == [False] * 5


@pytest.mark.slow
def test_a_worker_whose_zygote_died_starts_another_and_grades_its_chunks(cluster, tmp_path: Path) -> None:
    """The runner a worker keeps across runs held its dead zygote: every later chunk sent there failed
    (JobStarterLost), and the client graded its submissions itself."""
    local, client = cluster
    klass = make_class(tmp_path / "class")
    run("grade", klass, "--out", tmp_path / "local", "-q")
    args = ("-q", "--dask", local.scheduler_address, "--dask-chunk", "1")
    run("grade", klass, "--out", tmp_path / "warm", *args)  # every worker has its runner and zygote
    before = client.run(_zygote_pids)
    assert all(before.values())
    for pids in before.values():
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    done = run("grade", klass, "--out", tmp_path / "dask", *args)
    assert "graded here" not in done.stderr and "could not run" not in done.stderr, done.stderr[-2000:]
    assert (tmp_path / "dask" / "results.json").read_bytes() == (tmp_path / "local" / "results.json").read_bytes()
    live = {pid for pids in client.run(_live_zygote_pids).values() for pid in pids}
    assert live and not live & {pid for pids in before.values() for pid in pids}  # each a new zygote


CLIENT_WHOSE_CLUSTER_RUNS_NOTHING = """
import sys
import grader.builtin.dask_cluster as dask_cluster
dask_cluster._read_chunk = lambda future, count, calls: None  # every chunk lost: each graded by the client
sys.argv = ["grader", *sys.argv[1:]]
from grader.cli.launch import console_main
console_main()
"""


@pytest.mark.slow
def test_chunks_the_cluster_could_not_run_are_graded_by_the_client_in_its_own_sandbox(cluster, tmp_path: Path) -> None:
    """The client starts its sandbox only for such a chunk, in a grading thread: its zygote died with
    that thread and the run stopped with exit 3 and no results."""
    local, _ = cluster
    klass = make_class(tmp_path / "class")
    run("grade", klass, "--out", tmp_path / "local", "-q")
    done = subprocess.run(
        [sys.executable, "-c", CLIENT_WHOSE_CLUSTER_RUNS_NOTHING, "grade", str(klass), "--out", str(tmp_path / "here")]
        + ["-q", "--dask", local.scheduler_address, "--dask-chunk", "1"],
        cwd=ROOT,
        env=grader_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "here" / "results.json").read_bytes() == (tmp_path / "local" / "results.json").read_bytes()


class _FakeRunner:
    """A worker's runner whose jobs are run by ``run`` (a function of the runner), and which says when it is ended."""

    def __init__(self, run) -> None:
        from types import SimpleNamespace

        self.ended = False
        self.stash: dict = {}
        self.hooks = SimpleNamespace(run_calls=lambda **kw: run(self), unconfigure=lambda config: self._end())

    def _end(self) -> None:
        self.ended = True


def test_a_stale_zygote_loss_does_not_end_the_fresh_runner_another_chunk_runs_on() -> None:
    """Two chunks on one worker (two task threads) share its runner, and both see its zygote die. The first
    drops it and runs again on a fresh runner; the second's loss, coming later, dropped whatever runner the
    settings named then: the fresh one, mid-chunk, so the first chunk lost its zygote twice and went back to
    the client (and the second started a third zygote)."""
    import base64
    import threading

    from grader.errors import JobStarterLost
    from grader.models import RunOutcome
    from grader.shards.cluster import GraderWorker

    worker = GraderWorker()
    settings = {"k": 1}
    b_done = threading.Event()
    b_lost = threading.Event()

    def dead(runner):  # the zygote every chunk ran on died: chunk A sees it first, chunk B a little later
        if threading.current_thread().name == "B":
            b_lost.wait(10)
        raise JobStarterLost("the zygote")

    def healthy(runner):
        if threading.current_thread().name == "A":
            b_lost.set()  # A runs on the fresh runner now: B's loss comes in meanwhile
            b_done.wait(10)
        if runner.ended:
            raise JobStarterLost("the zygote")
        return RunOutcome(results=())

    made = [_FakeRunner(dead)]
    worker.runners[json.dumps(settings, sort_keys=True)] = made[0]

    def runner(settings_, slots=1):
        key = json.dumps(settings_, sort_keys=True)
        with worker.lock:
            if key not in worker.runners:
                made.append(_FakeRunner(healthy))
                worker.runners[key] = made[-1]
            return worker.runners[key]

    worker.runner = runner
    worker.batch_calls = lambda text: ()
    item = {"id": "s1", "name": "attention.py", "sha256": "0" * 64, "data": base64.b64encode(b"x = 1\n").decode()}
    answers: dict[str, object] = {}

    def chunk(name: str) -> None:
        try:
            answers[name] = worker.run_chunk(json.dumps([item]), "[]", settings)
        except Exception as exc:  # noqa: BLE001 - the test says which chunk failed
            answers[name] = exc
        finally:
            if name == "B":
                b_done.set()

    threads = [threading.Thread(target=chunk, args=(name,), name=name) for name in "AB"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert type(answers["A"]) is bytes, answers["A"]
    assert type(answers["B"]) is bytes, answers["B"]
    assert len(made) == 2 and made[0].ended and not made[1].ended  # one fresh runner, kept


def test_a_worker_torn_down_forgets_what_it_collected_for_its_runners() -> None:
    """Collected checks are kept by the runner's id: a runner made after the tear-down may reuse it."""
    from grader.shards.cluster import GraderWorker

    plugin = GraderWorker()
    plugin.collections[12345] = (None, {}, "kept")
    plugin.teardown(worker=None)
    assert plugin.collections == {} and plugin.runners == {}


def test_a_chunk_cancelled_by_the_run_s_own_stop_is_no_lost_chunk(capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C during grade --dask: the clean-up closes the client, which cancels the chunks in flight, and each
    grading thread waiting on one said "the Dask cluster could not run chunk ... (FutureCancelledError ...);
    its submissions are graded here" after "grader: interrupted" (every run with chunks in flight): the
    cluster lost nothing and nothing is graded here. A chunk lost while the client runs is still said."""
    from concurrent.futures import CancelledError

    from grader.builtin.dask_cluster import _read_chunk

    class Client:
        status = "closed"

    class Future:
        key = "grader-chunk-0000-0"
        client = Client()

        def result(self) -> None:
            raise CancelledError(f"{self.key} cancelled for reason: unknown.")

    assert _read_chunk(Future(), 1, []) is None
    assert capsys.readouterr().err == ""
    Client.status = "running"
    assert _read_chunk(Future(), 1, []) is None
    assert "could not run chunk grader-chunk-0000-0" in capsys.readouterr().err
