"""Reading YAML safely: specs, the mutant catalogue and every other YAML file the grader reads.

A `yaml.SafeLoader` that also refuses aliases (alias bombs), duplicate keys, keys that are not
plain strings or numbers, and the binary, set and ordered-map tags; dates stay text; files are
bounded in size (`MAX_SPEC_BYTES`) and depth (`MAX_DEPTH`). Errors are `grader.errors.SpecError`
naming the file.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from grader.errors import SpecError

__all__ = ["MAX_DEPTH", "MAX_SPEC_BYTES", "parse_yaml"]

MAX_SPEC_BYTES = 1 << 20
"""Largest spec file read, in bytes (1 MiB)."""

MAX_DEPTH = 32
"""Deepest nesting of lists and mappings in a spec (the first pack's specs use at most 6)."""


class _StrictSafeLoader(yaml.SafeLoader):
    """SafeLoader that also refuses aliases (alias bombs) and duplicate keys."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D401
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
            raise yaml.YAMLError(f"aliases (*name) are not allowed in specs (line {event.start_mark.line + 1})")
        depth = getattr(self, "_depth", 0)
        if depth >= MAX_DEPTH:  # refused before the recursion gets deep (no RecursionError)
            line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
            raise yaml.YAMLError(
                f"nested more than {MAX_DEPTH} levels deep (line {line}); specs hold plain "
                "lists and mappings a few levels deep"
            )
        self._depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[tuple[type, Any]] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise yaml.YAMLError(f"a key must be a plain string or number (line {line})")
            if (type(key), key) in seen:
                raise yaml.YAMLError(f"duplicate key {key!r} (line {line})")
            seen.add((type(key), key))
        return super().construct_mapping(node, deep=deep)

    def _refuse(self, node: Any) -> Any:
        raise yaml.YAMLError(f"the tag {node.tag} is not allowed in specs (line {node.start_mark.line + 1})")


# Specs hold plain data: dates stay text; binary, sets and ordered maps are refused.
_StrictSafeLoader.add_constructor(  # type: ignore[type-var]  # the stubs want a constructor of the subclass
    "tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str
)
for _tag in ("binary", "set", "omap", "pairs"):
    _StrictSafeLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _StrictSafeLoader._refuse)


def parse_yaml(path: str) -> Any:
    """Read a YAML file safely.

    Parameters
    ----------
    path : str
        The file.

    Returns
    -------
    object
        Plain data (dicts, lists, str, int, float, bool, None).

    Raises
    ------
    grader.errors.SpecError
        If the file is unreadable, larger than `MAX_SPEC_BYTES`, not valid
        YAML, or uses tags, aliases or duplicate keys.
    """
    try:
        size = os.path.getsize(path)
        if size > MAX_SPEC_BYTES:
            raise SpecError(path, "", f"the file is {size} bytes; specs are limited to {MAX_SPEC_BYTES} bytes")
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(path, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SpecError(path, "", f"cannot read the file: {exc.strerror}") from None
    try:
        return yaml.load(text, Loader=_StrictSafeLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise SpecError(path, "", f"invalid YAML: {problem}") from None
    except RecursionError:  # belt and braces: MAX_DEPTH refuses deep nesting first
        raise SpecError(path, "", f"nested too deeply; specs are limited to {MAX_DEPTH} levels") from None
