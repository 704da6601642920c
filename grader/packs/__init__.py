"""Course packs: what the harness grades, found and loaded.

A course pack is one chapter's material: a manifest (``course.yaml``), the
exercise specs, the reference, the starter, the mutant catalogue, sample
submissions, the public checks and, optionally, a plugin with the pack's own
check kinds. The harness (everything else in ``grader``) names no chapter: it
reads the submission's file name, the titles and the paths from the loaded
`Pack`.

A pack is found, in this order:

1. ``--pack DIR`` (a folder holding ``course.yaml``);
2. the one package registered under the `ENTRY_POINT_GROUP` entry-point group
   (a Python package whose folder holds ``course.yaml``), when exactly one
   is installed; with several, ``--pack`` picks one by id or folder.

The manifest's keys (paths are relative to the pack's folder)::

    id: g14                              # letters, digits, - and _
    title: Attention, embeddings and transformer reasoning
    chapter: G14                         # how pages and terminals name it
    chapter_url: ""                      # optional, for section links
    sections: {G14.01: The central question, ...}   # optional
    submission: {file: attention.py, module: attention, notebook: attention.ipynb}
    functions: [softmax, attention, ...] # what students write
    imports: [numpy]                     # modules students may import beside the standard library
    distribution: g14-grader             # the student package's name (pip)
    specs: specs                         # folder of *.yaml specs
    reference: reference/attention.py
    starter: starter/attention.py
    mutants: mutants                     # optional: catalogue.yaml and <name>/<file>
    samples: submissions                 # optional
    public: public.json                  # the public checks ('grader publish')
    plugin: kinds.py                     # optional: a module of grader hooks (exercises/kinds.py at the root course)
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.errors import ConfigError, describe_failure
from grader.readers.entrypoints import entry_points

__all__ = [
    "ENTRY_POINT_GROUP",
    "MANIFEST",
    "Pack",
    "course_root",
    "discover_course",
    "find_pack",
    "installed_packs",
    "load_pack",
    "mutants_dir",
    "pack_option",
    "reference_file",
    "shown",
    "specs_dir",
]

ENTRY_POINT_GROUP = "grader.packs"
"""Entry-point group of installed packs: ``name = "package"``, the package's folder holding `MANIFEST`."""
MANIFEST = "course.yaml"
"""The manifest's file name in a pack's folder."""
COURSE_VARIABLE = "GRADER_COURSE"
"""The environment variable naming the course when no ``--pack`` does (a folder or an installed id)."""
MAX_MANIFEST_BYTES = 256 << 10
"""Largest manifest read (256 KiB)."""

_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_REL = {"type": "string", "minLength": 1, "description": "give a path relative to the pack's folder"}
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "title", "chapter", "submission", "functions", "specs", "reference"],
    "properties": {
        "id": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9][A-Za-z0-9_-]*$",
            "description": "give an id of letters, digits, - and _, e.g. ch3",
        },
        "title": {"type": "string", "minLength": 1, "description": "give the chapter's title"},
        "chapter": {"type": "string", "minLength": 1, "description": "give the chapter's short name, e.g. CH3"},
        "chapter_url": {"type": "string", "description": 'give the chapter\'s web address, or ""'},
        "sections": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "give a mapping from exercise ids to section headings",
        },
        "submission": {
            "type": "object",
            "additionalProperties": False,
            "required": ["file"],
            "properties": {
                "file": {
                    "type": "string",
                    "pattern": r"^[A-Za-z_][A-Za-z0-9_]*\.py$",
                    "description": "give the file students hand in, e.g. solution.py",
                },
                "module": {"type": "string", "pattern": _NAME, "description": "give a module name, e.g. solution"},
                "notebook": {
                    "type": "string",
                    "pattern": r"^[A-Za-z_][A-Za-z0-9_]*\.ipynb$",
                    "description": "give the notebook's file name, e.g. solution.ipynb",
                },
            },
            "description": "give {file: NAME.py}, optionally with module and notebook",
        },
        "functions": {
            "type": "array",
            "minItems": 1,
            "uniqueItems": True,
            "items": {"type": "string", "pattern": _NAME},
            "description": "give the names of the functions students write",
        },
        "imports": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_.]*$"},
            "description": "give the modules students may import beside the standard library",
        },
        "distribution": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
            "description": "give the student package's name on pip, e.g. ch3-grader",
        },
        "specs": _REL,
        "reference": _REL,
        "starter": _REL,
        "mutants": _REL,
        "samples": _REL,
        "public": _REL,
        "plugin": {
            "type": "string",
            "pattern": r"^([A-Za-z_][A-Za-z0-9_-]*/)*[A-Za-z_][A-Za-z0-9_]*\.py$",
            "description": "give a Python file in the pack's folder, e.g. kinds.py or exercises/kinds.py",
        },
    },
}


