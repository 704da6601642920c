"""The sandbox's filesystem layers, however cheaply each job sets them up: what a job reads and writes.

The zygote covers the standard library's site-packages with an empty mount in
its own mount namespace, so that one Landlock rule allows the standard library's
folder instead of one per entry (`grader.child.jobsetup.COVERED`). These tests
run real jobs, with the covers and, through a zygote that is told not to cover
(or to have no fixed job folder), without: each must read the standard library
and numpy, write its own folder, and read nothing else.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import numpy
import pytest
from conftest import ROOT

from grader.builtin import sandbox
from grader.builtin.sandbox import handle, slots
from grader.child import landlock
from grader.child.jobsetup import choose_job_folder
from grader.execution.servers import CHILD_ENV
from grader.models import Call

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="the sandbox needs Linux and root"),
]

STDLIB = sysconfig.get_paths()["stdlib"]
FOLDER = choose_job_folder(landlock.allowed_paths(numpy))
"""Where jobs see their folder (as the zygote chooses it)."""

SOURCE = """
import os


def _errno(fn):
    try:
        fn()
        return 0
    except OSError as exc:
        return exc.errno


def reads(paths):
    return [_errno(lambda p=p: open(p, "rb").close()) for p in paths]


def writes(paths):
    return [_errno(lambda p=p: open(p, "wb").close()) for p in paths]


def own_folder(folder):
    os.mkdir("sub")
    with open("sub/a.txt", "w") as fh:
        fh.write("abc")
    os.rename("sub/a.txt", "sub/b.txt")
    with open("sub/b.txt") as fh:
        text = fh.read()
    os.remove("sub/b.txt")
    os.rmdir("sub")
    return [float(text == "abc"), float(os.listdir(".") == ["attention.py"]), float(os.getcwd() == folder or os.getcwd().startswith(folder + "/slot"))]


def environment(names):
    here = os.getcwd()
    return [float(os.environ["HOME"] == os.environ["TMPDIR"] == here), float(sorted(os.environ) == names)]


def computes():
    import json, re
    import numpy.linalg
    return [round(float(numpy.linalg.det(numpy.eye(2) * 3)), 6), float(json.loads("[2]")[0]), float(bool(re.match("a", "a")))]
"""

DENIED = (errno.EACCES, errno.ENOENT)
"""Reading outside what a job may read: Landlock's EACCES, or ENOENT where the path is hidden (under its /tmp)."""


def _wrapper(tmp_path: Path, patch: str) -> str:
    """A zygote script that loads the real one and applies ``patch`` to its child package first."""
    script = tmp_path / "zygote_patched.py"
    script.write_text(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('zyg', {handle.ZYGOTE!r})\n"
        "zyg = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(zyg)\n"
        "control = zyg.load_child()\n"
        "jobsetup, landlock = sys.modules['_grader_child.jobsetup'], sys.modules['_grader_child.landlock']\n"
        f"{patch}\n"
        "control.main(sys.argv)\n"
    )
    return str(script)


@pytest.fixture
def outside(tmp_path: Path):
    """Files a job must not read, each readable by any uid: in the host's /tmp, a sibling job folder, the grader."""
    handle, name = tempfile.mkstemp(prefix="grader-layers-canary-", dir="/tmp")
    os.close(handle)
    host_tmp = Path(name)
    host_tmp.chmod(0o666)  # any uid may read and write it: only the sandbox stands in the way
    sibling = Path(tempfile.mkdtemp(prefix="grader-layers-sibling-"))  # beside the jobs' folders (same TMPDIR)
    sibling.chmod(0o755)
    (sibling / "attention.py").write_text("SECRET = 1\n")
    (sibling / "attention.py").chmod(0o644)
    site = Path(STDLIB) / "site-packages"
    in_site = sorted(site.iterdir())[0] if site.is_dir() and any(site.iterdir()) else site / "missing"
    paths = {
        "host_tmp": str(host_tmp),
        "sibling": str(sibling / "attention.py"),
        "grader": str(ROOT / "grader" / "__init__.py"),
        "reference": str(ROOT / "reference" / "attention.py"),
        "site_packages": str(in_site if in_site.is_file() else in_site / "__init__.py"),
        "etc": "/etc/passwd",
    }
    yield paths
    host_tmp.unlink()
    shutil.rmtree(sibling)


