"""A Ctrl-C (SIGINT) is the user's wherever it lands: "grader: interrupted", exit 130, nothing left behind.

Each test runs the ``grader`` command, waits until it is in the step named (a marker file written
by code of the test's own that then sleeps), sends one SIGINT, and reads what the command said.
Found by sweeping the time of one or two SIGINTs across ``grader check`` and ``grader grade``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import load_stretch

REPO = Path(__file__).resolve().parents[2]
SLEEPER = "import pathlib, time\npathlib.Path({marker!r}).write_text('in')\ntime.sleep(30)\n"


def _interrupted(
    argv: list[str], marker: Path, tmp: Path, env: dict[str, str] | None = None, signum: int = signal.SIGINT
) -> tuple[int, str]:
    """Run ``grader ARGV``, send SIGINT (or ``signum``) once ``marker`` exists; the exit code and stderr."""
    scratch = tmp / "scratch"
    scratch.mkdir(mode=0o755)
    env = {
        **os.environ,
        **(env or {}),
        "TMPDIR": str(scratch),
        "GRADER_COURSE_SECRET": "ctrl-c-test-secret-0123456789abcdef",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60 * load_stretch()
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), proc.stderr.read() if proc.poll() is not None else "never reached the step"
        proc.send_signal(signum)
        sent = time.monotonic()
        code = proc.wait(timeout=30 * load_stretch())
        took = time.monotonic() - sent
    finally:
        proc.kill()
        proc.wait()
    said = proc.stderr.read()
    assert took < 5 * load_stretch(), f"{took:.1f} s from the Ctrl-C to the exit"
    assert list(scratch.iterdir()) == []  # the sandbox's folder and every job's removed
    return code, said


def _grade_stopped_in_plugin(
    tmp: Path, name: str, source: str, *extra: str, signum: int = signal.SIGINT
) -> tuple[int, str, Path]:
    """`_interrupted` on ``grader grade`` of one sample with the plugin ``name`` (``source``, formatted with
    ``marker``: it writes the marker as it reaches its step); the exit code, stderr and ``--out``."""
    marker, site, out = tmp / "marker", tmp / "site", tmp / "out"
    site.mkdir()
    (site / f"{name}.py").write_text(source.format(marker=str(marker)))
    argv = ["grade", str(REPO / "submissions" / "correct_numpy"), "--out", str(out), *extra, "-p", name]
    code, said = _interrupted(argv, marker, tmp, {"PYTHONPATH": str(site)}, signum)
    return code, said, out


def test_a_ctrl_c_in_the_reference_s_import_stops_the_run_and_blames_no_reference(tmp_path: Path) -> None:
    # Seen at 0.46 s into 'grader check': "reference/attention.py: the reference failed to import at
    # grader/builtin/reference.py, line 48: KeyboardInterrupt; fix the reference", exit 3.
    marker = tmp_path / "importing"
    reference = tmp_path / "attention.py"
    reference.write_text((REPO / "reference" / "attention.py").read_text() + SLEEPER.format(marker=str(marker)))
    code, said = _interrupted(["validate", "--reference", str(reference)], marker, tmp_path)
    assert (code, said) == (130, "grader: interrupted\n")


def test_a_reference_raising_keyboardinterrupt_itself_is_still_the_reference_s_error(tmp_path: Path) -> None:
    reference = tmp_path / "attention.py"
    reference.write_text("raise KeyboardInterrupt\n")
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "validate", "--reference", str(reference)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3
    assert proc.stderr == (
        f"grader: error: {reference}: the reference failed to import at {reference}, line 1: KeyboardInterrupt; "
        "fix the reference (grader validate checks it)\n"
    )


def _plugin_dist(site: Path, module: str, text: str) -> None:
    """A module ``module`` in ``site``, installed there as a plugin of the entry-point group ``grader``."""
    (site / f"{module}.py").write_text(text)
    info = site / f"{module}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[grader]\n{module} = {module}\n")


@pytest.mark.parametrize("how", ["entry point", "-p"])
def test_a_ctrl_c_in_a_plugin_s_import_stops_the_run_and_blames_no_plugin(tmp_path: Path, how: str) -> None:
    # Seen at 0.50 s into 'grader check': "a plugin of entry-point group 'grader' failed to load at
    # grader/readers/entrypoints.py, line 166: KeyboardInterrupt; fix or uninstall it", exit 3.
    marker = tmp_path / "importing"
    site = tmp_path / "site"
    site.mkdir()
    env = {"PYTHONPATH": str(site), "GRADER_CACHE_DIR": str(tmp_path / "cache")}
    if how == "entry point":
        _plugin_dist(site, "ctrl_c_plugin", SLEEPER.format(marker=str(marker)))
        argv = ["doctor"]
    else:
        (site / "ctrl_c_plugin.py").write_text(SLEEPER.format(marker=str(marker)))
        argv = ["doctor", "-p", "ctrl_c_plugin"]
    code, said = _interrupted(argv, marker, tmp_path, env)
    assert (code, said) == (130, "grader: interrupted\n")


CLEAN_UP_PLUGIN = """\
import pathlib, time
import grader

@grader.hookimpl
def grader_unconfigure(config):
    pathlib.Path({marker!r}).write_text("in")
    time.sleep(2.0)
    pathlib.Path({marker!r} + ".done").write_text("done")
