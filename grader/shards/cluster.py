"""The worker's side of ``grade --dask``: what a Dask worker keeps and runs, and what crosses the network.

The client (`grader.builtin.dask_cluster`) registers `GraderWorker` on every
worker (a ``distributed.WorkerPlugin``: the worker's state lives in it, not in
module globals) and submits `run_chunk` tasks. A chunk's answer is bytes
(`encode_answer`): a JSON header listing each submission's outcome
(`grader.shards.encode_outcome`), then each distinct frame the jobs wrote, once.
The client reads them as a local run reads its jobs' frames (`decode_answer`,
`grader.shards.decode_outcome`). This module imports ``distributed``: only a run
with ``--dask``, and the workers, load it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distributed import WorkerPlugin

from grader.errors import JobStarterLost
from grader.fileio import memory_scratch, remove_stale_scratch, scratch_prefix
from grader.models import Call, Submission

__all__ = [
    "ANSWER_MAGIC",
    "PLUGIN_NAME",
    "Answer",
    "ExerciseTable",
    "GraderWorker",
    "decode_answer",
    "decode_calls",
    "encode_answer",
    "encode_calls",
    "encode_result",
    "run_chunk",
    "timed_outcome",
]


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


ANSWER_MAGIC = b"grader-chunk/3\n"
"""The first bytes of a chunk's answer (`encode_answer`)."""


def encode_answer(
    items: Sequence[dict[str, Any]],
    wires: dict[bytes, int],
    exercises: dict[str, int] | None = None,
    refused: str = "",
) -> bytes:
    """A chunk's answer: `ANSWER_MAGIC`, the JSON header's length (8 bytes), the header, then every frame.

    The header is ``{"items": [...], "wires": [length, ...], "exercises": [...], "refused": text}``:
    each item names its frames by their position in ``wires`` (`grader.shards.encode_outcome`), and
    each distinct frame travels once per chunk, in its own bytes (a class answers the same frames
    again and again). When the workers judge, an item's ``result`` names its exercises' results by
    their position in ``exercises`` (`encode_result`: each distinct one once, as its JSON text, the
    key by which the client keeps one object per distinct result for the whole run: `Answer.exercise`);
    ``refused`` says why this worker did not judge (its course is not the client's), or is empty.
    """
    table = sorted(wires, key=wires.__getitem__)
    shared = sorted(exercises or {}, key=(exercises or {}).__getitem__)
    header = json.dumps(
        {
            "items": list(items),
            "wires": [len(w) for w in table],
            "exercises": shared,
            "refused": refused,
        },
        allow_nan=False,
    ).encode()
    return b"".join([ANSWER_MAGIC, len(header).to_bytes(8, "big"), header, *table])


def decode_answer(data: Any, limit: int) -> Answer | None:
    """The parts of an `encode_answer` (checked: sizes, strict JSON), or None when it is not one."""
    if type(data) is not bytes or len(data) > limit or not data.startswith(ANSWER_MAGIC):
        return None
    start = len(ANSWER_MAGIC) + 8
    size = int.from_bytes(data[len(ANSWER_MAGIC) : start], "big")
    if start + size > len(data):
        return None
    try:
        header = json.loads(
            data[start : start + size],
            parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)),
        )
    except (ValueError, RecursionError):
        return None
    if type(header) is not dict or header.keys() != {"items", "wires", "exercises", "refused"}:
        return None
    items, lengths, exercises = header["items"], header["wires"], header["exercises"]
    if type(items) is not list or type(lengths) is not list or any(type(n) is not int or n < 1 for n in lengths):
        return None
    if type(exercises) is not list or any(type(text) is not str for text in exercises):
        return None
    if type(header["refused"]) is not str:
        return None
    offset = start + size
    if offset + sum(lengths) != len(data):
        return None
    view = memoryview(data)
    wires = []
    for n in lengths:
        wires.append(bytes(view[offset : offset + n]))
        offset += n
    return Answer(items, wires, exercises, header["refused"][:500])