def _run(
    tmp_path: Path, outside: dict, monkeypatch: pytest.MonkeyPatch, patch: str = "", folder: str = ""
) -> tuple[dict, list]:
    """The probe's layers and the calls' results, from a zygote (patched by ``patch``)."""
    from grader.execution.calls import run_calls

    if patch:
        monkeypatch.setattr(handle, "ZYGOTE", _wrapper(tmp_path, patch))
    layers = sandbox.probe_layers()
    path = tmp_path / "attention.py"
    path.write_text(SOURCE)
    zygote = sandbox.Zygote()
    workdir = slots.make_workdir()
    worker = slots.Worker(zygote, (0, 1), workdir, "attention.py")
    calls = [
        Call("reads", (list(outside.values()),), 5.0),
        Call("reads", ([numpy.__file__, "/dev/null"],), 5.0),
        Call("own_folder", (folder or workdir,), 5.0),  # the fixed folder, or a job folder in workdir
        Call("writes", (["/var/tmp/grader-layers-pwned", outside["sibling"], outside["host_tmp"]],), 5.0),
        Call("computes", (), 5.0),
        Call("environment", (sorted([*CHILD_ENV, "HOME", "TMPDIR"]),), 5.0),
    ]
    try:
        out = run_calls(str(path), calls, launch=worker.launch, scratch=False)
    finally:
        worker.close()
        zygote.close()
        shutil.rmtree(workdir)
    assert [r.status for r in out.results] == ["returned"] * len(calls), out.results
    return layers, [r.value for r in out.results]


def _assert_strict(values: list, outside: dict) -> None:
    denied, allowed, own, written, computed, environment = values
    assert environment == [1.0, 1.0]  # HOME and TMPDIR are its folder, and nothing else is set
    assert all(code in DENIED for code in denied), dict(zip(outside, denied))
    assert allowed == [0, 0]  # numpy, /dev/null
    assert all(code in DENIED for code in written[:2]), written
    # where jobs see their folder at /tmp, the host's /tmp/... path names a new file in the job's own folder
    assert written[2] in DENIED or FOLDER == "/tmp"
    assert Path(outside["host_tmp"]).stat().st_size == 0
    assert own == [1.0, 1.0, 1.0]
    assert computed == [9.0, 2.0, 1.0]
    assert not os.path.exists("/var/tmp/grader-layers-pwned")
    assert Path(outside["sibling"]).read_text() == "SECRET = 1\n"


