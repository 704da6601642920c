"""``grader build-student-package``: the wheel and sdist a course gives its students.

What goes in: the ``grader`` package (its code, templates and plugins) and
the course pack's public part (`pack_members`): its manifest, its plugin,
the public checks freshly published from the specs (visible checks, their
expected values, and each catalogued mistake's results on them, for
diagnosis), and the starter. What never goes in: the reference,
any spec (hidden checks, their inputs or expected values), the mutants'
code, the sample submissions, the tests.

The package is built from a staging folder that holds only what goes in
(so nothing else can slip in), with ``python -m build`` (PEP 517, no
network: ``--no-isolation``), and every artifact is then opened and
inspected (`inspect_artifact`); a build with a problem is refused.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from grader.errors import ConfigError

__all__ = [
    "FORBIDDEN_PARTS",
    "build_student_package",
    "inspect_artifact",
    "is_student_install",
    "pack_members",
    "stage",
    "student_guide",
    "student_pyproject",
]

ROOT = Path(__file__).resolve().parent.parent.parent
"""Where this ``grader`` package sits (the repository, for an editable install)."""


def repository(start: Path | None = None) -> Path:
    """The grader's repository to build from: the current folder, else where the package sits.

    Raises
    ------
    grader.errors.ConfigError
        If neither holds ``pyproject.toml`` and ``grader/cli/__init__.py``.
    """
    for root in (start or Path.cwd(), ROOT):
        if (root / "pyproject.toml").is_file() and (root / "grader" / "cli" / "__init__.py").is_file():
            return root
    raise ConfigError(
        "build-student-package: run it in the grader's repository (the folder holding pyproject.toml and grader/)"
    )


FORBIDDEN_PARTS = ("reference", "mutants", "exercises", "specs", "submissions", "tests", "benchmarks", "reports")
"""Folder names that never appear in a student artifact's paths."""


def pack_package(pack: Any) -> str:
    """The importable name the pack has in the student package: its installed package, else its id."""
    return pack.package or re.sub(r"[^A-Za-z0-9_]", "_", pack.id)


def pack_members(pack: Any) -> dict[str, Path | str | None]:
    """What of the pack goes into the student package: member name to its source.

    A source is a file to copy, a text to write, or None for the public checks (written from the
    bundle). The manifest, rewritten for the package's own layout (`wheel_manifest`), the
    package's ``__init__.py``, the plugin (the pack's own check kinds: judging code, no
    reference), the public checks and the starter; never the specs, the reference, the mutants or
    the samples. The package is laid out flat whatever the course folder's layout: ``course.yaml``,
    ``public.json``, ``starter/<file>`` and the plugin beside them.
    """
    pkg = pack_package(pack)
    members: dict[str, Path | str | None] = {
        f"{pkg}/__init__.py": f'"""The {pack.chapter} course pack (public part): {pack.title}."""\n',
        f"{pkg}/course.yaml": wheel_manifest(pack),
    }
    if pack.plugin is not None:
        members[f"{pkg}/{pack.plugin.name}"] = pack.plugin
    members[f"{pkg}/public.json"] = None
    members[f"{pkg}/starter/{pack.starter.name}"] = pack.starter
    return members


def wheel_manifest(pack: Any) -> str:
    """The pack's manifest as the student package holds it: its paths pointing at the package's flat layout.

    Only the keys a student's ``grader`` reads are kept; the specs, reference, mutants and samples
    stay in the course folder (the manifest still names where they would be, as its schema asks).
    """
    import yaml

    data = {
        "id": pack.id,
        "title": pack.title,
        "chapter": pack.chapter,
        "chapter_url": pack.chapter_url,
        "sections": dict(pack.sections),
        "submission": {"file": pack.submission, "module": pack.module, "notebook": pack.notebook},
        "functions": list(pack.functions),
        "imports": list(pack.imports),
        "distribution": pack.distribution,
        "specs": "specs",
        "reference": f"reference/{pack.reference.name}",
        "starter": f"starter/{pack.starter.name}",
        "public": "public.json",
    }
    if pack.plugin is not None:
        data["plugin"] = pack.plugin.name
    header = f"# The public part of the {pack.chapter} course pack, as its student package holds it.\n"
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


