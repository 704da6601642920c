"""Pure data: what the grader reads, runs, decides and reports.

Frozen dataclasses with no IO and no HTML. Loaders build them, the runner
fills call results, check kinds turn call results into verdicts, and report
writers render them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import marshal
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from grader.execution.boundary import ResultBudget

__all__ = [
    "CALL_STATUSES",
    "CHECK_STATUSES",
    "VISIBILITIES",
    "Call",
    "CallResult",
    "Check",
    "Adjustment",
    "CheckResult",
    "Diagnosis",
    "Exercise",
    "ExerciseResult",
    "GradingReport",
    "Prepared",
    "RunOutcome",
    "Submission",
    "SubmissionResult",
    "Verdict",
    "exercise_from_dict",
    "exercise_to_dict",
    "phase_wire",
    "result_from_dict",
    "result_to_dict",
]

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
"""Who may see a check's details; the same four words Gradescope uses.

``visible``: always shown to the student, and run by ``grader check``.
``hidden``: the student sees its name, status and hint, never its inputs.
``after_due_date`` / ``after_published``: hidden until the instructor grades
with ``--after-due-date`` / ``--published``, then shown like ``visible``.
"""

CHECK_STATUSES = ("passed", "failed", "error", "timeout", "not_attempted")
"""The outcome of one check."""

CALL_STATUSES = ("returned", "raised", "not_implemented", "bad_return", "timeout", "crashed", "skipped")
"""The outcome of one function call in the child process.