@dataclass(frozen=True)
class Pack:
    """One loaded course pack: its manifest's fields, paths resolved.

    Attributes
    ----------
    id, title, chapter : str
        The manifest's ``id``, ``title`` and ``chapter`` (the short name
        pages and terminals show).
    root : pathlib.Path
        The pack's folder (absolute).
    submission, module, notebook : str
        The file a student hands in, the module name it is imported as, and
        the notebook name graded like it.
    functions, imports : tuple of str
        What students write, and what they may import beside the standard
        library.
    specs, reference : pathlib.Path
        The specs folder and the reference file.
    starter, mutants, samples, public : pathlib.Path
        The starter, the mutant catalogue's folder, the sample submissions
        and the public-checks file (each may not exist: a student package
        holds no specs, reference, mutants or samples).
    plugin : pathlib.Path or None
        The pack's plugin module file.
    package : str
        The importable package the pack was installed as ("" for a folder).
    """

    id: str
    title: str
    chapter: str
    root: Path
    submission: str
    module: str
    notebook: str
    functions: tuple[str, ...]
    imports: tuple[str, ...]
    specs: Path
    reference: Path
    starter: Path
    mutants: Path
    samples: Path
    public: Path
    plugin: Path | None = None
    chapter_url: str = ""
    sections: dict[str, str] = field(default_factory=dict)
    distribution: str = ""
    package: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        """The file names a submission may have: the file, then the notebook."""
        return (self.submission, self.notebook)

    def load_plugin(self) -> ModuleType | None:
        """Import the pack's plugin module (once), or None when the pack has none.

        An installed pack's plugin is imported as ``<package>.<name>``; a
        folder's by path, under a name of its own.

        Raises
        ------
        grader.errors.ConfigError
            If the file is missing or fails to import (any exception).
        """
        if self.plugin is None:
            return None
        return _import_plugin(self.plugin, self.package, self.id)


@functools.cache
def _import_plugin(path: Path, package: str, pack_id: str) -> ModuleType:
    """Import a pack's plugin file (cached: every plugin manager of a process shares the module)."""
    if not path.is_file():
        raise ConfigError(f"{path}: the pack's plugin is missing (course.yaml names it under 'plugin')")
    try:
        if package:
            return importlib.import_module(f"{package}.{path.stem}")
        name = f"grader_pack_{re.sub(r'[^A-Za-z0-9_]', '_', pack_id)}_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    except KeyboardInterrupt:  # Ctrl-C while it imports: the run stops, the pack is not blamed
        raise
    except BaseException as exc:  # noqa: BLE001 - instructor code: one line, SystemExit included
        raise ConfigError(f"{path}: the pack's plugin failed to import at {describe_failure(exc)}") from None


def load_pack(folder: str | Path, package: str = "") -> Pack:
    """Read and check the manifest of the pack in ``folder``.

    Parameters
    ----------
    folder : str or pathlib.Path
        The pack's folder (holding ``course.yaml``).
    package : str
        The importable package it is installed as, if any.

    Returns
    -------
    Pack

    Raises
    ------
    grader.errors.ConfigError
        If there is no manifest, it is not YAML, or a key is missing or of
        the wrong type (the error names the key).
    """
    root = Path(folder).resolve()
    return _load(root, package)


