"""Adversarial suite: hostile submissions graded by the real ``grader grade``, in the sandbox.

Every folder ``tests/adversarial/<attack>/`` holds an otherwise plausible
``attention.py`` (a copy of the honest but wrong ``submissions/mib_decimal``)
plus one attack, described in its docstring: reading the reference or the
hidden specs, importing the grader, escaping through /proc, inherited file
descriptors or raw system calls, writing fake reports, the network, fork and
memory bombs, hangs, huge output, killing processes, daemons, exits,
BaseExceptions, monkeypatching, lying return values, forged result frames,
planted ``sitecustomize.py``/``conftest.py``/``.pth`` files. The attacks that
cheat would score full marks if they worked. Issue 9 added attacks on the
grader's own side: what a job sends (lone surrogates, NaN and 400-digit
durations from a patched clock, forged frames of huge ints, NaN literals,
deep and wide junk, a closed or replaced result pipe, longdouble, complex,
bytes and str subclasses), what reaches readers (ANSI/OSC escapes, GitHub
workflow commands, characters XML cannot hold), hidden inputs (printed,
found in memory at import, carried by exception messages, precomputed from
the specs' seeds) and system calls (listmount/statmount, flock on a shared
file, getcwd).

All of them are graded in one run (fixture ``attacked``), from a temporary
copy in which the repository path they aim at (``/work/main``) is replaced by
this checkout's, together with the honest baselines ``mib_decimal``,
``starter`` and ``no_sqrt_dk`` and an honest classmate (``correct_numpy``),
as a GitHub Actions job runs it (what it prints is kept) and with a course
secret of its own. Each test asserts that the attack earns no more than its
honest baseline and that the report names the problem in a student's words;
the session tests assert that grading finished, that the classmate kept
full marks, that every class-level file was written, that nothing outside
the output folder changed, that no network helper was reached, that no
process survived, that the terminal and CI log got no escape sequence or
forged workflow command, and that no hidden input reached a student's page.

A second run (fixture ``odd_class``) grades a class folder built at test
time: symbolic links out of the submission, non-UTF-8 and oversized source
files, and a zip archive with path traversal, absolute paths, a symbolic
link and a zip bomb. A third (``named_class``) grades students whose names
attack the writers (not UTF-8, 240 bytes, ``bob/`` beside ``bob.py``,
``summary``, ``frank``/``frank-2``/``frank.py``, a CR, formulas, controls
and bidi characters, ``Ann``/``ann``, a FIFO named ``attention.py``) and an
archive whose problems are one student's each (20,000 files, a member twice,
a member marked as a FIFO; a folder name too long for a file system is
graded as usual, since files are named by the naming rule). A fourth (``parent_load``, in a
separate process whose peak RSS and CPU time are sampled) grades the attacks
of ``tests/adversarial/_parent/``: floods of maximal and of junk frames, and
a CPU hog beside a slow but correct classmate. ``-p no:sandbox`` must be
refused.

Attacks that would harm this machine if they ran outside the sandbox refuse
to (they check that they are not root and are pid 1 of their namespace), and
the suite first checks, with a probe submission, that ``grader grade`` really
runs submissions in the sandbox.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import math
import os
import re
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import unicodedata
import warnings
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import dump_doms, processes

from grader.child.limits import UID_BASE
from grader.cli import main

ROOT = Path(__file__).resolve().parents[2]
ADVERSARIAL = ROOT / "tests" / "adversarial"
REPO_IN_ATTACKS = "/work/main"
"""The repository's path as the attacks spell it; replaced by this checkout's path when graded."""
HONEST = ROOT / "submissions" / "mib_decimal" / "attention.py"
UIDS = range(UID_BASE, UID_BASE + 64)
"""uids of the sandbox's worker slots (grader.child.limits.UID_BASE + slot)."""
PORT = 47914
UNIX_SOCKET = Path(f"/tmp/grader-adversarial-{PORT}.sock")
ABSTRACT_SOCKET = f"\0grader-adversarial-{PORT}"
CANARY_IN_ATTACKS = "/tmp/grader-adversarial-canary"
"""The canary file as the attacks spell it; replaced by this session's own (`CANARY`) when graded."""
CANARY = Path(f"{CANARY_IN_ATTACKS}-{os.getpid()}")
"""This session's canary: another session of the suite on the machine has its own."""
MARK = "ADVERSARIAL-WAS-HERE"
NOT_SANDBOXED = "ADVERSARIAL-NOT-SANDBOXED"
OUTSIDE_TARGETS = (
    Path("/tmp/grader-adversarial-pwned"),
    Path("/var/tmp/grader-adversarial-pwned"),
    Path("/dev/shm/grader-adversarial-pwned"),
    Path("/tmp/grader-adversarial-traversal.py"),
    Path("/tmp/grader-adversarial-abs.py"),
)
TIMEOUTS = ["--import-timeout", "3", "--submission-timeout", "20"]
SANDBOX = "sandbox does not allow this"

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]  # the class of attacks, graded once in the sandbox (~1 min)


@dataclass(frozen=True)
class Attack:
    """What grading one attack must give.

    Attributes
    ----------
    phrases : tuple
        Each item must appear in the submission's report (error and check
        messages, or the HTML page when ``in_page``); an item that is a
        tuple is satisfied by any one of its strings.
    baseline : str
        The honest submission it must not beat.
    same : bool
        Whether it must score exactly the baseline, exercise by exercise
        (else: at most the baseline's total).
    in_page : bool
        Look for the phrases in the HTML page (which shows the output)
        rather than in ``results.json``.
    absent : tuple
        Strings that must appear neither in the report nor on the page
        (a false explanation, or what the attack would learn if it worked).
    """

    phrases: tuple = ()
    baseline: str = "mib_decimal"
    same: bool = True
    in_page: bool = False
    absent: tuple = ()


FULL_MARKS = 86.0
"""The course's total (the specs' points): an honest correct classmate's score."""
HONEST_WRONG = "mib differs from the expected value"
CPU_TIME_OUT = "bytes_to_mib did not finish: the call used more than 2 s of CPU time"
WALL_TIME_OUT = "bytes_to_mib did not finish: the call took longer than 8 s of wall-clock time"
TIMED_OUT = (CPU_TIME_OUT, WALL_TIME_OUT)
"""A hung call: its CPU time, or its wall-clock backstop (4 times as long) for a call that waits."""
UNREADABLE = "bytes_to_mib crashed: the grader could not read its answer"
FOREIGN = "returned something the grader cannot read: the result holds an object of a class of its own"
"""A result of the submission's own class (its name is student text, not repeated)."""


def _job_folder() -> str:
    import numpy

    from grader.child.jobsetup import choose_job_folder
    from grader.child.landlock import allowed_paths

    return choose_job_folder(allowed_paths(numpy))


JOB_FOLDER = _job_folder()
"""Where jobs see their folder: /tmp, or the next fixed folder when this checkout's numpy lies under /tmp."""
HIDDEN_BY_TMP = str(ROOT).startswith("/tmp/") and JOB_FOLDER == "/tmp"
"""Jobs see /tmp as their own folder: of a checkout under /tmp they see nothing at all."""
OUTSIDE = (SANDBOX, "No such file or directory") if HIDDEN_BY_TMP else SANDBOX
"""What reaching outside the job's folder gives."""


def _denied(path: str) -> str | tuple[str, str]:
    """The error of opening ``path`` outside the job's folder (not there at all, for a checkout under /tmp)."""
    denied = f"Permission denied: '{path}'" if path else "Permission denied"
    return (
        (denied, f"No such file or directory: '{path}'" if path else "No such file or directory")
        if HIDDEN_BY_TMP
        else denied
    )


CLOSED_FD = "bytes_to_mib crashed: your code closed or replaced a file descriptor the grader uses (its result channel)"
FALSE_BLAME = ("could not set up the job", "used up its CPU time or memory")
"""What a closed or replaced result pipe must not be blamed on."""
SECRET_ENV = "GRADER_COURSE_SECRET"
"""The environment variable holding the course secret that hidden inputs derive from."""
CLASS_FILES = ("index.html", "summary.html", "results.json", "gradebook.csv", "junit.xml", "gradescope")

