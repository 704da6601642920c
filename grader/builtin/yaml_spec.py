"""Built-in plugin: load exercise specs from YAML files.

Specs are parsed with a `yaml.SafeLoader` (no Python tags, no aliases, no
duplicate keys) and validated with a JSON Schema (a valid spec without
importing jsonschema: `grader.packs.plainly_valid`); every error names the file
and the key, e.g. ``exercises/G14.02.yaml: checks[3] 'shift'.points: 'x'
is not of type 'number'``.

A check's seed is the spec's (``seed`` of the check, else the exercise's
``seed * 1000 + index``); for a check that is not ``visible`` it is then
derived with the course secret (`grader.config.secret`), so that the specs alone
do not reproduce hidden inputs. ``--secret-file FILE`` names the key file;
without any secret ``grader grade`` warns once.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.config.secret import WARNING, CourseSecret, course_secret
from grader.errors import SpecError
from grader.grading.session import CHECK_KINDS
from grader.markers import hookimpl
from grader.models import VISIBILITIES, Check, Exercise
from grader.packs import plainly_valid
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_SECRET_WARNED = StashKey[bool]()

MAX_INTEGER = 2**53
"""Largest magnitude of an integer in a spec (what a float holds exactly)."""

CHECK_COMMON_KEYS = ("id", "kind", "function", "description", "points", "visibility", "hint", "timeout", "args", "seed")
DEFAULTABLE = ("points", "visibility", "hint", "timeout")

_CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "kind", "function"],
    "properties": {
        "id": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
            "description": "give an id of letters, digits and . _ - that starts with a letter or digit",
        },
        "kind": {"type": "string", "minLength": 1, "description": "give a check kind, e.g. compare"},
        "function": {
            "type": "string",
            "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$",
            "description": "give the name of a reference function, e.g. softmax",
        },
        "description": {"type": "string", "description": "give text"},
        "points": {"type": "number", "exclusiveMinimum": 0, "description": "give a number > 0"},
        "visibility": {"enum": list(VISIBILITIES), "description": f"give one of {', '.join(VISIBILITIES)}"},
        "hint": {"type": "string", "minLength": 1, "description": "give non-empty text"},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 600,
            "description": "give seconds per call: a number > 0 and at most 600",
        },
        "args": {
            "type": "object",
            "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
            "description": "give a mapping from the function's parameter names to values or generators",
        },
        "seed": {"type": "integer", "minimum": 0, "description": "give an integer >= 0"},
    },
}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["exercise", "title", "section", "seed", "checks"],
    "properties": {
        "exercise": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
            "description": "give an id of letters, digits and . _ -, e.g. ch3.02",
        },
        "title": {"type": "string", "minLength": 1, "description": "give non-empty text"},
        "section": {"type": "string", "minLength": 1, "description": "give the chapter section's heading"},
        "seed": {"type": "integer", "minimum": 0, "description": "give an integer >= 0"},
        "returns": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "description": "give a mapping from function names to lists of part names, e.g. {solve: [value, steps]}",
        },
        "defaults": {
            "type": "object",
            "additionalProperties": False,
            "properties": {k: _CHECK_SCHEMA["properties"][k] for k in DEFAULTABLE},
        },
        "checks": {"type": "array", "minItems": 1, "items": _CHECK_SCHEMA, "description": "give a list of checks"},
    },
}
"""JSON Schema of an exercise spec (kind-specific check keys are checked
against each kind's declared ``params`` after the schema passes)."""


def _nonfinite(data: Any, path: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], str] | None:
    """The first number that is not finite (or an integer over `MAX_INTEGER`): its path and what to say.

    The ``args`` of a ``raises`` check are not looked at: invalid input
    (``.nan`` scores) is what such a check is about.
    """
    if isinstance(data, bool):
        return None
    if isinstance(data, float) and math.isnan(data):
        return path, ".nan is not a finite number; write a number"
    if isinstance(data, float) and data in (float("inf"), float("-inf")):
        return path, f"{'-' if data < 0 else ''}.inf is not a finite number; write a finite number"
    if isinstance(data, int) and abs(data) > MAX_INTEGER:
        return path, f"a {len(str(abs(data)))}-digit integer is too large (at most 2**53); write a smaller number"
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        if key == "args" and len(path) == 2 and path[0] == "checks" and data.get("kind") == "raises":
            continue  # a raises check's arguments are meant to be invalid input, NaN included
        found = _nonfinite(value, (*path, key))
        if found:
            return found
    return None


