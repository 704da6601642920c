"""Built-in plugin: the JSON results file (``DIR/results.json`` or ``--json``).

The file is for instructors and tools. It holds no timings and no absolute
temporary paths, so the same submissions and specs give the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.errors import UsageError
from grader.fileio import write_atomic
from grader.models import CheckResult, GradingReport
from grader.plugins import hookimpl


def check_to_dict(c: CheckResult) -> dict[str, Any]:
    """One check's JSON: id, status, score, max_score, visibility, message,
    and ``diagnosis`` (the known mistakes it matches) only when there is one."""
    data: dict[str, Any] = {
        "id": c.id,
        "status": c.status,
        "score": c.score,
        "max_score": c.max_score,
        "visibility": c.visibility,
        "message": c.message,
    }
    if c.diagnosis:
        data["diagnosis"] = [
            {"mistake": d.mistake, "misconception": d.misconception, "section": d.section} for d in c.diagnosis
        ]
    return data


def report_to_dict(report: GradingReport) -> dict[str, Any]:
    """The JSON results as plain data (see README, "JSON results")."""
    return {
        "grader_version": report.grader_version,
        "spec_hash": report.spec_hash,
        "submissions": [
            {
                "id": s.id,
                "path": s.path,
                "sha256": s.sha256,
                "score": s.score,
                "max_score": s.max_score,
                "status": s.status,
                "error": s.error,
                "exercises": [
                    {
                        "id": e.id,
                        "score": e.score,
                        "max_score": e.max_score,
                        "checks": [check_to_dict(c) for c in e.checks],
                    }
                    for e in s.exercises
                ],
            }
            for s in report.submissions
        ],
    }


@hookimpl
def grader_write_reports(report: GradingReport, config: Any) -> None:
    """Write the results JSON when the command writes files."""
    out = config.out_dir
    target = config.option("json") or (out / "results.json" if out else None)
    if target is None:
        return
    text = json.dumps(report_to_dict(report), indent=2, allow_nan=False) + "\n"
    try:
        write_atomic(Path(target), text)
    except OSError as exc:
        raise UsageError(f"--json {target}: cannot write the file ({exc.strerror})") from None
