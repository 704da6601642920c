"""The child-process runner: `grader.execution.calls.run_calls`.

Every test writes a small submission into tmp_path and runs real calls in a
real child process; results must be plain data, and every failure mode of a
submission must cost only what it breaks.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, load_stretch

from grader.execution.calls import run_calls
from grader.execution.channel import OUTPUT_CAP_BYTES
from grader.execution.jobs import CHILD_ENV
from grader.models import Call, CallResult, RunOutcome

CPU_READING_SLACK = 2 / os.sysconf("SC_CLK_TCK")
"""How far short of a CPU limit a call stopped by it may be by the clock (seconds): a plain job's CPU
time is read from /proc in clock ticks, once before the call and again as it runs, and each reading
is rounded down to a tick (0.495 s by the clock was seen for a 0.5 s limit, on CI and on a loaded
machine)."""


def submission(tmp_path: Path, source: str) -> Path:
    """Write ``source`` (dedented) as tmp_path/student/attention.py."""
    folder = tmp_path / "student"
    folder.mkdir(exist_ok=True)
    path = folder / "attention.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return path


def line_of(path: Path, marker: str) -> int:
    """1-based number of the (only) line of ``path`` containing ``marker``."""
    lines = [i for i, line in enumerate(path.read_text().splitlines(), 1) if marker in line]
    assert len(lines) == 1, lines
    return lines[0]


def run(path: Path, *calls: Call, import_timeout: float = 10.0, submission_timeout: float = 60.0) -> RunOutcome:
    outcome = run_calls(str(path), list(calls), import_timeout=import_timeout, submission_timeout=submission_timeout)
    assert len(outcome.results) == len(calls)
    assert all(isinstance(r, CallResult) for r in outcome.results)
    return outcome


def C(function: str, *args: object, timeout: float = 5.0, budget: object = None, hidden: bool = False) -> Call:
    return Call(function, tuple(args), timeout, budget, hidden)


# --- returned values -----------------------------------------------------


def test_correct_functions_return_plain_data(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import numpy as np

        def double(x):
            return np.asarray(x) * 2

        def pair(Q):
            q = np.asarray(Q, dtype=float)
            return q.T, q.sum(axis=1)

        def scalars():
            return (np.float64(0.25), np.int64(7), np.bool_(True), 3, 2.5, [np.float32(0.5)])

        def nan_result():
            return [float("nan"), float("inf"), -float("inf")]
        """,
    )
    out = run(
        path,
        C("double", [[1.0, 2.5], [3.0, -4.0]]),
        C("pair", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
        C("scalars"),
        C("nan_result"),
    )
    assert out.import_error == ""
    assert [r.status for r in out.results] == ["returned"] * 4
    double, pair, scalars, nan_result = (r.value for r in out.results)
    assert double == [[2.0, 5.0], [6.0, -8.0]]
    assert pair == [[[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]], [6.0, 15.0]]
    assert scalars == [0.25, 7, True, 3, 2.5, [0.5]]
    assert type(scalars[1]) is int and type(scalars[2]) is bool
    assert math.isnan(nan_result[0]) and nan_result[1:] == [math.inf, -math.inf]
    assert all(r.seconds >= 0.0 for r in out.results)


def test_nan_and_inf_arguments_arrive_as_floats(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import math

        def probe(x):
            return [math.isnan(x[1]), math.isinf(x[2]), x[2] > 0, math.isinf(x[3]), x[3] < 0,
                    all(type(v) is float for v in x)]
        """,
    )
    out = run(path, C("probe", [1.0, math.nan, math.inf, -math.inf]))
    assert out.results[0] == CallResult(
        "returned", value=[True, True, True, True, True, True], seconds=out.results[0].seconds
    )


def test_float_subclass_with_lying_repr_and_eq_returns_plain_float(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        class Liar(float):
            def __repr__(self):
                return "5.0"
            __str__ = __repr__
            def __eq__(self, other):
                return True
            __hash__ = float.__hash__

        class IntLiar(int):
            def __repr__(self):
                return "67108864"

        def liar():
            return Liar(1.5)

        def nested():
            return [Liar(2.0), (IntLiar(3),)]
        """,
    )
    out = run(path, C("liar"), C("nested"))
    assert out.results[0].status == "returned"
    assert out.results[0].value == 1.5 and type(out.results[0].value) is float
    assert out.results[1].value == [2.0, [3]]
    assert type(out.results[1].value[0]) is float and type(out.results[1].value[1][0]) is int


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("return (x for x in range(3))", "the result holds a generator; return numbers, lists, tuples or numpy arrays"),
        (
            "return np.array([1, 'a', None], dtype=object)",
            "the result holds a numpy array of dtype object; return numbers",
        ),
        ("return 'weights'", "the result holds a str; return numbers, lists, tuples or numpy arrays"),
        ("return {'outputs': [1.0]}", "the result holds a dict; return numbers, lists, tuples or numpy arrays"),
        ("return [1.0, None]", "the result holds a NoneType; return numbers, lists, tuples or numpy arrays"),
        (
            "return np.array([1j])",
            "the result holds a numpy array of dtype complex128; return real numbers (for example its .real part)",
        ),
        (
            "return np.complex64(1j)",
            "the result holds a numpy complex64 scalar; return real numbers (for example its .real part)",
        ),
        (
            "return [np.longdouble(0.5)]",
            "the result holds a numpy float128 (longdouble) scalar; convert it with float()",
        ),
        (
            "return np.ones(3, dtype=np.longdouble)",
            "the result holds a numpy float128 (longdouble) array; convert it with .astype(float)",
        ),
        ("return 10 ** 400", "the result holds an integer too large to be a float (401 digits); return floats"),
        (
            "pass",
            "the function returned None (is a return statement missing?); return numbers, lists, tuples or "
            "numpy arrays",
        ),
    ],
    ids=[
        "generator",
        "object-array",
        "string",
        "dict",
        "none-inside",
        "complex-array",
        "complex-scalar",
        "longdouble-scalar",
        "longdouble-array",
        "huge-int",
        "none",
    ],
)
def test_unreadable_returns_are_bad_return(tmp_path: Path, body: str, message: str) -> None:
    path = submission(tmp_path, f"import numpy as np\n\ndef f():\n    {body}\n\ndef g():\n    return 1.0\n")
    out = run(path, C("f"), C("g"))
    assert out.results[0].status == "bad_return"
    assert out.results[0].message == message
    assert out.results[0].value is None
    assert out.results[1].status == "returned" and out.results[1].value == 1.0


