"""The malformed-input corpus: every instructor input with one defect gets one true line.

``tests/malformed/specs/NN-name/`` holds one case each: a spec folder with one defect
(``spec.yaml``, sometimes a second file, a ``reference.py`` or a plugin module) and
``case.json``: the exit code, the command, extra options, and the pieces the single stderr
line must hold (the file, the key, the fix). `BAD_COMMAND_LINES` is the table of bad command
lines. Every case runs in-process through `grader.cli.main` (a few seconds for all of them)
and asserts the exit code, exactly one stderr line, no traceback, its CPU time (the grader's
process and the processes it reaped: a refusal does no large work, on a quiet or a busy machine)
with a wall-clock backstop `HANG_SECONDS` (it never waits), its memory (`tracemalloc` peak:
nothing large is allocated), and that ``--out`` was not created (so no gradebook either). A few cases that need a real process (the exit code of the ``grader``
script when instructor code calls ``sys.exit``) run one subprocess each.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from conftest import REFERENCE, ROOT, SUBMISSIONS

from grader.cli import main
from grader.intake.archive import member_name, safe_extract
from grader.intake.roster import apply_roster
from grader.models import Submission

CORPUS = Path(__file__).resolve().parents[1] / "malformed" / "specs"
CASES = sorted(p for p in CORPUS.iterdir() if (p / "case.json").is_file())
PLUGIN_EXAMPLES = Path(__file__).resolve().parents[1] / "plugin_examples"
CORRECT = SUBMISSIONS / "correct_numpy"
HANG_SECONDS = 60.0
"""Wall-clock seconds no refusal may take, however busy the machine: past it, the grader waited on something."""


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its reaped children so far (user and system)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.fixture(autouse=True)
def _course_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """A course secret is set, so that 'grade' prints no warning about its absence beside the line."""
    monkeypatch.setenv("GRADER_COURSE_SECRET", "malformed-corpus-secret-" + "0123456789abcdef" * 2)


def run_measured(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, float, float]:
    """Run ``grader`` in-process; return (exit code, stdout, stderr, CPU seconds, peak MiB allocated).

    The CPU seconds are the process's and its reaped children's (``getrusage``): a busy machine
    stretches the clock, not the work. The wall clock only backstops a hang (`HANG_SECONDS`).
    """
    tracemalloc.start()
    start, cpu0 = time.perf_counter(), _cpu_seconds()
    try:
        code = main([str(a) for a in argv])
    finally:
        cpu = _cpu_seconds() - cpu0
        wall = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert wall < HANG_SECONDS, f"{wall:.1f} s by the clock: the command waited on something"
    return code, out, err, cpu, peak


_CHILD = """
import json, resource, sys
from grader.cli import main
def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
start = cpu()
code = main(sys.argv[1:])
seconds = cpu() - start
# VmHWM, not ru_maxrss: a child started with vfork inherits its parent's peak in ru_maxrss (the
# kernel keeps the larger of the old and new address spaces' peaks across exec).
with open("/proc/self/status") as fh:
    hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