_FAST_KEYWORDS = frozenset(
    {
        "$schema",
        "type",
        "enum",
        "additionalProperties",
        "required",
        "properties",
        "propertyNames",
        "minProperties",
        "pattern",
        "minLength",
        "minItems",
        "uniqueItems",
        "items",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "description",
    }
)
_FAST_TYPES: dict[str, Any] = {
    "object": lambda x: type(x) is dict,
    "string": lambda x: type(x) is str,
    "array": lambda x: type(x) is list,
    "number": lambda x: type(x) in (int, float),
    "integer": lambda x: type(x) is int,  # 3.0 is an integer too for JSON Schema: jsonschema decides that
    "boolean": lambda x: type(x) is bool,
    "null": lambda x: x is None,
}
_BOUNDS: dict[str, Any] = {
    "minimum": lambda x, b: x >= b,
    "maximum": lambda x, b: x <= b,
    "exclusiveMinimum": lambda x, b: x > b,
}


def plainly_valid(data: Any, schema: Any) -> bool:
    """Whether ``data`` meets the JSON Schema ``schema`` for certain, checked without jsonschema.

    Knows the keywords the manifest's, the specs' and the check kinds' schemas use
    (`_FAST_KEYWORDS`), for the plain data YAML and JSON give; any other keyword, data of
    another type, a number that is not finite, or any doubt answers False, and the caller
    validates with jsonschema, which words the error. So True is always jsonschema's answer
    too; False may not be. Importing jsonschema costs more than the rest of a ``grader check``
    start-up (issue 16).

    Parameters
    ----------
    data : object
        Parsed YAML or JSON.
    schema : dict
        A JSON Schema (draft 2020-12).

    Returns
    -------
    bool
    """
    try:
        return _plain(data, schema)
    except (TypeError, ValueError, re.error, RecursionError):  # a schema jsonschema would refuse, or odd data
        return False


def _plain(data: Any, schema: Any) -> bool:
    """`plainly_valid` without its guard."""
    if not isinstance(schema, dict) or not schema.keys() <= _FAST_KEYWORDS:
        return False
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not isinstance(names, list) or not any(_FAST_TYPES.get(n, lambda x: False)(data) for n in names):
            return False
    if "enum" in schema and (type(data) is not str or data not in [e for e in schema["enum"] if type(e) is str]):
        return False
    kind = type(data)
    if kind in (int, float):
        if kind is float and not math.isfinite(data):
            return False
        for key, holds in _BOUNDS.items():
            bound = schema.get(key)
            if bound is not None and (type(bound) not in (int, float) or not holds(data, bound)):
                return False
        return True
    if kind is str:
        pattern = schema.get("pattern")
        return len(data) >= schema.get("minLength", 0) and (
            pattern is None or (isinstance(pattern, str) and re.search(pattern, data) is not None)
        )
    if kind is list:
        items = schema.get("items")
        unique = not schema.get("uniqueItems") or (
            all(type(x) is str for x in data) and len(set(data)) == len(data)  # JSON equality is plain here
        )
        return (
            len(data) >= schema.get("minItems", 0) and unique and (items is None or all(_plain(x, items) for x in data))
        )
    if kind is dict:
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
        names_schema = schema.get("propertyNames")
        if (
            any(type(key) is not str for key in data)
            or any(key not in data for key in schema.get("required", ()))
            or len(data) < schema.get("minProperties", 0)
            or not isinstance(properties, dict)
            or (names_schema is not None and not all(_plain(key, names_schema) for key in data))
        ):
            return False
        for key, value in data.items():
            if key in properties:
                sub = properties[key]
            elif extra is False:
                return False
            elif extra is True:
                continue
            else:
                sub = extra
            if not _plain(value, sub):
                return False
        return True
    return kind in (bool, type(None))  # no keyword above applies to them


