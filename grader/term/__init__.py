"""The instructor's term: LMS export names, the course policy, manual scores, adjustments.

Core helpers shared by the built-in plugins ``lms``, ``policy`` and
``manual`` (which do not import each other) and by `grader.grading.session`:

* `parse_lms_name`: a Canvas or Moodle export's entry name -> the student's
  id, LMS user id, LATE flag and attempt (the export as a whole is read by
  `grader.intake.lms`);
* `load_policy` / `late_penalty`: ``policy.yaml`` (due date, penalty per day
  or per hour, cap, grace period, late days per student), validated with
  jsonschema, errors in one line naming the file, the key and the fix;
* `read_manual` / `apply_manual`: ``manual.csv`` rows (student, check or
  exercise, points, comment, grader) as overrides that keep the automatic
  score beside them;
* `strip_adjustments`: a result back to its automatic score, so stored
  results (the gradebook) are adjusted again, never twice.

Timestamps are only ever taken from trusted sources: the LMS's own export
(its worksheet or CSV of submission times) or the grader's record of a
file's first arrival (the gradebook); never a commit date, never a file's
modification time inside an archive (the student controls both).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
import re
import sys
from pathlib import Path
from typing import Any

from grader.errors import ConfigError
from grader.models import Adjustment, SubmissionResult
from grader.reporting.feedback import adjustment_lines, submission_feedback

__all__ = [
    "POLICY_SCHEMA",
    "ManualRow",
    "adjustment_lines",
    "Policy",
    "apply_manual",
    "late_penalty",
    "load_policy",
    "parse_lms_name",
    "parse_time",
    "read_manual",
    "strip_adjustments",
    "submission_feedback",
]


def parse_lms_name(name: str) -> dict[str, str] | None:
    """What a Canvas or Moodle export's entry name says of its student (its LMS-written prefix only).

    Parameters
    ----------
    name : str
        A Canvas file name, with or without its extension
        (``smithbob_LATE_340934_208490284_attention``), or a Moodle folder
        name (``Bob Smith_12345_assignsubmission_file_``). The export as a
        whole is read by `grader.intake.lms`; this reads one name.

    Returns
    -------
    dict of str to str or None
        ``system``, ``name`` (the student's id), ``user`` (the LMS's user or
        participant id), ``late`` (``"1"`` or ``"0"``) and, for Canvas,
        ``attempt`` (its attachment id, digits); None for a name neither system writes.
    """
    from grader.intake.lms import parse_canvas, parse_moodle

    found = parse_moodle(name, folder=True)
    if found is not None:
        return {"system": "moodle", "name": found["name"], "user": found["user"], "late": "0"}
    canvas = parse_canvas(name)
    if canvas is not None and "file" in canvas:
        return {
            "system": "canvas",
            "name": canvas["name"],
            "user": canvas["user"],
            "late": canvas["late"],
            "attempt": canvas["file"],
        }
    return None


# --- the course policy ------------------------------------------------------

POLICY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["due"],
    "properties": {
        "due": {"type": "string", "description": "give the due date in ISO 8601, e.g. 2026-03-01T23:59:00+00:00"},
        "timezone": {"type": "string", "description": "give an IANA time zone, e.g. Europe/Paris (default UTC)"},
        "grace_minutes": {"type": "number", "minimum": 0, "description": "give minutes >= 0"},
        "penalty": {
            "type": "object",
            "additionalProperties": False,
            "required": ["per"],
            "properties": {
                "per": {"enum": ["day", "hour"], "description": "write per: day or per: hour"},
                "percent": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 100,
                    "description": "give the percent of the maximum score taken per day or hour (0 to 100)",
                },
                "points": {
                    "type": "number",
                    "minimum": 0,
                    "description": "give the points taken per day or hour (>= 0)",
                },
                "cap": {
                    "type": "number",
                    "minimum": 0,
                    "description": "give the most taken in all, in the unit of percent or points (>= 0)",
                },
            },
            "oneOf": [{"required": ["percent"]}, {"required": ["points"]}],
        },
        "late_days": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "default": {"type": "integer", "minimum": 0, "description": "give whole days >= 0"},
                "students": {
                    "type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 0},
                    "description": "map student ids to whole days >= 0",
                },
                "term": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "give the whole days >= 0 each student has for the whole term (grader.term.ledger)",
                },
                "ledger": {
                    "type": "string",
                    "description": "give the ledger.json 'grader term' wrote, relative to this file",
                },
            },
        },
        "assignment": {
            "type": "string",
            "minLength": 1,
            "description": "give this assignment's id in the term, e.g. A2 (grader term)",
        },
        "late_flag_units": {
            "type": "integer",
            "minimum": 0,
            "description": "give the days or hours charged for an LMS LATE mark without a time (>= 0)",
        },
        "times": {
            "type": "array",
            "items": {"enum": ["lms", "arrival"]},
            "description": "list the trusted time sources in order: lms, arrival",
        },
    },
}
"""JSON Schema (draft 2020-12) of ``policy.yaml``; each ``description`` is the fix an error names."""


@dataclasses.dataclass(frozen=True)
class Policy:
    """A validated ``policy.yaml`` (see `POLICY_SCHEMA` and README, "Your term")."""

    path: str
    due: dt.datetime
    tz: dt.tzinfo
    grace: dt.timedelta = dt.timedelta(0)
    per: str = "day"
    percent: float | None = None
    points: float | None = None
    cap: float | None = None
    late_days_default: int = 0
    late_days: dict[str, int] = dataclasses.field(default_factory=dict)
    late_flag_units: int = 1
    times: tuple[str, ...] = ("lms",)
    assignment: str = ""
    late_days_term: int | None = None


def _zone(name: str, path: str) -> dt.tzinfo:
    if name.upper() == "UTC":
        return dt.UTC
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:  # noqa: BLE001 - ZoneInfoNotFoundError, ValueError for odd names
        raise ConfigError(
            f"{path}: timezone: unknown time zone {name!r}; give an IANA time zone, e.g. Europe/Paris"
        ) from None


_MONTHS = {
    # English, French, German, Spanish, Portuguese: full names and Moodle's abbreviations (lower case, no dot)
    1: "january jan janvier janv januar jän jan enero ene janeiro",
    2: "february feb février fevrier févr fevr februar feb febrero feb fevereiro fev",
    3: "march mar mars märz maerz mär marzo mar março marco",
    4: "april apr avril avr april abril abr",
    5: "may mai mayo may maio",
    6: "june jun juin juni junio junho",
    7: "july jul juillet juil juli julio julho",
    8: "august aug août aout august agosto ago",
    9: "september sep sept septembre september septiembre setiembre set setembro",
    10: "october oct octobre oktober okt octubre outubro out",
    11: "november nov novembre november noviembre novembro",
    12: "december dec décembre decembre déc dezember dez diciembre dic dezembro",
}
_MONTH = {name: number for number, names in _MONTHS.items() for name in names.split()}


# "[weekday,] 1[.] [de] March [de] 2026, [à|um|a las|às] 11:59 [PM]" in the five languages Moodle is used in most.
# Compiled when first used (about 2 ms: letters of every script, case folded): most commands read no LMS date.
@functools.cache
def _moodle_time() -> re.Pattern[str]:
    return re.compile(
        r"^(?:[^\W\d_]+(?:-[^\W\d_]+)?\.?,?\s+)?(?P<day>\d{1,2})\.?\s+(?:de\s+)?(?P<month>[^\W\d_]+)\.?,?\s+(?:de\s+)?"
        r"(?P<year>\d{4}),?\s+(?:(?:à|a|um|a\s+las|às|as|at)\s+)?(?P<hour>\d{1,2})[:h](?P<minute>\d{2})"
        r"(?::(?P<second>\d{2}))?\s*(?P<ampm>[ap]\.?\s?m\.?)?$",
        re.IGNORECASE,
    )


MOODLE_TIME_FORMATS = (
    "ISO 8601 (2026-03-01T23:59:00+01:00) or Moodle's worksheet dates in English, French, German, Spanish or "
    "Portuguese (Sunday, 1 March 2026, 11:59 PM; dimanche 1 mars 2026, 23:59; Sonntag, 1. März 2026, 23:59)"
)
"""What `parse_time` reads, as messages name it."""


def parse_local_time(text: str) -> dt.datetime | None:
    """A timestamp from an LMS export, as written: aware when it gives an offset, naive when not.

    Reads ISO 8601 and Moodle's worksheet format in English, French, German, Spanish and
    Portuguese (`MOODLE_TIME_FORMATS`). None for an empty cell, ``-``, or text that is not one
    of these, or a date that does not exist.
    """
    text = " ".join(text.split())
    if not text or text == "-":
        return None
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        pass
    m = _moodle_time().match(text)
    if m is None:
        try:
            return dt.datetime.strptime(text, "%Y-%m-%d %H:%M")
        except ValueError:
            return None
    month = _MONTH.get(m["month"].lower().rstrip("."))
    if month is None:
        return None
    hour = int(m["hour"])
    if m["ampm"]:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m["ampm"].lower().startswith("p") else 0)
    try:
        return dt.datetime(int(m["year"]), month, int(m["day"]), hour, int(m["minute"]), int(m["second"] or 0))
    except ValueError:
        return None


def parse_time(text: str, tz: dt.tzinfo = dt.UTC) -> dt.datetime | None:
    """A timestamp from an LMS export, as an aware UTC datetime; None when ``text`` is not one.

    Reads ISO 8601 (``2026-03-01T23:59:00Z``, with or without an offset) and
    Moodle's worksheet format (``Sunday, 1 March 2026, 11:59 PM``, and its French,
    German, Spanish and Portuguese forms: `parse_local_time`); a time
    without an offset is in ``tz``.
    """
    when = parse_local_time(text)
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz)
    return when.astimezone(dt.UTC)


_ISO_SHAPE = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})(?:[Tt ](?P<time>\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\s*"
    r"(?P<offset>[Zz]|[+-]\d{2}(?::?\d{2})?)?)?$"
)


def _due(text: str, tz: dt.tzinfo, path: str) -> dt.datetime:
    """``due:`` as an aware UTC datetime: ISO 8601, a date alone meaning 23:59:59 that day in ``tz``.

    Raises
    ------
    grader.errors.ConfigError
        Naming the value and what is wrong with it: not ISO 8601, a date that does not exist
        (February 30, month 13), an offset out of range (more than 24 hours).
    """
    m = _ISO_SHAPE.match(text.strip())
    example = "give ISO 8601, e.g. 2026-03-01T23:59:00+00:00"
    if m is None:
        raise ConfigError(f"{path}: due: {text!r} is not a date and time; {example}")
    try:
        day = dt.date.fromisoformat(m["date"])
    except ValueError as exc:
        raise ConfigError(f"{path}: due: {text!r} is not a date that exists ({exc}); {example}") from None
    if not m["time"]:
        return dt.datetime.combine(day, dt.time(23, 59, 59), tz).astimezone(dt.UTC)
    offset = (m["offset"] or "").upper()
    if offset and offset != "Z":
        digits = offset[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:] or 0)
        if hours > 23 or minutes > 59:
            raise ConfigError(
                f"{path}: due: {text!r}: the offset {offset} is out of range (-23:59 to +23:59); {example}"
            )
        offset = f"{offset[0]}{hours:02d}:{minutes:02d}"
    try:
        when = dt.datetime.fromisoformat(f"{m['date']}T{m['time']}{'+00:00' if offset == 'Z' else offset}")
    except ValueError as exc:
        raise ConfigError(f"{path}: due: {text!r} is not a time that exists ({exc}); {example}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz)
    return when.astimezone(dt.UTC)


GRACE_LIMIT_MINUTES = 366 * 24 * 60
"""``grace_minutes`` must be below a year."""

LATE_DAYS_LIMIT = 366
"""Late days (default or per student) and ``late_flag_units`` must be at most a year's worth."""