print(json.dumps([code, seconds, hwm / 1024]))
"""


def run_in_process_of_its_own(argv: list[str]) -> tuple[int, str, str, float, float]:
    """Run ``grader`` in a fresh Python; (exit code, stdout, stderr, CPU seconds, peak resident MiB of that process).

    For a case whose memory `tracemalloc` cannot tell: numpy reports an allocation that then
    fails (``MemoryError``) to tracemalloc as if it had been made.
    """
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *map(str, argv)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS + 60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(PLUGIN_EXAMPLES)},
    )
    *out, last = proc.stdout.splitlines() or [""]
    code, seconds, peak = json.loads(last)
    assert proc.returncode == 0, proc.stderr
    return code, "\n".join(out), proc.stderr, seconds, peak


def one_line(err: str, out: str, code: int) -> str:
    """The single stderr line; no traceback anywhere."""
    assert "Traceback" not in err and "Traceback" not in out, err
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("grader: error: " if code else "grader: warning: "), line
    return line


def test_the_corpus_covers_every_class_of_the_issue() -> None:
    names = " ".join(p.name for p in CASES)
    assert len(CASES) + len(BAD_COMMAND_LINES) >= 60
    assert len(CASES) >= 60
    for word in (
        "rtol",
        "step",
        "shift",
        "select",
        "inf",
        "nan",
        "100000-by-100000",
        "long-thin",
        "reference-result-too-large",
        "unknown-generator",
        "returns",
        "sys-exit",
        "keyboardinterrupt",
        "plugin-syntax-error",
        "nested",
        "yaml-txt",
        "subfolder",
        "backup",
        "duplicate-exercise-id",
        "plugin-kind-schema",
    ):
        assert word in names, word


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_malformed_spec(
    case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    meta = json.loads((case / "case.json").read_text())
    specs = tmp_path / "specs"
    shutil.copytree(case, specs, ignore=shutil.ignore_patterns("case.json", "reference.py", "__pycache__"))
    if "newer" in meta:  # the stray copy is the newer file, whatever order git checked them out in
        os.utime(specs / "spec.yaml", ns=(10**18, 10**18))
        os.utime(specs / meta["newer"], ns=(2 * 10**18, 2 * 10**18))
    reference = REFERENCE
    if (case / "reference.py").is_file():
        reference = tmp_path / "reference.py"
        shutil.copy(case / "reference.py", reference)
    monkeypatch.syspath_prepend(str(specs))  # the case's plugin module, if any
    monkeypatch.syspath_prepend(str(PLUGIN_EXAMPLES))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    out_dir = tmp_path / "out"
    common = ["--specs", specs, "--reference", reference, *meta["args"]]
    if meta["command"] == "grade":
        argv = ["grade", CORRECT, *common, "--out", out_dir, "--insecure", "-q"]
    else:
        argv = [meta["command"], *common]
    if meta.get("measure") == "subprocess":
        code, out, err, seconds, peak = run_in_process_of_its_own(argv)
    else:
        code, out, err, seconds, peak = run_measured(argv, capsys)
    assert code == meta["exit"], (code, err)
    line = one_line(err, out, code)
    for piece in meta["line"]:
        assert piece in line, (piece, line)
    assert str(tmp_path) in line or "-p " in line or "plugin error" in line, line  # names the file (or the option)
    assert seconds < meta["seconds"] * (3 if os.environ.get("CI") else 1), seconds
    assert peak < meta["max_mib"], f"{peak:.1f} MiB allocated"
    assert not out_dir.exists(), sorted(out_dir.iterdir())


# --- bad command lines -------------------------------------------------------------------------------


def _folder(tmp: Path, files: dict[str, str]) -> Path:
    folder = tmp / "student"
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    folder.mkdir(exist_ok=True)
    return folder


def _roster(tmp: Path, text: str) -> Path:
    path = tmp / "roster.csv"
    path.write_text(text)
    return path


# (name, arguments (a callable of the temporary folder gives extra paths), exit code, pieces of the line)
BAD_COMMAND_LINES = [
    ("jobs-zero", lambda t: ["grade", CORRECT, "--jobs", "0"], 2, ["argument -j/--jobs: must be at least 1, got 0"]),
    ("jobs-word", lambda t: ["grade", CORRECT, "--jobs", "two"], 2, ["invalid number: 'two'"]),
    (
        "out-is-a-file",
        lambda t: ["grade", CORRECT, "--out", REFERENCE],
        2,
        ["--out", "exists and is not a folder; choose another --out"],
    ),
    (
        "out-below-a-file",
        lambda t: ["grade", CORRECT, "--out", REFERENCE / "reports"],
        2,
        ["cannot create the folder", "is not a folder); choose another --out"],
    ),
    (
        "out-in-proc",
        lambda t: ["grade", CORRECT, "--out", "/proc/grader-reports"],
        2,
        ["--out /proc/grader-reports: under /proc, a kernel file system; choose another --out"],
    ),
    ("json-is-a-folder", lambda t: ["grade", CORRECT, "--json", t], 2, ["is a folder; give a file name"]),
    ("missing-path", lambda t: ["grade", t / "nobody"], 2, ["nobody: no such file or folder; give an attention.py"]),
    ("path-not-python", lambda t: ["grade", REFERENCE.with_suffix(".txt")], 2, ["no such file or folder"]),
    ("a-text-file", lambda t: ["grade", ROOT / "README.md"], 2, ["README.md: not a Python file"]),
    (
        "empty-folder",
        lambda t: ["grade", _folder(t, {})],
        2,
        ["student: holds no attention.py, no student folders and no .py files; it is empty"],
    ),
    (
        "folder-with-Attention.PY",
        lambda t: ["grade", _folder(t, {"Attention.PY": "x = 1\n"})],
        2,
        ["it holds Attention.PY: rename it attention.py"],
    ),
    (
        "folder-with-a-backup",
        lambda t: ["grade", _folder(t, {"attention.py.bak": "x = 1\n"})],
        2,
        ["it holds attention.py.bak: rename it attention.py"],
    ),
    # (a folder holding lab.ipynb is a class of one student now: notebooks are graded, see test_notebook.py)
    (
        "check-with-a-roster",
        lambda t: ["check", CORRECT, "--roster", t / "r.csv"],
        2,
        ["unrecognized arguments: --roster"],
    ),
    ("unknown-option", lambda t: ["grade", CORRECT, "--frobnicate"], 2, ["unrecognized arguments: --frobnicate"]),
    ("unknown-command", lambda t: ["regrade"], 2, ["invalid choice: 'regrade'"]),
    (
        "block-the-sandbox",
        lambda t: ["grade", CORRECT, "-p", "no:sandbox"],
        2,
        ["-p no:sandbox: the sandbox cannot be blocked"],
    ),
    (
        "missing-plugin",
        lambda t: ["grade", CORRECT, "-p", "no_such_grader_plugin"],
        3,
        ["-p no_such_grader_plugin: no module named 'no_such_grader_plugin'"],
    ),
    (
        "roster-missing",
        lambda t: ["grade", CORRECT, "--roster", t / "none.csv"],
        2,
        ["--roster", "cannot read the CSV file"],
    ),
    (
        "roster-without-id-column",
        lambda t: ["grade", CORRECT, "--roster", _roster(t, "name\nAnn\n")],
        2,
        ["no student id column"],
    ),
    (
        "roster-empty",
        lambda t: ["grade", CORRECT, "--roster", _roster(t, "id\n")],
        2,
        ["the file holds no student ids"],
    ),
    (
        "roster-id-twice",
        lambda t: ["grade", CORRECT, "--roster", _roster(t, "id\nann\nbob\nann\n")],
        2,
        ["the id 'ann' is listed twice, on lines 2 and 4; list each student once"],
    ),
    (
        "roster-id-twice-ignoring-case",
        lambda t: ["grade", CORRECT, "--roster-ignore-case", "--roster", _roster(t, "id\nAnn\nann\n")],
        2,
        ["the id 'ann' is listed twice, on lines 2 and 3 (as 'Ann' on line 2: --roster-ignore-case is on)"],
    ),
    ("not-a-zip", lambda t: ["grade", REFERENCE.with_name("fake.zip")], 2, ["no such file or folder"]),
    ("secret-file-missing", lambda t: ["grade", CORRECT, "--secret-file", t / "none.key"], 2, ["none.key"]),
    (
        "import-timeout-nan",
        lambda t: ["grade", CORRECT, "--import-timeout", "nan"],
        2,
        ["argument --import-timeout: must be more than 0 seconds, got nan"],
    ),
    (
        "submission-timeout-zero",
        lambda t: ["grade", CORRECT, "--submission-timeout", "0"],
        2,
        ["argument --submission-timeout: must be more than 0 seconds, got 0"],
    ),
    (
        "gradescope-for-a-class",
        lambda t: ["grade", SUBMISSIONS, "--gradescope", t / "results.json"],
        2,
        ["Gradescope grades one submission per run", "use DIR/gradescope/<id>.json instead"],
    ),
    (
        "gradebook-is-a-folder",
        lambda t: ["grade", CORRECT, "--gradebook", t],
        2,
        ["argument --gradebook:", "is a folder; give a file name"],
    ),
    (
        "csv-below-a-file",
        lambda t: ["grade", CORRECT, "--csv", REFERENCE / "grades.csv"],
        2,
        ["argument --csv:", "is a file, not a folder"],
    ),
    (
        "specs-folder-missing",
        lambda t: ["grade", CORRECT, "--specs", t / "nospecs"],
        3,
        ["nospecs: specs folder not found"],
    ),
    (
        "reference-missing",
        lambda t: ["grade", CORRECT, "--reference", t / "ref.py"],
        3,
        ["ref.py: reference not found; pass --reference PATH"],
    ),
]


@pytest.mark.timing
@pytest.mark.parametrize(("name", "argv", "code", "pieces"), BAD_COMMAND_LINES, ids=[c[0] for c in BAD_COMMAND_LINES])
def test_bad_command_line(
    name: str, argv, code: int, pieces: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(a) for a in argv(tmp_path)]
    out_dir = tmp_path / "out"
    if args[0] == "grade" and "--out" not in args:
        args += ["--out", str(out_dir)]
    got, out, err, seconds, peak = run_measured(args, capsys)
    assert got == code, (got, err)
    line = one_line(err, out, got)
    for piece in pieces:
        assert piece in line, (piece, line)
    assert seconds < (6 if os.environ.get("CI") else 2), seconds
    assert peak < 32, f"{peak:.1f} MiB allocated"
    assert not out_dir.exists()
    assert not Path("/proc/grader-reports").exists()


def test_a_zip_that_is_not_a_zip_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "class.zip"
    fake.write_bytes(b"PK\x03\x04 not really")
    code, out, err, _, _ = run_measured(["grade", fake, "--out", tmp_path / "out"], capsys)
    assert code == 2
    assert "class.zip: not a readable zip archive" in one_line(err, out, code)
    assert not (tmp_path / "out").exists()


# --- what is not one line but is still refused or hinted -----------------------------------------------


@pytest.mark.timing
def test_the_largest_generator_is_refused_without_allocating(tmp_path: Path) -> None:
    """``{normal: [100000, 100000]}`` (74.5 GiB) is refused in well under a second, allocating under 1 MiB."""
    from grader.builtin.checks import BUILTIN_KINDS
    from grader.builtin.reference import load_reference
    from grader.errors import SpecError
    from grader.kinds import KindContext
    from grader.models import Check, Exercise

    check = Check(
        id="big",
        kind="compare",
        function="softmax",
        points=1.0,
        visibility="hidden",
        hint="h",
        timeout=1.0,
        args={"scores": {"normal": [100000, 100000]}},
        seed=1,
    )
    ctx = KindContext(Exercise("M", "t", "s", "spec.yaml", (check,)), load_reference(str(REFERENCE)))
    kind = next(k for k in BUILTIN_KINDS if k.name == "compare")
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        kind.prepare(check, ctx)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(info.value) == (
        "spec.yaml: check 'big'.args.scores: 'normal' shape [100000, 100000] has 10,000,000,000 elements (74.5 GiB); "
        "a generated argument is limited to 1,000,000 elements and 8 MiB: make it smaller"
    )
    assert seconds < 0.1
    assert peak < 2**20


def test_folder_hints_for_students_of_a_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In a class folder each student without attention.py is graded 'error' with what the folder holds."""
    from grader.builtin.submission import locate

    cls = tmp_path / "class"
    for rel in ("ann/Attention.PY", "bob/attention.py.bak", "cy/lab/attention.py", "dee/lab.ipynb", "eve/notes.txt"):
        (cls / rel).parent.mkdir(parents=True, exist_ok=True)
        (cls / rel).write_text("x = 1\n")
    (cls / "fay").mkdir()
    problems = {s.id: s.problem for s in locate(str(cls))}
    assert problems == {
        "ann": f"no attention.py in {cls}/ann: it holds Attention.PY: rename it attention.py; the student folder "
        "must hold attention.py",
        "bob": f"no attention.py in {cls}/bob: it holds attention.py.bak: rename it attention.py; the student folder "
        "must hold attention.py",
        "cy": f"no attention.py in {cls}/cy: it holds lab/attention.py: move it up into the student folder; the "
        "student folder must hold attention.py",
        "dee": f"no attention.py in {cls}/dee: it holds a notebook, lab.ipynb: rename it attention.ipynb "
        "(notebooks are graded too) or save it as attention.py; the student folder must hold attention.py",
        "eve": f"no attention.py in {cls}/eve: it holds notes.txt, no attention.py; the student folder must hold "
        "attention.py",
        "fay": f"no attention.py in {cls}/fay: it is empty; the student folder must hold attention.py",
    }


