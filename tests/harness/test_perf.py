"""Issue 16's structural guarantees: what ``grader check`` imports, and the manifest's fast check.

Rates and memory are measured by ``benchmarks/bench_limits.py`` (their figures depend on the
machine); these tests pin what makes them possible and does not depend on load.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from grader.packs import _SCHEMA, _plainly_valid, find_pack

HEAVY = (
    "jsonschema",
    "jinja2",
    "sqlite3",
    "xml.etree.ElementTree",
    "statistics",
    "difflib",
    "gzip",
    "tqdm",
    "nbformat",
    "zipfile",
    "tarfile",
    "importlib.metadata",
    "email",
    "grader.term.ledger",
    "grader.intake.archive",
)
"""What ``grader check attention.py`` never needs, on either of its paths (issue 16): schema validation
of valid files, HTML pages, the gradebook, JUnit XML, the class summary, spelling suggestions, shard
records, the progress bar and notebooks; nor archives, installed packages' metadata (the entry
points are kept, `grader.readers.entrypoints`) or a term's ledger (issue 29)."""


def _check_in_a_student_folder(
    tmp_path: Path, source: Path, *options: str, env: dict[str, str] | None = None
) -> tuple[int, list[str], str, int]:
    """Run ``grader check`` on a copy of ``source`` in a folder outside the repository, in a fresh interpreter.

    Returns the exit code, the `HEAVY` modules (and PyYAML) it imported, what it printed and its process id.
    """
    pack = find_pack()
    folder = tmp_path / "student"
    folder.mkdir(parents=True)
    shutil.copy(source, folder / pack.submission)
    script = (
        "import io, json, os, sys, contextlib\n"
        "from grader.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    code = main(['check', {pack.submission!r}, *{list(options)!r}])\n"
        f"print(json.dumps([code, sorted(m for m in {[*HEAVY, 'yaml']!r} if m in sys.modules), out.getvalue(), os.getpid()]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    code, imported, printed, pid = json.loads(done.stdout.strip().splitlines()[-1])
    return code, imported, printed, pid


@pytest.mark.parametrize("public", [False, True], ids=["the-pack-s-specs", "the-public-checks"])
@pytest.mark.parametrize("submission", ["starter", "correct"])
def test_grader_check_imports_no_plugin_library_it_does_not_use(tmp_path: Path, public: bool, submission: str) -> None:
    pack = find_pack()
    source = pack.starter if submission == "starter" else pack.samples / "correct_numpy" / pack.submission
    options = ["--public", str(pack.public)] if public else []  # without: this checkout's specs, as staff run it
    cache = {"GRADER_CACHE_DIR": str(tmp_path / "cache")}
    code, imported, printed, _ = _check_in_a_student_folder(tmp_path, source, *options, env=cache)
    assert code == (1 if submission == "starter" else 0), printed  # the starter's checks are not attempted
    # An empty cache folder: the installed entry points are read once (importlib.metadata) and kept.
    imported = [m for m in imported if m not in ("importlib.metadata", "email", "zipfile")]
    assert imported == ([] if public else ["yaml"])  # the public checks need no YAML: the manifest is kept parsed
    assert ("23 passed, 0 failed" in printed) == (submission == "correct")
    # Run again: the specs parsed before are kept (grader.readers.keptyaml), so no path imports PyYAML (issue 29).
    again = _check_in_a_student_folder(tmp_path / "again", source, *options, env=cache)
    assert again[:3] == (code, [], printed)


def test_the_grader_s_numpy_runs_one_blas_thread_unless_told_otherwise() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    script = "import os, grader; print(os.environ['OPENBLAS_NUM_THREADS'])"
    assert subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True).stdout == "1\n"
    env["OPENBLAS_NUM_THREADS"] = "2"
    assert subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True).stdout == "2\n"