_plainly_valid = plainly_valid
"""The former name of `plainly_valid`."""


def _schema_problem(error: Any) -> str:
    """One jsonschema error as ``KEY: what is wrong; what to write`` (the key named, the fix given)."""
    where = ".".join(str(p) for p in error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    properties = schema.get("properties", {})
    if error.validator == "required":
        missing = next((k for k in schema.get("required", ()) if k not in error.instance), "")
        key = f"{where}.{missing}" if where else missing
        hint = properties.get(missing, {}).get("description", "add it")
        return f"{key}: missing; {hint}"
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(properties))
        key = ".".join([*([where] if where else []), str(extra[0])]) if extra else where
        return (
            f"{key}: not a key of the manifest{' here' if where else ''}; remove it or fix its spelling "
            f"(the keys are {', '.join(properties)})"
        )
    hint = schema.get("description", "")
    return f"{where or 'the manifest'}: {error.message}" + (f"; {hint}" if hint else "")


def _inside(root: Path, manifest: Path, key: str, value: str, example: str) -> Path:
    """``root / value``, refused unless it stays in the pack's folder (no absolute path, no ``..``, no link out).

    Raises
    ------
    grader.errors.ConfigError
        Naming the manifest, the key and what to write instead.
    """
    given = Path(value)
    target = root / given
    resolved = target.resolve()
    if given.is_absolute() or not resolved.is_relative_to(root):
        linked = not given.is_absolute() and ".." not in given.parts
        why = (
            "is an absolute path"
            if given.is_absolute()
            else "leads out of the pack's folder" + (" through a symbolic link" if linked else "")
        )
        fix = "; copy what it links to into the pack" if linked else f"; give a path relative to {root}, e.g. {example}"
        raise ConfigError(f"{manifest}: {key}: {value!r} {why}{fix}")
    return target


_PARSED = "__pycache__/course.yaml.parsed.json"
"""Where a pack keeps its manifest as parsed (`_parsed_manifest`), beside Python's own cache."""