_SERVER_ONLY = (("grader", "serve"), ("grader", "templates", "serve"), ("grader", "cli", "commands", "serve.py"))
"""What only ``grader serve`` uses: the web server, its pages and its command. A student's wheel leaves
them out (its Alembic migrations cannot even be imported outside Alembic)."""


def _server_only(rel: Path) -> bool:
    """Whether ``rel`` (a path under the repository) belongs to the web server alone (`_SERVER_ONLY`)."""
    return any(rel.parts[: len(prefix)] == prefix for prefix in _SERVER_ONLY)


def _student_readme(readme: Path, pack: Any) -> str:
    """The student package's README: the student guide written from the pack's manifest
    (`student_guide`), never a file of the pack's folder or this repository's
    README (an instructor's notes may tell of hidden checks; the README is the instructor's)."""
    return student_guide(pack)


def _tables(text: str) -> list[list[str]]:
    """A TOML file's lines grouped by table (the first group: before any table header)."""
    groups: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("["):
            groups.append([])
        groups[-1].append(line)
    return groups


def _student_packages(group: list[str], pkg: str) -> list[str]:
    """The ``[tool.setuptools]`` table's lines, its ``packages`` list (on one line or several) keeping
    the grader's packages (``grader``, ``grader.*``) and adding the pack's, on one line."""
    import tomllib

    start = next((i for i, line in enumerate(group) if re.match(r"^packages\s*=\s*\[", line)), None)
    if start is None:
        return group
    for end in range(start, len(group)):  # up to the line closing the list
        try:
            names = tomllib.loads("\n".join(group[start : end + 1]))["packages"]
            break
        except (ValueError, KeyError):
            continue
    else:
        return group
    kept = [n for n in names if (n == "grader" or n.startswith("grader.")) and not _server_only(Path(*n.split(".")))]
    line = "packages = [" + ", ".join(json.dumps(n) for n in [*kept, pkg]) + "]"
    return [*group[:start], line, *group[end + 1 :]]


STUDENT_PYTEST = (
    '    "pytest>=7.4",  # the student runs the visible checks as pytest tests (grader.integrations.pytest_plugin)'
)
"""The student package's one dependency beyond the grader's own: pytest, which its plugin needs."""


def student_pyproject(text: str, pack: Any) -> str:
    """The course's ``pyproject.toml`` rewritten for the student package.

    Its packages are ``grader`` and the pack's; its package data only the
    templates and the pack's public members; its ``grader.packs`` entry
    point names the pack; its name is the pack's ``distribution``; its
    dependencies the grader's plus pytest (`STUDENT_PYTEST`).
    """
    pkg = pack_package(pack)
    data = sorted(m.split("/", 1)[1] for m in pack_members(pack) if not m.endswith(".py") or "/" in m.split("/", 1)[1])
    out = []
    for group in _tables(text):
        header = group[0].strip() if group and group[0].startswith("[") else ""
        if header.lstrip("[").startswith("tool.") and not header.startswith("[tool.setuptools"):
            continue  # the harness's own tools (pytest's addopts need pytest-xdist, ruff, mypy...): not the student's
        if header == "[tool.setuptools.package-data]":
            group = [
                group[0],
                'grader = ["templates/*.html", "py.typed"]',
                f"{pkg} = [{', '.join(json.dumps(d) for d in data)}]",
                "",
            ]
        elif header == '[project.entry-points."grader.packs"]':
            group = [group[0], f'{pack.id} = "{pkg}"', ""]
        elif header == "[tool.setuptools]":
            group = _student_packages(group, pkg)
        elif header == "[project]":
            about = json.dumps(f"{pack.chapter} ({pack.title}): visible checks for students' {pack.submission}")
            group = [
                re.sub(
                    r'^description = ".*"$',
                    f"description = {about}",
                    re.sub(r'^name = ".*"$', f'name = "{pack.distribution}"', line),
                )
                for line in group
            ]
            at = next((i for i, line in enumerate(group) if line.strip() == "dependencies = ["), None)
            if at is not None:  # plain 'pytest' in the student's folder runs the visible checks (pytest11)
                group[at + 1 : at + 1] = [STUDENT_PYTEST]
        out.extend(group)
    if not any(line.strip() == '[project.entry-points."grader.packs"]' for line in out):
        out += ["", '[project.entry-points."grader.packs"]', f'{pack.id} = "{pkg}"']
    return "\n".join(out) + "\n"


