"""``grader audit``: prove that the checks catch the catalogued mistakes.

Every entry of the catalogue (``--mutants``, see `grader.packs.catalogue`) is
graded like a submission, through the same hooks, on every check (hidden
ones included). The audit prints a kill matrix, one row per mutant and one
column per exercise:

``killed``
    the mutant is tagged for the exercise and lost points on it;
``SURVIVED``
    tagged, but it scored full marks there (the checks miss the mistake);
``lost``
    not tagged, yet it lost points (allowed; shown so tags stay honest);
``-``
    not tagged and untouched.

and a ``visible`` column: whether the mutant fails at least one visible
check, i.e. whether ``grader check`` (and a student's CI) shows the mistake.

then the checks that caught each mutant, and each correct variant's score.
Then three more tables:

* each *degenerate* mutant (constants, uniform weights, an error on every
  input: ``degenerate: true`` in the catalogue) with its score and its
  figure, the points of the shape checks and ValueError checks it passes;
  it may earn nothing else (no vacuous property points);
* the starter's contract clauses (``contract.yaml`` beside the catalogue,
  `grader.packs.catalogue.load_contract`) with the checks that cover each;
* with diagnosis on, the leave-one-out diagnosis: each mutant graded with
  itself left out of the catalogue, and every name it then gets (a twin
  with the same misconception is right; any other is a misnaming), with
  the precision.

The audit fails (exit 1) if a mutant survives an exercise it is tagged for,
a correct variant loses a point, a mutant passes every visible check, an
entry cannot be imported, a degenerate mutant scores above its figure, a
contract clause has no check (or names one the specs lack), or (with
diagnosis on) a mutant's own report does not name its misconception or the
leave-one-out precision is below 100%.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grader.collected import COLLECTED
from grader.errors import EXIT_CHECKS_FAILED, EXIT_OK, ConfigError
from grader.models import SubmissionResult
from grader.packs.catalogue import Catalogue, Entry, load_catalogue, run_entries

__all__ = ["AuditRow", "audit", "audit_rows", "clause_lines", "degenerate_figure", "format_matrix", "precision_lines"]

FIGURE_KINDS = ("shape", "raises")
"""The check kinds a degenerate file may earn points on: shapes, and ValueError checks (which
pay only with a valid twin that returns)."""


def degenerate_figure(result: SubmissionResult, kinds: dict[tuple[str, str], str]) -> float:
    """The points ``result`` earned on checks of `FIGURE_KINDS`: all a degenerate file may score.

    Parameters
    ----------
    result : grader.models.SubmissionResult
    kinds : dict of (str, str) to str
        Each ``(exercise id, check id)``'s kind.
    """
    return round(sum(c.score for e in result.exercises for c in e.checks if kinds.get((e.id, c.id)) in FIGURE_KINDS), 6)


def clause_lines(path: str, clauses: Sequence[Any], known: Collection[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """The clause x check table and the clauses that fail it.

    Returns
    -------
    (list of str, list of str)
        The table's lines (one per clause: its id, function, number of checks and the checks),
        and one ``FAIL`` line per clause without a check or naming a check the specs lack.
    """
    width = max([len(c.id) for c in clauses] + [len("clause")])
    fwidth = max([len(c.function) for c in clauses] + [len("function")])
    lines = [f"contract clauses of {path}: {len(clauses)}", "", f"{'clause':{width}}  {'function':{fwidth}}  checks"]
    fails = []
    for c in clauses:
        missing = [f"{ex} {cid}" for ex, cid in c.checks if (ex, cid) not in known]
        shown = ", ".join(f"{ex} {cid}" for ex, cid in c.checks) or "NONE"
        lines.append(f"{c.id:{width}}  {c.function:{fwidth}}  {len(c.checks)}: {shown}")
        if not c.checks:
            fails.append(f"FAIL clause {c.id} has no check: code breaking it ({c.text}) keeps every point")
        if missing:
            fails.append(f"FAIL clause {c.id} names checks the specs do not have: {', '.join(missing)}")
    return lines, fails


def precision_lines(
    namings: Sequence[tuple[str, str, str, str]], misconception: dict[str, str]
) -> tuple[list[str], int, int]:
    """The leave-one-out diagnosis lines, and the counts of namings and misnamings."""
    wrong = [n for n in namings if misconception.get(n[3]) != misconception.get(n[0])]
    by_mutant: dict[str, list[str]] = {}
    for mutant, ex, cid, named in namings:
        by_mutant.setdefault(mutant, []).append(f"{ex} {cid} -> {named}")
    lines = ["leave-one-out diagnosis (each mutant graded with itself left out of the catalogue)"]
    for mutant, items in by_mutant.items():
        lines.append(f"  {mutant}: " + "; ".join(items))
    if not by_mutant:
        lines.append("  no mutant is named once left out: no two catalogued mistakes look alike on all the evidence")
    for mutant, ex, cid, named in wrong:
        lines.append(f"FAIL {mutant} left out is misnamed {named} on {ex} {cid}")
    return lines, len(namings), len(wrong)


@dataclass(frozen=True)
class AuditRow:
    """The audit of one catalogue entry.

    Attributes
    ----------
    entry : grader.packs.catalogue.Entry
    result : grader.models.SubmissionResult
        Its grade.
    cells : dict of str to str
        For a mutant, exercise id to ``killed``, ``SURVIVED``, ``lost`` or
        ``-``; empty for a correct variant.
    caught : dict of str to tuple of str
        Exercise id to the ids of the checks it did not pass.
    named : bool or None
        Whether some check of the mutant's report names its own
        misconception; None when diagnosis is off or for a correct variant.
    visible : tuple of str
        For a mutant, the visible checks it did not pass, as
        ``"G14.03 causal-two-positions"``: what ``grader check`` shows a
        student who made this mistake. Empty for a correct variant.
    """

    entry: Entry
    result: SubmissionResult
    cells: dict[str, str]
    caught: dict[str, tuple[str, ...]]
    named: bool | None
    visible: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether this entry passes the audit."""
        if self.result.status != "graded":
            return False
        if self.entry.kind == "correct":
            return self.result.score == self.result.max_score
        return "SURVIVED" not in self.cells.values() and self.named is not False and bool(self.visible)


