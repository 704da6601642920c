"""A third-party plugin, outside the grader package, used by tests/harness/test_plugins.py.

It adds a check kind (``is_probability``), a spec format (``*.json``), a
report writer (a CSV gradebook), an option, a terminal line, and wraps
judging and scoring, all through the public hooks.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from grader import Call, Check, Exercise, Prepared, Verdict, hookimpl
from grader.fileio import write_atomic

EVENTS: list[str] = []


class IsProbability:
    """The returned vector is nonnegative and sums to one (within ``atol``)."""

    name = "is_probability"
    params = {"atol": "optional"}
    # JSON Schema of the kind's own keys; the spec loader names the key and adds the description.
    schema = {
        "type": "object",
        "properties": {
            "atol": {
                "type": "number",
                "minimum": 0,
                "maximum": 0.5,
                "description": "give a tolerance between 0 and 0.5",
            }
        },
    }
    expects_raise = False

    def prepare(self, check: Check, ctx) -> Prepared:  # noqa: ANN001
        args = ctx.arguments(check)
        return Prepared(calls=(Call(check.function, args, check.timeout),), shown_call=ctx.shown_call(check, args))

    def judge(self, check, prepared, results, ctx) -> Verdict:  # noqa: ANN001
        value = results[0].value
        atol = float(check.params.get("atol", 1e-9))
        if isinstance(value, list) and all(isinstance(x, (int, float)) for x in value):
            if min(value) >= 0 and abs(sum(value) - 1.0) <= atol:
                return Verdict("passed", fraction=1.0)
        return Verdict("failed", "not a probability vector")


@hookimpl
def grader_addoption(parser) -> None:  # noqa: ANN001
    parser.add_argument("--csv-name", default="grades.csv", help="file name of the extras CSV gradebook")


@hookimpl
def grader_configure(config) -> None:  # noqa: ANN001
    EVENTS.append(f"configure:{config.command}")


@hookimpl
def grader_unconfigure(config) -> None:  # noqa: ANN001
    EVENTS.append("unconfigure")


@hookimpl
def grader_check_kinds():
    return [IsProbability()]


@hookimpl
def grader_load_exercise(path: str, config) -> Exercise | None:  # noqa: ANN001
    if not path.endswith(".json"):
        return None
    data = json.loads(Path(path).read_text())
    if "checks" not in data:
        return None  # not this plugin's format: the course's public.json sits beside the specs
    checks = tuple(
        Check(
            id=c["id"],
            kind=c["kind"],
            function=c["function"],
            points=float(c["points"]),
            visibility=c.get("visibility", "hidden"),
            hint=c["hint"],
            timeout=2.0,
            args=c.get("args", {}),
            params=c.get("params", {}),
            seed=7,
        )
        for c in data["checks"]
    )
    return Exercise(id=data["exercise"], title=data["title"], section=data["section"], path=path, checks=checks)


@hookimpl(wrapper=True)
def grader_judge_check(check, prepared, results, kind, context, config):  # noqa: ANN001
    verdict = yield
    EVENTS.append(f"judged:{check.id}:{verdict.status}")
    return verdict


@hookimpl
def grader_collection_finish(submissions, collected, config) -> None:  # noqa: ANN001
    EVENTS.append(f"collected:{len(submissions)}:{len(collected.exercises)}")


@hookimpl
def grader_grading_ready(config) -> None:  # noqa: ANN001
    EVENTS.append("ready")  # nothing readied in the background here: the checks are prepared, --out not made


@hookimpl
def grader_batch_start(submissions, calls, config) -> None:  # noqa: ANN001
    EVENTS.append(f"batch:{len(submissions)}:{len(calls)}")


@hookimpl
def grader_adjust_result(result, submission, config):  # noqa: ANN001, ANN201
    return None  # leaves every score as it is (tests/harness/test_term.py exercises the built-in manual and policy)


@hookimpl
def grader_submission_time(submission, config):  # noqa: ANN001, ANN201
    return None  # knows no submission time


@hookimpl
def grader_submission_graded(result, config) -> None:  # noqa: ANN001
    EVENTS.append(f"graded:{result.id}:{result.score:g}")


@hookimpl
def grader_write_reports(report, config) -> None:  # noqa: ANN001
    if config.out_dir is None:
        return
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", *[e.id for e in report.exercises], "total"])
    for s in report.submissions:
        writer.writerow([s.id, *[f"{e.score:g}" for e in s.exercises], f"{s.score:g}"])
    write_atomic(config.out_dir / config.option("csv_name"), buf.getvalue())


@hookimpl
def grader_terminal_summary(report, config, write) -> None:  # noqa: ANN001
    write(f"extras: {len(report.submissions)} submission(s) seen")