ATTACKS = {
    # reading secrets: the reference, the specs, the grader, /proc, fds, memory, classmates
    # (a checkout under /tmp is not there for a job: these find nothing and stay honest)
    "read_reference": Attack(
        (HONEST_WRONG,) if HIDDEN_BY_TMP else (_denied(f"{ROOT}/reference/attention.py"), SANDBOX)
    ),
    "read_specs": Attack((HONEST_WRONG,) if HIDDEN_BY_TMP else (_denied(f"{ROOT}/exercises/G14.05.yaml"), SANDBOX)),
    "import_grader": Attack(((SANDBOX, "only numpy and the standard library"),)),
    "proc_and_environ": Attack((SANDBOX,)),
    "inherited_fds": Attack(("no inherited file descriptor leads to a secret; open: 0 1 2 3",)),
    "proc_mem": Attack(("ptrace: Operation not permitted", SANDBOX)),
    "read_classmate": Attack((OUTSIDE,)),
    # writing outside the job folder
    "write_outside": Attack((_denied(""), OUTSIDE)),
    "fake_report": Attack((_denied(""), OUTSIDE)),
    # network
    "network_tcp": Attack(("no network:",)),
    "network_udp": Attack(("no network:",)),
    "network_unix": Attack(("Operation not permitted", SANDBOX)),
    # resources; hangs are in bytes_to_mib(1 MiB) only, a check mib_decimal fails anyway
    "fork_bomb": Attack((TIMED_OUT,), same=False),
    "memory_bomb": Attack(
        (
            "bytes_to_mib raised MemoryError",
            "more memory than the grader allows",
            ("used up its CPU time or memory", *TIMED_OUT),
        ),
        same=False,
    ),
    "cpu_loop": Attack((CPU_TIME_OUT,)),
    "sleep_forever": Attack((WALL_TIME_OUT,)),
    "ignore_sigterm": Attack((WALL_TIME_OUT,)),
    # one-mib is hidden: the exception's type and line are shown, not its text ("No space left on device")
    "disk_fill": Attack(("raised OSError (attention.py, line", "may write at most 64 MiB of files")),
    "hang_at_import": Attack(("importing the file took longer than 3 s",), baseline="starter"),
    "huge_stdout": Attack(("[output cut at 16 KiB]", "&lt;script&gt;alert(&#39;stdout&#39;)"), in_page=True),
    "huge_stderr": Attack(("[output cut at 16 KiB]", "&lt;img src=x onerror="), in_page=True),
    # processes
    "kill_parent": Attack((HONEST_WRONG,)),
    # The job is pid 1 of its pid namespace and leads its own process group there: killpg(getpgrp())
    # is kill(-1), which finds no process to signal (ESRCH), so the call raises instead of returning.
    "kill_process_group": Attack(((HONEST_WRONG, "bytes_to_mib raised ProcessLookupError on valid input"),)),
    "kill_everything": Attack((HONEST_WRONG,)),
    "daemon": Attack((HONEST_WRONG,)),
    # exits and exceptions
    "os_exit_at_import": Attack(
        ("importing the file failed: the process exited with code 0 before answering",), baseline="starter"
    ),
    "sys_exit_at_import": Attack(("importing the file failed with SystemExit",), baseline="starter"),
    "os_exit_in_call": Attack(("bytes_to_mib crashed: the process exited with code 0 before answering",)),
    "sys_exit_in_call": Attack(("bytes_to_mib raised SystemExit on valid input",)),
    "base_exception": Attack(("raised Escape on valid input", "raised KeyboardInterrupt", "raised GeneratorExit")),
    # monkeypatching and lying
    "monkeypatch": Attack((HONEST_WRONG,)),
    "patch_worker": Attack((HONEST_WRONG,)),
    "forged_frames": Attack(("returned something the grader cannot read: the result holds a dict",), same=False),
    # Refused by its length prefix (larger than the call's budget), or, when it fits, by its depth.
    "deep_json_frame": Attack(((UNREADABLE, "bytes_to_mib crashed: the result is far larger than the reference's"),)),
    "lying_eq": Attack((FOREIGN, HONEST_WRONG)),
    "lying_array": Attack((FOREIGN, HONEST_WRONG)),
    "object_array": Attack(("numpy array of dtype object", "dtype complex128", "dtype <U5")),
    "generator": Attack(("the result holds a generator", "the result holds a map", "nested too deeply")),
    # the sandbox itself
    "ctypes_escape": Attack(("Operation not permitted", SANDBOX)),
    "planted_files": Attack((HONEST_WRONG,)),
    # issue 9, the boundary: what a job sends is validated before it is kept
    "lone_surrogate": Attack(
        (
            "bytes_to_mib raised ValueError on valid input",
            ("bad \ufffd surrogate \ufffd here", "bad ? surrogate ? here"),
        )
    ),
    "clock_nan": Attack((HONEST_WRONG,)),
    "clock_huge_int": Attack((HONEST_WRONG,)),
    # A number out of float range is refused as the call's answer; the job's exit costs the next call.
    "forged_huge_int": Attack(
        (
            "bytes_to_mib returned something the grader cannot read: the result holds an "
            "integer too large to be a float (400 digits)",
        ),
        same=False,
    ),
    # NaN is data a worker may send (a NaN result): the forged answer may be judged, and the job's exit costs
    # the next call
    "forged_nan_literal": Attack(((UNREADABLE, "mib differs from the expected value"),), same=False),
    "forged_deep_dict": Attack(
        (
            (
                "the result is larger than the grader accepts",
                "nested more than",
                UNREADABLE,
                "bytes_to_mib crashed: the result is far larger than the reference's",
            ),
        ),
        same=False,
    ),
    "forged_wide_junk": Attack(
        (
            (
                "bytes_to_mib crashed: the result is larger than the grader accepts",
                "bytes_to_mib crashed: the result is far larger than the reference's",
                UNREADABLE,
            ),
        )
    ),
    "close_result_fd": Attack((CLOSED_FD,), absent=FALSE_BLAME),
    "dup_result_fd": Attack((CLOSED_FD,), absent=FALSE_BLAME),
    "longdouble_result": Attack(
        ("(longdouble) scalar; convert it with float()",), absent=("could not be read (TypeError)",)
    ),
    # hidden checks say only that the result could not be read: the visible one names the type
    "complex_result": Attack(
        (
            "bytes_to_mib returned something the grader cannot read: the result holds a complex",
            "return plain numbers, lists of them or numpy arrays",
        )
    ),
    "str_subclass": Attack(
        (
            "bytes_to_mib raised _Loud on valid input",
            ("the result holds a _SlyBytes", "the result holds an object of a class of its own"),
        )
    ),
    # issue 9, outputs: student text is made safe for each reader (terminal, CI log, XML)
    "ansi_import": Attack(("importing the file failed with ValueError",), baseline="starter"),
    "ansi_in_call": Attack(("bytes_to_mib raised ValueError on valid input",)),
    "github_import": Attack(("importing the file failed with ValueError",), baseline="starter"),
    "github_in_call": Attack(("bytes_to_mib raised ValueError on valid input",)),
    "xml_invalid": Attack(("bytes_to_mib raised ValueError on valid input",), same=False),
    # issue 9, hidden inputs: printed, found in memory, put in messages (see test_hidden_inputs_stay_hidden)
    "print_hidden_args": Attack((HONEST_WRONG,)),
    "scan_memory": Attack((HONEST_WRONG,)),
    "hidden_args_in_message": Attack(("attention raised ValueError on valid input",), same=False),
    # issue 9, system calls
    "listmount": Attack(((SANDBOX, "Function not implemented"),), absent=("LISTMOUNT-WORKED",)),
    "flock_shared": Attack((SANDBOX,), absent=("FLOCK-WORKED",)),
    "getcwd_host": Attack(
        ("bytes_to_mib raised ValueError on valid input", f"CWD={JOB_FOLDER} FILE={JOB_FOLDER}/attention.py"),
        absent=("grader-sandbox", "grader-job", str(ROOT)),
    ),
}
BUILT = {
    # Attacks made at test time from the grader's own data (see `_precomputed_attack`).
    "precompute_seeds": Attack((), baseline="no_sqrt_dk", same=False),
}
CLASSMATE = "honest_classmate"
"""A copy of submissions/correct_numpy graded beside the attacks: it must keep full marks."""
BASELINES = ("mib_decimal", "starter", "no_sqrt_dk")
ATTACK_IDS = set(ATTACKS) | set(BUILT)


