"""The public checks as a file students can run anywhere: ``grader publish``.

Students have neither the hidden specs nor the reference. ``grader publish``
prepares the *visible* checks (their calls and expected values, which the
student may see anyway) and writes them to one JSON file; the course pack
ships it (its manifest's ``public``, e.g. ``exercises/public.json``), so ``grader check``
works in a student's own folder or CI with nothing else. Hidden checks are
only counted. Judging needs no reference: every check kind computes what it
needs when the check is prepared.

With a mutant catalogue (``--mutants``), each visible check also lists the
catalogued mistakes that fail it and what each returned there
(``"mistakes"``: name, misconception, chapter section, and the returned
data of every call): the diagnosis plugin reads them back
(`load_mistakes`), so ``grader check`` names the likely mistake in a
student's own folder, offline. That is data computed on visible inputs
only: no mutant code, no hidden input, no expected value of a hidden check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from grader._version import __version__
from grader.disclosure import is_public
from grader.errors import ConfigError
from grader.kinds import KindContext
from grader.models import Call, Check, Exercise, Prepared

if TYPE_CHECKING:
    from grader.collected import Collected

__all__ = ["FORMAT", "decode", "encode", "load_bundle", "load_mistakes", "publish", "visible_part"]

FORMAT = 1
"""Version of the bundle's layout."""


