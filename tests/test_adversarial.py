"""Adversarial suite: hostile submissions graded by the real ``grader grade``, in the sandbox.

Every folder ``tests/adversarial/<attack>/`` holds an otherwise plausible
``attention.py`` (a copy of the honest but wrong ``submissions/mib_decimal``)
plus one attack, described in its docstring: reading the reference or the
hidden specs, importing the grader, escaping through /proc, inherited file
descriptors or raw system calls, writing fake reports, the network, fork and
memory bombs, hangs, huge output, killing processes, daemons, exits,
BaseExceptions, monkeypatching, lying return values, forged result frames,
planted ``sitecustomize.py``/``conftest.py``/``.pth`` files. The attacks that
cheat would score full marks if they worked.

All of them are graded in one run (fixture ``attacked``), from a temporary
copy in which the repository path they aim at (``/work/main``) is replaced by
this checkout's, together with the honest baselines ``mib_decimal`` and
``starter``. Each test asserts that the
attack earns no more than its honest baseline and that the report names the
problem in a student's words; the session tests assert that grading
finished, that nothing outside the output folder changed, that no network
helper was reached and that no process survived.

A second run (fixture ``odd_class``) grades a class folder built at test
time: symbolic links out of the submission, non-UTF-8 and oversized source
files, and a zip archive with path traversal, absolute paths, a symbolic
link and a zip bomb.

Attacks that would harm this machine if they ran outside the sandbox refuse
to (they check that they are not root and are pid 1 of their namespace), and
the suite first checks, with a probe submission, that ``grader grade`` really
runs submissions in the sandbox.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.cli import main

ROOT = Path(__file__).resolve().parent.parent
ADVERSARIAL = ROOT / "tests" / "adversarial"
REPO_IN_ATTACKS = "/work/main"
"""The repository's path as the attacks spell it; replaced by this checkout's path when graded."""
HONEST = ROOT / "submissions" / "mib_decimal" / "attention.py"
UIDS = range(61000, 61064)
"""uids of the sandbox's worker slots (grader.zygote.UID_BASE + slot)."""
PORT = 47914
UNIX_SOCKET = Path(f"/tmp/grader-adversarial-{PORT}.sock")
ABSTRACT_SOCKET = f"\0grader-adversarial-{PORT}"
CANARY = Path("/tmp/grader-adversarial-canary")
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
    """

    phrases: tuple = ()
    baseline: str = "mib_decimal"
    same: bool = True
    in_page: bool = False


HONEST_WRONG = "mib differs from the expected value"
CPU_TIME_OUT = "bytes_to_mib did not finish: the call used more than 2 s of CPU time"
WALL_TIME_OUT = "bytes_to_mib did not finish: the call took longer than 8 s of wall-clock time"
TIMED_OUT = (CPU_TIME_OUT, WALL_TIME_OUT)

ATTACKS = {
    # reading secrets: the reference, the specs, the grader, /proc, fds, memory, classmates
    "read_reference": Attack((f"Permission denied: '{ROOT}/reference/attention.py'", SANDBOX)),
    "read_specs": Attack((f"Permission denied: '{ROOT}/exercises/g14/G14.05.yaml'", SANDBOX)),
    "import_grader": Attack(((SANDBOX, "only numpy and the standard library"),)),
    "proc_and_environ": Attack((SANDBOX,)),
    "inherited_fds": Attack(("no inherited file descriptor leads to a secret; open: 0 1 2 3",)),
    "proc_mem": Attack(("ptrace: Operation not permitted", SANDBOX)),
    "read_classmate": Attack((SANDBOX,)),
    # writing outside the job folder
    "write_outside": Attack(("Permission denied", SANDBOX)),
    "fake_report": Attack(("Permission denied", SANDBOX)),
    # network
    "network_tcp": Attack(("no network:",)),
    "network_udp": Attack(("no network:",)),
    "network_unix": Attack(("Operation not permitted", SANDBOX)),
    # resources; hangs are in bytes_to_mib(1 MiB) only, a check mib_decimal fails anyway
    "fork_bomb": Attack((TIMED_OUT,), same=False),
    "memory_bomb": Attack(("bytes_to_mib raised MemoryError", "more memory than the grader allows",
                           ("used up its CPU time or memory", *TIMED_OUT)), same=False),
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
    "os_exit_at_import": Attack(("importing the file failed: the process exited with code 0 before answering",),
                                baseline="starter"),
    "sys_exit_at_import": Attack(("importing the file failed with SystemExit",), baseline="starter"),
    "os_exit_in_call": Attack(("bytes_to_mib crashed: the process exited with code 0 before answering",)),
    "sys_exit_in_call": Attack(("bytes_to_mib raised SystemExit on valid input",)),
    "base_exception": Attack(("raised Escape on valid input", "raised KeyboardInterrupt", "raised GeneratorExit")),
    # monkeypatching and lying
    "monkeypatch": Attack((HONEST_WRONG,)),
    "patch_worker": Attack((HONEST_WRONG,)),
    "forged_frames": Attack(("returned something the grader cannot read: the result holds a dict",), same=False),
    "deep_json_frame": Attack(("bytes_to_mib crashed: the grader could not read its answer",)),
    # Hidden checks do not name a class of the submission's own (its name could carry the inputs).
    "lying_eq": Attack(("returned something the grader cannot read: the result holds an object of a class of its own",
                        HONEST_WRONG)),
    "lying_array": Attack((("returned something the grader cannot read: the result holds an object of a class of "
                            "its own"), HONEST_WRONG)),
    "object_array": Attack(("numpy array of dtype object", "dtype complex128", "dtype <U5")),
    "generator": Attack(("the result holds a generator", "the result holds a map", "nested too deeply")),
    # the sandbox itself
    "ctypes_escape": Attack(("Operation not permitted", SANDBOX)),
    "planted_files": Attack((HONEST_WRONG,)),
}


# --- helpers -------------------------------------------------------------------------


def _grade(paths: list[str], out: Path) -> tuple[int, float]:
    old = os.getcwd()
    os.chdir(ROOT)
    start = time.monotonic()
    try:
        code = main(["grade", *paths, "--out", str(out), "-q", *TIMEOUTS])
    finally:
        os.chdir(old)
    return code, time.monotonic() - start


def _processes() -> list[dict]:
    """Every process: pid, ppid, uid, comm, cmdline."""
    procs = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        procs.append({"pid": int(entry), "ppid": int(fields.get("PPid", "0")), "uid": int(fields["Uid"].split()[0]),
                      "name": fields.get("Name", "").strip(), "cmdline": cmdline, "state": fields.get("State", "")})
    return procs


def _survivors() -> list[dict]:
    """Sandbox-uid or daemon-named processes without a live zygote above them.

    Jobs of other grading runs on this machine (another test session) have
    their zygote as an ancestor and are not ours; anything that escaped its
    job has lost it.
    """
    procs = {p["pid"]: p for p in _processes()}

    def under_zygote(p: dict) -> bool:
        seen = set()
        while p and p["pid"] not in seen:
            seen.add(p["pid"])
            if "zygote.py" in p["cmdline"]:
                return True
            p = procs.get(p["ppid"])
        return False

    return [p for p in procs.values()
            if (p["uid"] in UIDS or "advdaemon" in p["name"] + p["cmdline"]) and not under_zygote(p)]


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
    if layers.get("zygote") is not True or not all(layers.get(k) is True for k in wanted) \
            or not str(layers.get("landlock", "")).startswith("ABI"):
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
        pytest.fail(f"'grader grade' does not run submissions in the sandbox ({error!r}): the adversarial "
                    "suite refuses to run hostile code outside it")


# --- the graded attacks ------------------------------------------------------------


@pytest.fixture(scope="session")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade every attack and the honest baselines in one run; watch what changes around it."""
    _require_sandbox(tmp_path_factory.mktemp("adv-probe"))
    out = tmp_path_factory.mktemp("adv-reports")  # adv-reports0: the fake_report attack aims at it
    canary = f"canary {os.getpid()} {time.time()}\n"
    CANARY.write_text(canary)
    os.chmod(CANARY, 0o666)  # writable by anyone: only the sandbox stands in the way
    reference = (ROOT / "reference" / "attention.py").read_bytes()
    attacks = tmp_path_factory.mktemp("adv-class") / "adversarial"
    shutil.copytree(ADVERSARIAL, attacks)
    for file in attacks.glob("*/attention.py"):  # aim at this checkout of the repository
        file.write_text(file.read_text().replace(REPO_IN_ATTACKS, str(ROOT)))
    helpers = _Helpers()
    before = {p["pid"] for p in _survivors()}
    start = time.time() - 1
    try:
        code, seconds = _grade([str(attacks), "submissions/mib_decimal", "submissions/starter"], out)
    finally:
        helpers.close()
    results = json.loads((out / "results.json").read_text())
    state = {
        "code": code,
        "seconds": seconds,
        "out": out,
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


def _report_text(sub: dict) -> str:
    parts = [sub["error"]] + [c["message"] for e in sub["exercises"] for c in e["checks"]]
    return "\n".join(parts)


def _scores(sub: dict) -> dict[str, float]:
    return {e["id"]: e["score"] for e in sub["exercises"]}


def test_every_attack_has_a_folder_and_an_expectation() -> None:
    folders = {p.name for p in ADVERSARIAL.iterdir() if (p / "attention.py").is_file()}
    assert folders == set(ATTACKS)
    assert len(ATTACKS) >= 25


def test_grading_finishes_in_time(attacked: dict) -> None:
    assert attacked["code"] == 0
    assert set(attacked["by_id"]) == set(ATTACKS) | {"mib_decimal", "starter"}
    assert attacked["seconds"] < 120, f"grading the attacks took {attacked['seconds']:.0f} s"


def test_the_baselines_are_graded_as_usual(attacked: dict) -> None:
    honest, starter = attacked["by_id"]["mib_decimal"], attacked["by_id"]["starter"]
    assert honest["status"] == "graded" and 0 < honest["score"] < honest["max_score"]
    assert starter["status"] == "graded" and starter["score"] == 0


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_gains_nothing(attacked: dict, name: str) -> None:
    attack = ATTACKS[name]
    sub, honest = attacked["by_id"][name], attacked["by_id"][attack.baseline]
    assert sub["score"] <= honest["score"], f"{name} scored {sub['score']}, honest {attack.baseline} {honest['score']}"
    if attack.same:
        assert _scores(sub) == _scores(honest)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_report_names_the_problem(attacked: dict, name: str) -> None:
    attack = ATTACKS[name]
    sub = attacked["by_id"][name]
    if attack.in_page:
        text = (attacked["out"] / f"{name}.html").read_text()
    else:
        text = _report_text(sub)
    for phrase in attack.phrases:
        options = phrase if isinstance(phrase, tuple) else (phrase,)
        assert any(o in text for o in options), f"{name}: none of {options} in the report:\n{text[:3000]}"
    page = (attacked["out"] / f"{name}.html").read_text()
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
        page = (attacked["out"] / f"{name}.html").read_text()
        assert tag not in page
        assert len(page) < 200_000


@pytest.mark.parametrize("name", ["deep_json_frame", "forged_frames"])
def test_student_check_survives_forged_frames(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``grader check`` (no sandbox: the student's own machine) reads the same frames."""
    code = main(["check", str(ADVERSARIAL / name / "attention.py"), *TIMEOUTS])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "Traceback" not in out + err


def test_attack_reports_render_in_chromium(attacked: dict, tmp_path: Path) -> None:
    """Headless Chromium shows each attack's problem in words, as a student would read it.

    Every attack's page is rendered (two Chromium processes at a time); the
    rendered text must hold one of the attack's phrases.
    """
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: run 'apt-get install -y chromium' (.ci/run does)")

    def render(name: str) -> str:
        with tempfile.TemporaryDirectory(dir=tmp_path) as profile:
            proc = subprocess.run(
                [
                    chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                    "--dump-dom", (attacked["out"] / f"{name}.html").as_uri(),
                ],
                capture_output=True, text=True, timeout=120,
            )
        return html.unescape(proc.stdout)

    with ThreadPoolExecutor(2) as pool:
        doms = dict(zip(sorted(ATTACKS), pool.map(render, sorted(ATTACKS))))
    missing = []
    for name, attack in ATTACKS.items():
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
        link.external_attr = (0o120777 << 16)  # a symbolic link to the reference
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
    from grader.builtin.submission import MAX_SOURCE_BYTES

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
    "non_utf8": ("error", ("importing the file failed with SyntaxError (attention.py, line 1)",
                           "save the file as UTF-8"), False),
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