def _schema_errors(schema: dict[str, Any], data: Any) -> list[Any]:
    """jsonschema's errors for ``data``, in a stable order (asked only when `plainly_valid` is not sure)."""
    import jsonschema  # here, not at the top: a valid spec is checked without it (issue 16)

    errors = jsonschema.Draft202012Validator(schema).iter_errors(data)
    return sorted(errors, key=lambda e: (list(map(str, e.absolute_path)), e.message))


def _fix(schema: dict[str, Any], error: Any) -> str:
    """The ``description`` of the schema part an error is about (what to write), or ""."""
    part: Any = schema
    found = ""
    for step in error.absolute_schema_path:
        try:
            part = part[step]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(part, dict) and isinstance(part.get("description"), str):
            found = part["description"]
    return found


def _where(data: dict[str, Any], error_path: list[Any]) -> str:
    """Render a jsonschema error path as ``checks[3] 'id'.points``."""
    out = ""
    for i, part in enumerate(error_path):
        if isinstance(part, int):
            out += f"[{part}]"
            if i >= 1 and error_path[i - 1] == "checks":
                try:
                    cid = data["checks"][part].get("id")
                except (AttributeError, IndexError, KeyError, TypeError):
                    cid = None
                if isinstance(cid, str):
                    out += f" '{cid}'"
        else:
            out += ("." if out else "") + str(part)
    return out


def exercise_from_data(path: str, data: Any, kinds: dict[str, Any], secret: CourseSecret | None = None) -> Exercise:
    """Validate spec data and build an `Exercise`.

    Parameters
    ----------
    path : str
        The spec file, for error messages.
    data : object
        What `grader.readers.yamlfile.parse_yaml` returned.
    kinds : dict of str to check kind
        Known check kinds by name; their ``params`` say which extra keys a
        check of that kind accepts and requires.
    secret : grader.config.secret.CourseSecret, optional
        Derives the seeds of checks that are not ``visible``
        (`grader.config.secret.CourseSecret.hidden_seed`); by default (no secret)
        every check keeps its spec seed.

    Returns
    -------
    grader.models.Exercise

    Raises
    ------
    grader.errors.SpecError
        On the first problem found: a schema violation, a duplicate check id,
        an unknown check kind, a missing or unknown kind-specific key.
    """
    if not isinstance(data, dict):
        raise SpecError(path, "", "a spec must be a mapping with keys exercise, title, section, seed and checks")
    bad = _nonfinite(data)
    if bad is not None:
        raise SpecError(path, _where(data, list(bad[0])) or "top level", bad[1])
    errors = [] if plainly_valid(data, SCHEMA) else _schema_errors(SCHEMA, data)
    if errors:
        err = errors[0]
        if err.validator == "additionalProperties":
            fix = "the keys are " + ", ".join(err.schema.get("properties", {}))
        elif err.validator == "required":
            fix = "add it"
        else:
            fix = _fix(SCHEMA, err)
        raise SpecError(
            path, _where(data, list(err.absolute_path)) or "top level", err.message + (f"; {fix}" if fix else "")
        )
    secret = secret or CourseSecret()
    defaults = data.get("defaults", {})
    returns = {fn: tuple(names) for fn, names in data.get("returns", {}).items()}
    checks: list[Check] = []
    seen: set[str] = set()
    for index, raw in enumerate(data["checks"]):
        where = f"checks[{index}] '{raw['id']}'"
        if raw["id"] in seen:
            raise SpecError(path, where, f"duplicate check id '{raw['id']}'; ids must be unique in an exercise")
        seen.add(raw["id"])
        kind = kinds.get(raw["kind"])
        if kind is None:
            known = ", ".join(sorted(kinds))
            raise SpecError(path, f"{where}.kind", f"unknown check kind '{raw['kind']}' (known kinds: {known})")
        merged = {**defaults, **raw}
        for key in DEFAULTABLE:
            if key not in merged:
                raise SpecError(path, where, f"missing '{key}': give it in the check or in 'defaults'")
        params = _kind_params(path, where, kind, raw)
        seed = int(raw.get("seed", data["seed"] * 1000 + index))
        if merged["visibility"] != "visible":  # published checks must match: visible ones keep the spec seed
            seed = secret.hidden_seed(data["exercise"], raw["id"], seed)
        checks.append(
            Check(
                id=raw["id"],
                kind=raw["kind"],
                function=raw["function"],
                points=float(merged["points"]),
                visibility=merged["visibility"],
                hint=merged["hint"],
                timeout=float(merged["timeout"]),
                description=raw.get("description", ""),
                args=dict(raw.get("args", {})),
                params=params,
                seed=seed,
            )
        )
    return Exercise(
        id=data["exercise"],
        title=data["title"],
        section=data["section"],
        path=str(path),
        checks=tuple(checks),
        returns=returns,
    )