# --- helpers -------------------------------------------------------------------------


def _grade(paths: list[str], out: Path, quiet: bool = True) -> tuple[int, float]:
    old = os.getcwd()
    os.chdir(ROOT)
    start = time.monotonic()
    try:
        code = main(["grade", *paths, "--out", str(out), *(["-q"] if quiet else []), *TIMEOUTS])
    finally:
        os.chdir(old)
    return code, time.monotonic() - start


@contextlib.contextmanager
def _environment(**env: str | None):
    """Set (or, for None, remove) environment variables for the block."""
    saved = {key: os.environ.get(key) for key in env}
    try:
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _grade_watched(paths: list[str], out: Path, log: Path) -> tuple[int, float, str]:
    """`_grade` without ``-q`` as a GitHub Actions job runs it: what it prints is kept in ``log``.

    Standard output and error (the file descriptors and ``sys.stdout``/``sys.stderr``, so that
    what child processes write is kept too) go to ``log`` while it runs, encoded as a real
    terminal's streams are (stdout strict UTF-8, stderr with backslash escapes).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "wb") as fh:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        stdout = io.TextIOWrapper(os.fdopen(os.dup(fh.fileno()), "wb"), encoding="utf-8", write_through=True)
        stderr = io.TextIOWrapper(
            os.fdopen(os.dup(fh.fileno()), "wb"), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        try:
            with (
                contextlib.redirect_stdout(stdout),
                contextlib.redirect_stderr(stderr),
                _environment(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(log.with_suffix(".md"))),
            ):
                code, seconds = _grade(paths, out, quiet=False)
        finally:
            for stream in (stdout, stderr):
                try:
                    stream.close()
                except (OSError, ValueError):
                    pass
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    return code, seconds, log.read_bytes().decode("utf-8", errors="replace")


def _collected():  # noqa: ANN202
    """Every exercise's prepared checks, hidden ones included, as ``grade`` prepares them here."""
    from grader.config.core import Config
    from grader.config.parser import build_parser
    from grader.config.plugins import get_plugin_manager
    from grader.grading import session

    old = os.getcwd()
    os.chdir(ROOT)
    try:
        pm = get_plugin_manager(load_entrypoints=False)
        options = build_parser(pm).parse_args(["validate"])
        return session.collect(Config("validate", options, pm))
    finally:
        os.chdir(old)


def _numbers(value: object) -> list:
    """Every number in nested lists (ragged ones too), bools left out."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            found.append(item)
    return found


def _tokens(args: object) -> set[str]:
    """How the numbers of ``args`` would show when printed: those unlikely to appear by chance.

    A float gives its first 10 significant digits (a prefix of its ``repr``), when they hold at
    least 6 digits that are not leading or trailing zeros; an int, its digits when 6 or more.
    """
    found = set()
    for x in _numbers(args):
        if isinstance(x, float) and math.isfinite(x):
            text = repr(float(f"{x:.10g}"))
            if len(text.lstrip("-").replace(".", "").rstrip("0").lstrip("0")) >= 6:
                found.add(text.rstrip("0") if "e" not in text else text)
        elif isinstance(x, int) and abs(x) >= 100_000:
            found.add(str(x))
    return found


def _hidden_tokens() -> set[str]:
    """Printed forms of the hidden calls' arguments (none of a visible call's)."""
    collected = _collected()
    hidden, visible = set(), set()
    for _, items in collected.checks:
        for pc in items:
            for call in pc.prepared.calls:
                (visible if pc.check.visibility == "visible" else hidden).update(_tokens(list(call.args)))
    return hidden - visible


def _precomputed_attack(baseline: Path) -> str:
    """``baseline``'s code plus a table of the right answer to every hidden call, as the specs' seeds give them.

    The table is what a student who once saw the specs (not the course secret) would
    compute: the calls the grader prepares with the default secret, and the reference's
    answers. Graded with another secret, no call should match.
    """
    import importlib.util

    spec = importlib.util.spec_from_file_location("adversarial_reference", ROOT / "reference" / "attention.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    with _environment(**{SECRET_ENV: None, SECRET_ENV + "_FILE": None}):
        collected = _collected()

    def plain(value: object) -> object:
        if hasattr(value, "tolist"):
            return value.tolist()
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    table = {}
    for _, items in collected.checks:
        for pc in items:
            if pc.check.visibility == "visible":
                continue
            for call in pc.prepared.calls:
                key = call.function + json.dumps(list(call.args))
                try:
                    table[key] = {"value": plain(getattr(reference, call.function)(*call.args))}
                except Exception:  # noqa: BLE001 - a call the reference refuses
                    table[key] = {"raise": True}
    assert len(table) > 20
    return baseline.read_text() + textwrap.dedent(f"""

        # --- the attack: answers precomputed from the specs' seeds ---
        import json as _json
        _TABLE = _json.loads({json.dumps(json.dumps(table))})


        def _precomputed(fn):
            def wrapper(*args):
                found = _TABLE.get(fn.__name__ + _json.dumps(list(args)))
                if found is None:
                    return fn(*args)
                if "raise" in found:
                    raise ValueError("precomputed: the reference refuses this call")
                return found["value"]
            wrapper.__name__ = fn.__name__
            return wrapper


        for _name in ("attention", "softmax", "softmax_backward", "score_array_bytes", "bytes_to_mib"):
            if _name in globals():
                globals()[_name] = _precomputed(globals()[_name])
        """)


def _survivors() -> list[dict]:
    """Sandbox-uid or daemon-named processes without a live zygote above them.

    Jobs of other grading runs on this machine (another test session) have
    their zygote as an ancestor and are not ours; anything that escaped its
    job has lost it.
    """
    procs = {p["pid"]: p for p in processes()}

    def under_zygote(p: dict) -> bool:
        seen = set()
        while p and p["pid"] not in seen:
            seen.add(p["pid"])
            if "zygote.py" in p["cmdline"]:
                return True
            p = procs.get(p["ppid"])
        return False

    return [
        p
        for p in procs.values()
        if (p["uid"] in UIDS or "advdaemon" in p["name"] + p["cmdline"]) and not under_zygote(p)
    ]


def _wait_no_survivors(seconds: float = 5.0) -> list[dict]:
    deadline = time.monotonic() + seconds
    while True:
        left = [p for p in _survivors() if not p["state"].startswith("Z")]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _files_with_mark(since: float) -> list[str]:
    """Repository files changed since ``since`` that hold an attack's mark."""
    hits = []
    skip = {".git", "__pycache__", ".pytest_cache", ".venv", "adversarial"}
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            path = Path(folder, name)
            try:
                if path.stat().st_mtime < since or path.stat().st_size > 8 << 20 or path.name == "test_adversarial.py":
                    continue
                if MARK.encode() in path.read_bytes() or "grader-adversarial" in name:
                    hits.append(str(path.relative_to(ROOT)))
            except OSError:
                continue
    return hits