def test_grader_check_forks_the_student_s_job_from_a_server_started_at_once(tmp_path: Path) -> None:
    from grader.execution.jobs import ForkServer

    source = tmp_path / "attention.py"
    source.write_text(find_pack().starter.read_text() + "\nimport os\nprint('my parent:', os.getppid())\n")
    code, _, printed, grader_pid = _check_in_a_student_folder(tmp_path, source)
    assert code == 1
    parent = int(next(x for x in printed.splitlines() if "my parent:" in x).split()[-1])
    # Forked by the warm server the command line started first (it imported numpy meanwhile), not
    # started by the grader as a fresh interpreter; where there is no fork, a fresh interpreter.
    assert (parent != grader_pid) == ForkServer.available()


def _manifest() -> dict:
    import yaml

    return yaml.safe_load((find_pack().root / "course.yaml").read_text())


def _variants() -> list[dict]:
    base = _manifest()
    out = []
    for key, value in [
        ("id", "bad id!"),
        ("title", ""),
        ("functions", []),
        ("functions", ["a", "a"]),
        ("functions", ["1x"]),
        ("submission", {"file": "x.txt"}),
        ("submission", {"module": "m"}),
        ("unknown_key", 1),
        ("sections", {"G14.01": 3}),
        ("specs", 7),
        ("plugin", "kinds.txt"),
    ]:
        data = copy.deepcopy(base)
        data[key] = value
        out.append(data)
    missing = copy.deepcopy(base)
    del missing["title"]
    out += [missing, [], "text", {1: "x"}]
    return out


def test_the_manifest_s_fast_check_accepts_the_real_manifest() -> None:
    assert _plainly_valid(_manifest(), _SCHEMA)


@pytest.mark.parametrize("data", _variants())
def test_the_manifest_s_fast_check_never_accepts_what_jsonschema_refuses(data: object) -> None:
    valid = not list(jsonschema.Draft202012Validator(_SCHEMA).iter_errors(data))
    assert not valid
    assert not _plainly_valid(data, _SCHEMA)


# --- a valid spec is checked without jsonschema, and never accepted where jsonschema refuses -------


_ODD_VALUES = (
    True,
    None,
    0,
    -1,
    3.0,
    1.5,
    float("nan"),
    float("inf"),
    "",
    "bad id!",
    [],
    ["a", "a"],
    [1, 1.0],
    {},
    {1: "x"},
)


def _spec_data() -> list[tuple[str, object]]:
    from grader.readers.yamlfile import parse_yaml

    pack = find_pack()
    return [(p.name, parse_yaml(str(p))) for p in sorted(pack.specs.glob("*.yaml"))]


def _mutants(data: object, depth: int = 0, limit: int = 4):
    """``data`` with one value (at a depth up to ``limit``) replaced by each odd value, or one key dropped or added."""
    yield from (v for v in _ODD_VALUES)
    if depth >= limit:
        return
    if isinstance(data, dict):
        for key, value in data.items():
            yield {k: v for k, v in data.items() if k != key}
            for changed in _mutants(value, depth + 1, limit):
                yield {**data, key: changed}
        yield {**data, "unknown_key": 1}
    elif isinstance(data, list):
        for i, value in enumerate(data[:3]):
            for changed in _mutants(value, depth + 1, limit):
                yield [*data[:i], changed, *data[i + 1 :]]


def _kind_schemas() -> dict[str, dict]:
    from course_plugin import KINDS as G14_KINDS

    from grader.builtin.checks import BUILTIN_KINDS

    return {k.name: k.schema for k in (*BUILTIN_KINDS, *G14_KINDS) if getattr(k, "schema", None)}


def test_the_real_specs_and_their_checks_keys_are_plainly_valid() -> None:
    from grader.builtin.yaml_spec import CHECK_COMMON_KEYS, SCHEMA
    from grader.packs import plainly_valid

    schemas = _kind_schemas()
    for _name, data in _spec_data():
        assert plainly_valid(data, SCHEMA)
        for check in data["checks"]:
            params = {k: v for k, v in check.items() if k not in CHECK_COMMON_KEYS}
            assert plainly_valid(params, schemas.get(check["kind"], {}))


