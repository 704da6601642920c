"""What makes the grader's own process cheap per submission, pinned without timing (issue 16).

An answer judged once is not judged again (`grader.grading.judging.VerdictCache`), and the result of a
whole class graded together equals each submission's result graded alone: the shortcuts change
how much work the grader does, never what it writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SUBMISSIONS

from grader.grading.judging import VerdictCache
from grader.models import CallResult
from grader.stash import Stash
from harness.test_checks import REF, make, plain, prepare


class _Counting:
    """A kind that counts how often it judges, passing on to the real softmax kind."""

    name = "counting"

    def __init__(self, real: object, cacheable: bool = True) -> None:
        self.real = real
        self.cacheable = cacheable
        self.judged = 0

    def judge(self, check, prepared, results, context):  # noqa: ANN001, ANN201 - the kind protocol
        self.judged += 1
        return self.real.judge(check, prepared, results, context)


def _softmax_check():
    from harness.test_checks import KINDS

    check, ctx = make("compare", "softmax", {"scores": {"normal": [4]}})
    prepared = prepare(check, ctx)
    return check, ctx, prepared, KINDS["compare"]


def _right(prepared) -> object:  # noqa: ANN001
    """The reference's answer to the check's one call, as a job sends it back."""
    return plain(REF["softmax"](*(np.asarray(a) for a in prepared.calls[0].args)))


def _answer(value: object, wire: bytes) -> CallResult:
    return CallResult("returned", value=value, wire=wire)


def test_the_same_answer_is_judged_once_and_gets_the_same_verdict() -> None:
    check, ctx, prepared, real = _softmax_check()
    kind = _Counting(real)
    cache = VerdictCache.of(Stash())
    right = _right(prepared)
    first = cache.judge(check, prepared, [_answer(right, b"frame-right")], kind, ctx, True)
    again = cache.judge(check, prepared, [_answer(right, b"frame-right")], kind, ctx, True)
    assert first.status == "passed" and again is first and kind.judged == 1
    wrong = [0.1, 0.2, 0.3, 0.4]
    failed = cache.judge(check, prepared, [_answer(wrong, b"frame-wrong")], kind, ctx, True)
    assert failed.status == "failed" and "differs from the expected value" in failed.message
    assert kind.judged == 2
    # Shown or not is part of the key: a hidden verdict is never handed to a shown check, or back.
    hidden = cache.judge(check, prepared, [_answer(wrong, b"frame-wrong")], kind, ctx, False)
    assert kind.judged == 3 and hidden.status == "failed"


def test_answers_without_frame_bytes_and_kinds_that_opt_out_are_judged_every_time() -> None:
    check, ctx, prepared, real = _softmax_check()
    right = _right(prepared)
    cache = VerdictCache.of(Stash())
    kind = _Counting(real)
    for _ in range(3):
        assert cache.judge(check, prepared, [CallResult("returned", value=right)], kind, ctx, True).status == "passed"
    assert kind.judged == 3  # no wire (a result the grader made, not a frame): never kept
    opted_out = _Counting(real, cacheable=False)
    for _ in range(3):
        cache.judge(check, prepared, [_answer(right, b"frame")], opted_out, ctx, True)
    assert opted_out.judged == 3


def test_another_collection_s_check_never_gets_a_kept_verdict() -> None:
    check, ctx, prepared, real = _softmax_check()
    _, ctx2, prepared2, _ = _softmax_check()  # equal, but another object: another run's collection
    kind = _Counting(real)
    cache = VerdictCache.of(Stash())
    right = _right(prepared)
    cache.judge(check, prepared, [_answer(right, b"frame")], kind, ctx, True)
    cache.judge(check, prepared2, [_answer(right, b"frame")], kind, ctx2, True)
    assert kind.judged == 2


def test_the_table_starts_again_past_its_byte_budget(monkeypatch) -> None:  # noqa: ANN001
    check, ctx, prepared, real = _softmax_check()
    monkeypatch.setattr(VerdictCache, "MAX_BYTES", 100)
    kind = _Counting(real)
    cache = VerdictCache.of(Stash())
    right = _right(prepared)
    for n in range(5):
        cache.judge(check, prepared, [_answer(right, bytes([n]) * 60)], kind, ctx, True)
    assert len(cache._table) == 1  # every second answer pushed the table past 100 bytes
    cache.judge(check, prepared, [_answer(right, bytes([4]) * 60)], kind, ctx, True)
    assert kind.judged == 5  # the last one is still kept


@pytest.mark.slow
def test_a_class_graded_together_gets_each_submission_s_own_result(tmp_path: Path) -> None:
    """Copies of every sample graded in one run equal the samples graded one by one."""
    samples = sorted(p for p in SUBMISSIONS.iterdir() if (p / "attention.py").is_file())
    samples = [p for p in samples if p.name != "hangs"]  # a 2 s timeout per call: not twice here
    together = tmp_path / "class"
    for copy in range(2):
        for sample in samples:
            shutil.copytree(sample, together / f"{sample.name}-{copy}")
    env = dict(os.environ, GRADER_COURSE_SECRET="throughput-test-secret-2026")
    grader = [sys.executable, "-m", "grader"]

    def results(folder: Path, out: Path) -> dict[str, dict]:
        done = subprocess.run(
            [*grader, "grade", str(folder), "--out", str(out), "-q"], env=env, capture_output=True, text=True
        )
        assert done.returncode in (0, 1), done.stderr
        rows = json.loads((out / "results.json").read_text())["submissions"]
        return {row["id"]: row for row in rows}

    graded = results(together, tmp_path / "together")
    for sample in samples:
        alone = tmp_path / "alone" / sample.name
        shutil.copytree(sample, alone / f"{sample.name}-0")
        (row,) = results(alone, tmp_path / "out-alone" / sample.name).values()
        for copy in range(2):
            mine = dict(graded[f"{sample.name}-{copy}"], id=row["id"], path=row["path"])
            mine.pop("slug", None), row.pop("slug", None)
            assert mine == row, sample.name


def test_a_frame_seen_before_decodes_to_an_equal_frame_of_its_own() -> None:
    from grader.execution.boundary import BoundaryError, FrameMemo, decode_frame

    memo = FrameMemo()
    data = b'{"event":"call","status":"returned","mutated":[0],"value":[[1.0,2.5],[3,true]]}'
    first = memo.decode(data)
    assert first == decode_frame(data)
    assert first["value"] == [[1.0, 2.5], [3, True]] and first["mutated"] == (0,)
    first["value"][0].append(99.0)  # a consumer changing its own copy...
    second = memo.decode(data)
    assert second == decode_frame(data) and second["value"] == [[1.0, 2.5], [3, True]]  # ...changes no other
    assert second["value"] is not first["value"] and second["value"][1] is not first["value"][1]
    # Refusals are not kept: the same bytes are refused the same way every time.
    bad = b'{"event":"call","status":"returned","mutated":[],"value":"text"}'
    for _ in range(2):
        with pytest.raises(BoundaryError, match="the result holds a string"):
            memo.decode(bad)
    assert len(memo._table) == 1


def test_equal_answers_share_one_frame_and_every_judge_gets_values_of_its_own() -> None:
    """The channel reads a call frame seen before as the very frame kept (`FrameMemo.shared`: no copy per
    frame); the judges get copies (`own_results`), so a plugin's judge changing what it was handed in place
    changes no other submission's answer. Fails if `_judged` handed the shared values on."""
    from types import SimpleNamespace

    from grader.execution.boundary import FrameMemo, decode_frame
    from grader.execution.channel import result_of
    from grader.grading import session
    from grader.models import RunOutcome, Verdict

    memo = FrameMemo()
    data = b'{"event":"call","status":"returned","mutated":[],"value":[[1.0,2.5],[3.0,4.0]]}'
    first = memo.shared(data)
    assert first == decode_frame(data) and memo.shared(data) is first
    results = (result_of(first, 0.1, data), result_of(memo.shared(data), 0.2, data), result_of(first, 0.3))
    assert results[0].value is results[1].value is first["value"]
    handed = []

    def judge_check(check, prepared, results, kind, context, config):  # noqa: ANN001, ANN202
        for result in results:  # a plugin changing the values it was handed
            result.value[0].append(99.0)
            result.value.append([0.0])
        handed.append(results)
        return Verdict("passed", "")

    exercise = SimpleNamespace(id="e")
    check = SimpleNamespace(prepared=SimpleNamespace(shown_call=""), check="c", kind=None, context=None)
    collected = SimpleNamespace(checks=[(exercise, [check])], split=lambda got: [(exercise, check, list(got))])
    config = SimpleNamespace(hooks=SimpleNamespace(judge_check=judge_check), stash={})
    assert session._judged(collected, RunOutcome(results), config) == [(exercise, [("c", Verdict("passed", ""))])]
    assert [r.value for r in handed[0]] == [[[1.0, 2.5, 99.0], [3.0, 4.0], [0.0]]] * 3  # each changed its own copy
    assert [r.seconds for r in handed[0]] == [0.1, 0.2, 0.3] and handed[0][0].wire == data
    assert first["value"] == [[1.0, 2.5], [3.0, 4.0]] == memo.shared(data)["value"]  # the shared one is intact
    assert results[2].value == [[1.0, 2.5], [3.0, 4.0]]
    # Frames other than a call's are decoded afresh each time, as `decode` does.
    assert memo.shared(b'{"event":"import","ok":true}', "import") is not memo.shared(
        b'{"event":"import","ok":true}', "import"
    )