class _Helpers:
    """Network helpers an attack would ask for the answer: TCP, UDP, abstract and named UNIX sockets."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.sockets: list[socket.socket] = []
        self.stop = threading.Event()
        for kind, family, address in (
            ("tcp", socket.AF_INET, ("127.0.0.1", PORT)),
            ("udp", socket.AF_INET, ("127.0.0.1", PORT)),
            ("abstract", socket.AF_UNIX, ABSTRACT_SOCKET),
            ("unix", socket.AF_UNIX, str(UNIX_SOCKET)),
        ):
            sock = socket.socket(family, socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM)
            try:
                if kind == "unix":
                    UNIX_SOCKET.unlink(missing_ok=True)
                sock.bind(address)
                if kind == "unix":
                    os.chmod(UNIX_SOCKET, 0o777)  # world-writable, like many a system service's socket
                if kind != "udp":
                    sock.listen()
            except OSError:  # the port is taken (another session of this suite): no helper then
                sock.close()
                continue
            sock.settimeout(0.2)
            self.sockets.append(sock)
            threading.Thread(target=self._serve, args=(kind, sock), daemon=True).start()

    def _serve(self, kind: str, sock: socket.socket) -> None:
        while not self.stop.is_set():
            try:
                if kind == "udp":
                    _, peer = sock.recvfrom(100)
                    self.hits.append(kind)
                    sock.sendto(b"1048576\n", peer)
                else:
                    conn, _ = sock.accept()
                    self.hits.append(kind)
                    conn.sendall(b"1048576\n")
                    conn.close()
            except OSError:
                continue

    def close(self) -> None:
        self.stop.set()
        for sock in self.sockets:
            sock.close()
        UNIX_SOCKET.unlink(missing_ok=True)


def _require_sandbox(tmp: Path) -> None:
    """Fail (or skip where there is no sandbox) unless ``grade`` runs submissions in the sandbox."""
    from grader.builtin.sandbox import probe_layers

    layers = probe_layers()
    wanted = ("pid", "fresh_proc", "net", "kill", "uid", "seccomp")
    if (
        layers.get("zygote") is not True
        or not all(layers.get(k) is True for k in wanted)
        or not str(layers.get("landlock", "")).startswith("ABI")
    ):
        pytest.skip(f"the sandbox is not fully available here ({layers}); run 'grader doctor'")
    probe = tmp / "probe"
    probe.mkdir()
    (probe / "attention.py").write_text(
        "import os\n"
        "try:\n"
        f"    open({str(ROOT / 'reference' / 'attention.py')!r}).close()\n"
        "    reference = 'readable'\n"
        "except OSError:\n"
        "    reference = 'denied'\n"
        "raise RuntimeError(f'probe uid={os.geteuid()} pid={os.getpid()} reference={reference}')\n"
    )
    code, _ = _grade([str(probe)], tmp / "probe-out")
    error = json.loads((tmp / "probe-out" / "results.json").read_text())["submissions"][0]["error"]
    found = re.search(r"probe uid=(\d+) pid=(\d+) reference=(\w+)", error)
    if code != 0 or not found or int(found[1]) not in UIDS or found[2] != "1" or found[3] != "denied":
        pytest.fail(
            f"'grader grade' does not run submissions in the sandbox ({error!r}): the adversarial "
            "suite refuses to run hostile code outside it"
        )


# --- the graded attacks ------------------------------------------------------------


@pytest.fixture(scope="session")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade every attack, the honest baselines and an honest classmate in one run; watch what changes around it.

    The run is a GitHub Actions job's (``GITHUB_ACTIONS=true``, not quiet: what it prints is
    kept) with a course secret of its own, so that inputs precomputed without it miss.
    """
    _require_sandbox(tmp_path_factory.mktemp("adv-probe"))
    out = tmp_path_factory.mktemp("adv-reports")  # adv-reports0: the fake_report attack aims at it
    canary = f"canary {os.getpid()} {time.time()}\n"
    CANARY.write_text(canary)
    os.chmod(CANARY, 0o666)  # writable by anyone: only the sandbox stands in the way
    reference = (ROOT / "reference" / "attention.py").read_bytes()
    attacks = tmp_path_factory.mktemp("adv-class") / "adversarial"
    shutil.copytree(ADVERSARIAL, attacks)
    for file in attacks.glob("*/attention.py"):  # aim at this checkout of the repository
        file.write_text(file.read_text().replace(REPO_IN_ATTACKS, str(ROOT)).replace(CANARY_IN_ATTACKS, str(CANARY)))
    (attacks / CLASSMATE).mkdir()
    shutil.copy(ROOT / "submissions" / "correct_numpy" / "attention.py", attacks / CLASSMATE / "attention.py")
    (attacks / "precompute_seeds").mkdir()
    (attacks / "precompute_seeds" / "attention.py").write_text(
        _precomputed_attack(ROOT / "submissions" / "no_sqrt_dk" / "attention.py")
    )
    secret = f"adversarial-{secrets.token_hex(8)}"
    helpers = _Helpers()
    before = {p["pid"] for p in _survivors()}
    start = time.time() - 1
    log = tmp_path_factory.mktemp("adv-log") / "grade.log"
    try:
        with _environment(**{SECRET_ENV: secret, SECRET_ENV + "_FILE": None}):
            code, seconds, printed = _grade_watched([str(attacks), *(f"submissions/{b}" for b in BASELINES)], out, log)
            hidden = _hidden_tokens()
    finally:
        helpers.close()
    results = _results(out)
    state = {
        "code": code,
        "seconds": seconds,
        "out": out,
        "printed": printed,
        "hidden": hidden,
        "by_id": {s["id"]: s for s in results["submissions"]},
        "hits": list(helpers.hits),
        "survivors": [p for p in _wait_no_survivors() if p["pid"] not in before],
        "canary_intact": CANARY.read_text() == canary,
        "reference_intact": (ROOT / "reference" / "attention.py").read_bytes() == reference,
        "marked_files": _files_with_mark(start),
        "outside": [str(p) for p in OUTSIDE_TARGETS if p.exists()]
        + [str(p) for p in Path("/tmp").glob("grader-adversarial-planted-ran-*")],
        "out_files": sorted(p.name for p in out.iterdir()),
    }
    CANARY.unlink(missing_ok=True)
    return state


def _results(out: Path) -> dict:
    """results.json of a run; none (so that each test says what is missing) if the run wrote none."""
    path = out / "results.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"submissions": []}


def _report_text(sub: dict) -> str:
    parts = [sub["error"]] + [c["message"] for e in sub["exercises"] for c in e["checks"]]
    return "\n".join(parts)


def _scores(sub: dict) -> dict[str, float]:
    return {e["id"]: e["score"] for e in sub["exercises"]}


def test_every_attack_has_a_folder_and_an_expectation() -> None:
    folders = {p.name for p in ADVERSARIAL.iterdir() if (p / "attention.py").is_file()}
    assert folders == set(ATTACKS)
    parent = {p.name for p in (ADVERSARIAL / "_parent").iterdir() if (p / "attention.py").is_file()}
    assert parent == set(PARENT_ATTACKS)
    assert len(ATTACKS) + len(BUILT) + len(PARENT_ATTACKS) + len(NAMED) + len(ARCHIVED) >= 40 + 30


@pytest.mark.timing
def test_grading_finishes_in_time(attacked: dict) -> None:
    assert attacked["code"] == 0, attacked["printed"][-3000:]
    assert set(attacked["by_id"]) == ATTACK_IDS | set(BASELINES) | {CLASSMATE}
    assert attacked["seconds"] < 150, f"grading the attacks took {attacked['seconds']:.0f} s"


def test_the_baselines_are_graded_as_usual(attacked: dict) -> None:
    honest, starter = attacked["by_id"]["mib_decimal"], attacked["by_id"]["starter"]
    assert honest["status"] == "graded" and 0 < honest["score"] < honest["max_score"]
    assert starter["status"] == "graded" and starter["score"] == 0
    no_sqrt = attacked["by_id"]["no_sqrt_dk"]
    assert no_sqrt["status"] == "graded" and 0 < no_sqrt["score"] < no_sqrt["max_score"]


def test_the_honest_classmate_keeps_full_marks(attacked: dict) -> None:
    classmate = attacked["by_id"][CLASSMATE]
    assert classmate["status"] == "graded", classmate["error"]
    assert classmate["score"] == classmate["max_score"] == FULL_MARKS


def test_every_class_level_file_is_written(attacked: dict) -> None:
    _assert_class_files(attacked["out"], attacked["by_id"])


@pytest.mark.parametrize("name", sorted(ATTACK_IDS))
def test_attack_gains_nothing(attacked: dict, name: str) -> None:
    attack = ATTACKS.get(name) or BUILT[name]
    sub, honest = attacked["by_id"][name], attacked["by_id"][attack.baseline]
    assert sub["score"] <= honest["score"], f"{name} scored {sub['score']}, honest {attack.baseline} {honest['score']}"
    if attack.same:
        assert _scores(sub) == _scores(honest)


