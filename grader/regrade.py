"""``grader diff OLD.json NEW.json``: who changed between two results files, by how much, on which checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.errors import UsageError

__all__ = ["diff_results", "load_results"]


def load_results(path: str) -> dict[str, dict[str, Any]]:
    """The submissions of a ``results.json``, by id.

    Raises
    ------
    grader.errors.UsageError
        If the file cannot be read or is not a grader results file.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {s["id"]: s for s in data["submissions"]}
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the file ({exc.strerror})") from None
    except (ValueError, KeyError, TypeError):
        raise UsageError(
            f"{path}: not a grader results file (results.json); give the results of 'grader grade'"
        ) from None


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
