"""The dataclass methods kept between runs (`grader.readers.keptcode`): the same classes, a trusted file only.

Each case runs in a fresh interpreter: `install` changes `dataclasses` for the whole process.
"""

from __future__ import annotations

import dataclasses
import json
import marshal
import os
import subprocess
import sys
from pathlib import Path
from types import CodeType

import pytest

RUN = """
import inspect, json, sys
from grader.readers import keptcode
if sys.argv[1:] != ["plain"]:
    keptcode.install()
from dataclasses import FrozenInstanceError, dataclass, field

@dataclass(frozen=True)
class Point:
    x: int
    y: int = 2
    tags: tuple = field(default_factory=tuple)

p = Point(1)
try:
    p.x = 5
    frozen = False
except FrozenInstanceError:
    frozen = True
kept = len(keptcode._kept)
missed = keptcode._state["missed"]
keptcode.save()
print(json.dumps({"repr": repr(p), "eq": p == Point(1, 2), "ne": p != Point(1, 3), "hash": hash(p) == hash(Point(1)),
                  "frozen": frozen, "kept": kept, "missed": missed, "doc": Point.__doc__,
                  "annotations": repr(Point.__init__.__annotations__), "signature": str(inspect.signature(Point))}))
"""


def _run(cache: Path, *args: str) -> dict[str, object]:
    env = {**os.environ, "GRADER_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", RUN, *args], env=env, capture_output=True, text=True, check=True)
    answer: dict[str, object] = json.loads(out.stdout)
    return answer


def _table(cache: Path) -> Path:
    (path,) = (cache / "code").iterdir()
    return path


def _start(data: bytes) -> int:
    """Where the marshalled table starts: after the header line and its CRC-32."""
    return data.index(b"\n") + 5 if data.startswith(b"kept-code\n") else 0


def _is_points_init(text: str) -> bool:
    """Whether a kept method's text is Point's ``__init__`` (3.11 names its annotations ``_type_x``, 3.12 ``__dataclass_type_x__``)."""
    return " def __init__(self,x:" in text and ",tags:" in text


def _load(table: Path) -> dict[str, object]:
    data = table.read_bytes()
    kept: dict[str, object] = marshal.loads(data[_start(data) :])
    return kept


KEPT = callable(getattr(dataclasses, "_create_fn", None))
"""Whether this Python's `dataclasses` compiles its methods through ``_create_fn`` (3.11, 3.12), where keptcode acts."""

needs_create_fn = pytest.mark.skipif(
    not KEPT,
    reason="this Python's dataclasses builds its methods without _create_fn: keptcode changes nothing "
    "(test_nothing_changes_where_dataclasses_builds_its_methods_otherwise)",
)

SAME = {
    "repr": "Point(x=1, y=2, tags=())",
    "eq": True,
    "ne": True,
    "hash": True,
    "frozen": True,
    "doc": "Point(x: int, y: int = 2, tags: tuple = <factory>)",
    "annotations": "{'x': <class 'int'>, 'y': <class 'int'>, 'tags': <class 'tuple'>, 'return': None}",
    "signature": "(x: int, y: int = 2, tags: tuple = <factory>) -> None",
}


@needs_create_fn
def test_the_classes_are_those_dataclasses_makes_alone(tmp_path: Path) -> None:
    """The methods' annotations too: compiled with keptcode's ``from __future__ import annotations`` they were text."""
    assert _run(tmp_path, "plain") == {**SAME, "kept": 0, "missed": False}
    assert _run(tmp_path) == {**SAME, "kept": 0, "missed": True}
    assert _run(tmp_path) == {**SAME, "kept": _run(tmp_path)["kept"], "missed": False}


@needs_create_fn
def test_a_second_run_makes_the_same_class_from_the_kept_methods(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first == {**SAME, "kept": 0, "missed": True}
    table = _table(tmp_path)
    assert table.stat().st_mode & 0o777 == 0o600
    kept = _load(table)
    assert any(_is_points_init(text) for text in kept)  # Point's, by its text
    second = _run(tmp_path)
    assert second == {**SAME, "kept": len(kept), "missed": False}  # nothing compiled: every method was kept
    assert _load(table) == kept  # and nothing written again


@needs_create_fn
def test_a_table_others_may_write_is_not_read(tmp_path: Path) -> None:
    _run(tmp_path)
    table = _table(tmp_path)
    table.chmod(0o620)
    assert _run(tmp_path) == {**SAME, "kept": 0, "missed": True}


@needs_create_fn
def test_a_table_of_anything_but_text_to_code_is_not_read(tmp_path: Path) -> None:
    _run(tmp_path)
    table = _table(tmp_path)
    table.write_bytes(marshal.dumps({"def __init__": "not code"}))
    assert _run(tmp_path) == {**SAME, "kept": 0, "missed": True}
    table.write_bytes(b"\x00garbage")
    assert _run(tmp_path) == {**SAME, "kept": 0, "missed": True}


@needs_create_fn
def test_a_table_changed_on_disk_is_not_run(tmp_path: Path) -> None:
    """A code object whose bytecode changed (one block of bytes on disk) crashed every run with SIGSEGV."""
    _run(tmp_path)
    table = _table(tmp_path)
    data = table.read_bytes()
    kept = marshal.loads(data[_start(data) :])
    (text,) = [text for text in kept if _is_points_init(text)]
    (init,) = [const for const in kept[text].co_consts if isinstance(const, CodeType)]
    at = data.index(init.co_code, _start(data))
    table.write_bytes(data[:at] + b"\x64\xff" * (len(init.co_code) // 2) + data[at + len(init.co_code) :])
    assert _run(tmp_path) == {**SAME, "kept": 0, "missed": True}  # compiled again, not run


@needs_create_fn
def test_another_users_table_is_not_read(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the table to another user")
    _run(tmp_path)
    table = _table(tmp_path)
    table.chmod(0o644)
    os.chown(table, 12345, 12345)
    assert _run(tmp_path) == {**SAME, "kept": 0, "missed": True}


@needs_create_fn
def test_a_link_in_the_tables_place_is_not_followed(tmp_path: Path) -> None:
    _run(tmp_path / "elsewhere")
    (tmp_path / "cache" / "code").mkdir(parents=True)
    (tmp_path / "cache" / "code" / _table(tmp_path / "elsewhere").name).symlink_to(_table(tmp_path / "elsewhere"))
    assert _run(tmp_path / "cache") == {**SAME, "kept": 0, "missed": True}


@needs_create_fn
def test_no_cache_folder_compiles_every_time(tmp_path: Path) -> None:
    env = {**os.environ, "GRADER_CACHE_DIR": ""}
    out = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {**SAME, "kept": 0, "missed": True}


@pytest.mark.skipif(KEPT, reason="this Python's dataclasses has _create_fn: the tests above cover keptcode there")
def test_nothing_changes_where_dataclasses_builds_its_methods_otherwise(tmp_path: Path) -> None:
    """Python 3.13 builds dataclass methods without ``_create_fn``: `install` leaves `dataclasses` alone, nothing is kept."""
    assert _run(tmp_path) == {**SAME, "kept": 0, "missed": False}
    assert not (tmp_path / "code").exists()