"""


def test_a_ctrl_c_during_the_clean_up_waits_for_its_end(tmp_path: Path) -> None:
    # A second Ctrl-C (or a first one just as grade ends) landing in the unconfigure hooks stopped the
    # clean-up halfway: a KeyboardInterrupt traceback, exit -2, the sandbox's folder left in $TMPDIR
    # (6 of 20 runs with two SIGINTs 0.1 s apart, one of them 13 s from the Ctrl-C to the exit).
    code, said, _ = _grade_stopped_in_plugin(tmp_path, "slow_clean_up", CLEAN_UP_PLUGIN, "-q")
    assert (code, said.splitlines()[-1]) == (130, "grader: interrupted")
    assert "Traceback" not in said
    assert (tmp_path / "marker.done").exists()  # the hook ran to its end, and the sandbox's after it


EXIT_PLUGIN = """\
import atexit, pathlib, time
import grader

def _slow():
    pathlib.Path({marker!r}).write_text("in")
    time.sleep(30)

@grader.hookimpl
def grader_configure(config):
    atexit.register(_slow)
"""


def test_a_ctrl_c_after_the_run_ends_the_process_at_once_with_the_run_s_code(tmp_path: Path) -> None:
    # Once the run is over (its files written, its servers stopped), a KeyboardInterrupt raised in the
    # interpreter's exit printed "Exception ignored in: <module 'threading'>" and a traceback after it.
    code, said, out = _grade_stopped_in_plugin(tmp_path, "slow_exit", EXIT_PLUGIN, "-q")
    assert (code, said) == (0, "")
    assert (out / "results.json").exists()
    shutil.rmtree(out)


@pytest.mark.sandbox
def test_a_ctrl_c_while_doctor_stops_its_zygote_still_removes_the_sandbox_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 'grader doctor' interrupted 0.54 s in: the zygote's stop (up to 5 s of waiting for it) took the
    # KeyboardInterrupt, and the removal of the sandbox's folder after it never ran (1 run in ~50 here).
    import grader.builtin.sandbox as sandbox
    from grader.builtin.sandbox.handle import Zygote

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    real_close = Zygote.close

    def interrupted_close(self: Zygote) -> None:
        real_close(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(Zygote, "close", interrupted_close)
    with pytest.raises(KeyboardInterrupt):
        sandbox.probe_layers()
    assert list(tmp_path.iterdir()) == []


READY_PLUGIN = """\
import os, pathlib, time
import grader

@grader.hookimpl(trylast=True)
def grader_grading_ready(config):
    pathlib.Path({marker!r}).write_text(" ".join(os.listdir(os.environ["TMPDIR"])))
    time.sleep(30)
"""


@pytest.mark.sandbox
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_sigterm_stops_grade_as_a_ctrl_c_does(tmp_path: Path, signum: int) -> None:
    # SIGTERM (kill, timeout, a cancelled CI job, a stopped container) ended the grader at once, exit -15:
    # the sandbox's folder stayed in TMPDIR until the next run on that machine (in every run of a sweep
    # with the signal 1-3 s into grade).
    code, said, _ = _grade_stopped_in_plugin(tmp_path, "slow_ready", READY_PLUGIN, signum=signum)
    assert "grader-sandbox-" in (tmp_path / "marker").read_text()  # the sandbox was up when the signal came
    if signum == signal.SIGTERM:
        assert (code, said) == (143, "grader: terminated\n")
    elif signum == signal.SIGHUP:  # a terminal closed: it ended at once too, the folder left
        assert (code, said) == (129, "grader: hung up (its terminal closed)\n")
    else:
        assert (code, said) == (130, "grader: interrupted\n")
    assert not (tmp_path / "out").exists()  # stopped before grading began: no output folder


SWALLOWING_PLUGIN = """\
import pathlib, time
import grader

@grader.hookimpl
def grader_configure(config):
    pathlib.Path({marker!r}).write_text("in")
    try:
        time.sleep(30)
    except KeyboardInterrupt:  # as numpy's import does, stopped in its C extension
        raise ImportError('PyCapsule_Import could not import module "datetime"') from None
"""


def test_an_error_a_ctrl_c_turned_into_is_the_interrupt_not_an_internal_error(tmp_path: Path) -> None:
    # Two Ctrl-Cs 0.2 s apart, 0.23 s into 'grader check' under load: the first landed in numpy's import,
    # which raised ImportError ("PyCapsule_Import could not import module 'datetime'"), and the command
    # said "grader: internal error: this is a bug", exit 4.
    marker = tmp_path / "configuring"
    site = tmp_path / "site"
    site.mkdir()
    (site / "swallowing.py").write_text(SWALLOWING_PLUGIN.format(marker=str(marker)))
    code, said = _interrupted(["doctor", "-p", "swallowing"], marker, tmp_path, {"PYTHONPATH": str(site)})
    assert (code, said) == (130, "grader: interrupted\n")


def test_on_a_terminal_the_stop_s_line_follows_the_echoed_ctrl_c_on_a_line_of_its_own() -> None:
    """'...submission/s]^Cgrader: interrupted' at the end of the progress bar: on a terminal a newline comes first."""
    import io
    import signal

    from grader.errors import Interrupted

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal, log = Terminal(), io.StringIO()
    Interrupted().say(terminal)
    Interrupted(signal.SIGTERM).say(log)
    assert terminal.getvalue() == "\ngrader: interrupted\n"
    assert log.getvalue() == "grader: terminated\n"
