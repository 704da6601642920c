"""The check-kind protocol: what a check kind is, and what it may use (`KindContext`).

A check kind turns a spec's check into calls for the child process
(``prepare``) and decides the check from what came back (``judge``). All of
it runs in the grader's process; expected values never leave it. Kinds are
contributed through the ``grader_check_kinds`` hook: the built-in generic
ones (``grader.builtin.checks``) and each course pack's own (its plugin).

This module holds the protocol (`CheckKind`), a base class most kinds
derive from (`Kind`: one call, judged by ``check_value``), the context a
kind is given (`KindContext`: the exercise, the reference, seeded argument
generators and a guarded reference call) and helpers to compare named
result parts with tolerances.
"""

from __future__ import annotations

import inspect
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from grader.compare import (
    DEFAULT_WHY,
    FLOOR_WHY,
    Mismatch,
    as_array,
    compare,
    format_value,
    part_names,
    rounding_floor,
    split_parts,
    tolerance_limit,
)
from grader.errors import SpecError
from grader.models import Call, CallResult, Check, Exercise, Prepared, Verdict

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "FLOOR_KEY",
    "LITERAL",
    "REASON",
    "REF_KEY",
    "ROW_SUM_ATOL",
    "SELECT",
    "SHAPES",
    "TOLERANCE",
    "VALID",
    "WHY",
    "CheckKind",
    "Kind",
    "KindContext",
    "compare_parts",
    "contract_problem",
    "gated",
    "guarded_call",
    "keys_schema",
    "mib",
    "named",
    "normalize",
    "reference_parts",
    "reference_shapes",
    "shaped_parts",
    "tolerance_of",
    "tolerances",
    "with_floor",
]

DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-9
"""Default tolerances of ``compare`` and ``literal``; why: `grader.compare.DEFAULT_WHY`. A check's
inputs may widen them (`with_floor`), never narrow them."""
ROW_SUM_ATOL = 1e-9
"""How far a row of a distribution may sum from 1: m float64 weights, each within a few ulps, sum
to 1 within about m * 2.2e-16; 1e-9 refuses nothing float64 can do and any real normalisation bug."""
FLOOR_KEY = "~floor"
"""Key of a prepared expectation holding the float64 rounding floor of each part (when it matters)."""
REF_KEY = "~ref"
"""Key of a property check's prepared expectation holding the reference's result, for the contract gate."""
ORDER_MARGIN = 1e-3
"""Two reference weights ordered by more than this relative margin must be ordered the same way
in a result for it to meet the contract (a larger score gets a larger weight)."""

GENERATORS = ("normal", "uniform", "mask", "simplex")
GENERATOR_EXTRAS = {"normal": ("loc", "scale"), "uniform": ("low", "high"), "mask": (), "simplex": ()}
"""The keys each generator takes beside its shape or length."""

MAX_ARG_ELEMENTS = 1_000_000
"""Most elements one generated argument may have (checked before anything is drawn)."""
MAX_ARG_BYTES = 8 << 20
"""Most bytes one generated argument may take, at 8 bytes an element (8 MiB)."""
MAX_CHECK_ELEMENTS = 2_000_000
"""Most elements a check's generated arguments may have together."""
MAX_NDIM = 8
"""Most dimensions of a generated shape."""
LIMIT_KEPT_ELEMENTS = 1 << 14
"""An expected part with this many elements or more has its tolerance limit made once (`KindContext.limit_for`)."""
MAX_RESULT_ELEMENTS = 1_000_000
"""Most elements (all parts together) a reference result may have: what a submission returns
must fit the worker's limit (`grader.child.worker.MAX_ITEMS` counts rows too)."""
REFERENCE_MEMORY = 2 << 30
"""Memory (address space, bytes) one reference call may add to the grader's process (2 GiB)."""
REFERENCE_SECONDS = 30
"""Wall-clock seconds one reference call may take while checks are prepared."""

GATE_NOTE = "a property pays only for a result that meets the basic contract"
"""Ends the message of a property check failed by its contract gate (`gated`): the check's own hint,
about the property, does not apply then (`grader.reporting.feedback.hint_for`)."""