def _kind_params(path: str, where: str, kind: Any, raw: dict[str, Any]) -> dict[str, Any]:
    """A check's kind-specific keys, checked against its kind's ``params`` and ``schema``.

    Raises
    ------
    grader.errors.SpecError
        On an unknown key (with the nearest known one), a missing required key, or a schema violation.
    """
    params = {k: v for k, v in raw.items() if k not in CHECK_COMMON_KEYS}
    accepted = dict(getattr(kind, "params", {}))
    for key in params:
        if key not in accepted:
            allowed = ", ".join(sorted(accepted)) or "none"
            import difflib  # only for a misspelled key

            near = difflib.get_close_matches(str(key), [*CHECK_COMMON_KEYS, *accepted], n=1, cutoff=0.75)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise SpecError(path, f"{where}.{key}", f"unknown key for kind '{kind.name}' (its keys: {allowed}){hint}")
    for key, need in accepted.items():
        if need == "required" and key not in params:
            raise SpecError(path, where, f"kind '{kind.name}' needs key '{key}': add it")
    kind_schema = getattr(kind, "schema", None)
    if kind_schema and not plainly_valid(params, kind_schema):  # a kind without a schema: the checks above
        kind_errors = _schema_errors(kind_schema, params)
        if kind_errors:
            err = kind_errors[0]
            key = ".".join(map(str, err.absolute_path)) if err.absolute_path else ""
            fix = _fix(kind_schema, err)
            raise SpecError(
                path,
                f"{where}.{key}" if key else where,
                f"{err.message}" + (f"; {fix}" if fix else "") + f" (kind '{kind.name}')",
            )
    return params


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity", "audit", "validate", "merge"):
        return
    parser.add_argument(
        "--secret-file",
        metavar="FILE",
        help="the course secret's key file, which makes hidden inputs unpredictable from the specs "
        "(default: $GRADER_COURSE_SECRET_FILE, else $GRADER_COURSE_SECRET, else none)",
    )


@hookimpl(trylast=True)
def grader_load_exercise(path: str, config: Config) -> Exercise | None:
    """Load ``*.yaml`` / ``*.yml`` spec files; leave other files to other plugins.

    Raises
    ------
    grader.errors.UsageError
        If the course secret is set but cannot be read or is too short.
    """
    if Path(path).suffix.lower() not in (".yaml", ".yml"):
        return None
    kinds = config.stash[CHECK_KINDS]
    secret = course_secret(config)
    # here: 'grader check' with the public checks reads no YAML (issue 16), and a spec parsed before
    # needs no PyYAML (issue 29)
    from grader.readers.keptyaml import parse_yaml_kept

    exercise = exercise_from_data(path, parse_yaml_kept(path), kinds, secret)
    if (
        secret.is_default
        and config.command == "grade"
        and any(c.visibility != "visible" for c in exercise.checks)
        and not config.stash.get(_SECRET_WARNED)
    ):
        config.stash[_SECRET_WARNED] = True
        print(f"grader: warning: {WARNING}", file=sys.stderr)
    return exercise
