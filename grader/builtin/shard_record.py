"""Built-in plugin: the record of a shard (``grade --shard K/N``) and its replay in ``grader merge``.

In a shard's run it keeps, per submission, the located submission, the
outcome its calls returned (as every ``grader_run_calls`` wrapper saw it:
this wrapper is the outermost) and its final result, and writes them with
the manifest into ``DIR/shard/`` (`grader.shards.write_record`). In a merge
it answers ``grader_run_calls`` with the recorded outcome, so the wrappers
that keep something per submission (timing, staff pages, similarity) keep
it as in the shard's run. Everything else is `grader.shards`.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

from grader.collected import COLLECTED
from grader.config.secret import course_secret
from grader.grading.slices import CLASS_IDS, STASH_KEY
from grader.markers import hookimpl
from grader.models import Call, Submission, SubmissionResult
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_SUBMISSIONS = StashKey[dict[str, Any]]()
_OUTCOMES = StashKey[dict[str, Any]]()
_LINES = StashKey[dict[str, Any]]()
_WIRES = StashKey[dict[bytes, int]]()
_EXERCISES = StashKey[dict[str, int]]()

_LOCK = threading.Lock()


def _sharded(config: Any) -> bool:
    return STASH_KEY in config.stash and config.out_dir is not None


@hookimpl
def grader_collection_finish(submissions: Sequence[Submission], collected: Any, config: Config) -> None:
    if _sharded(config):
        config.stash[_SUBMISSIONS] = {s.id: s for s in submissions}
        config.stash[_OUTCOMES] = {}
        config.stash[_LINES] = {}
        config.stash[_WIRES] = {}
        config.stash[_EXERCISES] = {}


@hookimpl(wrapper=True, tryfirst=True)
def grader_run_calls(submission: Submission, calls: Sequence[Call], config: Config) -> Generator[None, Any, Any]:
    """Keep the outcome every other wrapper saw (outermost: ``tryfirst``); a catalogue entry's is no student's."""
    outcome = yield
    if outcome is not None and _sharded(config) and not submission.reference:
        with _LOCK:
            config.stash[_OUTCOMES][submission.id] = outcome
    return outcome


@hookimpl
def grader_submission_graded(result: SubmissionResult, config: Config) -> None:
    if not _sharded(config):
        return
    submission = config.stash[_SUBMISSIONS].get(result.id)
    if submission is None:
        return
    with _LOCK:
        outcome = config.stash[_OUTCOMES].get(result.id)
        lines = config.stash[_LINES]
        if result.id in lines:  # handed over again (a writer failed on it): its outcome's frames as first written
            line = _with_result(lines[result.id], result)
        else:
            # each distinct frame and exercise result written once per shard (the lines keep the order they
            # are made in)
            from grader.shards import record_line  # here: a run that is not a shard never needs grader.shards

            line = record_line(submission, result, outcome, config.stash[_WIRES], config.stash[_EXERCISES])
        # compressed until the record is written: a submission's line is ~40 KB of JSON, ~8 KB compressed
        lines[result.id] = zlib.compress(line.encode(), 1)


def _with_result(kept: bytes, result: SubmissionResult) -> str:
    """A kept record line with another result (the error result that replaced the first), in the first's place:
    its exercises written out and not kept in the table (`grader.shards.encode_exercises` without one)."""
    import json

    from grader.models import result_to_dict
    from grader.shards import encode_exercises

    data = json.loads(zlib.decompress(kept))
    data["result"] = dict(result_to_dict(result, exercises=False), exercises=encode_exercises(result, None))
    return json.dumps(data, allow_nan=False, ensure_ascii=True) + "\n"


@hookimpl(trylast=True)
def grader_write_reports(report: Any, config: Config) -> None:
    """Write ``DIR/shard/manifest.json`` and ``records.jsonl.gz`` (after the other writers: ``trylast``)."""
    if not _sharded(config):
        return
    assert config.out_dir is not None  # _sharded
    from grader.shards import SUBFOLDER, manifest, write_record

    lines = config.stash.get(_LINES, {})
    ids = [s.id for s in report.submissions if s.id in lines]
    wanted = set(ids)
    write_record(
        config.out_dir / SUBFOLDER,
        manifest(config, config.stash[COLLECTED], ids),
        # in the order they were made (a line names a frame an earlier one holds); the manifest lists the class's
        (zlib.decompress(line).decode() for sid, line in lines.items() if sid in wanted),
        secret=course_secret(config),
    )


@hookimpl
def grader_terminal_summary(report: Any, config: Config, write: Any) -> None:
    if _sharded(config):
        spec = config.stash[STASH_KEY]
        write(
            f"shard {spec}: {len(report.submissions)} of {len(config.stash.get(CLASS_IDS, []))} "
            f"submissions; merge every shard with 'grader merge DIR... --out DIR'"
        )
