"""The ``grader`` command's entry point: what ``grader check`` needs first, then the command line.

``grader check`` forks the student's job from a warm fork server (`grader.execution.jobs.ForkServer`).
Started here, before the grader imports anything else (`grader.execution.servers` uses the standard library
only, and the ``grader`` package imports its API lazily), the server imports numpy on another
core while the grader loads its plugins, its pack and its checks (issue 16). Everything else is
`grader.cli.main`. For ``grader grade``, the sandbox's zygote is exec'd here too
(`grader.execution.servers.grade_zygote`): it gets ready while the grader starts.

The cyclic garbage collector is paused while the grader imports its modules, plugins and pack:
those imports create a few hundred thousand objects and no garbage worth the collector's passes
(about 12 ms of ``grader check``'s 200). `grader.cli.main` freezes what start-up made (`gc.freeze`:
later passes skip it) and resumes collecting before any submission is graded.
"""

from __future__ import annotations

import gc
import sys

__all__ = ["console_main"]


def console_main() -> None:
    """Entry point of the ``grader`` script (and of ``python -m grader``)."""
    gc.disable()  # resumed by grader.cli.main before grading (the module docstring says why)
    argv = sys.argv[1:]
    from grader.errors import Interrupted, catch_interrupts, deferred_interrupts

    catch_interrupts()  # a Ctrl-C is the user's wherever it lands (grader.errors.Interrupted)
    try:
        from grader.execution.servers import check_fork_server, grade_zygote

        inherited = _open_fds()
        started = check_fork_server(argv)
        zygote = grade_zygote(argv) if started is None else None
        from grader.readers import keptcode

        keptcode.install()  # the grader's dataclasses made from kept code, not compiled again (the module says why)
        from grader.cli.app import main
    except KeyboardInterrupt as exc:  # as main says it, with the server's socket closed as the process ends
        stop = exc if isinstance(exc, Interrupted) else Interrupted()
        stop.say(sys.stderr)
        sys.exit(stop.exit_code)
    code = main(argv, fork_server=started, zygote=zygote, gc_paused=True)
    with deferred_interrupts():  # a cache file written whole or not at all
        keptcode.save()
    _end_at_ctrl_c(code)
    if argv[:1] in (["check"], ["grade"]):
        _exit_now(code, inherited)
    sys.exit(code)


def _end_at_ctrl_c(code: int) -> None:
    """From now on a Ctrl-C ends the process at once with ``code``: the run is over, its files written.

    What is left (the interpreter's exit, joining the threads that ended) has nothing to report;
    a KeyboardInterrupt raised in it printed a traceback ("Exception ignored in: <module
    'threading'>") after the run's own last line.
    """
    import os
    import signal

    def end(signum: int, frame: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:  # noqa: BLE001, S112 - a stream that cannot be flushed now: the exit goes on
                continue
        os._exit(code)

    from grader.errors import STOPPING_SIGNALS

    for signum in STOPPING_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, end)


def _open_fds() -> dict[int, tuple[int, int]] | None:
    """The descriptors open in this process, with what each is (device, inode); None where that cannot be told."""
    import os

    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    found = {}
    for name in names:
        try:
            info = os.fstat(int(name))  # the listing's own descriptor is closed by now
        except OSError:
            continue
        found[int(name)] = (info.st_dev, info.st_ino)
    return found


def _exit_now(code: int, inherited: dict[int, tuple[int, int]] | None) -> None:
    """End ``grader check`` or ``grade`` at once, without the interpreter's teardown; return if that is not safe.

    Tearing the interpreter down (every module's objects freed one by one, numpy's and a class's
    results too) took longer than ``check``'s calls (about 10 ms), and 50-80 ms at the end of a
    ``grade`` of 300 with one core idle. Neither has anything left to do by then: the servers are
    stopped, the files written and closed. With no other thread alive and no descriptor open but
    the standard streams' and those the process started with (``inherited``: a file still open
    may hold buffered text only its object's end writes out, a socket or a database a peer to
    tell; a file the run opened may have the number of a standard stream the process started without), this flushes the standard streams, runs the `atexit` functions, and ends the process
    with ``code``; otherwise, or with a stream that cannot be flushed (its error is the usual
    exit's to report), it returns and the usual exit follows.
    """
    import atexit
    import os
    import threading

    now = _open_fds()
    if threading.active_count() != 1 or inherited is None or now is None:
        return
    if any(inherited.get(fd) != what for fd, what in now.items()):
        return  # a descriptor this run opened (or another file under an inherited number), 0 to 2 too: a run started without them opens its first files there
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # noqa: BLE001 - the usual exit reports it (and exits 120)
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()  # what an atexit function printed
        except Exception:  # noqa: BLE001, S112 - nothing more can be said on a stream that fails
            continue
    os._exit(code)