def _meaning(data: dict[str, Any], path: str) -> None:
    """Refuse values of the right type that make no sense: non-finite, out of range, a cap over 100%.

    Raises
    ------
    grader.errors.ConfigError
        Naming the file, the key, the value and the fix.
    """

    def finite(key: str, value: Any, low: float, high: float, fix: str) -> None:
        if value is None:
            return
        if not math.isfinite(value) or not low <= value <= high:
            raise ConfigError(f"{path}: {key}: {value!r} is out of range; {fix}")

    finite("grace_minutes", data.get("grace_minutes"), 0, GRACE_LIMIT_MINUTES - 1, "give minutes >= 0 and below a year")
    penalty = data.get("penalty") or {}
    finite("penalty.percent", penalty.get("percent"), 0, 100, "give the percent taken per day or hour, 0 to 100")
    finite("penalty.points", penalty.get("points"), 0, 1e9, "give the finite points taken per day or hour (>= 0)")
    if "percent" in penalty:
        finite("penalty.cap", penalty.get("cap"), 0, 100, "a cap in percent is at most 100 (all of the score)")
    else:
        finite("penalty.cap", penalty.get("cap"), 0, 1e9, "give the most points taken in all (finite, >= 0)")
    late = data.get("late_days") or {}
    finite("late_days.default", late.get("default"), 0, LATE_DAYS_LIMIT, f"give whole days, 0 to {LATE_DAYS_LIMIT}")
    for sid, days in (late.get("students") or {}).items():
        finite(f"late_days.students.{sid}", days, 0, LATE_DAYS_LIMIT, f"give whole days, 0 to {LATE_DAYS_LIMIT}")
    finite(
        "late_flag_units",
        data.get("late_flag_units"),
        0,
        LATE_DAYS_LIMIT * 24,
        f"give the days or hours charged for a LATE mark, 0 to {LATE_DAYS_LIMIT * 24}",
    )