# --- stubs and exceptions ------------------------------------------------


def test_not_implemented_and_missing_function(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        def softmax(scores, allowed=None):
            raise NotImplementedError("softmax: write me")

        bytes_to_mib = 3   # not callable
        """,
    )
    out = run(path, C("softmax", [0.0, 0.0]), C("attention", [[0.0]], [[0.0]], [[1.0]]), C("bytes_to_mib", 1))
    stub, missing, not_callable = out.results
    assert stub.status == "not_implemented" and stub.message == "softmax: write me"
    assert missing.status == "not_implemented"
    assert missing.message == "attention.py defines no function attention"
    assert not_callable.status == "not_implemented"
    assert not_callable.message == "attention.py defines no function bytes_to_mib"


def test_value_error_reports_type_message_and_line(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        def _check(scores):
            if not scores:
                raise ValueError("scores is empty")  # RAISE HERE

        def softmax(scores):
            _check(scores)
            return scores

        class ShapeError(ValueError):
            pass

        def attention(Q, K, V):
            raise ShapeError(f"K has {len(K)} rows but V has {len(V)}")  # CUSTOM

        def broken(x):
            return x[5]  # INDEX
        """,
    )
    out = run(path, C("softmax", []), C("attention", [[1.0]], [[1.0], [2.0]], [[1.0]]), C("broken", [1.0]))
    plain, custom, index = out.results
    assert plain.status == "raised" and plain.error_type == "ValueError" and plain.value_error is True
    assert plain.message == "scores is empty"
    assert plain.where == f"attention.py, line {line_of(path, 'RAISE HERE')}"
    assert custom.status == "raised" and custom.error_type == "ShapeError" and custom.value_error is True
    assert custom.message == "K has 2 rows but V has 1"
    assert custom.where == f"attention.py, line {line_of(path, 'CUSTOM')}"
    assert index.status == "raised" and index.error_type == "IndexError" and index.value_error is False
    assert index.message == "list index out of range"
    assert index.where == f"attention.py, line {line_of(path, 'INDEX')}"


def test_exception_with_unreadable_message(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        class Weird(ValueError):
            def __str__(self):
                raise RuntimeError("no")

        def f():
            raise Weird()
        """,
    )
    result = run(path, C("f")).results[0]
    assert result.status == "raised" and result.value_error is True
    assert result.error_type == "Weird" and result.message == "<message could not be read>"


def test_sys_exit_in_a_call_is_an_exception_and_the_next_call_runs(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import sys

        def quit():
            sys.exit(3)  # EXIT

        def ok(x):
            return x + 1
        """,
    )
    out = run(path, C("quit"), C("ok", 41))
    assert out.results[0].status == "raised"
    assert out.results[0].error_type == "SystemExit" and out.results[0].value_error is False
    assert out.results[0].message == "3"
    assert out.results[0].where == f"attention.py, line {line_of(path, 'EXIT')}"
    assert out.results[1].status == "returned" and out.results[1].value == 42


# --- crashes and timeouts ----------------------------------------------------


