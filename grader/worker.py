"""Child-process worker: import one submission, make the requested calls.

Run as a script by the grader's runner, never imported by the grader::

    python -I -B -u worker.py REQUEST.json RESULT_FD

It uses only the standard library and numpy. It reads the request (the
submission's path and a list of calls with plain-data arguments), imports
the submission, calls each function, and writes one frame per event to the
file descriptor RESULT_FD: a 4-byte big-endian length, then UTF-8 JSON.
The first frame reports the import; then one frame per call, in order.

Only data crosses back: return values are converted here to JSON numbers,
booleans and lists (numpy arrays of numeric dtype included); anything else
(objects, generators, strings...) is reported as an unusable return. The
grader validates every frame again, so a submission that tampers with this
script can only lie about its own answers, as it could by returning them.
Each call in the request carries its arguments as JSON text (a list), which
the worker parses twice: once for the call, once as a pristine copy. Each
call frame lists the positions of the arguments the call changed in place
("mutated"): they no longer equal the pristine copy (a NaN, never equal to
itself, is compared by its JSON text).
"""

import json
import os
import resource
import sys

MAX_MESSAGE = 2000
MAX_DEPTH = 8
MAX_ITEMS = 2_000_000


class BadReturn(Exception):
    """The returned value is not plain numeric data."""


def _limits(cpu_seconds):
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft = max(1, int(cpu_seconds))
    resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 2))
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))


def _emit(fd, obj):
    data = json.dumps(obj, allow_nan=True, separators=(",", ":")).encode("utf-8")
    frame = len(data).to_bytes(4, "big") + data
    view = memoryview(frame)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _text(exc):
    try:
        text = str(exc)
    except BaseException:  # a student exception whose __str__ fails
        text = "<message could not be read>"
    return text[:MAX_MESSAGE]


def _where(tb, filename):
    """'attention.py, line N' for the innermost traceback frame in the submission.

    Walks the traceback itself: ``traceback.extract_tb`` would read source
    lines from disk for every frame.
    """
    found = ""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            found = "%s, line %d" % (os.path.basename(filename), tb.tb_lineno)
        tb = tb.tb_next
    return found