def load_policy(path: str) -> Policy:
    """Read and validate ``policy.yaml``.

    Read by the strict loader of the specs (`grader.readers.yamlfile.parse_yaml`: no aliases, no
    duplicate keys, no tags, bounded size and depth, dates as text), validated against
    `POLICY_SCHEMA`, then for meaning: finite numbers in range (`_meaning`), a due date that
    exists with an offset in range, a time zone by its IANA name.

    Raises
    ------
    grader.errors.ConfigError
        In one line naming the file, the key and the fix, if the file cannot
        be read, is not YAML, or breaks `POLICY_SCHEMA`.
    """
    from grader.errors import SpecError
    from grader.readers.yamlfile import parse_yaml

    if not Path(path).is_file():
        what = "is a folder" if Path(path).is_dir() else "no such file"
        raise ConfigError(f"--policy {path}: {what}; give the course policy's YAML file")
    try:
        data = parse_yaml(path)
    except SpecError as exc:
        raise ConfigError(f"--policy {exc}; fix the file (plain YAML: no aliases, no tags, each key once)") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the policy must be a mapping with at least 'due'; add 'due: 2026-03-01T23:59:00+00:00'"
        )
    import jsonschema  # here, not at the top: 'grader check' never reads a policy (issue 16)

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(POLICY_SCHEMA).iter_errors(data))
    if error is not None:
        key = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        fix = error.schema.get("description") if isinstance(error.schema, dict) else None
        if error.validator == "additionalProperties":
            fix = "remove it or check its spelling; the keys are " + ", ".join(
                sorted((error.schema.get("properties") or {}).keys()) or ["student ids"]
            )
        elif error.validator == "required":
            fix = "add it"
        elif error.validator == "oneOf":
            fix = "give exactly one of percent and points"
        message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
        raise ConfigError(f"{path}: {key}: {message}; {fix or 'see README, Your term'}")
    _meaning(data, path)
    tz = _zone(str(data.get("timezone", "UTC")), path)
    due = _due(str(data["due"]), tz, path)
    if data.get("times") == []:
        print(
            f"grader: warning: {path}: times: [] names no trusted time source, so no submission is ever late; "
            "list them, e.g. times: [lms, arrival]",
            file=sys.stderr,
        )
    penalty = data.get("penalty") or {}
    late_days = data.get("late_days") or {}
    if "term" in late_days:  # one budget for the term: what the ledger says is left (grader.term.ledger)
        from grader.term.ledger import term_allowances

        late_days = term_allowances(path, late_days, str(data.get("assignment", "")))
    return Policy(
        path=path,
        due=due,
        tz=tz,
        grace=dt.timedelta(minutes=float(data.get("grace_minutes", 0))),
        per=penalty.get("per", "day"),
        percent=penalty.get("percent"),
        points=penalty.get("points"),
        cap=penalty.get("cap"),
        late_days_default=int(late_days.get("default", 0)),
        late_days={str(k): v for k, v in (late_days.get("students") or {}).items()},
        late_flag_units=int(data.get("late_flag_units", 1)),
        times=tuple(data.get("times", ("lms",))),
        assignment=str(data.get("assignment", "")),
        late_days_term=late_days.get("term"),
    )