def test_os_exit_in_a_call_crashes_only_that_call(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import os

        PID = os.getpid()

        def pid():
            return PID

        def die():
            os._exit(0)
        """,
    )
    out = run(path, C("pid"), C("die"), C("pid"), C("die"), C("pid"))
    first, died, second, died_again, third = out.results
    assert out.import_error == ""
    assert died.status == "crashed" and died_again.status == "crashed"
    assert died.message == "the process exited with code 0 before answering"
    assert [r.status for r in (first, second, third)] == ["returned"] * 3
    # a fresh child after each crash
    assert len({first.value, second.value, third.value}) == 3


def test_killed_by_signal_is_a_crash(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import os, signal

        def segv():
            os.kill(os.getpid(), signal.SIGSEGV)

        def ok():
            return 1
        """,
    )
    out = run(path, C("segv"), C("ok"))
    assert out.results[0].status == "crashed"
    assert out.results[0].message == "the process was killed by signal SIGSEGV"
    assert out.results[1].value == 1


@pytest.mark.timing
def test_infinite_loop_costs_only_its_call(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        def ok(x):
            return x

        def spin():
            while True:
                pass
        """,
    )
    started = time.monotonic()
    out = run(path, C("ok", 1.0, timeout=5), C("spin", timeout=0.5), C("ok", 2.0, timeout=5))
    elapsed = time.monotonic() - started
    assert elapsed < 5.0 * load_stretch()
    assert out.import_error == ""
    assert [r.status for r in out.results] == ["returned", "timeout", "returned"]
    assert out.results[0].value == 1.0 and out.results[2].value == 2.0
    # The timeout counts CPU time; the duration is the grader's own measure of the call, in wall
    # time, which may fall short of the limit by the CPU readings' rounding (`CPU_READING_SLACK`).
    assert out.results[1].message == "the call used more than 0.5 s of CPU time"
    assert 0.5 - CPU_READING_SLACK <= out.results[1].seconds < 2.0 * load_stretch()


def _recording_launcher(launches: list) -> object:
    """A launcher that records whether each worker it starts is a standby (workers get no calls at launch)."""
    from grader.execution.jobs import PlainJob

    def launch(source, workdir, cpu, standby=False):
        launches.append(standby)
        return PlainJob(source, workdir, cpu, standby=standby)

    return launch


STANDBY_SOURCE = """
    import time

    print("imported")

    def ok(x):
        return x

    def spin():
        while True:
            pass

    def nap(seconds):
        time.sleep(seconds)
        return seconds

    def busy(seconds):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
        return seconds
    """


@pytest.mark.slow
def test_calls_after_a_hanging_call_run_in_a_standby_started_before_its_deadline(tmp_path: Path) -> None:
    path = submission(tmp_path, STANDBY_SOURCE)
    launches: list = []
    calls = [C("ok", 1.0), C("spin", timeout=0.6), C("spin", timeout=0.6), C("ok", 2.0)]
    out = run_calls(str(path), calls, launch=_recording_launcher(launches))
    assert [r.status for r in out.results] == ["returned", "timeout", "timeout", "returned"]
    assert out.results[3].value == 2.0
    # The first worker, then a standby for the calls after each spin, started while it still ran.
    assert launches == [False, True, True]
    assert out.stdout == "imported\n" * 3  # what each worker used printed at import


def test_a_standby_not_needed_is_killed(tmp_path: Path) -> None:
    path = submission(tmp_path, STANDBY_SOURCE)
    launches: list = []
    # busy(0.85) uses more than timeout - STANDBY_LEAD_SECONDS (0.75 s) of CPU, but returns within its 1 s.
    out = run_calls(str(path), [C("busy", 0.85, timeout=1.0), C("ok", 3.0)], launch=_recording_launcher(launches))
    assert [(r.status, r.value) for r in out.results] == [("returned", 0.85), ("returned", 3.0)]
    assert launches == [False, True]
    assert out.stdout == "imported\n"  # the standby's output is not the submission's


@pytest.mark.slow
def test_submission_budget_is_cpu_time_of_its_jobs(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import time

        def burn(i):
            end = time.process_time() + 0.6
            while time.process_time() < end:
                pass
            return i
        """,
    )
    # The job's start and import (~0.1 s of CPU) and two calls of 0.6 s spend the 1.5 s: the third
    # call is stopped when the budget is used up, the fourth is not run.
    out = run(path, C("burn", 0), C("burn", 1), C("burn", 2), C("burn", 3), submission_timeout=1.5)
    assert [r.status for r in out.results] == ["returned", "returned", "timeout", "timeout"]
    assert [r.value for r in out.results[:2]] == [0, 1]
    assert out.results[2].message == "the submission used up its 1.5 s budget of CPU time"
    assert out.results[3].message == "not run: the submission used up its 1.5 s budget of CPU time"


