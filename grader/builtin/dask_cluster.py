"""Built-in plugin: run a class's submissions on a Dask cluster (``grade --dask ADDRESS``).

Only the running of submissions moves: before grading
(``grader_batch_start``) the batch is sent to the cluster in chunks of
``--dask-chunk`` submissions (each chunk carries its files' bytes; the calls
travel once, scattered to every worker). A chunk runs in a Dask worker
through that worker's own grader plugins, sandbox included: each worker
process keeps one configured runner, and with it its sandbox zygote, warm
across chunks (`run_chunk`). A chunk comes back as JSON text (data only),
decoded strictly here (`grader.shards.decode_outcome`: every key, type and
value checked against its call's budget, as a job's answer is). Then
``grader_run_calls`` answers each submission with its outcome, so judging,
the wrappers (timing, staff, similarity), the gradebook, progress and every
report stay in the instructor's process, exactly as in a local run.

Each submission's outcome is taken once (``pending`` is popped): a chunk that
the scheduler runs again (a worker lost mid-chunk, a retry) resolves its
future once, so nothing is graded twice in the outputs. A chunk the cluster
cannot finish is graded here instead, with a warning. The client is
``dask[distributed]`` (the grader's ``dask`` extra).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import ConfigError, UsageError
from grader.execution.jobs import positive_int
from grader.fileio import scratch_prefix
from grader.markers import hookimpl
from grader.models import Call, RunOutcome, Submission
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_CLIENT = StashKey[Any]()
_PENDING = StashKey[Any]()
_CHUNKS = StashKey[dict[Any, Any]]()
_CALLS_KEY = StashKey[str]()

__all__ = ["DEFAULT_CHUNK", "decode_calls", "encode_calls", "run_chunk"]

DEFAULT_CHUNK = 8
"""Submissions per Dask task: few enough to spread a class, enough to amortize a task's round trip."""

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
        default=DEFAULT_CHUNK,
        metavar="N",
        help=f"submissions per Dask task (default: {DEFAULT_CHUNK})",
    )