def _subs(*ids: str) -> list[Submission]:
    return [Submission(i, i, f"/x/{i}/attention.py", "0" * 64) for i in ids]


def test_roster_ids_differing_in_case_are_hinted(capsys: pytest.CaptureFixture[str]) -> None:
    found = apply_roster(_subs("Ann", "bob"), ["ann", "bob"])
    err = capsys.readouterr().err.splitlines()
    assert err == [
        (
            "grader: warning: not on the roster: Ann; ids that differ only in case: Ann (the roster has ann): pass "
            "--roster-ignore-case to match them"
        ),
        "grader: warning: 1 student(s) on the roster sent nothing: ann",
    ]
    assert [s.id for s in found] == ["Ann", "bob", "ann"]
    found = apply_roster(_subs("Ann", "bob"), ["ann", "bob"], ignore_case=True)
    assert capsys.readouterr().err == ""
    assert [s.id for s in found] == ["Ann", "bob"]


def test_roster_duplicates_are_refused_before_grading(cli, tmp_path: Path) -> None:
    roster = _roster(tmp_path, "id,name\nann,Ann\nbob,Bob\nann,Ann again\n")
    code, _, err = cli("grade", CORRECT, "--roster", roster, "--out", tmp_path / "out")
    assert code == 2
    assert err.strip() == (
        f"grader: error: --roster {roster}: the id 'ann' is listed twice, on lines 2 and 4; list each student once"
    )
    assert not (tmp_path / "out").exists()


