"""Per-student output files: each named by the student's slug, never by text the student chose."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grader.fileio import names_in, write_atomic
from grader.intake.naming import RESERVED, assign_slugs, slug_base, slugs_of

__all__ = ["SubmissionFiles", "safe_name", "unique_file_names"]


def safe_name(text: str) -> str:
    """The file-name-safe form of a student id (`grader.intake.naming.slug_base`)."""

    return slug_base(text)


def unique_file_names(ids: list[str], suffix: str, reserved: tuple[str, ...] = ()) -> dict[str, str]:
    """A unique, file-name-safe ``<slug><suffix>`` for each id (`grader.intake.naming.assign_slugs`).

    Parameters
    ----------
    ids : list of str
        Student ids, in order (distinct).
    suffix : str
        The file extension, with its dot.
    reserved : tuple of str
        File names never given out, besides `grader.intake.naming.RESERVED`
        (compared without their suffix and case).
    """

    stems = tuple(r[: -len(suffix)] if suffix and r.endswith(suffix) else r for r in reserved)
    return {sid: slug + suffix for sid, slug in zip(ids, assign_slugs(ids, reserved=(*RESERVED, *stems)))}


class SubmissionFiles:
    """One file per submission of a batch: names fixed up front, each written once, when its result comes.

    Writers make one when the batch is known (``grader_collection_finish``),
    `write` each result as it arrives (``grader_submission_graded``) and,
    with the final report, `write_missing` whatever no result was streamed
    for. The folder is listed once, when it is made: a file whose name was
    not there then is written without looking up its destination again
    (`grader.fileio.write_atomic`'s ``absent``); one that was is checked as
    usual (never written over a link, a FIFO, a device or a folder).

    Parameters
    ----------
    folder : pathlib.Path
        Where the files go (made when missing).
    items : sequence
        Every submission (or result) of the batch, in order: objects with
        ``id`` and ``slug``; each file is ``<slug><suffix>`` (see
        `grader.intake.naming`; slugs are made from the ids when they are missing).
    suffix : str
        The file extension, with its dot.
    render : callable
        ``render(result) -> str``: a result's file text.
    failure : str
        The start of the one-line error when a file cannot be written
        (``"--out DIR: cannot write the reports"``).
    """

    def __init__(
        self,
        folder: Path,
        items: Sequence[Any],
        suffix: str,
        render: Callable[[Any], str],
        failure: str,
    ) -> None:

        self.folder = folder
        where = os.fspath(folder)  # joined as strings: pathlib costs more than the rest
        self.names = {sid: slug + suffix for sid, slug in slugs_of(items).items()}
        self._paths = {sid: os.path.join(where, name) for sid, name in self.names.items()}
        # What the folder held when the batch began: a name not among them is written without looking up
        # what is there (a new name's lookup reads the folder's index from disk, per file).
        self._before = names_in(where)
        self.render = render
        self.failure = failure
        self.written: set[str] = set()

    def covers(self, results: Sequence[Any]) -> bool:
        """Whether the names were fixed for exactly these results' ids."""
        return set(self.names) == {r.id for r in results}

    def write(self, result: Any) -> None:
        """Write one result's file.

        Raises
        ------
        grader.errors.UsageError
            If it cannot be written (``failure`` and the reason).
        """
        from grader.errors import UsageError

        try:
            name = self.names[result.id]
            write_atomic(self._paths[result.id], self.render(result), absent=name.casefold() not in self._before)
        except OSError as exc:
            raise UsageError(f"{self.failure} ({exc.strerror})") from None
        self.written.add(result.id)

    def write_missing(self, results: Sequence[Any]) -> None:
        """Write the files of the results not written yet."""
        for result in results:
            if result.id not in self.written:
                self.write(result)
