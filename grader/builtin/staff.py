"""Built-in plugin: staff-only pages for disputes (``grader grade --staff``).

With ``--staff``, ``DIR/staff/<slug>.html`` shows, for every check of a
submission (hidden ones included), the arguments of each call, what the
check expected and what the submission returned (or raised). These pages
are for the teaching staff answering "why did I lose this point": they are
written only under ``DIR/staff/`` and nothing of them goes into a student's
page, Gradescope file, CSV, JUnit or GitHub output. A result reused from
the gradebook has no returned values: grade it with ``--regrade --only ID``.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from grader.collected import COLLECTED
from grader.errors import UsageError
from grader.fileio import write_atomic
from grader.markers import hookimpl
from grader.models import SubmissionResult
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_OUTCOMES = StashKey[dict[str, Any]]()

SUBFOLDER = "staff"
_LIMIT = 4000
_LOCK = threading.Lock()

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>STAFF ONLY: {{ sub.id }}</title>
<style>body{font-family:sans-serif;margin:2em}pre{background:#f4f4f4;padding:.4em;white-space:pre-wrap}
.hidden{border-left:4px solid #b00;padding-left:.6em}</style></head><body>
<h1>Staff only: {{ sub.id }}</h1>
<p>Not for students: hidden inputs and expected values. Score {{ "%g"|format(sub.score) }} / {{ "%g"|format(sub.max_score) }}
{% if sub.raw_score is not none %}(automatic {{ "%g"|format(sub.raw_score) }}){% endif %}, status {{ sub.status }}.</p>
{% if not have_calls %}<p>These results were reused from the gradebook: grade again with --regrade --only to see the returned values.</p>{% endif %}
{% for row in rows %}
<section class="{{ row.visibility }}"><h2>{{ row.exercise }} {{ row.check }} ({{ row.visibility }}): {{ row.status }}, {{ "%g"|format(row.score) }} / {{ "%g"|format(row.max_score) }}</h2>
<p>{{ row.message }}</p>
<h3>Expected</h3><pre>{{ row.expected }}</pre>
{% for call in row.calls %}<h3>Call {{ loop.index }}: {{ call.function }}</h3><pre>args: {{ call.args }}</pre>
<pre>{{ call.outcome }}</pre>{% endfor %}
</section>
{% endfor %}
</body></html>
"""


def _text(value: Any) -> str:
    try:
        text = json.dumps(value, default=lambda o: o.tolist() if hasattr(o, "tolist") else repr(o), allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _LIMIT else text[:_LIMIT] + f"... ({len(text):,} characters)"


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    parser.add_argument(
        "--staff",
        action="store_true",
        help="also write staff-only pages, DIR/staff/<slug>.html: hidden checks' inputs, expected and "
        "returned values (never in students' files)",
    )


def _wanted(config: Any) -> bool:
    return bool(config.option("staff")) and config.command == "grade" and config.out_dir is not None


@hookimpl(wrapper=True)
def grader_run_calls(submission: Any, calls: Any, config: Config) -> Any:
    outcome = yield
    if _wanted(config) and outcome is not None and not submission.reference:  # a catalogue entry: no student's
        with _LOCK:
            config.stash.setdefault(_OUTCOMES, {})[submission.id] = outcome
    return outcome


def render_staff(sub: SubmissionResult, collected: Any, outcome: Any) -> str:
    """The staff page of one submission (autoescaped HTML)."""
    results = outcome.results if outcome is not None else None
    checks = {(e.id, c.id): c for e in sub.exercises for c in e.checks}
    rows = []
    for exercise, pc, got in collected.split(results if results is not None else ()):
        calls = []
        for i, call in enumerate(pc.prepared.calls):
            r = got[i] if i < len(got) else None
            outcome_text = (
                "not known"
                if r is None
                else f"returned: {_text(r.value)}"
                if r.status == "returned"
                else f"{r.status}: {r.error_type} {r.message} {r.where}".strip()
            )
            calls.append({"function": call.function, "args": _text(list(call.args)), "outcome": outcome_text})
        c = checks.get((exercise.id, pc.check.id))
        rows.append(
            {
                "exercise": exercise.id,
                "check": pc.check.id,
                "visibility": pc.check.visibility,
                "status": c.status if c else "?",
                "score": c.score if c else 0.0,
                "max_score": c.max_score if c else pc.check.points,
                "message": c.message if c else "",
                "expected": _text(pc.prepared.expected),
                "calls": calls,
            }
        )
    import jinja2  # here: only --staff renders these pages

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_PAGE).render(sub=sub, rows=rows, have_calls=outcome is not None)


@hookimpl
def grader_write_reports(report: Any, config: Config) -> None:
    """Write ``DIR/staff/<slug>.html`` for every submission."""
    if not _wanted(config):
        return
    from grader.intake.naming import slugs_of

    collected = config.stash[COLLECTED]
    outcomes = config.stash.get(_OUTCOMES, {})
    assert config.out_dir is not None  # _wanted
    folder = config.out_dir / SUBFOLDER
    try:
        for sid, slug in slugs_of(report.submissions).items():
            sub = next(s for s in report.submissions if s.id == sid)
            write_atomic(folder / f"{slug}.html", render_staff(sub, collected, outcomes.get(sid)))
    except OSError as exc:
        raise UsageError(f"--out {config.out_dir}: cannot write {SUBFOLDER}/ ({exc.strerror})") from None
