"""Built-in plugin: per-submission HTML feedback and a class index page.

Pages are rendered with jinja2 (autoescape on) from ``grader/templates``;
they are self-contained (inline CSS, no scripts, no network assets). Hidden
checks show only their name, status and hint.

Each submission's page is written as soon as it is graded (while the next
submissions run), the index once the batch is done.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

    from grader.config.core import Config

from grader.errors import UsageError
from grader.fileio import write_atomic
from grader.intake.naming import slugs_of
from grader.markers import hookimpl
from grader.models import GradingReport, Submission, SubmissionResult
from grader.reporting.files import SubmissionFiles
from grader.reporting.pages import environment
from grader.stash import StashKey

_PAGES: StashKey[SubmissionFiles] = StashKey()


def page_names(report: GradingReport) -> dict[str, str]:
    """File name of each submission's page, ``<slug>.html`` (`grader.intake.naming`): unique, never a class page's."""
    return {sid: f"{slug}.html" for sid, slug in slugs_of(report.submissions).items()}


def render_submission(env: jinja2.Environment, report: GradingReport, sub: SubmissionResult) -> str:
    """The HTML feedback page of one submission."""
    sections = {e.id: e.section for e in report.exercises}
    return env.get_template("report.html").render(report=report, sub=sub, sections=sections)


def render_index(
    env: jinja2.Environment, report: GradingReport, names: dict[str, str], links: Sequence[tuple[str, str]] = ()
) -> str:
    """The class index page linking every submission's page.

    ``links`` are extra (label, file name) pairs shown under the title; other
    plugins add theirs through the hook ``grader_report_links``.
    """
    return "".join(index_pieces(env, report, names, links))


def index_pieces(
    env: jinja2.Environment, report: GradingReport, names: dict[str, str], links: Sequence[tuple[str, str]] = ()
) -> Iterator[str]:
    """`render_index`'s text in the pieces jinja2 makes it of, to be written one by one.

    The same bytes as `render_index`, never the whole page (about 50 pieces a
    submission) in memory at once (issue 16).
    """
    return env.get_template("index.html").generate(report=report, names=names, links=links)


def _pages(out: Path, items: Sequence[Any], header: GradingReport, env: jinja2.Environment) -> SubmissionFiles:
    return SubmissionFiles(
        out, items, ".html", lambda sub: render_submission(env, header, sub), f"--out {out}: cannot write the reports"
    )


@hookimpl
def grader_collection_finish(submissions: Sequence[Submission], collected: Any, config: Config) -> None:
    """Fix every page's file name, so pages can be written as results come."""
    if config.out_dir is None:
        return
    header = collected.header(config.command)
    config.stash[_PAGES] = _pages(config.out_dir, submissions, header, environment(config.pack))


@hookimpl
def grader_submission_graded(result: SubmissionResult, config: Config) -> None:
    """Write the submission's page now, while later submissions are still running."""
    pages: SubmissionFiles | None = config.stash.get(_PAGES)
    if pages is not None and result.id in pages.names:
        pages.write(result)


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write ``DIR/index.html``, and the pages ``DIR/<slug>.html`` not written yet."""
    out = config.out_dir
    if out is None:
        return
    env = environment(config.pack)
    pages: SubmissionFiles | None = config.stash.get(_PAGES)
    if pages is None or not pages.covers(report.submissions):
        pages = _pages(out, report.submissions, report, env)
    pages.write_missing(report.submissions)
    try:
        links = config.hooks.report_links(config=config, page="index")
        write_atomic(out / "index.html", index_pieces(env, report, pages.names, links))
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write the reports ({exc.strerror})") from None