@pytest.mark.parametrize("name", ["G14.01.yaml", "G14.02.yaml", "G14.06.yaml"])
def test_the_fast_check_never_accepts_a_spec_or_kind_keys_jsonschema_refuses(name: str) -> None:
    from grader.builtin.yaml_spec import CHECK_COMMON_KEYS, SCHEMA
    from grader.packs import plainly_valid

    data = dict(_spec_data())[name]
    outcomes = {True: 0, False: 0}
    spec_validator = jsonschema.Draft202012Validator(SCHEMA)
    for variant in _mutants(data):
        fast = plainly_valid(variant, SCHEMA)
        outcomes[fast] += 1
        if fast:
            assert not list(spec_validator.iter_errors(variant)), variant
    schemas = _kind_schemas()
    for check in data["checks"]:
        schema = schemas.get(check["kind"])
        if not schema:
            continue
        params = {k: v for k, v in check.items() if k not in CHECK_COMMON_KEYS}
        validator = jsonschema.Draft202012Validator(schema)
        for variant in _mutants(params, limit=2):
            fast = plainly_valid(variant, schema)
            outcomes[fast] += 1
            if fast:
                assert not list(validator.iter_errors(variant)), (check["id"], variant)
    assert outcomes[True] > 50 and outcomes[False] > 500  # both answers were exercised


# --- junit.xml streamed: the same bytes as the whole tree ------------------------------------------


def _junit_by_tree(report, seconds):
    """The tree-based writer junit.py had before it streamed (the oracle)."""
    import xml.etree.ElementTree as ET

    from grader.builtin.junit import OUTCOME, _seconds, _text, classname
    from grader.reporting.feedback import STATUS_LABELS, check_feedback, student_message
    from grader.term import adjustment_lines

    root = ET.Element("testsuites", name="grader")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    total_time = 0.0
    exercise_ids = [e.id for e in report.exercises] or [e.id for s in report.submissions[:1] for e in s.exercises]
    for ex_id in exercise_ids:
        suite = ET.SubElement(root, "testsuite", name=_text(ex_id))
        counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
        suite_time = 0.0
        for sub in report.submissions:
            for ex in sub.exercises:
                if ex.id != ex_id:
                    continue
                for c in ex.checks:
                    t = seconds.get(sub.id, {}).get((ex.id, c.id), 0.0)
                    suite_time += t
                    case = ET.SubElement(
                        suite, "testcase", classname=_text(classname(sub.id, ex.id)), name=_text(c.id), time=_seconds(t)
                    )
                    counts["tests"] += 1
                    element = OUTCOME.get(c.status)
                    if element is None:
                        continue
                    counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[element]] += 1
                    first_line = (student_message(c) or STATUS_LABELS.get(c.status, c.status)).splitlines()[0]
                    child = ET.SubElement(case, element, type=c.status, message=_text(first_line))
                    child.text = _text(check_feedback(c), newlines=True)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", _seconds(suite_time))
        total_time += suite_time
    adjusted = [sub for sub in report.submissions if sub.adjustments]
    if adjusted:
        suite = ET.SubElement(
            root, "testsuite", name="final scores", tests="0", failures="0", errors="0", skipped="0", time="0.000"
        )
        props = ET.SubElement(suite, "properties")
        for sub in adjusted:
            ET.SubElement(props, "property", name=_text(sub.id), value=_text(" | ".join(adjustment_lines(sub)[::-1])))
    for key, value in totals.items():
        if key != "skipped":  # junit-10.xsd: <testsuites> has no skipped
            root.set(key, str(value))
    root.set("time", _seconds(total_time))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=False).join(
        ('<?xml version="1.0" encoding="utf-8"?>\n', "\n")
    )


