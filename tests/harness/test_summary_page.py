"""The class summary page (summary_page): three SVG charts, rendered by headless Chromium.

The expected numbers are computed here from results.json, independently of
the plugin; Chromium's DOM must hold every bar and label, and its
screenshot must show each chart's colour.
"""

from __future__ import annotations

import math
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from conftest import run_chromium
from PIL import Image

# Fill colours of the charts' marks (grader/templates/summary.html).
COLOURS = {"hist": (9, 105, 218), "pass": (26, 127, 55), "failed": (198, 40, 40), "error": (130, 80, 223)}


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return run_chromium(*args)


class _Charts(HTMLParser):
    """Collect, per ``<svg id=...>``, its elements as (tag, attributes, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, list[dict]] = {}
        self.current: str | None = None
        self.open: list[dict] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:  # noqa: D102
        attrs = dict(attrs)
        if tag == "svg":
            self.current = attrs.get("id")
            self.charts[self.current] = []
            return
        if self.current is not None:
            item = {
                "tag": tag,
                "class": attrs.get("class", ""),
                "text": "",
                "parent": self.open[-1] if self.open else None,
            }
            self.charts[self.current].append(item)
            self.open.append(item)

    def handle_endtag(self, tag: str) -> None:  # noqa: D102
        if tag == "svg":
            self.current, self.open = None, []
        elif self.current is not None and self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:  # noqa: D102
        if self.current is not None and self.open:
            self.open[-1]["text"] += data


def _texts(items: list[dict], cls: str) -> list[str]:
    return [i["text"] for i in items if i["tag"] == "text" and i["class"] == cls]


def _marks(items: list[dict], kind: str) -> list[str]:
    """The tooltip (<title>) of every ``rect.mark.<kind>``."""
    rects = [i for i in items if i["tag"] == "rect" and i["class"] == f"mark {kind}"]
    return [next(t["text"] for t in items if t["tag"] == "title" and t["parent"] is r) for r in rects]


def _expected(results: dict) -> dict:
    subs = results["submissions"]
    keys = [(e["id"], c["id"]) for e in subs[0]["exercises"] for c in e["checks"]]
    status = {(s["id"], e["id"], c["id"]): c["status"] for s in subs for e in s["exercises"] for c in e["checks"]}
    bins: dict[int, int] = {}
    for s in subs:
        b = min(math.floor(10 * s["score"] / s["max_score"]), 9)
        bins[b] = bins.get(b, 0) + 1
    passed = {k: sum(status[(s["id"], *k)] == "passed" for s in subs) for k in keys}
    graded = [s["id"] for s in subs if s["status"] == "graded"]
    failing = {
        k: {st: sum(status[(sid, *k)] == st for sid in graded) for st in ("failed", "error", "timeout")} for k in keys
    }
    ranked = sorted(
        (k for k in keys if sum(failing[k].values())), key=lambda k: (-sum(failing[k].values()), keys.index(k))
    )
    return {
        "keys": keys,
        "bins": bins,
        "passed": passed,
        "n": len(subs),
        "graded": len(graded),
        "failing": failing,
        "top": ranked[:10],
    }


def _label(b: int) -> str:
    return f"{b * 10}–{100 if b == 9 else b * 10 + 9}%"


def test_index_links_the_summary_and_the_page_is_self_contained(graded: dict) -> None:
    assert '<a href="summary.html">Class summary (charts)</a>' in (graded["out"] / "index.html").read_text()
    html = (graded["out"] / "summary.html").read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert '<a href="index.html">' in html
    assert html.count("<svg") == 3


@pytest.mark.browser
def test_chromium_draws_every_bar_and_label(graded: dict) -> None:
    proc = _chromium("--dump-dom", (graded["out"] / "summary.html").as_uri())
    parser = _Charts()
    parser.feed(proc.stdout)
    charts = parser.charts
    assert set(charts) == {"histogram", "pass-rates", "failing"}, proc.stderr[-2000:]
    exp = _expected(graded["results"])

    hist = charts["histogram"]
    assert _texts(hist, "tick")[-10:] == [_label(b) for b in range(10)]
    assert _marks(hist, "hist") == [
        f"{_label(b)}: {n} submission{'s' if n != 1 else ''}" for b, n in sorted(exp["bins"].items())
    ]
    assert _texts(hist, "value") == [str(n) for _, n in sorted(exp["bins"].items())]

    rates = charts["pass-rates"]
    names = [f"{ex} {cid}" for ex, cid in exp["keys"]]
    assert _texts(rates, "name") == names
    assert len([i for i in rates if i["tag"] == "rect" and i["class"] == "track"]) == len(names)
    n = exp["n"]
    assert _texts(rates, "value") == [f"{exp['passed'][k] / n:.0%} ({exp['passed'][k]}/{n})" for k in exp["keys"]]
    assert len(_marks(rates, "pass")) == sum(1 for k in exp["keys"] if exp["passed"][k])

    failing = charts["failing"]
    top = [f"{ex} {cid}" for ex, cid in exp["top"]]
    assert _texts(failing, "name") == top and len(top) == 10
    assert _texts(failing, "value") == [f"{sum(exp['failing'][k].values())} of {exp['graded']}" for k in exp["top"]]
    words = {"failed": "failed", "error": "error", "timeout": "timed out"}
    for status in ("failed", "error", "timeout"):
        assert _marks(failing, status) == [
            f"{ex} {cid}: {exp['failing'][(ex, cid)][status]} {words[status]}"
            for ex, cid in exp["top"]
            if exp["failing"][(ex, cid)][status]
        ]


@pytest.mark.slow
@pytest.mark.browser
def test_chromium_screenshot_shows_the_charts(graded: dict, tmp_path: Path) -> None:
    shot = tmp_path / "summary.png"
    proc = _chromium(
        "--hide-scrollbars",
        "--window-size=1000,2600",
        f"--screenshot={shot}",
        (graded["out"] / "summary.html").as_uri(),
    )
    assert shot.is_file(), proc.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)

    def count(rgb: tuple[int, int, int]) -> int:
        return int((np.abs(pixels - np.array(rgb)).max(axis=2) <= 6).sum())

    # Each chart's colour covers a real area: the bars are drawn, not just present in the DOM.
    assert count(COLOURS["hist"]) > 20_000  # 12 submissions, bars ~70 px wide
    assert count(COLOURS["pass"]) > 40 * 200  # a bar per check
    assert count(COLOURS["failed"]) > 2_000 and count(COLOURS["error"]) > 1_000


def test_what_to_reteach_counts_each_misconception_of_the_samples(graded: dict) -> None:
    """Issue 27: the summary's "What to reteach" rows equal a count made here from results.json's diagnoses.

    A student counts once per misconception (however many checks or exercises name it); the page
    shows the count and the share of all submissions, names no student, and results.json agrees.
    """
    subs = graded["results"]["submissions"]
    who: dict[str, set[str]] = {}
    for s in subs:
        for e in s["exercises"]:
            for c in e["checks"]:
                for d in c.get("diagnosis", ()):
                    who.setdefault(d["misconception"], set()).add(s["id"])
    assert len(who) >= 3  # the samples hold several catalogued mistakes
    html = (graded["out"] / "summary.html").read_text()
    reteach = html.split('id="reteach"')[1].split("</section>")[0]
    rows = re.findall(r"<tr><td>(.*?)</td><td class=\"num\">(\d+)</td><td class=\"num\">(\d+)%</td>", reteach)
    import html as html_module

    shown = {html_module.unescape(text): (int(n), int(pct)) for text, n, pct in rows}
    assert shown == {m: (len(ids), round(100 * len(ids) / len(subs))) for m, ids in who.items()}
    assert [n for n, _ in shown.values()] == sorted((n for n, _ in shown.values()), reverse=True)
    for s in subs:
        assert not re.search(rf"\b{re.escape(s['id'])}\b", reteach), s["id"]
    data = {m["misconception"]: set(m["students"]) for m in graded["results"]["misconceptions"]}
    assert data == who