def _parsed_manifest(path: Path, raw: bytes) -> Any:
    """The manifest's data as the last run parsed it from these very bytes, or None.

    ``grader check`` on a student's machine reads no other YAML file, so with this it never imports
    PyYAML (issue 16). The file holds the SHA-256 of the bytes it was parsed from and the grader's
    version, so a changed manifest (or grader) is parsed again; anything unreadable is ignored.
    """
    import hashlib
    import json

    try:
        cached = json.loads((path.parent / _PARSED).read_text(encoding="utf-8"))
        if cached["sha256"] == hashlib.sha256(raw).hexdigest() and cached["grader"] == _grader_version():
            return cached["data"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _keep_parsed_manifest(path: Path, raw: bytes, data: Any) -> None:
    """Keep a valid manifest's data for `_parsed_manifest` (best effort: a read-only pack parses every time)."""
    import hashlib
    import json

    text = json.dumps({"sha256": hashlib.sha256(raw).hexdigest(), "grader": _grader_version(), "data": data})
    if json.loads(text)["data"] != data:  # not plain JSON data after all: parse it each time
        return
    try:
        from grader.fileio import write_atomic

        write_atomic(path.parent / _PARSED, text)
    except OSError:
        pass


def _grader_version() -> str:
    from grader._version import __version__

    return __version__


@functools.cache
def _load(root: Path, package: str) -> Pack:
    path = root / MANIFEST
    if path.is_dir():
        raise ConfigError(f"{path}: a folder, not a file; the pack's manifest {MANIFEST} must be a YAML file")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path}: not a regular file; the pack's manifest {MANIFEST} must be a YAML file")
    if not path.is_file():
        raise ConfigError(f"{root}: not a course pack (no {MANIFEST}); pass --pack DIR with a pack's folder")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the manifest ({exc})") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ConfigError(f"{path}: {len(raw)} bytes; a manifest is limited to {MAX_MANIFEST_BYTES}")
    data = _parsed_manifest(path, raw)
    parsed = data is None
    if parsed:
        from grader.readers.yamlfile import parse_yaml_text

        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save the manifest as UTF-8") from None
        data = parse_yaml_text(text, str(path))  # a SpecError (exit 3) naming the file, the line and the fix
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}, not a mapping"
        raise ConfigError(
            f"{path}: the manifest is {kind}; write a mapping with the keys id, title, chapter, submission "
            "and functions (see README, Course packs)"
        )
    error = None
    if not _plainly_valid(data, _SCHEMA):
        import jsonschema  # here, not at import: a valid manifest is checked without it

        error = next(
            iter(sorted(jsonschema.Draft202012Validator(_SCHEMA).iter_errors(data), key=lambda e: e.path)), None
        )
    if error is not None:
        raise ConfigError(f"{path}: {_schema_problem(error)}")
    if parsed:
        _keep_parsed_manifest(path, raw, data)
    sub = data["submission"]
    stem = sub["file"][: -len(".py")]

    def rel(key: str, default: str) -> Path:
        return _inside(root, path, key, data.get(key, default), default or f"{key}/{sub['file']}")

    return Pack(
        id=data["id"],
        title=data["title"],
        chapter=data["chapter"],
        root=root,
        submission=sub["file"],
        module=sub.get("module", stem),
        notebook=sub.get("notebook", stem + ".ipynb"),
        functions=tuple(data["functions"]),
        imports=tuple(data.get("imports", ())),
        specs=rel("specs", "specs"),
        reference=rel("reference", ""),
        starter=rel("starter", "starter/" + sub["file"]),
        mutants=rel("mutants", "mutants"),
        samples=rel("samples", "submissions"),
        public=rel("public", "public.json"),
        plugin=_inside(root, path, "plugin", data["plugin"], "kinds.py") if data.get("plugin") else None,
        chapter_url=data.get("chapter_url", ""),
        sections=dict(data.get("sections", {})),
        distribution=data.get("distribution", f"{data['id']}-grader"),
        package=package,
    )


@functools.cache
def installed_packs() -> dict[str, tuple[str, Path]]:
    """The packs registered under `ENTRY_POINT_GROUP`: entry-point name to (package, folder).

    A registration whose package cannot be found is left out (with a
    warning): an uninstalled pack must not stop another from loading. Read
    once per process.
    """
    found: dict[str, tuple[str, Path]] = {}
    for name, value, _ in entry_points(ENTRY_POINT_GROUP):
        try:
            spec = importlib.util.find_spec(value)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            print(
                f"grader: warning: course pack '{name}' ({value}) is registered but its package is not "
                "importable; reinstall it",
                file=sys.stderr,
            )
            continue
        found[name] = (value, Path(next(iter(spec.submodule_search_locations))))
    return found