def audit_rows(
    catalogue: Catalogue,
    results: Mapping[str, SubmissionResult],
    diagnosis: bool,
    visible: Collection[tuple[str, str]] | None = None,
) -> list[AuditRow]:
    """Turn the entries' grades into audit rows (see the module docstring).

    Parameters
    ----------
    catalogue : grader.packs.catalogue.Catalogue
    results : mapping of str to SubmissionResult
        Each entry's grade, by entry name.
    diagnosis : bool
        Whether reports carry diagnoses (then ``named`` is checked).
    visible : collection of (str, str), optional
        The ``(exercise id, check id)`` of every visible check; a mutant
        must fail one of them (``AuditRow.visible``). None: every check
        counts as visible.

    Returns
    -------
    list of AuditRow
        Mutants first, then correct variants, each in catalogue order.
    """
    rows = []
    for entry in (*catalogue.mutants, *catalogue.correct):
        result = results[entry.name]
        caught = {ex.id: tuple(c.id for c in ex.checks if c.score < c.max_score) for ex in result.exercises}
        cells: dict[str, str] = {}
        named = None
        if entry.kind == "mutant":
            for ex in result.exercises:
                lost = ex.score < ex.max_score
                tagged = ex.id in entry.exercises
                cells[ex.id] = ("killed" if lost else "SURVIVED") if tagged else ("lost" if lost else "-")
            if diagnosis:
                named = any(
                    d.misconception == entry.misconception
                    for ex in result.exercises
                    for c in ex.checks
                    for d in c.diagnosis
                )
        seen = (
            tuple(f"{ex} {cid}" for ex, ids in caught.items() for cid in ids if visible is None or (ex, cid) in visible)
            if entry.kind == "mutant"
            else ()
        )
        rows.append(AuditRow(entry, result, cells, {k: v for k, v in caught.items() if v}, named, seen))
    return rows