# --- archive names ------------------------------------------------------------------------------------


def test_zip_names_utf8_without_the_flag_are_read_as_utf8(tmp_path: Path) -> None:
    """Debian's Info-ZIP ``zip`` writes UTF-8 names; Python would read them as cp437 (``Jos├⌐``)."""
    zip_tool = shutil.which("zip")
    if zip_tool is None:
        if os.environ.get("CI"):
            pytest.fail("CI: the 'zip' tool is missing; .ci/run installs it")
        pytest.skip("Info-ZIP 'zip' is not installed (apt-get install zip); CI runs this test")
    export = tmp_path / "export"
    for name in ("José", "Zoë", "ann"):
        (export / name).mkdir(parents=True)
        shutil.copy(CORRECT / "attention.py", export / name / "attention.py")
    archive = tmp_path / "class.zip"
    subprocess.run(
        [zip_tool, "-q", "-r", str(archive), "."], cwd=export, check=True, env={**os.environ, "LC_ALL": "C.UTF-8"}
    )
    with zipfile.ZipFile(archive) as zf:
        infos = {member_name(i): i for i in zf.infolist()}
        assert "José/attention.py" in infos
        raw = infos["José/attention.py"]
        if not raw.flag_bits & 0x800:  # what Info-ZIP writes on Linux: no flag, so zipfile says cp437
            assert raw.filename == "Jos├⌐/attention.py"
    extracted = safe_extract(archive, tmp_path / "dest", "attention.py")
    assert sorted(s.name for s in extracted.students) == ["José", "Zoë", "ann"]


