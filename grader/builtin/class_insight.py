"""Built-in plugin: the staff page of the class (``DIR/staff/class/index.html``, with ``--staff``).

What to reteach, with the students each misconception was named for, and
the item analysis of the checks (`grader.reporting.insight`): a scatter plot of each
check's difficulty against its discrimination, drawn as inline SVG by
``grader/templates/staff_class.html`` from the geometry computed here (no
script, no network), and the same numbers as a table. A check's flag is
shown by the shape of its point and in words, never by colour alone, so
the plot reads in greyscale. The page is written under ``DIR/staff/``,
next to the per-student staff pages, and nothing of it reaches a student's
file. ``class/`` is a folder: no student's slug (a file ``<slug>.html``)
can take its place.
"""

from __future__ import annotations

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
    from grader.reporting.insight import ItemAnalysis

__all__ = ["PAGE", "Point", "render_staff_class", "scatter"]

PAGE = "staff/class/index.html"
SHAPES = {"negative": "triangle", "constant": "square", "redundant": "diamond", "": "circle"}
"""The shape of a check's point by its first flag, in this order of precedence."""


@dataclass(frozen=True)
class Point:
    """One plotted point (SVG user units): its shape, its label and its tooltip."""

    x: float
    y: float
    shape: str
    label: str
    title: str


@dataclass(frozen=True)
class Scatter:
    """The difficulty / discrimination plot: size, points, axis ticks ``(x, y, text, anchor)``, grid lines."""

    width: float
    height: float
    left: float
    top: float
    plot_w: float
    plot_h: float
    points: tuple[Point, ...]
    ticks: tuple[tuple[float, float, str, str], ...]
    lines: tuple[tuple[float, float, float, float, str], ...]
    labels: tuple[tuple[float, float, str, str], ...]


def _shape(flags: tuple[str, ...]) -> str:
    for flag in ("negative", "constant", "redundant"):
        if flag in flags:
            return SHAPES[flag]
    return SHAPES[""]


def scatter(analysis: ItemAnalysis) -> Scatter:
    """The plot's geometry: x the difficulty (0 to 1), y the discrimination (-1 to 1).

    Parameters
    ----------
    analysis : grader.reporting.insight.ItemAnalysis

    Returns
    -------
    Scatter
        One `Point` per check, numbered as the table's rows (1, 2, ...); a
        check without a discrimination (constant) is drawn at 0. Points
        that fall on the same spot share one label (``3, 4``; past six,
        ``1, 2, 5, 7, 8 +9``), left of the points near the right edge.
    """
    width, height, left, right, top, bottom = 900.0, 520.0, 64.0, 24.0, 16.0, 56.0
    plot_w, plot_h = width - left - right, height - top - bottom

    def at(difficulty: float, r: float) -> tuple[float, float]:
        return left + plot_w * difficulty, top + plot_h * (1.0 - (r + 1.0) / 2.0)

    points = []
    spots: dict[tuple[int, int], list[str]] = {}
    for i, item in enumerate(analysis.items, start=1):
        r = item.discrimination if item.discrimination is not None else 0.0
        x, y = at(item.difficulty, r)
        shown = "undefined" if item.discrimination is None else f"{item.discrimination:+.2f}"
        title = f"{i}. {item.name}: difficulty {item.difficulty:.2f}, discrimination {shown}" + (
            f" ({', '.join(item.flags)})" if item.flags else ""
        )
        points.append(Point(x, y, _shape(item.flags), str(i), title))
        spots.setdefault((round(x / 8), round(y / 8)), []).append(str(i))
    labels = []
    for (gx, gy), names in spots.items():
        text = ", ".join(names) if len(names) <= 6 else ", ".join(names[:5]) + f" +{len(names) - 5}"
        if gx * 8 > left + plot_w * 0.75:  # near the right edge: the label goes to the left of the point
            labels.append((gx * 8 - 9, gy * 8 - 8, text, "end"))
        else:
            labels.append((gx * 8 + 9, gy * 8 + 4, text, "start"))
    ticks, lines = [], []
    for k in range(0, 11, 2):
        x, _ = at(k / 10, 0.0)
        ticks.append((x, top + plot_h + 18, f"{k / 10:.1f}", "middle"))
        lines.append((x, top, x, top + plot_h, "grid"))
    for k in range(-10, 11, 5):
        _, y = at(0.0, k / 10)
        ticks.append((left - 8, y + 4, f"{k / 10:+.1f}" if k else "0", "end"))
        lines.append((left, y, left + plot_w, y, "zero" if k == 0 else "grid"))
    from grader.reporting.insight import NEGATIVE_BELOW

    _, y_neg = at(0.0, NEGATIVE_BELOW)
    lines.append((left, y_neg, left + plot_w, y_neg, "threshold"))
    return Scatter(width, height, left, top, plot_w, plot_h, tuple(points), tuple(ticks), tuple(lines), tuple(labels))


def render_staff_class(report: GradingReport, pack: Any = None, min_class: int | None = None) -> str:
    """The staff page of the class: who holds each misconception, and the item analysis.

    Parameters
    ----------
    report : grader.models.GradingReport
    pack : grader.packs.Pack, optional
        The course whose chapter heads the page (default: the course found, `grader.packs.find_pack`).
    min_class : int, optional
        Fewest submissions that could run for the item analysis to be shown (default:
        `grader.reporting.insight.MIN_CLASS`).

    Returns
    -------
    str
        Self-contained HTML (inline CSS and SVG, no script), autoescaped.
    """
    # here, not at the module's import: a command that writes no staff page never needs the analysis
    from grader.reporting.insight import MIN_CLASS, NEGATIVE_BELOW, item_analysis, misconceptions

    min_class = MIN_CLASS if min_class is None else min_class
    analysis = item_analysis(report, min_class)
    return (
        environment(pack or find_pack())
        .get_template("staff_class.html")
        .render(
            report=report,
            found=misconceptions(report.submissions),
            analysis=analysis,
            plot=scatter(analysis) if analysis.shown else None,
            min_class=min_class,
            negative_below=NEGATIVE_BELOW,
        )
    )


def _wanted(config: Any) -> bool:
    return bool(config.option("staff")) and config.command == "grade" and config.out_dir is not None


@hookimpl
def grader_report_links(config: Config, page: str) -> list[tuple[str, str]] | None:
    """The summary page links to the staff page (staff only: written with ``--staff``)."""
    if page == "summary" and _wanted(config) and config.pluginmanager.get_plugin("html_report") is not None:
        return [("Staff: who and item analysis", PAGE)]
    return None


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write ``DIR/staff/class/index.html`` for ``grader grade --staff``."""
    if not _wanted(config):
        return
    assert config.out_dir is not None  # _wanted
    try:
        write_atomic(config.out_dir / PAGE, render_staff_class(report, config.pack))
    except OSError as exc:
        raise UsageError(f"--out {config.out_dir}: cannot write {PAGE} ({exc.strerror})") from None
