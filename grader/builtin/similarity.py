"""Built-in plugin: similarity between submissions (``grader similarity``, ``grader grade --similarity``).

Two signals, in ``DIR/similarity.html`` (linked from the class index and
the summary page; staff only, no input or value is shown), each pair with
the reason it is flagged:

* code: copydetect's token fingerprints (winnowing; variable and function
  names do not count), with the starter file (``--starter``, default
  ``submissions/starter/attention.py``) as boilerplate; a pair is flagged
  when both files share at least ``--similarity-threshold`` of their tokens.
  This runs off the grader's critical path, in a process of its own
  (``grader/child/similarity_worker.py``) started once the class is collected,
  while the submissions are graded; each file has a budget (`MAX_BYTES`,
  `MAX_TOKENS`, `MAX_SECONDS` of CPU time), and the page and the terminal
  name every file cut;
* values, what only a numeric grader sees: two students whose failing
  hidden check returned byte-identical values (the JSON of every call's
  result) that match no catalogued mistake (no diagnosis), and that no
  placeholder gives (`placeholder`: an argument returned unchanged, a
  constant, zeros, the same value for every call). Renaming variables does
  not hide that.

The values are compared as they come back (only their SHA-256 is kept), so
every submission is graded again (``--regrade``) in such a run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.collected import COLLECTED
from grader.errors import ConfigError, UsageError
from grader.execution.boundary import plain_data
from grader.fileio import write_atomic
from grader.intake.naming import slugs_of
from grader.markers import hookimpl
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_FILES = StashKey[dict[str, str]]()
_VALUES = StashKey[dict[str, dict[str, str]]]()
_PAIRS = StashKey[Any]()
_CODE = StashKey["CodeSimilarity"]()
_CUT = StashKey[list[tuple[str, str]]]()

MAX_BYTES = 256 << 10
"""Bytes of a file compared for code similarity (its first 256 KiB: a chapter's file is ~10 KiB)."""
MAX_TOKENS = 60_000
"""Tokens of a file fingerprinted (its first ones): fingerprinting and comparing cost grows with them."""
MAX_SECONDS = 0.5
"""CPU seconds a file's fingerprint may take; a file over it is compared with nothing (and named)."""
WORKER = str(Path(__file__).resolve().parent.parent / "child" / "similarity_worker.py")

FILENAME = "similarity.html"
_LOCK = threading.Lock()

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Similarity</title>
<style>body{font-family:sans-serif;margin:2em}td,th{padding:.3em .8em;border-bottom:1px solid #ddd}</style></head><body>
<h1>Chapter {{ chapter }}: similarity (staff only)</h1>
<p>{{ count }} submissions compared; code similarity threshold {{ "%g"|format(100 * threshold) }}% of tokens (copydetect,
starter as boilerplate); identical wrong values on hidden checks that match no catalogued mistake.</p>
{% if pairs %}<table><thead><tr><th>Student</th><th>Student</th><th>Code</th><th>Identical wrong hidden values</th><th>Why flagged</th></tr></thead><tbody>
{% for p in pairs %}<tr><td><a href="{{ p.pages[0] }}">{{ p.a }}</a></td><td><a href="{{ p.pages[1] }}">{{ p.b }}</a></td>
<td>{{ p.code }}</td><td>{{ p.checks|join(", ") }}</td><td>{{ p.why }}</td></tr>{% endfor %}
</tbody></table>{% else %}<p>No pair flagged.</p>{% endif %}
{% if cut %}<h2>Files cut for code similarity</h2><ul>
{% for sid, why in cut %}<li>{{ sid }}: {{ why }}</li>{% endfor %}</ul>{% endif %}
{% if failed %}<p>Code similarity could not be computed: {{ failed }}</p>{% endif %}
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
def grader_configure(config: Config) -> None:
    if _wanted(config):
        try:
            import copydetect  # noqa: F401
        except ImportError:
            raise ConfigError(
                "--similarity: copydetect is not installed; pip install 'grader-harness[similarity]'"
            ) from None
        # The returned values are not kept in the gradebook: every submission runs again to be compared.
        config.options.regrade = True


@hookimpl
def grader_report_links(config: Config, page: str) -> list[tuple[str, str]] | None:
    """The class index and the summary page link to the similarity page (``--similarity``)."""
    return [("Similarity (staff)", FILENAME)] if _wanted(config) else None


@hookimpl
def grader_collection_finish(submissions: Any, collected: Any, config: Config) -> None:
    """Start the code comparison in its own process: it runs while the submissions are graded."""
    if _wanted(config):
        files = {s.id: s.file for s in submissions if s.file and not s.problem}
        config.stash[_FILES] = files
        threshold = float(config.option("similarity_threshold") or 0.6)
        starter = config.option("starter") or str(config.pack.starter)
        config.stash[_CODE] = CodeSimilarity(files, starter, threshold)


@hookimpl
def grader_unconfigure(config: Config) -> None:
    code = config.stash.pop(_CODE, None)
    if code is not None:
        code.stop()


class CodeSimilarity:
    """The code comparison of a class, running in a process of its own (``grader/child/similarity_worker.py``).

    Parameters
    ----------
    files : dict of str to str
        Submission id to its file.
    starter : str or None
        The starter file (boilerplate), if any.
    threshold : float
        Share of tokens (0-1) two files must have in common to be a pair.
    max_bytes, max_tokens : int
        Each file's budget: its first bytes read, its first tokens fingerprinted.
    max_seconds : float
        CPU seconds each file's fingerprint may take.
    """

    def __init__(
        self,
        files: dict[str, str],
        starter: str | None,
        threshold: float,
        max_bytes: int = MAX_BYTES,
        max_tokens: int = MAX_TOKENS,
        max_seconds: float = MAX_SECONDS,
    ) -> None:
        request = {
            "files": [[sid, os.path.abspath(path)] for sid, path in files.items()],
            "starter": os.path.abspath(starter) if starter else None,
            "threshold": threshold,
            "max_bytes": max_bytes,
            "max_tokens": max_tokens,
            "max_seconds": max_seconds,
        }
        self.failed = ""
        self._answer: dict[str, Any] | None = None
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._request = json.dumps(request).encode()
        # Written and read by a thread: the grader's own thread never waits on the worker's pipes.
        self._thread = threading.Thread(target=self._talk, name="grader-similarity", daemon=True)
        self._thread.start()

    def _talk(self) -> None:
        try:
            out, err = self.proc.communicate(self._request)
        except (OSError, ValueError) as exc:
            self.failed = f"the comparing process failed ({type(exc).__name__})"
            return
        if self.proc.returncode != 0:
            last = err.decode(errors="replace").strip().splitlines()
            self.failed = f"the comparing process ended with code {self.proc.returncode}" + (
                f" ({last[-1][:200]})" if last else ""
            )
            return
        try:
            self._answer = json.loads(out)
        except ValueError:
            self.failed = "the comparing process answered unreadably"

    def result(self) -> tuple[dict[tuple[str, str], float], list[tuple[str, str]]]:
        """Wait for the comparison; the pairs over the threshold (share of tokens) and the files cut (id, why)."""
        self._thread.join()
        if self._answer is None:
            return {}, []
        pairs = {(str(a), str(b)): float(share) for a, b, share in self._answer.get("pairs", [])}
        cut = [(str(sid), str(why)) for sid, why in self._answer.get("cut", [])]
        return pairs, cut

    def stop(self) -> None:
        """End the worker if it still runs (the run stopped early)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self._thread.join(timeout=5.0)


@hookimpl(wrapper=True)
def grader_run_calls(submission: Any, calls: Any, config: Config) -> Any:
    """Keep a digest of each hidden check's returned values (never the values); none of a catalogue entry's."""
    outcome = yield
    if _wanted(config) and outcome is not None and not submission.reference:
        collected = config.stash[COLLECTED]
        digests = {}
        for exercise, pc, got in collected.split(outcome.results):
            if pc.check.visibility == "visible":
                continue
            if not got or any(r.status != "returned" for r in got):
                continue
            values = [plain_data(r.value) for r in got]
            if placeholder(values, [c.args for c in pc.prepared.calls]):
                continue  # what any unfinished file returns: no sign of shared work
            text = json.dumps(values, sort_keys=True, allow_nan=True)
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


def _numbers(value: Any) -> list[Any] | None:
    """Every number (or None, bool) in a value of plain data, flattened; None if it holds anything else."""
    out: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list | tuple):
            stack.extend(item)
        elif item is None or isinstance(item, bool | int | float):
            out.append(item)
        else:
            return None
    return out


def _same(a: Any, b: Any) -> bool:
    """Whether two values of plain data hold the same numbers in the same shape (``1`` equals ``1.0``)."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return False
    return bool(a == b) or (a != a and b != b)  # NaN is the same as NaN here


def _placeholder_value(value: Any, args: Sequence[Any]) -> bool:
    """Whether one returned value is what a placeholder gives: an argument, a constant, zeros, nothing."""
    if any(_same(value, a) for a in args):
        return True  # an argument returned unchanged
    numbers = _numbers(value)
    if numbers is not None:
        if not numbers or value is None:
            return True  # None, an empty list
        if len(numbers) > 1 and all(_same(n, numbers[0]) for n in numbers):
            return True  # zeros, ones, any constant fill
        if len(numbers) == 1 and numbers[0] in (0, 1, -1, None):
            return True  # return 0, return 1.0, return None
    if isinstance(value, list | tuple) and 1 < len(value) <= 4 and all(isinstance(v, list | tuple) for v in value):
        return all(_placeholder_value(v, args) for v in value)  # a tuple of parts, each a placeholder
    return False


def placeholder(values: Sequence[Any], args: Sequence[Sequence[Any]]) -> bool:
    """Whether a check's returned values are what any placeholder gives, so sharing them shows nothing.

    Parameters
    ----------
    values : sequence
        Each call's returned value, as plain data (`grader.execution.boundary.plain_data`).
    args : sequence of sequence
        Each call's arguments, in the same order.

    Returns
    -------
    bool
        True when every call returned an argument unchanged, a constant
        (zeros, ones, any constant fill, 0, 1, -1, None) or nothing; or
        when a check of several calls with different arguments got the same
        value from each (a function that ignores its input).
    """
    if all(_placeholder_value(v, [plain_data(a) for a in a_]) for v, a_ in zip(values, args, strict=False)):
        return True
    distinct_args = len({json.dumps(plain_data(list(a)), sort_keys=True, default=str) for a in args}) > 1
    return len(values) > 1 and distinct_args and all(_same(v, values[0]) for v in values)


def code_pairs(files: dict[str, str], starter: str | None, threshold: float) -> dict[tuple[str, str], float]:
    """Pairs whose files share at least ``threshold`` of their tokens (the smaller of the two shares).

    Computed in a process of its own, each file within its budget (`CodeSimilarity`); the files cut
    are left out of this answer (see `CodeSimilarity.result`).
    """
    return CodeSimilarity(files, starter, threshold).result()[0]


def _why(code: float | None, checks: Sequence[str]) -> str:
    """Why a pair is flagged, in words."""
    reasons = []
    if code is not None:
        reasons.append(f"the files share {100 * code:.0f}% of their tokens (starter excluded)")
    if checks:
        reasons.append(
            f"both returned the same wrong values on {len(checks)} hidden check(s), values that match no "
            "catalogued mistake and that no placeholder gives (not an argument, a constant or zeros)"
        )
    return "; ".join(reasons)


@hookimpl
def grader_write_reports(report: Any, config: Config) -> None:
    """Write ``DIR/similarity.html``."""
    if not _wanted(config):
        return
    order = {s.id: i for i, s in enumerate(report.submissions)}
    threshold = float(config.option("similarity_threshold") or 0.6)
    running = config.stash.get(_CODE)
    if running is None:  # collected by no run of this plugin (a merge): compare now
        files = {sid: f for sid, f in config.stash.get(_FILES, {}).items() if sid in order}
        running = config.stash[_CODE] = CodeSimilarity(
            files, config.option("starter") or str(config.pack.starter), threshold
        )
    found, cut = running.result()
    code = {pair: share for pair, share in found.items() if pair[0] in order and pair[1] in order}
    cut = [(sid, why) for sid, why in cut if sid in order]
    config.stash[_CUT] = cut
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
                "why": _why(code.get((a, b)), values.get((a, b), [])),
            }
        )
    config.stash[_PAIRS] = pairs
    import jinja2  # here: only --similarity renders this page

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    assert config.out_dir is not None  # _wanted
    try:
        write_atomic(
            config.out_dir / FILENAME,
            env.from_string(_PAGE).render(
                pairs=pairs,
                count=len(report.submissions),
                threshold=threshold,
                chapter=config.pack.chapter,
                cut=cut,
                failed=running.failed,
            ),
        )
    except OSError as exc:
        raise UsageError(f"--out {config.out_dir}: cannot write {FILENAME} ({exc.strerror})") from None


@hookimpl
def grader_terminal_summary(report: Any, config: Config, write: Any) -> None:
    pairs = config.stash.get(_PAIRS)
    if pairs is not None and config.out_dir is not None:
        write(f"similarity: {len(pairs)} pair(s) flagged, see {config.out_dir / FILENAME}")
        cut = config.stash.get(_CUT, [])
        if cut:
            shown = "; ".join(f"{sid} ({why})" for sid, why in cut[:5]) + (" ..." if len(cut) > 5 else "")
            write(f"similarity: {len(cut)} file(s) cut for code similarity: {shown}")
