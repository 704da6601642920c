"""Built-in plugin: per-submission HTML feedback and a class index page.

Pages are rendered with jinja2 (autoescape on) from ``grader/templates``;
they are self-contained (inline CSS, no scripts, no network assets). Hidden
checks show only their name, status and hint.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from grader.errors import UsageError
from grader.fileio import unique_file_names, write_atomic
from grader.models import GradingReport, SubmissionResult
from grader.plugins import hookimpl

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"

STATUS_LABELS = {
    "passed": "Passed",
    "failed": "Failed",
    "error": "Error",
    "timeout": "Timed out",
    "not_attempted": "Not attempted",
}


def environment() -> jinja2.Environment:
    """The jinja2 environment of the report templates (autoescape on)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.globals["status_label"] = lambda s: STATUS_LABELS.get(s, s)
    env.filters["points"] = lambda x: f"{x:g}"
    env.filters["percent"] = lambda s: f"{100.0 * s.score / s.max_score:.0f}%" if s.max_score else "-"
    return env


def page_names(report: GradingReport) -> dict[str, str]:
    """File name of each submission's page, unique and never ``index.html``."""
    return unique_file_names([s.id for s in report.submissions], ".html", reserved=("index.html",))


def render_submission(env: jinja2.Environment, report: GradingReport, sub: SubmissionResult) -> str:
    """The HTML feedback page of one submission."""
    sections = {e.id: e.section for e in report.exercises}
    return env.get_template("report.html").render(report=report, sub=sub, sections=sections)


def render_index(
    env: jinja2.Environment, report: GradingReport, names: dict[str, str], links: Sequence[tuple[str, str]] = ()
) -> str:
    """The class index page linking every submission's page.

    ``links`` are extra (label, file name) pairs shown under the title; other
    plugins add theirs to ``config.stash["html_report.index_links"]``.
    """
    return env.get_template("index.html").render(report=report, names=names, links=links)


@hookimpl
def grader_write_reports(report: GradingReport, config: Any) -> None:
    """Write ``DIR/index.html`` and one ``DIR/<id>.html`` per submission."""
    out = config.out_dir
    if out is None:
        return
    env = environment()
    names = page_names(report)
    try:
        for sub in report.submissions:
            write_atomic(out / names[sub.id], render_submission(env, report, sub))
        links = config.stash.get("html_report.index_links", ())
        write_atomic(out / "index.html", render_index(env, report, names, links))
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write the reports ({exc.strerror})") from None
