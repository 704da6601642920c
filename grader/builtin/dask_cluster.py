"""Built-in plugin: run a class's submissions on a Dask cluster (``grade --dask ADDRESS``).

Only the running of submissions moves: before grading
(``grader_batch_start``) the batch is sent to the cluster in chunks of
``--dask-chunk`` submissions (each chunk carries its files' bytes and the calls'
text: data a lost worker cannot take with it, where a scattered copy could be the
only one left once Dask's memory manager drops the others). A chunk runs in a Dask worker
through that worker's own grader plugins, sandbox included: each worker
keeps its configured runner, and with it its sandbox zygote, warm across
chunks, in the grader's worker plugin (`grader.shards.cluster.GraderWorker`,
registered on every worker when the client connects; it also stops the
worker's statistical profiler). A chunk comes back as the frames its jobs
wrote (data only, each distinct frame once), read here as a local run reads
its jobs' frames (`grader.shards.decode_outcome`: every key and type checked,
every value against its call's budget), once. Then ``grader_run_calls``
answers each submission with its outcome, so judging (an answer judged once
is not judged again), the wrappers (timing, staff, similarity), the
gradebook, progress and every report stay in the instructor's process,
exactly as in a local run.

Each submission's outcome is taken once (``pending`` is popped): a chunk that
the scheduler runs again (a worker lost mid-chunk, a retry) resolves its
future once, so nothing is graded twice in the outputs. A chunk the cluster
cannot finish is graded here instead, with a warning. The client is
``dask[distributed]`` (the grader's ``dask`` extra). ``tls://`` addresses
take the client's certificate, key and CA from ``--dask-tls-*`` (a
``distributed.Security``) or from Dask's configuration.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import ConfigError, UsageError
from grader.execution.jobs import positive_int
from grader.markers import hookimpl
from grader.models import Call, RunOutcome, Submission
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_CLIENT = StashKey[Any]()
_PENDING = StashKey[Any]()
_CALLS_KEY = StashKey[str]()
_VALUES = StashKey[bool]()
_EXERCISES = StashKey[Any]()

__all__ = ["DEFAULT_CHUNK", "MAX_CHUNK", "TAIL_CHUNK", "chunk_size", "chunk_sizes", "cluster_outcome", "security"]

DEFAULT_CHUNK = 8
"""Submissions per Dask task, at least (`chunk_size`): enough to amortize a task's round trip."""

MAX_CHUNK = 32
"""Submissions per Dask task, at most, unless ``--dask-chunk`` says otherwise (`chunk_size`)."""