TOLERANCE = {"type": "number", "minimum": 0, "description": "give a tolerance: a number >= 0"}
"""JSON Schema of an ``rtol`` or ``atol`` key."""


@dataclass(frozen=True)
class KindContext:
    """What a check kind may use while preparing and judging a check.

    Attributes
    ----------
    exercise : grader.models.Exercise
        The exercise the check belongs to.
    reference : dict of str to callable
        The trusted reference functions.
    error_bound : callable, optional
        ``error_bound(function, args, parts)``: what correct float64 code
        may be off by, per element of each named part of the reference's
        result on ``args``, from a course pack's error analysis (the
        ``grader_float64_error`` hook); None, or a None answer, when no pack
        states one (`with_floor` then measures it).
    """

    exercise: Exercise
    reference: dict[str, Callable[..., Any]]
    error_bound: Callable[[str, Sequence[Any], dict[str, Any]], dict[str, Any] | None] | None = None
    _last: dict[str, tuple[str, tuple[Any, ...], Any]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """The reference's last call on a check's arguments: ``(function, args, raw result)``."""
    _limits: dict[int, tuple[Any, Any, float, float, np.ndarray]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """`tolerance_limit` of each large expected part judged, by the part's id (`limit_for`)."""

    def fail(self, check: Check, key: str, problem: str) -> SpecError:
        """Return a `SpecError` naming the spec file, the check and ``key``."""
        where = f"check '{check.id}'" + (f".{key}" if key else "")
        return SpecError(self.exercise.path, where, problem)

    def reference_function(self, check: Check, name: str | None = None) -> Callable[..., Any]:
        """The reference function a check calls; SpecError when it lacks one."""
        name = name or check.function
        fn = self.reference.get(name)
        if fn is None:
            known = ", ".join(sorted(self.reference)) or "none"
            raise self.fail(check, "function", f"the reference has no function '{name}' (it has: {known})")
        return fn

    def rng(self, check: Check) -> np.random.Generator:
        """The check's own random generator, seeded from its seed and id."""
        return np.random.default_rng([check.seed, zlib.crc32(check.id.encode())])

    def arguments(self, check: Check, rng: np.random.Generator | None = None) -> tuple[Any, ...]:
        """Resolve the spec's arguments into positional plain data.

        Generators (``{normal: [3, 2], scale: 1e3}``, ``{uniform: [4]}``,
        ``{mask: 6}``, ``{simplex: 5}``) are drawn from the check's seeded
        generator in the order the arguments are written.

        Raises
        ------
        grader.errors.SpecError
            If an argument name is not a parameter of the reference function,
            a required one is missing, or a generator is malformed.
        """
        rng = rng or self.rng(check)
        sizes = {name: self.generated_size(check, name, raw) for name, raw in check.args.items()}
        if sum(sizes.values()) > MAX_CHECK_ELEMENTS:  # refused before anything is drawn
            shown = ", ".join(f"{name} {check.args[name][_gen(check.args[name])]}" for name, n in sizes.items() if n)
            raise self.fail(
                check,
                "args",
                f"the generated arguments ({shown}) have {sum(sizes.values()):,} elements together; a "
                f"check's are limited to {MAX_CHECK_ELEMENTS:,}: make them smaller",
            )
        values = {name: self.generate(check, name, raw, rng) for name, raw in check.args.items()}
        signature = inspect.signature(self.reference_function(check))
        try:
            bound = signature.bind(**values)
        except TypeError as exc:
            raise self.fail(check, "args", f"do not fit {check.function}{signature}: {exc}") from None
        return tuple(bound.args)

    def generated_size(self, check: Check, name: str, raw: Any) -> int:
        """Elements the generator ``raw`` will draw (0 for a literal), checked and bounded; nothing is drawn.

        Raises
        ------
        grader.errors.SpecError
            If a mapping is not exactly one known generator, or a generator
            has unknown keys, a bad shape or length, bad bounds, or more than
            `MAX_NDIM` dimensions, `MAX_ARG_ELEMENTS` elements or
            `MAX_ARG_BYTES` bytes.
        """
        if not isinstance(raw, dict):
            return 0
        key = f"args.{name}" if name in check.args else name
        known = [k for k in raw if k in GENERATORS]
        if len(known) != 1:
            shown = ", ".join(repr(str(k)) for k in raw) or "no key"
            problem = "names two generators" if known else f"is not a generator (it has {shown})"
            raise self.fail(
                check,
                key,
                f"{problem}; write one of {', '.join(GENERATORS)}, e.g. {{normal: [3, 2]}}, "
                "or a list for a literal value",
            )
        gen = known[0]
        size = raw[gen]
        extra = {k: v for k, v in raw.items() if k != gen}
        allowed_extra = GENERATOR_EXTRAS[gen]
        if set(extra) - set(allowed_extra):
            unknown = ", ".join(sorted(str(k) for k in set(extra) - set(allowed_extra)))
            takes = ", ".join(allowed_extra) or "no other key"
            raise self.fail(check, key, f"generator '{gen}' does not take {unknown} (it takes {takes})")
        for k, v in extra.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                raise self.fail(check, f"{key}.{k}", f"{v!r} is not a finite number; give a number")
        if gen == "uniform" and not float(extra.get("low", -1.0)) < float(extra.get("high", 1.0)):
            raise self.fail(check, key, "'uniform' needs low < high: swap them, or change one")
        if gen in ("mask", "simplex"):
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise self.fail(check, key, f"'{gen}' takes a positive length, e.g. {{{gen}: 5}}")
            shape = [size]
        elif not (
            isinstance(size, list)
            and size
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in size)
        ):
            raise self.fail(check, key, f"'{gen}' takes a shape: a list of positive integers, e.g. {{{gen}: [3, 2]}}")
        else:
            shape = size
        if len(shape) > MAX_NDIM:
            raise self.fail(check, key, f"'{gen}' shape {shape} has {len(shape)} dimensions; give at most {MAX_NDIM}")
        elements = 1
        for s in shape:  # Python integers: no overflow, nothing allocated
            elements *= s
        if elements > MAX_ARG_ELEMENTS or elements * 8 > MAX_ARG_BYTES:
            raise self.fail(
                check,
                key,
                f"'{gen}' shape {shape} has {elements:,} elements ({mib(elements * 8)}); a generated argument is "
                f"limited to {MAX_ARG_ELEMENTS:,} elements and {mib(MAX_ARG_BYTES)}: make it smaller",
            )
        return elements

    def generate(self, check: Check, name: str, raw: Any, rng: np.random.Generator) -> Any:
        """One argument: ``raw`` itself, or the values its generator draws from ``rng``.

        The generator is checked first (`generated_size`): nothing is drawn
        for one that is malformed or over its budget.

        Raises
        ------
        grader.errors.SpecError
            As `generated_size`.
        """
        if not isinstance(raw, dict):
            return raw
        self.generated_size(check, name, raw)
        gen = _gen(raw)
        size = raw[gen]
        extra = {k: v for k, v in raw.items() if k != gen}
        shape = [size] if gen in ("mask", "simplex") else size
        if gen == "normal":
            value = rng.normal(extra.get("loc", 0.0), 1.0, shape) * extra.get("scale", 1.0)
        elif gen == "uniform":
            value = rng.uniform(extra.get("low", -1.0), extra.get("high", 1.0), shape)
        elif gen == "mask":
            allowed = np.asarray(rng.random(size) < 0.5)
            allowed[rng.integers(size)] = True
            value = allowed
        else:
            value = rng.dirichlet(np.ones(size))
        return value.tolist()

    def call_reference(self, check: Check, args: Sequence[Any], function: str | None = None) -> Any:
        """Run the reference on ``args`` (`guarded_call`), normalised, checked against ``returns``.

        Raises
        ------
        grader.errors.SpecError
            If the reference raises (or exits), runs out of its memory or
            time, returns more than `MAX_RESULT_ELEMENTS` elements, or
            returns another number of values than the spec's ``returns``
            names.
        """
        name = function or check.function
        fn = self.reference_function(check, function)
        shapes = _Shapes(args)
        try:
            value = self._reference_value(name, fn, args)
        except MemoryError:
            raise self.fail(
                check,
                "args",
                f"the reference needs more than {mib(REFERENCE_MEMORY)} of memory on arguments of "
                f"shapes {shapes}; make the arguments smaller",
            ) from None
        except TimeoutError:
            raise self.fail(
                check,
                "args",
                f"the reference took more than {REFERENCE_SECONDS} s on arguments of shapes {shapes}; "
                "make the arguments smaller",
            ) from None
        except KeyboardInterrupt:  # Ctrl-C while the checks are prepared: the run stops, no spec is blamed
            raise
        except BaseException as exc:  # noqa: BLE001 - instructor code, reported in one line (also sys.exit)
            raise self.fail(
                check,
                "args",
                f"the reference raised {type(exc).__name__} on these arguments: {exc}; fix the "
                "arguments or the reference",
            ) from None
        value = normalize(value)
        parts = value if isinstance(value, tuple) else (value,)
        elements = sum(int(np.size(p)) for p in parts)
        if elements > MAX_RESULT_ELEMENTS:
            got = ", ".join(str(np.shape(p)) for p in parts)
            raise self.fail(
                check,
                "args",
                f"the reference's result has {elements:,} elements (shapes {got}); results are limited "
                f"to {MAX_RESULT_ELEMENTS:,} elements: make the arguments smaller",
            )
        names = self.exercise.returns.get(name)
        if names is not None and len(names) != len(parts):
            raise SpecError(
                self.exercise.path,
                f"returns.{name}",
                f"names {len(names)} part(s) {list(names)} but the reference's {name} returns {len(parts)} "
                f"value(s) on the arguments of check '{check.id}'; give one name per returned value",
            )
        return value

    def _reference_value(self, name: str, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """``guarded_call(fn, args)``, or its raw result when the last reference call was on these very arguments.

        Preparing one check calls the reference on the same arguments up to three times (the
        expected value, its rounding floor, the result budget); on 512x64 inputs each call costs
        the reference's own input checks, a third of a second. Only the last call is kept, and
        only for the same ``args`` object (a tuple), so a result never stands for other inputs.
        """
        last = self._last.get("call")
        if last is not None and last[0] == name and last[1] is args:
            return last[2]
        value = guarded_call(fn, args)
        if type(args) is tuple:
            self._last["call"] = (name, args, value)
        return value

    def last_reference(self, name: str, args: Sequence[Any]) -> tuple[bool, Any]:
        """``(True, raw result)`` when the reference's last call (`call_reference`) was ``name`` on
        these very ``args``, else ``(False, None)``: what the result budget of a prepared call reuses."""
        last = self._last.get("call")
        if last is not None and last[0] == name and last[1] is args:
            return True, last[2]
        return False, None

    def limit_for(self, expected: Any, rtol: float, atol: float, floor: Any) -> np.ndarray | None:
        """`grader.compare.tolerance_limit` of a large expected part (`LIMIT_KEPT_ELEMENTS` or more),
        made once and kept for the run; None for a smaller one (`compare` makes its own).

        A part is known by the very array (kept with its limit, so its id is never another's),
        its floor and tolerances. Judging a 512x512 part then costs one pass fewer of three.
        """
        if type(expected) is not np.ndarray or expected.size < LIMIT_KEPT_ELEMENTS:
            return None
        kept = self._limits.get(id(expected))
        if kept is not None and kept[0] is expected and kept[1] is floor and kept[2:4] == (rtol, atol):
            return kept[4]
        limit = tolerance_limit(expected, rtol, atol, floor)
        limit.flags.writeable = False  # shared by the grading threads
        self._limits[id(expected)] = (expected, floor, rtol, atol, limit)
        return limit

    def forget_reference(self) -> None:
        """Drop the kept result of the last reference call (once a check is prepared)."""
        self._last.clear()

    def shown_call(self, check: Check, args: Sequence[Any], function: str | None = None) -> str:
        """Render a call as the student would write it, values shortened."""
        name = function or check.function
        params = list(inspect.signature(self.reference_function(check, name)).parameters)
        shown = ", ".join(f"{p}={format_value(a, 300, multiline=False)}" for p, a in zip(params, args))
        return f"{name}({shown})"


class _Shapes:
    """The shapes of a call's arguments, in words, made only when a message needs them."""

    def __init__(self, args: Sequence[Any]) -> None:
        self.args = args

    def __str__(self) -> str:
        return ", ".join(f"{np.shape(a)}" if isinstance(a, list) else type(a).__name__ for a in self.args)


def _gen(raw: dict[str, Any]) -> str:
    """The generator named in a (checked) generator mapping."""
    return next(k for k in raw if k in GENERATORS)


def mib(n: int) -> str:
    """A byte count in MiB, e.g. ``'8 MiB'`` or ``'74.5 GiB'``."""
    return f"{n / (1 << 30):.3g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.3g} MiB"


def guarded_call(fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    """Call trusted reference code with bounded memory and time.

    On Linux, in the main thread, the process's address space may grow by
    at most `REFERENCE_MEMORY` during the call (``RLIMIT_AS``; numpy then
    raises `MemoryError` instead of the machine swapping) and the call may
    take `REFERENCE_SECONDS` (``SIGALRM`` raises `TimeoutError`). Elsewhere
    it is a plain call.
    """
    import threading

    try:
        import resource
        import signal
    except ImportError:  # not POSIX
        return fn(*args)
    if threading.current_thread() is not threading.main_thread() or not os.path.exists("/proc/self/statm"):
        return fn(*args)
    with open("/proc/self/statm") as fh:
        size = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + REFERENCE_MEMORY
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    capped = soft == resource.RLIM_INFINITY or cap < soft

    def _alarm(signum: int, frame: Any) -> None:
        raise TimeoutError("the reference call took too long")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, REFERENCE_SECONDS)
    try:
        if capped:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        return fn(*args)
    finally:
        if capped:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


def normalize(value: Any) -> Any:
    """Turn a reference result into ints, float arrays or tuples of them."""
    if isinstance(value, tuple):
        return tuple(normalize(v) for v in value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    return np.asarray(value, dtype=np.float64)


def tolerances(check: Check) -> tuple[float, float]:
    """The check's ``(rtol, atol)``."""
    return float(check.params.get("rtol", DEFAULT_RTOL)), float(check.params.get("atol", DEFAULT_ATOL))


def compare_parts(
    check: Check, ctx: KindContext, expected: dict[str, Any], got: Any, function: str | None = None
) -> Verdict:
    """Compare the named parts in ``expected`` with the returned value ``got``."""
    rtol, atol = tolerances(check)
    floors = expected.get(FLOOR_KEY, {})
    why = check.params.get("why") or (FLOOR_WHY if floors else DEFAULT_WHY)
    try:
        parts = split_parts(part_names(function or check.function, ctx.exercise.returns), got)
        for name, value in expected.items():
            if name.startswith("~"):
                continue
            floor = floors.get(name)
            compare(name, value, parts[name], rtol, atol, floor, why, ctx.limit_for(value, rtol, atol, floor))
    except Mismatch as m:
        return Verdict("failed", m.message, m.details)
    return Verdict("passed", fraction=1.0)


def named(check: Check, ctx: KindContext, value: Any, select: Sequence[str] | None = None) -> dict[str, Any]:
    """Name the parts of a (reference) result and keep those in ``select``."""
    names = part_names(check.function, ctx.exercise.returns)
    parts = dict(zip(names, value)) if len(names) > 1 else {names[0]: value}
    if select:
        unknown = [s for s in select if s not in parts]
        if unknown:
            raise ctx.fail(
                check, "select", f"unknown part(s) {unknown}; the result has {list(names)}: select among them"
            )
        parts = {k: parts[k] for k in select}
    return parts


def reference_shapes(check: Check, ctx: KindContext, args: Sequence[Any]) -> dict[str, tuple[int, ...]]:
    """Shape of each part of the reference's result on ``args``."""
    return {k: np.shape(v) for k, v in named(check, ctx, ctx.call_reference(check, args)).items()}


def shaped_parts(check: Check, ctx: KindContext, got: Any, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Split a returned value into float arrays and check each part's shape.

    Raises
    ------
    grader.compare.Mismatch
        If the value has the wrong parts, non-numeric data or a part whose
        shape differs from the reference's.
    """
    parts = split_parts(part_names(check.function, ctx.exercise.returns), got)
    arrays = {}
    for name, shape in shapes.items():
        if name.startswith("~"):  # what judging keeps beside the shapes (`REF_KEY`, ...)
            continue
        arr = as_array(name, parts[name])
        if arr.shape != shape:
            raise Mismatch(
                f"{name} has shape {arr.shape}, expected {shape}",
                (("expected shape", str(shape)), ("got shape", str(arr.shape))),
            )
        arrays[name] = arr
    return arrays


def with_floor(check: Check, ctx: KindContext, args: Sequence[Any], expected: dict[str, Any]) -> dict[str, Any]:
    """``expected`` plus, under `FLOOR_KEY`, each part's float64 rounding floor on ``args`` where it matters.

    The floor is what correct float64 code may be off by on these inputs: the course pack's
    error analysis when it states one (``ctx.error_bound``), otherwise what rounding of the
    inputs by a few ulps moves the reference's result (`grader.compare.rounding_floor`). A
    check's tolerance is its ``rtol``/``atol`` plus that floor (kept only where it exceeds
    them), so every correct float64 route passes on any inputs, however large, while the check
    stays as strict as its inputs allow.

    Raises
    ------
    grader.errors.SpecError
        If the floor is so large (over 1e-2 of the largest expected value) that the check would
        prove nothing: the inputs are too ill-conditioned for float64; choose others.
    """
    floats = {k: v for k, v in expected.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"}
    if not floats:
        return expected
    fn = ctx.reference_function(check)
    names = part_names(check.function, ctx.exercise.returns)
    reference = named(check, ctx, ctx.call_reference(check, args))
    floor = ctx.error_bound(check.function, args, reference) if ctx.error_bound is not None else None
    if floor is None:
        seed = zlib.crc32(f"{ctx.exercise.id}/{check.id}".encode())
        floor = rounding_floor(lambda *a: normalize(guarded_call(fn, a)), args, floats, names, seed)
    floor = {k: np.asarray(v, dtype=np.float64) for k, v in floor.items() if k in floats}
    floor = {k: v for k, v in floor.items() if v.shape == np.shape(floats[k])}
    rtol, atol = tolerances(check)
    floor = {k: v for k, v in floor.items() if np.any(v > atol + rtol * np.abs(floats[k]))}
    for part, values in floor.items():
        scale = float(np.max(np.abs(floats[part]))) if floats[part].size else 0.0
        if float(np.max(values)) > 1e-2 * max(scale, 1e-300):
            raise ctx.fail(
                check,
                "args",
                f"float64 rounding of these inputs moves {part} by up to {float(np.max(values)):.3g} "
                f"(of at most {scale:.3g}): the check would prove nothing; choose better-conditioned inputs",
            )
    return {**expected, FLOOR_KEY: floor} if floor else expected


def tolerance_of(check: Check, expected: dict[str, Any], part: str) -> tuple[float, float, np.ndarray]:
    """The tolerance a prepared compare/literal check asks of ``part``: ``(rtol, atol, floor)``.

    An element passes when ``|got - expected| <= atol + rtol * |expected| + floor``.
    """
    rtol, atol = tolerances(check)
    value = np.asarray(expected[part], dtype=np.float64)
    floor = expected.get(FLOOR_KEY, {}).get(part)
    return rtol, atol, np.zeros(value.shape) if floor is None else np.broadcast_to(np.asarray(floor), value.shape)


def _is_distribution(ref: np.ndarray) -> bool:
    """Whether a reference part is rows of weights: nonnegative, each row (last axis, >= 2 entries) summing to 1."""
    if ref.ndim == 0 or ref.shape[-1] < 2 or ref.size == 0 or ref.min() < 0:
        return False
    return bool(np.all(np.abs(ref.sum(axis=-1) - 1.0) <= ROW_SUM_ATOL * ref.shape[-1]))


def _is_gradient(ref: np.ndarray) -> bool:
    """Whether a reference part is rows (last axis, >= 2 entries) summing to 0 with entries that do not."""
    if ref.ndim == 0 or ref.shape[-1] < 2 or ref.size == 0 or not np.all(np.isfinite(ref)):
        return False
    rows = ref.reshape(-1, ref.shape[-1])
    size = np.sum(np.abs(rows), axis=-1)
    return bool(np.all(size > 0) and np.all(np.abs(rows.sum(axis=-1)) <= 1e-9 * size))


def contract_problem(parts: dict[str, np.ndarray], reference: dict[str, Any]) -> str | None:
    """Why a result does not meet its function's basic contract, or None when it does.

    A property (shift invariance, causal noninterference, rows summing to one, no mutation)
    holds trivially for a constant, for uniform weights or for zeros, so a property check pays
    only when the result also meets the basic contract, judged against the reference's result
    on the same call (nothing here names a function: the rules follow from the reference's data):

    * every part is finite;
    * a part the reference returns as rows of weights (nonnegative, summing to 1) is such rows
      too (within `ROW_SUM_ATOL`), 0 where the reference's is exactly 0 (masked), and ordered
      like the reference's: where the reference's largest weight of a row exceeds its smallest
      nonzero one by `ORDER_MARGIN` (relative), the result's must be larger too (a larger score
      gets a larger weight);
    * a part the reference returns as rows summing to 0 with nonzero entries (a gradient along
      the simplex) has the reference's sign wherever the reference's entry is clearly nonzero
      (over 1e-6 of its row's largest): a constant or zeros point nowhere.

    Parameters
    ----------
    parts : dict of str to ndarray
        The result's parts, shapes already checked.
    reference : dict of str to array_like
        The reference's parts on the same call.
    """
    for name, got in parts.items():
        if not np.all(np.isfinite(got)):
            return f"{name} holds a value that is not finite"
        if name not in reference:
            continue
        ref = np.asarray(reference[name], dtype=np.float64)
        if ref.shape != got.shape:
            continue
        if _is_gradient(ref):
            refs, rows = ref.reshape(-1, ref.shape[-1]), got.reshape(-1, got.shape[-1])
            clear = np.abs(refs) > 1e-6 * np.max(np.abs(refs), axis=-1, keepdims=True)
            if np.any(np.sign(rows[clear]) != np.sign(refs[clear])):
                return f"the {name} point the wrong way for some entry (their sign differs from the expected one)"
            continue
        if not _is_distribution(ref):
            continue
        rows, refs = got.reshape(-1, got.shape[-1]), ref.reshape(-1, ref.shape[-1])
        if rows.min() < -ROW_SUM_ATOL:
            return f"the {name} hold a negative entry"
        if np.any(np.abs(rows.sum(axis=-1) - 1.0) > ROW_SUM_ATOL * rows.shape[-1]):
            return f"the {name} do not sum to 1 in every row"
        if np.any(np.abs(rows[refs == 0.0]) > 1e-12):
            return f"a masked entry of the {name} is not 0"
        for i, (row, r) in enumerate(zip(rows, refs)):
            nonzero = np.flatnonzero(r > 0)
            hi = int(np.argmax(r))
            lo = int(nonzero[np.argmin(r[nonzero])])
            if r[hi] > r[lo] * (1 + ORDER_MARGIN) and not row[hi] > row[lo]:
                return (
                    f"in row {i} the {name} ignore the scores: the largest score's weight is not above the "
                    "smallest allowed score's"
                )
    return None


def gated(
    check: Check,
    ctx: KindContext,
    got: Any,
    expected: dict[str, Any],
    prop: str,
    ref_key: str = REF_KEY,
) -> Verdict | None:
    """A failed verdict when ``got`` does not meet the basic contract (`contract_problem`), else None.

    ``expected`` holds the parts' shapes and, under ``ref_key``, the reference's result on the same call.
    """
    shapes = {k: v for k, v in expected.items() if not k.startswith("~")}
    try:
        parts = shaped_parts(check, ctx, got, shapes)
    except Mismatch as m:
        return Verdict("failed", m.message, m.details)
    problem = contract_problem(parts, expected.get(ref_key, {}))
    if problem is None:
        return None
    return Verdict(
        "failed",
        f"{problem}, so {prop} earns nothing here: {GATE_NOTE}",
        tuple((k, format_value(v)) for k, v in parts.items()),
    )


def reference_parts(check: Check, ctx: KindContext, args: Sequence[Any]) -> dict[str, Any]:
    """Shapes of the reference's parts on ``args`` plus, under `REF_KEY`, the parts themselves."""
    parts = named(check, ctx, ctx.call_reference(check, args))
    return {
        **{k: np.shape(v) for k, v in parts.items()},
        REF_KEY: {k: np.asarray(v, dtype=np.float64) for k, v in parts.items()},
    }


def keys_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    """A kind's ``schema``: its keys' JSON Schemas, e.g. ``keys_schema(atol=TOLERANCE)``."""
    return {"type": "object", "properties": properties}


LITERAL = {
    "type": ["number", "array", "object"],
    "description": "give the hand value: a number, a list of numbers or a mapping from part names to them",
}
SHAPES = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    "description": "give a mapping from part names to shapes, e.g. {weights: [4, 6]}",
}
SELECT = {
    "type": "array",
    "minItems": 1,
    "uniqueItems": True,
    "items": {"type": "string", "minLength": 1},
    "description": "give a list of part names, e.g. [weights]",
}
REASON = {"type": "string", "minLength": 1, "description": "give the reason in words, e.g. empty scores"}
WHY = {"type": "string", "minLength": 10, "description": "say in words why the check asks this tolerance"}
VALID = {
    "type": "object",
    "minProperties": 1,
    "description": "give the arguments of a valid call next to the invalid one, e.g. {scores: [1.0, 0.0]}",
}


class Kind:
    """Base of most kinds (a `CheckKind`): one call, judged by `check_value`.

    Attributes
    ----------
    name : str
        The ``kind:`` of specs.
    params : dict of str to str
        Kind-specific spec keys, each ``"required"`` or ``"optional"``.
    schema : dict
        JSON Schema of the kind's own keys (an object's ``properties``):
        types and ranges, each with a ``description`` saying what to write,
        which the spec loader adds to its error line.
    expects_raise : bool
        Whether a raised exception is the kind's to judge (else the judge
        reports it as an error).
    """

    name = ""
    params: dict[str, str] = {}
    schema: dict[str, Any] = {"type": "object"}
    expects_raise = False

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        """Resolve the arguments, compute what judging needs, and return the calls.

        Raises
        ------
        grader.errors.SpecError
            If the check cannot be prepared (bad arguments, the reference
            disagrees or raises).
        """
        args = ctx.arguments(check)
        return Prepared(
            calls=(Call(check.function, args, check.timeout),),
            expected=self.expected(check, ctx, args),
            shown_call=ctx.shown_call(check, args),
        )

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        """What judging will compare with (kept in the grader's process); None by default."""
        return None

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        """Decide the check from its call results (every call returned)."""
        return self.check_value(check, prepared.expected, results[0].value, ctx)

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        """Decide a one-call check from the returned JSON data ``got``."""
        raise NotImplementedError


@runtime_checkable
class CheckKind(Protocol):
    """What the harness asks of a check kind (a plugin returns these from ``grader_check_kinds``).

    Attributes
    ----------
    name : str
        The ``kind:`` of specs; unique over every plugin.
    params : dict of str to str
        The kind's own spec keys, each ``"required"`` or ``"optional"``.
    schema : dict
        JSON Schema of those keys (an object's ``properties``), each with a
        ``description`` saying what to write.
    expects_raise : bool
        Whether a raised exception is the kind's to judge (else the judge
        reports it as an error).
    """

    name: str
    params: dict[str, str]
    schema: dict[str, Any]
    expects_raise: bool

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        """The check's calls and what judging needs (kept in the grader's process).

        Raises
        ------
        grader.errors.SpecError
            If the check cannot be prepared.
        """
        ...

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        """Decide the check from its calls' results (every call returned, unless `expects_raise`)."""
        ...