``bad_return`` marks a result that is not plain numeric data (an object, a
generator, a string); ``crashed`` a process that died during the call;
``skipped`` a call that never ran because the submission could not be
imported or ran out of time.
"""

CallStatus = Literal["returned", "raised", "not_implemented", "bad_return", "timeout", "crashed", "skipped"]
CheckStatus = Literal["passed", "failed", "error", "timeout", "not_attempted"]


@dataclass(frozen=True)
class Check:
    """One check of an exercise spec.

    Attributes
    ----------
    id : str
        Unique within its exercise, e.g. ``"zero-scores-output"``.
    kind : str
        Name of the check kind that prepares and judges it (``compare``,
        ``literal``, ``raises``, ...).
    function : str
        The student function it calls, e.g. ``"attention"``.
    points : float
        Points awarded when it passes (partial credit within an exercise).
    visibility : str
        One of `VISIBILITIES`.
    hint : str
        Shown to the student when the check does not pass; names the chapter
        section to reread.
    timeout : float
        Seconds each call of this check may take in the child process.
    description : str
        One line saying what is checked, shown in reports.
    args : dict
        The function's arguments as written in the spec (literals or seeded
        generators such as ``{"normal": [3, 2]}``).
    params : dict
        Kind-specific settings (``expect``, ``rtol``, ``atol``, ``select``...).
    seed : int
        Seed of this check's random inputs.
    """

    id: str
    kind: str
    function: str
    points: float
    visibility: str
    hint: str
    timeout: float
    description: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0


@dataclass(frozen=True)
class Exercise:
    """An exercise spec: an id, a chapter section and its checks.

    Attributes
    ----------
    id : str
        ``"G14.01"`` to ``"G14.06"``.
    title : str
        Short human title.
    section : str
        The chapter section the exercise comes from.
    path : str
        The spec file it was loaded from.
    checks : tuple of Check
    returns : dict of str to tuple of str
        Names of the parts of each function's result, used in messages, e.g.
        ``{"attention": ("outputs", "weights"), "softmax": ("weights",)}``;
        a function not listed returns one part called ``result``.
    """

    id: str
    title: str
    section: str
    path: str
    checks: tuple[Check, ...]
    returns: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def max_score(self) -> float:
        """Sum of the points of all checks."""
        return float(sum(c.points for c in self.checks))


@dataclass(frozen=True)
class Submission:
    """One student's submission as found on disk.

    Attributes
    ----------
    id : str
        The student id (folder name) or the file's stem.
    path : str
        The path the instructor gave, or the student folder.
    file : str or None
        The submission file to grade (e.g. ``attention.py``); None when none was found.
    sha256 : str
        Hex digest of the file's bytes (empty when there is no file).
    problem : str
        Why the submission cannot be graded (empty when it can).
    slug : str
        The file name stem of the student's files (``<slug>.html``), set for
        the whole batch by `grader.grading.session.locate_all` (`grader.intake.naming`).
    raw_name : bytes
        The folder's or file's name as found (its bytes on disk, ``frank.py``
        for a file), which the naming rule uses to tell apart ids that
        collide; empty for a roster entry.
    lms : dict of str to str
        What a learning-management system's export says of the submission
        (`grader.term.parse_lms_name`): ``system`` (``canvas`` or
        ``moodle``), ``user`` (Canvas user id or Moodle participant id),
        ``name``, ``late`` (``"1"`` when the export marks it late),
        ``attempt``, ``attempts``, and ``submitted_at`` (ISO 8601, UTC) when
        a trusted source gave it; empty for a submission from no LMS.
    reference : bool
        True for the course's own code run like a submission (a catalogue entry:
        `grader.packs.catalogue.Entry.submission`), never for a student. Its id is the entry's
        name, which a student's folder may have too: whatever keeps something per
        submission id in a run (the call seconds, the staff pages' outcomes, similarity's
        digests, a shard's record, an outcome that already exists) leaves a reference run out,
        so that it never lands in a student's place.
    """

    id: str
    path: str
    file: str | None
    sha256: str = ""
    problem: str = ""
    slug: str = ""
    raw_name: bytes = b""
    lms: dict[str, str] = field(default_factory=dict)
    reference: bool = False


@dataclass(frozen=True)
class Call:
    """One function call to make in the child process.

    Attributes
    ----------
    function : str
        Name of the student function.
    args : tuple
        Positional arguments, plain JSON data (lists, floats, bools, ints).
    timeout : float
        Seconds of CPU time the call may use (the runner's wall-clock
        backstop is `grader.execution.calls.WALL_BACKSTOP_FACTOR` times more).
    budget : grader.execution.boundary.ResultBudget or None
        How large the returned value may be (`grader.execution.boundary.budget_for`
        the reference's value); None: `grader.execution.boundary.DEFAULT_BUDGET`.
    hidden : bool
        Whether the call belongs to a check the student may not see: what
        the submission prints from the moment the first hidden call is sent
        is not shown.
    """

    function: str
    args: tuple[Any, ...]
    timeout: float
    budget: ResultBudget | None = None
    hidden: bool = False

    @functools.cached_property
    def encoded(self) -> tuple[bytes, tuple[bytes, ...]]:
        """The call as the worker reads it: ``{"function": ..., "args": [...]}`` as what its JSON
        (NaN and infinities as JSON's extension literals) parses to, written with ``marshal``
        (version 2), and the raw bytes of its large arguments.

        The data is exactly what parsing the JSON gives (lists for tuples, string keys, plain
        numbers, a fresh object for every occurrence: version 2 writes no reference between
        objects), and the worker reads it with ``marshal.loads`` in C, several times faster than
        a JSON parser reads its numbers. An argument that is a rectangular list of at least
        `BINARY_ARG_ITEMS` floats travels as ``{"$marshal": NBYTES}`` and its own marshal
        (version 2: the same floats, bit for bit, as the raw doubles they are) after the phase:
        the worker makes the lists from those bytes and keeps them, unchanged, as the pristine
        copy its check after the call compares with (no copy made per job). Made once per call:
        every submission of a batch makes the same calls.
        """
        blobs: list[bytes] = []
        args = [_binary_arg(arg, blobs) for arg in self.args]
        text = json.dumps({"function": self.function, "args": args}, allow_nan=True)
        return marshal.dumps(json.loads(text), 2), tuple(blobs)

    @property
    def body(self) -> bytes:
        """The call's marshalled data (see `encoded`): one item of a phase the worker reads (`phase_wire`)."""
        return self.encoded[0]

    @functools.cached_property
    def wire(self) -> bytes:
        """This call alone as a phase, as the worker reads it from its call pipe (`phase_wire`)."""
        return phase_wire((self,))


BINARY_ARG_ITEMS = 4096
"""A call argument that is a rectangular list of at least this many floats travels apart, as its own marshal."""


def _float_shape(value: list[Any]) -> tuple[int, ...] | None:
    """The shape of a non-empty rectangular list whose leaves are all floats (no int, no bool), else None."""
    if not value:
        return None
    if set(map(type, value)) == {float}:
        return (len(value),)
    if not all(type(v) is list for v in value):
        return None
    inner = _float_shape(value[0])
    if inner is None or any(_float_shape(v) != inner for v in value[1:]):
        return None
    return (len(value), *inner)


def _binary_arg(arg: Any, blobs: list[bytes]) -> Any:
    if type(arg) is not list:
        return arg
    shape = _float_shape(arg)
    if shape is None or math.prod(shape) < BINARY_ARG_ITEMS:
        return arg
    blobs.append(marshal.dumps(arg, 2))  # exact lists of exact floats (`_float_shape`): the same, bit for bit
    return {"$marshal": len(blobs[-1])}


def phase_wire(calls: Sequence[Call]) -> bytes:
    """A phase of calls as the worker reads it from its call pipe: a 4-byte big-endian length,
    ``b"\\x01"``, the length of the phase's data (4 bytes, big-endian), the data: what
    ``marshal.dumps({"calls": [{"function": ..., "args": [...]}, ...]}, 2)`` writes of the
    calls' `Call.encoded` data, then the bytes of the arguments that travel apart (each one's
    marshal), in the order the data names them.

    The worker makes the calls in order and answers each with its own frame.
    """
    items = [c.encoded[0] for c in calls]
    # marshal (version 2) writes a dict as "{", each key and value, then "0"; a list as "[", its
    # length (4 bytes, little-endian) and its items: each call's data is written once, joined here.
    data = b"".join([b"{", _CALLS_KEY, b"[", len(items).to_bytes(4, "little"), *items, b"0"])
    blobs = [blob for c in calls for blob in c.encoded[1]]
    data = b"".join([b"\x01", len(data).to_bytes(4, "big"), data, *blobs])
    return len(data).to_bytes(4, "big") + data


_CALLS_KEY = marshal.dumps("calls", 2)


@dataclass(frozen=True)
class CallResult:
    """What came back from one call: data only, never an object.

    Attributes
    ----------
    status : str
        One of `CALL_STATUSES`.
    value : object
        The returned value as JSON data (lists, floats, ints, bools), when
        ``status == "returned"``. Equal answers of a run share one value: never change it in
        place (a judge is handed values of its own, `grader.execution.channel.own_results`).
    error_type : str
        Exception class name when ``status == "raised"``.
    value_error : bool
        Whether the exception was a ``ValueError`` (or a subclass).
    message : str
        Exception message, or what stopped the call; capped in length.
    where : str
        ``"attention.py, line 12"`` for the innermost frame in the
        submission, when known.
    seconds : float
        Wall-clock time of the call in seconds, measured by the grader from
        writing the call to the job to reading its answer (or to giving up).
    mutated_args : tuple of int
        Positions of the arguments the call changed in place (the worker
        compares each argument's JSON text before and after the call);
        empty when the call left its arguments alone.
    """

    status: str
    value: Any = None
    error_type: str = ""
    value_error: bool = False
    message: str = ""
    where: str = ""
    seconds: float = 0.0
    mutated_args: tuple[int, ...] = ()
    wire: bytes = field(default=b"", compare=False, repr=False)
    """The frame's bytes as the job wrote them (empty when no frame came, or a large one): equal bytes,
    equal result but for ``seconds``, so the grader judges an answer it has already judged once
    (`grader.grading.session`)."""
    large: Any = field(default=None, compare=False, repr=False)
    """A large frame's bytes as the job wrote them, as `grader.execution.memo.LargeFrame` (None:
    no large frame came): what ``wire`` is to the grader's answer tables, for an answer that is not
    kept in its wire form (by a shard, a Dask worker)."""


@dataclass(frozen=True)
class RunOutcome:
    """Everything the runner brings back for one submission.

    Attributes
    ----------
    results : tuple of CallResult
        One per requested call, in order.
    import_error : str
        Why the submission could not be imported (syntax error, crash,
        timeout at import); empty when it imported.
    stdout, stderr : str
        What the submission printed before the first hidden call was sent
        (import included), capped and decoded with replacement; a note ends
        it when later output was cut.
    sha256 : str
        SHA-256 of the bytes that ran (the runner reads the file once), or
        "" if the runner does not say; it differs from the submission's if
        the file changed after it was located.
    graded : SubmissionResult or None
        The submission's result, judged and scored where its calls ran (a Dask
        worker holding the same course, ``grade --dask-judge``), or None: the
        grader judges the results itself.
    """

    results: tuple[CallResult, ...]
    import_error: str = ""
    stdout: str = ""
    stderr: str = ""
    sha256: str = ""
    graded: SubmissionResult | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Prepared:
    """A check made ready to run: calls for the child, expectations kept here.

    Attributes
    ----------
    calls : tuple of Call
        Sent to the child process.
    expected : object
        Whatever the check kind needs to judge (reference outputs, limits).
        Never leaves the grader's process.
    shown_call : str
        The call as shown to the student for visible checks.
    """

    calls: tuple[Call, ...]
    expected: Any = None
    shown_call: str = ""


@dataclass(frozen=True)
class Verdict:
    """A check kind's decision on one check.

    Attributes
    ----------
    status : str
        One of `CHECK_STATUSES`.
    message : str
        One sentence for the student. It never contains hidden inputs or
        expected values.
    details : tuple of (str, str)
        Labelled evidence (expected, got, largest error, where) shown only
        when the check is visible.
    fraction : float
        Share of the points earned, in [0, 1]; 1 for passed, 0 otherwise
        unless a kind gives partial credit.
    diagnosis : tuple of Diagnosis
        Known mistakes whose output this failing result matches (empty when
        none does). Safe to show for hidden checks: it names a misconception
        and a chapter section, never an input or an expected value.
    """

    status: str
    message: str = ""
    details: tuple[tuple[str, str], ...] = ()
    fraction: float = 0.0
    diagnosis: tuple[Diagnosis, ...] = ()


@dataclass(frozen=True)
class Diagnosis:
    """A known mistake that a failing result matches (``grader audit``'s catalogue).

    Attributes
    ----------
    mistake : str
        The catalogued mutant's name, e.g. ``"mask_after_softmax"``.
    misconception : str
        One plain sentence saying what the mistake is.
    section : str
        The chapter section heading that addresses it.
    url : str
        A link to that section, or empty when the catalogue gives no
        chapter URL.
    """

    mistake: str
    misconception: str
    section: str
    url: str = ""


@dataclass(frozen=True)
class Adjustment:
    """A change to a submission's automatic score, with its reason (late policy, manual score).

    Attributes
    ----------
    kind : str
        ``"late"`` (the course policy's penalty, `grader.term`) or
        ``"manual"`` (a row of ``manual.csv``).
    points : float
        Points added to the score (negative for a penalty); for a manual
        override, the new points minus the automatic ones.
    reason : str
        One sentence for the student, e.g. ``"submitted 2 day(s) late
        (2026-03-03 10:00 UTC, due 2026-03-01 23:59 UTC): -10% per day"``.
    target : str
        ``"G14.02"`` or ``"G14.02/zero-scores"`` for a manual score, "" for
        the whole submission.
    grader : str
        Who gave a manual score ("" for the policy).
    """

    kind: str
    points: float
    reason: str
    target: str = ""
    grader: str = ""


@dataclass(frozen=True)
class CheckResult:
    """A judged check, ready to report.

    ``automatic_score`` is the score the grader gave when a manual score
    (``manual.csv``) overrides it, else None.
    """

    id: str
    description: str
    status: str
    score: float
    max_score: float
    visibility: str
    message: str
    hint: str
    shown: bool
    details: tuple[tuple[str, str], ...] = ()
    diagnosis: tuple[Diagnosis, ...] = ()
    automatic_score: float | None = None


@dataclass(frozen=True)
class ExerciseResult:
    """Scores of one exercise for one submission."""

    id: str
    title: str
    section: str
    score: float
    max_score: float
    checks: tuple[CheckResult, ...]


@dataclass(frozen=True)
class SubmissionResult:
    """One submission's grade.

    Attributes
    ----------
    status : str
        ``"graded"`` or ``"error"`` (nothing could run: no file, the module
        does not import).
    error : str
        The reason when ``status == "error"``.
    slug : str
        The file name stem of the student's files (see `grader.intake.naming`);
        "" when unknown (writers then derive one from the ids).
    raw_score : float or None
        The automatic score before any `Adjustment`; None when there is
        none (``score`` is then the automatic score).
    adjustments : tuple of Adjustment
        Manual scores then the late penalty, in the order applied;
        ``score`` is the final score after them.
    lms : dict of str to str
        The submission's `Submission.lms`.
    late : dict of str to int
        Under a policy with a term's late days (`grader.term.ledger`): ``days``
        (whole days late, after the grace period) and ``used`` (late days
        charged to it); empty when on time or without such a policy.
    """

    id: str
    path: str
    sha256: str
    status: str
    score: float
    max_score: float
    exercises: tuple[ExerciseResult, ...]
    error: str = ""
    stdout: str = ""
    stderr: str = ""
    slug: str = ""
    raw_score: float | None = None
    adjustments: tuple[Adjustment, ...] = ()
    lms: dict[str, str] = field(default_factory=dict)
    late: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class GradingReport:
    """The results of one grading session."""

    grader_version: str
    spec_hash: str
    command: str
    submissions: tuple[SubmissionResult, ...]
    exercises: tuple[Exercise, ...] = ()


_FIELDS: dict[type, tuple[tuple[str, ...], Any]] = {}


def _shallow(obj: Any) -> dict[str, Any]:
    """``obj``'s fields as a dict, in their order (the names and their getter found once per class)."""
    known = _FIELDS.get(type(obj))
    if known is None:
        names = tuple(f.name for f in dataclasses.fields(obj))
        known = _FIELDS.setdefault(type(obj), (names, operator.attrgetter(*names)))
    names, getter = known
    values = getter(obj)
    return dict(zip(names, values if len(names) > 1 else (values,)))


def result_to_dict(result: SubmissionResult, exercises: bool = True) -> dict[str, Any]:
    """A `SubmissionResult` as plain JSON data (for storing; see `result_from_dict`).

    Equal to ``dataclasses.asdict(result)`` (tuples stay tuples, which JSON
    writes as lists), built field by field: ``asdict`` deep-copies every
    string and costs milliseconds per submission. With ``exercises=False``
    the ``"exercises"`` key is left out (for a caller that encodes each
    exercise itself, `exercise_to_dict`).
    """
    data = _shallow(result)
    if exercises:
        data["exercises"] = [exercise_to_dict(ex) for ex in result.exercises]
    else:
        del data["exercises"]
    data["adjustments"] = [_shallow(a) for a in result.adjustments]
    data["lms"] = dict(result.lms)
    return data


def exercise_to_dict(exercise: ExerciseResult) -> dict[str, Any]:
    """One `ExerciseResult` as plain JSON data: its part of `result_to_dict`.

    Parameters
    ----------
    exercise : ExerciseResult

    Returns
    -------
    dict
        Its fields in order, ``checks`` a list of each check's fields (``diagnosis`` a list of
        dicts). `result_from_dict` reads it back.
    """
    data = _shallow(exercise)
    checks = []
    for check in exercise.checks:
        c = _shallow(check)
        c["diagnosis"] = [_shallow(d) for d in check.diagnosis]
        checks.append(c)
    data["checks"] = checks
    return data


def exercise_from_dict(data: dict[str, Any]) -> ExerciseResult:
    """Rebuild an `ExerciseResult` from `exercise_to_dict` output, tuples included.

    Raises
    ------
    KeyError, TypeError
        If ``data`` does not have the shape `exercise_to_dict` writes.
    """
    checks = tuple(
        CheckResult(
            **{
                **c,
                "details": tuple(tuple(pair) for pair in c.get("details", ())),
                "diagnosis": tuple(Diagnosis(**d) for d in c.get("diagnosis", ())),
            }
        )
        for c in data["checks"]
    )
    return ExerciseResult(**{**data, "checks": checks})


def result_from_dict(data: dict[str, Any]) -> SubmissionResult:
    """Rebuild a `SubmissionResult` from `result_to_dict` output, tuples included.

    Raises
    ------
    KeyError, TypeError
        If ``data`` does not have the shape `result_to_dict` writes.
    """
    exercises = [exercise_from_dict(ex) for ex in data["exercises"]]
    adjustments = tuple(Adjustment(**a) for a in data.get("adjustments", ()))
    return SubmissionResult(
        **{**data, "exercises": tuple(exercises), "adjustments": adjustments, "lms": dict(data.get("lms", {}))}
    )
