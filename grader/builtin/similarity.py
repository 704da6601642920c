"""Built-in plugin: similarity between submissions (``grader similarity``, ``grader grade --similarity``).

Two signals, in ``DIR/similarity.html`` (linked from the class index and
the summary page; staff only, no input or value is shown):

* code: copydetect's token fingerprints (winnowing; variable and function
  names do not count), with the starter file (``--starter``, default
  ``submissions/starter/attention.py``) as boilerplate; a pair is flagged
  when both files share at least ``--similarity-threshold`` of their tokens;
* values, what only a numeric grader sees: two students whose failing
  hidden check returned byte-identical values (the JSON of every call's
  result) that match no catalogued mistake (no diagnosis). Renaming
  variables does not hide that.

The values are compared as they come back (only their SHA-256 is kept), so
every submission is graded again (``--regrade``) in such a run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from grader.boundary import plain_data
from grader.errors import ConfigError, UsageError
from grader.fileio import write_atomic
from grader.naming import slugs_of
from grader.plugins import hookimpl
from grader.stash import COLLECTED, INDEX_LINKS, SUMMARY_LINKS, StashKey

_FILES = StashKey[dict[str, str]]()
_VALUES = StashKey[dict[str, dict[str, str]]]()
_PAIRS = StashKey[Any]()

FILENAME = "similarity.html"
_LOCK = threading.Lock()

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Similarity</title>
<style>body{font-family:sans-serif;margin:2em}td,th{padding:.3em .8em;border-bottom:1px solid #ddd}</style></head><body>
<h1>Chapter {{ chapter }}: similarity (staff only)</h1>
<p>{{ count }} submissions compared; code similarity threshold {{ "%g"|format(100 * threshold) }}% of tokens (copydetect,
starter as boilerplate); identical wrong values on hidden checks that match no catalogued mistake.</p>
{% if pairs %}<table><thead><tr><th>Student</th><th>Student</th><th>Code</th><th>Identical wrong hidden values</th></tr></thead><tbody>
{% for p in pairs %}<tr><td><a href="{{ p.pages[0] }}">{{ p.a }}</a></td><td><a href="{{ p.pages[1] }}">{{ p.b }}</a></td>
<td>{{ p.code }}</td><td>{{ p.checks|join(", ") }}</td></tr>{% endfor %}
</tbody></table>{% else %}<p>No pair flagged.</p>{% endif %}
</body></html>
"""


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    group = parser.add_argument_group("similarity")
    group.add_argument(
        "--similarity", action="store_true", help=f"also write DIR/{FILENAME} (what 'grader similarity' does)"
    )
    group.add_argument(
        "--starter",
        default=None,
        metavar="FILE",
        help="the starter file, boilerplate for code similarity (default: the pack's starter)",
    )
    group.add_argument(
        "--similarity-threshold",
        type=float,
        default=0.6,
        metavar="SHARE",
        help="share of tokens two files must have in common to be flagged (default: 0.6)",
    )


def _wanted(config: Any) -> bool:
    return bool(config.option("similarity")) and config.command == "grade" and config.out_dir is not None


@hookimpl
def grader_configure(config: Any) -> None:
    if _wanted(config):
        try:
            import copydetect  # noqa: F401
        except ImportError:
            raise ConfigError(
                "--similarity: copydetect is not installed; pip install 'g14-grader[similarity]'"
            ) from None
        # The returned values are not kept in the gradebook: every submission runs again to be compared.
        config.options.regrade = True
        config.stash.setdefault(INDEX_LINKS, []).append(("Similarity (staff)", FILENAME))
        config.stash.setdefault(SUMMARY_LINKS, []).append(("Similarity (staff)", FILENAME))


@hookimpl
def grader_collection_finish(submissions: Any, collected: Any, config: Any) -> None:
    if _wanted(config):
        config.stash[_FILES] = {s.id: s.file for s in submissions if s.file and not s.problem}