def _reports():
    from grader.models import Adjustment, CheckResult, Exercise, ExerciseResult, GradingReport, SubmissionResult

    def check(cid, status, message=""):
        return CheckResult(
            id=cid,
            description="d",
            status=status,
            score=1.0 if status == "passed" else 0.0,
            max_score=1.0,
            visibility="visible",
            message=message,
            hint='h <&> "q"',
            shown=True,
        )

    ex1 = ExerciseResult(
        "E1",
        "One",
        "s",
        1.0,
        3.0,
        (check("a", "passed"), check("b", "failed", "wrong <b>\nmore"), check("c", "timeout", "slow")),
    )
    ex2 = ExerciseResult("E2", "Two", "s", 0.0, 2.0, (check("d", "not_attempted"), check("e", "error", "\x1b[31mx")))
    empty = ExerciseResult("E3", "Three", "s", 0.0, 0.0, ())
    subs = tuple(
        SubmissionResult(
            id=name,
            path=name,
            sha256="",
            status="graded",
            score=1.0,
            max_score=5.0,
            exercises=(ex1, ex2, empty),
            slug=name,
        )
        for name in ("ann", "bob & co", "c\u202ed")
    )
    late = SubmissionResult(
        id="late",
        path="late",
        sha256="",
        status="graded",
        score=0.5,
        max_score=5.0,
        exercises=(ex1, ex2),
        slug="late",
        raw_score=1.0,
        adjustments=(Adjustment(kind="late", points=-0.5, reason="1 day late"),),
    )
    exercises = tuple(Exercise(id=i, title=i, section="s", path="", checks=()) for i in ("E1", "E2", "E3"))
    listed = dataclasses.replace(check("f", "failed", "wrong"), details=[("got", "1")])  # type: ignore[arg-type]
    unhashable = ExerciseResult("E1", "One", "s", 0.0, 1.0, (listed,))
    return [
        GradingReport("0", "h", "grade", subs, exercises),
        GradingReport("0", "h", "grade", (*subs, late), exercises),
        GradingReport("0", "h", "grade", (), exercises),
        GradingReport("0", "h", "grade", (), ()),
        GradingReport("0", "h", "grade", subs[:1], ()),
        GradingReport("0", "h", "grade", (late,), ()),
        # a plugin's list in a failing check's details: the case is made each time, not kept (issue 29)
        GradingReport("0", "h", "grade", (dataclasses.replace(late, exercises=(unhashable,)),), ()),
    ]


@pytest.mark.parametrize("index", range(7))
def test_junit_streamed_is_byte_identical_to_the_whole_tree(index: int) -> None:
    from grader.builtin.junit import junit_pieces, junit_xml

    report = _reports()[index]
    seconds = {"ann": {("E1", "a"): 0.0125, ("E2", "e"): 1.5}, "late": {("E1", "b"): 0.25}}
    expected = _junit_by_tree(report, seconds)
    assert junit_xml(report, seconds) == expected
    assert "".join(junit_pieces(report, lambda sub_id: seconds.get(sub_id, {}))) == expected


# --- the gradebook stores compressed results and still reads plain ones; --insecure's fork server --------


def test_the_gradebook_keeps_results_compressed_and_reads_plain_json_rows(tmp_path: Path) -> None:
    import sqlite3
    import zlib

    from grader.builtin.gradebook import Gradebook
    from grader.models import CheckResult, ExerciseResult, SubmissionResult, result_to_dict

    check = CheckResult(
        id="c",
        description="d",
        status="passed",
        score=1.0,
        max_score=1.0,
        visibility="visible",
        message="",
        hint="a hint " * 40,
        shown=True,
    )
    result = SubmissionResult(
        id="ann",
        path="ann",
        sha256="ab",
        status="graded",
        score=46.0,
        max_score=46.0,
        exercises=(ExerciseResult("E", "T", "s", 46.0, 46.0, (check,) * 46),),
        slug="ann",
    )
    book = Gradebook(tmp_path / "g.sqlite")
    book.put("k1", "spec", result)
    book.put("k2", "spec", dataclasses.replace(result, id="bob", slug="bob"))
    assert book.get("k1") == result and book.get("k2").id == "bob"
    plain = json.dumps(result_to_dict(result))
    book.db.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)", ("k0", "ab", "spec", "0", "ann", plain))
    assert book.get("k0") == result  # a row of a gradebook written before: plain JSON text
    whole = zlib.compress(plain.encode(), 1)
    book.db.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)", ("k3", "ab", "spec", "0", "ann", whole))
    assert book.get("k3") == result  # a row written before parts: the whole result, compressed
    # Issue 29: a row holds the submission's own fields and its exercise results' hashes; each exercise
    # result is stored once, compressed, under a key a grader without parts never looks up.
    stored = book.db.execute("SELECT result FROM results WHERE key = 'k1+parts'").fetchone()[0]
    row = json.loads(zlib.decompress(stored))
    parts = book.db.execute("SELECT hash, part FROM parts").fetchall()
    book.close()
    assert isinstance(stored, bytes) and len(stored) * 2 < len(whole) and len(parts) == 1
    assert row["exercises"] == [parts[0][0]] and row["id"] == "ann"
    assert json.loads(zlib.decompress(parts[0][1])) == json.loads(plain)["exercises"][0]
    with sqlite3.connect(tmp_path / "g.sqlite") as db:
        assert db.execute("SELECT count(*) FROM results").fetchone()[0] == 4
    assert Gradebook(tmp_path / "g.sqlite").get("k2").id == "bob"  # read again from the file


