"""The pages' own rules: WCAG 2.1 AA contrast of every colour the stylesheet sets, a phone-width viewport,
and no script."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import ROOT

TEMPLATES = ROOT / "grader" / "templates" / "serve"
RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
COLOUR = re.compile(r"(?<![-\w])(color|background)\s*:\s*(#[0-9a-fA-F]{3,6})")


def luminance(colour: str) -> float:
    """WCAG 2.1 relative luminance of a #rgb or #rrggbb colour."""
    hexa = colour.lstrip("#")
    if len(hexa) == 3:
        hexa = "".join(c * 2 for c in hexa)
    channels = [int(hexa[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def stylesheet() -> str:
    text = (TEMPLATES / "base.html").read_text(encoding="utf-8")
    return text.split("<style>")[1].split("</style>")[0]


def test_contrast_is_wcag_aa_for_every_colour_set() -> None:
    assert contrast("#777777", "#ffffff") < 4.5 < contrast("#767676", "#ffffff")  # the formula is the standard's
    found = re.search(r"(?m)^body\s*\{([^}]*)\}", stylesheet())
    assert found is not None
    body = dict(COLOUR.findall(found.group(1)))
    checked = 0
    for selector, block in RULE.findall(stylesheet()):
        colours = dict(COLOUR.findall(block))
        if "color" not in colours and "background" not in colours:
            continue
        fg = colours.get("color", body["color"])
        bg = colours.get("background", body["background"])
        assert contrast(fg, bg) >= 4.5, f"{selector.strip()}: {fg} on {bg} is {contrast(fg, bg):.2f}:1"
        if "background" not in colours:  # a coloured text may sit on the pale boxes too
            for box in ("#fff4ce", "#fde7e9", "#f4f4f4"):
                assert contrast(fg, box) >= 4.5, f"{selector.strip()}: {fg} on {box}"
        checked += 1
    assert checked >= 10


def test_pages_fit_a_phone_and_need_no_script() -> None:
    base = (TEMPLATES / "base.html").read_text(encoding="utf-8")
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in base
    for page in sorted(Path(TEMPLATES).glob("*.html")):
        assert "<script" not in page.read_text(encoding="utf-8"), page.name
