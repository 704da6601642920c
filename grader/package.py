"""``grader build-student-package``: the wheel and sdist a course gives its students.

What goes in: the ``grader`` package (its code, templates and plugins), the
public checks freshly published from the specs (``grader/data/g14-public.json``:
visible checks, their expected values, and each catalogued mistake's
results on them, for diagnosis), and the starter
(``grader/data/starter/attention.py``). What never goes in: the reference,
any spec (hidden checks, their inputs or expected values), the mutants'
code, the sample submissions, the tests.

The package is built from a staging folder that holds only what goes in
(so nothing else can slip in), with ``python -m build`` (PEP 517, no
network: ``--no-isolation``), and every artifact is then opened and
inspected (`inspect_artifact`); a build with a problem is refused.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from grader.errors import ConfigError

__all__ = ["FORBIDDEN_PARTS", "build_student_package", "inspect_artifact", "stage"]

ROOT = Path(__file__).resolve().parent.parent
"""Where this ``grader`` package sits (the repository, for an editable install)."""


def repository(start: Path | None = None) -> Path:
    """The grader's repository to build from: the current folder, else where the package sits.

    Raises
    ------
    grader.errors.ConfigError
        If neither holds ``pyproject.toml`` and ``grader/cli.py``.
    """
    for root in (start or Path.cwd(), ROOT):
        if (root / "pyproject.toml").is_file() and (root / "grader" / "cli.py").is_file():
            return root
    raise ConfigError("build-student-package: run it in the grader's repository (the folder holding "
                      "pyproject.toml and grader/)")

FORBIDDEN_PARTS = ("reference", "mutants", "exercises", "submissions", "tests", "benchmarks", "reports")
"""Folder names that never appear in a student artifact's paths."""

STARTER = "grader/data/starter/attention.py"


def _student_readme(readme: Path) -> str:
    text = readme.read_text(encoding="utf-8")
    start = text.find("## For students")
    if start < 0:
        return "# G14 grader\n\nRun `grader check attention.py` in the folder holding your file.\n"
    end = text.find("\n## ", start + 3)
    return "# G14 grader for students\n\n" + text[start:end if end > 0 else None].strip() + "\n"


def stage(folder: Path, bundle_text: str, starter: Path, root: Path = ROOT) -> Path:
    """Lay out the student package's source tree in ``folder``.

    Parameters
    ----------
    folder : pathlib.Path
        An empty folder.
    bundle_text : str
        The public checks (`grader.public.dumps`), written as
        ``grader/data/g14-public.json``.
    starter : pathlib.Path
        The starter ``attention.py``.
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
        if "__pycache__" in rel.parts or not path.is_file():
            continue
        if path.suffix == ".py" or rel.parts[1:2] == ("templates",) or path.name == "py.typed":
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    data = folder / "grader" / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "g14-public.json").write_text(bundle_text, encoding="utf-8")
    (folder / STARTER).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(starter, folder / STARTER)
    (folder / "README.md").write_text(_student_readme(root / "README.md"), encoding="utf-8")
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    pyproject = pyproject.replace('grader = ["templates/*.html", "py.typed", "data/*.json"]',
                                  'grader = ["templates/*.html", "py.typed", "data/*.json", "data/starter/*.py"]')
    (folder / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return folder


def _members(artifact: Path) -> Iterable[tuple[str, bytes]]:
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


def inspect_artifact(artifact: Path, specs: Path, reference: Path, mutants: Path) -> list[str]:
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

    Returns
    -------
    list of str
        One line per problem, naming the member.
    """
    import yaml

    secret = _digests([reference, *sorted(specs.glob("*.y*ml")), *sorted(mutants.rglob("*.py")),
                       *sorted(mutants.glob("*.yaml"))])
    hidden_ids = set()
    for spec in sorted(specs.glob("*.y*ml")):
        data = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
        default = (data.get("defaults") or {}).get("visibility", "visible")
        for c in data.get("checks") or []:
            if c.get("visibility", default) != "visible":
                hidden_ids.add((data.get("exercise"), c.get("id")))
    problems = []
    for name, body in _members(artifact):
        parts = PurePosixPath(name).parts
        inner = parts[1:] if artifact.suffix != ".whl" and len(parts) > 1 else parts  # sdist: under name-version/
        where = f"{artifact.name}: {name}"
        if any(p in FORBIDDEN_PARTS for p in inner[:-1]):
            problems.append(f"{where}: a folder that stays in the course repository")
        if name.endswith((".yaml", ".yml")):
            problems.append(f"{where}: a YAML file (specs stay in the course repository)")
        if name.endswith(".py") and inner[:1] != ("grader",) and inner[-1:] != ("setup.py",):
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


def build_student_package(out: Path, bundle_text: str, specs: Path, reference: Path, mutants: Path,
                          starter: Path, root: Path | None = None) -> list[Path]:
    """Stage, build (wheel and sdist) and inspect the student package.

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
    if not starter.is_file():
        raise ConfigError(f"{starter}: the starter is missing (it goes into the student package)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="grader-student-package-") as tmp:
        tree = stage(Path(tmp) / "src", bundle_text, starter, root)
        built = Path(tmp) / "dist"
        proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--no-isolation",
                               "--outdir", str(built), str(tree)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise ConfigError("building the student package failed: " + " / ".join(tail)
                              + " (is 'build' installed? pip install build)")
        artifacts = sorted(built.iterdir())
        problems = [p for a in artifacts for p in inspect_artifact(a, specs, reference, mutants)]
        if problems:
            raise ConfigError("the student package would hold what students must not see: " + "; ".join(problems[:5]))
        final = []
        for artifact in artifacts:
            target = out / artifact.name
            shutil.copyfile(artifact, target)
            final.append(target)
    return final


def member_names(artifact: Path) -> list[str]:
    """Every file name in an artifact (for tests and reports)."""
    return [name for name, _ in _members(artifact)]