def format_matrix(rows: Sequence[AuditRow], exercises: Sequence[str]) -> list[str]:
    """The kill matrix and the correct variants' scores, as text lines.

    Parameters
    ----------
    rows : sequence of AuditRow
        From `audit_rows`.
    exercises : sequence of str
        The matrix's columns, in order.

    Returns
    -------
    list of str
        The matrix (one row per mutant, plus a ``named`` column when
        diagnosis is on), the checks that caught each mutant, then one line
        per correct variant with its score and any check it lost.
    """
    mutants = [r for r in rows if r.entry.kind == "mutant"]
    correct = [r for r in rows if r.entry.kind == "correct"]
    width = max([len(r.entry.name) for r in rows] + [len("mutant")])
    show_named = any(r.named is not None for r in mutants)
    head = (
        f"{'mutant':{width}}  "
        + "  ".join(f"{e:8}" for e in exercises)
        + "  visible"
        + ("  named" if show_named else "")
    )
    lines = [head.rstrip()]
    for r in mutants:
        cells = "  ".join(f"{r.cells.get(e, '-'):8}" for e in exercises)
        named = ("  yes" if r.named else "  NO") if show_named else ""
        seen = f"  {'yes' if r.visible else 'NO':7}"
        if r.result.status != "graded":
            cells, seen, named = f"ERROR: {r.result.error}", "", ""
        lines.append(f"{r.entry.name:{width}}  {cells}{seen}{named}".rstrip())
    lines.append("")
    lines.append("caught by (exercise: checks not passed)")
    for r in mutants:
        parts = [f"{ex} {' '.join(ids)}" for ex, ids in r.caught.items()]
        lines.append(f"  {r.entry.name}: " + ("; ".join(parts) if parts else "nothing"))
    lines.append("")
    lines.append(f"{'correct variant':{width}}  score")
    for r in correct:
        score = f"{r.result.score:g}/{r.result.max_score:g}"
        lost = "; ".join(f"{ex} {' '.join(ids)}" for ex, ids in r.caught.items())
        problem = (
            f"ERROR: {r.result.error}" if r.result.status != "graded" else (f"  LOST POINTS: {lost}" if lost else "")
        )
        lines.append(f"{r.entry.name:{width}}  {score}{problem}")
    return lines


def audit(config: Any, write: Callable[[str], None]) -> int:
    """Run ``grader audit`` and print the matrix with ``write(line)``.

    Parameters
    ----------
    config : grader.config.core.Config
        ``--mutants`` names the catalogue folder; ``--specs`` and
        ``--reference`` as for grading; ``--no-diagnosis`` skips the check
        that each mutant's report names its misconception.
    write : callable
        Prints one line.

    Returns
    -------
    int
        0 when every tagged cell is killed, every correct variant scores
        full marks and (with diagnosis) every mutant is named; else 1.

    Raises
    ------
    grader.errors.ConfigError
        If the catalogue is missing or malformed, or tags an exercise the
        specs do not have.
    """
    from grader.grading import session
    from grader.packs import mutants_dir
    from grader.packs.catalogue import load_contract

    folder, _ = mutants_dir(config)
    if folder is None:
        raise ConfigError("no mutant catalogue: the pack has none; pass --mutants DIR")
    catalogue = load_catalogue(folder, config.pack.submission, config.pack.chapter_url)
    contract = load_contract(folder)
    collected = session.collect(config)
    config.stash[COLLECTED] = collected
    exercises = [e.id for e in collected.exercises]
    _check_tags(catalogue, exercises)
    outcomes = run_entries(config, catalogue.entries, list(collected.calls))
    with_diagnosis = config.pluginmanager.get_plugin("diagnosis") is not None and not config.option(
        "no_diagnosis", False
    )
    table = None
    if with_diagnosis:
        table = config.hooks.mistake_table(
            collected=collected,
            catalogue=catalogue,
            outcomes={e.name: outcomes[e.name] for e in catalogue.mutants},
            config=config,
        )
    results = {
        e.name: session.grade_submission(e.submission, collected, config, outcome=outcomes[e.name])
        for e in catalogue.entries
    }
    visible = {
        (ex.id, pc.check.id) for ex, items in collected.checks for pc in items if pc.check.visibility == "visible"
    }
    rows = audit_rows(catalogue, results, with_diagnosis, visible)
    kinds = {(ex.id, c.id): c.kind for ex in collected.exercises for c in ex.checks}
    checks = sum(len(e.checks) for e in collected.exercises)
    write(
        f"audit of {catalogue.path}: {len(catalogue.mutants)} mutants, {len(catalogue.correct)} correct variants; "
        f"{len(exercises)} exercises, {checks} checks"
    )
    write("")
    for line in format_matrix(rows, exercises):
        write(line)
    write("")
    mutants = [r for r in rows if r.entry.kind == "mutant"]
    tagged = sum(len(r.entry.exercises) for r in mutants)
    survived = [(r.entry.name, ex) for r in mutants for ex, cell in r.cells.items() if cell == "SURVIVED"]
    unnamed = [r.entry.name for r in mutants if r.named is False]
    unseen = [r.entry.name for r in mutants if r.result.status == "graded" and not r.visible]
    broken = [r.entry.name for r in rows if r.result.status != "graded"]
    short = [r.entry.name for r in rows if r.entry.kind == "correct" and r.result.score != r.result.max_score]
    ok = all(r.ok for r in rows)
    tail = []
    degenerate = [r for r in mutants if r.entry.degenerate and r.result.status == "graded"]
    if degenerate:
        fine, line = _write_degenerate(degenerate, kinds, write)
        ok = ok and fine
        tail.append(line)
    if contract is not None:
        fine, line = _write_contract(contract, collected, write)
        ok = ok and fine
        tail.append(line)
    if with_diagnosis:
        fine, line = _write_precision(table, catalogue, collected, outcomes, results, write)
        ok = ok and fine
        tail.append(line)
    _write_failures(survived, short, unnamed, unseen, broken, write)
    killed = tagged - len(survived)
    write(
        f"{killed}/{tagged} tagged cells killed; {len(catalogue.correct) - len(short)}/{len(catalogue.correct)} "
        f"correct variants at full marks; {len(mutants) - len(unseen)}/{len(mutants)} mutants fail a visible check"
        + (f"; {len(mutants) - len(unnamed)}/{len(mutants)} mutants named" if with_diagnosis else "")
        + "".join(f"; {part}" for part in tail)
        + (": OK" if ok else ": FAILED")
    )
    return EXIT_OK if ok else EXIT_CHECKS_FAILED