@hookimpl
def grader_configure(config: Config) -> None:
    address = config.option("dask")
    if address is None or config.command != "grade":
        return
    from grader.config.addresses import check_dask_address, probe_dask

    check_dask_address(address)  # before anything starts: empty, scheme, port, tls certificates
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError(
            "--dask: the Dask client is not installed; install the grader's 'dask' extra (pip install 'dask[distributed]')"
        ) from None
    probe_dask(address)
    try:
        config.stash[_CLIENT] = Client(address, timeout=20, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(
            f"--dask {address}: cannot reach the Dask scheduler ({type(exc).__name__}: {exc}); "
            "give the address 'dask scheduler' prints (tcp://HOST:8786)"
        ) from None


def encode_calls(calls: Sequence[Call]) -> str:
    """The calls as JSON text (function, args with non-finite floats encoded, CPU timeout, budget, hidden)."""
    from grader.execution.boundary import encode_nonfinite

    rows = []
    for c in calls:
        budget = None if c.budget is None else [c.budget.max_items, c.budget.max_depth, c.budget.max_bytes]
        rows.append(
            {
                "function": c.function,
                "args": encode_nonfinite(list(c.args)),
                "timeout": c.timeout,
                "budget": budget,
                "hidden": c.hidden,
            }
        )
    return json.dumps(rows, allow_nan=False)


def decode_calls(text: str) -> tuple[Call, ...]:
    """The calls of `encode_calls` (in a worker: the instructor's data)."""
    from grader.execution.boundary import ResultBudget

    def floats(value: Any) -> Any:
        if type(value) is dict and set(value) == {"$float"}:
            return float(value["$float"])
        if type(value) is list:
            return [floats(v) for v in value]
        return value

    return tuple(
        Call(
            row["function"],
            tuple(floats(row["args"])),
            float(row["timeout"]),
            None if row["budget"] is None else ResultBudget(*row["budget"]),
            bool(row["hidden"]),
        )
        for row in json.loads(text)
    )


def _settings(config: Any) -> dict[str, Any]:
    """What a worker's runner is configured with: the run options that change how calls run.

    ``pack`` is the run's ``--pack`` (None: the pack installed on the worker), ``plugins`` its ``-p``.
    """
    return {
        "import_timeout": config.option("import_timeout"),
        "submission_timeout": config.option("submission_timeout"),
        "insecure": bool(config.option("insecure", False)),
        "plugins": list(config.option("p") or ()),
        "pack": _absolute(config.option("pack")),
    }


def _absolute(pack: str | None) -> str | None:
    """A ``--pack`` folder as an absolute path (a worker's folder is not ours); an installed pack's id as is."""
    return str(Path(pack).resolve()) if pack and Path(pack).is_dir() else pack


@hookimpl
def grader_batch_start(submissions: Sequence[Submission], calls: Sequence[Call], config: Config) -> None:
    """Send the batch to the cluster in chunks; keep each submission's future and place in its chunk."""
    client = config.stash.get(_CLIENT)
    if client is None or not submissions:
        return
    calls_text = encode_calls(calls)
    calls_key = "grader-calls-" + hashlib.sha256(calls_text.encode()).hexdigest()[:16]
    [scattered] = client.scatter([calls_text], broadcast=True, hash=False)
    settings = _settings(config)
    size = int(config.option("dask_chunk") or DEFAULT_CHUNK)
    pending: dict[str, tuple[Any, int, int]] = {}
    batch = os.urandom(4).hex()
    for start in range(0, len(submissions), size):
        items = []
        for sub in submissions[start : start + size]:
            if sub.file is None:
                continue
            try:
                data = Path(sub.file).read_bytes()
            except OSError:
                continue  # graded here: the local runner says what is wrong with the file
            items.append(
                (
                    sub,
                    {
                        "id": sub.id,
                        "name": Path(sub.file).name,
                        "sha256": sub.sha256,
                        "data": base64.b64encode(data).decode(),
                    },
                )
            )
        if not items:
            continue
        payload = json.dumps([item for _, item in items])
        future = client.submit(
            run_chunk,
            payload,
            scattered,
            settings,
            key=f"grader-chunk-{batch}-{start}",
            pure=False,
            retries=1,
        )
        for position, (sub, _) in enumerate(items):
            pending[sub.id] = (future, position, len(items))
    config.stash[_PENDING] = pending
    config.stash[_CHUNKS] = {}
    config.stash[_CALLS_KEY] = calls_key


def _chunk_limit(calls: Sequence[Call], count: int) -> int:
    """Bytes a chunk's answer may hold: per submission every call's frame limit, its texts, and some slack."""
    from grader.execution.boundary import frame_limit

    return count * (sum(frame_limit(c.budget) + 8192 for c in calls) + (256 << 10)) + (64 << 10)


def _chunk(future: Any, count: int, calls: Sequence[Call], config: Any) -> list[Any] | None:
    """The decoded JSON of a chunk's answer (once per chunk), or None when the cluster could not finish it."""
    chunks = config.stash[_CHUNKS]
    with _LOCK:
        lock = chunks.setdefault(future.key, (threading.Lock(), []))[0]
    with lock:
        done = chunks[future.key][1]
        if done:
            return done[0]
        try:
            text = future.result()
        except Exception as exc:  # noqa: BLE001 - a lost chunk: its submissions are graded here instead
            print(
                f"grader: warning: the Dask cluster could not run chunk {future.key} ({type(exc).__name__}: "
                f"{str(exc)[:200]}); its submissions are graded here",
                file=sys.stderr,
                flush=True,
            )
            done.append(None)
            return None
        data = None
        if type(text) is str and len(text) <= _chunk_limit(calls, count):
            try:
                data = json.loads(
                    text,
                    parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)),
                )
            except (ValueError, RecursionError):
                data = None
        if type(data) is not list:
            print(
                f"grader: warning: chunk {future.key} came back unreadable; its submissions are graded here",
                file=sys.stderr,
                flush=True,
            )
            data = None
        done.append(data)
        return data


