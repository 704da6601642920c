"""Check kinds a plugin contributes, checked before they are trusted: the plugin at fault named.

`contributed_kinds` calls each plugin's ``grader_check_kinds`` on its own, so a hook that raises,
or returns something other than a list of kinds, is named with its plugin (and two kinds of one
name name both plugins). `prepare_checked` runs a kind's ``prepare`` on one check and refuses an
exception or an answer that is not a `grader.models.Prepared`, naming the spec, the check, the
kind and its plugin. Each is one line, exit 3 (`grader.errors.PluginError`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from grader.config.core import Hooks
from grader.errors import GraderError, PluginError, describe_failure

__all__ = ["contributed_kinds", "prepare_checked"]


def _is_kind(kind: Any) -> bool:
    return (
        isinstance(getattr(kind, "name", None), str)
        and bool(kind.name)
        and callable(getattr(kind, "prepare", None))
        and callable(getattr(kind, "judge", None))
    )


def contributed_kinds(pm: Any) -> Iterator[tuple[str, list[Any]]]:
    """Each plugin's check kinds, with the plugin's name, in the hook's calling order.

    Parameters
    ----------
    pm : pluggy.PluginManager
        The run's plugin manager.

    Yields
    ------
    (str, list)
        The plugin's name and the kinds its ``grader_check_kinds`` returned (None: none).

    Raises
    ------
    grader.errors.PluginError
        If a plugin's hook raises, or returns something that is not a list or tuple of kinds.
    """
    hooks = Hooks(pm)
    impls = hooks.implementations("grader_check_kinds")
    if any(impl.hookwrapper or impl.wrapper for impl in impls):  # wrappers change answers: let pluggy call them
        for kinds in hooks.check_kinds():
            yield "a plugin", list(kinds or ())
        return
    for impl in reversed(impls):  # pluggy calls the last registered first
        plugin = impl.plugin_name
        try:
            answer = impl.function()
        except GraderError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plugin's bug, named with the plugin
            raise PluginError(
                f"plugin {plugin}: grader_check_kinds failed: {describe_failure(exc)}; fix the plugin or block it "
                f"with -p no:{plugin}"
            ) from None
        if answer is None:
            continue
        if isinstance(answer, (str, bytes)) or not isinstance(answer, (list, tuple)):
            raise PluginError(
                f"plugin {plugin}: grader_check_kinds returned a {type(answer).__name__}, not a list of check kinds; "
                "return a list of objects with name, params, prepare and judge"
            )
        bad = next((k for k in answer if not _is_kind(k)), None)
        if bad is not None:
            raise PluginError(
                f"plugin {plugin}: grader_check_kinds returned a {type(bad).__name__} that is not a check kind "
                "(a text name, prepare and judge); fix the plugin"
            )
        yield plugin, list(answer)


def prepare_checked(kind: Any, check: Any, context: Any, spec: str) -> Any:
    """``kind.prepare(check, context)``, its failure or wrong answer named (the spec, the check, the kind).

    Raises
    ------
    grader.errors.GraderError
        A `grader.errors.SpecError` the kind raised (the spec is wrong), as it is.
    grader.errors.PluginError
        If ``prepare`` raised anything else, or returned something other than a `grader.models.Prepared`.
    """
    from grader.models import Prepared

    owner = type(kind).__module__
    try:
        prepared = kind.prepare(check, context)
    except GraderError:
        raise
    except Exception as exc:  # noqa: BLE001 - the kind's bug: named, exit 3
        raise PluginError(
            f"{spec}: check '{check.id}': the check kind '{kind.name}' ({owner}) failed to prepare it: "
            f"{describe_failure(exc)}; fix the kind's plugin"
        ) from None
    if not isinstance(prepared, Prepared):
        raise PluginError(
            f"{spec}: check '{check.id}': the check kind '{kind.name}' ({owner}) returned a "
            f"{type(prepared).__name__} from prepare, not a Prepared; fix the kind's plugin"
        )
    return prepared