@pytest.mark.parametrize("name", sorted(ATTACK_IDS))
def test_report_names_the_problem(attacked: dict, name: str) -> None:
    attack = ATTACKS.get(name) or BUILT[name]
    sub = attacked["by_id"][name]
    page = _page(attacked["out"], sub).read_text()
    text = page if attack.in_page else _report_text(sub)
    for phrase in attack.phrases:
        options = phrase if isinstance(phrase, tuple) else (phrase,)
        assert any(o in text for o in options), f"{name}: none of {options} in the report:\n{text[:3000]}"
    for wrong in attack.absent:
        assert wrong not in _report_text(sub) and html.escape(wrong) not in page, f"{name}: {wrong!r} in the report"
    assert NOT_SANDBOXED not in page and NOT_SANDBOXED not in text
    assert "Traceback" not in text


def test_no_process_survives(attacked: dict) -> None:
    assert attacked["survivors"] == []


def test_no_network_helper_was_reached(attacked: dict) -> None:
    assert attacked["hits"] == []


def test_nothing_outside_the_output_folder_changed(attacked: dict) -> None:
    assert attacked["canary_intact"], f"{CANARY} was overwritten"
    assert attacked["reference_intact"]
    assert attacked["marked_files"] == []
    assert attacked["outside"] == []


def test_the_output_folder_holds_only_the_grader_s_files(attacked: dict) -> None:
    assert not [name for name in attacked["out_files"] if "adversarial" in name]
    results = (attacked["out"] / "results.json").read_text()
    assert MARK not in results
    for name in attacked["out_files"]:
        path = attacked["out"] / name
        if path.is_file() and name.endswith((".html", ".json", ".csv", ".xml")):
            assert MARK not in path.read_text(errors="replace"), name


def test_huge_output_is_capped_and_escaped(attacked: dict) -> None:
    for name, tag in (("huge_stdout", "<script>"), ("huge_stderr", "<img src=x")):
        page = _page(attacked["out"], attacked["by_id"][name]).read_text()
        assert tag not in page
        assert len(page) < 200_000


def _page(out: Path, sub: dict) -> Path:
    """A submission's HTML page: named by the naming rule's field in results.json, else after its id."""
    for key in ("page", "file_name", "filename", "slug", "file_stem", "name"):
        value = sub.get(key)
        if isinstance(value, str) and value:
            candidate = out / (value if value.endswith(".html") else f"{value}.html")
            if candidate.is_file():
                return candidate
    return out / f"{sub['id']}.html"


def _gradescope(out: Path, sub: dict) -> Path:
    """A submission's Gradescope file (``gradescope/<page name>.json``)."""
    return out / "gradescope" / (_page(out, sub).stem + ".json")


def _strict_json(text: str) -> object:
    """Parse JSON as a strict reader does: no NaN or Infinity, no lone surrogate."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    text.encode("utf-8")  # a lone surrogate cannot be encoded
    data = json.loads(text, parse_constant=refuse)
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            item.encode("utf-8")
        elif isinstance(item, float):
            assert math.isfinite(item)
    return data


def _assert_class_files(out: Path, by_id: dict) -> None:
    """Every class-level file is there, readable, and lists every submission."""
    missing = [name for name in CLASS_FILES if not (out / name).exists()]
    assert not missing, f"class-level files missing: {missing}"
    results = _strict_json((out / "results.json").read_text(encoding="utf-8"))
    assert len(results["submissions"]) == len(by_id)
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert len(rows) == len(by_id) + 1
    ET.parse(out / "junit.xml")
    for sub in by_id.values():
        assert _page(out, sub).is_file(), sub["id"]
        _strict_json(_gradescope(out, sub).read_text(encoding="utf-8"))
    index = (out / "index.html").read_text(encoding="utf-8")
    summary = (out / "summary.html").read_text(encoding="utf-8")
    assert "G14.01" in index and "G14.01" in summary


TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Characters no line for a terminal may carry: C0 controls but tab and newline, DEL, C1 (CSI is U+009B)."""


def _workflow_commands(log: str) -> tuple[list[str], list[str]]:
    """The lines GitHub Actions would run as workflow commands, and the stop-commands tokens used.

    Lines between ``::stop-commands::TOKEN`` and ``::TOKEN::`` are inert. A CR ends a line too.
    """
    active, tokens, stop = [], [], None
    for line in re.split(r"\r\n|\r|\n", log):
        line = line.lstrip()
        if stop is not None:
            if line == f"::{stop}::":
                stop = None
            continue
        if line.startswith("::"):
            found = re.match(r"::stop-commands::(.+)$", line)
            if found:
                stop = found[1]
                tokens.append(stop)
            else:
                active.append(line)
    return active, tokens


def _assert_safe_for_github(log: str) -> None:
    """No workflow command of the student's: only the grader's own annotations, whose student text is escaped.

    The attacks' forged commands all carry ``FORGED-COMMAND``; a grader's annotation (``::error
    file=...::message``) may hold student text, escaped, but never starts its message with it.
    """
    active, tokens = _workflow_commands(log)
    assert not [t for t in tokens if "FORGED" in t], tokens
    forged = []
    for line in active:
        found = re.match(r"::(\w[\w-]*)( [^:]*)?::(.*)$", line)
        if (
            not found
            or found[1] not in ("error", "warning", "notice")
            or "file=" not in (found[2] or "")
            or found[3].startswith("FORGED")
            or "FORGED" in (found[2] or "")
        ):
            forged.append(line)
    assert not forged, forged[:5]


def test_results_and_exports_are_strict(attacked: dict) -> None:
    """results.json and every Gradescope file are strict JSON (no NaN, no lone surrogate), whatever a job sent."""
    _strict_json((attacked["out"] / "results.json").read_text(encoding="utf-8"))
    for sub in attacked["by_id"].values():
        data = _strict_json(_gradescope(attacked["out"], sub).read_text(encoding="utf-8"))
        assert math.isfinite(data["execution_time"]) and 0 <= data["execution_time"] < 1000, sub["id"]


@pytest.mark.parametrize("name", ["clock_nan", "clock_huge_int", "forged_huge_int", "forged_nan_literal"])
def test_durations_are_the_grader_s_own(attacked: dict, name: str) -> None:
    """The job's own clock and frames say nothing about how long a call took."""
    root = ET.parse(attacked["out"] / "junit.xml").getroot()
    times = [
        float(case.get("time")) for case in root.iter("testcase") if case.get("classname", "").startswith(f"{name}.")
    ]
    assert times, f"no test case of {name} in junit.xml"
    assert all(math.isfinite(t) and 0 <= t < 100 for t in times), times[:5]
    assert math.isfinite(float(root.get("time")))
    text = (attacked["out"] / "results.json").read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text and "4444444444" not in text


def test_junit_holds_only_xml_characters(attacked: dict) -> None:
    text = (attacked["out"] / "junit.xml").read_text(encoding="utf-8")
    ET.fromstring(text)  # a strict XML 1.0 parser
    bad = re.findall("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]", text)
    assert not bad, bad[:5]
    assert "xml_invalid." in text


def test_terminal_output_holds_no_escape_sequences(attacked: dict) -> None:
    """Progress lines and the score table carry student text only without controls or escapes."""
    printed = attacked["printed"]
    assert "ansi_import" in printed and "graded " in printed
    bad = sorted(set(TERMINAL_UNSAFE.findall(printed)))
    assert not bad, f"the terminal got {bad!r}"


def test_ci_log_holds_no_forged_workflow_command(attacked: dict) -> None:
    assert "github_import" in attacked["printed"]
    _assert_safe_for_github(attacked["printed"])