def test_frames_past_the_memo_s_budget_start_it_again(monkeypatch) -> None:  # noqa: ANN001
    from grader.execution.boundary import FrameMemo

    monkeypatch.setattr(FrameMemo, "MAX_BYTES", 200)
    memo = FrameMemo()
    frames = [b'{"event":"call","status":"returned","mutated":[],"value":%d.5}' % n + b" " * 40 for n in range(4)]
    for data in frames:
        assert memo.decode(data)["value"] == float(data.split(b":")[-1].split(b"}")[0])
    assert [key[0] for key in memo._table] == [frames[-1]]  # 102 bytes each: two are past 200, so each
    assert memo._bytes == len(frames[-1])  # frame after the first started the table again


@pytest.mark.slow
def test_a_results_json_line_made_from_kept_exercise_parts_equals_the_whole_dict_encoded(tmp_path: Path) -> None:
    """Every sample's result, with adjustments, LMS facts and odd ids, as json.dumps writes the dict."""
    import dataclasses

    from grader.builtin.gradebook import PARTS_MARK, Gradebook
    from grader.builtin.json_report import _submission_json, submission_to_dict
    from grader.models import Adjustment, result_from_dict, result_to_dict
    from grader.term import strip_adjustments
    from harness.test_perf import _reports

    env = dict(os.environ, GRADER_COURSE_SECRET="throughput-test-secret-2026")
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(SUBMISSIONS), "--out", str(out), "-q"],
        env=env,
        capture_output=True,
        check=False,
    )
    rows = json.loads((out / "results.json").read_text())["submissions"]
    book = Gradebook(out / "gradebook.sqlite")
    keys = [key for (key,) in book.db.execute("SELECT key FROM results")]
    graded = [book.get(key.removesuffix(PARTS_MARK)) for key in keys]
    book.close()
    assert all(key.endswith(PARTS_MARK) for key in keys) and None not in graded
    assert len(rows) == 12
    results = [s for report in _reports() for s in report.submissions] + graded
    for s in list(results):
        results.append(
            dataclasses.replace(
                s,
                id='odd "id", "exercises": [] \\u0000 é',
                raw_score=s.score,
                adjustments=(Adjustment(kind="late", points=-1.0, reason='1 day "late"'),),
                lms={"system": "canvas", "late": "1"},
            )
        )
    assert len(results) > 20
    for s in results:
        for slug in ("", "a-slug"):
            assert _submission_json(s, slug) == json.dumps(submission_to_dict(s, slug), allow_nan=False)
    # The gradebook's rows, each exercise result stored once, read back as the automatic results themselves.
    book = Gradebook(tmp_path / "again.sqlite")
    for i, s in enumerate(results):
        book.put(f"k{i}", "spec", s)
    for i, s in enumerate(results):
        assert book.get(f"k{i}") == result_from_dict(json.loads(json.dumps(result_to_dict(strip_adjustments(s)))))
    assert book.db.execute("SELECT COUNT(*) FROM parts").fetchone()[0] < len(results)  # shared exercise parts
    book.close()


