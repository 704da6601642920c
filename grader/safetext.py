"""Student text made safe for each reader: terminal, CSV, GitHub Actions, Markdown, XML.

A student controls many strings the grader writes: folder and file names
(ids), exception messages, what the code printed. Each reader of the
grader's outputs gives some characters a meaning of its own:

* a terminal runs escape sequences (CSI ``ESC [``, OSC ``ESC ]`` can set the
  window title or write the clipboard) and control characters (CR rewrites
  a line, C1 ``0x9b`` is a CSI); bidi overrides reorder what one reads;
* a spreadsheet runs a cell that starts with ``= + - @`` (also after
  leading spaces or quotes, and TAB or CR) as a formula, and a bare CR or
  LF starts a new row for some importers;
* GitHub Actions runs any log line that starts with ``::`` (after leading
  white space) as a workflow command, and reads ``%``, CR, LF (and ``:``,
  ``,`` in properties) specially inside a command;
* Markdown and HTML run ``<tags>``, ``|`` ends a table cell, backticks
  start code;
* XML 1.0 cannot hold C0 controls other than TAB, LF, CR, nor U+FFFE,
  U+FFFF or lone surrogates, even escaped.

Every writer passes student text through the function for its reader;
the writers never import one another, they share this module.
"""

from __future__ import annotations

import functools
import os
import re

__all__ = [
    "csv_cell",
    "display",
    "gh_data",
    "gh_property",
    "in_github_actions",
    "markdown_inline",
    "stop_commands",
    "unicode_safe",
    "xml_text",
]

# ESC-introduced sequences, removed whole (payload included):
#  CSI  ESC [ params intermediates final
#  OSC, DCS, SOS, PM, APC  ESC ] / P / X / ^ / _ ... up to BEL or ST (ESC \), else the line's end
#  any other two-character escape  ESC x
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c\n\r]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x9b[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|[\x9d\x90\x98\x9e\x9f][^\x07\x1b\x9c\n\r]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x7e]?"
)

# Bidi embedding, override and isolate controls, and marks (Trojan Source, CVE-2021-42574).
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

