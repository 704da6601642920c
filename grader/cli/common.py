"""What the commands share: printing a summary line, and finishing a grading run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from grader.config.core import Config
from grader.errors import EXIT_CHECKS_FAILED, EXIT_INTERNAL, EXIT_OK, UsageError
from grader.fileio import check_out_dir
from grader.grading.session import INTERNAL_ERRORS
from grader.models import GradingReport
from grader.safetext import display

__all__ = ["finish", "prepare_out", "write"]


def write(line: str) -> None:
    """Print one line of the summary; once the reader has gone (``grader ... | head``), print no more."""
    if sys.stdout is None or getattr(write, "closed", False):
        return
    try:
        print(line, flush=True)
    except OSError as exc:  # the reader gone, or a full disk (``> /dev/full``)
        write.closed = True  # type: ignore[attr-defined]
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that flushing at exit fails no more
        os.close(devnull)
        if not isinstance(exc, BrokenPipeError):
            raise UsageError(f"standard output: cannot write the summary ({exc.strerror})") from None


def prepare_out(config: Config) -> None:
    """Refuse an unusable ``--out`` or ``--json`` now; the folder itself is made when grading starts."""
    out = config.out_dir
    if out is None:
        return
    check_out_dir(out)
    json_path = config.option("json")
    if json_path and Path(json_path).is_dir():
        raise UsageError(f"--json {json_path}: is a folder; give a file name")


def finish(config: Config, report: GradingReport, checks_decide: bool = False) -> int:
    """Print the terminal summary and return the run's exit code.

    Parameters
    ----------
    config : grader.config.core.Config
    report : grader.models.GradingReport
    checks_decide : bool
        ``check``: exit 1 unless every check passed.

    Returns
    -------
    int
        4 when the grader failed on a submission (its tracebacks were printed; every other result
        and class file was written) or a summary plugin failed (named on standard error, the
        others' lines printed), else 0, or 1 for ``check`` with a check not passed.
    """
    summary_faults = config.hooks.terminal_summary(report=report, config=config, write=write)
    faults = config.stash.get(INTERNAL_ERRORS, [])
    if faults:
        shown = ", ".join(f"{display(repr(sub_id))} ({fault})" for sub_id, fault in faults[:5])
        more = f" and {len(faults) - 5} more" if len(faults) > 5 else ""
        print(
            f"grader: internal error on {len(faults)} submission(s): {shown}{more}; they are graded 'error', every "
            f"other result and every class file was written (the tracebacks are above)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    if summary_faults:  # each named above, in one line with its plugin and id
        return EXIT_INTERNAL
    if checks_decide:
        passed = all(c.status == "passed" for s in report.submissions for e in s.exercises for c in e.checks)
        return EXIT_OK if passed and all(s.status == "graded" for s in report.submissions) else EXIT_CHECKS_FAILED
    return EXIT_OK
