"""The context a check kind is given (`KindContext`): the exercise, the reference, seeded argument
generators and a guarded reference call, with the limits they keep to."""

from __future__ import annotations

import inspect
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grader.compare import (
    format_value,
    tolerance_limit,
)
from grader.errors import SpecError
from grader.models import Check, Exercise

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
