"""Built-in plugin: Canvas and Moodle exports in, their grade import files out, a push to Canvas.

Intake (`grader.intake.lms`, called by the built-in locator). A zip or an
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

Grades out, for ``grader grade`` (each tested against the importer's own code, see
docs/exports.md): ``DIR/canvas.csv`` (Canvas's gradebook import: Student, ID, SIS User ID,
SIS Login ID, Section, the custom column ``Notes``, then the assignment column ``Title (id)``,
`canvas_assignment_column`) and ``DIR/moodle.csv`` (Moodle's grading worksheet import:
Identifier, Full name, Grade, Maximum Grade, Last modified (grade), Feedback comments as
escaped HTML), both with the final score and the adjustments' reasons, keyed by the LMS's
id (`lms_user_id`). ``--canvas-push URL`` (``https://canvas.example.edu/courses/C/assignments/A``,
token in ``CANVAS_API_TOKEN``) posts the Canvas students' final scores and feedback comments
in one bulk request through ``canvasapi`` (the ``canvas`` extra), retried on rate limits, never
a comment twice for the same result, and never over plain ``http://`` but to localhost with
``--allow-http`` (`push_to_canvas`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import sys
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from grader.errors import ConfigError, UsageError
from grader.fileio import write_atomic
from grader.intake import LOCATED
from grader.markers import hookimpl
from grader.models import GradingReport, Submission
from grader.reporting.feedback import adjustment_lines, submission_feedback
from grader.safetext import csv_cell, display
from grader.stash import StashKey

if TYPE_CHECKING:
    from grader.config.core import Config

_TIMES = StashKey[Any]()
_TIME_IDS = StashKey[dict[str, str]]()
_PUSHED = StashKey[int]()

CANVAS_FILE = "canvas.csv"
MOODLE_FILE = "moodle.csv"
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_COLUMNS = (
    "Identifier",
    "Full name",
    "Grade",
    "Maximum Grade",
    "Last modified (grade)",
    "Feedback comments",
)


@hookimpl
def grader_addoption(parser: Any, command: str) -> None:
    if command not in ("grade", "similarity"):
        return
    from grader.intake.lms import LMS_CHOICES  # here: 'grader check' never reads an LMS export

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
    group.add_argument(
        "--allow-http",
        action="store_true",
        help="let --canvas-push use a plain http:// address on localhost (a test server; never a real Canvas)",
    )


_LAST_IDS: dict[str, str] = {}
"""The ids (and their names) of the last `read_times`: what a warning of rows matching no submission names."""


def read_times(path: str) -> dict[str, str]:
    """Submission times by LMS user id (and by name) from an LMS's CSV: ISO 8601 text.

    The table is read by `grader.readers.tables.read_table` (encoding and delimiter sniffed). A time with
    an offset is kept with it; one without (Moodle's worksheet) is kept without, and read in the
    policy's time zone. Dates in English, French, German, Spanish and Portuguese are read
    (`grader.term.parse_local_time`); an empty cell or ``-`` is no time.

    Raises
    ------
    grader.errors.UsageError
        If the file cannot be read, has no id or time column, or a time cell holds text that is
        no date this grader reads (the line, the text and the formats read are named).
    """
    from grader.readers.tables import delimiter_name, read_table
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
def grader_locate_submissions(path: str, config: Config) -> Any:
    """Give LMS students their trusted times (``--lms-times``) and keep the batch for the checks before grading.

    The export itself is read by `grader.intake.lms` (the built-in locator):
    its students already carry the LMS's facts (``Submission.lms``).
    """
    found = yield
    times = config.stash.get(_TIMES)
    if times is None and config.option("lms_times"):
        times = config.stash[_TIMES] = read_times(config.option("lms_times"))
        config.stash[_TIME_IDS] = dict(_LAST_IDS)
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
def grader_collection_finish(submissions: Any, collected: Any, config: Config) -> None:
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
def grader_submission_time(submission: Submission, config: Config) -> list[tuple[str, str]] | None:
    when = submission.lms.get("submitted_at")
    return [("lms", when)] if when else None


def lms_user_id(sub: Any) -> str:
    """The LMS's id of a result's student, the one every LMS writer (canvas.csv, moodle.csv, the push) keys on.

    Parameters
    ----------
    sub : grader.models.SubmissionResult
        A result from an LMS export (``sub.lms`` holds ``user``).

    Returns
    -------
    str
        Canvas's user id, or Moodle's participant id; "" when the result came from no LMS export.
    """
    return str(sub.lms.get("user", ""))


_TITLE_AND_ID = re.compile(r"\A(.*)\s+\((\d+)\)\Z")
"""Canvas's ``Assignment.title_and_id``: a column ``Title (id)`` is matched to assignment ``id``."""


def canvas_assignment_column(given: str | None, default_title: str, push_url: str | None) -> tuple[str, str | None]:
    """The assignment column of ``canvas.csv``, and a warning when Canvas cannot match it by id.

    Canvas's importer (``app/models/gradebook_importer.rb``, ``parse_assignments``) matches a
    column ``Title (id)`` to the assignment with that id; a bare title matches only an
    assignment with exactly that title, else it creates a new assignment.

    Parameters
    ----------
    given : str or None
        ``--canvas-assignment``.
    default_title : str
        The pack's chapter and module names.
    push_url : str or None
        ``--canvas-push``: its assignment id makes ``default_title (id)``.

    Returns
    -------
    (str, str or None)
        The header, and a one-line warning (None when the header carries an id).
    """
    if given:
        if _TITLE_AND_ID.match(given):
            return given, None
        title = given
    else:
        m = _PUSH.match(push_url or "")
        if m is not None:
            return f"{default_title} ({m['assignment']})", None
        title = default_title
    return title, (
        f"canvas.csv: the assignment column '{title}' carries no Canvas id, so Canvas matches it only to an "
        f"assignment titled exactly so, else creates a new one; give --canvas-assignment '{title} (ID)' "
        "(ID: the number after /assignments/ in the assignment's address)"
    )


def canvas_csv(report: GradingReport, assignment: str) -> str:
    """Canvas's gradebook import: `CANVAS_COLUMNS`, ``Notes``, then the assignment column.

    The layout Canvas's importer reads (``app/models/gradebook_importer.rb``): the
    student columns, then custom columns (``Notes``: the adjustments' reasons; Canvas
    reads it when the course's gradebook shows its Notes column), then the assignments
    (``Title (id)``, see `canvas_assignment_column`). The second row is Canvas's
    ``Points Possible``; students from no Canvas export are left out (Canvas matches
    rows by ``ID``, `lms_user_id`).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
    w.writerow([*CANVAS_COLUMNS, "Notes", csv_cell(assignment)])
    max_score = max((s.max_score for s in report.submissions), default=0.0)
    w.writerow(["    Points Possible", "", "", "", "", "", f"{max_score:g}"])
    for s in report.submissions:
        if s.lms.get("system") != "canvas":
            continue
        w.writerow(
            [
                csv_cell(s.lms.get("name", s.id)),
                csv_cell(lms_user_id(s)),
                "",
                "",
                "",
                csv_cell(" | ".join(adjustment_lines(s))),
                f"{s.score:g}",
            ]
        )
    return buf.getvalue()


def moodle_time(now: float | None = None) -> str:
    """``Last modified (grade)`` of moodle.csv: when the grades were made, ISO 8601 UTC to the minute.

    Moodle (``mod/assign/feedback/offline/locallib.php``, ``process_import_grades``) skips a
    row whose grade was changed in Moodle more than 60 s after this time (a grade given by
    hand since is kept). ``SOURCE_DATE_EPOCH``, when set, fixes it (reproducible files).
    """
    import datetime as _dt
    import time as _time

    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    when = float(epoch) if epoch.isdigit() else (_time.time() if now is None else now)
    return _dt.datetime.fromtimestamp(when, _dt.UTC).strftime("%Y-%m-%dT%H:%M:00+00:00")


def moodle_feedback_html(text: str) -> str:
    """Plain text as Moodle's ``Feedback comments`` (stored and shown as HTML): escaped, lines joined by ``<br>``.

    A student's markup (an exception message holding ``<script>``) reaches Moodle as text, never as HTML.
    """
    import html

    return "<br>".join(html.escape(display(line), quote=True) for line in text.split("\n"))


def moodle_csv(report: GradingReport, chapter: str, modified: str | None = None) -> str:
    """Moodle's assignment grading worksheet, for "Upload grading worksheet": `MOODLE_COLUMNS`.

    ``Identifier`` is ``Participant <id>`` (`lms_user_id`); students from no Moodle export
    are left out. ``Last modified (grade)`` is ``modified`` (default `moodle_time`): Moodle
    refuses a worksheet without that column. ``Feedback comments`` holds the scores and the
    reasons, headed by ``chapter`` (the course pack's short name), as escaped HTML
    (`moodle_feedback_html`).
    """
    modified = modified or moodle_time()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
    w.writerow(MOODLE_COLUMNS)
    for s in report.submissions:
        if s.lms.get("system") != "moodle":
            continue
        w.writerow(
            [
                f"Participant {lms_user_id(s)}",
                csv_cell(s.lms.get("name", s.id)),
                f"{s.score:g}",
                f"{s.max_score:g}",
                modified,
                csv_cell(moodle_feedback_html(submission_feedback(s, chapter))),
            ]
        )
    return buf.getvalue()


_PUSH = re.compile(r"^(?P<base>https?://[^/]+)/courses/(?P<course>\d+)/assignments/(?P<assignment>\d+)/?$")


LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
"""The hosts ``--allow-http`` accepts a plain ``http://`` address for (a test server on this machine)."""

MARK = "grader result "
"""Each pushed comment ends with ``(grader result <fingerprint>)``: a re-push finds it and posts no second one."""

SLEEP = time.sleep
"""How the push waits out a rate limit (a test replaces it)."""

RETRIES = 5
"""Attempts of each Canvas request refused for its rate (403 "Rate Limit Exceeded" or 429)."""


def check_push_address(url: str, allow_http: bool) -> None:
    """Refuse a ``--canvas-push`` address before anything is graded.

    Raises
    ------
    grader.errors.ConfigError
        If it is not an assignment's address, or is plain ``http://`` (the token would
        travel in clear) unless ``allow_http`` and the host is this machine.
    """
    m = _PUSH.match(url)
    if m is None:
        raise ConfigError(
            f"--canvas-push {url}: not an assignment's address; give https://HOST/courses/COURSE/assignments/ASSIGNMENT"
        )
    if url.startswith("http://"):
        host = urllib.parse.urlsplit(url).hostname or ""
        if not allow_http or host not in {h.strip("[]") for h in LOCAL_HOSTS}:
            raise ConfigError(
                f"--canvas-push {url}: plain http:// would send the Canvas token in clear; give the https:// address"
                + ("" if allow_http else " (--allow-http is for a test server on localhost only)")
                + ("" if not allow_http else f"; --allow-http accepts localhost only, not {host}")
            )


def comment_fingerprint(user: str, score: float, text: str) -> str:
    """A result's fingerprint in its comment: the same student, score and feedback give the same one."""
    digest = hashlib.sha256(f"{user}\0{score!r}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:16]


def _back_off(requester: Any, attempt: int) -> float:
    """Seconds to wait before retrying a rate-limited request: the server's Retry-After, else by the quota left."""
    cache = getattr(requester, "_cache", None) or [None]
    headers = getattr(cache[0], "headers", None) or {}
    retry_after = str(headers.get("Retry-After", "")).strip()
    if retry_after.replace(".", "", 1).isdigit():
        return min(float(retry_after), 120.0)
    remaining = str(headers.get("X-Rate-Limit-Remaining", "")).strip()
    try:
        left = float(remaining)
    except ValueError:
        left = 0.0
    # Canvas refills its bucket at about 10 units a second: an empty bucket waits longer.
    return min(2.0**attempt * (2.0 if left <= 0 else 1.0), 60.0)


def _rate_limited(exc: Exception, requester: Any) -> bool:
    """Canvas refused for its rate: 429, or 403 saying "Rate Limit Exceeded" (Canvas's own way)."""
    from canvasapi.exceptions import Forbidden, RateLimitExceeded

    if isinstance(exc, RateLimitExceeded):
        return True
    if not isinstance(exc, Forbidden):
        return False
    cache = getattr(requester, "_cache", None) or [None]
    headers = getattr(cache[0], "headers", None) or {}
    return "rate limit" in str(exc).lower() or "Retry-After" in headers


def _call(requester: Any, what: Any, sleep: Any) -> Any:
    """``what()``, retried on Canvas's rate limits after the server's back-off (`RETRIES` attempts)."""
    for attempt in range(RETRIES):
        try:
            return what()
        except Exception as exc:  # noqa: BLE001 - only rate limits are retried; the rest re-raised as they are
            if attempt == RETRIES - 1 or not _rate_limited(exc, requester):
                raise
            sleep(_back_off(requester, attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def push_to_canvas(report: GradingReport, url: str, token: str, chapter: str, sleep: Any = None) -> int:
    """Post the Canvas students' final scores and feedback comments in one bulk request.

    Uses ``canvasapi``: ``GET /api/v1/courses/C``, ``GET .../assignments/A``, ``GET
    .../assignments/A/submissions?include[]=submission_comments`` (the comments already
    there), then one ``POST .../assignments/A/submissions/update_grades`` for the class
    (``grade_data[USER][posted_grade]``, ``grade_data[USER][text_comment]``), whose
    Progress is followed to its end. A comment goes only to a student whose submission
    holds no comment with this result's fingerprint (`comment_fingerprint`), so a re-push
    posts no comment twice. Each request refused for its rate (429, or 403 "Rate Limit
    Exceeded") is retried after the server's back-off (``Retry-After``, else by
    ``X-Rate-Limit-Remaining``). The course and the assignment are read first, even when no
    student is Canvas's, so a wrong server (silent, a login page, JSON not Canvas's) is named.

    Parameters
    ----------
    report : grader.models.GradingReport
    url : str
        ``https://HOST/courses/C/assignments/A`` (checked by `check_push_address` before grading).
    token : str
        A Canvas access token.
    chapter : str
        The course pack's short name, heading each comment.
    sleep : callable, optional
        ``time.sleep`` (a test passes its own).

    Returns
    -------
    int
        How many students were posted.

    Raises
    ------
    grader.errors.ConfigError
        If canvasapi is missing, or Canvas refuses or cannot be reached.
    """
    sleep = sleep or SLEEP
    m = _PUSH.match(url)
    if m is None:
        raise ConfigError(
            f"--canvas-push {url}: not an assignment's address; give https://HOST/courses/COURSE/assignments/ASSIGNMENT"
        )
    try:
        from canvasapi.exceptions import CanvasException
    except ImportError:
        raise ConfigError("--canvas-push: canvasapi is not installed; pip install 'grader-harness[canvas]'") from None
    students = [s for s in report.submissions if s.lms.get("system") == "canvas" and lms_user_id(s)]
    try:
        from grader.config.addresses import bounded_canvas

        canvas = bounded_canvas(m["base"], token)  # every request times out
        requester = getattr(canvas, "_Canvas__requester", None)  # its last response: the rate-limit headers
        course = _call(requester, lambda: canvas.get_course(int(m["course"])), sleep)
        assignment = _call(requester, lambda: course.get_assignment(int(m["assignment"])), sleep)
        if getattr(course, "id", None) != int(m["course"]) or getattr(assignment, "id", None) != int(m["assignment"]):
            raise ValueError("not a Canvas course and assignment")
        if not students:
            return 0  # the address was still checked: a wrong server is named though nothing is posted
        existing: dict[str, str] = {}
        for sub in _call(requester, lambda: list(assignment.get_submissions(include=["submission_comments"])), sleep):
            texts = [str(c.get("comment", "")) for c in getattr(sub, "submission_comments", None) or []]
            existing[str(getattr(sub, "user_id", ""))] = "\n".join(texts)
        grade_data: dict[str, dict[str, str]] = {}
        for s in students:
            user = lms_user_id(s)
            text = submission_feedback(s, chapter)
            mark = f"({MARK}{comment_fingerprint(user, s.score, text)})"
            entry = {"posted_grade": f"{s.score:g}"}
            if mark not in existing.get(user, ""):
                entry["text_comment"] = f"{text}\n{mark}"
            grade_data[user] = entry
        progress = _call(requester, lambda: assignment.submissions_bulk_update(grade_data=grade_data), sleep)
        for attempt in range(30):  # the bulk update is a job of Canvas's: followed to its end
            state = getattr(progress, "workflow_state", "completed")
            if state == "completed":
                break
            if state == "failed":
                raise ConfigError(
                    f"--canvas-push {url}: Canvas's bulk grade update failed "
                    f"({display(str(getattr(progress, 'message', '') or 'no message'))}); check the assignment"
                )
            sleep(min(1.0 + attempt, 10.0))
            progress = _call(requester, progress.query, sleep)
    except CanvasException as exc:
        raise ConfigError(
            f"--canvas-push {url}: Canvas refused ({type(exc).__name__}: {display(str(exc))[:200]}); check the "
            "token and the address"
        ) from None
    except (OSError, AttributeError, KeyError, TypeError, ValueError) as exc:
        # the network (requests' errors and timeouts are OSErrors), or an answer that is not Canvas's
        from grader.config.addresses import canvas_failure

        raise canvas_failure(url, exc) from None
    return len(grade_data)


@hookimpl
def grader_write_reports(report: GradingReport, config: Config) -> None:
    """Write ``DIR/canvas.csv`` and ``DIR/moodle.csv`` when the batch has such students; push if asked."""
    if config.command != "grade":
        return
    out = config.out_dir
    systems = {s.lms.get("system") for s in report.submissions}
    if out is not None:
        try:
            if "canvas" in systems:
                column, warning = canvas_assignment_column(
                    config.option("canvas_assignment"),
                    f"{config.pack.chapter} {config.pack.module}",
                    config.option("canvas_push"),
                )
                if warning:
                    print(f"grader: warning: {display(warning)}", file=sys.stderr)
                write_atomic(out / CANVAS_FILE, canvas_csv(report, column))
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
def grader_configure(config: Config) -> None:
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
    from grader.config.addresses import check_canvas_url

    check_canvas_url(url)  # a parseable https address of an assignment, port in range, no user information
    check_push_address(url, bool(config.option("allow_http")))  # plain http only to localhost with --allow-http
    if not os.environ.get("CANVAS_API_TOKEN", ""):
        raise ConfigError("--canvas-push: set CANVAS_API_TOKEN to a Canvas access token")
    try:
        import canvasapi  # noqa: F401
    except ImportError:
        raise ConfigError("--canvas-push: canvasapi is not installed; pip install 'grader-harness[canvas]'") from None


@hookimpl
def grader_terminal_summary(report: Any, config: Config, write: Any) -> None:
    if _PUSHED in config.stash:
        write(f"canvas: {config.stash[_PUSHED]} score(s) and comments posted")
