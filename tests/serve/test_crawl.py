"""Hidden means hidden on the server too: every page a student can reach, crawled before and after release,
holds no hidden check's name or description, no hidden input and no expected value."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Served, csrf

pytestmark = pytest.mark.slow

LINK = re.compile(r'href="(/[^"#]*)"')


def floats(value: Any) -> Iterator[float]:
    """Every float inside nested lists, tuples, dicts and arrays."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from floats(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from floats(item)


def distinctive(x: float) -> bool:
    """A number with 4 or more significant digits (a data value, not a tolerance such as 1e-06 or a size)."""
    if not math.isfinite(x):
        return False
    digits = f"{abs(x):.10g}".split("e")[0].replace(".", "").strip("0")
    return len(digits) >= 4


def secrets_of(grading: Any) -> dict[str, str]:
    """What no student page may hold: each hidden check's id and description, its inputs and expected values
    as the grader prints numbers (repr, 10 and 6 significant digits), for numbers with 4+ significant digits."""
    secrets: dict[str, str] = {}
    visible_numbers: set[str] = set()
    for _exercise, items in grading.collected.checks:
        for pc in items:
            numbers = set()
            for call in pc.prepared.calls:
                numbers.update(floats(list(call.args)))
            numbers.update(floats(pc.prepared.expected))
            shown = {form for x in numbers if distinctive(x) for form in (repr(x), f"{x:.10g}", f"{x:.6g}")}
            if pc.check.visibility == "visible":
                visible_numbers |= shown
                continue
            secrets[pc.check.id] = f"hidden check id of {pc.check.id}"
            if pc.check.description:
                secrets[pc.check.description] = f"description of {pc.check.id}"
            for form in shown:
                secrets[form] = f"an input or expected value of {pc.check.id}"
    for form in visible_numbers:  # a number a visible check shows too is not a secret
        secrets.pop(form, None)
    return secrets


def crawl(client: Any) -> dict[str, str]:
    """Every page reachable by links from '/', by path."""
    seen: dict[str, str] = {}
    todo = ["/"]
    while todo:
        path = todo.pop()
        if path in seen or path.startswith("/logout"):
            continue
        page = client.get(path)
        seen[path] = page.text
        todo += [link for link in LINK.findall(page.text) if link not in seen]
    return seen


def test_no_student_page_holds_a_hidden_name_input_or_expected_value(served: Served) -> None:
    secrets = secrets_of(served.grading)
    assert len(secrets) > 40  # the course has hidden checks with inputs: the test can fail
    student = served.client("alice")
    for sample in ("no_sqrt_dk", "masked_row_nan", "syntax_error", "transposed_shapes"):
        served.submit(student, sample)
    served.drain()
    pages = crawl(student)
    teacher = served.client("ines", role="instructor")
    teacher.post("/staff/release", data={"csrf": csrf(teacher.get("/staff").text), "released": "yes"})
    released = crawl(student)
    assert {"/", "/history", "/submissions/1", "/submissions/4"} <= set(pages) == set(released)
    assert "Hidden checks:" in released["/submissions/1"]  # released results are on the crawled pages
    staff_page = teacher.get("/staff/students/1").text
    assert sum(secret in staff_page for secret in secrets) > 10  # the staff do see them: the probe works
    for label, crawled in (("before release", pages), ("after release", released)):
        for path, html in crawled.items():
            leaks = [why for secret, why in secrets.items() if secret in html]
            assert not leaks, f"{label}, {path}: {leaks[:5]}"
    for path in ("/staff", "/staff/students/1", "/staff/audit", "/staff/export.zip"):
        assert student.get(path).status_code == 403
