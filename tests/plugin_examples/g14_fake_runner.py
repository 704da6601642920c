"""A plugin that replaces the runner, the locator, the reference loader and
the scorer, to show each built-in is overridable (tests/harness/test_plugins.py); it
also sees each float64 error bound asked for."""

from __future__ import annotations

from grader import CallResult, ExerciseResult, RunOutcome, Submission, hookimpl

SEEN: dict[str, object] = {}


@hookimpl
def grader_locate_submissions(path: str, config):  # noqa: ANN001
    if not path.startswith("fake:"):
        return None
    return [Submission(id=path[5:], path=path, file="/nonexistent/attention.py", sha256="0" * 64)]


@hookimpl
def grader_cached_result(submission, key, config):  # noqa: ANN001
    SEEN.setdefault("keys", []).append((submission.id, key))
    return None


@hookimpl
def grader_run_calls(submission, calls, config) -> RunOutcome:  # noqa: ANN001
    SEEN["calls"] = len(calls)
    return RunOutcome(tuple(CallResult("not_implemented", message="fake runner") for _ in calls))


@hookimpl
def grader_load_reference(path: str, config):  # noqa: ANN001
    from grader.builtin.reference import load_reference

    SEEN["reference"] = path
    return load_reference(path)


@hookimpl
def grader_float64_error(function: str, args, parts):  # noqa: ANN001
    # No error analysis of its own (it answers None): the pack's, or the measured one, applies.
    SEEN.setdefault("error_bounds", set()).add(function)


@hookimpl(wrapper=True)
def grader_score_exercise(exercise, verdicts, config):  # noqa: ANN001
    result: ExerciseResult = yield
    SEEN.setdefault("scored", []).append(exercise.id)
    return result


@hookimpl(wrapper=True)
def grader_mistake_table(collected, catalogue, outcomes, config):  # noqa: ANN001
    table = yield
    SEEN["mistake_table"] = (len(catalogue.mutants), None if table is None else dict(table.rows))
    return table


@hookimpl
def grader_doctor(write, config):  # noqa: ANN001
    write("fake: no sandbox here; every call is 'not implemented'")
    return 0