@pytest.mark.slow
@pytest.mark.timing
def test_the_first_ctrl_c_stops_a_batch_at_once(tmp_path: Path) -> None:
    """Queued submissions are dropped and the running jobs ended: exit 130 within seconds, nothing left."""
    import signal
    import time

    for i in range(6):
        folder = tmp_path / "class" / f"s{i}"
        folder.mkdir(parents=True)
        (folder / "attention.py").write_text(
            "import time\n\ndef scaled_scores(*a):\n    time.sleep(1000)\n\n"
            "def softmax(*a):\n    time.sleep(1000)\n\ndef attention(*a):\n    time.sleep(1000)\n"
        )
    env = dict(os.environ, GRADER_COURSE_SECRET="throughput-test-secret-2026")
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", "grade", str(tmp_path / "class"), "--out", str(tmp_path / "out")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4.0)  # the first submissions' calls are sleeping now
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    try:
        code = proc.wait(timeout=15)
    finally:
        proc.kill()
    assert code == 130 and time.monotonic() - started < 10
    said = proc.stderr.read()
    assert "grader: interrupted" in said
    assert "internal error" not in said  # the jobs ended by the stop are not the grader's faults


def test_the_answers_of_fast_calls_are_read_together_not_one_wait_each(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """60 calls answered 0.1 ms apart: the grader waits (sleeps, or waits on the job's pipes) about
    once per `grader.execution.calls.GATHER_SECONDS`, not once per answer, and every answer is still its call's."""
    import select
    import selectors
    import time

    from harness.test_runner import C, run, submission

    waits = []
    real_select = selectors.PollSelector.select  # the channel's selector (grader.execution.channel.JobChannel)

    def counting(self, timeout=None):  # noqa: ANN001, ANN202
        waits.append(timeout)
        return real_select(self, timeout)

    real_sleep = time.sleep

    def sleeping(seconds):  # noqa: ANN001, ANN202
        waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(selectors.PollSelector, "select", counting)
    real_fd_wait = select.select

    def fd_waiting(r, w, x, timeout=None):  # noqa: ANN001, ANN202 - a wait on the job's pipe (JobChannel.wait_result)
        waits.append(timeout)
        return real_fd_wait(r, w, x, timeout)

    monkeypatch.setattr(select, "select", fd_waiting)
    monkeypatch.setattr(time, "sleep", sleeping)
    path = submission(
        tmp_path,
        "import time\n"
        "def double(x):\n"
        "    end = time.perf_counter() + 0.0001\n"
        "    while time.perf_counter() < end:\n"
        "        pass\n"
        "    return 2 * x\n",
    )
    outcome = run(path, *(C("double", i) for i in range(60)))
    assert [(r.status, r.value) for r in outcome.results] == [("returned", 2 * i) for i in range(60)]
    assert 0 < len(waits) <= 30, f"{len(waits)} waits for 60 answers"


@pytest.mark.timing
def test_a_call_s_cpu_during_a_stretched_pause_is_counted(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A busy machine may stretch the grader's pause (GATHER_SECONDS) far past 1 ms: a call spinning
    through it has that CPU counted, and times out at its limit, not at the limit plus the pause."""
    import time

    from harness.test_runner import C, run, submission

    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda seconds: real_sleep(0.6 if seconds <= 0.001 else seconds))
    path = submission(tmp_path, "def spin():\n    while True:\n        pass\n")
    outcome = run(path, C("spin", timeout=0.3))
    result = outcome.results[0]
    assert result.status == "timeout" and "CPU" in result.message, result
    assert result.seconds < 0.8, result.seconds  # 0.6 s of pause, then the first look finds it over 0.3 s


def test_equal_answers_reuse_the_exercise_results_only_when_the_built_ins_alone_judge_and_score() -> None:
    """`grader.grading.judging.OutcomeMemo` (issue 29): a submission whose every answer equals an earlier
    one's, byte for byte, gets that submission's exercise results without a hook call; a plugin of its own
    that judges or scores, or a kind that is not ``cacheable``, turns the memo off for the run."""
    import argparse
    import types

    from grader.collected import Collected, PreparedCheck
    from grader.config.core import Config
    from grader.config.plugins import get_plugin_manager, hookimpl
    from grader.grading.judging import OutcomeMemo, answers_of

    check, ctx, prepared, real = _softmax_check()
    collected = Collected((ctx.exercise,), ((ctx.exercise, (PreparedCheck(check, real, ctx, prepared),)),), "h")

    def config_with(*plugins: object) -> Config:
        pm = get_plugin_manager(load_entrypoints=False)
        for i, plugin in enumerate(plugins):
            pm.register(plugin, name=f"own{i}")
        return Config("grade", argparse.Namespace(), pm)

    config = config_with()
    memo = OutcomeMemo.of(config, collected)
    assert isinstance(memo, OutcomeMemo) and OutcomeMemo.of(config, collected) is memo
    right = [_answer(_right(prepared), b"right"), _answer(_right(prepared), b"also")]
    kept = ("exercise results",)
    wires = answers_of(right)
    assert wires == (b"right", b"also")
    memo.keep(wires, kept)  # type: ignore[arg-type]
    assert memo.get((b"right", b"also")) is kept and memo.get((b"right", b"else")) is None
    assert answers_of([right[0], CallResult("timeout", message="2 s")]) is None  # no frame: judged as usual
    assert answers_of([]) is None
    judging = types.SimpleNamespace(grader_judge_check=hookimpl(lambda check, prepared, results, kind, context: None))
    scoring = types.SimpleNamespace(grader_score_exercise=hookimpl(lambda exercise, verdicts: None))
    assert OutcomeMemo.of(config_with(judging), collected) is None
    assert OutcomeMemo.of(config_with(scoring), collected) is None
    uncached = Collected(
        (ctx.exercise,), ((ctx.exercise, (PreparedCheck(check, _Counting(real, False), ctx, prepared),)),), "h"
    )
    assert OutcomeMemo.of(config_with(), uncached) is None


def test_gradebook_rows_are_committed_together_and_a_first_arrival_at_once(tmp_path: Path) -> None:
    """Rows wait for a commit of up to `COMMIT_ROWS` rows or `COMMIT_SECONDS` (issue 29): another reader
    sees them once committed; `Gradebook.close` commits the rest; a first arrival is committed at once."""
    import sqlite3

    from grader.builtin import gradebook
    from grader.builtin.gradebook import Gradebook
    from grader.models import SubmissionResult

    def count(table: str) -> int:
        with sqlite3.connect(tmp_path / "g.sqlite") as db:
            return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608 - a fixed name

    book = Gradebook(tmp_path / "g.sqlite")
    result = SubmissionResult("ann", "p", "s" * 64, "graded", 0.0, 0.0, ())
    for i in range(gradebook.COMMIT_ROWS - 1):
        book.put(f"k{i}", "spec", result)
    assert count("results") == 0 and book.get("k0") is not None  # not committed yet, but this run reads it
    book.put("last", "spec", result)
    assert count("results") == gradebook.COMMIT_ROWS
    book.put("one more", "spec", result)
    assert count("results") == gradebook.COMMIT_ROWS
    assert book.arrival("ann", "s" * 64, "2026-01-01T00:00:00+00:00") == "2026-01-01T00:00:00+00:00"
    assert count("arrivals") == 1 and count("results") == gradebook.COMMIT_ROWS + 1  # committed with it
    book.put("after", "spec", result)
    book.since -= gradebook.COMMIT_SECONDS  # the batch began long enough ago: the next row commits it
    book.put("later", "spec", result)
    assert count("results") == gradebook.COMMIT_ROWS + 3
    book.put("at close", "spec", result)
    book.close()
    assert count("results") == gradebook.COMMIT_ROWS + 4


def _batch_config(jobs: int) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(option=lambda name, default=None: jobs if name == "jobs" else default, stash={})


def test_each_grading_thread_hands_its_own_results_over_one_at_a_time(monkeypatch) -> None:  # noqa: ANN001
    """No future or queue per submission: the thread that graded a result hands it over, under one lock,
    every submission of the batch once, into its own place; submissions outside the batch stay None."""
    import threading
    import time

    from grader.grading import session

    inside, most, handed = [0], [0], []

    def hand_over(result, submission, collected, config):  # noqa: ANN001, ANN202
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.0005)  # long enough for another thread to come in, were there no lock
        handed.append((result, threading.current_thread().name))
        inside[0] -= 1
        return result * 10

    monkeypatch.setattr(
        session, "grade_submission", lambda submission, collected, config: time.sleep(0.001) or submission
    )
    monkeypatch.setattr(session, "adjust_result", lambda result, submission, config: result + 1)
    monkeypatch.setattr(session, "_shared_hand_over", hand_over)
    results: list[Any] = [None] * 40
    session._grade_todo(list(range(40)), list(range(0, 40, 2)), None, _batch_config(2), results)
    assert results == [(i + 1) * 10 if i % 2 == 0 else None for i in range(40)]
    assert sorted(result for result, _ in handed) == list(range(1, 41, 2)) and most[0] == 1
    assert {name for _, name in handed} <= {"grader_0", "grader_1", "grader_2"}


def test_a_hand_over_s_fault_stops_the_batch_and_nothing_is_handed_over_after_it(monkeypatch) -> None:  # noqa: ANN001
    """A writer's one-line error (or JobStarterLost) raised in a grading thread is raised by `_grade_todo`;
    no other submission is taken or handed over after it, and the stop is marked for the quiet ends."""
    import time

    from grader.errors import UsageError
    from grader.grading import session

    handed = []

    def hand_over(result, submission, collected, config):  # noqa: ANN001, ANN202
        if result == 5:
            raise UsageError("--out: cannot write")
        handed.append(result)
        return result

    monkeypatch.setattr(
        session, "grade_submission", lambda submission, collected, config: time.sleep(0.002) or submission
    )
    monkeypatch.setattr(session, "adjust_result", lambda result, submission, config: result)
    monkeypatch.setattr(session, "_shared_hand_over", hand_over)
    config = _batch_config(2)
    with pytest.raises(UsageError, match="cannot write"):
        session._grade_todo(list(range(200)), list(range(200)), None, config, [None] * 200)
    count = len(handed)
    time.sleep(0.1)  # the threads still grading end without handing anything over
    assert len(handed) == count < 12 and 5 not in handed
    assert config.stash[session._STOPPED] is True


def test_the_diagnosis_tables_judge_gets_values_of_its_own() -> None:
    """The mutants' answers come through the same channel as the students' (`FrameMemo.shared`): a correct
    student's answer equal to a mutant's is the very value the mutant had. `diagnosis.build_table` judges every
    mutant on every check with the check's kind; a kind changing what it was handed in place changed the
    shared value, and the student's copy (`own_results`) was then made from the changed one."""
    from types import SimpleNamespace

    from grader.builtin import diagnosis
    from grader.execution.boundary import FrameMemo
    from grader.execution.channel import own_results, result_of
    from grader.models import RunOutcome, Verdict

    memo = FrameMemo()
    data = b'{"event":"call","status":"returned","mutated":[],"value":[[1.0,2.5],[3.0,4.0]]}'
    seen = []

    class Changing:
        name = "changing"

        def judge(self, check, prepared, results, context):  # noqa: ANN001, ANN201 - the kind protocol
            seen.append([r.value for r in results])
            results[0].value.append([0.0])  # a kind normalising what it was handed, in place
            return Verdict("passed", "")

    exercise = SimpleNamespace(id="e")
    check = SimpleNamespace(function="f", visibility="visible", id="c")
    pc = SimpleNamespace(check=check, prepared=SimpleNamespace(shown_call=""), kind=Changing(), context=None)
    calls = [object()]
    collected = SimpleNamespace(calls=calls, split=lambda got: [(exercise, pc, list(got))])
    mutant = SimpleNamespace(name="m", misconception="x", section="s")
    catalogue = SimpleNamespace(mutants=[mutant])
    outcomes = {"m": RunOutcome((result_of(memo.shared(data), 0.1, data),))}
    diagnosis.build_table(None, collected, catalogue, outcomes)
    student = own_results([result_of(memo.shared(data), 0.2, data)])  # a correct student's equal answer, later
    assert student[0].value == [[1.0, 2.5], [3.0, 4.0]]
    assert memo.shared(data)["value"] == [[1.0, 2.5], [3.0, 4.0]]