def _fmt(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def late_penalty(
    policy: Policy,
    student: str,
    max_score: float,
    score: float,
    submitted: dt.datetime | None,
    source: str = "",
    late_flag: bool = False,
) -> Adjustment | None:
    """The late penalty of one submission under ``policy``, or None when it is on time or unpenalised.

    Parameters
    ----------
    policy : Policy
    student : str
        The student id (for ``late_days.students``).
    max_score, score : float
        The submission's maximum and its score before the penalty (points).
    submitted : datetime or None
        When it was submitted, from a trusted source; None when unknown.
    source : str
        Where ``submitted`` comes from, named in the reason (``"Moodle"``,
        ``"the grader's record of its arrival"``).
    late_flag : bool
        Whether the LMS export marks it late (Canvas's ``_LATE_``); used only
        when ``submitted`` is None: ``late_flag_units`` days or hours are
        counted, the student's late days spent first (a late day covers 24 hours).

    Returns
    -------
    Adjustment or None
        ``points`` is minus the points taken (never more than ``score``).
    """
    if policy.percent is None and policy.points is None:
        return None
    unit = dt.timedelta(days=1) if policy.per == "day" else dt.timedelta(hours=1)
    allowed = policy.late_days.get(student, policy.late_days_default)
    words = []
    if submitted is not None:
        delay = submitted - policy.due - policy.grace
        if delay <= dt.timedelta(0):
            return None
        days_late = math.ceil(delay / dt.timedelta(days=1))
        used = min(allowed, days_late)
        delay -= dt.timedelta(days=used)
        units = math.ceil(delay / unit) if delay > dt.timedelta(0) else 0
        words.append(
            f"submitted {_fmt(submitted)} ({source}), due {_fmt(policy.due)}"
            + (f" with {policy.grace.total_seconds() / 60:g} min grace" if policy.grace else "")
        )
        if used:
            words.append(f"{used} late day(s) used")
    elif late_flag:
        # A LATE mark spends the student's late days before any penalty, as a time would.
        counted = policy.late_flag_units
        per_day = 1 if policy.per == "day" else 24
        used = min(allowed, math.ceil(counted / per_day))
        units = max(0, counted - used * per_day)
        words.append(
            f"marked LATE by the {source or 'LMS export'} without a time: {counted} {policy.per}(s) counted "
            "(late_flag_units)"
        )
        if used:
            words.append(f"{used} late day(s) used")
    else:
        return None
    if units <= 0:
        return Adjustment("late", 0.0, "; ".join(words) + ": no penalty") if words else None
    if policy.percent is not None:
        taken_pct = policy.percent * units
        if policy.cap is not None:
            taken_pct = min(taken_pct, policy.cap)
        taken = max_score * taken_pct / 100.0
        rule = f"-{policy.percent:g}% of {max_score:g} per {policy.per}" + (
            f", at most {policy.cap:g}%" if policy.cap is not None else ""
        )
    else:
        assert policy.points is not None  # load_policy gives a policy points or percent
        taken = float(policy.points) * units
        if policy.cap is not None:
            taken = min(taken, policy.cap)
        rule = f"-{policy.points:g} point(s) per {policy.per}" + (
            f", at most {policy.cap:g}" if policy.cap is not None else ""
        )
    taken = round(min(taken, max(score, 0.0)), 6)
    return Adjustment("late", -taken, f"{units} {policy.per}(s) late: " + "; ".join(words) + f" ({rule})")


# --- manual scores ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ManualRow:
    """One row of ``manual.csv``: ``target`` is ``G14.02`` or ``G14.02/check-id``."""

    line: int
    student: str
    target: str
    points: float
    comment: str
    grader: str


MANUAL_COLUMNS = ("student", "check", "points", "comment", "grader")
"""The columns of ``manual.csv`` (``exercise`` is accepted for ``check``)."""


def read_csv_rows(path: str, option: str, error: type[Exception]) -> list[list[str]]:
    """Every non-empty row of a CSV file given with ``option``, the header first (`grader.readers.tables.read_table`).

    The encoding (UTF-8 with or without a BOM, UTF-16 with a BOM) and the delimiter (comma,
    semicolon, tab) are sniffed.

    Raises
    ------
    Exception
        ``error`` (a `grader.errors.GraderError` class) in one line naming the file, what was
        found and how to save it right.
    """
    from grader.readers.tables import read_table

    table = read_table(path, option, error)  # type: ignore[arg-type]  # a GraderError class
    if not table.header:
        return []
    return [[*table.header], *(row for _, row in table.rows)]


_DECIMAL_COMMA = re.compile(r"^[+-]?\d+,\d+$")


def read_manual(path: str) -> list[ManualRow]:
    """Read ``manual.csv``: a header row naming `MANUAL_COLUMNS`, then one row per score.

    Checked against its schema: the columns, one cell per column (a decimal comma that shifts a
    column is named), points a finite number >= 0 written with a decimal point, a student id and
    a target (``EXERCISE`` or ``EXERCISE/CHECK``, neither part empty) on every row, and no
    student and target given twice.

    Raises
    ------
    grader.errors.ConfigError
        In one line naming the file, the line, the column and the fix.
    """
    from grader.readers.tables import delimiter_name, read_table

    table = read_table(path, "--manual", ConfigError)
    if not table.header:
        raise ConfigError(f"--manual {path}: empty; the first row must name the columns {', '.join(MANUAL_COLUMNS)}")
    header = ["check" if c == "exercise" else c for c in table.header]
    missing = [c for c in ("student", "check", "points") if c not in header]
    if missing:
        found = ", ".join(repr(c) for c in header[:6])
        raise ConfigError(
            f"--manual {path}: line {table.header_line}: no column {missing[0]!r} (found {found}, "
            f"{delimiter_name(table.delimiter)}-separated); the first row must name the columns "
            f"{', '.join(MANUAL_COLUMNS)}"
        )
    known = [c for c in header if c]
    twice = next((c for c in known if known.count(c) > 1), None)
    if twice is not None:
        raise ConfigError(
            f"--manual {path}: line {table.header_line}: {twice}: the column is named twice; name each column once"
        )
    col = {name: header.index(name) for name in MANUAL_COLUMNS if name in header}
    out = []
    seen: dict[tuple[str, str], int] = {}
    for line, row in table.rows:
        if len(row) > len(header) and any(cell.strip() for cell in row[len(header) :]):
            raise ConfigError(
                table.problem(
                    line,
                    "",
                    f"{len(row)} cells but the header names {len(header)} columns",
                    "a decimal comma (1,5) splits a cell in two: write 1.5, or quote the cell",
                )
            )

        def cell(name: str, row: list[str] = row) -> str:
            i = col.get(name)
            return row[i].strip() if i is not None and i < len(row) else ""

        text = cell("points")
        if _DECIMAL_COMMA.match(text):
            raise ConfigError(
                table.problem(line, "points", f"{text!r} has a decimal comma", f"write {text.replace(',', '.')}")
            )
        try:
            points = float(text)
            if not math.isfinite(points) or points < 0:
                raise ValueError
        except ValueError:
            raise ConfigError(
                table.problem(
                    line,
                    "points",
                    f"{text!r} is not a number >= 0",
                    "give the points the student gets for that check or exercise",
                )
            ) from None
        if not cell("student") or not cell("check"):
            which = "student" if not cell("student") else "check"
            raise ConfigError(
                table.problem(line, which, "empty", "give the student id and an exercise id or EXERCISE/check-id")
            )
        target = cell("check")
        ex_id, slash, check_id = target.partition("/")
        if not ex_id or (slash and not check_id) or "/" in check_id:
            raise ConfigError(
                table.problem(line, "check", f"{target!r} is not EXERCISE or EXERCISE/CHECK", "e.g. G14.02/zero-scores")
            )
        key = (cell("student"), target)
        if key in seen:
            raise ConfigError(
                table.problem(
                    line,
                    "check",
                    f"{key[0]} and {target} were given already on line {seen[key]}",
                    "keep one row per student and target",
                )
            )
        seen[key] = line
        out.append(ManualRow(line, cell("student"), target, points, cell("comment"), cell("grader")))
    return out


def apply_manual(result: SubmissionResult, rows: list[ManualRow], path: str = "manual.csv") -> SubmissionResult:
    """Apply a student's ``manual.csv`` rows: each overrides a check's or an exercise's points.

    A row is the student's when its ``student`` is their id or their LMS
    user id (``result.lms["user"]``: display names collide, user ids do not).

    A check override keeps the automatic score in ``CheckResult.automatic_score``;
    every override is an `Adjustment` of kind ``manual`` (its points are the
    new minus the automatic). The later of two rows for one target wins.

    Raises
    ------
    grader.errors.ConfigError
        If a row names an exercise or check the specs do not have, or gives
        more points than it is worth.
    """
    user = result.lms.get("user", "")
    mine = [r for r in rows if r.student == result.id or (user and r.student == user)]
    if not mine:
        return result
    last: dict[str, ManualRow] = {}
    for r in mine:
        last[r.target] = r
    exercises = list(result.exercises)
    adjustments = list(result.adjustments)
    for target, r in last.items():
        ex_id, _, check_id = target.partition("/")
        index = next((i for i, e in enumerate(exercises) if e.id == ex_id), None)
        if index is None:
            raise ConfigError(
                f"--manual {path}: line {r.line}: check: no exercise {ex_id!r}; give one of "
                f"{', '.join(e.id for e in exercises)} (or EXERCISE/CHECK)"
            )
        ex = exercises[index]
        if check_id:
            ci = next((i for i, c in enumerate(ex.checks) if c.id == check_id), None)
            if ci is None:
                raise ConfigError(
                    f"--manual {path}: line {r.line}: check: {ex_id} has no check {check_id!r}; give one of "
                    f"{', '.join(c.id for c in ex.checks)}"
                )
            c = ex.checks[ci]
            if r.points > c.max_score:
                raise ConfigError(
                    f"--manual {path}: line {r.line}: points: {r.points:g} is more than {target} is worth "
                    f"({c.max_score:g}); give at most {c.max_score:g}"
                )
            delta = round(r.points - c.score, 6)
            checks = list(ex.checks)
            checks[ci] = dataclasses.replace(c, score=r.points, automatic_score=c.score)
            ex = dataclasses.replace(ex, checks=tuple(checks), score=round(ex.score + delta, 6))
            automatic = c.score
        else:
            if r.points > ex.max_score:
                raise ConfigError(
                    f"--manual {path}: line {r.line}: points: {r.points:g} is more than {ex_id} is worth "
                    f"({ex.max_score:g}); give at most {ex.max_score:g}"
                )
            delta = round(r.points - ex.score, 6)
            automatic = ex.score
            ex = dataclasses.replace(ex, score=r.points)
        exercises[index] = ex
        reason = f"manual score for {target}: {r.points:g} (automatic {automatic:g})" + (
            f": {r.comment}" if r.comment else ""
        )
        adjustments.append(Adjustment("manual", delta, reason, target, r.grader))
    raw = result.score if result.raw_score is None else result.raw_score
    score = round(sum(e.score for e in exercises), 6)
    return dataclasses.replace(
        result, exercises=tuple(exercises), adjustments=tuple(adjustments), raw_score=raw, score=score
    )


def apply_penalty(result: SubmissionResult, adjustment: Adjustment | None) -> SubmissionResult:
    """Add a late-penalty `Adjustment` to a result: ``score`` drops, ``raw_score`` keeps the automatic one."""
    if adjustment is None:
        return result
    raw = result.score if result.raw_score is None else result.raw_score
    return dataclasses.replace(
        result,
        score=round(max(0.0, result.score + adjustment.points), 6),
        raw_score=raw,
        adjustments=(*result.adjustments, adjustment),
    )


def strip_adjustments(result: SubmissionResult) -> SubmissionResult:
    """The result as the grader scored it: manual overrides undone, no penalty (nor late days), ``raw_score`` None."""
    if result.raw_score is None and not result.adjustments and not result.late:
        return result
    exercises = []
    for ex in result.exercises:
        checks = tuple(
            dataclasses.replace(c, score=c.automatic_score, automatic_score=None)
            if c.automatic_score is not None
            else c
            for c in ex.checks
        )
        delta = sum(a.points for a in result.adjustments if a.kind == "manual" and a.target.partition("/")[0] == ex.id)
        exercises.append(dataclasses.replace(ex, checks=checks, score=round(ex.score - delta, 6)))
    score = result.score if result.raw_score is None else result.raw_score
    return dataclasses.replace(result, exercises=tuple(exercises), score=score, raw_score=None, adjustments=(), late={})