@hookimpl(wrapper=True)
def grader_run_calls(submission: Any, calls: Any, config: Any) -> Any:
    """Keep a digest of each hidden check's returned values (never the values)."""
    outcome = yield
    if _wanted(config) and outcome is not None:
        collected = config.stash[COLLECTED]
        digests = {}
        for exercise, pc, got in collected.split(outcome.results):
            if pc.check.visibility == "visible":
                continue
            if not got or any(r.status != "returned" for r in got):
                continue
            text = json.dumps([plain_data(r.value) for r in got], sort_keys=True, allow_nan=True)
            digests[f"{exercise.id}/{pc.check.id}"] = hashlib.sha256(text.encode()).hexdigest()
        with _LOCK:
            config.stash.setdefault(_VALUES, {})[submission.id] = digests
    return outcome


def value_pairs(report: Any, digests: dict[str, dict[str, str]]) -> dict[tuple[str, str], list[str]]:
    """Pairs of students whose failed, undiagnosed hidden check returned identical values: the checks, by pair."""
    by_value: dict[tuple[str, str], list[str]] = {}
    for s in report.submissions:
        mine = digests.get(s.id, {})
        for e in s.exercises:
            for c in e.checks:
                key = f"{e.id}/{c.id}"
                if c.visibility != "visible" and c.status == "failed" and not c.diagnosis and key in mine:
                    by_value.setdefault((key, mine[key]), []).append(s.id)
    pairs: dict[tuple[str, str], list[str]] = {}
    for (key, _), ids in sorted(by_value.items()):
        for a, b in itertools.combinations(ids, 2):
            pairs.setdefault((a, b), []).append(key)
    return pairs


def code_pairs(files: dict[str, str], starter: str | None, threshold: float) -> dict[tuple[str, str], float]:
    """Pairs whose files share at least ``threshold`` of their tokens (the smaller of the two shares)."""
    from copydetect import CodeFingerprint, compare_files

    k, window = 25, 1
    boiler = None
    if starter and Path(starter).is_file():
        boiler = np.array(sorted(CodeFingerprint(starter, k, window, language="python").hashes))
    prints = {}
    for sid, path in files.items():
        try:
            prints[sid] = CodeFingerprint(path, k, window, boilerplate=boiler, language="python")
        except Exception:  # noqa: BLE001, S112 - an unreadable or untokenizable file is compared with nothing
            continue
    out = {}
    for a, b in itertools.combinations(prints, 2):
        _, (sa, sb), _ = compare_files(prints[a], prints[b])
        share = min(float(sa), float(sb))
        if share >= threshold:
            out[(a, b)] = round(share, 3)
    return out


@hookimpl
def grader_write_reports(report: Any, config: Any) -> None:
    """Write ``DIR/similarity.html``."""
    if not _wanted(config):
        return
    order = {s.id: i for i, s in enumerate(report.submissions)}
    files = {sid: f for sid, f in config.stash.get(_FILES, {}).items() if sid in order}
    threshold = float(config.option("similarity_threshold") or 0.6)
    code = code_pairs(files, config.option("starter") or str(config.pack.starter), threshold)
    values = value_pairs(report, config.stash.get(_VALUES, {}))
    slugs = slugs_of(report.submissions)
    pairs = []
    for a, b in sorted(set(code) | set(values), key=lambda p: (order[p[0]], order[p[1]])):
        pairs.append(
            {
                "a": a,
                "b": b,
                "pages": (f"{slugs[a]}.html", f"{slugs[b]}.html"),
                "code": f"{100 * code[(a, b)]:.0f}%" if (a, b) in code else "-",
                "checks": values.get((a, b), []),
            }
        )
    config.stash[_PAIRS] = pairs
    import jinja2  # here: only --similarity renders this page

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    try:
        write_atomic(
            config.out_dir / FILENAME,
            env.from_string(_PAGE).render(
                pairs=pairs, count=len(report.submissions), threshold=threshold, chapter=config.pack.chapter
            ),
        )
    except OSError as exc:
        raise UsageError(f"--out {config.out_dir}: cannot write {FILENAME} ({exc.strerror})") from None


@hookimpl
def grader_terminal_summary(report: Any, config: Any, write: Any) -> None:
    pairs = config.stash.get(_PAIRS)
    if pairs is not None:
        write(f"similarity: {len(pairs)} pair(s) flagged, see {config.out_dir / FILENAME}")
