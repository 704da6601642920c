"""Build the plugin manager: hook specs, built-in plugins, entry points, ``-p``.

Every built-in feature is a module in ``grader.builtin`` registered from
`BUILTIN_PLUGINS`, through the same hooks a third-party plugin uses.
Third-party plugins load from the ``grader`` entry-point group, or by module
name with ``-p MODULE``; ``-p no:NAME`` blocks a plugin (built-in or not).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import sys
import types
from collections.abc import Iterable
from typing import Any

import pluggy

from grader import hookspecs
from grader.errors import Interrupted, PluginError, UsageError, describe_failure
from grader.markers import hookimpl
from grader.readers.entrypoints import entry_points, load

__all__ = ["BUILTIN_PLUGINS", "ENTRY_POINT_GROUP", "ESSENTIAL", "get_plugin_manager", "hookimpl"]

ENTRY_POINT_GROUP = "grader"

BUILTIN_PLUGINS: tuple[str, ...] = (
    "yaml_spec",
    "reference",
    "checks",
    "submission",
    "dask_cluster",  # its outcomes from a Dask cluster (--dask), when asked for
    "shard_record",  # in a merge, the shards' recorded outcomes (no code runs)
    "sandbox",
    "runner",
    "judge",
    "diagnosis",
    "scoring",
    "manual",
    "policy",
    "lms",
    "staff",
    "similarity",
    "terminal",
    "json_report",
    "gradebook",
    "html_report",
    "timing",
    "csv_gradebook",
    "gradescope",
    "junit",
    "ctrf",
    "github",
    "summary_page",
    "class_insight",  # issue 27: the staff page of the class (--staff)
    "classroom",  # after "github": called before it, so its Classroom notices come before the annotations
)
"""Short names of the built-in plugins, each ``grader.builtin.<name>``."""


ESSENTIAL: tuple[str, ...] = ("runner", "sandbox")
"""Built-ins that ``-p no:NAME`` may not block (pytest's ``essential_plugins``): the runner, the one
answer to ``grader_run_calls``, which chooses its launcher from the configuration, and the sandbox
it runs ``grade`` submissions in. Without them hidden checks would run unsandboxed (or not at
all); ``--insecure`` is the one way to grade without the sandbox. Which runner answers does not
depend on the order of `BUILTIN_PLUGINS`: no other built-in implements ``grader_run_calls``
except as a wrapper."""

UNBLOCKABLE = ESSENTIAL
"""The former name of `ESSENTIAL`."""

ANSWERED: tuple[str, ...] = (
    "grader_load_exercise",
    "grader_load_reference",
    "grader_locate_submissions",
    "grader_run_calls",
    "grader_judge_check",
    "grader_score_exercise",
)
"""Hooks a run needs an answer to: a built-in answering one may be blocked only for a plugin that answers it too
(else ``-p no:judge`` was an internal error with a traceback on every submission)."""


COMMANDS_PACKAGE = "grader.cli.commands"
"""The package whose every module is a built-in subcommand (registered as ``command:<module>``)."""


@functools.cache
def builtin_commands() -> tuple[str, ...]:
    """The modules of `COMMANDS_PACKAGE`, sorted: adding a subcommand is adding a module there.

    The package is found by name, not imported for its contents: the configuration layer names the
    command line's package only as a plugin location, as it names entry points.
    """
    spec = importlib.util.find_spec(COMMANDS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return ()
    return tuple(sorted(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations) if not m.ispkg))


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, which finds a module's hook implementations without `inspect.getattr_static` per name.

    Registering the built-ins asks pluggy about each of some 1,500 module attributes, at about 8 us
    each (a twentieth of ``grader check``'s start, issue 29). A module's attribute is read from its
    ``__dict__`` here, as pluggy's static lookup finds it: a plain function without the ``grader_impl``
    marker, or anything but a function, static, class or bound method, is no implementation;
    everything else is pluggy's to decide.
    """

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if type(plugin) is types.ModuleType:
            value = vars(plugin).get(name, _ABSENT)
            if type(value) is types.FunctionType:
                if getattr(value, "grader_impl", None) is None:
                    return None
            elif value is not _ABSENT and not isinstance(value, (staticmethod, classmethod, types.MethodType)):
                return None
        return super().parse_hookimpl_opts(plugin, name)


_ABSENT = object()


def get_plugin_manager(
    plugins: Iterable[str] = (), load_entrypoints: bool = True, pack: str | None = None
) -> pluggy.PluginManager:
    """Return a fresh plugin manager for one run.

    Parameters
    ----------
    plugins : iterable of str
        ``-p`` values: a module name to import and register, or
        ``no:NAME`` to block the plugin registered as NAME (a built-in's
        short name, an entry point's name, or a module name).
    load_entrypoints : bool
        Whether to load the ``grader`` entry-point group.
    pack : str, optional
        ``--pack``: the course pack (a folder or an installed pack's id)
        whose plugin is registered under the pack's id; without it, the
        one installed pack's (none when there is not exactly one).

    Returns
    -------
    pluggy.PluginManager

    Raises
    ------
    grader.errors.PluginError
        If a ``-p`` module cannot be imported (any failure while it runs,
        `SyntaxError`, `SystemExit` and `KeyboardInterrupt` included, named
        by file and line), or a plugin implements a hook that does not exist
        (a misspelled ``grader_...`` name).
    grader.errors.UsageError
        If ``-p no:NAME`` names the sandbox or the runner (`ESSENTIAL`).
    grader.errors.ConfigError
        If ``pack`` names no pack, or the pack's plugin fails to import.
    """
    pm = _PluginManager("grader")
    pm.add_hookspecs(hookspecs)
    plugins = list(plugins)
    for name in plugins:
        if name.startswith("no:"):
            blocked = name[3:]
            short = blocked.removeprefix("grader.builtin.")
            if short in ESSENTIAL:
                raise UsageError(
                    f"-p {name}: the {short} cannot be blocked; use --insecure to grade without the sandbox"
                )
            pm.set_blocked(blocked)
    for short in BUILTIN_PLUGINS:
        if pm.is_blocked(short):
            continue
        module = importlib.import_module(f"grader.builtin.{short}")
        pm.register(module, name=short)
    for short in builtin_commands():
        if not pm.is_blocked(f"command:{short}"):
            pm.register(importlib.import_module(f"{COMMANDS_PACKAGE}.{short}"), name=f"command:{short}")
    pack_id = _register_pack(pm, pack)
    if load_entrypoints:
        try:
            _load_entry_points(pm)
        except Interrupted:  # the user's Ctrl-C, landed in a plugin's import: the run stops, no plugin blamed
            raise
        except BaseException as exc:  # noqa: BLE001 - a third-party plugin failed to import, even by sys.exit()
            raise PluginError(
                f"a plugin of entry-point group '{ENTRY_POINT_GROUP}' failed to load at "
                f"{describe_failure(exc)}; fix or uninstall it"
            ) from None
    for name in plugins:
        if name.startswith("no:") or pm.is_blocked(name) or pm.get_plugin(name) is not None:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                raise PluginError(
                    f"-p {name}: no module named {exc.name!r}; check the name, or put its folder on PYTHONPATH"
                ) from None
            raise PluginError(f"-p {name}: the plugin failed to import at {describe_failure(exc)}") from None
        except Interrupted:  # the user's Ctrl-C, landed in the plugin's import: the run stops, it is not blamed
            raise
        except BaseException as exc:  # noqa: BLE001 - SyntaxError, SystemExit, KeyboardInterrupt...: one line
            raise PluginError(
                f"-p {name}: the plugin failed to import at {describe_failure(exc)}; fix the plugin"
            ) from None
        pm.register(module, name=name)
        if not pm.get_hookcallers(module):
            print(
                f"grader: warning: -p {name}: the module implements no grader hook (no function marked "
                "@grader.hookimpl named grader_...), so it changes nothing",
                file=sys.stderr,
            )
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin error: {exc}; the hooks are the grader_... functions of grader.hookspecs") from exc
    _check_blocked(pm, [name[3:] for name in plugins if name.startswith("no:")], load_entrypoints, pack_id)
    return pm


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    """Register each plugin of `ENTRY_POINT_GROUP` not blocked or registered under its name yet.

    As `pluggy.PluginManager.load_setuptools_entrypoints` does, from the entry points
    `grader.readers.entrypoints` keeps between runs (no `importlib.metadata` import when nothing installed
    has changed).

    Raises
    ------
    BaseException
        Whatever a plugin's import raises; `get_plugin_manager` names it.
    """
    for name, value, _ in entry_points(ENTRY_POINT_GROUP):
        if pm.get_plugin(name) is not None or pm.is_blocked(name):
            continue
        pm.register(load(value), name=name)


def _check_blocked(pm: pluggy.PluginManager, blocked: list[str], load_entrypoints: bool, pack_id: str = "") -> None:
    """Refuse a block that leaves a hook of `ANSWERED` unanswered; warn about a block naming no plugin.

    Raises
    ------
    grader.errors.UsageError
        If a blocked built-in answered a hook of `ANSWERED` and no plugin
        left answers it (wrappers do not answer).
    """
    if not blocked:  # nothing to check: no second scan of the installed distributions (issue 16)
        return
    known = set(BUILTIN_PLUGINS) | {name for name, plugin in pm.list_name_plugin() if plugin is not None}
    if load_entrypoints:
        known |= {name for name, _, _ in entry_points(ENTRY_POINT_GROUP)}
    try:
        from grader.packs import installed_packs

        known |= set(installed_packs()) | ({pack_id} if pack_id else set())
    except Exception:  # noqa: BLE001 - only for a warning's sake
        pass
    for name in blocked:
        short = name.removeprefix("grader.builtin.")
        if short in BUILTIN_PLUGINS:
            module = importlib.import_module(f"grader.builtin.{short}")
            for hook in ANSWERED:
                if hasattr(module, hook) and not [
                    i for i in getattr(pm.hook, hook).get_hookimpls() if not (i.hookwrapper or i.wrapper)
                ]:
                    raise UsageError(
                        f"-p no:{name}: then no plugin answers {hook} (the {short} plugin did); "
                        f"unblock it, or load one that implements {hook} with -p MODULE"
                    )
        elif name not in known and not _importable(name):
            print(
                f"grader: warning: -p no:{name}: no plugin is named {name!r}, so nothing was blocked (the "
                f"built-ins are {', '.join(BUILTIN_PLUGINS)})",
                file=sys.stderr,
            )


def _importable(name: str) -> bool:
    """Whether ``name``'s top-level module could be imported (a module blocked by its name is not a typo)."""
    try:
        return importlib.util.find_spec(name.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _register_pack(pm: pluggy.PluginManager, option: str | None) -> str:
    """Register the course pack's plugin (its own check kinds) under the pack's id; return that id ("": no pack)."""
    from grader.errors import ConfigError
    from grader.packs import find_pack

    try:
        pack = find_pack(option)
    except ConfigError:
        if option:
            raise
        return ""  # no pack, or several: the commands that grade say so
    if pack.id in BUILTIN_PLUGINS:  # the pack's plugin is registered under its id: it would never load
        raise ConfigError(
            f"{pack.root / 'course.yaml'}: id: {pack.id!r} is the name of a built-in plugin; give the course "
            f"another id, e.g. {pack.id}-pack"
        )
    module = pack.load_plugin()
    if module is not None and not pm.is_blocked(pack.id) and pm.get_plugin(pack.id) is None:
        pm.register(module, name=pack.id)
    return pack.id
