"""Issue 26: no exit 4 is reachable from an input file or option of the newer commands.

Hypothesis feeds each input file random bytes, truncations of a valid file and nested variants,
and each address option random text; every run ends with an exit code 0-3 (or, where a reader is
called directly, a `grader.errors.GraderError`), never a traceback. Derandomized and bounded
(a few dozen examples per input), so CI is reproducible and quick; commands run in-process.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.cli import main
from grader.errors import GraderError
from grader.safetext import display

ROOT = Path(__file__).resolve().parents[2]
CORRECT = ROOT / "submissions" / "correct_numpy"
VALID = {
    "policy": b"due: 2026-03-01T23:59:00+00:00\ntimezone: Europe/Paris\ngrace_minutes: 30\n"
    b"penalty: {per: day, percent: 10, cap: 50}\nlate_days: {default: 1, students: {alice: 2}}\ntimes: [lms]\n",
    "course": (ROOT / "course.yaml").read_bytes(),
    "manual": b'student,check,points,comment,grader\nalice,G14.02/zero-scores,1,"half, credit",ta\nbob,G14.05,4,,prof\n',
    "roster": b"id,name\nalice,Alice\nbob,Bob\n",
    "lms-times": b"Identifier,Full name,Status,Last modified (submission)\nParticipant 1,Ann,x,"
    b'"lundi 2 mars 2026, 10:00"\nParticipant 2,Bob,x,2026-03-02T10:00:00Z\n',
    "results": json.dumps(
        {
            "submissions": [
                {
                    "id": "alice",
                    "score": 3,
                    "exercises": [{"id": "E", "checks": [{"id": "c", "status": "passed", "score": 3}]}],
                }
            ]
        }
    ).encode(),
    "public": (ROOT / "exercises" / "public.json").read_bytes()[:20000],
    "shard": json.dumps(
        {"format": "grader-shard/1", "shard": {"k": 1, "n": 2}, "class_ids": ["a"], "ids": ["a"]}
    ).encode(),
}


def variants(valid: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes; the valid file cut anywhere; bytes flipped in it; it nested in lists (YAML or JSON alike)."""
    cut = st.integers(0, len(valid)).map(lambda n: valid[:n])
    flipped = st.tuples(st.integers(0, max(len(valid) - 1, 0)), st.binary(min_size=1, max_size=8)).map(
        lambda p: valid[: p[0]] + p[1] + valid[p[0] + len(p[1]) :]
    )
    nested = st.integers(1, 3000).map(lambda n: b"[" * n + valid + b"]" * n)
    keyed = st.integers(1, 200).map(lambda n: b"a:\n" + b"".join(b" " * (i + 1) + b"a:\n" for i in range(n)))
    return st.one_of(st.binary(max_size=2000), cut, flipped, nested, keyed)


def run_quietly(argv: list[Any]) -> int:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main([str(a) for a in argv])
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code


def command(kind: str, folder: Path, data: bytes) -> list[Any]:
    """The command line that reads ``data`` as the ``kind`` input (and stops soon after: nothing is graded)."""
    nobody = folder / "nobody"
    if kind == "policy":
        (folder / "policy.yaml").write_bytes(data)
        return ["grade", nobody, "--out", folder / "out", "--policy", folder / "policy.yaml"]
    if kind == "course":
        (folder / "pack").mkdir(exist_ok=True)
        (folder / "pack" / "course.yaml").write_bytes(data)
        return ["grade", nobody, "--out", folder / "out", "--pack", folder / "pack"]
    if kind == "manual":
        (folder / "manual.csv").write_bytes(data)
        return ["grade", nobody, "--out", folder / "out", "--manual", folder / "manual.csv"]
    if kind == "results":
        (folder / "old.json").write_bytes(VALID["results"])
        (folder / "new.json").write_bytes(data)
        return ["diff", folder / "old.json", folder / "new.json"]
    if kind == "public":
        (folder / "public.json").write_bytes(data)
        return ["check", CORRECT / "attention.py", "--public", folder / "public.json"]
    if kind == "shard":
        (folder / "s" / "shard").mkdir(parents=True, exist_ok=True)
        (folder / "s" / "shard" / "manifest.json").write_bytes(data)
        return ["merge", folder / "s", "--out", folder / "out"]
    raise AssertionError(kind)


FUZZ = settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADER_COURSE_SECRET", "fuzz-corpus-secret-" + "0123456789abcdef" * 2)


# slow (about 8 s of CPU for the six): each input file's refusals are also checked, case by case, by
# tests/security/test_inputs.py::test_refused_in_one_line (one line, exit 2 or 3, nothing left behind).
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["policy", "course", "manual", "results", "public", "shard"])
def test_commands_never_exit_4_on_an_input_file(kind: str) -> None:
    @FUZZ
    @given(data=variants(VALID[kind]))
    def body(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            code = run_quietly(command(kind, Path(tmp), data))
        assert code in (0, 1, 2, 3), code

    body()


def _readers() -> dict[str, Callable[[str], Any]]:
    from grader.builtin.lms import read_times
    from grader.intake.roster import read_roster

    return {"roster": read_roster, "lms-times": read_times}


@pytest.mark.parametrize("kind", ["roster", "lms-times"])
def test_table_readers_raise_only_grader_errors(kind: str) -> None:
    reader = _readers()[kind]

    @FUZZ
    @given(data=variants(VALID[kind]))
    def body(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "table.csv"
            path.write_bytes(data)
            with contextlib.redirect_stderr(io.StringIO()):
                try:
                    reader(str(path))
                except GraderError as exc:
                    assert exc.exit_code in (2, 3) and "\n" not in display(str(exc))  # as the command line prints it

    body()


# slow (about 2 s of CPU): the address options' refusals are also checked case by case by
# tests/security/test_inputs.py (test_refused_in_one_line's canvas-* and dask-* cases).
@pytest.mark.slow
@FUZZ
@given(
    text=st.one_of(st.text(max_size=80), st.from_regex(r"(tcp|tls|http|ws)://[a-z0-9.:\[\]]{0,20}(:[0-9a-z]{0,7})?/?"))
)
def test_address_options_raise_only_grader_errors(text: str) -> None:
    from grader.config.addresses import check_canvas_url, check_dask_address

    for check in (check_dask_address, check_canvas_url):
        try:
            check(text)
        except GraderError as exc:
            assert exc.exit_code in (2, 3) and "\n" not in display(str(exc))  # as the command line prints it
