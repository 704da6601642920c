"""Reading YAML safely: specs, the mutant catalogue and every other YAML file the grader reads.

A `yaml.SafeLoader` that also refuses aliases (alias bombs), duplicate keys, keys that are not
plain strings or numbers, and the binary, set and ordered-map tags; dates stay text; files are
bounded in size (`MAX_SPEC_BYTES`) and depth (`MAX_DEPTH`). Errors are `grader.errors.SpecError`
naming the file.

Where PyYAML has libyaml (its wheels do), the text is scanned and parsed by libyaml's C parser
and composed and constructed by the same Python rules (`_StrictCLoader`): six times faster, which
``grader check`` with the specs needs (issue 16). A file libyaml refuses is read again by the
pure-Python loader, so an error says exactly what it said before.
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from grader.errors import SpecError

__all__ = ["MAX_DEPTH", "MAX_SPEC_BYTES", "parse_yaml", "parse_yaml_text"]

MAX_SPEC_BYTES = 1 << 20
"""Largest spec file read, in bytes (1 MiB)."""

MAX_DEPTH = 32
"""Deepest nesting of lists and mappings in a spec (the first pack's specs use at most 6)."""


class _Strict:
    """The strict rules (no aliases, bounded depth, plain unique keys), over any parser: mixed in first."""

    def compose_node(self: Any, parent: Any, index: Any) -> Any:  # noqa: D401
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"aliases (*name) are not allowed in specs (line {event.start_mark.line + 1})")
        depth = getattr(self, "_depth", 0)
        if depth >= MAX_DEPTH:  # refused before the recursion gets deep (no RecursionError)
            line = self.peek_event().start_mark.line + 1
            raise yaml.YAMLError(
                f"nested more than {MAX_DEPTH} levels deep (line {line}); specs hold plain "
                "lists and mappings a few levels deep"
            )
        self._depth = depth + 1
        try:
            return Composer.compose_node(self, parent, index)
        finally:
            self._depth = depth

    def construct_mapping(self: Any, node: Any, deep: bool = False) -> Any:
        seen: set[tuple[type, Any]] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise yaml.YAMLError(f"a key must be a plain string or number (line {line})")
            if (type(key), key) in seen:
                raise yaml.YAMLError(f"duplicate key {key!r} (line {line})")
            seen.add((type(key), key))
        return SafeConstructor.construct_mapping(self, node, deep=deep)

    def _refuse(self: Any, node: Any) -> Any:
        raise yaml.YAMLError(f"the tag {node.tag} is not allowed in specs (line {node.start_mark.line + 1})")


class _StrictSafeLoader(_Strict, yaml.SafeLoader):
    """SafeLoader that also refuses aliases (alias bombs) and duplicate keys."""


# Specs hold plain data: dates stay text; binary, sets and ordered maps are refused.
_StrictSafeLoader.add_constructor(  # type: ignore[type-var]  # the stubs want a constructor of the subclass
    "tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str
)
for _tag in ("binary", "set", "omap", "pairs"):
    _StrictSafeLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _StrictSafeLoader._refuse)

_StrictCLoader: Any = None
"""`_StrictSafeLoader`'s rules on libyaml's parser (its events, with their marks), or None without libyaml.

Only the scanner and parser are libyaml's: composing (where aliases and depth are refused) and
constructing (duplicate keys, tags) are the same Python methods as `_StrictSafeLoader`'s.
libyaml refuses nesting deeper than its own limit (1000) before the Python depth check runs.
Where the two parsers are known to differ, the pure-Python loader reads the file instead: a
text holding a tab, a carriage return, a byte-order mark or a Unicode line break, or a block
scalar's header touching a comment (`_PURE_ONLY`: libyaml accepts some of these where PyYAML
refuses them), and any node with an explicit tag (``!`` alone resolves differently).
"""
_PURE_ONLY = re.compile("[\t\r\ufeff\x85\u2028\u2029]|[|>][-+0-9]*#")


class _NeedsPure(yaml.YAMLError):
    """Raised by `_StrictCLoader` where only the pure-Python loader may decide."""


if getattr(yaml, "__with_libyaml__", False):
    from yaml._yaml import CParser

    class _CLoader(_Strict, CParser, SafeConstructor, Resolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self.anchors: dict[Any, Any] = {}

        def compose_node(self, parent: Any, index: Any) -> Any:
            if getattr(self.peek_event(), "tag", None) is not None:
                raise _NeedsPure("a tagged node")
            return _Strict.compose_node(self, parent, index)

        # libyaml's own composer is replaced by the Python one (which the strict rules extend).
        get_single_node = Composer.get_single_node
        compose_document = Composer.compose_document
        compose_scalar_node = Composer.compose_scalar_node
        compose_sequence_node = Composer.compose_sequence_node
        compose_mapping_node = Composer.compose_mapping_node

    _CLoader.yaml_constructors = _StrictSafeLoader.yaml_constructors
    _StrictCLoader = _CLoader


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
    return parse_yaml_text(text, path)


def parse_yaml_text(text: str, path: str) -> Any:
    """Read YAML text safely, by the rules of `parse_yaml` (no aliases, tags or duplicate keys; bounded depth).

    Parameters
    ----------
    text : str
        The file's text (already read, and bounded in size, by the caller).
    path : str
        The file, for messages.

    Returns
    -------
    object
        Plain data (dicts, lists, str, int, float, bool, None); dates stay text.

    Raises
    ------
    grader.errors.SpecError
        If the text is not valid YAML or uses tags, aliases or duplicate keys, or nests too deeply.
    """
    if _StrictCLoader is not None and not _PURE_ONLY.search(text):
        try:
            return yaml.load(text, Loader=_StrictCLoader)  # noqa: S506 - the SafeLoader's rules, libyaml's parser
        except (yaml.YAMLError, RecursionError):
            pass  # read again below: the pure-Python loader words the error as it always has
    try:
        return yaml.load(text, Loader=_StrictSafeLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise SpecError(path, "", f"invalid YAML: {problem}") from None
    except RecursionError:  # belt and braces: MAX_DEPTH refuses deep nesting first
        raise SpecError(path, "", f"nested too deeply; specs are limited to {MAX_DEPTH} levels") from None