@pytest.mark.slow
@pytest.mark.timing
def test_submission_that_waits_meets_the_wall_clock_backstop(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import time

        def nap(i):
            time.sleep(2.0)
            return i
        """,
    )
    # No CPU spent: the backstop, 4 times the budget in wall-clock time (4 s), ends the second nap
    # (the job's start and import take less than 1 s, the first nap 2 s).
    started = time.monotonic()
    out = run(path, C("nap", 0), C("nap", 1), C("nap", 2), C("nap", 3), submission_timeout=1.0)
    assert time.monotonic() - started < 7.0
    assert out.results[0].status == "returned" and out.results[0].value == 0
    assert [r.status for r in out.results[1:]] == ["timeout", "timeout", "timeout"]
    assert out.results[1].message == "the submission used up its 4 s budget of wall-clock time"
    assert out.results[2].message == "not run: the submission used up its 4 s budget of wall-clock time"


# --- import problems -----------------------------------------------------


def test_syntax_error_skips_every_call(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import numpy as np

        def softmax(scores):
            return np.exp(scores) / np.exp(scores).sum(  # UNCLOSED

        def attention(Q, K, V):
            return Q
        """,
    )
    out = run(path, C("softmax", [0.0]), C("attention", [[1.0]], [[1.0]], [[1.0]]))
    assert out.import_error.startswith("importing the file failed with SyntaxError (attention.py, line ")
    line = int(out.import_error.split("line ", 1)[1].split(")", 1)[0])
    assert line_of(path, "UNCLOSED") <= line <= line_of(path, "UNCLOSED") + 2
    assert [r.status for r in out.results] == ["skipped", "skipped"]
    assert all(r.message == out.import_error for r in out.results)


def test_exception_at_import_names_the_line(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import numpy as np

        W = np.zeros((2, 3)) @ np.zeros((2, 3))  # BAD MATMUL

        def softmax(scores):
            return scores
        """,
    )
    out = run(path, C("softmax", [0.0]))
    assert out.import_error.startswith(
        f"importing the file failed with ValueError (attention.py, line {line_of(path, 'BAD MATMUL')}): matmul"
    )
    assert out.results[0].status == "skipped"


def test_os_exit_at_import(tmp_path: Path) -> None:
    path = submission(tmp_path, "import os\nos._exit(0)\n\ndef f():\n    return 1\n")
    out = run(path, C("f"), C("f"))
    assert out.import_error == "importing the file failed: the process exited with code 0 before answering"
    assert [r.status for r in out.results] == ["skipped", "skipped"]


def test_sys_exit_at_import(tmp_path: Path) -> None:
    path = submission(tmp_path, "import sys\nsys.exit(2)\n")
    out = run(path, C("f"))
    assert out.import_error == "importing the file failed with SystemExit (attention.py, line 2): 2"
    assert out.results[0].status == "skipped"


@pytest.mark.timing
def test_infinite_loop_at_import(tmp_path: Path) -> None:
    path = submission(tmp_path, "while True:\n    pass\n\ndef f():\n    return 1\n")
    started = time.monotonic()
    out = run(path, C("f"), C("f"), import_timeout=1)
    assert time.monotonic() - started < 4.0
    assert out.import_error == ("importing the file took longer than 1 s (does it run a loop at top level?)")
    assert "longer than 1 s" in out.import_error
    assert [r.status for r in out.results] == ["skipped", "skipped"]


# --- output and sandbox ----------------------------------------------------


def test_stdout_is_captured_and_capped(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import sys
        print("hello from import")

        def noisy():
            sys.stdout.write("x" * (1 << 20))
            sys.stdout.flush()
            print("warning: oops", file=sys.stderr)
            return 1.5
        """,
    )
    out = run(path, C("noisy"))
    assert out.results[0].status == "returned" and out.results[0].value == 1.5
    assert out.stdout.startswith("hello from import\nxxx")
    assert out.stdout.endswith("\n[output cut at 16 KiB]")
    body = out.stdout[: -len("\n[output cut at 16 KiB]")]
    assert len(body.encode()) == OUTPUT_CAP_BYTES
    assert out.stderr == "warning: oops\n"


def test_child_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "x")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    path = submission(
        tmp_path,
        """
        import os, sys

        def env():
            return [
                "SECRET_TOKEN" in os.environ,
                "PYTHONPATH" in os.environ,
                len(os.environ),
                os.environ.get("OPENBLAS_NUM_THREADS") == "1",
                os.environ.get("OMP_NUM_THREADS") == "1",
                os.environ.get("HOME") == os.getcwd() == os.environ.get("TMPDIR"),
                sys.flags.isolated,
                sys.flags.dont_write_bytecode,
            ]

        def env_keys():
            return [[ord(c) for c in k] for k in sorted(os.environ)]
        """,
    )
    out = run(path, C("env"), C("env_keys"))
    assert os.environ["SECRET_TOKEN"] == "x"
    assert out.results[0].value == [False, False, len(CHILD_ENV) + 2, True, True, True, 1, 1]
    keys = ["".join(map(chr, k)) for k in out.results[1].value]
    assert keys == sorted([*CHILD_ENV, "HOME", "TMPDIR"])


