"""Issue 26: every input the newer commands take is checked before it is trusted.

One case per defect class over ``policy.yaml``, ``course.yaml``, ``manual.csv``, rosters,
``--lms-times`` worksheets, ``diff``'s results, ``check --public``, shard manifests, ``--dask``,
``--canvas-push``, output paths, empty option values and check-kind plugins. Each case runs
in-process through `grader.cli.main` and asserts the exit code, exactly one stderr line naming
the file or option, the key or line and the fix, no traceback, its time and memory
(`tracemalloc`), and that nothing was left behind (no ``--out``, no TMPDIR folder).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader.cli import main
from grader.packs.public import FORMAT as PUBLIC_FORMAT
from grader.shards import MANIFEST as SHARD_MANIFEST
from grader.shards import SUBFOLDER as SHARD_SUBFOLDER

ROOT = Path(__file__).resolve().parents[2]
CORRECT = ROOT / "submissions" / "correct_numpy"
GOOD_POLICY = "due: 2026-03-01T23:59:00+00:00\npenalty: {per: day, percent: 10, cap: 50}\n"
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9)
)
NESTED_YAML = "due: " + "[" * 200 + "]" * 200 + "\n"
NESTED_JSON = "[" * 100_000 + "]" * 100_000


def time_limit(seconds: float) -> float:
    """``seconds`` on an idle machine; scaled by the load on a shared one (tests run beside others' work)."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * max(1.0, load) * (3 if os.environ.get("CI") else 1)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A course secret (no warning beside the line), and a TMPDIR of the case's own to see what is left there."""
    monkeypatch.setenv("GRADER_COURSE_SECRET", "security-corpus-secret-" + "0123456789abcdef" * 2)
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.delenv("CANVAS_API_TOKEN", raising=False)


def run(argv: list[Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, float, float]:
    """Run ``grader`` in-process: (exit code, stdout, stderr, seconds, peak MiB allocated)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        code = main([str(a) for a in argv])
    finally:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    out, err = capsys.readouterr()
    return code, out, err, seconds, peak


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# --- the cases: (name, argv from the case's folder, exit code, pieces of the one stderr line) ------------------


def policy(text: str | bytes) -> Callable[[Path], list[Any]]:
    def argv(t: Path) -> list[Any]:
        return ["grade", CORRECT, "--out", t / "out", "--policy", write(t / "policy.yaml", text)]

    return argv


def manual(text: str | bytes) -> Callable[[Path], list[Any]]:
    def argv(t: Path) -> list[Any]:
        return ["grade", CORRECT, "--out", t / "out", "--manual", write(t / "manual.csv", text)]

    return argv


def roster(text: str | bytes) -> Callable[[Path], list[Any]]:
    def argv(t: Path) -> list[Any]:
        return ["grade", CORRECT, "--out", t / "out", "--roster", write(t / "roster.csv", text)]

    return argv


def lms_times(text: str | bytes) -> Callable[[Path], list[Any]]:
    def argv(t: Path) -> list[Any]:
        p = write(t / "policy.yaml", GOOD_POLICY)
        w = write(t / "worksheet.csv", text)
        return ["grade", CORRECT, "--out", t / "out", "--policy", p, "--lms-times", w]

    return argv


def course(text: str | bytes | None) -> Callable[[Path], list[Any]]:
    def argv(t: Path) -> list[Any]:
        if text is None:
            (t / "pack" / "course.yaml").mkdir(parents=True)
        else:
            write(t / "pack" / "course.yaml", text)
        return ["grade", CORRECT, "--out", t / "out", "--pack", t / "pack"]

    return argv


RESULTS_OK = {"submissions": [{"id": "alice", "score": 3, "exercises": []}]}


def diff(data: Any) -> Callable[[Path], list[Any]]:
    def argv(t: Path) -> list[Any]:
        old = write(t / "old.json", json.dumps(RESULTS_OK))
        new = write(t / "new.json", data if isinstance(data, (str, bytes)) else json.dumps(data))
        return ["diff", old, new]

    return argv


def public(text: str) -> Callable[[Path], list[Any]]:
    def argv(t: Path) -> list[Any]:
        return ["check", CORRECT / "attention.py", "--public", write(t / "public.json", text)]

    return argv


def shard(text: str) -> Callable[[Path], list[Any]]:
    def argv(t: Path) -> list[Any]:
        write(t / "s1" / SHARD_SUBFOLDER / SHARD_MANIFEST, text)
        return ["merge", t / "s1", "--out", t / "out"]

    return argv


def grade_with(*options: Any) -> Callable[[Path], list[Any]]:
    return lambda t: ["grade", CORRECT, "--out", t / "out", *options]


def plugin(source: str) -> Callable[[Path], list[Any]]:
    def argv(t: Path) -> list[Any]:
        name = f"kinds_{abs(hash(source)) % 10**8}"
        write(t / "plugins" / f"{name}.py", source)
        sys.path.insert(0, str(t / "plugins"))
        return ["grade", CORRECT, "--out", t / "out", "-p", name]

    return argv


KIND_PLUGIN = """
from grader.markers import hookimpl

class Kind:
    name = {name!r}
    params = {{}}
    schema = {{}}
    expects_raise = False
    def prepare(self, check, ctx): ...
    def judge(self, check, prepared, results, ctx): ...

@hookimpl
def grader_check_kinds():
    {body}
"""

SPEC_WITH_KIND = """exercise: M
title: One defect
section: Malformed inputs
seed: 1
returns:
  attention: [outputs, weights]
  softmax: [weights]
defaults: {points: 1, visibility: hidden, hint: Reread the section., timeout: 2}
checks:
  - id: the-check
    kind: myx
    function: softmax
    args: {scores: {normal: [4]}}
"""


def kind_prepare(body: str) -> Callable[[Path], list[Any]]:
    """A plugin's kind 'myx' whose prepare runs ``body``, and a spec using it."""

    def argv(t: Path) -> list[Any]:
        source = KIND_PLUGIN.format(name="myx", body="return [Kind()]").replace(
            "def prepare(self, check, ctx): ...", f"def prepare(self, check, ctx):\n        {body}"
        )
        args = plugin(source)(t)
        write(t / "specs" / "m.yaml", SPEC_WITH_KIND)
        return [*args, "--specs", t / "specs"]

    return argv


MANUAL_HEADER = "student,check,points,comment,grader\n"
XLSX = b"PK\x03\x04\x14\x00\x06\x00" + bytes(200)
XLS = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(200)
LATIN1_CSV = "student,check,points,comment,grader\nalice,G14.02,1,très bien,ta\n".encode("latin-1")
WORKSHEET = "Identifier,Full name,Status,Last modified (submission)\n"

CASES: list[tuple[str, Callable[[Path], list[Any]], int, list[str]]] = [
    # policy.yaml: the strict YAML loader, then meaning
    ("policy-alias-bomb", policy(ALIAS_BOMB), 3, ["policy.yaml", "aliases (*name) are not allowed"]),
    ("policy-due-twice", policy(GOOD_POLICY + "due: 2026-03-02T23:59:00Z\n"), 3, ["duplicate key 'due'", "line 3"]),
    (
        "policy-feb-30",
        policy("due: 2026-02-30T23:59:00\n"),
        3,
        ["due: '2026-02-30T23:59:00'", "not a date that exists"],
    ),
    ("policy-month-13", policy("due: 2026-13-01T23:59:00Z\n"), 3, ["due:", "not a date that exists", "ISO 8601"]),
    ("policy-offset-25h", policy("due: 2026-03-01T23:59:00+25:00\n"), 3, ["due:", "offset +25:00 is out of range"]),
    ("policy-hour-25", policy("due: 2026-03-01T25:00:00Z\n"), 3, ["due:", "not a time that exists"]),
    ("policy-due-words", policy("due: next friday\n"), 3, ["due: 'next friday' is not a date and time", "ISO 8601"]),
    ("policy-grace-nan", policy(GOOD_POLICY + "grace_minutes: .nan\n"), 3, ["grace_minutes: nan", "below a year"]),
    ("policy-grace-1e15", policy(GOOD_POLICY + "grace_minutes: 1.0e+15\n"), 3, ["grace_minutes", "below a year"]),
    ("policy-grace-negative", policy(GOOD_POLICY + "grace_minutes: -5\n"), 3, ["grace_minutes", "minutes >= 0"]),
    (
        "policy-points-inf",
        policy("due: 2026-03-01\npenalty: {per: day, points: .inf}\n"),
        3,
        ["penalty.points", "finite"],
    ),
    (
        "policy-cap-150",
        policy("due: 2026-03-01\npenalty: {per: day, percent: 10, cap: 150}\n"),
        3,
        ["penalty.cap", "at most 100"],
    ),
    (
        "policy-percent-150",
        policy("due: 2026-03-01\npenalty: {per: day, percent: 150}\n"),
        3,
        ["penalty.percent", "0 to 100"],
    ),
    (
        "policy-both-units",
        policy("due: 2026-03-01\npenalty: {per: day, percent: 1, points: 1}\n"),
        3,
        ["penalty", "exactly one of percent and points"],
    ),
    (
        "policy-per-week",
        policy("due: 2026-03-01\npenalty: {per: week, percent: 1}\n"),
        3,
        ["penalty.per", "per: day or per: hour"],
    ),
    ("policy-latin1", policy("# échéance\n".encode("latin-1") + GOOD_POLICY.encode()), 3, ["policy.yaml", "not UTF-8"]),
    ("policy-binary", policy(bytes(range(256))), 3, ["policy.yaml", "not UTF-8"]),
    ("policy-bad-zone", policy(GOOD_POLICY + "timezone: Mars/Olympus\n"), 3, ["timezone", "unknown time zone", "IANA"]),
    ("policy-tag", policy("due: !!python/object:os.system x\n"), 3, ["policy.yaml", "python/object", "no tags"]),
    ("policy-list", policy("- due\n"), 3, ["policy.yaml", "must be a mapping", "due"]),
    ("policy-empty", policy(""), 3, ["policy.yaml", "must be a mapping"]),
    ("policy-deep", policy(NESTED_YAML), 3, ["policy.yaml", "nested more than 32 levels"]),
    ("policy-late-days-negative", policy(GOOD_POLICY + "late_days: {default: -1}\n"), 3, ["late_days.default", ">= 0"]),
    (
        "policy-late-days-huge",
        policy(GOOD_POLICY + "late_days: {default: 100000}\n"),
        3,
        ["late_days.default", "0 to 366"],
    ),
    ("policy-flag-units-float", policy(GOOD_POLICY + "late_flag_units: 1.5\n"), 3, ["late_flag_units", "(>= 0)"]),
    ("policy-unknown-key", policy(GOOD_POLICY + "grace: 5\n"), 3, ["grace", "remove it or check its spelling"]),
    ("policy-too-large", policy("# " + "x" * (1 << 20) + "\n" + GOOD_POLICY), 3, ["policy.yaml", "limited to"]),
    ("policy-folder", lambda t: ["grade", CORRECT, "--out", t / "out", "--policy", t], 3, ["--policy", "is a folder"]),
    (
        "policy-missing",
        lambda t: ["grade", CORRECT, "--out", t / "out", "--policy", t / "no.yaml"],
        3,
        ["--policy", "no such file"],
    ),
    # course.yaml
    ("course-alias-bomb", course(ALIAS_BOMB), 3, ["course.yaml", "aliases (*name) are not allowed"]),
    ("course-folder", course(None), 3, ["course.yaml: a folder, not a file", "YAML file"]),
    ("course-list", course("- id\n- title\n"), 3, ["course.yaml: the manifest is a list, not a mapping", "id, title"]),
    ("course-empty", course(""), 3, ["course.yaml: the manifest is empty", "write a mapping"]),
    ("course-duplicate-key", course("id: a\nid: b\n"), 3, ["course.yaml", "duplicate key 'id'"]),
    (
        "course-latin1",
        course("title: Théorie\n".encode("latin-1")),
        3,
        ["course.yaml", "not UTF-8", "save the manifest"],
    ),
    ("course-tag", course("id: !!binary aGk=\n"), 3, ["course.yaml", "not allowed"]),
    ("course-deep", course("id: " + "[" * 100 + "]" * 100 + "\n"), 3, ["course.yaml", "nested"]),
    # manual.csv
    ("manual-xlsx", manual(XLSX), 3, ["--manual", "manual.csv", "Excel workbook (.xlsx)", "CSV UTF-8"]),
    ("manual-xls", manual(XLS), 3, ["--manual", "old Excel workbook (.xls)", "CSV UTF-8"]),
    ("manual-pdf", manual(b"%PDF-1.4\n" + bytes(50)), 3, ["--manual", "PDF document", "CSV UTF-8"]),
    ("manual-latin1", manual(LATIN1_CSV), 3, ["--manual", "not UTF-8 text", "Latin-1", "CSV UTF-8"]),
    ("manual-utf16-no-bom", manual(MANUAL_HEADER.encode("utf-16-le")), 3, ["--manual", "NUL characters", "CSV UTF-8"]),
    ("manual-utf32", manual("a,b\n".encode("utf-32")), 3, ["--manual", "UTF-32", "CSV UTF-8"]),
    (
        "manual-decimal-comma-semicolon",
        manual("student;check;points\nalice;G14.02;1,5\n"),
        3,
        ["line 2: points: '1,5' has a decimal comma", "write 1.5"],
    ),
    (
        "manual-decimal-comma-shift",
        manual("student,check,points,comment\nalice,G14.02,1,5,ok\n"),
        3,
        ["line 2:", "5 cells but the header names 4", "write 1.5"],
    ),
    (
        "manual-points-nan",
        manual(MANUAL_HEADER + "alice,G14.02,nan,,\n"),
        3,
        ["line 2: points: 'nan' is not a number >= 0"],
    ),
    ("manual-points-inf", manual(MANUAL_HEADER + "alice,G14.02,inf,,\n"), 3, ["line 2: points: 'inf'"]),
    ("manual-points-negative", manual(MANUAL_HEADER + "alice,G14.02,-1,,\n"), 3, ["line 2: points: '-1'"]),
    (
        "manual-points-text",
        manual(MANUAL_HEADER + "alice,G14.02,half,,\n"),
        3,
        ["line 2: points: 'half'", "give the points"],
    ),
    (
        "manual-empty-student",
        manual(MANUAL_HEADER + ",G14.02,1,,\n"),
        3,
        ["line 2: student: empty", "give the student id"],
    ),
    (
        "manual-empty-check",
        manual(MANUAL_HEADER + "alice,G14.02/,1,,\n"),
        3,
        ["line 2: check: 'G14.02/' is not EXERCISE or EXERCISE/CHECK"],
    ),
    (
        "manual-duplicate",
        manual(MANUAL_HEADER + "alice,G14.02,1,,\nalice,G14.02,2,,\n"),
        3,
        ["line 3: check:", "on line 2", "one row per student"],
    ),
    (
        "manual-no-points-column",
        manual("student,check,score\nalice,G14.02,1\n"),
        3,
        ["line 1: no column 'points'", "comma-separated"],
    ),
    (
        "manual-column-twice",
        manual("student,check,points,points\nalice,G14.02,1,1\n"),
        3,
        ["line 1: points: the column is named twice"],
    ),
    ("manual-empty", manual(""), 3, ["--manual", "empty", "the first row must name the columns"]),
    (
        "manual-unclosed-quote",
        manual(MANUAL_HEADER + 'alice,G14.02,1,"never closed\n'),
        3,
        ["--manual", "not valid CSV", "close every quoted cell"],
    ),
    ("manual-folder", lambda t: ["grade", CORRECT, "--out", t / "out", "--manual", t], 3, ["--manual", "is a folder"]),
    (
        "manual-unknown-exercise",
        manual(MANUAL_HEADER + "alice,G99.01,1,,\n"),
        3,
        ["line 2: check: no exercise 'G99.01'"],
    ),
    (
        "manual-too-many-points",
        manual(MANUAL_HEADER + "alice,G14.02,1000,,\n"),
        3,
        ["line 2: points: 1000 is more than G14.02 is worth"],
    ),
    # rosters
    ("roster-xlsx", roster(XLSX), 2, ["--roster", "Excel workbook (.xlsx)", "CSV UTF-8"]),
    ("roster-latin1", roster("id\nrené\n".encode("latin-1")), 2, ["--roster", "not UTF-8 text", "CSV UTF-8"]),
    (
        "roster-semicolon-no-id",
        roster("name;email\nBob;b@x\n"),
        2,
        ["--roster", "no student id column", "semicolon-separated"],
    ),
    ("roster-id-twice", roster("id\nbob\nbob\n"), 2, ["--roster", "listed twice, on lines 2 and 3"]),
    ("roster-empty", roster(""), 2, ["--roster", "holds no student ids"]),
    ("roster-utf16-dup", roster("id\tname\nbob\tB\nbob\tC\n".encode("utf-16")), 2, ["--roster", "listed twice"]),
    # --lms-times worksheets
    ("lms-times-xlsx", lms_times(XLSX), 2, ["--lms-times", "Excel workbook (.xlsx)", "CSV UTF-8"]),
    (
        "lms-times-latin1",
        lms_times((WORKSHEET + "Participant 1,Renée,x,lundi 2 mars 2026, 10:00\n").encode("latin-1")),
        2,
        ["--lms-times", "not UTF-8"],
    ),
    (
        "lms-times-unknown-format",
        lms_times(WORKSHEET + 'Participant 1,Ann,x,"31/02/2026 25:61"\n'),
        2,
        [
            "--lms-times",
            "line 2: last modified (submission): '31/02/2026 25:61' is not a date this grader reads",
            "ISO 8601",
            "French",
        ],
    ),
    (
        "lms-times-no-time-column",
        lms_times("Identifier,Full name\nParticipant 1,Ann\n"),
        2,
        ["--lms-times", "needs an id column", "found 'identifier', 'full name'"],
    ),
    ("lms-times-empty", lms_times(""), 2, ["--lms-times", "empty; export the grading worksheet again"]),
    # diff's results.json
    (
        "diff-no-score",
        diff({"submissions": [{"id": "alice"}]}),
        2,
        ["new.json: submissions[0].score: missing", "results.json of 'grader grade'"],
    ),
    (
        "diff-text-score",
        diff({"submissions": [{"id": "alice", "score": "ten"}]}),
        2,
        ["submissions[0].score: 'ten' is not a number"],
    ),
    (
        "diff-check-score-null",
        diff(
            {
                "submissions": [
                    {
                        "id": "a",
                        "score": 1,
                        "exercises": [{"id": "E", "checks": [{"id": "c", "status": "passed", "score": None}]}],
                    }
                ]
            }
        ),
        2,
        ["submissions[0].exercises[0].checks[0].score: missing"],
    ),
    ("diff-deep", diff(NESTED_JSON), 2, ["new.json: nested 100000 levels deep", "results.json"]),
    (
        "diff-nan",
        diff('{"submissions": [{"id": "a", "score": NaN}]}'),
        2,
        ["new.json: not valid JSON", "NaN is not JSON"],
    ),
    ("diff-not-json", diff("{submissions: oops"), 2, ["new.json: not valid JSON (line 1, column 2)"]),
    ("diff-list", diff([1, 2]), 2, ["new.json: submissions: missing or not a list"]),
    ("diff-submissions-dict", diff({"submissions": {"alice": 1}}), 2, ["submissions: missing or not a list"]),
    (
        "diff-id-twice",
        diff({"submissions": [{"id": "a", "score": 1}, {"id": "a", "score": 2}]}),
        2,
        ["submissions[1].id: 'a' is listed twice"],
    ),
    ("diff-binary", diff(b"\xff\xfe\x00garbage"), 2, ["new.json: not UTF-8 text"]),
    ("diff-folder", lambda t: ["diff", t, t], 2, ["is a folder, not a JSON file"]),
    # check --public
    ("public-deep", public(NESTED_JSON), 3, ["public.json: nested 100000 levels deep", "grader publish"]),
    ("public-not-json", public("{"), 3, ["public.json: not valid JSON", "grader publish"]),
    ("public-list", public("[]"), 3, ["public.json: not a public-checks file", "grader publish"]),
    (
        "public-no-exercises",
        public(json.dumps({"format": PUBLIC_FORMAT})),
        3,
        ["public.json: not a public-checks file", "KeyError", "grader publish"],
    ),
    (
        "public-wrong-check",
        public(json.dumps({"format": PUBLIC_FORMAT, "exercises": [{"checks": [1]}]})),
        3,
        ["not a public-checks file", "grader publish"],
    ),
    # merge: shard manifests
    ("shard-deep", shard(NESTED_JSON), 2, [SHARD_MANIFEST, "nested 100000 levels deep", "grade that shard again"]),
    ("shard-list", shard("[]"), 2, [SHARD_MANIFEST, "not a shard manifest"]),
    ("shard-not-json", shard("{"), 2, [SHARD_MANIFEST, "not valid JSON", "grade that shard again"]),
    # --dask: parsed before anything starts
    (
        "dask-port-99999",
        grade_with("--dask", "tcp://127.0.0.1:99999"),
        2,
        ["--dask tcp://127.0.0.1:99999", "out of range (1-65535)"],
    ),
    (
        "dask-port-word",
        grade_with("--dask", "tcp://127.0.0.1:eight"),
        2,
        ["--dask", "the port 'eight' is not a number"],
    ),
    (
        "dask-tls-no-certs",
        grade_with("--dask", "tls://127.0.0.1:8786"),
        2,
        ["--dask", "tls:// needs certificates", "DASK_DISTRIBUTED__COMM__TLS__CA_FILE"],
    ),
    (
        "dask-http-scheme",
        grade_with("--dask", "http://127.0.0.1:8787"),
        2,
        ["--dask", "unknown scheme 'http'", "tcp://HOST:8786"],
    ),
    (
        "dask-tls-missing-file",
        grade_with("--dask", "tls://127.0.0.1:8786", "--dask-tls-ca", "/nonexistent/ca.pem", "--dask-tls-cert", "x"),
        2,
        ["--dask-tls-ca /nonexistent/ca.pem: no such readable file"],
    ),
    (
        "dask-tls-files-for-tcp",
        grade_with("--dask", "tcp://127.0.0.1:8786", "--dask-tls-ca", __file__, "--dask-tls-cert", __file__),
        2,
        ["--dask tcp://127.0.0.1:8786", "--dask-tls-* given for a tcp:// address"],
    ),
    ("cpu-weight-zero", grade_with("--cpu-weight", "0"), 2, ["--cpu-weight", "0 is out of range", "1 to 10000"]),
    ("cpu-weight-word", grade_with("--cpu-weight", "low"), 2, ["--cpu-weight", "invalid number: 'low'"]),
    ("dask-empty", grade_with("--dask", ""), 2, ["--dask: empty", "give a value"]),
    ("dask-empty-equals", grade_with("--dask="), 2, ["--dask: empty"]),
    ("dask-no-host", grade_with("--dask", "tcp://:8786"), 2, ["--dask", "no host"]),
    (
        "dask-refused",
        grade_with("--dask", "tcp://127.0.0.1:9"),
        2,
        ["--dask tcp://127.0.0.1:9", "cannot reach the Dask scheduler"],
    ),
    # --canvas-push: parsed before anything starts
    (
        "canvas-port-word",
        grade_with("--canvas-push", "https://canvas.example.edu:x/courses/1/assignments/2"),
        3,
        ["--canvas-push", "the port 'x' is not a number"],
    ),
    (
        "canvas-port-range",
        grade_with("--canvas-push", "https://canvas.example.edu:70000/courses/1/assignments/2"),
        3,
        ["--canvas-push", "out of range"],
    ),
    (
        "canvas-ftp",
        grade_with("--canvas-push", "ftp://canvas.example.edu/courses/1/assignments/2"),
        3,
        ["--canvas-push", "the scheme 'ftp' is not https"],
    ),
    (
        "canvas-not-assignment",
        grade_with("--canvas-push", "https://canvas.example.edu/courses/1"),
        3,
        ["--canvas-push", "not an assignment's address"],
    ),
    (
        "canvas-password",
        grade_with("--canvas-push", "https://u:p@canvas.example.edu/courses/1/assignments/2"),
        3,
        ["--canvas-push", "CANVAS_API_TOKEN"],
    ),
    ("canvas-empty", grade_with("--canvas-push", ""), 2, ["--canvas-push: empty"]),
    # output paths and empty values
    (
        "init-ci-under-proc",
        lambda t: ["init-ci", "github", "--dir", "/proc/grader-ci"],
        2,
        ["--dir /proc/grader-ci: under /proc", "choose another --dir"],
    ),
    (
        "init-ci-a-file",
        lambda t: ["init-ci", "github", "--dir", write(t / "f", "x")],
        2,
        ["--dir", "exists and is not a folder", "choose another --dir"],
    ),
    (
        "init-ci-below-a-file",
        lambda t: ["init-ci", "github", "--dir", write(t / "f", "x") / "repo"],
        2,
        ["--dir", "is not a folder); choose another --dir"],
    ),
    (
        "package-out-a-file",
        lambda t: ["build-student-package", "--out", write(t / "f", "x")],
        2,
        ["--out", "exists and is not a folder"],
    ),
    (
        "package-out-under-sys",
        lambda t: ["build-student-package", "--out", "/sys/grader-dist"],
        2,
        ["--out /sys/grader-dist: under /sys"],
    ),
    ("json-under-proc", grade_with("--json", "/proc/grader.json"), 2, ["--json", "under /proc, a kernel file system"]),
    ("merge-not-a-shard", lambda t: ["merge", t, "--out", t / "out"], 2, ["not a shard folder", "--shard K/N"]),
    ("pack-empty", grade_with("--pack", ""), 2, ["--pack: empty (an unset variable?)"]),
    ("out-empty", lambda t: ["grade", CORRECT, "--out", ""], 2, ["--out: empty"]),
    ("jobs-100000", grade_with("--jobs", "100000"), 2, ["--jobs", "at most 256", "got 100000"]),
    # check-kind plugins that misbehave
    (
        "kinds-hook-returns-text",
        plugin(KIND_PLUGIN.format(name="x", body="return 'compare'")),
        3,
        ["grader_check_kinds returned a str", "list of check kinds"],
    ),
    (
        "kinds-hook-raises",
        plugin(KIND_PLUGIN.format(name="x", body="raise RuntimeError('boom')")),
        3,
        ["grader_check_kinds failed", "RuntimeError: boom", "-p no:"],
    ),
    (
        "kinds-hook-wrong-items",
        plugin(KIND_PLUGIN.format(name="x", body="return [1, 2]")),
        3,
        ["returned a int that is not a check kind"],
    ),
    (
        "kinds-same-name",
        plugin(KIND_PLUGIN.format(name="compare", body="return [Kind()]")),
        3,
        ["two plugins define the check kind 'compare'", "checks", "kinds_", "rename one"],
    ),
    (
        "kind-prepare-raises",
        kind_prepare("raise KeyError('rtol')"),
        3,
        [
            "m.yaml: check 'the-check': the check kind 'myx'",
            "failed to prepare it",
            "KeyError",
            "fix the kind's plugin",
        ],
    ),
    (
        "kind-prepare-returns-text",
        kind_prepare("return 'prepared'"),
        3,
        ["m.yaml: check 'the-check': the check kind 'myx'", "returned a str from prepare, not a Prepared"],
    ),
]


def test_the_corpus_covers_every_class() -> None:
    assert len(CASES) >= 80
    names = " ".join(name for name, *_ in CASES)
    for word in (
        "policy",
        "course",
        "manual",
        "roster",
        "lms-times",
        "diff",
        "public",
        "shard",
        "dask",
        "canvas",
        "init-ci",
        "package",
        "empty",
        "jobs",
        "kinds",
        "alias-bomb",
        "xlsx",
        "latin1",
        "deep",
    ):
        assert word in names, word


@pytest.mark.timing
@pytest.mark.parametrize(("name", "argv", "code", "pieces"), CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line(
    name: str,
    argv: Callable[[Path], list[Any]],
    code: int,
    pieces: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    case = tmp_path / "case"
    case.mkdir()
    args = argv(case)
    before = set(os.listdir(tmp_path / "tmpdir"))
    got, out, err, seconds, peak = run(args, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert got == code, (got, err)
    assert "Traceback" not in err + out
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("grader: error: "), line
    for piece in pieces:
        assert piece in line, (piece, line)
    assert seconds < time_limit(5.0), seconds
    assert peak < 200, f"{peak:.1f} MiB allocated"
    assert not (case / "out").exists(), "a refused run left its --out behind"
    assert set(os.listdir(tmp_path / "tmpdir")) == before, "a refused run left a TMPDIR folder behind"


def test_alias_bombs_are_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every YAML input: a billion-laughs file is refused in under a second (no expansion)."""
    for name, argv in (("policy", policy(ALIAS_BOMB)), ("course", course(ALIAS_BOMB))):
        folder = tmp_path / name
        folder.mkdir()
        code, _, err, seconds, _ = run(argv(folder), capsys)
        assert code == 3 and "aliases (*name) are not allowed" in err, err
        assert seconds < time_limit(1.0), (name, seconds)


# --- warnings: the run goes on (exit 0) and one line names what does nothing --------------------------------------


WARNINGS = [
    (
        "lms-times-without-policy",
        lambda t: ["--lms-times", write(t / "w.csv", WORKSHEET)],
        "without --policy the times change nothing",
    ),
    (
        "times-empty",
        lambda t: ["--policy", write(t / "p.yaml", GOOD_POLICY + "times: []\n")],
        "times: [] names no trusted time source",
    ),
    (
        "late-days-unknown-student",
        lambda t: ["--policy", write(t / "p.yaml", GOOD_POLICY + "late_days: {students: {nobody: 2}}\n")],
        "late_days.students: no submission in this run for nobody",
    ),
    (
        "roster-empty-ids",
        lambda t: ["--roster", write(t / "r.csv", "id,name\ncorrect_numpy,A\n,B\n")],
        "1 row(s) with an empty 'id' are left out (line 3)",
    ),
    (
        "lms-times-unknown-row",
        lambda t: [
            "--policy",
            write(t / "p.yaml", GOOD_POLICY),
            "--lms-times",
            write(t / "w.csv", WORKSHEET + "Participant 99,Nobody,x,2026-03-02T10:00:00Z\n"),
        ],
        "1 row(s) match no submission of this run: 99",
    ),
    (
        "lms-times-short-row",
        lambda t: [
            "--policy",
            write(t / "p.yaml", GOOD_POLICY),
            "--lms-times",
            write(t / "w.csv", WORKSHEET + "Participant 7\n"),
        ],
        "1 row(s) too short to hold a time are left out (line 2)",
    ),
]


@pytest.mark.parametrize(("name", "options", "warning"), WARNINGS, ids=[w[0] for w in WARNINGS])
def test_combinations_that_do_nothing_are_named(
    name: str, options: Callable[[Path], list[Any]], warning: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err, _, _ = run(
        ["grade", CORRECT, "--out", tmp_path / "out", "--insecure", "-q", *options(tmp_path)], capsys
    )
    assert code == 0, err
    assert "Traceback" not in err
    assert sum(warning in line for line in err.splitlines()) == 1, err


# --- the network: a silent server ends the run in under 30 s with one line ----------------------------------------


class _Server:
    """A local TCP server on 127.0.0.1 that accepts and then never speaks (or answers ``reply`` to anything)."""

    def __init__(self, reply: bytes | None = None) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.reply is not None:
                try:
                    conn.settimeout(25)
                    conn.recv(65536)
                    conn.sendall(self.reply)
                    conn.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.mark.slow
def test_dask_to_a_silent_server_ends_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = _Server()
    try:
        code, _, err, seconds, _ = run(
            ["grade", CORRECT, "--out", tmp_path / "out", "--dask", f"tcp://127.0.0.1:{server.port}"], capsys
        )
    finally:
        server.close()
    assert code == 2 and seconds < 30, (code, seconds)
    [line] = err.splitlines()
    assert "said nothing within 10 s: not a Dask scheduler" in line and f"127.0.0.1:{server.port}" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_dask_to_an_http_server_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = _Server(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html></html>")
    try:
        code, _, err, seconds, _ = run(
            ["grade", CORRECT, "--out", tmp_path / "out", "--dask", f"127.0.0.1:{server.port}"], capsys
        )
    finally:
        server.close()
    assert code == 2 and seconds < 30
    [line] = err.splitlines()
    assert "an HTTP server answered, not a Dask scheduler" in line


class _Report:
    submissions: list[Any] = []


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (None, "sent no answer within 1 s"),  # READ_TIMEOUT (15 s) patched to 1 s: the same path, 14 s sooner
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 27\r\n\r\n<html>Log in to SSO</html>\n",
            "an HTML page (a login page or a proxy?)",
        ),
        (
            b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"hello": 1}',
            "JSON that is not Canvas's",
        ),
    ],
    ids=["silent", "html-login-page", "not-canvas-json"],
)
def test_canvas_push_to_the_wrong_server_is_named(
    reply: bytes | None, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.builtin.lms import push_to_canvas
    from grader.errors import ConfigError

    monkeypatch.setattr("grader.config.addresses.READ_TIMEOUT", 1.0)

    server = _Server(reply)
    url = f"http://127.0.0.1:{server.port}/courses/1/assignments/2"
    start = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as err:
            push_to_canvas(_Report(), url, "token", "G14")  # type: ignore[arg-type]
    finally:
        server.close()
    assert time.perf_counter() - start < 30
    assert words in str(err.value) and url in str(err.value) and "\n" not in str(err.value)


# --- locale-aware LMS times ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Monday, 2 March 2026, 10:30 AM",
        "lundi 2 mars 2026, 10:30",
        "Montag, 2. März 2026, 10:30",
        "lunes, 2 de marzo de 2026, 10:30",
        "segunda-feira, 2 de março de 2026, 10:30",
        "2026-03-02T10:30:00",
    ],
)
def test_moodle_dates_in_five_languages(text: str) -> None:
    import datetime as dt

    from grader.term import parse_local_time, parse_time

    assert parse_local_time(text) == dt.datetime(2026, 3, 2, 10, 30)
    paris = __import__("zoneinfo").ZoneInfo("Europe/Paris")
    assert parse_time(text, paris) == dt.datetime(2026, 3, 2, 9, 30, tzinfo=dt.UTC)  # read in the policy's zone


@pytest.mark.slow
def test_a_spec_refusal_prints_one_line_every_time(tmp_path: Path) -> None:
    """The settler thread's race on the way out (issue 26: 8 of 12 runs printed 'Exception in thread
    grader-settle ... Bad file descriptor' after the line on main at 223226b): a real process, run again."""
    import subprocess

    env = {**os.environ, "GRADER_COURSE_SECRET": "security-corpus-secret-" + "0123456789abcdef" * 2}
    spec = ROOT / "tests" / "malformed" / "specs" / "01-compare-negative-rtol"
    for _ in range(6):
        proc = subprocess.run(
            [sys.executable, "-m", "grader", "grade", CORRECT, "--specs", spec, "--out", tmp_path / "out"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 3
        assert proc.stderr.count("\n") == 1 and "Exception in thread" not in proc.stderr, proc.stderr
        assert not (tmp_path / "out").exists()
