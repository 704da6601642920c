"""Built-in plugin: the check kinds used by the G14 specs.

A check kind turns a spec's check into calls for the child process
(``prepare``) and decides the check from what came back (``judge``). All of
it runs in the grader's process; expected values never leave it.

Kinds
-----
compare
    Call the function on the spec's (seeded) arguments and compare with the
    reference's result on the same arguments. Keys: ``select``, ``rtol``,
    ``atol``.
literal
    Compare with a hand value written in the spec (``expect``), e.g. the
    chapter's worked examples. ``grader validate`` also checks the literal
    against the reference.
raises
    The call must raise ``ValueError``; ``reason`` says what is invalid.
shape
    Compare only the shapes of the result's parts (``expect``).
row_sums
    Every row of ``weights`` is nonnegative and sums to one.
shift_invariance
    Adding ``shift`` to every score leaves softmax unchanged.
causal_noninterference
    Changing the last key and value leaves earlier causal outputs and
    weights unchanged.
sum_to_zero
    The entries of a softmax-backward result sum to zero.
finite_difference
    softmax_backward agrees with a central finite difference of the
    reference softmax.
no_mutation
    The call leaves its arguments (the caller's lists) unchanged.
"""

from __future__ import annotations

import copy
import inspect
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.compare import (
    DEFAULT_WHY,
    EPS,
    FLOOR_WHY,
    Mismatch,
    as_array,
    compare,
    format_value,
    part_names,
    rounding_floor,
    split_parts,
)
from grader.errors import SpecError
from grader.models import Call, CallResult, Check, Exercise, Prepared, Verdict
from grader.plugins import hookimpl

DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-9
"""Default tolerances of ``compare`` and ``literal``; why: `grader.compare.DEFAULT_WHY`. A check's
inputs may widen them (`grader.compare.rounding_floor`), never narrow them."""
ROW_SUM_ATOL = 1e-9
"""How far a row of weights may sum from 1: m float64 weights, each within a few ulps, sum to
1 within about m * 2.2e-16; 1e-9 refuses nothing float64 can do and any real normalisation bug."""
FLOOR_KEY = "~floor"
"""Key of a prepared expectation holding the float64 rounding floor of each part (when nonzero)."""
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
MAX_RESULT_ELEMENTS = 1_000_000
"""Most elements (all parts together) a reference result may have: what a submission returns
must fit the worker's limit (`grader.worker.MAX_ITEMS` counts rows too)."""
MAX_FD_LENGTH = 1_000
"""Longest ``scores`` of a ``finite_difference`` check (it calls the reference softmax 2n times)."""
REFERENCE_MEMORY = 2 << 30
"""Memory (address space, bytes) one reference call may add to the grader's process (2 GiB)."""
REFERENCE_SECONDS = 30
"""Wall-clock seconds one reference call may take while checks are prepared."""

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
    """

    exercise: Exercise
    reference: dict[str, Callable[..., Any]]

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
                check, "args", f"the generated arguments ({shown}) have {sum(sizes.values()):,} elements together; a "
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
            raise self.fail(check, key, f"{problem}; write one of {', '.join(GENERATORS)}, e.g. {{normal: [3, 2]}}, "
                            "or a list for a literal value")
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
        elif not (isinstance(size, list) and size and all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in size)):
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
                check, key,
                f"'{gen}' shape {shape} has {elements:,} elements ({_mib(elements * 8)}); a generated argument is "
                f"limited to {MAX_ARG_ELEMENTS:,} elements and {_mib(MAX_ARG_BYTES)}: make it smaller",
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
            value = rng.random(size) < 0.5
            value[rng.integers(size)] = True
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
        shapes = ", ".join(f"{np.shape(a)}" if isinstance(a, list) else type(a).__name__ for a in args)
        try:
            value = guarded_call(fn, args)
        except MemoryError:
            raise self.fail(
                check, "args", f"the reference needs more than {_mib(REFERENCE_MEMORY)} of memory on arguments of "
                f"shapes {shapes}; make the arguments smaller",
            ) from None
        except TimeoutError:
            raise self.fail(
                check, "args", f"the reference took more than {REFERENCE_SECONDS} s on arguments of shapes {shapes}; "
                "make the arguments smaller",
            ) from None
        except BaseException as exc:  # noqa: BLE001 - instructor code, reported in one line (also sys.exit)
            raise self.fail(
                check, "args", f"the reference raised {type(exc).__name__} on these arguments: {exc}; fix the "
                "arguments or the reference",
            ) from None
        value = normalize(value)
        parts = value if isinstance(value, tuple) else (value,)
        elements = sum(int(np.size(p)) for p in parts)
        if elements > MAX_RESULT_ELEMENTS:
            got = ", ".join(str(np.shape(p)) for p in parts)
            raise self.fail(
                check, "args", f"the reference's result has {elements:,} elements (shapes {got}); results are limited "
                f"to {MAX_RESULT_ELEMENTS:,} elements: make the arguments smaller",
            )
        names = self.exercise.returns.get(name)
        if names is not None and len(names) != len(parts):
            raise SpecError(
                self.exercise.path, f"returns.{name}",
                f"names {len(names)} part(s) {list(names)} but the reference's {name} returns {len(parts)} "
                f"value(s) on the arguments of check '{check.id}'; give one name per returned value",
            )
        return value

    def shown_call(self, check: Check, args: Sequence[Any], function: str | None = None) -> str:
        """Render a call as the student would write it, values shortened."""
        name = function or check.function
        params = list(inspect.signature(self.reference_function(check, name)).parameters)
        shown = ", ".join(f"{p}={format_value(a, 300, multiline=False)}" for p, a in zip(params, args))
        return f"{name}({shown})"


def _gen(raw: dict[str, Any]) -> str:
    """The generator named in a (checked) generator mapping."""
    return next(k for k in raw if k in GENERATORS)


def _mib(n: int) -> str:
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
            compare(name, value, parts[name], rtol, atol, floors.get(name), why)
    except Mismatch as m:
        return Verdict("failed", m.message, m.details)
    return Verdict("passed", fraction=1.0)


FLOOR_SAFETY = 4.0
"""Margin of `score_rounding` over the error bound it states."""


def _lse(x: np.ndarray) -> np.ndarray:
    """log(sum(exp(x))) along the last axis, stably."""
    top = np.max(x, axis=-1, keepdims=True)
    return (top + np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True)))[..., 0]


def row_weight_bound(scores: np.ndarray, allowed: np.ndarray, score_error: np.ndarray) -> np.ndarray:
    """How far correct float64 code may put each weight of one softmax row (absolute), see `score_rounding`.

    Two parts: the interval of each weight when every score may be off by ``score_error``
    (its exact extremes: its own score up and the others down, and the reverse), and the
    log-sum-exp route's common factor ``exp(c) - 1``, ``c = min(eps |top|, log sum_k exp(s_k -
    top)) + (m + 4) eps``: it rounds ``top + log(sum)`` to float64's spacing at ``|top|``, or
    drops the log entirely when it is below that spacing. 0 where masked, and on a row with one
    allowed key (its weight is exactly 1 in every route).
    """
    out = np.zeros(scores.shape)
    idx = np.flatnonzero(allowed)
    if idx.size <= 1:
        return out
    s, e = scores[idx], score_error[idx]
    diff = s[None, :] - s[:, None]  # [j, k] = s_k - s_j
    spread = e[None, :] + e[:, None]
    np.fill_diagonal(spread, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.exp(-_lse(diff))
        high = np.exp(-_lse(diff - spread))
        low = np.exp(-_lse(diff + spread))
    top = float(np.max(s))
    common = min(EPS * abs(top), float(_lse(s - top))) + (idx.size + 4) * EPS
    out[idx] = np.maximum(high - p, p - low) + p * np.expm1(common)
    return out


def score_rounding(function: str, args: Sequence[Any], parts: dict[str, Any]) -> dict[str, np.ndarray] | None:
    """A bound on the error of correct float64 code, per element, for ``softmax`` and ``attention``.

    Error analysis of the routes the chapter allows (max subtraction, log-sum-exp in pure Python or
    numpy, renormalising, ``math.fsum``), with ``eps`` = 2.2e-16:

    * a score ``s_ij = q_i . k_j / sqrt(d_k)`` is off by at most ``d_k eps sum_k |q_ik k_jk| /
      sqrt(d_k) + eps |s_ij|`` (a d_k-term dot product); softmax's own scores are exact;
    * a weight is off by what those score errors can move it (`row_weight_bound`), plus the
      log-sum-exp route's common factor: ``top + log(sum)`` rounds to float64's spacing at the
      largest allowed score ``|top|`` (1.2e-4 near 1e12);
    * an output ``sum_j p_ij V_jv`` is off by ``sum_j |dp_ij| |V_jv|`` plus m roundings of it.

    Returns
    -------
    dict of str to ndarray or None
        The bound times `FLOOR_SAFETY`, per part (``weights``, ``outputs``) present in ``parts``;
        None for another function or arguments of another form (the caller measures instead).
    """
    try:
        if function == "softmax":
            scores = np.asarray(args[0], dtype=np.float64)
            mask = np.ones(scores.shape, bool) if len(args) < 2 or args[1] is None else np.asarray(args[1], bool)
            bound = row_weight_bound(scores, mask, np.zeros(scores.shape))
            return {k: FLOOR_SAFETY * bound for k in parts if k in ("weights", "result")}
        if function == "attention":
            q, k, v = (np.asarray(a, dtype=np.float64) for a in args[:3])
            causal = bool(args[3]) if len(args) > 3 else False
            if q.ndim != 2 or k.ndim != 2 or v.ndim != 2:
                return None
            n, d = q.shape
            m = k.shape[0]
            root = np.sqrt(d)
            with np.errstate(over="ignore", invalid="ignore"):
                scores = q @ k.T / root
                error = d * EPS * (np.abs(q) @ np.abs(k).T) / root + EPS * np.abs(scores)
            if not (np.all(np.isfinite(scores)) and np.all(np.isfinite(error))):
                return None
            allowed = np.tril(np.ones((n, m), bool)) if causal else np.ones((n, m), bool)
            weights = np.asarray(parts["weights"], dtype=np.float64) if "weights" in parts else None
            if weights is None or weights.shape != (n, m):
                return None
            bound = np.stack([row_weight_bound(scores[i], allowed[i], error[i]) for i in range(n)])
            out: dict[str, np.ndarray] = {"weights": FLOOR_SAFETY * bound}
            if "outputs" in parts:
                out["outputs"] = FLOOR_SAFETY * (bound @ np.abs(v) + m * EPS * (weights @ np.abs(v)))
            return {key: val for key, val in out.items() if key in parts}
    except (TypeError, ValueError, IndexError):
        return None
    return None


def with_floor(check: Check, ctx: KindContext, args: Sequence[Any], expected: dict[str, Any]) -> dict[str, Any]:
    """``expected`` plus, under `FLOOR_KEY`, each part's float64 rounding floor on ``args`` when it matters.

    The floor is what correct float64 code may be off by on these inputs: for ``softmax`` and
    ``attention`` the error bound `score_rounding` states (from the magnitude of the scores and
    the dot products), otherwise what rounding of the inputs moves the reference's result
    (`grader.compare.rounding_floor`). A check's tolerance is its ``rtol``/``atol`` plus that
    floor, so every correct float64 route passes on any inputs, however large, while the check
    stays as strict as its inputs allow.

    Raises
    ------
    grader.errors.SpecError
        If the floor is so large (over 1e-2 of the largest expected value) that the check would
        prove nothing: the inputs are too ill-conditioned for float64; choose others.
    """
    fn = ctx.reference_function(check)
    names = part_names(check.function, ctx.exercise.returns)
    floats = {k: v for k, v in expected.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"}
    if not floats:
        return expected
    seed = zlib.crc32(f"{ctx.exercise.id}/{check.id}".encode())
    reference = named(check, ctx, ctx.call_reference(check, args))
    floor = score_rounding(check.function, args, reference)
    if floor is None:
        floor = rounding_floor(lambda *a: normalize(guarded_call(fn, a)), args, floats, names, seed)
    floor = {k: np.asarray(v, dtype=np.float64) for k, v in floor.items() if k in floats}
    floor = {k: v for k, v in floor.items() if v.shape == np.shape(floats[k])}
    rtol, atol = tolerances(check)
    # Kept only where it matters: where rounding can move the result beyond what rtol/atol allow.
    floor = {k: v for k, v in floor.items() if np.any(v > atol + rtol * np.abs(floats[k]))}
    for part, values in floor.items():
        scale = float(np.max(np.abs(floats[part]))) if floats[part].size else 0.0
        if float(np.max(values)) > 1e-2 * max(scale, 1e-300):
            raise ctx.fail(
                check, "args", f"float64 rounding of these inputs moves {part} by up to {float(np.max(values)):.3g} "
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


def contract_problem(parts: dict[str, np.ndarray], reference: dict[str, Any]) -> str | None:
    """Why a result does not meet the function's basic contract, or None when it does.

    A property (shift invariance, causal noninterference, rows summing to one, no mutation, a
    gradient summing to zero) holds trivially for a constant, for uniform weights or for zeros,
    so a property check pays only when the result also meets the basic contract, judged against
    the reference's result on the same call:

    * every part is finite;
    * ``weights``: each row nonnegative, summing to 1 (within `ROW_SUM_ATOL`), 0 where the
      reference's is exactly 0 (masked), and ordered like the reference's: where the reference's
      largest weight of a row exceeds its smallest allowed one by `ORDER_MARGIN` (relative),
      the result's must be larger too (a larger score gets a larger weight);
    * ``gradient``: the reference's sign wherever the reference is clearly nonzero (over 1e-6 of
      its largest entry): a score moves the loss in the direction the chapter's formula says.

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
        ref = np.asarray(reference.get(name, got), dtype=np.float64)
        if name == "weights":
            rows, refs = np.atleast_2d(got), np.atleast_2d(ref)
            if rows.min() < -ROW_SUM_ATOL:
                return "the weights hold a negative entry"
            sums = rows.sum(axis=-1)
            if np.any(np.abs(sums - 1.0) > ROW_SUM_ATOL * max(1, rows.shape[-1])):
                return "the weights do not sum to 1 in every row"
            if np.any(np.abs(rows[refs == 0.0]) > 1e-12):
                return "a masked weight is not 0"
            for i, (row, r) in enumerate(zip(rows, refs)):
                allowed = r > 0
                hi = int(np.argmax(r))
                lo = int(np.flatnonzero(allowed)[np.argmin(r[allowed])])
                if r[hi] > r[lo] * (1 + ORDER_MARGIN) and not row[hi] > row[lo]:
                    return (f"in row {i} the weights ignore the scores: the largest score's weight is not above "
                            "the smallest allowed score's")
        elif name == "gradient":
            clear = np.abs(ref) > 1e-6 * float(np.max(np.abs(ref), initial=0.0))
            if np.any(np.sign(got[clear]) != np.sign(ref[clear])):
                return "the gradient points the wrong way for some score (its sign differs from p_k (u_k - sum_j p_j u_j))"
    return None


