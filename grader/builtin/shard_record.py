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
from grader.shards import (
    SUBFOLDER,
    manifest,
    record_line,
    write_record,
)
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_SUBMISSIONS = StashKey[dict[str, Any]]()
_OUTCOMES = StashKey[dict[str, Any]]()
_LINES = StashKey[dict[str, Any]]()

_LOCK = threading.Lock()


def _sharded(config: Any) -> bool:
    return STASH_KEY in config.stash and config.out_dir is not None


@hookimpl
def grader_collection_finish(submissions: Sequence[Submission], collected: Any, config: Config) -> None:
    if _sharded(config):
        config.stash[_SUBMISSIONS] = {s.id: s for s in submissions}
        config.stash[_OUTCOMES] = {}
        config.stash[_LINES] = {}


@hookimpl(wrapper=True, tryfirst=True)
def grader_run_calls(submission: Submission, calls: Sequence[Call], config: Config) -> Generator[None, Any, Any]:
    """Keep the outcome every other wrapper saw (outermost: ``tryfirst``)."""
    outcome = yield
    if outcome is not None and _sharded(config):
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
    # compressed until the record is written: a submission's line is ~40 KB of JSON, ~8 KB compressed
    config.stash[_LINES][result.id] = zlib.compress(record_line(submission, result, outcome).encode(), 1)


@hookimpl(trylast=True)
def grader_write_reports(report: Any, config: Config) -> None:
    """Write ``DIR/shard/manifest.json`` and ``records.jsonl.gz`` (after the other writers: ``trylast``)."""
    if not _sharded(config):
        return
    assert config.out_dir is not None  # _sharded
    lines = config.stash.get(_LINES, {})
    ids = [s.id for s in report.submissions if s.id in lines]
    write_record(
        config.out_dir / SUBFOLDER,
        manifest(config, config.stash[COLLECTED], ids),
        (zlib.decompress(lines[i]).decode() for i in ids),
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