def test_child_cwd_is_a_fresh_temporary_folder(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import os

        def where(student, repo):
            cwd = os.getcwd()
            return [
                os.path.samefile(cwd, student),
                os.path.samefile(cwd, repo),
                os.access(cwd, os.W_OK),
                [ord(c) for c in cwd],
            ]
        """,
    )
    out = run(path, C("where", str(path.parent), str(ROOT)))
    same_student, same_repo, writable, cwd_codes = out.results[0].value
    assert (same_student, same_repo, writable) == (False, False, True)
    cwd = Path("".join(map(chr, cwd_codes)))
    assert cwd.name.startswith("grader-job-")
    assert cwd.parent == Path(tempfile.gettempdir()).resolve() or cwd.parent == Path(tempfile.gettempdir())
    assert not cwd.exists()  # removed once the submission is done


# --- bugs found while writing these tests ----------------------------------


@pytest.mark.slow
def test_budget_running_out_during_a_restart_is_not_an_import_error(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import time
        _end = time.process_time() + 0.8
        while time.process_time() < _end:   # a slow but valid import
            pass

        def spin():
            while True:
                pass

        def ok():
            return 1
        """,
    )
    # import ~0.9 s of CPU, then spin times out at ~1.2 s; the standby's import spends the rest of the 1.6 s
    out = run(path, C("spin", timeout=0.3), C("ok"), C("ok"), import_timeout=10, submission_timeout=1.6)
    assert out.results[0].status == "timeout"
    assert out.import_error == ""
    assert [r.status for r in out.results[1:]] == ["timeout", "timeout"]
    assert all(r.message == "not run: the submission used up its 1.6 s budget of CPU time" for r in out.results[1:])


# --- arguments changed in place --------------------------------------------