def gated(
    check: Check, ctx: KindContext, got: Any, expected: dict[str, Any], prop: str, ref_key: str = REF_KEY,
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
        "failed", f"{problem}, so {prop} earns nothing here: a property pays only for a result that meets the "
        f"basic contract", tuple((k, format_value(v)) for k, v in parts.items()),
    )


def reference_parts(check: Check, ctx: KindContext, args: Sequence[Any]) -> dict[str, Any]:
    """Shapes of the reference's parts on ``args`` plus, under `REF_KEY`, the parts themselves."""
    parts = named(check, ctx, ctx.call_reference(check, args))
    return {**{k: np.shape(v) for k, v in parts.items()}, REF_KEY: {k: np.asarray(v, dtype=np.float64) for k, v in parts.items()}}


def named(check: Check, ctx: KindContext, value: Any, select: Sequence[str] | None = None) -> dict[str, Any]:
    """Name the parts of a (reference) result and keep those in ``select``."""
    names = part_names(check.function, ctx.exercise.returns)
    parts = dict(zip(names, value)) if len(names) > 1 else {names[0]: value}
    if select:
        unknown = [s for s in select if s not in parts]
        if unknown:
            raise ctx.fail(check, "select", f"unknown part(s) {unknown}; the result has {list(names)}: select among them")
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
        if name.startswith("~"):
            continue
        arr = as_array(name, parts[name])
        if arr.shape != shape:
            raise Mismatch(
                f"{name} has shape {arr.shape}, expected {shape}",
                (("expected shape", str(shape)), ("got shape", str(arr.shape))),
            )
        arrays[name] = arr
    return arrays