def _check_tags(catalogue: Any, exercises: list[str]) -> None:
    """Refuse a catalogue entry tagged with an exercise the specs do not have (ConfigError)."""
    for index, entry in enumerate(catalogue.entries):
        unknown = [x for x in entry.exercises if x not in exercises]
        if unknown:
            raise ConfigError(
                f"{catalogue.path}: entries[{index}] '{entry.name}'.exercises: unknown exercise(s) {unknown} "
                f"(the specs have {', '.join(exercises)})"
            )


def _write_degenerate(degenerate: list[Any], kinds: dict[Any, str], write: Callable[[str], None]) -> tuple[bool, str]:
    """The degenerate files' scores against their figures; whether all are at it, and the summary's part."""
    write("degenerate file          score    figure (shape + ValueError checks passed)")
    above = 0
    for r in degenerate:
        figure = degenerate_figure(r.result, kinds)
        fine = r.result.score <= figure
        above += not fine
        score = f"{r.result.score:g}/{r.result.max_score:g}"
        write(
            f"{r.entry.name:24} {score:8} {figure:g}" + ("" if fine else "  FAIL: points on other checks are vacuous")
        )
    write("")
    return not above, f"{len(degenerate) - above}/{len(degenerate)} degenerate files at their figure"


def _write_contract(contract: Any, collected: Any, write: Callable[[str], None]) -> tuple[bool, str]:
    """The contract's clauses and the checks covering them; whether none fails, and the summary's part."""
    path, clauses = contract
    known = {(ex.id, c.id) for ex in collected.exercises for c in ex.checks}
    lines, fails = clause_lines(path, clauses, known)
    for line in [*lines, *fails, ""]:
        write(line)
    covered = sum(1 for c in clauses if c.checks and all(k in known for k in c.checks))
    return not fails, f"{covered}/{len(clauses)} contract clauses covered"


def _write_precision(
    table: Any, catalogue: Any, collected: Any, outcomes: Any, results: Any, write: Callable[[str], None]
) -> tuple[bool, str]:
    """The leave-one-out diagnosis namings; whether none is wrong, and the summary's part."""
    statuses = {
        name: {(e.id, c.id): c.status for e in res.exercises for c in e.checks} for name, res in results.items()
    }
    # The table the hook returned (the diagnosis plugin's): the audit needs only its methods.
    namings = table.leave_one_out(catalogue, collected, outcomes, statuses) if table is not None else []
    lines, total, wrong = precision_lines(namings, {e.name: e.misconception for e in catalogue.mutants})
    for line in [*lines, ""]:
        write(line)
    precision = 100.0 if not total else 100.0 * (total - wrong) / total
    return not wrong, f"leave-one-out diagnosis precision {precision:.0f}% ({total} namings, {wrong} misnamed)"


def _write_failures(
    survived: list[tuple[str, str]],
    short: list[str],
    unnamed: list[str],
    unseen: list[str],
    broken: list[str],
    write: Callable[[str], None],
) -> None:
    """One FAIL line per surviving tagged cell, correct variant losing points, unnamed, unseen or broken mutant."""
    for name, ex in survived:
        write(f"FAIL {name} survives {ex}, which it is tagged for: the checks of {ex} do not catch it")
    for name in short:
        write(f"FAIL correct variant {name} loses points")
    for name in unnamed:
        write(f"FAIL {name}: no check of its report names its misconception")
    for name in unseen:
        write(f"FAIL {name} passes every visible check: a student's 'grader check' and CI stay green on it")
    for name in broken:
        write(f"FAIL {name} could not be graded")