def chunk_size(submissions: int, threads: int) -> int:
    """Submissions per Dask task when ``--dask-chunk`` is not given: four tasks per worker thread.

    Each task costs the client, the scheduler and the worker a round trip and its bookkeeping (about
    a millisecond of the client's CPU): a class is cut into four chunks per worker thread, so that a
    thread that finishes early takes another while the last chunks run, and each chunk holds from
    `DEFAULT_CHUNK` to `MAX_CHUNK` submissions.
    """
    return max(DEFAULT_CHUNK, min(MAX_CHUNK, submissions // (4 * max(1, threads))))


TAIL_CHUNK = 2
"""Submissions per Dask task, at least, in a class's last chunks (`chunk_sizes`)."""


def chunk_sizes(submissions: int, threads: int) -> list[int]:
    """The sizes of a class's chunks when ``--dask-chunk`` is not given: `chunk_size`, smaller toward the end.

    A chunk holds at most what is left of the class divided by twice the worker threads (rounded up,
    and at least `TAIL_CHUNK`): the last chunks shrink, so that the workers finish within a few
    submissions of each other. Chunks of one size left a worker idle for up to a chunk's time (32
    submissions: about half a second) while another ran the class's last chunk; the few more tasks
    cost the client about a millisecond each.
    """
    head, share = chunk_size(submissions, threads), 2 * max(1, threads)
    sizes: list[int] = []
    left = submissions
    while left > 0:
        sizes.append(min(left, head, max(TAIL_CHUNK, -(-left // share))))
        left -= sizes[-1]
    return sizes


_LOCK = threading.Lock()


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    group = parser.add_argument_group("dask")
    group.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="run the submissions on this Dask scheduler (tcp://host:8786); judging and reports stay "
        "here (needs the 'dask' extra)",
    )
    group.add_argument(
        "--dask-chunk",
        type=positive_int,
        metavar="N",
        help=f"submissions per Dask task (default: about four tasks per worker thread, each of {DEFAULT_CHUNK} to "
        f"{MAX_CHUNK} submissions, and smaller ones at the class's end)",
    )
    group.add_argument(
        "--dask-judge",
        action="store_true",
        help="judge and score on the workers too; they send back small result records (each worker must hold "
        "this course and its course secret; one that does not is told apart, and its chunks are judged here)",
    )
    for name, what in (("ca", "the CA certificate"), ("cert", "the client's certificate"), ("key", "its private key")):
        group.add_argument(
            f"--dask-tls-{name}",
            metavar="FILE",
            help=f"for a tls:// scheduler: {what} (PEM); default: Dask's configuration (distributed.comm.tls)",
        )


@hookimpl
def grader_configure(config: Config) -> None:
    address = config.option("dask")
    if address is None or config.command != "grade":
        return
    from grader.config.addresses import check_dask_address, probe_dask

    files = _tls_files(config)
    scheme, _, _ = check_dask_address(address, certificates=bool(files))  # empty, scheme, port, certificates
    if files and scheme not in ("tls", "wss"):
        raise UsageError(
            f"--dask {address}: --dask-tls-* given for a {scheme}:// address; give the scheduler's tls:// address"
        )
    try:
        from distributed import Client

        from grader.shards.cluster import PLUGIN_NAME, GraderWorker
    except ImportError:
        raise ConfigError(
            "--dask: the Dask client is not installed; install the grader's 'dask' extra (pip install 'dask[distributed]')"
        ) from None
    probe_dask(address)
    try:
        client = Client(address, timeout=20, set_as_default=False, security=security(files) if files else None)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(
            f"--dask {address}: cannot reach the Dask scheduler ({type(exc).__name__}: {exc}); "
            "give the address 'dask scheduler' prints (tcp://HOST:8786)"
        ) from None
    config.stash[_CLIENT] = client
    # Every worker (those that join later too) keeps the grader's state in this plugin; one registered
    # by an earlier run is kept as it is (idempotent), and with it its warm sandbox zygotes.
    client.register_plugin(GraderWorker(), name=PLUGIN_NAME)


def _tls_files(config: Any) -> dict[str, str]:
    """The ``--dask-tls-*`` files given (ca, cert, key), each checked to be a readable file."""
    files = {}
    for name in ("ca", "cert", "key"):
        value = config.option(f"dask_tls_{name}")
        if value is None:
            continue
        if not os.path.isfile(value) or not os.access(value, os.R_OK):
            raise UsageError(f"--dask-tls-{name} {value}: no such readable file; give the PEM file's path")
        files[name] = value
    if files and not {"ca", "cert"} <= files.keys():
        missing = ", ".join(f"--dask-tls-{n}" for n in ("ca", "cert") if n not in files)
        raise UsageError(f"--dask-tls-*: {missing} missing; a tls:// client needs the CA and its own certificate")
    return files


def security(files: dict[str, str]) -> Any:
    """The ``distributed.Security`` of a tls:// client: ``files`` names its CA, certificate and key (PEM).

    Encryption is required: the calls' hidden inputs and the students' files travel to the workers.
    """
    from distributed import Security

    return Security(
        tls_ca_file=files["ca"],
        tls_client_cert=files["cert"],
        tls_client_key=files.get("key"),
        require_encryption=True,
    )


def _settings(config: Any) -> dict[str, Any]:
    """What a worker's runner is configured with: the run options that change how calls run.

    ``pack`` is the run's ``--pack`` (None: the pack installed on the worker), ``plugins`` its ``-p``.
    """
    return {
        "import_timeout": config.option("import_timeout"),
        "submission_timeout": config.option("submission_timeout"),
        "insecure": bool(config.option("insecure", False)),
        "cpu_weight": config.option("cpu_weight"),
        "plugins": list(config.option("p") or ()),
        "pack": _absolute(config.option("pack")),
    }


JUDGING_OPTIONS = ("specs", "reference", "mutants", "secret_file")
"""Options naming files that judging reads, passed on to the workers (as absolute paths) with ``--dask-judge``."""


def _judge(config: Any, settings: dict[str, Any]) -> dict[str, Any] | None:
    """With ``--dask-judge``: what a worker must match to judge (spec hash, result settings) and whether the
    client's plugins read the calls' values; ``settings["judging"]`` gets the options judging reads."""
    if not config.option("dask_judge"):
        return None
    from grader.collected import COLLECTED
    from grader.grading.settings import result_settings

    argv: list[str] = []
    for name in JUDGING_OPTIONS:
        value = config.option(name)
        if value:
            argv += [f"--{name.replace('_', '-')}", str(Path(value).resolve())]
    for flag in ("no_diagnosis", "after_due_date", "published"):
        if config.option(flag):
            argv.append(f"--{flag.replace('_', '-')}")
    settings["judging"] = argv
    from grader.shards import values_read

    config.stash[_VALUES] = values = values_read(config)
    return {"spec_hash": config.stash[COLLECTED].spec_hash, "settings": result_settings(config), "values": values}


def _notebook(sub: Submission) -> bool:
    """Whether the submission plugin relocates this submission's line numbers (a notebook's cells)."""
    from grader.intake.files import NB_LOCK, NOTEBOOKS

    with NB_LOCK:
        return (sub.file or "") in NOTEBOOKS


def _absolute(pack: str | None) -> str | None:
    """A ``--pack`` folder as an absolute path (a worker's folder is not ours); an installed pack's id as is."""
    return str(Path(pack).resolve()) if pack and Path(pack).is_dir() else pack


@hookimpl
def grader_batch_start(submissions: Sequence[Submission], calls: Sequence[Call], config: Config) -> None:
    """Cut the batch into chunks and send the first ones to the cluster (`Batch`); the rest follow as they are
    taken."""
    client = config.stash.get(_CLIENT)
    if client is None or not submissions:
        return
    from grader.shards.cluster import ExerciseTable, encode_calls

    calls_text = encode_calls(calls)
    calls_key = "grader-calls-" + hashlib.sha256(calls_text.encode()).hexdigest()[:16]
    # The calls travel with each chunk (tens of KiB): scattered once, their last copy could die with a
    # worker (Dask's memory manager keeps one replica), and every chunk after it would fail. They are
    # still scattered, and dropped: that round trip raises here (within the client's connect timeout,
    # 30 s by default) when the scheduler is gone, where a chunk's future would wait for it for ever.
    client.scatter([calls_text], broadcast=True, hash=False)
    settings = _settings(config)
    judge = _judge(config, settings)
    threads = _threads(client)
    todo = [sub for sub in submissions if sub.file is not None]
    fixed = config.option("dask_chunk")
    sizes = [fixed] * -(-len(todo) // fixed) if fixed else chunk_sizes(len(todo), threads)
    chunks, start = [], 0
    for size in sizes:
        chunks.append(todo[start : start + size])
        start += size
    batch = Batch(client, (calls_text, settings, judge), chunks, window=2 * threads + 2)
    config.stash[_PENDING] = {sub.id: (batch, index) for index, chunk in enumerate(chunks) for sub in chunk}
    config.stash[_CALLS_KEY] = calls_key
    config.stash.setdefault(_EXERCISES, ExerciseTable())  # the run's: equal results one object across chunks
    batch.top_up(0)


class Batch:
    """A batch's chunks on the cluster: each sent when the grading reaches the chunks before it.

    At most ``window`` chunks ahead of the one being taken are on the cluster (queued or running),
    enough to keep every worker thread busy; a chunk's files are read when it is sent, and its
    answer is forgotten once each of its submissions has taken it (`take`): the client holds the
    chunks in flight, not a whole class's files and answers.
    """

    def __init__(self, client: Any, args: tuple[Any, Any, Any], chunks: list[list[Submission]], window: int) -> None:
        self.client, self.args, self.chunks, self.window = client, args, chunks, window
        self.key = os.urandom(4).hex()
        self.futures: list[Any] = [None] * len(chunks)
        self.positions: list[dict[str, int]] = [{} for _ in chunks]
        self.answers: dict[int, list[Any]] = {}
        self.left = [len(chunk) for chunk in chunks]
        self.locks = [threading.Lock() for _ in chunks]
        self.lock = threading.Lock()

    def top_up(self, index: int) -> None:
        """Send chunk ``index`` and the ``window`` after it, those not sent yet."""
        with self.lock:
            for i in range(index, min(len(self.chunks), index + self.window + 1)):
                if self.futures[i] is None and self.left[i] > 0:
                    try:
                        self.futures[i] = self._send(i)
                    except Exception as exc:  # noqa: BLE001 - the cluster is gone: graded here instead
                        print(
                            f"grader: warning: chunk {i} could not be sent to the Dask cluster ({type(exc).__name__}: "
                            f"{str(exc)[:200]}); its submissions are graded here",
                            file=sys.stderr,
                            flush=True,
                        )
                        self.futures[i] = False

    def _send(self, index: int) -> Any:
        """Submit chunk ``index`` (its files read now); its future, or False when none of its files is readable."""
        from grader.shards.cluster import run_chunk

        calls_text, settings, judge = self.args
        items: list[dict[str, Any]] = []
        for sub in self.chunks[index]:
            try:
                data = Path(sub.file or "").read_bytes()
            except OSError:
                continue  # graded here: the local runner says what is wrong with the file
            self.positions[index][sub.id] = len(items)
            items.append(
                {
                    "id": sub.id,
                    "name": Path(sub.file or "").name,
                    "sha256": sub.sha256,
                    "data": base64.b64encode(data).decode(),
                    # a notebook's line numbers are relocated here (the submission plugin): judged here
                    "judge": judge is not None and not _notebook(sub),
                }
            )
        if not items:
            return False
        return self.client.submit(
            run_chunk,
            json.dumps(items),
            calls_text,
            settings,
            judge,
            key=f"grader-chunk-{self.key}-{index}",
            pure=False,
            retries=1,
        )

    def take(self, index: int, submission: Submission, calls: Sequence[Call]) -> tuple[Any, int | None]:
        """Chunk ``index``'s decoded answer and this submission's place in it (None: run it here).

        Read and decoded once per chunk (`_read_chunk`); forgotten once each of its submissions has
        taken it.
        """
        self.top_up(index)
        with self.locks[index]:
            future, position = self.futures[index], self.positions[index].get(submission.id)
            if index not in self.answers:
                self.answers[index] = [None if not future else _read_chunk(future, len(self.positions[index]), calls)]
            answer = self.answers[index][0]
            self.left[index] -= 1
            if self.left[index] <= 0:
                self.answers.pop(index, None)
                self.futures[index] = False  # taken: the cluster may forget it
        return answer, position


def _threads(client: Any) -> int:
    """The cluster's worker threads now (1 when it cannot tell)."""
    try:
        return sum(client.nthreads().values()) or 1
    except Exception:  # noqa: BLE001 - only a chunk size depends on it
        return 1


def _chunk_limit(calls: Sequence[Call], count: int) -> int:
    """Bytes a chunk's answer may hold: per submission every call's frame limit, its texts, and some slack."""
    from grader.execution.boundary import frame_limit

    return count * (sum(frame_limit(c.budget) + 8192 for c in calls) + (256 << 10)) + (64 << 10)


def _read_chunk(future: Any, count: int, calls: Sequence[Call]) -> Any:
    """A chunk's answer, decoded (`grader.shards.cluster.decode_answer`), or None (said in a warning)."""
    try:
        answer = future.result()
    except Exception as exc:  # noqa: BLE001 - a lost chunk: its submissions are graded here instead
        if getattr(getattr(future, "client", None), "status", "running") in ("closing", "closed"):
            return None  # cancelled by the run's own stop (Ctrl-C: grader_unconfigure closed the client), not lost
        print(
            f"grader: warning: the Dask cluster could not run chunk {future.key} ({type(exc).__name__}: "
            f"{str(exc)[:200]}); its submissions are graded here",
            file=sys.stderr,
            flush=True,
        )
        return None
    from grader.shards.cluster import decode_answer

    data = decode_answer(answer, _chunk_limit(calls, count))
    if data is None:
        print(
            f"grader: warning: chunk {future.key} came back unreadable; its submissions are graded here",
            file=sys.stderr,
            flush=True,
        )
    return data


def cluster_outcome(submission: Submission, calls: Sequence[Call], config: Any) -> RunOutcome | None:
    """The outcome the cluster brought back for this submission (taken once), or None to run it here.

    Decoded once, from the frames the worker's job wrote (`grader.shards.decode_outcome`): each
    result keeps its frame (`grader.models.CallResult.wire`), so an answer judged before is not
    judged again (`grader.grading.judging.VerdictCache`), as in a local run.
    """
    pending = config.stash.get(_PENDING)
    if not pending:
        return None
    with _LOCK:
        entry = pending.pop(submission.id, None)
    if entry is None:
        return None
    batch, index = entry
    answer, position = batch.take(index, submission, calls)
    if answer is None or position is None or position >= len(answer.items):
        return None
    item = answer.items[position]
    from grader.shards import OutcomeError, decode_outcome

    try:
        if type(item) is not dict or set(item) - {"result"} != {"id", "outcome"} or item["id"] != submission.id:
            raise OutcomeError("not this submission's outcome")
        judged = "result" in item
        outcome = decode_outcome(item["outcome"], calls, answer.wires, timed=judged and not config.stash[_VALUES])
        if judged:
            outcome = dataclasses.replace(outcome, graded=_graded(item["result"], answer, config.stash.get(_EXERCISES)))
        elif answer.refused:
            _warn_once(config, f"a Dask worker did not judge ({answer.refused}); its submissions are judged here")
        return outcome
    except (OutcomeError, ValueError, KeyError, TypeError) as exc:
        print(
            f"grader: warning: the cluster's outcome of {submission.id!a} is unreadable ({exc}); graded here",
            file=sys.stderr,
            flush=True,
        )
        return None


@hookimpl(trylast=True)
def grader_known_outcome(submission: Submission, calls: Sequence[Call], config: Config) -> RunOutcome | None:
    """The cluster's answer for this submission (`cluster_outcome`): the runner asks it first; None runs it here."""
    return cluster_outcome(submission, calls, config)


def _graded(data: Any, answer: Any, kept: Any = None) -> Any:
    """A worker's result record (`grader.shards.cluster.encode_result`) as a `grader.models.SubmissionResult`.

    Its exercises' results are the run's objects (``kept``, a `grader.shards.cluster.ExerciseTable`):
    one per distinct result, whichever chunk brought it.

    Raises
    ------
    ValueError, KeyError, TypeError
        If it is not one (`grader.shards.check_result_data`).
    """
    from grader.models import result_from_dict
    from grader.shards import check_result_data

    if type(data) is not dict or type(data.get("exercises")) is not list:
        raise ValueError("not a result record")
    exercises = tuple(answer.exercise(i, kept) for i in data["exercises"])
    head = {**data, "exercises": []}
    check_result_data(head)
    return dataclasses.replace(result_from_dict(head), exercises=exercises)


_WARNED = StashKey[set[str]]()


def _warn_once(config: Any, line: str) -> None:
    with _LOCK:
        warned = config.stash.setdefault(_WARNED, set())
        if line in warned:
            return
        warned.add(line)
    from grader.safetext import display

    print(f"grader: warning: {display(line)}", file=sys.stderr, flush=True)


@hookimpl
def grader_unconfigure(config: Config) -> None:
    client = config.stash.pop(_CLIENT, None)
    if client is not None:
        try:
            client.close()
        except Exception:  # noqa: BLE001, S110 - the cluster may already be gone
            pass