def _schema(**properties: dict[str, Any]) -> dict[str, Any]:
    """A kind's ``schema``: its keys' JSON Schemas."""
    return {"type": "object", "properties": properties}


LITERAL = {
    "type": ["number", "array", "object"],
    "description": "give the hand value: a number, a list of numbers or a mapping from part names to them",
}
SHAPES = {
    "type": "object", "minProperties": 1,
    "additionalProperties": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    "description": "give a mapping from part names to shapes, e.g. {weights: [4, 6]}",
}
VECTOR = {
    "type": ["array", "object"],
    "description": "give a list of numbers or a generator such as {normal: [5]}",
}
SELECT = {
    "type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string", "minLength": 1},
    "description": "give a list of part names, e.g. [weights]",
}
SHIFT = {
    "type": "number", "minimum": -1e6, "maximum": 1e6,
    "description": "give a number between -1e6 and 1e6 (no thousands separators)",
}
STEP = {"type": "number", "exclusiveMinimum": 0, "maximum": 0.1, "description": "give a step > 0 and at most 0.1, e.g. 1e-6"}
REASON = {"type": "string", "minLength": 1, "description": "give the reason in words, e.g. empty scores"}
WHY = {"type": "string", "minLength": 10, "description": "say in words why the check asks this tolerance"}
VALID = {
    "type": "object", "minProperties": 1,
    "description": "give the arguments of a valid call next to the invalid one, e.g. {scores: [1.0, 0.0]}",
}


