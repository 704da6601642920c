"""Built-in plugin: per-submission HTML feedback and a class index page.

Pages are rendered with jinja2 (autoescape on) from ``grader/templates``;
they are self-contained (inline CSS, no scripts, no network assets). Hidden
checks show only their name, status and hint.

Each submission's page is written as soon as it is graded (while the next
submissions run), the index once the batch is done.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
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
from grader.safetext import display
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


class _Pages:
    """`render_submission` for one run, each page made once per distinct result and then filled in.

    Most of a class gets the same result but for who they are: their pages differ only in the
    student's id and the file's SHA-256. A page is rendered once per distinct rest of its result
    (everything but ``id``, ``path``, ``slug`` and ``sha256``; the exercise results by identity, as
    `grader.grading.session.shared` keeps them) with random tokens in the place of the id and the
    hash, and each student's page is that text with their own id and hash put in, escaped as the
    template escapes them. The first page of each kind is also rendered as usual and compared: a
    template that shows the id or the hash in another way renders every page in full.
    """

    MOST = 256
    """Distinct results whose page is kept (past that the table starts again)."""

    def __init__(self, env: jinja2.Environment, header: GradingReport) -> None:
        import secrets

        from markupsafe import escape

        self.env = env
        self.header = header
        self.template = env.get_template("report.html")
        self.sections = {e.id: e.section for e in header.exercises}
        self.escape = escape
        self.id_token = f"id{secrets.token_hex(8)}"
        self.sha_token = secrets.token_hex(6)  # 12 characters: the template shows sha256[:12]
        self.kept: dict[tuple[Any, ...], tuple[Any, list[Any] | None]] = {}

    def full(self, sub: SubmissionResult) -> str:
        """The page rendered as `render_submission` does (the template kept, not looked up)."""
        return self.template.render(report=self.header, sub=sub, sections=self.sections)

    def __call__(self, sub: SubmissionResult) -> str:
        try:
            key = (
                id(sub.exercises),
                sub.status,
                sub.score,
                sub.max_score,
                sub.error,
                sub.stdout,
                sub.stderr,
                sub.raw_score,
                sub.adjustments,
                tuple(sorted(sub.lms.items())),
                tuple(sorted(sub.late.items())),
                bool(sub.sha256),
                # equal keys treat -0.0 as 0.0, which a page shows as "-0" and "+0": the numbers' text too
                repr((sub.score, sub.raw_score, sub.adjustments, sorted(sub.late.items()))),
            )
            hash(key)
        except TypeError:  # an unhashable field (a plugin's list in an adjustment): rendered in full
            return self.full(sub)
        kept = self.kept.get(key)
        if kept is not None and kept[0] is sub.exercises:
            return self._fill(kept[1], sub) if kept[1] is not None else self.full(sub)
        page = self.full(sub)
        pieces: list[Any] | None = None
        if _hashable(sub.exercises) and self.id_token not in sub.id and self.sha_token not in sub.sha256:
            sample = replace(sub, id=self.id_token, sha256=self.sha_token + "0" * 52 if sub.sha256 else "")
            split = re.split(f"({self.id_token}|{self.sha_token})", self.full(sample))
            pieces = [_ID if p == self.id_token else _SHA if p == self.sha_token else p for p in split]
            if self._fill(pieces, sub) != page:
                pieces = None
        if len(self.kept) >= self.MOST:
            self.kept.clear()
        self.kept[key] = (sub.exercises, pieces)
        return page

    def _fill(self, pieces: list[Any], sub: SubmissionResult) -> str:
        """The page of ``pieces`` with this student's id and hash in their places."""
        shown_id = str(self.escape(display(sub.id)))
        shown_sha = str(self.escape(sub.sha256[:12]))
        return "".join(shown_id if p is _ID else shown_sha if p is _SHA else p for p in pieces)


def _hashable(value: Any) -> bool:
    """Whether ``value`` hashes: a result with a plugin's list in its details (which could change) is not kept."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


_ID, _SHA = object(), object()
"""The places of the student's id and of the file's hash in a kept page (`_Pages`)."""


class _FirstPage:
    """`_Pages`, made when the first page is: importing jinja2 and loading the template (about 35 ms) then
    overlap the first jobs, instead of delaying the class's start with both cores but one idle."""

    def __init__(self, pack: Any, header: GradingReport) -> None:
        self.pack, self.header = pack, header
        self.pages: _Pages | None = None

    def __call__(self, sub: SubmissionResult) -> str:
        if self.pages is None:
            self.pages = _Pages(environment(self.pack), self.header)
        return self.pages(sub)


def _pages(
    out: Path, items: Sequence[Any], header: GradingReport, env: jinja2.Environment | None, pack: Any = None
) -> SubmissionFiles:
    render = _Pages(env, header) if env is not None else _FirstPage(pack, header)
    return SubmissionFiles(out, items, ".html", render, f"--out {out}: cannot write the reports")


@hookimpl
def grader_collection_finish(submissions: Sequence[Submission], collected: Any, config: Config) -> None:
    """Fix every page's file name, so pages can be written as results come."""
    if config.out_dir is None:
        return
    header = collected.header(config.command)
    config.stash[_PAGES] = _pages(config.out_dir, submissions, header, None, config.pack)


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
