"""Built-in plugin: Canvas and Moodle exports in, their grade import files out, a push to Canvas.

Intake (`grader.lmsintake`, called by the built-in locator). A zip or an
unpacked folder whose entries are named as Canvas's or Moodle's "download
submissions" export names them is read as that export, decided once from
all its entries (or ``--lms canvas|moodle|none``); only the LMS-written
prefix of a name is parsed, the student's file name is opaque. Every
student is keyed by the LMS's user id (Canvas user id, Moodle participant
id), and of their files the one named as the pack's submission file
(``attention.py``, else ``attention.ipynb``; Canvas's ``attention-1.py`` for
a second one, ``--attempt`` choosing) is graded, the others listed.
``--lms-times CSV``
reads when each was submitted from the LMS's own file (Moodle's grading
worksheet, ``Identifier`` and ``Last modified (submission)``; or any CSV with
an ``ID``/``id`` column and ``submitted_at``), the trusted time the course
policy uses.

Grades out, for ``grader grade``: ``DIR/canvas.csv`` (Canvas's gradebook
import: Student, ID, SIS User ID, SIS Login ID, Section, then the assignment
column, ``--canvas-assignment``) and ``DIR/moodle.csv`` (Moodle's assignment
grading worksheet import: Identifier, Full name, Grade, Maximum Grade,
Feedback comments), both with the final score and the adjustments' reasons.
``--canvas-push URL`` (``https://canvas.example.edu/courses/C/assignments/A``,
token in ``CANVAS_API_TOKEN``) posts each Canvas student's final score with
a feedback comment through ``canvasapi`` (the ``canvas`` extra).
"""

from __future__ import annotations

import csv
import io
import os
import re
from typing import Any

from grader.errors import ConfigError, UsageError
from grader.fileio import write_atomic
from grader.lmsintake import LMS_CHOICES, LOCATED
from grader.models import GradingReport, Submission
from grader.plugins import hookimpl
from grader.safetext import csv_cell
from grader.stash import StashKey
from grader.term import (
    adjustment_lines,
    parse_time,
    read_csv_rows,
    submission_feedback,
)

_TIMES = StashKey[Any]()
_PUSHED = StashKey[int]()

CANVAS_FILE = "canvas.csv"
MOODLE_FILE = "moodle.csv"
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_COLUMNS = ("Identifier", "Full name", "Grade", "Maximum Grade", "Feedback comments")


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    group = parser.add_argument_group("LMS")
    group.add_argument(
        "--lms",
        choices=LMS_CHOICES,
        default=None,
        help="which LMS made the export (default: decided from the names of all its entries; "
        "none: an ordinary class folder)",
    )
    group.add_argument(
        "--attempt",
        choices=("latest", "first"),
        default="latest",
        help="of several files of the submission's name in a Canvas export (attention.py, attention-1.py), "
        "which is graded (default: latest)",
    )
    group.add_argument(
        "--lms-times",
        metavar="CSV",
        help="the LMS's submission times (Moodle grading worksheet, or ID + submitted_at columns)",
    )
    group.add_argument(
        "--canvas-assignment",
        default=None,
        metavar="NAME",
        help="the assignment column of DIR/canvas.csv, as Canvas names it: 'Name (id)' "
        "(default: the pack's chapter and module names)",
    )
    group.add_argument(
        "--canvas-push",
        metavar="URL",
        help="post final scores and feedback to Canvas: https://HOST/courses/C/assignments/A "
        "(token in CANVAS_API_TOKEN; needs the 'canvas' extra)",
    )


