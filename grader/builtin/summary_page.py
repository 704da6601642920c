"""Built-in plugin: the class summary page (``DIR/summary.html``), with charts.

Three charts, drawn as inline SVG by ``grader/templates/summary.html`` from
the geometry computed here (no plotting library, no script, no network):

* a histogram of total scores, in tenths of the maximum;
* the pass rate of every check, one bar per check, in spec order;
* the checks failed most often (failed, error or timed out, among the
  submissions that could run), as bars stacked by status.

Each chart has a ``<title>`` and the same numbers as a table. The class
index page links to the summary (``grader_configure`` registers the link);
with ``-p no:html_report`` there is no index and no summary either.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grader.errors import UsageError
from grader.fileio import write_atomic
from grader.markers import hookimpl
from grader.models import GradingReport
from grader.packs import find_pack
from grader.reporting.pages import environment

if TYPE_CHECKING:
    from grader.config.core import Config

__all__ = ["BINS", "Bar", "Chart", "failing_chart", "histogram_chart", "pass_rate_chart", "render_summary"]

FILENAME = "summary.html"
BINS = 10
"""Histogram bins: ``0-9%``, ``10-19%``, ..., ``90-100%`` of the maximum score."""
TOP_FAILING = 10
"""How many of the most often failed checks the third chart shows."""
FAIL_STATUSES = ("failed", "error", "timeout")


@dataclass(frozen=True)
class Bar:
    """One rectangle of a chart, in SVG user units.

    Attributes
    ----------
    x, y, width, height : float
    kind : str
        CSS class after ``mark`` (``hist``, ``pass``, ``failed``, ``error``,
        ``timeout``), which sets the colour.
    title : str
        Tooltip and accessible text.
    """

    x: float
    y: float
    width: float
    height: float
    kind: str
    title: str


@dataclass(frozen=True)
class Label:
    """One text label of a chart (``anchor``: start, middle or end)."""

    x: float
    y: float
    text: str
    anchor: str = "start"
    kind: str = "label"


@dataclass(frozen=True)
class Chart:
    """An SVG chart: its size, rectangles, labels and grid lines.

    Attributes
    ----------
    id : str
        HTML id of the ``<svg>``.
    title : str
        Accessible title.
    width, height : float
        The ``viewBox`` size.
    bars : tuple of Bar
    tracks : tuple of Bar
        Grey backgrounds (the 100% of a rate), drawn under the bars.
    labels : tuple of Label
    lines : tuple of (float, float, float, float)
        Axis and grid lines ``(x1, y1, x2, y2)``.
    rows : tuple of tuple of str
        The chart's numbers as table rows (the first row is the header).
    """

    id: str
    title: str
    width: float
    height: float
    bars: tuple[Bar, ...]
    labels: tuple[Label, ...]
    lines: tuple[tuple[float, float, float, float], ...] = ()
    tracks: tuple[Bar, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


def _bin_of(score: float, max_score: float) -> int:
    if max_score <= 0:
        return 0
    return min(int(math.floor(BINS * score / max_score + 1e-9)), BINS - 1)


def _bin_label(i: int) -> str:
    step = 100 // BINS
    return f"{i * step}–{100 if i == BINS - 1 else (i + 1) * step - 1}%"


def histogram_chart(report: GradingReport) -> Chart:
    """Histogram of the submissions' totals, as a share of the maximum.

    Parameters
    ----------
    report : grader.models.GradingReport

    Returns
    -------
    Chart
        One bar per non-empty bin (class ``mark hist``); every bin is labelled.
    """
    counts = [0] * BINS
    for s in report.submissions:
        counts[_bin_of(s.score, s.max_score)] += 1
    width, height, left, right, top, bottom = 900.0, 300.0, 56.0, 16.0, 24.0, 52.0
    plot_w, plot_h = width - left - right, height - top - bottom
    top_count = max(counts + [1])
    step = max(1, math.ceil(top_count / 5))
    y_max = step * math.ceil(top_count / step)
    slot = plot_w / BINS
    bars, labels, lines = [], [], []
    for tick in range(0, y_max + 1, step):
        y = top + plot_h - plot_h * tick / y_max
        lines.append((left, y, width - right, y))
        labels.append(Label(left - 8, y + 4, str(tick), "end", "tick"))
    for i, n in enumerate(counts):
        x = left + i * slot
        labels.append(Label(x + slot / 2, top + plot_h + 18, _bin_label(i), "middle", "tick"))
        if n:
            h = plot_h * n / y_max
            title = f"{_bin_label(i)}: {n} submission{'s' if n != 1 else ''}"
            bars.append(Bar(x + 6, top + plot_h - h, slot - 12, h, "hist", title))
            labels.append(Label(x + slot / 2, top + plot_h - h - 6, str(n), "middle", "value"))
    labels.append(Label(left + plot_w / 2, height - 8, "total score, % of the maximum", "middle", "axis"))
    labels.append(Label(14, top + plot_h / 2, "submissions", "middle", "axis-y"))
    rows = (("Total score", "Submissions"), *((_bin_label(i), str(n)) for i, n in enumerate(counts)))
    return Chart(
        "histogram", "Histogram of total scores", width, height, tuple(bars), tuple(labels), tuple(lines), (), rows
    )


def _check_keys(report: GradingReport) -> list[tuple[str, str]]:
    keys: list[tuple[str, str]] = [(e.id, c.id) for e in report.exercises for c in e.checks]
    if not keys and report.submissions:
        keys = [(e.id, c.id) for e in report.submissions[0].exercises for c in e.checks]
    return keys


def _statuses(report: GradingReport) -> dict[tuple[str, str], Counter[tuple[str, str]]]:
    """(exercise, check) -> how many submissions had each (submission status, check status).

    Counted, not listed: the page's memory does not grow with the class (issue 16). Counted per
    exercise result first (a class's equal results are one object), then per check of each; the
    last report's counts are kept (both charts ask).
    """
    if _COUNTED[0] is report:
        kept: dict[tuple[str, str], Counter[tuple[str, str]]] = _COUNTED[1]
        return kept
    per_result: dict[tuple[str, int], list[Any]] = {}
    for s in report.submissions:
        status = s.status
        for e in s.exercises:
            seen_result = per_result.get((status, id(e)))
            if seen_result is None:
                per_result[status, id(e)] = [e, 1]
            else:
                seen_result[1] += 1
    out: dict[tuple[str, str], Counter[tuple[str, str]]] = {}
    for (status, _), (e, n) in per_result.items():
        for c in e.checks:
            key = (e.id, c.id)
            seen = out.get(key)
            if seen is None:
                seen = out[key] = Counter()
            seen[status, c.status] += n
    _COUNTED[:] = [report, out]
    return out


_COUNTED: list[Any] = [None, None]
"""The last report `_statuses` counted, and its counts."""


ROW = 20.0
LABEL_W = 330.0


def pass_rate_chart(report: GradingReport) -> Chart:
    """Share of all submissions that pass each check, one bar per check.

    Parameters
    ----------
    report : grader.models.GradingReport

    Returns
    -------
    Chart
        One grey track per check and a bar (class ``mark pass``) for each
        check passed at least once; a label ``G14.01 check-id`` and
        ``83% (10/12)`` per row.
    """
    statuses = _statuses(report)
    keys = _check_keys(report)
    width, top, right = 900.0, 8.0, 110.0
    plot_w = width - LABEL_W - right
    height = top + ROW * len(keys) + 8
    bars, tracks, labels, rows = [], [], [], [("Check", "Passed", "Submissions", "Pass rate")]
    total = len(report.submissions)
    for i, (ex_id, check_id) in enumerate(keys):
        y = top + i * ROW
        seen = statuses.get((ex_id, check_id), Counter())
        passed = sum(n for (_, st), n in seen.items() if st == "passed")
        rate = passed / total if total else 0.0
        name = f"{ex_id} {check_id}"
        labels.append(Label(LABEL_W - 10, y + 14, name, "end", "name"))
        tracks.append(Bar(LABEL_W, y + 3, plot_w, ROW - 6, "track", name))
        if passed:
            bars.append(
                Bar(LABEL_W, y + 3, plot_w * rate, ROW - 6, "pass", f"{name}: {rate:.0%} pass ({passed}/{total})")
            )
        labels.append(Label(LABEL_W + plot_w + 8, y + 14, f"{rate:.0%} ({passed}/{total})", "start", "value"))
        rows.append((name, str(passed), str(total), f"{rate:.0%}"))
    return Chart(
        "pass-rates",
        "Pass rate of every check",
        width,
        height,
        tuple(bars),
        tuple(labels),
        (),
        tuple(tracks),
        tuple(rows),
    )


def failing_counts(report: GradingReport) -> list[tuple[tuple[str, str], dict[str, int]]]:
    """The checks failed most often, most first (ties in spec order).

    Counts, per check, the submissions that could run (status ``graded``)
    whose check failed, raised or timed out; "not attempted" is not a
    failure. At most `TOP_FAILING` checks, each failed at least once.

    Returns
    -------
    list of ((exercise id, check id), {status: count})
    """
    statuses = _statuses(report)
    found = []
    for order, key in enumerate(_check_keys(report)):
        counts = {st: 0 for st in FAIL_STATUSES}
        for (sub_status, st), n in statuses.get(key, Counter()).items():
            if sub_status == "graded" and st in counts:
                counts[st] += n
        if sum(counts.values()):
            found.append((-sum(counts.values()), order, key, counts))
    found.sort()
    return [(key, counts) for _, _, key, counts in found[:TOP_FAILING]]


def failing_chart(report: GradingReport) -> Chart:
    """The most often failed checks as bars stacked by status.

    Returns
    -------
    Chart
        Per check, one bar segment per status with a nonzero count (class
        ``mark failed``, ``mark error`` or ``mark timeout``), its name and its
        total; the scale is the number of submissions that could run.
    """
    top_list = failing_counts(report)
    runnable = max(1, sum(1 for s in report.submissions if s.status == "graded"))
    width, top, right = 900.0, 8.0, 110.0
    plot_w = width - LABEL_W - right
    height = top + ROW * max(len(top_list), 1) + 8
    bars, tracks, labels = [], [], []
    rows = [("Check", "Failed", "Error", "Timed out", "Total")]
    if not top_list:
        labels.append(Label(LABEL_W, top + 14, "No check failed.", "start", "value"))
    for i, ((ex_id, check_id), counts) in enumerate(top_list):
        y = top + i * ROW
        name = f"{ex_id} {check_id}"
        labels.append(Label(LABEL_W - 10, y + 14, name, "end", "name"))
        tracks.append(Bar(LABEL_W, y + 3, plot_w, ROW - 6, "track", name))
        x = LABEL_W
        for status in FAIL_STATUSES:
            n = counts[status]
            if n:
                w = plot_w * n / runnable
                word = {"failed": "failed", "error": "error", "timeout": "timed out"}[status]
                bars.append(Bar(x, y + 3, w, ROW - 6, status, f"{name}: {n} {word}"))
                x += w
        n_total = sum(counts.values())
        labels.append(Label(LABEL_W + plot_w + 8, y + 14, f"{n_total} of {runnable}", "start", "value"))
        rows.append((name, str(counts["failed"]), str(counts["error"]), str(counts["timeout"]), str(n_total)))
    return Chart(
        "failing", "Checks failed most often", width, height, tuple(bars), tuple(labels), (), tuple(tracks), tuple(rows)
    )


def render_summary(report: GradingReport, links: Any = (), pack: Any = None) -> str:
    """The summary page's HTML (self-contained: inline CSS and SVG, no script).

    Parameters
    ----------
    report : grader.models.GradingReport
    links : sequence of (str, str)
        (label, href) pairs shown under the title; plugins add theirs through the hook
        ``grader_report_links`` (the similarity report does).
    pack : grader.packs.Pack, optional
        The course whose chapter heads the page (default: the course found, `grader.packs.find_pack`).

    Returns
    -------
    str
    """
    import statistics  # here: only the class summary needs it

    totals = [s.score for s in report.submissions]
    max_score = max((s.max_score for s in report.submissions), default=0.0)
    stats = {
        "count": len(totals),
        "errors": sum(1 for s in report.submissions if s.status == "error"),
        "mean": statistics.fmean(totals) if totals else 0.0,
        "median": statistics.median(totals) if totals else 0.0,
        "max_score": max_score,
        "full": sum(1 for s in report.submissions if s.max_score and s.score == s.max_score),
    }
    charts = [histogram_chart(report), pass_rate_chart(report), failing_chart(report)]
    from grader.reporting.insight import misconceptions  # issue 27: what to reteach (counts only: no names here)

    reteach = misconceptions(report.submissions)
    return (
        environment(pack or find_pack())
        .get_template("summary.html")
        .render(report=report, stats=stats, charts=charts, links=links, reteach=reteach)
    )


def _wanted(config: Any) -> bool:
    """The summary is a page of the HTML report: written with it, not without."""
    return config.command == "grade" and config.pluginmanager.get_plugin("html_report") is not None


@hookimpl
def grader_report_links(config: Config, page: str) -> list[tuple[str, str]] | None:
    """The class index page links to the summary."""
    return [("Class summary (charts)", FILENAME)] if page == "index" and _wanted(config) else None


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write ``DIR/summary.html`` for ``grader grade`` (unless ``-p no:html_report``)."""
    out = config.out_dir
    if out is None or not _wanted(config):
        return
    try:
        write_atomic(
            out / FILENAME,
            render_summary(report, config.hooks.report_links(config=config, page="summary"), config.pack),
        )
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write {FILENAME} ({exc.strerror})") from None