# Controls that end up removed: C0 but TAB/LF, DEL, C1, bidi, BOM / zero-width no-break space.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI + "\ufeff]")
_LINE_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x85\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_safe(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so it encodes as UTF-8.

    Parameters
    ----------
    text : str
        Any string (a non-string is turned into one with ``str``).

    Returns
    -------
    str
        The same text, every code point in U+D800..U+DFFF replaced by U+FFFD.
    """
    if not isinstance(text, str):
        text = str(text)
    return _SURROGATE.sub("\ufffd", text)


def display(text: str, newlines: bool = False) -> str:
    """Student text as plain, inert characters for a terminal or a log.

    Escape sequences (CSI, OSC, DCS, APC, PM, SOS and two-character ones,
    in 7-bit and 8-bit form) are removed whole, then every C0 and C1
    control character, DEL, bidi control and BOM; TAB becomes a space and
    lone surrogates U+FFFD.

    Parameters
    ----------
    text : str
    newlines : bool
        Keep line breaks (CR LF, CR, LF, VT, FF, NEL, U+2028/9 become LF).
        By default every line break becomes a space, so the text stays on
        the line the grader puts it on.

    Returns
    -------
    str
    """
    if type(text) is str:
        if text.isascii() and text.isprintable():  # no escape, control, line break, tab or surrogate: as it is
            return text
        if len(text) <= _KEPT_LENGTH:
            return _display_kept(text, newlines)  # the same ids, messages and hints, page after page
    return _display(text, newlines)


_KEPT_LENGTH = 512
"""`display` keeps its answers for texts up to this long (at most 4,096 of them)."""


def _display(text: str, newlines: bool) -> str:
    text = unicode_safe(text)
    text = _ESCAPE_SEQUENCE.sub("", text)
    text = _LINE_BREAKS.sub("\n" if newlines else " ", text)
    text = text.replace("\t", " ")
    return _CONTROLS.sub("", text)


_display_kept = functools.lru_cache(maxsize=4096)(_display)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


def csv_cell(text: str) -> str:
    """A student-controlled text cell that a spreadsheet shows as text.

    Every run of CR and LF becomes one space (no field spans lines), other
    control and bidi characters are removed, and a cell that starts like a
    formula (``=``, ``+``, ``-``, ``@``, TAB), also after leading spaces or
    quotes, gets a leading apostrophe (OWASP's "CSV injection" advice).

    Parameters
    ----------
    text : str

    Returns
    -------
    str
        E.g. ``'=HYPERLINK("x")`` for ``=HYPERLINK("x")``, ``' +1`` for
        `` +1``, ``a b`` for ``a\\r\\nb``.
    """
    text = unicode_safe(text)
    text = re.sub("[\r\n\x0b\x0c\x85\u2028\u2029]+", " ", text)
    text = re.sub("[\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI + "\ufeff]", "", text)  # TAB kept: caught below
    if text.lstrip(" \"'").startswith(_FORMULA_START) or text.startswith(_FORMULA_START):
        return "'" + text
    return text


def gh_data(text: str) -> str:
    """Escape the message of a GitHub workflow command: ``%`` -> ``%25``, CR -> ``%0D``, LF -> ``%0A``.

    As `@actions/core`'s ``escapeData`` does; the runner unescapes these
    three and nothing else. Lone surrogates become U+FFFD.
    """
    return unicode_safe(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def gh_property(text: str) -> str:
    """Escape a property value of a workflow command: `gh_data`, plus ``:`` -> ``%3A`` and ``,`` -> ``%2C``."""
    return gh_data(text).replace(":", "%3A").replace(",", "%2C")


def in_github_actions() -> bool:
    """Whether this process runs in a GitHub Actions job (``GITHUB_ACTIONS=true``)."""
    return os.environ.get("GITHUB_ACTIONS") == "true"


def stop_commands(token: str | None = None) -> tuple[str, str]:
    """The two lines that make GitHub Actions ignore workflow commands between them.

    Parameters
    ----------
    token : str, optional
        The resume token; by default 32 random hex digits
        (`secrets.token_hex`), which the text in between cannot guess.

    Returns
    -------
    (str, str)
        ``"::stop-commands::TOKEN"`` and ``"::TOKEN::"``.
    """
    if not token:
        import secrets  # here: only the GitHub annotations need a token (secrets imports hmac, base64)

        token = secrets.token_hex(16)
    return f"::stop-commands::{token}", f"::{token}::"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~!#])")


def markdown_inline(text: str) -> str:
    """Student or spec text as inert inline Markdown: one line, no HTML, no links, no code.

    Control and bidi characters are removed (`display`), white space runs
    (newlines included) become one space, ``& < >`` become HTML entities and
    Markdown's special characters (`` \\ ` * _ [ ] | ~ ! # ``) are
    backslash-escaped, so the text can sit in a table cell.
    """
    import html  # here: only the GitHub step summary writes Markdown (html imports its entity tables)

    return _MD_SPECIAL.sub(r"\\\1", html.escape(" ".join(display(text).split()), quote=False))


# Characters XML 1.0 cannot hold, even escaped: the complement of its Char production (TAB, LF,
# CR, U+0020-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF), written as the set itself because the
# negated class with its astral range took 3.7 ms to compile at import (issue 16: grader check), the
# set itself still 1 ms: compiled when an XML file is first written (grader check writes none).
@functools.cache
def _not_xml() -> re.Pattern[str]:
    return re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold.

    Removes C0 controls other than TAB, LF and CR, lone surrogates, U+FFFE
    and U+FFFF; the XML library escapes the rest (``& < >`` and quotes).
    """
    if not isinstance(text, str):
        text = str(text)
    return _not_xml().sub("", text)