def read_times(path: str) -> dict[str, str]:
    """Submission times by LMS user id (and by name) from an LMS's CSV: ISO 8601 UTC text.

    Raises
    ------
    grader.errors.UsageError
        If the file cannot be read or has no id or time column.
    """
    rows = read_csv_rows(path, "--lms-times", UsageError)
    if not rows:
        raise UsageError(f"--lms-times {path}: empty; export the grading worksheet again")
    header = [c.strip().lower() for c in rows[0]]
    id_col = next((header.index(n) for n in ("identifier", "id", "user_id", "student") if n in header), None)
    t_col = next(
        (header.index(n) for n in ("last modified (submission)", "submitted_at", "submitted") if n in header), None
    )
    name_col = header.index("full name") if "full name" in header else None
    if id_col is None or t_col is None:
        raise UsageError(
            f"--lms-times {path}: needs an id column (Identifier, ID) and a time column "
            "(Last modified (submission), submitted_at); export Moodle's grading worksheet"
        )
    out: dict[str, str] = {}
    for row in rows[1:]:
        if len(row) <= max(id_col, t_col):
            continue
        when = parse_time(row[t_col])
        if when is None:
            continue
        key = re.sub(r"^participant\s*", "", row[id_col].strip(), flags=re.IGNORECASE)
        out[key] = when.isoformat()
        if name_col is not None and len(row) > name_col:
            out.setdefault(row[name_col].strip(), when.isoformat())
    return out


@hookimpl(wrapper=True)
def grader_locate_submissions(path: str, config: Any) -> Any:
    """Give LMS students their trusted times (``--lms-times``) and keep the batch for the checks before grading.

    The export itself is read by `grader.lmsintake` (the built-in locator):
    its students already carry the LMS's facts (``Submission.lms``).
    """
    found = yield
    times = config.stash.get(_TIMES)
    if times is None and config.option("lms_times"):
        times = config.stash[_TIMES] = read_times(config.option("lms_times"))
    if times and found:
        found = [_timed(s, times) for s in found]
    if found:
        config.stash.setdefault(LOCATED, []).extend(found)
    return found


def _timed(sub: Submission, times: dict[str, str]) -> Submission:
    """The submission with its LMS time (matched by LMS user id, else by id), when the file gives one."""
    key = sub.lms.get("user") if sub.lms.get("user") in times else sub.id
    if not key or key not in times:
        return sub
    return Submission(
        sub.id,
        sub.path,
        sub.file,
        sub.sha256,
        sub.problem,
        sub.slug,
        sub.raw_name,
        {**sub.lms, "submitted_at": times[key]},
    )


@hookimpl
def grader_submission_time(submission: Submission, config: Any) -> list[tuple[str, str]] | None:
    when = submission.lms.get("submitted_at")
    return [("lms", when)] if when else None