@dataclass
class Answer:
    """A chunk's answer, read (`decode_answer`): its items, frames, shared exercise results (JSON texts) and
    refusal."""

    items: list[Any]
    wires: list[bytes]
    exercises: list[str]
    refused: str
    _results: dict[int, Any] = field(default_factory=dict)

    def exercise(self, position: Any, kept: ExerciseTable | None = None) -> Any:
        """The `grader.models.ExerciseResult` at ``position`` of the table, checked and built once.

        Once per chunk, and with ``kept`` (the run's `ExerciseTable`) once per run: equal results
        from any chunk are then one object, as the grader's own judging gives the writers (whose
        per-result caches then find them by identity).

        Raises
        ------
        ValueError
            If there is none there, or it is not an exercise's result.
        """
        if type(position) is not int or not 0 <= position < len(self.exercises):
            raise ValueError("no such exercise result")
        built = self._results.get(position)
        if built is None:
            text = self.exercises[position]
            built = None if kept is None else kept.get(text)
            if built is None:
                from grader.shards import exercise_from_data

                try:
                    built = exercise_from_data(json.loads(text, parse_constant=_refuse_constant))
                except RecursionError:  # nested past the interpreter's depth: unreadable, as in `decode_answer`
                    raise ValueError("an exercise result nested too deep") from None
                if kept is not None:
                    kept.put(text, built)
            self._results[position] = built
        return built


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class ExerciseTable:
    """The exercise results a run's chunks brought, one object per distinct JSON text; thread-safe.

    At most `MAX_BYTES` of texts are kept as keys (a class's results are few; a class of distinct
    wrong answers starts the table again instead of growing it).
    """

    MAX_BYTES = 8 << 20

    def __init__(self) -> None:
        self._kept: dict[str, Any] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> Any:
        """The result kept for this text, or None."""
        return self._kept.get(text)

    def put(self, text: str, result: Any) -> None:
        """Keep ``result`` as the one for ``text``."""
        with self._lock:
            if self._bytes + len(text) > self.MAX_BYTES:
                self._kept, self._bytes = {}, 0
            if text not in self._kept:
                self._kept[text] = result
                self._bytes += len(text)


def encode_result(result: Any, exercises: dict[str, int], texts: dict[Any, str] | None = None) -> dict[str, Any]:
    """A worker's `grader.models.SubmissionResult` as data, its exercises' results by position in ``exercises``.

    The results of a class repeat (every correct submission's exercise is the same): each distinct one
    is written once per chunk (`encode_answer`), keyed by its JSON text. ``texts`` keeps the text of
    each distinct exercise result already written (a worker's, across chunks), so that an equal one
    is not converted and encoded again.
    """
    from grader.models import result_to_dict

    data = result_to_dict(result, exercises=False)
    data["exercises"] = [exercises.setdefault(_exercise_text(ex, texts), len(exercises)) for ex in result.exercises]
    return data


def _exercise_text(exercise: Any, texts: dict[Any, str] | None) -> str:
    """An exercise result's JSON text (sorted keys), from ``texts`` when an equal one was encoded before."""
    from grader.models import exercise_to_dict

    if texts is not None:
        try:
            text = texts.get(exercise)
        except TypeError:  # an unhashable field (a plugin's list in details): encoded each time
            texts = None
        else:
            if text is not None:
                return text
    text = json.dumps(exercise_to_dict(exercise), sort_keys=True, allow_nan=False)
    if texts is not None:
        if len(texts) >= MAX_TEXTS:
            texts.clear()
        texts[exercise] = text
    return text


MAX_TEXTS = 4096
"""Distinct exercise results whose text a worker keeps (`encode_result`), at most; past that it starts again."""


def timed_outcome(outcome: Any) -> dict[str, Any]:
    """What a client whose workers judge needs of an outcome when no plugin there reads values: statuses and seconds.

    `grader.shards.decode_outcome` reads it as an outcome whose calls' values are unknown (None).
    """
    from grader.models import RunOutcome
    from grader.shards import encode_outcome

    data = encode_outcome(RunOutcome((), outcome.import_error, outcome.stdout, outcome.stderr, outcome.sha256))
    data["results"] = [{"status": r.status, "seconds": float(r.seconds)} for r in outcome.results]
    return data