def stage(folder: Path, bundle_text: str, pack: Any, root: Path = ROOT) -> Path:
    """Lay out the student package's source tree in ``folder``.

    Parameters
    ----------
    folder : pathlib.Path
        An empty folder.
    bundle_text : str
        The public checks (`grader.packs.public.dumps`), written as the pack's
        public-checks file.
    pack : grader.packs.Pack
        The course pack: its public members go in (`pack_members`).
    root : pathlib.Path
        The repository.

    Returns
    -------
    pathlib.Path
        ``folder``.
    """
    src = root / "grader"
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or not path.is_file() or _server_only(rel):
            continue
        if path.suffix == ".py" or rel.parts[1:2] == ("templates",) or path.name == "py.typed":
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    for name, source in pack_members(pack).items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source is None:
            target.write_text(bundle_text, encoding="utf-8")
        elif isinstance(source, str):
            target.write_text(source, encoding="utf-8")
        else:
            shutil.copyfile(source, target)
    (folder / "README.md").write_text(_student_readme(root / "README.md", pack), encoding="utf-8")
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    (folder / "pyproject.toml").write_text(student_pyproject(pyproject, pack), encoding="utf-8")
    return folder


def _members(artifact: Path) -> Iterable[tuple[str, bytes]]:
    import tarfile  # here: 'grader check' imports this module and never reads an archive (issue 29)
    import zipfile

    if artifact.suffix == ".whl" or zipfile.is_zipfile(artifact):
        with zipfile.ZipFile(artifact) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    yield info.filename, zf.read(info)
        return
    with tarfile.open(artifact) as tf:
        for member in tf.getmembers():
            if member.isfile():
                fh = tf.extractfile(member)
                yield member.name, fh.read() if fh else b""


def _digests(paths: Iterable[Path]) -> dict[str, str]:
    return {hashlib.sha256(p.read_bytes()).hexdigest(): str(p) for p in paths if p.is_file()}


def inspect_artifact(
    artifact: Path, specs: Path, reference: Path, mutants: Path, allowed: Iterable[str] = ()
) -> list[str]:
    """What a student artifact holds that it must not; ``[]`` when it is clean.

    A problem is: a path with a folder of `FORBIDDEN_PARTS` or a ``.yaml``/
    ``.yml`` file; a Python file outside the ``grader`` package; a file
    whose bytes are the reference's, a spec's or a mutant's; a public-checks
    file holding a check that is not visible or a hidden check's id.

    Parameters
    ----------
    artifact : pathlib.Path
        A ``.whl`` or ``.tar.gz``.
    specs, reference, mutants : pathlib.Path
        What must stay out (the specs folder, the reference, the mutants folder).
    allowed : iterable of str
        The pack's members (`pack_members`): the only YAML file (the
        manifest) and Python files outside ``grader`` allowed in.

    Returns
    -------
    list of str
        One line per problem, naming the member.
    """
    from grader.readers.yamlfile import parse_yaml

    secret = _digests(
        [reference, *sorted(specs.glob("*.y*ml")), *sorted(mutants.rglob("*.py")), *sorted(mutants.glob("*.yaml"))]
    )
    hidden_ids = set()
    for spec in sorted(specs.glob("*.y*ml")):
        data = parse_yaml(str(spec)) or {}  # the specs' strict loader: no alias bomb here either
        if not isinstance(data, dict):
            continue
        default = (data.get("defaults") or {}).get("visibility", "visible")
        for c in data.get("checks") or []:
            if c.get("visibility", default) != "visible":
                hidden_ids.add((data.get("exercise"), c.get("id")))
    allowed = set(allowed)
    problems = []
    for name, body in _members(artifact):
        parts = PurePosixPath(name).parts
        inner = parts[1:] if artifact.suffix != ".whl" and len(parts) > 1 else parts  # sdist: under name-version/
        where = f"{artifact.name}: {name}"
        if any(p in FORBIDDEN_PARTS for p in inner[:-1]):
            problems.append(f"{where}: a folder that stays in the course repository")
        member = "/".join(inner)
        if name.endswith((".yaml", ".yml")) and member not in allowed:
            problems.append(f"{where}: a YAML file (specs stay in the course repository)")
        if name.endswith(".py") and inner[:1] != ("grader",) and inner[-1:] != ("setup.py",) and member not in allowed:
            problems.append(f"{where}: Python code outside the grader package")
        digest = hashlib.sha256(body).hexdigest()
        if digest in secret:
            problems.append(f"{where}: the same bytes as {secret[digest]}")
        if name.endswith(".json") and b'"visibility"' in body:
            try:
                bundle = json.loads(body)
                checks = [(ex["id"], c) for ex in bundle["exercises"] for c in ex["checks"]]
            except (ValueError, KeyError, TypeError):
                problems.append(f"{where}: a public-checks file that cannot be read")
                continue
            for ex_id, c in checks:
                if c.get("visibility") != "visible":
                    problems.append(f"{where}: check {ex_id} {c.get('id')} is {c.get('visibility')}, not visible")
                if (ex_id, c.get("id")) in hidden_ids:
                    problems.append(f"{where}: check {ex_id} {c.get('id')} is hidden in the specs")
    return problems