def canvas_csv(report: GradingReport, assignment: str) -> str:
    """Canvas's gradebook import: `CANVAS_COLUMNS`, the assignment, then ``Notes`` (the adjustments' reasons).

    The second row is Canvas's ``Points Possible``; students from no Canvas
    export are left out (Canvas matches rows by ``ID``).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
    w.writerow([*CANVAS_COLUMNS, csv_cell(assignment), "Notes"])
    max_score = max((s.max_score for s in report.submissions), default=0.0)
    w.writerow(["    Points Possible", "", "", "", "", f"{max_score:g}", ""])
    for s in report.submissions:
        if s.lms.get("system") != "canvas":
            continue
        w.writerow(
            [
                csv_cell(s.lms.get("name", s.id)),
                csv_cell(s.lms["user"]),
                "",
                "",
                "",
                f"{s.score:g}",
                csv_cell(" | ".join(adjustment_lines(s))),
            ]
        )
    return buf.getvalue()


def moodle_csv(report: GradingReport, chapter: str) -> str:
    """Moodle's assignment grading worksheet, for "Upload grading worksheet": `MOODLE_COLUMNS`.

    ``Identifier`` is ``Participant <id>``; students from no Moodle export
    are left out. ``Feedback comments`` holds the scores and the reasons,
    headed by ``chapter`` (the course pack's short name).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
    w.writerow(MOODLE_COLUMNS)
    for s in report.submissions:
        if s.lms.get("system") != "moodle":
            continue
        w.writerow(
            [
                f"Participant {s.lms['user']}",
                csv_cell(s.lms.get("name", s.id)),
                f"{s.score:g}",
                f"{s.max_score:g}",
                csv_cell(submission_feedback(s, chapter).replace("\n", " | ")),
            ]
        )
    return buf.getvalue()


_PUSH = re.compile(r"^(?P<base>https?://[^/]+)/courses/(?P<course>\d+)/assignments/(?P<assignment>\d+)/?$")


def push_to_canvas(report: GradingReport, url: str, token: str, chapter: str) -> int:
    """Post each Canvas student's final score and a feedback comment (`grader.term.submission_feedback`).

    Uses ``canvasapi``: ``GET /api/v1/courses/C``, ``GET .../assignments/A``,
    then per student ``PUT .../assignments/A/submissions/USER`` with
    ``submission[posted_grade]`` and ``comment[text_comment]``.

    Returns
    -------
    int
        How many students were posted.

    Raises
    ------
    grader.errors.ConfigError
        If canvasapi is missing, the URL is not a Canvas assignment's, or Canvas refuses.
    """
    m = _PUSH.match(url)
    if m is None:
        raise ConfigError(
            f"--canvas-push {url}: not an assignment's address; give https://HOST/courses/COURSE/assignments/ASSIGNMENT"
        )
    try:
        from canvasapi import Canvas
        from canvasapi.exceptions import CanvasException
    except ImportError:
        raise ConfigError("--canvas-push: canvasapi is not installed; pip install 'g14-grader[canvas]'") from None
    try:
        assignment = Canvas(m["base"], token).get_course(int(m["course"])).get_assignment(int(m["assignment"]))
        posted = 0
        for s in report.submissions:
            if s.lms.get("system") != "canvas":
                continue
            assignment.get_submission(int(s.lms["user"])).edit(
                submission={"posted_grade": f"{s.score:g}"}, comment={"text_comment": submission_feedback(s, chapter)}
            )
            posted += 1
    except CanvasException as exc:
        raise ConfigError(
            f"--canvas-push {url}: Canvas refused ({type(exc).__name__}: {exc}); check the token and the address"
        ) from None
    except OSError as exc:  # the network: requests' ConnectionError and timeouts are OSErrors
        raise ConfigError(
            f"--canvas-push {url}: Canvas could not be reached ({type(exc).__name__}); check the "
            "address and the network; the other files were written"
        ) from None
    return posted


@hookimpl
def grader_write_reports(report: GradingReport, config: Any) -> None:
    """Write ``DIR/canvas.csv`` and ``DIR/moodle.csv`` when the batch has such students; push if asked."""
    if config.command != "grade":
        return
    out = config.out_dir
    systems = {s.lms.get("system") for s in report.submissions}
    if out is not None:
        try:
            if "canvas" in systems:
                write_atomic(
                    out / CANVAS_FILE,
                    canvas_csv(
                        report, config.option("canvas_assignment") or f"{config.pack.chapter} {config.pack.module}"
                    ),
                )
            if "moodle" in systems:
                write_atomic(out / MOODLE_FILE, moodle_csv(report, config.pack.chapter))
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write the LMS files ({exc.strerror})") from None
    url = config.option("canvas_push")
    if url:
        token = os.environ.get("CANVAS_API_TOKEN", "")
        if not token:
            raise ConfigError("--canvas-push: set CANVAS_API_TOKEN to a Canvas access token")
        config.stash[_PUSHED] = push_to_canvas(report, url, token, config.pack.chapter)


@hookimpl
def grader_configure(config: Any) -> None:
    """Check ``--canvas-push`` before anything is graded: its address, the token, canvasapi.

    Raises
    ------
    grader.errors.ConfigError
        In one line, with the fix.
    """
    url = config.option("canvas_push")
    if not url:
        return
    if _PUSH.match(url) is None:
        raise ConfigError(
            f"--canvas-push {url}: not an assignment's address; give https://HOST/courses/COURSE/assignments/ASSIGNMENT"
        )
    if not os.environ.get("CANVAS_API_TOKEN", ""):
        raise ConfigError("--canvas-push: set CANVAS_API_TOKEN to a Canvas access token")
    try:
        import canvasapi  # noqa: F401
    except ImportError:
        raise ConfigError("--canvas-push: canvasapi is not installed; pip install 'g14-grader[canvas]'") from None


@hookimpl
def grader_terminal_summary(report: Any, config: Any, write: Any) -> None:
    if _PUSHED in config.stash:
        write(f"canvas: {config.stash[_PUSHED]} score(s) and comments posted")