# --- in a Dask worker ---------------------------------------------------------------------------

PLUGIN_NAME = "grader"
"""The name the client registers `GraderWorker` under on every worker (``Worker.plugins``)."""

QUIET_CALLBACKS = ("profile", "profile-cycle", "monitor")
"""The worker's periodic callbacks `GraderWorker` stops, all in the worker's event loop, beside the
grading thread: Dask's statistical profiler, which samples every thread's stack every 10 ms (grading
has no use for its flame graphs, and it took most of the worker's GIL; the same as
``distributed.worker.profile.enabled: false``), and the system monitor, which reads the process's
CPU, memory, network and disk counters twice a second for the dashboard. The memory monitor, which
keeps the worker within its memory limit, and the heartbeats stay."""

TICK_MS = 1000
"""How often the worker's event loop measures its own latency (Dask: every 20 ms; it warns only
past 3 s of blocking, which a tick a second still sees)."""

MEMORY_MONITOR_MS = 1000
"""How often the worker's memory monitor reads its process's memory (Dask: every 100 ms, the same as
``distributed.worker.memory.monitor-interval: 1s``). A grading worker's memory is flat (its jobs'
memory is the sandbox's to limit, and a chunk's answer is small): a reading a second still pauses
or spills it in time, and the nanny's own monitor, which restarts a worker past its limit, is the
cluster's. Two idle workers spent 15 ms of CPU a second, 7.5 with a reading a second."""


