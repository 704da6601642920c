"""``grader check`` and ``grade`` end without the interpreter's teardown only when nothing can be lost (`grader.cli.launch`).

Each case runs in a fresh interpreter: the fast exit ends the process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import atexit, sys, threading, time
from grader.cli import launch
inherited = launch._open_fds()
atexit.register(lambda: print("atexit ran", flush=False))
mode = sys.argv[1]
if mode == "file":
    fh = open(sys.argv[2], "w")  # buffered text only the file object's end writes out
    fh.write("kept")
elif mode == "thread":
    threading.Thread(target=time.sleep, args=(0.5,)).start()
print("summary", end="")  # buffered: the fast exit flushes it
sys.stdout.write("\\n")
launch._exit_now(3, inherited)
print("usual exit")
sys.exit(5)
"""


def _run(*args: str, no_stdin: bool = False) -> subprocess.CompletedProcess[str]:
    close = (lambda: os.close(0)) if no_stdin else None
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=60, preexec_fn=close
    )


def test_nothing_open_ends_at_once_with_the_code_the_output_and_the_atexit_functions() -> None:
    done = _run("plain")
    assert (done.returncode, done.stdout) == (3, "summary\natexit ran\n")


def test_a_file_the_run_opened_takes_the_usual_exit_which_writes_it_out(tmp_path: Path) -> None:
    done = _run("file", str(tmp_path / "out.txt"))
    assert (done.returncode, done.stdout) == (5, "summary\nusual exit\natexit ran\n")
    assert (tmp_path / "out.txt").read_text() == "kept"


def test_another_thread_alive_takes_the_usual_exit() -> None:
    done = _run("thread")
    assert (done.returncode, done.stdout) == (5, "summary\nusual exit\natexit ran\n")


def test_a_file_the_run_opened_as_descriptor_0_takes_the_usual_exit(tmp_path: Path) -> None:
    """Started without standard input (``<&-``, a daemon's job), the run's first file is descriptor 0: not to be lost."""
    done = _run("file", str(tmp_path / "out.txt"), no_stdin=True)
    assert (done.returncode, done.stdout) == (5, "summary\nusual exit\natexit ran\n")
    assert (tmp_path / "out.txt").read_text() == "kept"


def test_a_summary_on_a_full_disk_is_one_line_and_exit_2() -> None:
    """``grader check ... > /dev/full``: the terminal plugin's OSError was an internal error (traceback, exit 4)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    from conftest import ROOT, SUBMISSIONS

    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "grader", "check", str(SUBMISSIONS / "correct_numpy")],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "grader: error: standard output: cannot write the summary (No space left on device)"
    )
    assert "Traceback" not in done.stderr