class Kind:
    """Base of the built-in kinds: one call, judged by `check_value`.

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


class CompareKind(Kind):
    """Expected value: the reference on the same (seeded) arguments. Keys: ``select``, ``rtol``, ``atol``."""

    name = "compare"
    params = {"select": "optional", "rtol": "optional", "atol": "optional", "why": "optional"}
    schema = _schema(select=SELECT, rtol=TOLERANCE, atol=TOLERANCE, why=WHY)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        return with_floor(check, ctx, args, named(check, ctx, ctx.call_reference(check, args), check.params.get("select")))

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        return compare_parts(check, ctx, expected, got)


class LiteralKind(CompareKind):
    """Expected value: a hand value from the chapter (``expect``), which the reference must reproduce."""

    name = "literal"
    params = {"expect": "required", "rtol": "optional", "atol": "optional", "why": "optional", "companion": "optional"}
    schema = _schema(expect=LITERAL, rtol=TOLERANCE, atol=TOLERANCE, why=WHY, companion=VALID)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        names = part_names(check.function, ctx.exercise.returns)
        expect = check.params["expect"]
        if len(names) == 1:
            return with_floor(check, ctx, args, {names[0]: normalize(expect)})
        if not isinstance(expect, dict) or not expect or set(expect) - set(names):
            raise ctx.fail(check, "expect", f"give a mapping with some of the parts {list(names)}")
        return with_floor(check, ctx, args, {k: normalize(v) for k, v in expect.items()})

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        """Prepare, and refuse a hand value that the reference disagrees with."""
        prepared = super().prepare(check, ctx)
        parts = [_plain(v) for v in named(check, ctx, ctx.call_reference(check, prepared.calls[0].args)).values()]
        verdict = compare_parts(check, ctx, prepared.expected, parts if len(parts) > 1 else parts[0])
        if verdict.status != "passed":
            raise ctx.fail(check, "expect", f"the reference disagrees with this hand value: {verdict.message}")
        companion = check.params.get("companion")
        if companion is None:
            return prepared
        signature = inspect.signature(ctx.reference_function(check))
        try:
            twin = tuple(signature.bind(**companion).args)
        except TypeError as exc:
            raise ctx.fail(check, "companion", f"does not fit {check.function}{signature}: {exc}") from None
        reference = reference_parts(check, ctx, twin)
        return Prepared(
            calls=(*prepared.calls, Call(check.function, twin, check.timeout)),
            expected={**prepared.expected, "~companion": reference},
            shown_call=f"{prepared.shown_call}, and {ctx.shown_call(check, twin)}",
        )

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        """The hand value; with a ``companion``, its result must also meet the basic contract.

        Uniform weights are right at zero scores, and a one-allowed-key row is (0, 1, 0) for any
        code that only counts the allowed keys: such a hand value pays only when the same function
        also meets the contract (`contract_problem`: weights ordered like the scores) on the
        companion call, whose scores differ.
        """
        verdict = self.check_value(check, prepared.expected, results[0].value, ctx)
        companion = prepared.expected.get("~companion")
        if verdict.status != "passed" or companion is None or len(results) < 2:
            return verdict
        return gated(check, ctx, results[1].value, companion, "this hand value") or verdict


def _plain(value: Any) -> Any:
    """A reference value as the JSON data a submission would return."""
    return value.tolist() if isinstance(value, np.ndarray) else value


class ShapeKind(Kind):
    """Only the shapes of the result's parts (``expect``); G14.01, "The central question"."""

    name = "shape"
    params = {"expect": "required"}
    schema = _schema(expect=SHAPES)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        names = part_names(check.function, ctx.exercise.returns)
        expect = check.params["expect"]
        if not isinstance(expect, dict) or set(expect) - set(names):
            raise ctx.fail(check, "expect", f"give a mapping from parts {list(names)} to shapes")
        reference = named(check, ctx, ctx.call_reference(check, args), list(expect))
        for part, shape in expect.items():
            if tuple(shape) != np.shape(reference[part]):
                raise ctx.fail(check, "expect", f"{part} shape {shape} disagrees with the reference's {list(np.shape(reference[part]))}")
        return {k: tuple(v) for k, v in expect.items()}

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        try:
            shaped_parts(check, ctx, got, expected)
        except Mismatch as m:
            return Verdict("failed", m.message, m.details)
        return Verdict("passed", fraction=1.0)


class RaisesKind(Kind):
    """The call must raise ``ValueError``; ``reason`` says why the input is invalid (G14.06)."""

    name = "raises"
    params = {"reason": "required", "valid": "optional"}
    schema = _schema(reason=REASON, valid=VALID)
    expects_raise = True

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        """The invalid call and, with ``valid``, the valid call next to it (which must return).

        Without its valid twin a ValueError check pays a file that raises ValueError on every
        input; with it, the points go only to code that tells the invalid input from a valid one.
        """
        prepared = super().prepare(check, ctx)
        valid = check.params.get("valid")
        if valid is None:
            return prepared
        signature = inspect.signature(ctx.reference_function(check))
        try:
            bound = signature.bind(**valid)
        except TypeError as exc:
            raise ctx.fail(check, "valid", f"does not fit {check.function}{signature}: {exc}") from None
        twin = tuple(bound.args)
        try:
            guarded_call(ctx.reference_function(check), copy.deepcopy(twin))
        except BaseException as exc:  # noqa: BLE001 - instructor data, one line
            raise ctx.fail(check, "valid", f"the reference raised {type(exc).__name__} on these arguments, which "
                           f"should be valid: {exc}") from None
        return Prepared(
            calls=(*prepared.calls, Call(check.function, twin, check.timeout)),
            expected=prepared.expected,
            shown_call=f"{prepared.shown_call}, and the valid {ctx.shown_call(check, twin)}",
        )

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        try:
            guarded_call(ctx.reference_function(check), args)
        except ValueError:
            return None
        except (MemoryError, TimeoutError):
            raise ctx.fail(check, "args", f"the reference needs more than {_mib(REFERENCE_MEMORY)} or "
                           f"{REFERENCE_SECONDS} s on these arguments; make them smaller") from None
        except BaseException as exc:  # noqa: BLE001 - instructor code, one line
            raise ctx.fail(check, "args", f"the reference raised {type(exc).__name__}, not ValueError, on these "
                           f"arguments: {exc}") from None
        raise ctx.fail(check, "args", "the reference does not raise ValueError on these arguments")

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        result = results[0]
        reason = check.params["reason"]
        if result.status == "raised" and result.value_error:
            twin = results[1] if len(results) > 1 else None
            if twin is not None and twin.status == "raised":
                return Verdict(
                    "failed",
                    f"raised ValueError for {reason}, but also {twin.error_type} for the valid input next to it: "
                    "an error on every input does not show that this one was checked",
                    (("valid input raised", f"{twin.error_type}: {twin.message}"),),
                )
            return Verdict("passed", fraction=1.0)
        if result.status == "raised":
            where = f" ({result.where})" if result.where else ""
            return Verdict(
                "failed",
                f"raised {result.error_type} instead of ValueError for {reason}{where}",
                (("got", f"{result.error_type}: {result.message}"),),
            )
        return Verdict(
            "failed",
            f"returned a value instead of raising ValueError for {reason}",
            (("got", format_value(result.value)),),
        )