def encode(value: Any) -> Any:
    """Plain JSON data for a prepared expectation (arrays and tuples tagged).

    Raises
    ------
    TypeError
        For a value that is not numbers, strings, lists, tuples, dicts with
        string keys or numpy arrays.
    """
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) and not k.startswith("__") for k in value):
            raise TypeError(f"cannot publish a dict with keys {list(value)}")
        return {k: encode(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot publish a {type(value).__name__}")


def decode(data: Any) -> Any:
    """Inverse of `encode`."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if isinstance(data, dict):
        if "__ndarray__" in data:
            return np.asarray(data["__ndarray__"], dtype=data.get("dtype", "float64"))
        if "__tuple__" in data:
            return tuple(decode(v) for v in data["__tuple__"])
        return {k: decode(v) for k, v in data.items()}
    return data


def visible_part(collected: Any) -> Any:
    """The same `grader.grading.session.Collected` with only its visible checks prepared (what mutants run on)."""
    import dataclasses

    checks = tuple((ex, tuple(pc for pc in items if is_public(pc.check))) for ex, items in collected.checks)
    return dataclasses.replace(collected, checks=checks)


def _result(result: Any) -> dict[str, Any]:
    """One call result of a mistake: its data, or the exception it raised (diagnosis matches either)."""
    if result.status == "returned":
        return {"value": encode(result.value), "mutated": list(result.mutated_args)}
    return {
        "status": result.status,
        "type": result.error_type,
        "value_error": result.value_error,
        "message": result.message,
    }


def _mistakes(table: Any, exercise_id: str, check_id: str) -> list[dict[str, Any]]:
    if table is None:
        return []
    out = []
    for entry, results in table.rows.get((exercise_id, check_id), ()):
        out.append(
            {
                "name": entry.name,
                "degenerate": entry.degenerate,
                "misconception": entry.misconception,
                "section": entry.section,
                "results": [_result(r) for r in results],
            }
        )
    return out


def publish(collected: Any, table: Any = None) -> dict[str, Any]:
    """The visible checks of a `grader.grading.session.Collected`, prepared, as JSON data.

    Parameters
    ----------
    collected : grader.grading.session.Collected
    table : grader.builtin.diagnosis.DiagnosisTable, optional
        The catalogued mistakes failing each visible check, with their
        returned data (built on `visible_part` of ``collected``); each
        check then carries ``"mistakes"``, and the bundle ``"chapter_url"``.

    Returns
    -------
    dict
        JSON data; `dumps` gives its text.
    """
    exercises = []
    for exercise, items in collected.checks:
        checks = []
        for pc in items:
            c = pc.check
            if not is_public(c):
                continue
            checks.append(
                {
                    "id": c.id,
                    "kind": c.kind,
                    "function": c.function,
                    "points": c.points,
                    "visibility": c.visibility,
                    "hint": c.hint,
                    "timeout": c.timeout,
                    "description": c.description,
                    "params": encode(c.params),
                    "seed": c.seed,
                    "calls": [
                        {"function": call.function, "args": encode(list(call.args)), "timeout": call.timeout}
                        for call in pc.prepared.calls
                    ],
                    "expected": encode(pc.prepared.expected),
                    "shown_call": pc.prepared.shown_call,
                    "mistakes": _mistakes(table, exercise.id, c.id),
                }
            )
        exercises.append(
            {
                "id": exercise.id,
                "title": exercise.title,
                "section": exercise.section,
                "returns": {k: list(v) for k, v in exercise.returns.items()},
                "checks": checks,
            }
        )
    return {
        "format": FORMAT,
        "grader_version": __version__,
        "spec_hash": collected.spec_hash,
        "hidden_count": collected.hidden_count,
        "chapter_url": table.catalogue.chapter_url if table is not None else "",
        "exercises": exercises,
    }


def dumps(bundle: dict[str, Any]) -> str:
    """The bundle as text (stable: the same specs give the same bytes)."""
    return json.dumps(bundle, indent=1, sort_keys=True, allow_nan=True) + "\n"


_READ: dict[tuple[str, int, int, int], Any] = {}


def _read(path: Path) -> Any:
    """A bundle's JSON data, parsed once per process for the same file (its checks and its mistakes both read it).

    Keyed by the file's path, inode, size and modification time, so a file written again is read
    again. The data is never changed by its readers.
    """
    stat = Path(path).stat()
    key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key not in _READ:
        _READ.clear()  # one bundle at a time is plenty
        from grader.errors import ConfigError
        from grader.readers.jsonfile import read_json

        _READ[key] = read_json(path, str(path), "run 'grader publish' again", ConfigError, nonfinite=True)
    return _READ[key]


def load_bundle(path: Path, kinds: dict[str, Any]) -> tuple[Collected, int]:
    """Rebuild a `grader.grading.session.Collected` of the visible checks from a bundle.

    Returns
    -------
    (grader.grading.session.Collected, int)
        The visible checks, prepared, and the number of hidden checks.

    Raises
    ------
    grader.errors.ConfigError
        If the file is missing, not a bundle, or names an unknown check kind.
    """
    from grader.collected import Collected, PreparedCheck

    try:
        data = _read(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the public checks ({exc}); run 'grader publish' again") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"{path}: not a public-checks file of format {FORMAT}; run 'grader publish' again")
    exercises, prepared = [], []
    try:
        for ex in data["exercises"]:
            checks = tuple(
                Check(
                    id=c["id"],
                    kind=c["kind"],
                    function=c["function"],
                    points=c["points"],
                    visibility=c["visibility"],
                    hint=c["hint"],
                    timeout=c["timeout"],
                    description=c["description"],
                    params=decode(c["params"]),
                    seed=c["seed"],
                )
                for c in ex["checks"]
            )
            exercise = Exercise(
                id=ex["id"],
                title=ex["title"],
                section=ex["section"],
                path=str(path),
                checks=checks,
                returns={k: tuple(v) for k, v in ex["returns"].items()},
            )
            context = KindContext(exercise, {})
            items = []
            for check, c in zip(checks, ex["checks"]):
                kind = kinds.get(check.kind)
                if kind is None:
                    raise ConfigError(
                        f"{path}: check '{check.id}' needs the check kind '{check.kind}', which no plugin provides"
                    )
                calls = tuple(Call(k["function"], tuple(decode(k["args"])), k["timeout"]) for k in c["calls"])
                items.append(
                    PreparedCheck(check, kind, context, Prepared(calls, decode(c["expected"]), c["shown_call"]))
                )
            exercises.append(exercise)
            prepared.append((exercise, tuple(items)))
        return Collected(tuple(exercises), tuple(prepared), data["spec_hash"]), int(data.get("hidden_count", 0))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # a hand-edited or truncated file
        raise ConfigError(
            f"{path}: not a public-checks file of format {FORMAT} ({type(exc).__name__}: {str(exc)[:80]}); "
            "run 'grader publish' again"
        ) from None


def load_mistakes(path: Path) -> Any:
    """The precomputed diagnosis of a bundle: each visible check's failing mistakes and their results.

    Returns
    -------
    (dict, grader.packs.catalogue.Catalogue) or None
        The rows (``(exercise id, check id)`` to a list of (`grader.packs.catalogue.Entry`,
        results)) and the catalogue they come from, as the diagnosis plugin's table holds
        them; None when the bundle lists no mistakes (published without a
        catalogue) or cannot be read.
    """
    from grader.models import CallResult
    from grader.packs.catalogue import Catalogue, Entry

    try:
        data = _read(path)
        rows: dict[tuple[str, str], list[Any]] = {}
        entries: dict[str, Entry] = {}
        for ex in data["exercises"]:
            for c in ex["checks"]:
                for m in c.get("mistakes", ()):
                    entry = entries.setdefault(
                        m["name"],
                        Entry(
                            name=str(m["name"]),
                            kind="mutant",
                            file="",
                            sha256="",
                            misconception=str(m["misconception"]),
                            section=str(m["section"]),
                            degenerate=bool(m.get("degenerate", False)),
                        ),
                    )
                    results = tuple(
                        CallResult("returned", decode(r["value"]), mutated_args=tuple(r["mutated"]))
                        if r.get("status", "returned") == "returned"
                        else CallResult(
                            str(r["status"]),
                            error_type=str(r.get("type", "")),
                            value_error=bool(r.get("value_error")),
                            message=str(r.get("message", "")),
                        )
                        for r in m["results"]
                    )
                    rows.setdefault((ex["id"], c["id"]), []).append((entry, results))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not rows:
        return None
    return rows, Catalogue(str(path), tuple(entries.values()), str(data.get("chapter_url", "")))