def test_the_fork_server_runs_plain_jobs_and_reports_how_they_end(tmp_path: Path) -> None:
    import functools

    from grader.execution.calls import run_calls
    from grader.execution.jobs import ForkJob, ForkServer
    from grader.models import Call

    if not ForkServer.available():
        pytest.skip("no os.fork here: --insecure starts a fresh worker per submission")
    path = tmp_path / "attention.py"
    path.write_text(
        "import os\nimport numpy as np\nprint('hello')\n"
        "def pid():\n    return os.getpid()\n"
        "def big():\n    return np.arange(5000.0)\n"
        "def spin():\n    while True:\n        pass\n"
        "def leave():\n    os._exit(3)\n"
    )
    server = ForkServer()
    try:
        launch = functools.partial(ForkJob, server, filename="attention.py")
        out = run_calls(
            str(path),
            [
                Call("pid", (), 2.0),
                Call("big", (), 2.0),
                Call("spin", (), 0.3),
                Call("pid", (), 2.0),
                Call("leave", (), 2.0),
                Call("pid", (), 2.0),
            ],
            launch=launch,
        )
        first, big, spin, after, left, last = out.results
        # three jobs (the first, the one after the timeout, the one after the exit), each printing at import
        assert out.stdout == "hello\n" * 3 and first.status == "returned" and first.value != server.proc.pid
        assert big.status == "returned" and big.value.tolist() == [float(i) for i in range(5000)]
        assert spin.status == "timeout" and spin.message == "the call used more than 0.3 s of CPU time"
        assert after.status == "returned" and after.value != first.value  # a fresh job after the timeout
        assert left.status == "crashed" and left.message == "the process exited with code 3 before answering"
        assert last.status == "returned"
    finally:
        server.close()
    assert server.proc.returncode is not None


def test_large_float_arguments_travel_apart_and_arrive_as_the_same_lists(tmp_path: Path) -> None:
    import numpy as np

    from grader.execution.calls import run_calls
    from grader.models import Call

    rng = np.random.default_rng(1)
    big = rng.normal(size=(100, 64)).tolist()
    big[3][5] = float("nan")
    small = [[1.0, 2.0], [3.0, 4.0]]
    mixed = [[1, 2.0]] * 3000  # ints among the floats: stays JSON, so the ints stay ints
    call = Call("look", (big, small, mixed), 5.0)
    assert call.encoded[1] == (marshal.dumps(big, 2),)  # only `big` travels apart, as its own marshal
    path = tmp_path / "attention.py"
    path.write_text(
        "import math\n"
        "def look(a, b, c):\n"
        "    kinds = sorted({type(x).__name__ for row in a for x in row})\n"
        "    a[0][0] = 7.5\n"  # changed in place: reported as mutated
        "    return [len(a), len(a[0]), kinds == ['float'], math.isnan(a[3][5]), sum(a[1]), type(c[0][0]) is int]\n"
    )
    out = run_calls(str(path), [call, call])
    for r in out.results:
        assert r.status == "returned" and r.mutated_args == (0,)
        assert r.value[:4] == [100, 64, True, True] and r.value[5] is True
        assert r.value[4] == sum(big[1])