class RowSumsKind(Kind):
    """Every row of ``weights`` is nonnegative and sums to one (G14.06, "Mask before normalization")."""

    name = "row_sums"
    params = {"atol": "optional", "why": "optional"}
    schema = _schema(atol=TOLERANCE, why=WHY)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        shapes = reference_parts(check, ctx, args)
        if "weights" not in shapes or len(shapes["weights"]) != 2:
            raise ctx.fail(check, "function", "row_sums needs a function whose result has a 'weights' matrix")
        return shapes

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        atol = float(check.params.get("atol", ROW_SUM_ATOL))
        try:
            weights = shaped_parts(check, ctx, got, expected)["weights"]
        except Mismatch as m:
            return Verdict("failed", m.message, m.details)
        sums = weights.sum(axis=1)
        if not np.all(np.isfinite(weights)) or weights.min() < -atol:
            return Verdict("failed", "weights hold a negative or non-finite entry", (("weights", format_value(weights)),))
        worst = int(np.argmax(np.abs(sums - 1.0)))
        if abs(sums[worst] - 1.0) > atol:
            return Verdict(
                "failed",
                f"row {worst} of weights sums to {sums[worst]:.12g}, not 1; asked: within {atol:g} "
                f"({check.params.get('why') or 'float64 sums m weights to 1 within about m * 2.2e-16'})",
                (("row sums", format_value(sums)),),
            )
        return gated(check, ctx, got, expected, "summing to one") or Verdict("passed", fraction=1.0)


class ShiftInvarianceKind(Kind):
    """softmax(s + shift) equals softmax(s) (G14.02, "A numerical example before the general architecture")."""

    name = "shift_invariance"
    params = {"shift": "required", "rtol": "optional", "atol": "optional", "why": "optional"}
    schema = _schema(shift=SHIFT, rtol=TOLERANCE, atol=TOLERANCE, why=WHY)

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        args = ctx.arguments(check)
        shift = float(check.params["shift"])
        if not (args and isinstance(args[0], list) and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in args[0])):
            raise ctx.fail(check, "args", "the first argument must be a list of scores (numbers) to shift")
        shifted = ([x + shift for x in args[0]], *args[1:])
        expected = reference_parts(check, ctx, args)
        # Shifting rounds each score to float64's spacing at |s| + |shift|; the weights of the two
        # calls may differ by that much relative (times a few, for the route's own rounding).
        largest = max((abs(x) for x in args[0]), default=0.0) + abs(shift)
        expected["~rtol"] = max(tolerances(check)[0], 16 * EPS * largest)
        return Prepared(
            calls=(Call(check.function, args, check.timeout), Call(check.function, shifted, check.timeout)),
            expected=expected,
            shown_call=f"{ctx.shown_call(check, args)} and the same scores plus {shift:g}",
        )

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        rtol, atol = tolerances(check)
        rtol = float(prepared.expected.get("~rtol", rtol))
        why = check.params.get("why") or (
            "the shift itself rounds each score to float64's spacing at |score| + |shift|")
        try:
            before = shaped_parts(check, ctx, results[0].value, prepared.expected)
            after = shaped_parts(check, ctx, results[1].value, prepared.expected)
            for name in before:
                compare(f"{name} after the shift", before[name], after[name].tolist(), rtol, atol, why=why)
        except Mismatch as m:
            return Verdict("failed", "adding the same constant to every score changed the weights: " + m.message, m.details)
        for result in results:  # the property holds: it pays only if the result meets the contract
            failed = gated(check, ctx, result.value, prepared.expected, "shift invariance")
            if failed is not None:
                return failed
        return Verdict("passed", fraction=1.0)