class GraderWorker(WorkerPlugin):
    """What a Dask worker keeps for the grader: its configured runners and the batch's calls.

    Registered on every worker by the client (`distributed.Client.register_plugin`, a
    ``distributed.WorkerPlugin``): on a worker, `run_chunk` finds it in ``Worker.plugins``. Each
    runner is a grader configuration (`runner`) with its sandbox zygote started once and kept warm
    across chunks; the calls are decoded once per batch. On set-up it stops the worker's statistical
    profiler (`QUIET_CALLBACKS`); on tear-down it ends its runners (and their zygotes).
    """

    name = PLUGIN_NAME
    idempotent = True
    """Registered again by every grading run: a worker keeps the instance it has, and its warm runners."""

    def __init__(self) -> None:
        self.runners: dict[str, Any] = {}
        self.calls: dict[str, tuple[Call, ...]] = {}
        self.collections: dict[int, tuple[Any, dict[str, Any], str]] = {}
        self.texts: dict[Any, str] = {}
        self.lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {}  # what travels to a worker: the class; its state is made there

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def setup(self, worker: Any) -> None:
        """Keep the worker's event loop light: stop its profiler and system monitor (`QUIET_CALLBACKS`),
        and measure its latency (`TICK_MS`) and its memory (`MEMORY_MONITOR_MS`) once a second."""
        callbacks = getattr(worker, "periodic_callbacks", {})
        for name in QUIET_CALLBACKS:
            callback = callbacks.pop(name, None)
            if callback is not None:
                callback.stop()
        for name, least in (("tick", TICK_MS), ("memory_monitor", MEMORY_MONITOR_MS)):
            callback = callbacks.get(name)
            if callback is not None:
                callback.callback_time = max(callback.callback_time, least)

    def teardown(self, worker: Any) -> None:
        """End every runner (its sandbox zygote stops with it) and forget what was collected for each
        (kept by the runner's id, which a later runner may reuse)."""
        with self.lock:
            runners, self.runners = list(self.runners.values()), {}
            self.collections.clear()
        for config in runners:
            try:
                config.hooks.unconfigure(config=config)
            except Exception:  # noqa: BLE001, S110 - the worker is closing either way
                pass

    def runner(self, settings: dict[str, Any], slots: int = 1) -> Any:
        """This worker's configured grader (sandbox zygote started once), for these settings."""
        key = json.dumps(settings, sort_keys=True)
        with self.lock:
            config = self.runners.get(key)
            if config is not None:
                return config
            from grader.config.parser import for_command

            argv = [
                "-",
                "--import-timeout",
                repr(float(settings["import_timeout"])),
                "--submission-timeout",
                repr(float(settings["submission_timeout"])),
                "--jobs",
                str(slots),
                *(["--insecure"] if settings["insecure"] else []),
                *(["--cpu-weight", str(settings["cpu_weight"])] if settings.get("cpu_weight") else []),
                *(["--pack", settings["pack"]] if settings.get("pack") else []),
                *settings.get("judging", ()),
            ]
            remove_stale_scratch()  # what workers killed mid-chunk left on this machine
            config = for_command("grade", argv, plugins=settings["plugins"], pack=settings.get("pack"))
            config.options.out = None  # a worker writes no file: results go back to the instructor
            config.hooks.configure(config)  # its zygote is forked by a lasting thread (grader.execution.servers)
            self.runners[key] = config
            return config

    def batch_calls(self, calls_text: str) -> tuple[Call, ...]:
        """The batch's calls (`decode_calls`), decoded once per worker."""
        digest = hashlib.sha256(calls_text.encode()).hexdigest()
        with self.lock:
            calls = self.calls.get(digest)
            if calls is None:
                calls = self.calls[digest] = decode_calls(calls_text)
            return calls

    def collected(self, config: Any, judge: dict[str, Any]) -> tuple[Any, str]:
        """The runner's collected checks, and "" when its course judges as the client's does, else why not.

        The specs and reference (their hash) and every setting a result depends on, the course
        secret's fingerprint included (`grader.grading.settings.result_settings`), must be the
        client's: then a result judged here is the one the client would judge. The checks are
        collected once per runner; the comparison is made for each chunk (clients differ).
        """
        with self.lock:
            kept = self.collections.get(id(config))
            if kept is None:
                from grader.collected import COLLECTED
                from grader.grading.session import collect
                from grader.grading.settings import result_settings

                try:
                    gathered = collect(config)
                except Exception as exc:  # noqa: BLE001 - said to the client, which judges instead
                    kept = (None, {}, f"the worker cannot collect the course's checks ({type(exc).__name__}: {exc})")
                else:
                    config.stash[COLLECTED] = gathered
                    kept = (gathered, result_settings(config), "")
                self.collections[id(config)] = kept
        collected, mine, failed = kept
        if failed or collected is None:
            return None, failed
        if collected.spec_hash != judge["spec_hash"]:
            return collected, "the worker's specs or reference differ from this run's (spec hash)"
        if mine != judge["settings"]:
            differ = sorted(k for k in set(mine) | set(judge["settings"]) if mine.get(k) != judge["settings"].get(k))
            return collected, f"the worker's settings differ from this run's: {', '.join(differ)}"
        return collected, ""

    def run_chunk(
        self,
        payload: str,
        calls_text: str,
        settings: dict[str, Any],
        slots: int = 1,
        judge: dict[str, Any] | None = None,
    ) -> bytes:
        """`run_chunk` with this worker's state.

        A runner whose sandbox zygote died (killed from outside, or by the out-of-memory killer) is
        dropped and the chunk runs once more on a fresh one: the runner is kept across runs, and
        every later chunk sent to this worker would fail with it. A second loss is the client's to
        handle (it grades the chunk's submissions itself).
        """
        lost: JobStarterLost | None = None
        for _ in range(2):
            config = self.runner(settings, slots)
            try:
                return self._run_chunk(config, payload, calls_text, judge)
            except JobStarterLost as exc:
                self.drop_runner(settings, config)
                lost = exc
        raise RuntimeError(f"this worker's sandbox could not start jobs twice in a row: {lost}")

    def drop_runner(self, settings: dict[str, Any], config: Any) -> None:
        """End and forget ``config``, this worker's runner for these settings (its zygote, if still alive, stops with it).

        Only that runner: another chunk on this worker may have lost the same zygote first and
        made a fresh runner already, which its chunk is running on.
        """
        key = json.dumps(settings, sort_keys=True)
        with self.lock:
            kept = self.runners.get(key) is config
            if kept:  # else dropped already, by the chunk that lost it first
                del self.runners[key]
                self.collections.pop(id(config), None)
        if not kept:
            return
        try:
            config.hooks.unconfigure(config=config)
        except Exception:  # noqa: BLE001, S110 - a dead zygote's runner ends as well as it can
            pass

    def _run_chunk(self, config: Any, payload: str, calls_text: str, judge: dict[str, Any] | None) -> bytes:
        from grader.shards import encode_outcome

        calls = self.batch_calls(calls_text)
        collected, refused = self.collected(config, judge) if judge is not None else (None, "")
        judging = judge is not None and collected is not None and not refused
        items = []
        wires: dict[bytes, int] = {}
        exercises: dict[str, int] = {}
        # In memory where there is room (`memory_scratch`: a folder and a file made and removed per
        # submission cost the disk's journal twice a millisecond of system time, and held up the job slot).
        # Named by this worker's pid (`scratch_prefix`): a worker killed mid-chunk leaves its folder,
        # and the next grader (or this worker's next runner) to start removes it (`remove_stale_scratch`).
        with tempfile.TemporaryDirectory(prefix=scratch_prefix("dask"), dir=memory_scratch(len(payload))) as tmp:
            for i, item in enumerate(json.loads(payload)):
                folder = Path(tmp) / str(i)
                folder.mkdir()
                path = folder / Path(item["name"]).name
                path.write_bytes(base64.b64decode(item["data"]))
                sub = Submission(item["id"], str(folder), str(path), item["sha256"])
                outcome = config.hooks.run_calls(submission=sub, calls=list(calls), config=config)
                entry: dict[str, Any] = {"id": item["id"]}
                here = judging and bool(item.get("judge"))
                if here and judge is not None and not judge["values"]:
                    entry["outcome"] = timed_outcome(outcome)
                else:
                    entry["outcome"] = encode_outcome(outcome, wires)
                if here and collected is not None:
                    from grader.grading.session import grade_submission

                    result = grade_submission(sub, collected, config, outcome)
                    with self.lock:
                        entry["result"] = encode_result(result, exercises, self.texts)
                items.append(entry)
        return encode_answer(items, wires, exercises, refused)