def cluster_outcome(submission: Submission, calls: Sequence[Call], config: Any) -> RunOutcome | None:
    """The outcome the cluster brought back for this submission (taken once), or None to run it here."""
    pending = config.stash.get(_PENDING)
    if not pending:
        return None
    with _LOCK:
        entry = pending.pop(submission.id, None)
    if entry is None:
        return None
    future, position, count = entry
    data = _chunk(future, count, calls, config)
    if data is None or position >= len(data):
        return None
    item = data[position]
    from grader.shards import OutcomeError, decode_outcome

    try:
        if type(item) is not dict or set(item) != {"id", "outcome"} or item["id"] != submission.id:
            raise OutcomeError("not this submission's outcome")
        return decode_outcome(item["outcome"], calls)
    except OutcomeError as exc:
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


@hookimpl
def grader_unconfigure(config: Config) -> None:
    client = config.stash.pop(_CLIENT, None)
    if client is not None:
        try:
            client.close()
        except Exception:  # noqa: BLE001, S110 - the cluster may already be gone
            pass


# --- in a Dask worker --------------------------------------------------------------------------

_RUNNERS: dict[str, Any] = {}
_CALLS: dict[str, tuple[Call, ...]] = {}
_WORKER_LOCK = threading.Lock()


def _runner(settings: dict[str, Any]) -> Any:
    """This worker process's configured grader (sandbox zygote started once), for these settings."""
    key = json.dumps(settings, sort_keys=True)
    with _WORKER_LOCK:
        config = _RUNNERS.get(key)
        if config is not None:
            return config
        from grader.config.parser import for_command

        try:
            from distributed import get_worker

            slots = max(1, int(get_worker().state.nthreads))
        except (ImportError, ValueError, AttributeError):
            slots = 1
        argv = [
            "-",
            "--import-timeout",
            repr(float(settings["import_timeout"])),
            "--submission-timeout",
            repr(float(settings["submission_timeout"])),
            "--jobs",
            str(slots),
            *(["--insecure"] if settings["insecure"] else []),
            *(["--pack", settings["pack"]] if settings.get("pack") else []),
        ]
        config = for_command("grade", argv, plugins=settings["plugins"], pack=settings.get("pack"))
        config.options.out = None  # a worker writes no file: results go back to the instructor
        _keep_alive(lambda: config.hooks.configure(config))
        _RUNNERS[key] = config
        return config


def _keep_alive(start: Any) -> None:
    """Run ``start`` in a thread that lives as long as the worker process.

    The sandbox's zygote is started there: a child's death signal follows the
    thread that started it, and Dask may retire its task threads.
    """
    done = threading.Event()
    failure: list[BaseException] = []

    def body() -> None:
        try:
            start()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failure.append(exc)
        done.set()
        threading.Event().wait()  # forever: the zygote's parent thread

    threading.Thread(target=body, name="grader-zygote-parent", daemon=True).start()
    done.wait()
    if failure:
        raise failure[0]


def run_chunk(payload: str, calls_text: str, settings: dict[str, Any]) -> str:
    """Run a chunk of submissions in this Dask worker; return their outcomes as JSON text.

    Parameters
    ----------
    payload : str
        JSON list of ``{"id", "name", "sha256", "data"}`` (the file's bytes, base64).
    calls_text : str
        `encode_calls` of the batch's calls.
    settings : dict
        Timeouts, ``insecure``, ``-p`` plugins (`_settings`).

    Returns
    -------
    str
        JSON list of ``{"id", "outcome"}`` (`grader.shards.encode_outcome`), in the payload's order.
    """
    from grader.shards import encode_outcome

    config = _runner(settings)
    digest = hashlib.sha256(calls_text.encode()).hexdigest()
    with _WORKER_LOCK:
        calls = _CALLS.get(digest)
        if calls is None:
            calls = _CALLS[digest] = decode_calls(calls_text)
    out = []
    # Named by this worker's pid (`scratch_prefix`): a worker killed mid-chunk leaves its folder,
    # and the next grader to start removes it (`remove_stale_scratch`).
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("dask")) as tmp:
        for i, item in enumerate(json.loads(payload)):
            folder = Path(tmp) / str(i)
            folder.mkdir()
            path = folder / Path(item["name"]).name
            path.write_bytes(base64.b64decode(item["data"]))
            sub = Submission(item["id"], str(folder), str(path), item["sha256"])
            outcome = config.hook.grader_run_calls(submission=sub, calls=list(calls), config=config)
            out.append({"id": item["id"], "outcome": encode_outcome(outcome)})
    return json.dumps(out, allow_nan=False)