def test_zip_names_in_cp437_stay_cp437() -> None:
    """A legacy (DOS) name whose bytes are not valid UTF-8 is read as code page 437; a flagged one as UTF-8."""
    legacy = zipfile.ZipInfo(b"Jos\x82/attention.py".decode("cp437"))  # 0x82 is é in cp437, not UTF-8 alone
    assert legacy.flag_bits & 0x800 == 0
    assert member_name(legacy) == "José/attention.py"
    unflagged_utf8 = zipfile.ZipInfo("José/attention.py".encode().decode("cp437"))
    assert unflagged_utf8.filename == "Jos├⌐/attention.py"
    assert member_name(unflagged_utf8) == "José/attention.py"
    flagged = zipfile.ZipInfo("Jos├⌐")
    flagged.flag_bits |= 0x800
    assert member_name(flagged) == "Jos├⌐"


# --- the real process --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("import sys\nsys.exit(0)\n", "reference.py, line 2: it called sys.exit(0)"),
        ("raise KeyboardInterrupt\n", "reference.py, line 1: KeyboardInterrupt"),
    ],
)
def test_the_grader_script_exits_3_when_the_reference_exits(source: str, shown: str, tmp_path: Path) -> None:
    """In a real process ``sys.exit(0)`` at import is exit 3 with one line, not exit 0 with nothing."""
    reference = tmp_path / "reference.py"
    reference.write_text(source)
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "validate", "--reference", str(reference)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert shown in proc.stderr