def run_chunk(payload: str, calls_text: str, settings: dict[str, Any], judge: dict[str, Any] | None = None) -> bytes:
    """Run a chunk of submissions in this Dask worker; return their outcomes (`encode_answer`).

    Parameters
    ----------
    payload : str
        JSON list of ``{"id", "name", "sha256", "data", "judge"}`` (the file's bytes, base64; whether to
        judge it here, when ``judge`` is given).
    calls_text : str
        `encode_calls` of the batch's calls.
    settings : dict
        Timeouts, ``insecure``, ``-p`` plugins, and the options that judging reads (``judging``).
    judge : dict, optional
        To judge and score here: the client's ``spec_hash`` and ``settings``
        (`grader.grading.settings.result_settings`), which this worker's must equal, and
        ``values``, whether the client needs the calls' values (else `timed_outcome`).

    Returns
    -------
    bytes
        `encode_answer` of ``{"id", "outcome"}`` items (`grader.shards.encode_outcome`), in the payload's order.

    Raises
    ------
    RuntimeError
        Outside a Dask worker that has the grader's `GraderWorker` (the client registers it).
    """
    from distributed import get_worker

    worker = get_worker()
    state = worker.plugins.get(PLUGIN_NAME)
    if not isinstance(state, GraderWorker):
        raise RuntimeError("this Dask worker has no grader plugin: run 'grader grade --dask', which registers it")
    return state.run_chunk(payload, calls_text, settings, max(1, int(worker.state.nthreads)), judge)