def test_with_the_standard_library_allowed_whole_a_job_reads_no_more(
    tmp_path: Path, outside: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    layers, values = _run(tmp_path, outside, monkeypatch, folder=FOLDER)
    if not numpy.__file__.startswith(STDLIB + "/"):  # a virtual environment, as the suite runs in
        assert layers["stdlib_covered"] is True
        assert layers["landlock_rules"] < 20  # one rule for the standard library, not one per entry
    _assert_strict(values, outside)
    assert all(layers[key] is True or str(layers[key]).startswith("ABI") for key, _ in sandbox.LAYERS), layers


def test_with_a_rule_per_entry_a_job_reads_the_same(
    tmp_path: Path, outside: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch = "landlock.whole_roots = lambda readonly, keep: 'not covered (the test)'"
    layers, values = _run(tmp_path, outside, monkeypatch, patch, FOLDER)
    assert layers["stdlib_covered"] == "not covered (the test)"
    assert layers["landlock_rules"] > 100
    _assert_strict(values, outside)


def test_without_a_fixed_job_folder_a_job_works_in_its_own_folder_and_reads_no_more(
    tmp_path: Path, outside: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch = "jobsetup.choose_job_folder = lambda readonly, choices=(): ''"
    # Without the fixed folder a job works in its folder under TMPDIR: one the job uids can reach
    # (a private TMPDIR, mode 0700, is refused by the preflight, with the fix; see test_sandbox.py).
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    layers, values = _run(tmp_path, outside, monkeypatch, patch)
    assert layers["job_tmpfs"] is True and layers["fixed_cwd"].startswith("every fixed folder")
    _assert_strict(values, outside)


def test_one_rule_for_a_folder_only_where_no_other_mount_shows_it(tmp_path: Path) -> None:
    """`covered_view_is_sole`, on mount tables of the kinds that would let a job around the covers."""
    root = tmp_path / "lib" / "python3.11"
    (root / "site-packages").mkdir(parents=True)
    dev = os.stat(root).st_dev
    device = f"{os.major(dev)}:{os.minor(dev)}"
    base = f"27 1 {device} / / rw,relatime - ext4 /dev/vda rw\n"
    cover = f"50 27 0:99 / {root}/site-packages ro - tmpfs tmpfs ro\n"
    covered = [str(root / "site-packages")]
    assert landlock.covered_view_is_sole(str(root), covered, base + cover) == ""
    assert landlock.covered_view_is_sole(str(root), [], base + cover) == (
        f"{root}/site-packages is mounted beneath {root}"
    )
    # a bind mount of / (or of any folder above root) elsewhere shows root, uncovered, a second time
    for shown in ("/", str(tmp_path)):
        bind = f"60 27 {device} {shown} /mnt/other\\040place rw - ext4 /dev/vda rw\n"
        assert landlock.covered_view_is_sole(str(root), covered, base + cover + bind) == (
            f"{root} is seen through 2 mounts"
        )
    # a bind mount of a folder inside root does not: a rule on root does not reach it from there
    inside = f"61 27 {device} {root}/json /mnt/json rw - ext4 /dev/vda rw\n"
    assert landlock.covered_view_is_sole(str(root), covered, base + cover + inside) == ""
    assert "no mount of" in landlock.covered_view_is_sole(str(root), covered, cover)


def test_what_is_covered_and_what_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "lib" / "python3.11"
    (root / "site-packages" / "numpy").mkdir(parents=True)
    (root / "json").mkdir()
    (root / "abc.py").write_text("")
    outside = tmp_path / "etc" / "sitecustomize.py"
    outside.parent.mkdir()
    outside.write_text("")
    (root / "sitecustomize.py").symlink_to(outside)
    monkeypatch.setattr(landlock, "stdlib_roots", lambda: [str(root)])
    readonly = [str(root / "json"), str(root / "abc.py"), str(root / "sitecustomize.py"), "/dev/urandom"]
    assert landlock.whole_roots(readonly, ["/elsewhere/numpy"]) == {str(root): [str(root / "site-packages")]}
    assert landlock.whole_roots(readonly, [str(root / "site-packages" / "numpy")]) == (
        f"{root / 'site-packages' / 'numpy'} lies under {root / 'site-packages'}"
    )
    # a link out of the folder keeps its own rule (on its target), as with a rule per entry
    assert landlock.compact_paths(readonly, [str(root)]) == sorted(
        [str(root), str(root / "sitecustomize.py"), "/dev/urandom"]
    )
    (root / "site-packages").rename(root / "real-site")
    (root / "site-packages").symlink_to(root / "real-site")
    assert landlock.whole_roots(readonly, []) == f"{root / 'site-packages'} is not a plain folder"


def _in_a_child(fn: Any) -> Any:
    """``fn()``'s JSON-able result, from a forked child of this (root) process: what it changes stays there."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            try:
                result = {"ok": fn()}
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                result = {"error": repr(exc)}
            os.write(write, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    answer = json.loads(data)
    assert "error" not in answer, answer["error"]
    return answer["ok"]


def _what_landlock_allows(cover: bool, probes: list[tuple[str, str]], folder: str) -> list:
    """As root (so that only Landlock decides): the rules a zygote makes, enforced, then each probe's outcome."""
    from grader.child import jobsetup
    from grader.child.kernel import PR_SET_NO_NEW_PRIVS, prctl

    readonly = landlock.allowed_paths(numpy)
    if cover:
        mounts, covered, paths = jobsetup.zygote_mounts(readonly, [os.path.dirname(numpy.__file__)])
        assert (mounts, covered) == (True, True)
    else:
        paths = readonly
    rules = landlock.open_rules(paths, landlock.READONLY_RIGHTS)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    landlock.landlock_restrict(rules, [folder, "/dev/null"])
    outcome: list = []
    for kind, path in probes:
        try:
            if kind == "list":
                outcome.append(sorted(os.listdir(path)))
            else:
                with open(path, "rb" if kind == "read" else "wb"):
                    pass
                outcome.append(0)
        except OSError as exc:
            outcome.append(exc.errno)
    return outcome


@pytest.mark.skipif(
    numpy.__file__.startswith(STDLIB + "/") or not (Path(STDLIB) / "site-packages").is_dir(),
    reason="the standard library's site-packages holds numpy, or there is none: it is not covered",
)
def test_landlock_alone_allows_the_standard_library_and_nothing_of_its_site_packages(tmp_path: Path) -> None:
    """Root reads everything by its permissions: only Landlock stands in the way, with and without the covers."""
    site = Path(STDLIB) / "site-packages"
    packaged = next(p for p in sorted(site.rglob("*.py")) if p.is_file())  # a file of the host's packages
    own, other = tmp_path / "own", tmp_path / "other"
    own.mkdir()
    other.mkdir()
    (other / "secret.txt").write_text("x")
    probes = [
        ("read", os.path.join(STDLIB, "json", "__init__.py")),
        ("read", numpy.__file__),
        ("write", str(own / "file.txt")),
        ("read", str(packaged)),
        ("list", str(site)),
        ("read", str(ROOT / "grader" / "__init__.py")),
        ("read", str(other / "secret.txt")),
        ("write", str(other / "new.txt")),
        ("read", "/etc/passwd"),
        ("list", "/"),
    ]
    eacces, enoent = errno.EACCES, errno.ENOENT
    covered = _in_a_child(lambda: _what_landlock_allows(True, probes, str(own)))
    assert covered == [0, 0, 0, enoent, [], eacces, eacces, eacces, eacces, eacces]
    per_entry = _in_a_child(lambda: _what_landlock_allows(False, probes, str(own)))
    assert per_entry == [0, 0, 0, eacces, eacces, eacces, eacces, eacces, eacces, eacces]
    assert not (other / "new.txt").exists()
    assert packaged.is_file()  # covered in the child's mount namespace only
