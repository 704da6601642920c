"""``grader merge``: the folders of every shard of a class combined into exactly the files one run writes.

The shards are checked against each other and against this run (`check_shards`) before any record
is read; each record is then replayed through the same hooks as a grading run (`merge`).
"""

from __future__ import annotations

import json
import types
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from grader._version import __version__
from grader.collected import COLLECTED
from grader.errors import UsageError
from grader.grading.slices import shard_of
from grader.markers import hookimpl
from grader.models import CallResult, RunOutcome, Submission, SubmissionResult
from grader.shards import (
    MAX_RECORD_BYTES,
    RECORDS,
    REPLAY_KEY,
    Shard,
    _strict_json,
    _submission_from,
    check_seal,
    decode_outcome,
    read_shard,
    result_from_record,
    run_of,
    values_read,
)

__all__ = ["check_shards", "merge", "merge_options"]


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text[:12] + "…" if len(text) > 16 else text


def _first_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            return f"{key.replace('_', '-').replace(':sha256', ' (file content)')}: {_short(a.get(key))} vs {_short(b.get(key))}"
    return ""


def check_shards(shards: Sequence[Shard], config: Any) -> None:
    """Refuse shards that do not make one class together, or were made differently from each other or this merge.

    Raises
    ------
    grader.errors.UsageError
        Naming the shards at fault: another grader version, specs,
        reference, course secret, settings, options or plugins; another
        count N or another class; another run (a shard left from an earlier
        run: a submission graded from other content); a shard missing or
        given twice.
    """
    if not shards:
        raise UsageError("merge: give the shard folders to merge")
    first = shards[0]
    m0 = first.manifest
    what = (
        ("grader_version", "grader version", "grade every shard with the same grader"),
        (
            "spec_hash",
            "specs or reference (spec hash)",
            "grade every shard with the same --specs and --reference",
        ),
        (
            "reference_sha256",
            "reference",
            "grade every shard with the same --reference",
        ),
        (
            "secret_fingerprint",
            "course secret",
            "grade every shard with the same course secret",
        ),
        ("plugins", "plugins (-p)", "grade every shard with the same -p options"),
    )
    for other in shards[1:]:
        _check_pair(first, other, what)
    _check_complete(shards, m0["shard"]["n"])
    _check_against_merge(m0, config)
    _check_holders(shards)


def _check_pair(first: Shard, other: Shard, what: Sequence[tuple[str, str, str]]) -> None:
    """Refuse ``other`` when it was made differently from ``first`` (``what``: key, label, fix) or in another run."""
    m0, m = first.manifest, other.manifest
    for key, label, fix in what:
        if m[key] != m0[key]:
            raise UsageError(
                f"merge: shards {first.name} and {other.name} were made with different {label} "
                f"({_short(m0[key])} vs {_short(m[key])}); {fix}"
            )
    for key, label in (("settings", "settings"), ("options", "options")):
        if m[key] != m0[key]:
            raise UsageError(
                f"merge: shards {first.name} and {other.name} were graded with different {label} "
                f"({_first_difference(m0[key], m[key])}); grade every shard with the same options"
            )
    if m["shard"]["n"] != m0["shard"]["n"]:
        raise UsageError(
            f"merge: shards {first.name} and {other.name} cut the class into different numbers of "
            "shards; merge the shards of one run of N"
        )
    if m["class"] != m0["class"] or m["class_ids"] != m0["class_ids"]:
        raise UsageError(
            f"merge: shards {first.name} and {other.name} graded different classes "
            f"({m0['class']['count']} vs {m['class']['count']} submissions, or other ids); grade "
            "every shard from the same PATHs"
        )
    if m["class_listing"] != m0["class_listing"] or m["run"] != m0["run"] or run_of(m) != m["run"]:
        changed = next(
            (
                f"{a[0]!r} was graded from other content ({_short(a[1])} vs {_short(b[1])})"
                for a, b in zip(m0["class_listing"], m["class_listing"], strict=False)
                if a != b
            ),
            f"run {_short(m0['run'])} vs {_short(m['run'])}",
        )
        raise UsageError(
            f"merge: shards {first.name} and {other.name} belong to different runs: {changed}; a shard "
            "left from an earlier run? grade every shard of one run from the same files and merge those"
        )


