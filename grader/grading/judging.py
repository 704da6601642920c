"""The rules every check kind shares: how a check is judged when its calls did not return.

Calls that did not return a value are judged here, the same way for every
kind: a stub is "not attempted", a timeout is "timeout", a crash, an
unexpected exception or a result that is not plain numbers is "error". Calls
that returned are judged by the check's kind. What a verdict may say about a
check the student may not see follows `grader.disclosure`: the exception's
type and line only, e.g. ``softmax raised TypeError (attention.py, line 12)``;
a not-implemented result gets a fixed sentence; no detail carries the
exception text. Visible checks keep the student's message.

The built-in ``judge`` plugin answers ``grader_judge_check`` with `judge`;
the diagnosis plugin judges the catalogued mistakes with it too (no plugin
sees a mutant's verdict).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from grader.disclosure import hidden_bad_return, hidden_type, hidden_where, is_public
from grader.execution.explain import explain_error
from grader.execution.memo import BudgetTable, LargeFrame
from grader.models import CallResult, Check, Prepared, Verdict
from grader.stash import Stash, StashKey

if TYPE_CHECKING:
    from grader.collected import Collected
    from grader.config.core import Config

__all__ = ["OutcomeMemo", "VerdictCache", "judge"]


def _where(result: CallResult) -> str:
    return f" ({result.where})" if result.where else ""


def judge(
    check: Check,
    prepared: Prepared,
    results: Sequence[CallResult],
    kind: Any,
    context: Any,
    shown: bool | None = None,
) -> Verdict:
    """Judge one check; see the module docstring.

    Parameters
    ----------
    check : grader.models.Check
    prepared : grader.models.Prepared
    results : sequence of grader.models.CallResult
        One per call of ``prepared``.
    kind : check kind
        Asked when every call returned (or raised, for kinds that expect it).
    context : grader.kinds.KindContext
    shown : bool, optional
        Whether the student may read the check's details (see
        `is_released`); by default, only for a ``visible`` check. When
        False, no text the job sent reaches the message (see the module
        docstring).

    Returns
    -------
    grader.models.Verdict
    """
    fn = check.function
    if shown is None:
        shown = is_public(check)
    for r in results:
        if r.status == "skipped":
            return Verdict("error", f"not run: {r.message}")
    for r in results:
        if r.status == "not_implemented":
            if not shown:
                return Verdict(
                    "not_attempted", f"not attempted: {fn} still raises NotImplementedError or is not defined"
                )
            said = r.message if r.message and r.message != fn else f"{fn} still raises NotImplementedError"
            return Verdict("not_attempted", f"not attempted: {said}")
    for r in results:
        if r.status == "timeout":
            return Verdict("timeout", f"{fn} did not finish: {r.message}")
    for r in results:
        if r.status == "crashed":
            return Verdict("error", f"{fn} crashed: {r.message}")
    for r in results:
        if r.status == "bad_return":
            # "error", not "failed": the code broke the contract (return numbers), and the
            # message names no expected value, so students see it on hidden checks too;
            # but the job wrote r.message, so a hidden check keeps only the worker's own sentences.
            if not shown:
                return Verdict("error", f"{fn} returned something the grader cannot read{hidden_bad_return(r.message)}")
            return Verdict("error", f"{fn} returned something the grader cannot read: {r.message}")
    if not getattr(kind, "expects_raise", False):
        for r in results:
            if r.status == "raised" and not shown:
                return Verdict(
                    "error",
                    f"{fn} raised {hidden_type(r.error_type)}{hidden_where(r)}{explain_error(r.error_type, r.message)}",
                )
            if r.status == "raised":
                return Verdict(
                    "error",
                    f"{fn} raised {r.error_type} on valid input{_where(r)}: {r.message}"
                    f"{explain_error(r.error_type, r.message)}",
                    (("exception", f"{r.error_type}: {r.message}"),),
                )
    verdict: Verdict = kind.judge(check, prepared, results, context)
    return verdict


class VerdictCache(BudgetTable[tuple[int, bool, tuple["bytes | LargeFrame", ...]], tuple[Prepared, Verdict]]):
    """The verdicts given in a run, keyed by check and the exact bytes of its calls' answers.

    A class hands in the same answers again and again (every correct
    submission's shapes, a ``ValueError`` where one is due, the same wrong
    value of a common mistake): an answer judged once need not be judged
    again. `judge` is a function of the check, its prepared calls, kind,
    context, whether it is shown, and the results; and the results of calls
    whose frames are equal byte for byte (`grader.models.CallResult.wire`)
    are equal but for their seconds, which no verdict reads. So a verdict
    from here is the one judging would give, and results stay
    byte-identical. Only answers that came as frames are kept (a timeout,
    a crash or a refused value is judged each time), never for a kind whose
    ``cacheable`` attribute is False. At most `MAX_BYTES` of answers are
    kept as keys; past that, the table starts again (keys with a large frame
    apart: `grader.execution.memo.BudgetTable.LARGE_MAX_BYTES`).

    Thread-safe: the grading threads share one.
    """

    MAX_BYTES = 8 << 20
    """Bytes of answers kept as keys, at most (8 MiB)."""

    @classmethod
    def of(cls, stash: Stash) -> VerdictCache:
        """The run's cache, kept in its stash (made on first use)."""
        cache = stash.get(_VERDICTS, None)
        return cache if cache is not None else stash.setdefault(_VERDICTS, cls())

    def judge(
        self,
        check: Check,
        prepared: Prepared,
        results: Sequence[CallResult],
        kind: Any,
        context: Any,
        shown: bool,
    ) -> Verdict:
        """`judge`'s verdict, from the table when these answers were judged before for this check.

        The table knows a check by its `grader.models.Prepared` (the very
        object, kept with the verdict), so checks of two collections never meet.
        """
        wires = tuple(r.wire or r.large for r in results)
        if not results or not all(wires) or not getattr(kind, "cacheable", True):
            return judge(check, prepared, results, kind, context, shown=shown)
        key = (id(prepared), shown, wires)
        kept = self._kept(key)
        if kept is not None and kept[0] is prepared:
            return kept[1]
        verdict = judge(check, prepared, results, kind, context, shown=shown)
        self._keep(key, sum(map(len, wires)), (prepared, verdict), any(type(w) is LargeFrame for w in wires))
        return verdict