# --- the manifest, kept parsed beside Python's cache, follows every change of course.yaml -----------


def test_a_kept_manifest_is_used_only_for_the_bytes_it_was_parsed_from(tmp_path: Path) -> None:
    from grader import packs

    root = Path(__file__).resolve().parents[1] / "packs" / "r3"
    pack_dir = tmp_path / "r3"
    shutil.copytree(root, pack_dir, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = pack_dir / "course.yaml"
    kept = pack_dir / "__pycache__" / "course.yaml.parsed.json"

    def load() -> packs.Pack:
        packs._load.cache_clear()
        return packs.load_pack(pack_dir)

    first = load()
    assert kept.is_file() and json.loads(kept.read_text())["data"]["title"] == first.title
    manifest.write_text(manifest.read_text().replace(f"title: {first.title}", "title: A new title"))
    assert load().title == "A new title"  # other bytes: parsed again, and kept again
    assert json.loads(kept.read_text())["data"]["title"] == "A new title"
    data = json.loads(kept.read_text())
    data["data"]["title"] = "forged"
    kept.write_text(json.dumps(data))
    assert load().title == "forged"  # the kept data is what the file says for these bytes...
    manifest.write_text(manifest.read_text() + "\n")
    assert load().title == "A new title"  # ...and never for others
    kept.write_text("{not json")
    assert load().title == "A new title"  # unreadable: parsed again
    manifest.write_text(manifest.read_text().replace("title: A new title", "title: ''"))
    with pytest.raises(packs.ConfigError, match="title"):
        load()  # an invalid manifest is refused as before, whatever was kept


def test_the_command_starts_check_s_fork_server_before_it_imports_the_grader() -> None:
    script = (
        "import sys\n"
        "import grader, grader.cli.launch, grader.execution.servers\n"
        "early = sorted(m for m in ('numpy', 'pluggy', 'grader.models', 'grader.execution.jobs', 'grader.cli.app') if m in sys.modules)\n"
        "from grader import Check, StashKey, hookimpl\n"
        "print(early, Check.__module__, StashKey.__module__, callable(hookimpl))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    # the package's API is imported on first use: what the launcher imports first is the standard library
    assert out.stdout.split("\n")[0] == "[] grader.models grader.stash True", out.stderr


DRAWS = {
    "random": "import random\n\ndef draw():\n    return random.getrandbits(62)\n",
    "numpy": "import numpy as np\n\ndef draw():\n    return int(np.random.randint(0, 2**62))\n",
}
"""A submission that draws an unseeded random number, from ``random`` and from numpy's global generator."""


@pytest.mark.parametrize("source", sorted(DRAWS))
def test_each_fork_server_job_draws_its_own_random_numbers(source: str, tmp_path: Path) -> None:
    """The fork server forks without the interpreter's after-fork hooks and imported numpy.random (seeded
    once there): ``random`` and numpy's generator are still reseeded per job."""
    import functools

    from grader.execution.calls import run_calls
    from grader.execution.jobs import ForkJob, ForkServer
    from grader.models import Call

    if not ForkServer.available():
        pytest.skip("no os.fork here: --insecure starts a fresh worker per submission")
    path = tmp_path / "attention.py"
    path.write_text(DRAWS[source])
    server = ForkServer()
    try:
        launch = functools.partial(ForkJob, server, filename="attention.py")
        draws = [run_calls(str(path), [Call("draw", (), 5.0)], launch=launch).results[0] for _ in range(3)]
    finally:
        server.close()
    assert [r.status for r in draws] == ["returned"] * 3
    assert len({r.value for r in draws}) == 3  # three jobs, three seeds (2**-62 odds of a false alarm)
