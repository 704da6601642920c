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
    from grader.execution.servers import check_fork_server, grade_zygote

    argv = sys.argv[1:]
    started = check_fork_server(argv)
    zygote = grade_zygote(argv) if started is None else None
    try:
        from grader.readers import keptcode

        keptcode.install()  # the grader's dataclasses made from kept code, not compiled again (the module says why)
        from grader.cli.app import main
    except KeyboardInterrupt:  # as main says it, with the server's socket closed as the process ends
        print("grader: interrupted", file=sys.stderr)
        sys.exit(130)
    code = main(argv, fork_server=started, zygote=zygote, gc_paused=True)
    keptcode.save()
    if argv[:1] == ["check"]:
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> None:
    """End ``grader check`` at once, without the interpreter's teardown; return if that is not safe.

    Tearing the interpreter down (every module's objects freed one by one, numpy's too) took longer
    than the job's calls (about 10 ms). ``check`` has nothing left to do by then: its fork server is
    stopped, its files written and closed. With no other thread alive, this flushes the standard
    streams, runs the `atexit` functions, and ends the process with ``code``; with another
    thread, or a stream that cannot be flushed (its error is the usual exit's to report), it
    returns and the usual exit follows.
    """
    import atexit
    import os
    import threading

    if threading.active_count() != 1:
        return
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