class CausalNoninterferenceKind(Kind):
    """Changing the last key and value leaves earlier causal rows unchanged (G14.06, "Mask before normalization")."""

    name = "causal_noninterference"
    params = {"atol": "optional", "why": "optional"}
    schema = _schema(atol=TOLERANCE, why=WHY)

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        rng = ctx.rng(check)
        args = ctx.arguments(check, rng)
        q, k, v = (list(map(list, a)) for a in args[:3])
        if len(q) < 2 or len(q) != len(k):
            raise ctx.fail(check, "args", "needs Q and K with the same number (at least 2) of rows")
        k[-1] = (np.asarray(k[-1]) + rng.normal(0.0, 3.0, len(k[-1]))).tolist()
        v[-1] = (np.asarray(v[-1]) + rng.normal(0.0, 3.0, len(v[-1]))).tolist()
        changed = (q, k, v, *args[3:])
        expected = reference_parts(check, ctx, args)
        expected["~ref_changed"] = reference_parts(check, ctx, changed)[REF_KEY]
        # Earlier rows use the same numbers before and after (the changed key's weight is 0); a
        # route whose summation order depends on the data may still differ by m roundings of |V|.
        largest = max((abs(x) for row in (*args[2], *v) for x in row), default=0.0)
        expected["~atol"] = max(float(check.params.get("atol", 1e-12)), 4 * len(k) * EPS * max(largest, 1.0))
        return Prepared(
            calls=(Call(check.function, args, check.timeout), Call(check.function, changed, check.timeout)),
            expected=expected,
            shown_call=f"{ctx.shown_call(check, args)}, then again with the last key and value changed",
        )

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        atol = float(prepared.expected.get("~atol", check.params.get("atol", 1e-12)))
        try:
            before = shaped_parts(check, ctx, results[0].value, prepared.expected)
            after = shaped_parts(check, ctx, results[1].value, prepared.expected)
            for part, a in before.items():
                b = after[part]
                with np.errstate(invalid="ignore"):
                    moved = ~(np.abs(a[:-1] - b[:-1]) <= atol)
                if moved.any():
                    row = int(np.flatnonzero(moved.any(axis=1))[0])
                    raise Mismatch(
                        f"changing only the last key and value changed {part}[{row}]: "
                        f"an earlier position used a future one (asked: unchanged within {atol:.3g}, m roundings "
                        "of the values)",
                        ((f"{part}[{row}] before", format_value(a[row])), (f"{part}[{row}] after", format_value(b[row]))),
                    )
        except Mismatch as m:
            return Verdict("failed", m.message, m.details)
        for result, key in zip(results, (REF_KEY, "~ref_changed")):  # the property holds: does the contract?
            failed = gated(check, ctx, result.value, prepared.expected, "causal noninterference", key)
            if failed is not None:
                return failed
        return Verdict("passed", fraction=1.0)


class SumToZeroKind(Kind):
    """The softmax-backward gradient sums to zero (G14.04, "Differentiate the mixing operation")."""

    name = "sum_to_zero"
    params = {"atol": "optional", "why": "optional"}
    schema = _schema(atol=TOLERANCE, why=WHY)

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        expected = reference_parts(check, ctx, args)
        # sum_k p_k (u_k - mean) cancels terms of size |p_k u_k| and |mean| p_k: float64 leaves
        # about m roundings of their total.
        try:
            p, u = (np.asarray(a, dtype=np.float64) for a in args[:2])
            size = float(np.sum(np.abs(p * u)) + abs(float(p @ u)) * float(np.sum(np.abs(p))))
        except (TypeError, ValueError):
            size = 1.0
        expected["~atol"] = 8 * (len(args[0]) + 1) * EPS * size
        return expected

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        atol = float(check.params.get("atol", 1e-12))
        try:
            (grad,) = shaped_parts(check, ctx, got, expected).values()
        except Mismatch as m:
            return Verdict("failed", m.message, m.details)
        total = float(np.sum(grad))
        scale = 1.0 + float(np.sum(np.abs(grad))) if np.all(np.isfinite(grad)) else 1.0
        allowed = max(atol * scale, float(expected.get("~atol", 0.0)))
        if not np.isfinite(total) or abs(total) > allowed:
            return Verdict(
                "failed", f"the gradient's entries sum to {total:.6g}, not 0; asked: within {allowed:.3g} "
                "(m float64 roundings of the terms that cancel)", (("gradient", format_value(grad)),)
            )
        reference = next(iter(expected.get(REF_KEY, {}).values()), grad)
        problem = contract_problem({"gradient": grad}, {"gradient": reference})
        if problem is not None:
            return Verdict("failed", f"{problem}, so summing to zero earns nothing here: a property pays only for a "
                           "result that meets the basic contract", (("gradient", format_value(grad)),))
        return Verdict("passed", fraction=1.0)