def test_every_builtin_kind_declares_a_schema_of_its_keys_and_the_spec_guide_lists_them() -> None:
    from course_plugin import KINDS as G14_KINDS

    from grader.builtin.checks import BUILTIN_KINDS

    guide = (ROOT / "docs" / "how-to" / "write-specs.md").read_text()
    for kind in (*BUILTIN_KINDS, *G14_KINDS):
        assert set(kind.schema["properties"]) == set(kind.params), kind.name
        row = next(line for line in guide.splitlines() if line.startswith(f"| `{kind.name}` |"))
        for key in kind.params:
            assert f"`{key}`" in row, (kind.name, key)
        for key, prop in kind.schema["properties"].items():
            assert prop.get("description"), (kind.name, key)  # the fix the error line gives


def test_a_kind_without_a_schema_gets_the_generic_checks() -> None:
    from grader.builtin.yaml_spec import exercise_from_data
    from grader.errors import SpecError

    class Bare:
        name = "bare"
        params = {"atol": "optional"}

    data = {
        "exercise": "M",
        "title": "t",
        "section": "s",
        "seed": 1,
        "defaults": {"points": 1, "visibility": "hidden", "hint": "h", "timeout": 1},
        "checks": [{"id": "c", "kind": "bare", "function": "softmax", "atol": -1}],
    }
    exercise = exercise_from_data("spec.yaml", data, {"bare": Bare()})  # no schema: a negative atol passes
    assert exercise.checks[0].params == {"atol": -1}
    data["checks"][0]["atol"] = float("nan")
    with pytest.raises(SpecError, match=r"^spec.yaml: checks\[0\] 'c'.atol: .nan is not a finite number"):
        exercise_from_data("spec.yaml", data, {"bare": Bare()})
    data["checks"][0] = {"id": "c", "kind": "bare", "function": "softmax", "rtol": 1}
    with pytest.raises(SpecError, match=r"'c'.rtol: unknown key for kind 'bare' \(its keys: atol\)"):
        exercise_from_data("spec.yaml", data, {"bare": Bare()})
