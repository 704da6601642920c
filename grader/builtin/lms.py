"""Built-in plugin: Canvas and Moodle exports in, their grade import files out, a push to Canvas.

Intake. The names an LMS gives the entries of its "download submissions"
export are read (`grader.term.parse_lms_name`), in a zip or an unpacked
folder:

* Canvas: ``lastnamefirstname_userid_attemptid_filename`` (``_LATE_`` after
  the name when the submission was late): the id is ``lastnamefirstname``,
  the Canvas user id and the LATE mark are kept; several entries of one
  user are attempts, and the latest (largest attempt id) is graded unless
  ``--attempt first``;
* Moodle: a folder ``Full Name_participantid_assignsubmission_file_``: the
  id is the full name, the participant id is kept.

Ids still go through `grader.naming` (two ``smithbob`` stay two students).
A name neither system writes keeps today's behaviour. ``--lms-times CSV``
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
import sys
from typing import Any

from grader.errors import ConfigError, UsageError
from grader.fileio import write_atomic
from grader.models import GradingReport, Submission
from grader.naming import display_name
from grader.plugins import hookimpl
from grader.safetext import csv_cell, display
from grader.stash import StashKey
from grader.term import (
    adjustment_lines,
    parse_lms_name,
    submission_feedback,
)

_TIMES = StashKey[Any]()
_TIME_IDS = StashKey[dict[str, str]]()
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
        "--attempt",
        choices=("latest", "first"),
        default="latest",
        help="which of a student's attempts in a Canvas export is graded (default: latest)",
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


def _with_lms(sub: Submission) -> Submission:
    raw = display_name(sub.raw_name) if sub.raw_name else sub.id
    stem = raw.removesuffix(".py")
    info = parse_lms_name(stem)
    if info is None:
        return sub
    return Submission(info["name"], sub.path, sub.file, sub.sha256, sub.problem, sub.slug, sub.raw_name, info)


def choose_attempts(found: list[Submission], which: str = "latest") -> tuple[list[Submission], list[str]]:
    """Keep one attempt per LMS user (the largest attempt id, or the smallest for ``first``).

    Returns
    -------
    (list of Submission, list of str)
        The kept submissions in their order, and a note per user with several attempts.
    """
    groups: dict[tuple[str, str], list[Submission]] = {}
    for sub in found:
        if sub.lms:
            groups.setdefault((sub.lms["system"], sub.lms["user"]), []).append(sub)
    keep: dict[int, Submission] = {}
    notes = []
    for (system, user), subs in groups.items():
        # Entries with a gradable file first (a Moodle participant's onlinetext folder holds none), then by attempt id.
        gradable = [s for s in subs if s.file is not None and not s.problem] or subs
        order = sorted(gradable, key=lambda s: int(s.lms.get("attempt", "0")))
        chosen = order[-1] if which == "latest" else order[0]
        lms = {**chosen.lms, "attempts": str(len(gradable))}  # "late" is the graded attempt's own mark
        keep[id(chosen)] = Submission(
            chosen.id, chosen.path, chosen.file, chosen.sha256, chosen.problem, chosen.slug, chosen.raw_name, lms
        )
        if len(gradable) > 1:
            notes.append(
                f"{chosen.id} ({system} user {user}): {len(subs)} attempts, graded the {which} "
                f"(attempt {chosen.lms.get('attempt', '?')})"
            )
    out = []
    for sub in found:
        if not sub.lms:
            out.append(sub)
        elif id(sub) in keep:
            out.append(keep[id(sub)])
    return out, notes


_LAST_IDS: dict[str, str] = {}
"""The ids (and their names) of the last `read_times`: what a warning of rows matching no submission names."""


def read_times(path: str) -> dict[str, str]:
    """Submission times by LMS user id (and by name) from an LMS's CSV: ISO 8601 text.

    The table is read by `grader.tables.read_table` (encoding and delimiter sniffed). A time with
    an offset is kept with it; one without (Moodle's worksheet) is kept without, and read in the
    policy's time zone. Dates in English, French, German, Spanish and Portuguese are read
    (`grader.term.parse_local_time`); an empty cell or ``-`` is no time.

    Raises
    ------
    grader.errors.UsageError
        If the file cannot be read, has no id or time column, or a time cell holds text that is
        no date this grader reads (the line, the text and the formats read are named).
    """
    from grader.tables import delimiter_name, read_table
    from grader.term import MOODLE_TIME_FORMATS, parse_local_time

    table = read_table(path, "--lms-times", UsageError)
    if not table.header:
        raise UsageError(f"--lms-times {path}: empty; export the grading worksheet again")
    id_col = table.column("identifier", "id", "user_id", "student")
    t_col = table.column("last modified (submission)", "submitted_at", "submitted")
    name_col = table.column("full name")
    if id_col is None or t_col is None:
        found = ", ".join(repr(c) for c in table.header[:6])
        raise UsageError(
            f"--lms-times {path}: line {table.header_line}: needs an id column (Identifier, ID) and a time column "
            f"(Last modified (submission), submitted_at); found {found} ({delimiter_name(table.delimiter)}-"
            "separated); export Moodle's grading worksheet"
        )
    out: dict[str, str] = {}
    _LAST_IDS.clear()
    lines: dict[str, int] = {}
    twice: list[str] = []
    no_id: list[int] = []
    short: list[int] = []
    for line, row in table.rows:
        if len(row) <= t_col:
            short.append(line)
            continue
        text = row[t_col].strip()
        when = parse_local_time(text)
        if when is None:
            if text and text != "-" and any(ch.isdigit() for ch in text):
                raise UsageError(
                    table.problem(
                        line,
                        table.header[t_col],
                        f"{text[:60]!r} is not a date this grader reads",
                        f"it reads {MOODLE_TIME_FORMATS}; export the worksheet again in one of them",
                    )
                )
            continue
        key = re.sub(r"^participant\s*", "", row[id_col].strip() if id_col < len(row) else "", flags=re.IGNORECASE)
        if not key:
            no_id.append(line)
            continue
        if key in out:
            twice.append(f"{key} (lines {lines[key]} and {line})")
            continue
        out[key] = when.isoformat()
        lines[key] = line
        name = row[name_col].strip() if name_col is not None and len(row) > name_col else ""
        _LAST_IDS[key] = name
        if name:
            out.setdefault(name, when.isoformat())
    if twice:
        print(
            f"grader: warning: --lms-times {display(path)}: {len(twice)} id(s) given twice, the first time is "
            f"used: {display(', '.join(twice[:5]))}{' ...' if len(twice) > 5 else ''}",
            file=sys.stderr,
        )
    if short:
        print(
            f"grader: warning: --lms-times {display(path)}: {len(short)} row(s) too short to hold a time are left "
            f"out (line {', '.join(map(str, short[:10]))}); export the worksheet again",
            file=sys.stderr,
        )
    if no_id:
        print(
            f"grader: warning: --lms-times {display(path)}: {len(no_id)} row(s) with a time but no id are left "
            f"out (line {', '.join(map(str, no_id[:10]))}); export the worksheet again",
            file=sys.stderr,
        )
    return out


@hookimpl(wrapper=True)
def grader_locate_submissions(path: str, config: Any) -> Any:
    """Read LMS names and keep one attempt per student."""
    found = yield
    found = [_with_lms(s) for s in found]
    found, notes = choose_attempts(found, config.option("attempt") or "latest")
    for note in notes:
        print(f"grader: {display(note)}", file=sys.stderr)
    times = config.stash.get(_TIMES)
    if times is None and config.option("lms_times"):
        times = config.stash[_TIMES] = read_times(config.option("lms_times"))
        config.stash[_TIME_IDS] = dict(_LAST_IDS)
    if times:
        found = [_timed(s, times) for s in found]
    return found


def _timed(sub: Submission, times: dict[str, str]) -> Submission:
    """The submission with its LMS time (matched by LMS user id, else by id), when the file gives one."""
    key = sub.lms.get("user") if sub.lms.get("user") in times else sub.id
    if key not in times:
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
def grader_collection_finish(submissions: Any, collected: Any, config: Any) -> None:
    """Warn of ``--lms-times`` rows that match no submission of this run (by LMS user id, id or name)."""
    ids = config.stash.get(_TIME_IDS)
    if not ids:
        return
    known = {s.id for s in submissions} | {s.lms.get("user") for s in submissions if s.lms}
    unknown = sorted(key for key, name in ids.items() if key not in known and name not in known)
    if unknown:
        print(
            f"grader: warning: --lms-times {display(config.option('lms_times'))}: {len(unknown)} row(s) match no "
            f"submission of this run: {display(', '.join(unknown[:10]))}{' ...' if len(unknown) > 10 else ''}",
            file=sys.stderr,
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
        from canvasapi.exceptions import CanvasException
    except ImportError:
        raise ConfigError("--canvas-push: canvasapi is not installed; pip install 'g14-grader[canvas]'") from None
    try:
        from grader.addresses import bounded_canvas

        course = bounded_canvas(m["base"], token).get_course(int(m["course"]))
        assignment = course.get_assignment(int(m["assignment"]))
        if getattr(course, "id", None) != int(m["course"]) or getattr(assignment, "id", None) != int(m["assignment"]):
            raise ValueError("not a Canvas course and assignment")
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
    except (OSError, AttributeError, KeyError, TypeError, ValueError) as exc:
        # the network (requests' errors and timeouts are OSErrors), or an answer that is not Canvas's
        from grader.addresses import canvas_failure

        raise canvas_failure(url, exc) from None
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
    if config.option("lms_times") and not config.option("policy") and config.command == "grade":
        print(
            f"grader: warning: --lms-times {display(config.option('lms_times'))}: without --policy the times "
            "change nothing; pass --policy policy.yaml to apply a late penalty",
            file=sys.stderr,
        )
    url = config.option("canvas_push")
    if not url:
        return
    from grader.addresses import check_canvas_url

    check_canvas_url(url)
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