class FiniteDifferenceKind(Kind):
    """softmax_backward(p, u) against d(u . softmax(s))/ds by central differences.

    The spec gives ``scores`` and ``upstream`` (literals or generators)
    instead of ``args``; ``p`` is the reference softmax of the scores and
    ``u`` the upstream sensitivities.
    """

    name = "finite_difference"
    params = {"scores": "required", "upstream": "required", "step": "optional", "rtol": "optional", "atol": "optional"}
    schema = _schema(scores=VECTOR, upstream=VECTOR, step=STEP, rtol=TOLERANCE, atol=TOLERANCE)

    def prepare(self, check: Check, ctx: KindContext) -> Prepared:
        rng = ctx.rng(check)
        for key in ("scores", "upstream"):
            raw = check.params[key]
            n = ctx.generated_size(check, key, raw) or (len(raw) if isinstance(raw, list) else 0)
            if n > MAX_FD_LENGTH:
                raise ctx.fail(check, key, f"{n:,} entries are more than {MAX_FD_LENGTH:,}, the most a finite "
                               "difference takes (it calls softmax twice per entry): make it shorter")
        try:
            scores = np.asarray(ctx.generate(check, "scores", check.params["scores"], rng), dtype=np.float64)
            u = np.asarray(ctx.generate(check, "upstream", check.params["upstream"], rng), dtype=np.float64)
        except (TypeError, ValueError):
            raise ctx.fail(check, "scores", "give 'scores' and 'upstream' as lists of numbers or generators") from None
        if check.args or scores.ndim != 1 or u.shape != scores.shape:
            raise ctx.fail(check, "upstream", "give 'scores' and 'upstream' of one length, and no 'args'")
        if not (np.all(np.isfinite(scores)) and np.all(np.isfinite(u))):
            raise ctx.fail(check, "scores", "'scores' and 'upstream' must hold finite numbers")
        ctx.reference_function(check, "softmax")

        def softmax(values: list[float]) -> Any:
            return ctx.call_reference(check, (values,), "softmax")

        p = np.asarray(softmax(scores.tolist()), dtype=np.float64)
        h = float(check.params.get("step", 1e-6))
        grad = np.empty_like(scores)
        for k in range(scores.size):
            up, down = scores.copy(), scores.copy()
            up[k] += h
            down[k] -= h
            grad[k] = (np.dot(u, softmax(up.tolist())) - np.dot(u, softmax(down.tolist()))) / (2 * h)
        args = (p.tolist(), u.tolist())
        # Error of the central difference of f = u . softmax(s): truncation h^2 / 6 |f^(3)| (at
        # most a few sum|u|) and rounding about 2 eps sum|u| / h; a margin of 8 on both.
        total = float(np.sum(np.abs(u)))
        return Prepared(
            calls=(Call(check.function, args, check.timeout),),
            expected={"gradient": grad, "~atol": 8 * (h * h * total + 2 * EPS * total / h)},
            shown_call=ctx.shown_call(check, args),
        )

    def check_value(self, check: Check, expected: Any, got: Any, ctx: KindContext) -> Verdict:
        rtol = float(check.params.get("rtol", 1e-5))
        atol = max(float(check.params.get("atol", 1e-7)), float(expected.get("~atol", 0.0)))
        why = check.params.get("why") or (
            "a central difference with step h is off by about h^2 |f^(3)| in truncation and eps |f| / h in rounding")
        try:
            compare("gradient", expected["gradient"], got, rtol, atol, why=why)
        except Mismatch as m:
            return Verdict("failed", "disagrees with a finite-difference gradient: " + m.message, m.details)
        return Verdict("passed", fraction=1.0)


class NoMutationKind(Kind):
    """The call leaves the caller's lists exactly as they were.

    The worker compares the JSON text of every argument before and after
    the call (``CallResult.mutated_args``); nothing about the result is
    judged here, only that the function works on copies. Chapter section
    "Independent practice: G14.06 (lab)": the lab's functions are pure.
    """

    name = "no_mutation"
    params: dict[str, str] = {}
    schema = _schema()

    def expected(self, check: Check, ctx: KindContext, args: tuple[Any, ...]) -> Any:
        # The parameter names, for the message; the reference's result, for the contract gate.
        parts = reference_parts(check, ctx, copy.deepcopy(args))  # the arguments must be valid input
        return {"params": list(inspect.signature(ctx.reference_function(check)).parameters), "~parts": parts}

    def judge(self, check: Check, prepared: Prepared, results: Sequence[CallResult], ctx: KindContext) -> Verdict:
        changed = results[0].mutated_args
        if not changed:
            parts = prepared.expected.get("~parts")
            failed = gated(check, ctx, results[0].value, parts, "leaving the arguments unchanged") if parts else None
            return failed or Verdict("passed", fraction=1.0)
        params = prepared.expected["params"]
        names = ", ".join(params[i] if i < len(params) else f"argument {i + 1}" for i in changed)
        return Verdict(
            "failed",
            f"{check.function} changed the caller's {names} in place; work on a copy and leave the arguments unchanged",
            (("changed", names),),
        )


BUILTIN_KINDS = (
    CompareKind(),
    LiteralKind(),
    ShapeKind(),
    RaisesKind(),
    RowSumsKind(),
    ShiftInvarianceKind(),
    CausalNoninterferenceKind(),
    SumToZeroKind(),
    FiniteDifferenceKind(),
    NoMutationKind(),
)


@hookimpl
def grader_check_kinds() -> Sequence[Kind]:
    """Contribute the built-in check kinds."""
    return BUILTIN_KINDS
