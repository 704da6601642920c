"""Text with holes: a report's fixed text kept once per distinct result, filled per student.

The end-of-run writers (``junit.xml``, ``ctrf.json``) write the same test cases for every student
whose exercise result is the same, but for the student's name and each check's seconds. They keep
each distinct result's text as a `Holed` (its fixed pieces and where the name and each number go)
and fill it per student, instead of formatting every check again.
"""

from __future__ import annotations

from collections.abc import Iterable

NAME = object()
"""A hole for the student's name (the same text in every such hole of one fill)."""

NUMBER = object()
"""A hole for one number (each such hole gets the next of the numbers, in order)."""


class Holed:
    """Fixed pieces of text, with `NAME` and `NUMBER` holes between them.

    Examples
    --------
    >>> form = Holed()
    >>> form.add("<case of=", NAME, " time=", NUMBER, "/>")
    >>> form.fill('"ada"', ["0.001"])
    '<case of="ada" time=0.001/>'
    """

    __slots__ = ("names", "numbers", "pieces")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.names: list[int] = []
        self.numbers: list[int] = []

    def add(self, *parts: str | object) -> None:
        """Append ``parts``: each a piece of text, `NAME` or `NUMBER`."""
        for part in parts:
            if part is NAME:
                self.names.append(len(self.pieces))
            elif part is NUMBER:
                self.numbers.append(len(self.pieces))
            self.pieces.append(part if isinstance(part, str) else "")

    def extend(self, other: Holed) -> None:
        """Append ``other``'s pieces and holes, after these (its `NUMBER` holes take the numbers after these')."""
        base = len(self.pieces)
        self.pieces += other.pieces
        self.names += [base + i for i in other.names]
        self.numbers += [base + i for i in other.numbers]

    def fill(self, name: str, numbers: Iterable[str]) -> str:
        """The text with every `NAME` hole holding ``name`` and the `NUMBER` holes ``numbers``, in order.

        Surplus numbers are ignored and missing ones leave their holes empty, as the writers never
        give either (a result's checks and their places in a row of seconds are one list).
        """
        text = self.pieces.copy()
        for i in self.names:
            text[i] = name
        for i, number in zip(self.numbers, numbers):
            text[i] = number
        return "".join(text)