def _check_complete(shards: Sequence[Shard], n: int) -> None:
    """Refuse a shard given twice, or missing, of the ``n``."""
    seen: dict[int, Shard] = {}
    for shard in shards:
        k = shard.manifest["shard"]["k"]
        if k in seen:
            raise UsageError(
                f"merge: shard {k}/{n} is given twice: {seen[k].folder} and {shard.folder}; give each shard once"
            )
        seen[k] = shard
    missing = [k for k in range(1, n + 1) if k not in seen]
    if missing:
        shown = ", ".join(f"{k}/{n}" for k in missing[:20]) + (" ..." if len(missing) > 20 else "")
        raise UsageError(
            f"merge: {len(missing)} of {n} shards missing: {shown}; grade "
            f"{'it' if len(missing) == 1 else 'them'} with --shard K/{n} and merge every shard"
        )


def _check_against_merge(m0: dict[str, Any], config: Any) -> None:
    """Refuse shards made by another grader version, course secret, catalogue of mistakes or -p than this merge."""
    mine = {"grader_version": __version__}
    if m0["grader_version"] != mine["grader_version"]:
        raise UsageError(
            f"merge: the shards were made by grader {m0['grader_version']}, this is {__version__}; "
            "merge with the grader that graded them"
        )
    from grader.config.secret import course_secret
    from grader.grading.settings import result_settings

    if course_secret(config).fingerprint != m0["secret_fingerprint"]:
        raise UsageError(
            "merge: the shards were graded with another course secret than this merge's "
            f"(fingerprint {_short(m0['secret_fingerprint'])}); set the same secret"
        )
    mine_settings = result_settings(config, with_secret=False)
    if mine_settings.get("diagnosis") != m0["settings"].get("diagnosis"):
        raise UsageError(
            "merge: the shards were graded with another catalogue of mistakes (--mutants, "
            "--no-diagnosis) than this merge's; merge with the same"
        )
    if sorted(str(p) for p in config.option("p") or ()) != m0["plugins"]:
        raise UsageError(
            f"merge: the shards were graded with -p {' '.join(m0['plugins']) or '(none)'}; give the "
            "merge the same -p options"
        )


def _check_holders(shards: Sequence[Shard]) -> None:
    """Refuse a shard holding a submission that belongs to another shard (or that another shard holds too)."""
    holders: dict[str, Shard] = {}
    for shard in shards:
        n_ = shard.manifest["shard"]["n"]
        for sid in shard.manifest["ids"]:
            if shard_of(sid, n_) != shard.manifest["shard"]["k"] or sid in holders:
                raise UsageError(f"merge: {shard.name} holds {sid!r}, which belongs to another shard; grade it again")
            holders[sid] = shard


def merge_options(options: Any, parser: Any) -> Any:
    """The options of the merged run: an unsharded ``grade``'s, with the shards' options that change files.

    Reads and checks every shard's manifest (`read_shard`; their agreement
    is checked by `check_shards` once the run is configured) and returns a
    ``grade`` namespace: the grade parser's defaults, the shards' recorded
    options, and this merge's own ``--out``, ``--json``, ``--csv``,
    ``--junit``, ``-q``, ``--specs``, ``--reference``, ``--mutants``, ``-p``.
    The sandbox stays off (``insecure``): a merge runs no submission.
    """
    shards = [read_shard(folder) for folder in options.shard_dirs]
    grade = parser.parse_args(["grade", "-"])
    if shards:
        for name, value in shards[0].manifest["options"].items():
            if ":" not in name and hasattr(grade, name):
                setattr(grade, name, value)
    for name, value in vars(options).items():
        if name in ("command", "shard_dirs"):
            continue
        setattr(grade, name, value)
    grade.paths = []
    grade.insecure = True  # a merge runs nothing: no sandbox is started
    grade._shards = shards
    return grade