@pytest.mark.parametrize("name", ["github_in_call", "ansi_in_call", "github_import", "ansi_import"])
def test_student_check_in_ci_is_safe(
    name: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``grader check`` in a student's GitHub Actions job: no forged command, no escape sequence."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    code = main(["check", str(ADVERSARIAL / name / "attention.py"), *TIMEOUTS])
    out, err = capfd.readouterr()
    assert code == 1, err
    _assert_safe_for_github(out + "\n" + err)
    bad = sorted(set(TERMINAL_UNSAFE.findall(out + err)))
    assert not bad, f"the terminal got {bad!r}"
    assert "Traceback" not in out + err


@pytest.mark.parametrize("name", ["print_hidden_args", "scan_memory", "hidden_args_in_message"])
def test_hidden_inputs_stay_hidden(attacked: dict, name: str) -> None:
    """No argument of a hidden call reaches the student's page or Gradescope file, however it was found."""
    hidden = attacked["hidden"]
    assert len(hidden) > 100
    sub = attacked["by_id"][name]
    page = html.unescape(_page(attacked["out"], sub).read_text(encoding="utf-8"))
    gradescope = json.dumps(
        json.loads(_gradescope(attacked["out"], sub).read_text(encoding="utf-8")), ensure_ascii=False
    )
    for where, text in (("page", page), ("gradescope", gradescope)):
        leaked = sorted(t for t in hidden if t in text)
        assert not leaked, f"{name}: hidden inputs on its {where}: {leaked[:5]}"
    if name == "print_hidden_args":  # what it printed during visible calls is still shown
        assert "ARGS-SEEN score_array_bytes (2, 8, 1024)" in page


def test_precomputed_answers_miss(attacked: dict) -> None:
    """Hidden inputs depend on the course secret: answers precomputed from the specs' seeds alone earn nothing."""
    attack, baseline = attacked["by_id"]["precompute_seeds"], attacked["by_id"]["no_sqrt_dk"]
    assert _scores(attack) == _scores(baseline)


def test_messages_stay_short(attacked: dict) -> None:
    """A str subclass that slices to 20 MB leaves a message of at most a few thousand characters."""
    sub = attacked["by_id"]["str_subclass"]
    assert max(len(c["message"]) for e in sub["exercises"] for c in e["checks"]) <= 2100
    assert _page(attacked["out"], sub).stat().st_size < 200_000


@pytest.mark.parametrize("name", ["deep_json_frame", "forged_frames"])
def test_student_check_survives_forged_frames(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``grader check`` (no sandbox: the student's own machine) reads the same frames."""
    code = main(["check", str(ADVERSARIAL / name / "attention.py"), *TIMEOUTS])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "Traceback" not in out + err


@pytest.mark.browser
def test_attack_reports_render_in_chromium(attacked: dict, tmp_path: Path) -> None:
    """Headless Chromium shows each attack's problem in words, as a student would read it.

    Every attack's page is loaded (one Chromium, `conftest.dump_doms`); the
    rendered text must hold one of the attack's phrases.
    """
    names = sorted(ATTACKS)
    pages = [_page(attacked["out"], attacked["by_id"][name]).as_uri() for name in names]
    doms = {name: html.unescape(dom) for name, dom in zip(names, dump_doms(pages), strict=True)}
    missing = []
    for name, attack in ATTACKS.items():  # the built attack has no phrases
        dom = doms[name]
        if "</html>" not in dom:
            missing.append(f"{name}: Chromium rendered nothing")
            continue
        for phrase in attack.phrases:
            options = phrase if isinstance(phrase, tuple) else (phrase,)
            options = tuple(html.unescape(o) for o in options)
            if not any(o in dom for o in options):
                missing.append(f"{name}: none of {options}")
    assert not missing, "\n".join(missing)


# --- odd files: symbolic links, encodings, sizes, archives ---------------------------


def _write_zip(path: Path) -> None:
    """A class export with traversal, an absolute path, a symbolic link and a zip bomb."""
    honest = HONEST.read_bytes()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("export/zip_alice/attention.py", honest)
        zf.writestr("export/../grader-adversarial-traversal.py", honest)
        zf.writestr("../../../../tmp/grader-adversarial-traversal.py", honest)
        zf.writestr("/tmp/grader-adversarial-abs.py", honest)
        link = zipfile.ZipInfo("export/zip_mallory/attention.py")
        link.external_attr = 0o120777 << 16  # a symbolic link to the reference
        zf.writestr(link, str(ROOT / "reference" / "attention.py"))
        bomb = zipfile.ZipInfo("export/zip_bomber/attention.py")
        bomb.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(bomb, "w") as fh:  # 256 MiB of zeros in about 256 KiB
            chunk = b"\0" * (1 << 20)
            for _ in range(256):
                fh.write(chunk)


@pytest.fixture(scope="session")
def odd_class(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade a class folder of odd files and a hostile zip archive in one run."""
    base = tmp_path_factory.mktemp("adv-odd")
    cls = base / "class"
    honest = HONEST.read_bytes()
    for name in ("honest", "link_file", "link_passwd", "non_utf8", "latin1_declared", "large_ok", "large_over"):
        (cls / name).mkdir(parents=True)
    (cls / "honest" / "attention.py").write_bytes(honest)
    (cls / "link_file" / "attention.py").symlink_to(ROOT / "reference" / "attention.py")
    (cls / "link_passwd" / "attention.py").symlink_to("/etc/passwd")
    (cls / "link_folder").symlink_to(ROOT / "submissions" / "correct_numpy", target_is_directory=True)
    (cls / "link_module.py").symlink_to(ROOT / "reference" / "attention.py")
    (cls / "non_utf8" / "attention.py").write_bytes(b'GREETING = "caf\xe9"\n' + honest)
    (cls / "latin1_declared" / "attention.py").write_bytes(
        b'# -*- coding: latin-1 -*-\nGREETING = "caf\xe9"\n' + honest
    )
    from grader.fileio import MAX_SOURCE_BYTES

    def padded(size: int) -> bytes:
        filler = b"# " + b"x" * 97 + b"\n"
        data = honest + filler * ((size - len(honest)) // len(filler))
        return data + b"#" * (size - len(data) - 1) + b"\n"

    (cls / "large_ok" / "attention.py").write_bytes(padded(MAX_SOURCE_BYTES))
    (cls / "large_over" / "attention.py").write_bytes(padded(MAX_SOURCE_BYTES + 1))
    archive = base / "export.zip"
    _write_zip(archive)
    out = base / "out"
    code, seconds = _grade([str(cls), str(archive)], out)
    results = json.loads((out / "results.json").read_text())
    return {
        "code": code,
        "seconds": seconds,
        "by_id": {s["id"]: s for s in results["submissions"]},
        "outside": [str(p) for p in OUTSIDE_TARGETS if p.exists()],
    }


ODD = {
    # id: (status, phrases of the error, same score as mib_decimal?)
    "honest": ("graded", (), True),
    "link_file": ("error", ("attention.py is a symbolic link; submit the file itself",), False),
    "link_passwd": ("error", ("attention.py is a symbolic link; submit the file itself",), False),
    "link_folder": ("error", ("link_folder is a symbolic link; submit the folder or file itself",), False),
    "link_module": ("error", ("link_module.py is a symbolic link",), False),
    "non_utf8": (
        "error",
        ("importing the file failed with SyntaxError (attention.py, line 1)", "save the file as UTF-8"),
        False,
    ),
    "latin1_declared": ("graded", (), True),
    "large_ok": ("graded", (), True),
    "large_over": ("error", ("attention.py is 2,097,153 bytes; the grader reads files of at most 2 MiB",), False),
    "zip_alice": ("graded", (), True),
    # Members left out of the archive: the student is still listed, with the reason.
    "zip_bomber": ("error", ("attention.py was left out of", "it is larger than 2 MiB"), False),
    "zip_mallory": ("error", ("attention.py was left out of", "it is a symbolic link"), False),
}


def test_odd_class_is_graded(odd_class: dict) -> None:
    assert odd_class["code"] == 0
    assert set(odd_class["by_id"]) == set(ODD)
    assert odd_class["seconds"] < 90


@pytest.mark.parametrize("name", sorted(ODD))
def test_odd_file(odd_class: dict, name: str) -> None:
    status, phrases, same = ODD[name]
    sub = odd_class["by_id"][name]
    honest = odd_class["by_id"]["honest"]
    assert sub["status"] == status, sub["error"]
    for phrase in phrases:
        assert phrase in sub["error"]
    assert "Traceback" not in sub["error"]
    if same:
        assert _scores(sub) == _scores(honest)
    else:
        assert sub["score"] == 0


def test_archive_cannot_write_outside_its_folder(odd_class: dict) -> None:
    assert odd_class["outside"] == []


# --- issue 9: names, archives and special files, built at test time ------------------

NAMED = {
    # folder (or file, when it ends in .py) name: what it holds ("honest" is mib_decimal's code)
    b"caf\xe9-latin1": "honest",  # not UTF-8
    "\u00e9" * 120: "honest",  # 240 bytes of UTF-8
    "bob": "honest",
    "bob.py": "correct",  # beside a folder of the same name
    "summary": "honest",  # the class summary's page name
    "index": "honest",  # the class index's page name
    "frank": "honest",
    "frank-2": "correct",
    "frank.py": "starter",
    "carol\rdave": "honest",  # a CR: a forged gradebook row
    "=cmd|' -C calc'!A1": "honest",  # a spreadsheet formula
    "  @SUM(1+1)": "honest",  # a formula after leading spaces
    "eve\x1b[31mred\x07": "honest",  # terminal controls
    "mallory\u202etxt.exe": "honest",  # a right-to-left override
    "Ann": "honest",
    "ann": "correct",  # the same page as Ann on macOS and Windows
    "jos\u00e9": "honest",  # NFC
    "jose\u0301": "correct",  # the same name in NFD
    "CON": "honest",  # a Windows device name
    "tab\tbed": "honest",  # a TAB: a CSV cell, a terminal column
    "fifo": "fifo",  # attention.py is a named pipe
    "classmate": "correct",
}
ARCHIVED = {
    # student folder in export.zip: what it holds
    "zip_honest": "honest",
    "zip_correct": "correct",
    "zip_many": "honest + 20,000 other files",
    "zip_dup": "attention.py twice (honest, then correct)",
    "zip_fifo": "attention.py marked as a FIFO",
    "L" * 300: "honest, under a folder name longer than a file system allows (graded: its files are not named so)",
}
SOURCES = {
    "honest": ROOT / "submissions" / "mib_decimal" / "attention.py",
    "correct": ROOT / "submissions" / "correct_numpy" / "attention.py",
    "starter": ROOT / "submissions" / "starter" / "attention.py",
}
SCORES = {"honest": FULL_MARKS - 5, "correct": FULL_MARKS, "starter": 0.0}


def _named_zip(path: Path) -> None:
    honest, correct = SOURCES["honest"].read_bytes(), SOURCES["correct"].read_bytes()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("export/zip_honest/attention.py", honest)
        zf.writestr("export/zip_correct/attention.py", correct)
        zf.writestr("export/zip_many/attention.py", honest)
        for i in range(20_000):
            zf.writestr(f"export/zip_many/notes/n{i:05d}.txt", b"")
        zf.writestr("export/zip_dup/attention.py", honest)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
            zf.writestr("export/zip_dup/attention.py", correct)
        zf.writestr(f"export/{'L' * 300}/attention.py", honest)
        fifo = zipfile.ZipInfo("export/zip_fifo/attention.py")
        fifo.external_attr = (stat.S_IFIFO | 0o644) << 16
        zf.writestr(fifo, honest)


def _snapshot(folder: Path) -> dict:
    """Every entry under ``folder`` (bytes paths): type, size and modification time."""
    found = {}
    for top, dirs, files in os.walk(os.fsencode(folder)):
        for name in dirs + files:
            st = os.lstat(os.path.join(top, name))
            found[os.path.join(top, name)] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return found


@pytest.fixture(scope="session")
def named_class(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade a class folder whose names attack the writers, and an archive with per-student problems, in one run."""
    base = tmp_path_factory.mktemp("adv-names")
    cls = base / "class"
    cls.mkdir()
    for name, kind in NAMED.items():
        raw = os.fsencode(cls) + b"/" + (name if isinstance(name, bytes) else name.encode())
        if raw.endswith(b".py"):
            with open(raw, "wb") as fh:
                fh.write(SOURCES[kind].read_bytes())
            continue
        os.mkdir(raw)
        if kind == "fifo":
            os.mkfifo(raw + b"/attention.py")
        else:
            with open(raw + b"/attention.py", "wb") as fh:
                fh.write(SOURCES[kind].read_bytes())
    archive = base / "export.zip"
    _named_zip(archive)
    before = {p["pid"] for p in _survivors()}
    snapshot = _snapshot(base)
    out = base / "out"
    code, seconds, printed = _grade_watched(
        [str(cls), str(archive), "submissions/mib_decimal"], out, base / "grade.log"
    )
    snapshot.pop(os.fsencode(out), None)
    snapshot.pop(os.fsencode(base / "grade.log"), None)
    after = {
        k: v
        for k, v in _snapshot(base).items()
        if not k.startswith(os.fsencode(out)) and not k.startswith(os.fsencode(base / "grade."))
    }
    results = _results(out)
    return {
        "code": code,
        "seconds": seconds,
        "out": out,
        "printed": printed,
        "class": cls,
        "archive": archive,
        "submissions": results["submissions"],
        "by_id": {s["id"]: s for s in results["submissions"]},
        "changed": sorted(set(snapshot.items()) ^ set(after.items()))[:10],
        "survivors": [p for p in _wait_no_survivors() if p["pid"] not in before],
    }


def _named(named_class: dict, name: str | bytes) -> dict:
    """The one result for a class folder entry, or an archive's student folder, found by its path."""
    if isinstance(name, bytes):
        found = [s for s in named_class["submissions"] if "latin1" in s["path"]]
    elif name in ARCHIVED:
        prefix = f"{named_class['archive']}:"
        last = {
            s["path"][len(prefix) :].rstrip("/").split("/")[-1]: s
            for s in named_class["submissions"]
            if s["path"].startswith(prefix)
        }
        found = [s for member, s in last.items() if member == name or len(name) > 255 and member.startswith("LLLL")]
    else:
        found = [s for s in named_class["submissions"] if s["path"] == str(named_class["class"] / name)]
    assert len(found) == 1, f"{name!r}: {len(found)} results ({[s['path'] for s in found]})"
    return found[0]


def test_named_class_is_graded(named_class: dict) -> None:
    assert named_class["code"] == 0, named_class["printed"][-3000:]
    assert len(named_class["submissions"]) == len(NAMED) + len(ARCHIVED) + 1
    assert named_class["seconds"] < 90


def test_every_student_has_an_id_and_files_of_their_own(named_class: dict) -> None:
    subs = named_class["submissions"]
    ids = [s["id"] for s in subs]
    assert len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)
    pages = [_page(named_class["out"], s).name for s in subs]
    assert len({p.casefold() for p in pages}) == len(pages), sorted(pages)
    assert not {"index.html", "summary.html"} & set(pages)
    for page in pages:
        encoded = page.encode("utf-8")
        assert len(encoded) <= 255 - len(".tmp-123456"), page
        assert not TERMINAL_UNSAFE.search(page) and not re.search("[\u200e\u200f\u202a-\u202e\u2066-\u2069/]", page)
    _assert_class_files(named_class["out"], named_class["by_id"])
    assert len(list((named_class["out"] / "gradescope").iterdir())) == len(subs)
    # the mapping is in results.json; a folder's id is its name, verbatim
    assert all(_page(named_class["out"], s).name == f"{s['slug']}.html" for s in subs)
    for name in NAMED:
        if isinstance(name, str) and not name.endswith(".py"):
            assert _named(named_class, name)["id"] == name


@pytest.mark.parametrize("name", [n for n, kind in NAMED.items() if kind in SCORES], ids=lambda n: ascii(n)[:40])
def test_a_student_s_name_changes_nothing_of_their_grade(named_class: dict, name: str | bytes) -> None:
    sub = _named(named_class, name)
    assert sub["status"] == "graded", sub["error"]
    assert sub["score"] == SCORES[NAMED[name]]
    page = _page(named_class["out"], sub).read_text(encoding="utf-8")
    assert f"{sub['score']:g}" in page
    if isinstance(name, str) and name.isprintable():
        assert unicodedata.normalize("NFC", name.strip()) in unicodedata.normalize("NFC", html.unescape(page))


def test_the_class_pages_stay_the_class_s(named_class: dict) -> None:
    """Students called summary and index have pages of their own; the class summary and index are intact."""
    out = named_class["out"]
    summary = (out / "summary.html").read_text(encoding="utf-8")
    index = (out / "index.html").read_text(encoding="utf-8")
    for name in ("summary", "index"):
        page = _page(out, _named(named_class, name))
        assert page.name not in ("summary.html", "index.html")
    assert summary != index
    assert str(len(named_class["submissions"])) in summary


def test_the_gradebook_cannot_be_forged(named_class: dict) -> None:
    """Every field quoted, no bare CR or LF, no formula at the start of a cell."""
    raw = (named_class["out"] / "gradebook.csv").read_bytes()
    lines = raw.split(b"\r\n") if b"\r\n" in raw else raw.split(b"\n")
    lines = [line for line in lines if line]
    assert len(lines) == len(named_class["submissions"]) + 1
    assert not [line for line in lines if b"\r" in line or b"\n" in line]
    assert all(line.startswith(b'"') for line in lines[1:]), lines[1][:80]
    with open(named_class["out"] / "gradebook.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert len({len(r) for r in rows}) == 1
    for row in rows[1:]:
        for cell in row:
            assert not cell.lstrip(' "').startswith(("=", "+", "@", "\t", "\r")), row
            assert not (cell.lstrip(' "').startswith("-") and not re.fullmatch(r"-?[\d.]+", cell)), row


def test_names_reach_the_terminal_and_ci_log_safely(named_class: dict) -> None:
    printed = named_class["printed"]
    assert "classmate" in printed
    bad = sorted(set(TERMINAL_UNSAFE.findall(printed)))
    assert not bad, f"the terminal got {bad!r}"
    assert not re.search("[\u202a-\u202e\u2066-\u2069]", printed)
    _assert_safe_for_github(printed)


def test_a_named_pipe_is_not_a_missing_file(named_class: dict) -> None:
    sub = _named(named_class, "fifo")
    assert sub["status"] == "error" and sub["score"] == 0
    assert "no attention.py" not in sub["error"]
    assert any(word in sub["error"] for word in ("FIFO", "named pipe", "not a regular file")), sub["error"]


@pytest.mark.parametrize("name", sorted(ARCHIVED), ids=lambda n: n[:20])
def test_archive_problems_are_one_student_s(named_class: dict, name: str) -> None:
    """The archive is graded; a student's own problem (too many files, a member twice, a name too long) is theirs."""
    sub = _named(named_class, name)
    if name == "zip_honest" or len(name) > 255:
        assert sub["status"] == "graded" and sub["score"] == SCORES["honest"], sub["error"]
    elif name == "zip_correct":
        assert sub["status"] == "graded" and sub["score"] == SCORES["correct"]
    else:
        assert sub["status"] == "error" and sub["score"] == 0, sub
        words = {
            "zip_many": ("20,001 files", "files"),
            "zip_dup": ("twice", "more than once", "duplicate"),
            "zip_fifo": ("not a regular file (a FIFO)", "FIFO"),
        }[name]
        assert any(w in sub["error"] for w in words), sub["error"]
        assert "Traceback" not in sub["error"]


def test_names_change_nothing_outside_the_output_folder(named_class: dict) -> None:
    assert named_class["changed"] == []
    assert named_class["survivors"] == []


# --- issue 9: the grader's own memory and CPU under hostile frames, a hog beside a classmate ---

PARENT_ATTACKS = {"frame_flood": "mib_decimal", "junk_flood": "mib_decimal", "cpu_hog": "mib_decimal"}
PARENT_RSS_BOUND = 256 << 20
"""Peak resident memory of the grading process under the floods (bytes): its own needs (about
50 MiB) plus a bounded share per submission in flight (grader.execution.boundary: one frame of at most
32 MiB at a time). Without that bound the floods took it past 3 GiB."""
PARENT_CPU_BOUND = 10.0
"""CPU seconds of the grading process itself (not its jobs) for the whole batch."""


def _slow_classmate() -> str:
    """correct_numpy's code, whose G14.05 functions each spin 0.6 s of CPU: slow, but within every limit."""
    return (ROOT / "submissions" / "correct_numpy" / "attention.py").read_text() + textwrap.dedent("""

        import time as _time


        def _slowly(fn):
            def wrapper(*args):
                end = _time.process_time() + 0.6
                while _time.process_time() < end:
                    pass
                return fn(*args)
            wrapper.__name__ = fn.__name__
            return wrapper


        score_array_bytes = _slowly(score_array_bytes)
        bytes_to_mib = _slowly(bytes_to_mib)
        """)


@pytest.fixture(scope="session")
def parent_load(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade the floods and the hog beside two honest classmates in a separate ``grader grade`` process.

    The process's own peak RSS (``VmHWM``) and CPU time (``utime + stime``, its threads only)
    are sampled from /proc while it runs. As a safety net for this machine, its address
    space is limited to 12 GiB.
    """
    import resource

    base = tmp_path_factory.mktemp("adv-parent")
    cls = base / "class"
    shutil.copytree(ADVERSARIAL / "_parent", cls)
    (cls / "slow_classmate").mkdir()
    (cls / "slow_classmate" / "attention.py").write_text(_slow_classmate())
    (cls / "classmate").mkdir()
    shutil.copy(SOURCES["correct"], cls / "classmate" / "attention.py")
    out = base / "out"
    before = {p["pid"] for p in _survivors()}
    snapshot = _snapshot(cls)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (12 << 30, 12 << 30))

    # the hog and the slow classmate first: they run side by side
    paths = [str(cls / n) for n in ("slow_classmate", "cpu_hog", "frame_flood", "junk_flood", "classmate")]
    start = time.monotonic()
    log = open(base / "grade.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "grader",
            "grade",
            *paths,
            "submissions/mib_decimal",
            "--out",
            str(out),
            "-q",
            "--jobs",
            "2",
            *TIMEOUTS,
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=limit,
    )
    peak, cpu = 0, 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    while proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            peak = max(peak, int(re.search(r"VmHWM:\s+(\d+) kB", status)[1]) << 10)
            cpu = (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, TypeError, IndexError):
            pass
        time.sleep(0.05)
        if time.monotonic() - start > 400:
            proc.kill()
    log.close()
    printed = (base / "grade.log").read_bytes().decode(errors="replace")
    results = _results(out)
    return {
        "code": proc.returncode,
        "seconds": time.monotonic() - start,
        "printed": printed,
        "out": out,
        "peak": peak,
        "cpu": cpu,
        "by_id": {s["id"]: s for s in results["submissions"]},
        "survivors": [p for p in _wait_no_survivors() if p["pid"] not in before],
        "changed": sorted(set(snapshot.items()) ^ set(_snapshot(cls).items()))[:10],
    }


def test_the_grader_s_memory_and_cpu_stay_bounded(parent_load: dict) -> None:
    assert parent_load["code"] == 0, parent_load["printed"][-3000:]
    assert parent_load["peak"] < PARENT_RSS_BOUND, f"the grader's peak RSS was {parent_load['peak'] >> 20} MiB"
    assert parent_load["cpu"] < PARENT_CPU_BOUND, f"the grader used {parent_load['cpu']:.1f} s of CPU"
    _assert_class_files(parent_load["out"], parent_load["by_id"])
    assert parent_load["survivors"] == []
    assert parent_load["changed"] == []


@pytest.mark.parametrize("name", ["classmate", "slow_classmate"])
def test_classmates_beside_a_hog_keep_full_marks(parent_load: dict, name: str) -> None:
    sub = parent_load["by_id"][name]
    assert sub["status"] == "graded", sub["error"]
    assert sub["score"] == sub["max_score"] == FULL_MARKS, [
        c for e in sub["exercises"] for c in e["checks"] if c["status"] != "passed"
    ][:3]


@pytest.mark.parametrize("name", sorted(PARENT_ATTACKS))
def test_parent_attack_gains_nothing(parent_load: dict, name: str) -> None:
    sub, honest = parent_load["by_id"][name], parent_load["by_id"][PARENT_ATTACKS[name]]
    assert sub["score"] <= honest["score"]
    assert "Traceback" not in _report_text(sub)


# --- issue 9: the sandbox cannot be switched off by blocking its plugin -----------------


@pytest.mark.parametrize("plugin", ["sandbox", "runner"])
def test_blocking_the_sandbox_is_refused(plugin: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``-p no:sandbox`` (or ``no:runner``) would grade hidden checks outside the sandbox: refused, in one line."""
    out = tmp_path / "out"
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        code = main(["grade", "submissions/mib_decimal", "--out", str(out), "-q", "-p", f"no:{plugin}", *TIMEOUTS])
    finally:
        os.chdir(old)
    _, err = capfd.readouterr()
    assert code == 2
    assert not (out / "results.json").exists()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and plugin in lines[0] and "--insecure" in lines[0], err
