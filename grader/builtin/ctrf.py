"""Built-in plugin: a CTRF report (``DIR/ctrf.json`` or ``--ctrf FILE``).

CTRF, the Common Test Report Format (https://github.com/ctrf-io/ctrf,
``schema/ctrf.schema.json``), is read by CI reporters (``github-actions-ctrf``
renders it in job summaries and pull requests). ``grader grade`` writes
``DIR/ctrf.json``; any command that grades (``grader check`` in a student's CI
too) writes ``--ctrf FILE``.

One test per check of every submission: ``name`` ``"<submission> <exercise>
<check>"``, ``suite`` ``[submission, exercise]``, ``status`` CTRF's word
(``passed``, ``failed``; ``error`` and ``timeout`` -> ``other`` with
``rawStatus``; ``not_attempted`` -> ``skipped``), ``duration`` the integer
milliseconds the check's calls took, ``message`` the feedback a student may
read (`grader.reporting.feedback.check_feedback`: a hidden check never carries inputs
or expected values), and ``extra`` the points, the visibility and the ids.
Student text goes through `grader.safetext.display` (no escape sequences,
no control characters) and lone surrogates become U+FFFD, so the file is
valid UTF-8 JSON. ``summary.start``/``stop`` are milliseconds since the
epoch: ``stop`` when the report was made (``SOURCE_DATE_EPOCH`` fixes it),
``start`` that less the checks' time.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from grader._version import __version__
from grader.errors import UsageError
from grader.execution.keys import check_seconds
from grader.fileio import output_file, write_atomic
from grader.markers import hookimpl
from grader.models import GradingReport
from grader.reporting.feedback import check_feedback
from grader.safetext import display, unicode_safe

__all__ = ["STATUS", "ctrf_report"]

FILENAME = "ctrf.json"
SPEC_VERSION = "1.0.0"
"""The CTRF specification version written (``specVersion``, SemVer)."""

STATUS = {
    "passed": "passed",
    "failed": "failed",
    "error": "other",
    "timeout": "other",
    "not_attempted": "skipped",
}
"""Our check status -> CTRF's ``status`` (an unknown one is ``other``)."""


def _text(text: str, newlines: bool = False) -> str:
    return unicode_safe(display(text, newlines=newlines))


def ctrf_report(report: GradingReport, seconds: Any = None, now_ms: int | None = None) -> dict[str, Any]:
    """The CTRF document of a session, as plain data.

    Parameters
    ----------
    report : grader.models.GradingReport
    seconds : callable, optional
        Per submission id, the seconds of each (exercise id, check id), as
        `grader.stash.check_seconds` gives; missing ones are 0.
    now_ms : int, optional
        ``summary.stop``, milliseconds since the epoch (default: now, or
        ``SOURCE_DATE_EPOCH``).

    Returns
    -------
    dict
        Ready for ``json.dumps``; valid against CTRF's ``ctrf.schema.json``.
    """
    if now_ms is None:
        epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
        now_ms = int(epoch) * 1000 if epoch.isdigit() else int(time.time() * 1000)
    tests: list[dict[str, Any]] = []
    counts = dict.fromkeys(("passed", "failed", "skipped", "pending", "other"), 0)
    total_ms = 0
    for sub in report.submissions:
        times = seconds(sub.id) if seconds is not None else {}
        for ex in sub.exercises:
            for c in ex.checks:
                status = STATUS.get(c.status, "other")
                counts[status] += 1
                duration = int(round(times.get((ex.id, c.id), 0.0) * 1000))
                total_ms += duration
                test: dict[str, Any] = {
                    "name": _text(f"{sub.id} {ex.id} {c.id}"),
                    "status": status,
                    "duration": duration,
                    "suite": [_text(sub.id), _text(ex.id)],
                }
                if status != c.status:
                    test["rawStatus"] = c.status
                message = check_feedback(c)
                if message:
                    test["message"] = _text(message, newlines=True)
                test["extra"] = {
                    "submission": _text(sub.id),
                    "exercise": ex.id,
                    "check": c.id,
                    "points": c.score,
                    "max_points": c.max_score,
                    "visibility": c.visibility,
                }
                tests.append(test)
    return {
        "reportFormat": "CTRF",
        "specVersion": SPEC_VERSION,
        "generatedBy": "grader",
        "results": {
            "tool": {"name": "grader", "version": __version__},
            "summary": {
                "tests": len(tests),
                **counts,
                "suites": len(report.submissions),
                "start": now_ms - total_ms,
                "stop": now_ms,
                "duration": total_ms,
            },
            "tests": tests,
            "extra": {
                "grader_version": report.grader_version,
                "spec_hash": report.spec_hash,
                "submissions": [
                    {"id": _text(s.id), "score": s.score, "max_score": s.max_score, "status": s.status}
                    for s in report.submissions
                ],
            },
        },
    }


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity", "check", "merge"):
        return
    parser.add_argument(
        "--ctrf",
        metavar="FILE",
        type=output_file,
        help=f"write a CTRF JSON report here, for CI (any command; default for grade: DIR/{FILENAME})",
    )


@hookimpl
def grader_write_reports(report: GradingReport, config: Any) -> None:
    """Write ``--ctrf FILE``, or ``DIR/ctrf.json`` when the command writes files."""
    out = config.out_dir
    target = config.option("ctrf") or (out / FILENAME if out else None)
    if target is None:
        return
    data = ctrf_report(report, lambda sub_id: check_seconds(config.stash, sub_id))
    try:
        write_atomic(Path(target), json.dumps(data, allow_nan=False, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise UsageError(f"--ctrf {target}: cannot write the file ({exc.strerror})") from None
