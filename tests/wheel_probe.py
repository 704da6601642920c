"""Run every function of an unpacked student wheel on the visible checks' calls; list those that match the reference.

Used by tests/harness/test_student_package.py (issue 24: a wheel that holds no solution), run as a script in a
process of its own. argv: the unpacked wheel's folder, its public checks, the reference file, and the
JSON file to write: ``{"hits": [[module.qualname, function, "exercise::check"], ...], "functions": n,
"calls": n, "imported": n}``, one hit per match. A result
made only of 0s and 1s (an indicator, e.g. one allowed key) is no match: many helpers return such.
Every way to act on the world (kill, close, remove, exec, setrlimit, ctypes) is disabled once the
wheel's modules are imported: the functions run with the visible checks' numbers as arguments.
"""

import copy
import ctypes
import importlib
import importlib.util
import inspect
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

folder, bundle, reference, report = (Path(a) for a in sys.argv[1:5])
sys.path.insert(0, str(folder))
spec = importlib.util.spec_from_file_location("probe_reference", reference)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
data = json.loads(bundle.read_text())


def decode(v):
    if isinstance(v, list):
        return [decode(x) for x in v]
    if isinstance(v, dict):
        if "__tuple__" in v:
            return tuple(decode(x) for x in v["__tuple__"])
        if "__ndarray__" in v:
            return np.asarray(v["__ndarray__"])
        return {k: decode(x) for k, x in v.items()}
    return v


calls = []
for ex in data["exercises"]:
    for c in ex["checks"]:
        for call in c["calls"]:
            args = tuple(decode(call["args"]))
            try:
                expected = getattr(ref, call["function"])(*copy.deepcopy(args))
            except Exception:  # noqa: BLE001 - a 'raises' check: nothing to compute
                continue
            try:
                indicator = bool(np.all(np.isin(np.asarray(expected, dtype=np.float64), (0.0, 1.0))))
            except (TypeError, ValueError):
                indicator = False
            if not indicator:
                calls.append((f"{ex['id']}::{c['id']}", call["function"], args, expected))


def same(a, b):
    try:
        x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):
        x = y = None
    if x is not None and y is not None:
        return x.shape == y.shape and x.size > 0 and bool(np.allclose(x, y, rtol=1e-6, atol=1e-9, equal_nan=True))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b) and a:
        return all(same(p, q) for p, q in zip(a, b))
    return False


alarm = signal.alarm
imported = []
for path in sorted(p for p in folder.rglob("*.py") if p.name != "__main__.py" and "dist-info" not in str(p)):
    name = ".".join(path.relative_to(folder).with_suffix("").parts).removesuffix(".__init__")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imported.append((name, importlib.import_module(name)))
    except BaseException as exc:  # noqa: BLE001
        print(f"probe: cannot import {name}: {exc!r}", file=sys.stderr)


def too_long(*_a):
    raise TimeoutError("the probe's 2 s per call")


signal.signal(signal.SIGALRM, too_long)
# Nothing the probe calls may act on the world: these are disabled once the wheel's modules are imported.
# The temporary folder is found first: tempfile tests a candidate by writing a file and removing it, and
# with unlink refused it would try again at every call, leaving a file in /tmp, /var/tmp and here each time.
tempfile.gettempdir()
originals = []


def refuse(*_a, **_k):
    raise PermissionError("disabled by the probe")


for mod, names in (
    (
        os,
        "kill killpg close closerange dup dup2 fork forkpty execv execve execvp execvpe _exit setsid setpgid "
        "remove unlink rmdir removedirs rename renames replace chdir chroot setuid setgid setresuid setresgid "
        "unshare truncate ftruncate chmod chown fchmod fchown link symlink mkfifo mknod putenv unsetenv "
        "system popen posix_spawn posix_spawnp waitpid wait wait4 sched_setaffinity pidfd_open",
    ),
    (shutil, "rmtree move copyfile copy copy2 copytree"),
    (subprocess, "Popen run call check_call check_output"),
    (resource, "setrlimit prlimit"),
    (signal, "signal pthread_kill setitimer pthread_sigmask sigwait"),
):
    for name in names.split():
        if hasattr(mod, name):
            originals.append(getattr(mod, name))
            setattr(mod, name, refuse)

ctypes.CDLL = refuse  # type: ignore[assignment]
disabled = {id(v) for v in originals}
for module in list(sys.modules.values()):  # names bound before (from os import kill; libc = ctypes.CDLL(...))
    for key, value in list(vars(module).items() if hasattr(module, "__dict__") else ()):
        if id(value) in disabled:
            setattr(module, key, refuse)
        elif type(value).__name__ in ("CDLL", "PyDLL", "LibraryLoader", "_FuncPtr"):
            setattr(module, key, None)

hits, seen = [], set()
for name, module in imported:
    assert str(folder) in str(getattr(module, "__file__", "")), (name, module.__file__)
    found = []
    for value in vars(module).values():
        if inspect.isfunction(value) and value.__module__ == name:
            found.append((value.__qualname__, value))
        elif inspect.isclass(value) and value.__module__ == name:
            for attr, member in vars(value).items():
                member = getattr(member, "__func__", member)
                if inspect.isfunction(member):
                    found.append((f"{value.__qualname__}.{attr}", member))
    for qual, fn in found:
        if (name, qual) in seen:
            continue
        seen.add((name, qual))
        for check, function, args, expected in calls:
            try:
                inspect.signature(fn).bind(*args)
            except (TypeError, ValueError):
                continue
            alarm(2)
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    got = fn(*copy.deepcopy(args))
            except BaseException:  # noqa: BLE001 - anything it raises (the alarm included) is no match
                got = None
            finally:
                alarm(0)
            if got is not None and same(got, expected):
                hits.append([f"{name}.{qual}", function, check])
report.write_text(json.dumps({"hits": hits, "functions": len(seen), "calls": len(calls), "imported": len(imported)}))