def test_arguments_changed_in_place_are_reported_by_position(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import numpy as np

        def shift(scores, allowed):
            top = max(scores)
            for j in range(len(scores)):
                scores[j] -= top
            return scores

        def pure(scores, allowed):
            return [x - max(scores) for x in scores]

        def plant(scores, allowed):
            allowed.append(np.float64(1.0))  # no longer JSON: counts as changed
            return 0

        def loop(scores, allowed):
            scores.append(scores)  # a cycle
            return 1

        def as_float(scores, allowed):
            scores[0] = float(scores[0])  # 1 -> 1.0 changes the data
            return 2

        def fail_after_change(scores, allowed):
            allowed[0] = not allowed[0]
            raise ValueError("no")
        """,
    )
    args = ([1.0, 3.0, math.nan], [True, False, True])
    out = run(
        path,
        *(C(name, *args) for name in ("shift", "pure", "plant", "loop")),
        C("as_float", [1, 2], [True]),
        C("fail_after_change", *args),
    )
    shifted, pure, plant, loop, as_float, raised = out.results
    assert shifted.status == "returned" and shifted.mutated_args == (0,)
    assert shifted.value[:2] == [-2.0, 0.0] and math.isnan(shifted.value[2])
    assert pure.status == "returned" and pure.mutated_args == ()  # NaN stays NaN: unchanged
    assert plant.mutated_args == (1,) and loop.mutated_args == (0,) and as_float.mutated_args == (0,)
    assert raised.status == "raised" and raised.mutated_args == (1,)


def test_a_file_with_a_nul_byte_names_no_line(tmp_path: Path) -> None:
    path = submission(tmp_path, "def f():\n    return 1.0\n")
    path.write_bytes(path.read_bytes() + b"\x00\n")
    out = run(path, C("f"))
    assert out.import_error.startswith("importing the file failed with SyntaxError (attention.py): ")
    assert "null bytes" in out.import_error and "line None" not in out.import_error


# --- the per-call hand-over (issue 9) ---------------------------------------------


SCANNER = """
    import gc, os, select, stat

    MARK = 271828.1828  # a number only the second call's arguments hold

    def scan():
        \"\"\"[found in a list or a string in memory, found waiting on an inherited pipe]\"\"\"
        text = repr(MARK)

        def holds(c):  # a string with the number's text, or a (possibly untracked) dict of such strings
            if type(c) is str:
                return text in c
            return type(c) is dict and any(type(v) is str and text in v for v in c.values())

        in_memory = False
        for obj in gc.get_objects():
            if type(obj) is list and (MARK in obj or any(map(holds, obj))):
                in_memory = True
            elif type(obj) is dict and (holds(obj) or any(map(holds, obj.values()))):
                in_memory = True
        on_a_pipe = False
        for fd in range(64):
            try:
                if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                    continue
                if select.select([fd], [], [], 0)[0] and text.encode() in os.read(fd, 1 << 16):
                    on_a_pipe = True
            except OSError:
                continue
        return [in_memory, on_a_pipe]

    AT_IMPORT = scan()

    def found():
        return [AT_IMPORT, scan()]

    def take(x):
        return scan()
    """


def test_a_job_holds_no_hidden_call_before_the_hidden_phase(tmp_path: Path) -> None:
    """At import and during the visible calls, a hidden call's arguments are nowhere in the job."""
    path = submission(tmp_path, SCANNER)
    out = run(path, C("found"), C("found"), C("take", [271828.1828, 1.0], hidden=True))
    assert [r.status for r in out.results] == ["returned"] * 3
    assert out.results[0].value == out.results[1].value == [[False, False], [False, False]]
    assert out.results[2].value == [True, False]  # the scan works: during its own call, the job has them


def test_calls_are_handed_over_in_two_phases(tmp_path: Path) -> None:
    """The visible calls arrive together (a later one is in memory during the first), the hidden ones after."""
    from grader.execution.calls import phases

    path = submission(tmp_path, SCANNER)
    out = run(path, C("found"), C("take", [271828.1828, 1.0]), C("take", [0.5], hidden=True))
    assert out.results[0].value == [[False, False], [True, False]]  # the second visible call came with the first
    calls = [C("f"), C("f"), C("g", hidden=True), C("f"), C("g", hidden=True)]
    assert phases(calls) == [(0, 2), (2, 5)]
    assert phases(calls[:2]) == [(0, 2)] and phases(calls[2:3]) == [(0, 1)] and phases([]) == []


def test_durations_are_the_grader_s_even_with_a_monkeypatched_clock(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import time

        time.perf_counter = lambda: float("nan")
        time.monotonic = lambda: 10 ** 400
        time.process_time = lambda: -1.0

        def f(x):
            return x
        """,
    )
    out = run(path, C("f", 1.0), C("f", 2.0), C("missing"))
    assert [r.status for r in out.results] == ["returned", "returned", "not_implemented"]
    assert all(type(r.seconds) is float and 0.0 <= r.seconds < 5.0 for r in out.results)


def test_output_after_the_first_hidden_call_is_not_shown(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import sys

        print("imported")

        def f(x):
            print("visible call with", x)
            print("warned", file=sys.stderr)
            return x

        def secret(x):
            print("hidden input:", x)
            print("hidden input:", x, file=sys.stderr)
            return x
        """,
    )
    out = run(path, C("f", 1.0), C("secret", 31.5, hidden=True), C("f", 2.0, hidden=True))
    assert [r.value for r in out.results] == [1.0, 31.5, 2.0]
    assert out.stdout == "imported\nvisible call with 1.0\n[output after the first hidden check is not shown]"
    assert out.stderr == "warned\n[output after the first hidden check is not shown]"
    quiet = run(path, C("f", 1.0), C("f", 2.0, hidden=False))  # no hidden call: everything is shown
    assert quiet.stdout == "imported\nvisible call with 1.0\nvisible call with 2.0\n"


def test_a_restarted_job_that_fails_to_import_after_a_hidden_call_shows_no_message(tmp_path: Path) -> None:
    """A hidden call leaves a file behind and crashes; the next worker's import raises with its content."""
    path = submission(
        tmp_path,
        """
        import os

        if os.path.exists("leak.txt"):
            raise RuntimeError(open("leak.txt").read())

        def secret(x):
            with open("leak.txt", "w") as fh:
                fh.write(repr(x))
            os._exit(1)

        def f():
            return 1
        """,
    )
    out = run(path, C("f"), C("secret", 424242.5, hidden=True), C("f", hidden=True))
    assert out.results[1].status == "crashed"
    assert out.import_error.startswith(
        "importing the file again (after a check that ended its process) failed with RuntimeError (attention.py, line "
    )
    assert "424242" not in out.import_error and "424242" not in out.stdout + out.stderr


@pytest.mark.timing
def test_a_frame_over_the_call_s_budget_is_refused_and_the_next_call_runs(tmp_path: Path) -> None:
    from grader.execution.boundary import budget_for

    path = submission(
        tmp_path,
        """
        import os, sys, time

        def flood():
            fd = int(sys.argv[2])
            os.write(fd, (60 << 20).to_bytes(4, "big") + b"[" * 65536)
            time.sleep(30)

        def ok():
            return 2.0
        """,
    )
    started = time.monotonic()
    out = run(path, C("flood", budget=budget_for([1.0, 2.0])), C("ok"))
    assert out.results[0] == CallResult(
        "crashed", message="the result is far larger than the reference's (60.0 MiB)", seconds=out.results[0].seconds
    )
    assert out.results[1].value == 2.0
    assert time.monotonic() - started < 5.0


def test_huge_integers_and_lone_surrogates_in_true_words(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import json, os, sys

        def honest():
            return [1.0, 10 ** 399]

        def forged():
            payload = b'{"event":"call","status":"returned","mutated":[],"value":1' + b"0" * 399 + b"}"
            os.write(int(sys.argv[2]), len(payload).to_bytes(4, "big") + payload)
            os._exit(0)

        def surrogate():
            raise ValueError("bad " + chr(0xD800) + " here")

        def ok():
            return 1.0
        """,
    )
    out = run(path, C("honest"), C("surrogate"), C("ok"), C("forged"))
    honest, surrogate, ok, forged = out.results
    assert honest.status == "bad_return"
    assert honest.message == "the result holds an integer too large to be a float (400 digits); return floats"
    assert surrogate.status == "raised" and surrogate.message == "bad \ufffd here"
    assert forged.status == "bad_return"
    assert forged.message == "the result holds an integer too large to be a float (400 digits)"
    assert ok.value == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("how", ["close", "dup2"])
def test_a_job_that_closes_or_replaces_its_result_fd_is_told_so(tmp_path: Path, how: str) -> None:
    path = submission(
        tmp_path,
        f"""
        import os, sys, time

        def cut(wait):
            fd = int(sys.argv[2])
            if "{how}" == "close":
                os.close(fd)
            else:
                os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
            time.sleep(wait)
            return 1.0

        def ok():
            return 2.0
        """,
    )
    out = run(path, C("cut", 0.0), C("cut", 30.0), C("ok"))
    lost = (
        "your code closed or replaced a file descriptor the grader uses (its result channel), so the grader "
        "lost its channel to your code"
    )
    assert [(r.status, r.message) for r in out.results[:2]] == [("crashed", lost), ("crashed", lost)]
    assert out.results[2].value == 2.0


# --- CPU-time timeouts ------------------------------------------------------------

BUSY = """
    import time

    def busy(seconds):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
        return seconds

    def nap(seconds):
        time.sleep(seconds)
        return seconds
    """

HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def _hogs(n: int, seconds: float) -> list:
    """``n`` busy processes, each in a session of its own, as the worker is.

    With the kernel's autogroups the scheduler shares a core between sessions first: hogs left in
    pytest's session would together get one share against the worker's (half the core instead of a
    third: 1.01 s for 0.5 s of CPU, and 0.85 s when a process of that session ran on the other core).
    """
    import subprocess
    import sys

    return [
        subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)], start_new_session=True) for _ in range(n)
    ]


@contextlib.contextmanager
def _one_core_shared_with(n: int) -> Iterator[None]:
    """This process (and what it starts) on one core, with ``n`` busy processes there (`_hogs`)."""
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(own)})  # the hogs and the worker inherit it
    try:
        hogs = _hogs(n, 20.0)
        try:
            time.sleep(0.2)
            yield
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    finally:
        os.sched_setaffinity(0, own)


@pytest.mark.slow
@pytest.mark.timing
def test_a_slow_correct_call_passes_while_other_processes_hog_its_core(tmp_path: Path) -> None:
    """0.5 s of CPU with a 1 s timeout, sharing one core with two busy processes: about 1.5 s of wall time."""
    path = submission(tmp_path, BUSY)
    with _one_core_shared_with(2):  # the hogs and the worker: one core for the three
        out = run(path, C("busy", 0.5, timeout=1.0), C("busy", 0.05, timeout=1.0))
    assert [(r.status, r.value) for r in out.results] == [("returned", 0.5), ("returned", 0.05)]
    assert out.results[0].seconds > 1.0  # longer than its timeout by the clock, yet within it by CPU time


@pytest.mark.slow
@pytest.mark.timing
def test_a_spinning_call_meets_its_cpu_limit_however_busy_the_machine(tmp_path: Path) -> None:
    """With five busy processes on its one core the job gets a sixth of it: 0.5 s of CPU take about 3 s,
    past the 2 s backstop. The time it waited for the core is not the call's: its CPU limit stops it,
    with the same words as on a quiet machine (a sleeping call still meets the backstop, below)."""
    path = submission(tmp_path, BUSY)
    with _one_core_shared_with(5):
        out = run(path, C("busy", 30.0, timeout=0.5), C("nap", 30.0, timeout=0.5), C("busy", 0.01, timeout=1.0))
    spin, nap, after = out.results
    assert spin.status == "timeout" and spin.message == "the call used more than 0.5 s of CPU time"
    assert spin.seconds > 2.0  # longer than the backstop by the clock
    assert nap.status == "timeout" and nap.message == "the call took longer than 2 s of wall-clock time"
    assert after.status == "returned"


@pytest.mark.timing
@pytest.mark.slow
def test_a_hanging_call_costs_no_other_check_its_points_beside_cpu_hogs(tmp_path: Path) -> None:
    """Issue 23: the budget was wall-clock time, so under load a hang spent it and later correct calls lost points.

    Three calls spin to their 0.5 s CPU limit, on one core shared with four hogs (the job gets a fifth
    of it): they and their restarts take over 8 s of wall-clock time, twice the 4 s budget, but about
    2.5 s of the job's CPU. Every other call returns, as on a quiet machine.
    """
    path = submission(tmp_path, BUSY)
    calls = [C("busy", 0.01, timeout=1.0)]
    for i in range(3):
        calls += [C("busy", 30.0, timeout=0.5), C("busy", 0.01 * (i + 2), timeout=1.0)]
    started = time.monotonic()
    with _one_core_shared_with(4):
        out = run(path, *calls, submission_timeout=4.0)
    took = time.monotonic() - started
    assert took > 4.0  # past the budget by the clock: a wall-clock budget would have cut the last calls
    assert [r.status for r in out.results] == ["returned"] + ["timeout", "returned"] * 3
    assert [r.value for r in out.results if r.status == "returned"] == [0.01, 0.02, 0.03, 0.04]
    assert {r.message for r in out.results if r.status == "timeout"} == {"the call used more than 0.5 s of CPU time"}


@pytest.mark.slow
@pytest.mark.timing
def test_a_sleeping_call_times_out_at_the_wall_clock_backstop(tmp_path: Path) -> None:
    from grader.execution.calls import WALL_BACKSTOP_FACTOR

    path = submission(tmp_path, BUSY)
    out = run(path, C("nap", 30.0, timeout=0.5), C("busy", 0.01, timeout=1.0))
    nap, after = out.results
    assert WALL_BACKSTOP_FACTOR == 4.0
    assert nap.status == "timeout" and nap.message == "the call took longer than 2 s of wall-clock time"
    assert 2.0 <= nap.seconds < 3.5 * load_stretch()
    assert after.status == "returned"


@pytest.mark.timing
def test_a_spinning_call_times_out_on_cpu_time(tmp_path: Path) -> None:
    path = submission(tmp_path, BUSY)
    out = run(path, C("busy", 30.0, timeout=0.5), C("busy", 0.01, timeout=1.0))
    assert out.results[0].status == "timeout"
    assert out.results[0].message == "the call used more than 0.5 s of CPU time"
    assert 0.5 - CPU_READING_SLACK <= out.results[0].seconds < 2.0 * load_stretch()
    assert out.results[1].status == "returned"


def test_extra_frames_a_submission_writes_never_answer_a_later_call(tmp_path: Path) -> None:
    path = submission(
        tmp_path,
        """
        import os, sys

        def pid():
            return os.getpid()

        def extra():
            payload = b'{"event":"call","status":"returned","mutated":[],"value":99.0}'
            frame = len(payload).to_bytes(4, "big") + payload
            os.write(int(sys.argv[2]), frame + frame)  # two answers at once, before the worker's own
            return 1.0
        """,
    )
    out = run(path, C("pid"), C("extra"), C("pid", hidden=True), C("pid", hidden=True))
    first, extra, second, third = out.results
    # The first frame answers the call (the submission's own choice); frames still waiting at the end
    # of the visible phase mean the channel is out of step, so the hidden phase goes to a fresh job.
    assert extra.value == 99.0
    assert second.status == "returned" and second.value not in (99.0, 1.0, first.value)
    assert third.value == second.value
    # Within a phase, the frames it wrote answer its own next calls: it could have returned those values.
    out = run(path, C("extra"), C("pid"), C("pid"), C("pid"))
    assert [r.value for r in out.results[:3]] == [99.0, 99.0, 1.0]


def test_read_source_reads_the_whole_file_up_to_the_limit(tmp_path: Path) -> None:
    import errno

    from grader.execution.jobs import read_source
    from grader.fileio import MAX_SOURCE_BYTES

    for size in (0, 1, (1 << 16) - 1, 1 << 16, (1 << 16) + 1, MAX_SOURCE_BYTES):
        path = tmp_path / f"f{size}"
        data = os.urandom(size)
        path.write_bytes(data)
        assert read_source(str(path)) == data
    for size in (MAX_SOURCE_BYTES + 1, 3 * MAX_SOURCE_BYTES):  # it grew after it was located
        path = tmp_path / f"g{size}"
        path.write_bytes(b"x" * size)
        with pytest.raises(OSError) as grew:
            read_source(str(path))
        assert grew.value.errno == errno.EFBIG and str(grew.value) == "[Errno 27] larger than 2 MiB"
    (tmp_path / "link").symlink_to(tmp_path / "f1")
    with pytest.raises(OSError) as linked:
        read_source(str(tmp_path / "link"))
    assert linked.value.errno == errno.ELOOP