def _records(shard: Shard) -> Iterator[tuple[int, Any]]:
    import gzip

    path = shard.folder / RECORDS
    if not path.is_file():
        raise UsageError(
            f"{path}: missing; grade shard {shard.manifest['shard']['k']}/{shard.manifest['shard']['n']} again"
        )
    try:
        with gzip.open(path, "rb") as f:
            for number, line in enumerate(f, start=1):
                if len(line) > MAX_RECORD_BYTES:
                    raise UsageError(f"{path}: line {number} is larger than {MAX_RECORD_BYTES >> 20} MiB")
                yield number, _strict_json(line)
    except (OSError, EOFError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise UsageError(
            f"{path}: unreadable ({str(exc)[:200] or 'nested too deeply'}); grade that shard again"
        ) from None


def merge(config: Any) -> Any:
    """Write the files of one unsharded run from the shards' records; return its `GradingReport`.

    The run's specs and reference are collected (their hash must be the
    shards'); then, in the class's order, the writers get what they get in
    a grading run: ``grader_collection_finish`` with every submission, per
    submission its recorded outcome through ``grader_run_calls`` (answered
    by the shard plugin from ``config.stash[REPLAY_KEY]``, so every wrapper
    of that hook sees it) and its final result through
    ``grader_submission_graded``, and ``grader_write_reports`` once.
    ``grader_cached_result`` is asked too, as in a grading run (its answer
    is not used): the SQLite gradebook then keeps every result under the
    shards' keys, so ``grader grade`` into the merged folder resumes from it.

    Raises
    ------
    grader.errors.UsageError
        If the shards do not agree (`check_shards`), a record is missing or
        unreadable, or the specs differ from the shards'.
    """
    from grader.config.secret import course_secret
    from grader.errors import GraderError
    from grader.fileio import make_out_dir
    from grader.grading import session
    from grader.models import GradingReport

    shards: list[Shard] = config.options._shards
    check_shards(shards, config)
    out = Path(config.out_dir).resolve()
    for shard in shards:
        if out == shard.folder.parent.resolve():
            k, n = shard.manifest["shard"]["k"], shard.manifest["shard"]["n"]
            raise UsageError(
                f"merge: --out {config.out_dir}: that is shard {k}/{n}'s own folder; merge into another folder"
            )
    for shard in shards:  # before a record is read: an edited shard is never trusted
        check_seal(shard, course_secret(config))
    m0 = shards[0].manifest
    collected = session.collect(config)
    if collected.spec_hash != m0["spec_hash"]:
        raise UsageError(
            f"merge: the shards were graded with other specs or another reference than --specs "
            f"{config.option('specs')} --reference {config.option('reference')} (spec hash "
            f"{_short(m0['spec_hash'])} vs {_short(collected.spec_hash)}); merge with the same"
        )
    calls = collected.calls
    # Under a course secret the seals (checked above) prove every record was written by this grader:
    # without one their key is public, and each result is checked field by field before a writer sees it.
    entries = _read_records(shards, calls, values_read(config), sealed=course_secret(config).key is not None)
    class_ids = m0["class_ids"]
    lost = [sid for sid in class_ids if sid not in entries]
    if lost:
        raise UsageError(
            f"merge: {len(lost)} submission(s) of the class are in no shard: "
            f"{', '.join(map(repr, lost[:10]))}; grade their shard again"
        )
    make_out_dir(config.out_dir)
    order = [entries[sid] for sid in class_ids]
    config.stash[COLLECTED] = collected
    config.hooks.collection_finish(submissions=[s for s, _, _ in order], collected=collected, config=config)
    replay = config.stash.setdefault(REPLAY_KEY, {})
    # The runner takes each submission's recorded outcome from here (grader_known_outcome): no code runs in a merge.
    known = hookimpl(trylast=True)(lambda submission, calls, config: replay.get(submission.id))
    config.pluginmanager.register(types.SimpleNamespace(grader_known_outcome=known), name="shard-replay")
    # The result keys are the shards' (a later unsharded run resumes from the merged gradebook): the shards'
    # sandbox setting, now that configuring is over (a merge starts no sandbox).
    config.options.insecure = m0["settings"].get("insecure", False)
    results = []
    for sub, result, outcome in order:
        if sub.file is not None and not sub.problem:  # as a grading run asks: the gradebook learns the key
            key = session.result_key(sub, collected, config)
            config.hooks.cached_result(submission=sub, key=key, config=config)
        if outcome is not None:
            replay[sub.id] = _replayed(outcome, calls)
            config.hooks.run_calls(submission=sub, calls=list(calls), config=config)
            replay.pop(sub.id, None)
        results.append(session._hand_over(result, sub, collected, config))
    report = GradingReport(
        __version__,
        collected.spec_hash,
        config.command,
        tuple(results),
        collected.exercises,
    )
    errors: list[GraderError] = []
    failed = session.call_each(config, "grader_write_reports", report=report, config=config, _errors=errors)
    if errors:
        raise errors[0]
    if failed:
        names = ", ".join(f"{plugin} ({fault})" for plugin, fault in failed)
        raise session.WriterError(
            f"{len(failed)} report writer(s) failed: {names}; every other file was written "
            "(the traceback of each is above)"
        )
    return report


_Kept = tuple[Any, ...]
"""A recorded outcome kept until its turn: ``("values", its JSON compressed, its shard's frames)`` when a
plugin reads the calls' values, else ``("timed", ...)``: only its statuses, seconds and texts (`_timed`)."""


def _timed(outcome: RunOutcome, statuses: dict[tuple[str, ...], tuple[str, ...]]) -> _Kept:
    """What a merge whose plugins read no value keeps of an outcome: the calls' statuses (one tuple shared by
    every equal one), their seconds (4 bytes each, as `grader.builtin.timing` keeps them) and the texts."""
    from array import array

    kinds = tuple(r.status for r in outcome.results)
    seconds = array("f", [max(float(r.seconds), 0.0) for r in outcome.results])
    texts = (outcome.import_error, outcome.stdout, outcome.stderr, outcome.sha256)
    return ("timed", statuses.setdefault(kinds, kinds), seconds, *texts)


def _replayed(kept: _Kept, calls: Any) -> RunOutcome:
    """A recorded outcome as the runner hands it to the wrappers of ``grader_run_calls`` (decoded again, or
    its statuses and seconds only: no plugin of the merge reads a value)."""
    if kept[0] == "values":
        return decode_outcome(json.loads(zlib.decompress(kept[1])), calls, kept[2])
    _, kinds, seconds, import_error, stdout, stderr, sha256 = kept
    results = tuple(CallResult(k, seconds=s) for k, s in zip(kinds, seconds))
    return RunOutcome(results, import_error, stdout, stderr, sha256)


def _read_records(
    shards: Sequence[Shard], calls: Any, values: bool = True, sealed: bool = False
) -> dict[str, tuple[Submission, SubmissionResult, _Kept | None]]:
    """Every shard's records, checked, by submission id: its submission, result and outcome (`_Kept`).

    ``values``: whether a plugin of the merge reads the calls' values (`grader.shards.values_read`);
    ``sealed``: whether the shards' seals were checked under a course secret (then a result's fields are
    not checked again: `grader.shards.check_result_data` is for records whose seal anyone could make).

    Raises
    ------
    grader.errors.UsageError
        If a record is unreadable, or a shard holds other results than its manifest lists.
    """

    entries: dict[str, tuple[Submission, SubmissionResult, _Kept | None]] = {}
    statuses: dict[tuple[str, ...], tuple[str, ...]] = {}
    for shard in shards:
        expected = shard.manifest["ids"]
        got = []
        frames: list[bytes] = []  # the shard's tables of frames and exercise results, rebuilt line by line
        exercises: list[Any] = []
        checked: dict[Any, str] = {}
        for number, data in _records(shard):
            where = f"{shard.folder / RECORDS}: line {number}"
            try:
                if type(data) is not dict or set(data) != {
                    "submission",
                    "result",
                    "outcome",
                }:
                    raise ValueError("not a record")
                sub = _submission_from(data["submission"])
                result = result_from_record(data["result"], exercises, check=not sealed)
                outcome: _Kept | None = None
                if data["outcome"] is not None:
                    # checked now: a refused merge writes nothing
                    if values:  # kept compressed until its turn (a class's outcomes are ~40 KB a submission as JSON)
                        decode_outcome(data["outcome"], calls, frames, grow=True)
                        compressed = zlib.compress(json.dumps(data["outcome"], allow_nan=False).encode(), 1)
                        outcome = ("values", compressed, frames)
                    else:  # each distinct frame checked once
                        decoded = decode_outcome(data["outcome"], calls, frames, checked=checked, grow=True)
                        outcome = _timed(decoded, statuses)
            except (KeyError, TypeError, ValueError) as exc:
                raise UsageError(f"{where}: not a shard record ({exc}); grade that shard again") from None
            if result.id != sub.id:
                raise UsageError(f"{where}: the result is of {result.id!r}, the submission {sub.id!r}")
            got.append(sub.id)
            entries[sub.id] = (sub, result, outcome)
        if sorted(got) != sorted(expected) or len(set(got)) != len(got):  # lines in the order they were made
            raise UsageError(
                f"{shard.folder / RECORDS}: holds {len(got)} results, the manifest lists {len(expected)}; "
                "grade that shard again"
            )
    return entries