def pack_option(argv: list[str]) -> str | None:
    """The value of ``--pack`` in ``argv`` (``--pack X`` or ``--pack=X``), read before any parser exists."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--pack" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--pack="):
            return arg[len("--pack=") :]
    return None


def course_root(start: Path) -> Path | None:
    """The first folder at or above ``start`` that holds a `MANIFEST` file (None when none does).

    The way pytest finds its rootdir: the course is the folder a command stands in, or one of its
    parents.
    """
    try:
        here = start.resolve()
    except (OSError, RuntimeError):
        return None
    for folder in (here, *here.parents):
        try:
            if (folder / MANIFEST).is_file():
                return folder
        except OSError:  # a folder we may not look into: go on up
            continue
    return None


def discover_course(argv: list[str], cwd: Path | None = None) -> str | None:
    """The course a command grades, as ``--pack`` would name it, or None to use the installed pack.

    ``--pack`` wins, then the `COURSE_VARIABLE` environment variable (a folder, or an installed
    course's id: for a CI job or a script run outside the course). Else the first `MANIFEST` at or
    above the working folder (the instructor's
    choice of where to stand). Else the first one strictly above a path the command names: never
    at the path itself, since a folder being graded is a student's, and a file a student chooses
    never decides which course grades them.

    Parameters
    ----------
    argv : list of str
        The command's arguments, without the program's name.
    cwd : pathlib.Path, optional
        The working folder (default: the process's).

    Returns
    -------
    str or None
    """
    chosen = _chosen_course(pack_option(argv), cwd or Path.cwd())
    if chosen is not None:
        return chosen
    for arg in argv[1:]:
        if arg.startswith("-") or not arg:
            continue
        path = Path(arg)
        try:
            exists = path.exists()
        except (OSError, ValueError):
            continue
        if exists:
            found = course_root(path.resolve().parent)
            if found is not None:
                return str(found)
    return None


def _chosen_course(option: str | None, cwd: Path) -> str | None:
    """``option``, else the `COURSE_VARIABLE` environment variable, else the course folder at or above ``cwd``."""
    if option is not None:
        return option
    if os.environ.get(COURSE_VARIABLE):
        return os.environ[COURSE_VARIABLE]
    found = course_root(cwd)  # the course folder we stand in, as pytest finds its rootdir
    return None if found is None else str(found)


def find_pack(option: str | None = None) -> Pack:
    """The pack a run grades: ``--pack`` (a folder, or an installed pack's id), else the course folder at or
    above the working folder (`course_root`), else the one installed.

    Raises
    ------
    grader.errors.ConfigError
        If ``option`` is neither a pack's folder nor an installed pack, no
        pack is installed, or several are and none was chosen.
    """
    chosen = _chosen_course(option or None, Path.cwd())
    if chosen:
        if Path(chosen).is_dir():
            return load_pack(chosen, _package_of(Path(chosen)))
        installed = installed_packs()
        if chosen in installed:
            package, folder = installed[chosen]
            return load_pack(folder, package)
        known = ", ".join(sorted(installed)) or "none installed"
        raise ConfigError(f"--pack {chosen}: no such folder and no installed course pack of that name ({known})")
    installed = installed_packs()
    if len(installed) == 1:
        package, folder = next(iter(installed.values()))
        return load_pack(folder, package)
    if not installed:
        raise ConfigError(
            "no course: run in a course folder (one holding course.yaml, or below it), pass --pack DIR "
            f"(or set {COURSE_VARIABLE}), or install the course's student package"
        )
    raise ConfigError(
        f"several course packs are installed ({', '.join(sorted(installed))}); choose one with --pack NAME"
    )


def _package_of(folder: Path) -> str:
    """The installed pack's package when ``folder`` is its folder ("" otherwise): its plugin then loads once."""
    resolved = folder.resolve()
    for package, path in installed_packs().values():
        if path.resolve() == resolved:
            return package
    return ""


def shown(path: Path) -> Path:
    """``path`` relative to the current folder when it lies inside it (what messages show), else as is."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def specs_dir(config: Any) -> Path:
    """The specs folder of a run: ``--specs``, else the pack's."""
    given = config.option("specs")
    return Path(given) if given else shown(config.pack.specs)


def reference_file(config: Any) -> Path:
    """The reference file of a run: ``--reference``, else the pack's."""
    given = config.option("reference")
    return Path(given) if given else shown(config.pack.reference)


def mutants_dir(config: Any) -> tuple[Path | None, bool]:
    """The mutant catalogue's folder of a run, and whether ``--mutants`` named it.

    A pack's own catalogue is optional (a run without one diagnoses
    nothing); a folder named with ``--mutants`` must hold one.
    """
    given = config.option("mutants")
    if given:
        return Path(given), True
    try:
        return shown(config.pack.mutants), False
    except ConfigError:
        return None, False
