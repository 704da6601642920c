"""Issue 16's structural guarantees: what ``grader check`` imports, and the manifest's fast check.

Rates and memory are measured by ``benchmarks/bench_limits.py`` (their figures depend on the
machine); these tests pin what makes them possible and does not depend on load.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from grader.packs import _SCHEMA, _plainly_valid, find_pack

HEAVY = ("jsonschema", "jinja2", "sqlite3")


def test_grader_check_imports_no_plugin_library_it_does_not_use(tmp_path: Path) -> None:
    pack = find_pack()
    shutil.copy(pack.starter, tmp_path / pack.submission)
    script = (
        "import sys\n"
        "from grader.cli import main\n"
        f"code = main(['check', {pack.submission!r}, '-q', '--public', {str(pack.public)!r}])\n"
        f"print(json.dumps([code, sorted(m for m in {list(HEAVY)!r} if m in sys.modules)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    code, imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert code == 1, out.stderr  # the untouched starter: its visible checks are not attempted
    assert imported == []


def _manifest() -> dict:
    import yaml

    return yaml.safe_load((find_pack().root / "course.yaml").read_text())


def _variants() -> list[dict]:
    base = _manifest()
    out = []
    for key, value in [
        ("id", "bad id!"),
        ("title", ""),
        ("functions", []),
        ("functions", ["a", "a"]),
        ("functions", ["1x"]),
        ("submission", {"file": "x.txt"}),
        ("submission", {"module": "m"}),
        ("unknown_key", 1),
        ("sections", {"G14.01": 3}),
        ("specs", 7),
        ("plugin", "kinds.txt"),
    ]:
        data = copy.deepcopy(base)
        data[key] = value
        out.append(data)
    missing = copy.deepcopy(base)
    del missing["title"]
    out += [missing, [], "text", {1: "x"}]
    return out


def test_the_manifest_s_fast_check_accepts_the_real_manifest() -> None:
    assert _plainly_valid(_manifest(), _SCHEMA)


@pytest.mark.parametrize("data", _variants())
def test_the_manifest_s_fast_check_never_accepts_what_jsonschema_refuses(data: object) -> None:
    valid = not list(jsonschema.Draft202012Validator(_SCHEMA).iter_errors(data))
    assert not valid
    assert not _plainly_valid(data, _SCHEMA)
