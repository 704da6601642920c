"""``grader diff OLD.json NEW.json``: who changed between two results files, by how much, on which checks."""

from __future__ import annotations

import math
from typing import Any

from grader.errors import UsageError
from grader.readers.jsonfile import read_json

__all__ = ["diff_results", "load_results"]


def load_results(path: str) -> dict[str, dict[str, Any]]:
    """The submissions of a ``results.json``, by id, each checked for what ``diff`` reads.

    Raises
    ------
    grader.errors.UsageError
        If the file cannot be read, is not bounded JSON (`grader.readers.jsonfile.read_json`), or is not a
        grader results file: ``submissions`` a list of objects, each with a text ``id``, a finite
        number ``score`` and, if given, ``exercises`` whose ``checks`` have a text ``id`` and
        ``status`` and a finite number ``score``. The message names the file, the key and the fix.
    """
    fix = "give the results.json of 'grader grade'"
    data = read_json(path, path, fix)
    if type(data) is not dict or type(data.get("submissions")) is not list:
        raise UsageError(f"{path}: submissions: missing or not a list; not a grader results file; {fix}")
    out: dict[str, dict[str, Any]] = {}
    for i, sub in enumerate(data["submissions"]):
        where = f"submissions[{i}]"
        if type(sub) is not dict:
            raise UsageError(f"{path}: {where}: not an object; {fix}")
        if type(sub.get("id")) is not str:
            raise UsageError(f"{path}: {where}.id: missing or not text; {fix}")
        _number(path, f"{where}.score", sub.get("score"), fix)
        exercises = sub.get("exercises", [])
        if type(exercises) is not list:
            raise UsageError(f"{path}: {where}.exercises: not a list; {fix}")
        for j, ex in enumerate(exercises):
            if type(ex) is not dict or type(ex.get("id")) is not str or type(ex.get("checks")) is not list:
                raise UsageError(f"{path}: {where}.exercises[{j}]: not an exercise (id, checks); {fix}")
            for k, c in enumerate(ex["checks"]):
                at = f"{where}.exercises[{j}].checks[{k}]"
                if type(c) is not dict or type(c.get("id")) is not str or type(c.get("status")) is not str:
                    raise UsageError(f"{path}: {at}: not a check (id, status, score); {fix}")
                _number(path, f"{at}.score", c.get("score"), fix)
        if sub["id"] in out:
            raise UsageError(f"{path}: {where}.id: {sub['id']!r} is listed twice; {fix}")
        out[sub["id"]] = sub
    return out


def _number(path: str, key: str, value: Any, fix: str) -> None:
    """Refuse a score that is not a finite number (a hand-edited file: text, null, a boolean)."""
    if type(value) not in (int, float) or not math.isfinite(value):
        shown = "missing" if value is None else f"{str(value)[:40]!r} is not a number"
        raise UsageError(f"{path}: {key}: {shown}; {fix}")


def _checks(sub: dict[str, Any]) -> dict[str, tuple[str, float]]:
    return {f"{e['id']}/{c['id']}": (c["status"], c["score"]) for e in sub.get("exercises", []) for c in e["checks"]}


def diff_results(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]) -> list[str]:
    """One line per student whose score or checks changed, then a count line.

    Returns
    -------
    list of str
        ``alice: 7 -> 9 (+2): G14.02/zero-scores failed -> passed (+2)``;
        ``bob: only in the old results``; the last line counts them.
    """
    lines = []
    changed = 0
    for sid in [*old, *[s for s in new if s not in old]]:
        if sid not in new:
            lines.append(f"{sid}: only in the old results ({old[sid]['score']:g})")
            changed += 1
            continue
        if sid not in old:
            lines.append(f"{sid}: only in the new results ({new[sid]['score']:g})")
            changed += 1
            continue
        a, b = old[sid], new[sid]
        ca, cb = _checks(a), _checks(b)
        moved = []
        for key in [*ca, *[k for k in cb if k not in ca]]:
            if ca.get(key) != cb.get(key):
                sa, pa = ca.get(key, ("absent", 0.0))
                sb, pb = cb.get(key, ("absent", 0.0))
                moved.append(
                    f"{key} {sa} -> {sb} ({pb - pa:+g})" if sa != sb else f"{key} {pa:g} -> {pb:g} ({pb - pa:+g})"
                )
        if a["score"] == b["score"] and not moved and a.get("status") == b.get("status"):
            continue
        changed += 1
        delta = b["score"] - a["score"]
        lines.append(
            f"{sid}: {a['score']:g} -> {b['score']:g} ({delta:+g})" + (": " + "; ".join(moved) if moved else "")
        )
    lines.append(f"{changed} of {len(set(old) | set(new))} student(s) changed")
    return lines