_VERDICTS = StashKey[VerdictCache]()


class OutcomeMemo(BudgetTable[tuple["bytes | LargeFrame", ...], tuple[Any, ...]]):
    """A submission's exercise results, kept under the exact bytes of every answer its job sent.

    Most of a class sends the same answers, byte for byte (every correct submission, a common
    mistake). When only the built-in plugins judge and score (`grader.builtin.judge`,
    ``diagnosis``, ``scoring``) and every check's kind is ``cacheable``, the exercise results are a
    function of those bytes: each verdict is (`VerdictCache`), and so are the diagnosis drawn from
    the answers and the scores drawn from the verdicts. A submission whose every call answered
    with a frame equal to an earlier submission's gets that submission's exercise results (the
    very objects) without a hook call; a timeout, a crash or a refused value (no frame) is judged
    as usual. At most `MAX_BYTES` of answers are kept as keys; past that, the table starts again (keys with a large frame
    apart: `grader.execution.memo.BudgetTable.LARGE_MAX_BYTES`).

    Thread-safe: the grading threads share one.
    """

    MAX_BYTES = 4 << 20
    """Bytes of answers kept as keys, at most (4 MiB)."""

    @classmethod
    def of(cls, config: Config, collected: Collected) -> OutcomeMemo | None:
        """The run's memo for ``collected`` (kept in its stash), or None when it may not be used.

        None when a plugin other than the built-ins judges or scores (its hook is called for every
        submission), or when a check's kind is not ``cacheable``.
        """
        kept = config.stash.get(_OUTCOMES, None)
        if kept is not None and kept[0] is collected:
            return kept[1]
        hooks = config.hooks
        impls = hooks.implementations("grader_judge_check") + hooks.implementations("grader_score_exercise")
        usable = all(getattr(impl.plugin, "__name__", None) in _BUILT_IN_JUDGING for impl in impls) and all(
            getattr(pc.kind, "cacheable", True) for _, items in collected.checks for pc in items
        )
        memo = cls() if usable else None
        config.stash[_OUTCOMES] = (collected, memo)
        return memo

    def get(self, wires: tuple[bytes | LargeFrame, ...]) -> tuple[Any, ...] | None:
        """The exercise results kept for these answers, or None."""
        return self._kept(wires)

    def keep(self, wires: tuple[bytes | LargeFrame, ...], exercises: tuple[Any, ...]) -> None:
        """Keep the exercise results of a submission whose calls answered ``wires``."""
        self._keep(wires, sum(map(len, wires)), exercises, any(type(w) is LargeFrame for w in wires))


_OUTCOMES = StashKey[tuple[Any, "OutcomeMemo | None"]]()

_BUILT_IN_JUDGING = frozenset({"grader.builtin.judge", "grader.builtin.diagnosis", "grader.builtin.scoring"})
"""The modules whose judging and scoring are functions of a submission's answers (`OutcomeMemo`)."""


def answers_of(results: Sequence[CallResult]) -> tuple[bytes | LargeFrame, ...] | None:
    """The frames of every call's answer (`grader.models.CallResult.wire`, or ``large``), or None if a call sent none."""
    wires = tuple(r.wire or r.large for r in results)
    return wires if wires and all(wires) else None