def _build_needs(root: Path) -> list[str]:
    """What the offline build needs installed: ``build`` and ``[build-system] requires`` (quoted for a shell)."""
    import shlex
    import tomllib

    try:
        requires = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    except (OSError, ValueError, KeyError, TypeError):
        requires = []
    return [shlex.quote(r) for r in ["build", *(r for r in requires if isinstance(r, str))]]


def build_student_package(
    out: Path, bundle_text: str, pack: Any, specs: Path, reference: Path, mutants: Path, root: Path | None = None
) -> list[Path]:
    """Stage, build (wheel and sdist) and inspect the student package.

    Parameters
    ----------
    out : pathlib.Path
        Folder for the artifacts.
    bundle_text : str
        The public checks.
    pack : grader.packs.Pack
        The course pack (its public members go in).
    specs, reference, mutants : pathlib.Path
        What must stay out.
    root : pathlib.Path, optional
        The repository (default: `repository`).

    Returns
    -------
    list of pathlib.Path
        The artifacts, in ``out``.

    Raises
    ------
    grader.errors.ConfigError
        If the build fails, or an artifact holds something non-public
        (the artifacts are then removed).
    """
    root = root or repository()
    if importlib.util.find_spec("build") is None:
        raise ConfigError(
            "build-student-package needs the 'build' package in this environment (it builds "
            f"offline, with this environment's backend): pip install {' '.join(_build_needs(root))}"
        )
    if not pack.starter.is_file():
        raise ConfigError(f"{pack.starter}: the starter is missing (it goes into the student package)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="grader-student-package-") as tmp:
        tree = stage(Path(tmp) / "src", bundle_text, pack, root)
        built = Path(tmp) / "dist"
        # cwd: the temporary folder, so a build/ folder where the command runs (setuptools leaves one
        # after 'pip install .') is not imported in place of the 'build' package
        proc = subprocess.run(
            [sys.executable, "-m", "build", "--sdist", "--wheel", "--no-isolation", "--outdir", str(built), str(tree)],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp,
        )
        if proc.returncode != 0:
            tail = " / ".join(line.strip() for line in (proc.stderr or proc.stdout).strip().splitlines()[-3:])
            raise ConfigError(
                f"building the student package failed: {tail}; it builds offline with this "
                f"environment's 'build' and the build backend pyproject.toml requires: "
                f"pip install {' '.join(_build_needs(root))}"
            )
        artifacts = sorted(built.iterdir())
        allowed = pack_members(pack)
        problems = [p for a in artifacts for p in inspect_artifact(a, specs, reference, mutants, allowed)]
        if problems:
            raise ConfigError("the student package would hold what students must not see: " + "; ".join(problems[:5]))
        linked = [out / a.name for a in artifacts if (out / a.name).is_symlink()]
        if linked:  # a copy would go wherever the link points
            raise ConfigError(f"{linked[0]}: a symbolic link where the artifact goes; remove it")
        final = []
        for artifact in artifacts:
            target = out / artifact.name
            shutil.copyfile(artifact, target)
            final.append(target)
    return final


def member_names(artifact: Path) -> list[str]:
    """Every file name in an artifact (for tests and reports)."""
    return [name for name, _ in _members(artifact)]


def is_student_install(pack: Any) -> bool:
    """Whether ``pack`` is a student package's pack: it ships neither its specs nor its reference.

    Parameters
    ----------
    pack : grader.packs.Pack or None
        The installed (or ``--pack``) course pack.
    """
    if pack is None:
        return False
    return not pack.specs.is_dir() and not pack.reference.is_file()


def student_guide(pack: Any) -> str:
    """The student package's README: the student guide, written from the pack's manifest.

    What to install, how to start (``grader starter``), ``grader check``, pytest, notebooks, CI,
    and what a submission may import (`grader.child.worker.LISTED`, the pack's ``imports``): the list the
    import error refers to. Nothing in it comes from a file of the pack's folder (an instructor's
    notes there may tell of hidden checks).

    Parameters
    ----------
    pack : grader.packs.Pack

    Returns
    -------
    str
        Markdown.
    """
    from grader.child.worker import LISTED

    names = ", ".join(f"`{f}`" for f in pack.functions)
    extra = sorted({*pack.imports, *(m for m in LISTED if m.split(".")[0] in pack.imports)})
    stdlib = " ".join(m for m in LISTED if m.split(".")[0] not in {"numpy", *pack.imports})
    return f"""# {pack.chapter} grader for students

{pack.title}: the visible checks of chapter {pack.chapter}, for your own `{pack.submission}`.

## Install

Your course gives you this package (a wheel file, a URL or an index name), e.g.

```sh
python -m pip install {pack.distribution}-*.whl     # the file, URL or name your course gives
```

It brings the `grader` command, pytest, and the public part of the course pack `{pack.id}`: the visible
checks (with their expected values), the data that names likely mistakes, and the starter. It holds
nothing hidden: no reference solution, no hidden check.

## Start and check

```sh
grader starter                  # copies the starter {pack.submission} here (never overwrites one)
grader check {pack.submission}       # or {pack.notebook}, or the folder holding it
```

Fill in the functions ({names}). `grader check` runs the visible checks only, offline: per exercise
its points; under an exercise that does not pass, its likely mistake (once), then each failing
check with the call, the expected and the returned values. A function that still raises
`NotImplementedError` is "not attempted". The grade also counts hidden checks, run when your course
grades: passing every visible check is not full marks. `grader check --help` lists its options.

## What the checks ask

Compute in float64: Python floats, or numpy arrays of numpy's default float64. A check allows only
the rounding error correct float64 code can make on its inputs (e.g. a row of m weights sums to 1
within about m x 2.2e-16), so float32 or float16 arithmetic fails it, and `grader check` names that
mistake when it is the cause. Leave the lists you are given unchanged (build new ones): checks
call your functions with the same lists again.

## pytest

Plain `pytest` in the folder holding `{pack.submission}` (or `{pack.notebook}`) collects one test per
visible check, named `{pack.submission}::EXERCISE::CHECK`; `-k EXERCISE` runs one exercise and
`-p no:grader` turns it off.

## Notebooks

`{pack.notebook}` works wherever `{pack.submission}` does. It is never run in a kernel: its code cells
are joined in order, IPython lines (`%magic`, `!shell`, `%%cell` magics) are left out with a note,
and every message names the cell and the line in it. A folder holding both is graded from
`{pack.submission}`.

## CI

`grader init-ci github|gitlab|classroom50 --package SPEC` writes the files a template repository needs
(`SPEC`: what CI installs with pip, the wheel your course gives). CI runs the visible checks only and
never gives the grade.

## What your file may import

{", ".join(f"`{m}`" for m in extra) or "nothing beyond the standard library"}, these modules of the
standard library: `{stdlib}`, and what Python has imported already (`os`, `sys`). Anything else
fails with `No module named '...'`, in `grader check` exactly as when your course grades the file.
"""