def to_data(value, np, depth=0, budget=None):
    """Convert a return value to JSON data, or raise BadReturn."""
    budget = budget if budget is not None else [MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0:
        raise BadReturn("the result is too large")
    if depth > MAX_DEPTH:
        raise BadReturn("the result is nested too deeply")
    if type(value) is bool:
        return value
    if type(value) is int:
        return value
    if type(value) is float:
        return value
    if isinstance(value, (bool, int, float)):  # subclasses: keep only the base value
        for base in (bool, int, float):
            if isinstance(value, base):
                return base(value)
    if np is not None:
        if isinstance(value, np.generic):
            if value.dtype.kind in "biuf":
                return value.item()
            raise BadReturn("the result holds a numpy %s scalar" % value.dtype)
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                raise BadReturn("the result holds a numpy array of dtype %s; return numbers" % value.dtype)
            if value.size > MAX_ITEMS:
                raise BadReturn("the result is too large")
            return np.asarray(value).tolist()
    if type(value) in (list, tuple):
        return [to_data(v, np, depth + 1, budget) for v in value]
    if value is None and depth == 0:
        raise BadReturn("the function returned None (is a return statement missing?); return numbers, lists, "
                        "tuples or numpy arrays")
    raise BadReturn("the result holds a %s; return numbers, lists, tuples or numpy arrays" % type(value).__name__)


def main(argv):
    """Script entry: read the request file, set limits, then `run`."""
    request_path, fd = argv[1], int(argv[2])
    with open(request_path, encoding="utf-8") as fh:
        request = json.load(fh)
    _limits(request["cpu_seconds"])
    run(request, fd)


def _stdin_aside(request):
    """Point stdin at /dev/null; a standby keeps its stdin (its go pipe) aside first, returned here."""
    go_fd = os.dup(0) if request.get("standby") else None  # dup() gives a close-on-exec descriptor
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return go_fd


def _await_go(go_fd):
    """A standby, imported, waits for one byte (its go) before its first call.

    The grader starts a standby while a call may be about to time out: if it
    does, the remaining calls start at once. A standby never told to go is
    killed, or reads end-of-file and leaves.
    """
    try:
        go = os.read(go_fd, 1)
    except OSError:
        go = b""
    if not go:
        os._exit(0)
    os.close(go_fd)


def run(request, fd):
    """Import the submission named in ``request``, make its calls, write frames to ``fd``.

    Also used by the sandbox's zygote, inside an isolated job. A standby
    (``request["standby"]``) imports, then waits for its go on stdin before
    its first call. Never returns.
    """
    go_fd = _stdin_aside(request)
    try:
        import numpy as np  # imported once, before the submission, for conversions
    except ImportError:  # pragma: no cover - numpy is a grader dependency
        np = None

    filename = request["file"]
    import importlib.util

    try:
        spec = importlib.util.spec_from_file_location("attention", filename)
        module = importlib.util.module_from_spec(spec)
        sys.modules["attention"] = module
        spec.loader.exec_module(module)
    except BaseException as exc:  # anything at import: syntax error, exit, crash
        if isinstance(exc, SyntaxError):
            where = os.path.basename(filename) + (", line %s" % exc.lineno if exc.lineno else "")
            message = exc.msg
        else:
            where = _where(exc.__traceback__, filename)
            message = _text(exc)
        _emit(fd, {"event": "import", "ok": False, "type": type(exc).__name__, "message": message, "where": where})
        os._exit(0)
    _emit(fd, {"event": "import", "ok": True})
    if go_fd is not None:
        _await_go(go_fd)

    for call in request["calls"]:
        fn = getattr(module, call["function"], None)
        if not callable(fn):
            _emit(fd, {"event": "call", "status": "not_implemented",
                       "message": "attention.py defines no function %s" % call["function"]})
            continue
        args = json.loads(call["args"])
        pristine = json.loads(call["args"])
        started = _clock()
        try:
            value = fn(*args)
        except NotImplementedError as exc:
            _emit(fd, {"event": "call", "status": "not_implemented", "message": _text(exc)})
            continue
        except BaseException as exc:
            _emit(fd, {
                "event": "call", "status": "raised", "type": type(exc).__name__,
                "value_error": isinstance(exc, ValueError), "message": _text(exc),
                "where": _where(exc.__traceback__, filename), "seconds": _clock() - started,
                "mutated": _mutated(args, pristine),
            })
            continue
        seconds = _clock() - started
        mutated = _mutated(args, pristine)
        try:
            data = to_data(value, np)
            _emit(fd, {"event": "call", "status": "returned", "value": data, "seconds": seconds, "mutated": mutated})
        except BadReturn as exc:
            _emit(fd, {"event": "call", "status": "bad_return", "message": str(exc), "seconds": seconds,
                       "mutated": mutated})
        except BaseException as exc:  # a hostile object raising during conversion
            _emit(fd, {"event": "call", "status": "bad_return",
                       "message": "the result could not be read (%s)" % type(exc).__name__, "seconds": seconds,
                       "mutated": mutated})
    _emit(fd, {"event": "done"})
    os._exit(0)


def _snapshot(arg):
    """The JSON text of one argument, or None if it no longer serializes."""
    try:
        return json.dumps(arg, allow_nan=True, separators=(",", ":"))
    except BaseException:  # the submission put an object, or a cycle, into the list
        return None


def _mutated(args, pristine):
    """Positions of the arguments the call changed in place (lists it was handed)."""
    changed = []
    for i, (a, p) in enumerate(zip(args, pristine)):
        try:
            same = _same(a, p)
        except BaseException:  # an object with a hostile __eq__, a cycle: not the data it was given
            same = False
        if not same:
            changed.append(i)
    return changed


def _same(a, p):
    """Whether ``a`` is still exactly the JSON data ``p``: same types, same values, NaN equal to NaN.

    Flat lists are compared in C (their element types, then their values);
    nested lists one row at a time. 1 and 1.0 differ, as their JSON does.
    """
    if type(a) is not type(p):
        return False
    if type(a) is list:
        if len(a) != len(p):
            return False
        types = list(map(type, p))
        if list(map(type, a)) != types or list in types or dict in types:
            return all(map(_same, a, p))
        return a == p or all(map(_same, a, p))  # numbers of the same types; unequal: maybe only a NaN
    if type(a) is float:
        return a == p or (a != a and p != p)
    if type(a) is dict:
        return _snapshot(a) == _snapshot(p)
    return a == p


def _clock():
    import time

    return time.perf_counter()


if __name__ == "__main__":
    main(sys.argv)
