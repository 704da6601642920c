"""Child-process worker: import one submission, then answer the grader's calls, a phase at a time.

Run as a script by the grader's runner, never imported by the grader::

    python -I -B -u worker.py REQUEST.json RESULT_FD

It uses only the standard library and numpy. The request names the submission's file and the
CPU seconds allowed (an rlimit backstop); it holds no call. The worker imports the submission and
writes the import's frame to RESULT_FD (a 4-byte big-endian length, then UTF-8 JSON). It then reads
a *phase* of calls at a time from its stdin (the grader's call pipe, moved aside before the import:
the submission's stdin is /dev/null), with the same length prefix: ``{"calls": [{"function": NAME,
"args": [...]}, ...]}`` as ``marshal`` data (`_phase`; each large float argument apart
after it, as its own marshal); it makes the calls in order, writes one frame per call as soon as
that call is done, and waits for the next phase. End-of-file: the worker leaves. The grader sends the visible calls as one phase
and the hidden calls as the next, once the visible answers are in: so nothing hidden is in the
job's memory at import or during a visible call. A standby worker imports, then waits.

Only data crosses back: return values become JSON numbers, booleans and lists; a numeric numpy
array travels as raw binary (`to_data`); anything else is reported as an unusable return. A
non-finite float outside an array is ``{"$float": "nan"}`` (``"inf"``, ``"-inf"``): the grader
refuses ``NaN`` literals. The grader validates every frame again (``grader/execution/boundary.py``)
and measures durations itself, so a submission that tampers with this script can only lie about
its own answers, as it could by returning them. Each call frame lists the positions of the
arguments the call changed in place ("mutated"): they no longer equal a pristine copy made when
the phase arrived (its marshal, compared in C; where the marshals differ, value by value, types
included, with a NaN still equal to a NaN).

A frame with arrays
-------------------
A frame whose value holds numpy arrays is ``b"\\x00"``, the JSON text's
length (4 bytes, big-endian), the JSON text, then each array's raw bytes in
the order the arrays appear in the JSON. In the JSON an array is
``{"$array": [DTYPE, [n0, n1, ...]]}`` with DTYPE one of ``"<f8"``,
``"<i8"``, ``"<u8"``, ``"|b1"`` (floats of up to 8 bytes become ``<f8``,
signed integers ``<i8``, unsigned ``<u8``, booleans ``|b1``; C order). A
returned rectangle of nested lists (or tuples) of at least `RAW_LIST_ITEMS`
floats, and nothing else, travels so too, as ``<f8`` (``grader/child/doubles.py``).

If the submission closes or replaces the result descriptor, or the call
pipe, the worker exits with `CHANNEL_LOST_EXIT`, so that the grader can say so.
"""

from __future__ import annotations

import gc
import json
import marshal
import os
import resource
import sys
from collections.abc import Sequence
from types import ModuleType, TracebackType
from typing import Any, NoReturn

MAX_MESSAGE = 2000
MAX_DEPTH = 8
MAX_ITEMS = 2_000_000
MAX_CALL_BYTES = 1 << 30
"""A call message longer than this is not the grader's: the call pipe was replaced."""
CHANNEL_LOST_EXIT = 75
"""Exit code when the result descriptor or the call pipe was closed or replaced (as in grader/execution/boundary.py)."""
FLOAT_KEY = "$float"
ARRAY_KEY = "$array"
"""An array's place in a frame's JSON: ``{"$array": [DTYPE, SHAPE]}``, its bytes after the JSON (as in grader/execution/boundary.py)."""
MARSHAL_KEY = "$marshal"
"""An argument's place in a phase's data when it travels apart: ``{"$marshal": NBYTES}``, its marshal after the data (`grader.models.Call.encoded`)."""
_WIRE_DTYPES = {"b": "|b1", "i": "<i8", "u": "<u8", "f": "<f8"}
_READY_DTYPES = {wire: wire for wire in _WIRE_DTYPES.values()}
"""The dtypes (``dtype.str``) whose arrays travel as they are, without a conversion."""
_FLOAT_MAX = 1.7976931348623157e308

LISTED = (
    "abc array base64 bisect calendar cmath collections collections.abc concurrent.futures "
    "concurrent.futures.thread contextlib copy csv dataclasses datetime decimal enum fnmatch fractions "
    "functools glob hashlib heapq io "
    "itertools json linecache logging math numbers operator pathlib pprint queue random re reprlib "
    "secrets statistics string struct textwrap threading time traceback types typing unittest warnings "
    "numpy numpy.linalg numpy.random numpy.fft numpy.ma numpy.polynomial numpy.testing numpy.typing "
    "numpy.lib.stride_tricks"
).split()
"""The modules student code may import (the README lists them)."""

PREIMPORT = (
    LISTED
    + (
        # What listed modules import only when used: datetime.strptime (_strptime), str.encode and
        # open(encoding=...) (encodings.*; np.savez and np.load of an .npz name members in cp437),
        # np.memmap (mmap); and ctypes.util, which the sandbox's zygote imports (landlock, seccomp).
        "_strptime encodings.ascii encodings.latin_1 encodings.cp1252 encodings.cp437 encodings.utf_8_sig "
        "encodings.utf_16 encodings.utf_16_le encodings.utf_16_be encodings.utf_32 encodings.utf_32_le "
        "encodings.utf_32_be encodings.idna encodings.punycode mmap ctypes.util"
    ).split()
)
"""`LISTED`, and what its modules import when used. The servers that fork jobs (the sandbox's
zygote, the fork server of ``check`` and ``--insecure``) and a worker started alone (Windows)
import them once, before any job (`preimport`): after the sandbox's uid drop and Landlock, a
module not imported yet may be unreadable, and in every job `OnlyListed` refuses a
standard-library module not imported yet (``random`` imports ``_random``)."""

IMPORTABLE = frozenset({"numpy"})
"""The packages a submission may import a module of that is not imported yet: numpy, which the
sandbox reads on every machine (its folder is one of Landlock's read-only paths). A module of the
standard library is importable only if a server imported it (`PREIMPORT` and what it imports):
where the interpreter's folders are closed to the job's uid (a 0700 ``/root``) the sandbox can
read no other, so ``logging.handlers`` or ``unittest.mock`` passed ``grader check`` and failed
when graded."""


class OnlyListed:
    """``sys.meta_path``'s first finder while a submission runs: a module not imported yet is
    refused, as an uninstalled one is, unless it belongs to `IMPORTABLE` (numpy).

    The same rule on every machine and in every kind of job: the sandbox cannot read a module
    the zygote did not import where the interpreter's folders are closed to the job's uid (a
    Python under a 0700 ``/root``), while ``grader check`` and ``--insecure`` jobs can read them
    all. Without it, a submission importing ``colorsys`` passed ``grader check`` and scored 0 in
    the sandbox. Modules already imported (``os``, ``sys``) are found in ``sys.modules`` first.
    """

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        """None (the usual finders decide) for a module of `IMPORTABLE`; else refused.

        Raises
        ------
        ModuleNotFoundError
            ``No module named 'NAME'``, the message of a module that is not there (for
            ``importlib.reload``, which passes ``target``: ``spec not found for the module 'NAME'``).
        """
        if name.partition(".")[0] in IMPORTABLE:
            return None
        if target is not None:  # importlib.reload of a module the job has: Python's words when none is found
            raise ModuleNotFoundError(f"spec not found for the module {name!r}", name=name)
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def preimport() -> None:
    """Import `PREIMPORT` (what a Python lacks is skipped), as a server does before its first job."""
    for name in PREIMPORT:
        try:
            __import__(name)
        except ImportError:
            pass


# Bound before the submission is imported: a submission that replaces json.dumps or
# json.loads (or JSONEncoder.encode) changes nothing of what the worker writes and reads.
def _frame_encoder() -> Any:
    """``json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode``, the same text, made with
    json's C encoder built once: ``encode`` builds one per call (a frame is a few small dicts and
    lists, so that was about half of encoding it). Frames hold no cycle (`to_data` makes every
    nested list itself), so no list is tracked for one."""
    make = getattr(json.encoder, "c_make_encoder", None)
    python = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
    if make is None:  # pragma: no cover - CPython has the C encoder
        return python.encode
    encoder = make(None, python.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False)
    join = "".join
    return lambda obj: join(encoder(obj, 0))


_encode = _frame_encoder()
_snapshot_encode = json.JSONEncoder(allow_nan=True, separators=(",", ":")).encode
_marshal = marshal.dumps
_unmarshal = marshal.loads
_gc_isenabled, _gc_disable, _gc_enable, _gc_freeze = gc.isenabled, gc.disable, gc.enable, gc.freeze

JSON = Any
"""JSON data: what `to_data` makes and a call's arguments are (numbers, booleans, strings, lists, dicts, None)."""


class BadReturn(Exception):
    """The returned value is not plain numeric data."""


def _shared_limits(name: str = "limits") -> ModuleType:
    """``grader/child/limits.py`` (what the grader and its children agree on), or another module of
    ``grader/child`` that imports only the standard library, loaded by path.

    The worker runs as a script with ``python -I``: the grader package is
    not on its path, and is never imported here.
    """
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location("_grader_child_" + name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SHARED = _shared_limits()
"""Loaded once, with the worker: a fork server's jobs (``grader/child/forkserver.py``) read no file for it."""
_DOUBLES = _shared_limits("doubles")
"""``grader/child/doubles.py``: returned rectangles of floats as raw doubles; loaded once, so too."""
_RAW_ITEMS = _DOUBLES.RAW_LIST_ITEMS


def _limits(cpu_seconds: float) -> None:
    """The plain child's rlimits: no core dumps, CPU seconds (a backstop), file size."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, _SHARED.cpu_rlimit(cpu_seconds))
    file_bytes = _SHARED.DEFAULT_LIMITS["file_bytes"]
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))


def _finite(value: JSON) -> JSON:
    """``value`` with every non-finite float replaced by its ``{"$float": ...}`` encoding."""
    if type(value) is float:
        if value != value:
            return {FLOAT_KEY: "nan"}
        if value in (float("inf"), float("-inf")):
            return {FLOAT_KEY: "inf" if value > 0 else "-inf"}
        return value
    if type(value) is list:
        return [_finite(v) for v in value]
    if type(value) is dict:
        return {k: _finite(v) for k, v in value.items()}
    return value


def _emit(fd: int, obj: JSON, blobs: Sequence[Any] = ()) -> None:
    """Write one frame: ``obj`` as JSON, then ``blobs`` (the raw bytes of the arrays it names) if any.

    A blob is anything with the buffer protocol (`to_data` appends C-contiguous arrays): its
    bytes go to ``fd`` from where they are (``os.writev``), not copied into one frame first.
    """
    try:
        text = _encode(obj)
    except ValueError:  # a NaN or an infinity somewhere: encode it (rare, so only then)
        text = _encode(_finite(obj))
    data = text.encode("utf-8")
    if not blobs:
        frame = len(data).to_bytes(4, "big") + data
        written = os.write(fd, frame)  # one write, as a rule: a pipe takes a small frame whole
        if written < len(frame):
            _write_all(fd, [memoryview(frame)[written:]])
        return
    views = [memoryview(blob).cast("B") for blob in blobs]
    data += b" " * (-(5 + len(data)) % _ALIGN)  # JSON's own whitespace: the first array starts aligned (`_ALIGN`)
    size = 5 + len(data) + sum(len(v) for v in views)
    head = [size.to_bytes(4, "big"), b"\x00", len(data).to_bytes(4, "big"), data]
    if size < _JOINED_BYTES:  # small arrays: one buffer, one write, as a frame without any
        frame = b"".join(head + views)
        written = os.write(fd, frame)
        if written < len(frame):
            _write_all(fd, [memoryview(frame)[written:]])
        return
    _write_all(fd, [memoryview(b"".join(head)), *views])


def _write_all(fd: int, views: list[memoryview]) -> None:
    """Write every byte of ``views`` (flat byte views), in order, however many a write takes."""
    views = [v for v in views if len(v)]
    while views:
        n = os.writev(fd, views[:_IOV_MAX])
        while n:
            if n >= len(views[0]):
                n -= len(views.pop(0))
            else:
                views[0] = views[0][n:]
                n = 0


_ALIGN = 8
"""A frame with arrays pads its JSON with spaces (which JSON allows after a value) so that its first
array's bytes start at a multiple of 8 bytes from the frame's start, and so every array after
arrays of 8-byte numbers: the grader reads a frame into memory of its own (aligned), so such
arrays are aligned there too, and numpy compares them without first copying them, a block at
a time, into aligned buffers (about a fifth of comparing a 512x512 part)."""
_IOV_MAX = 1024
"""Most buffers one ``writev`` takes (Linux's ``IOV_MAX``)."""
_JOINED_BYTES = 1 << 16
"""A frame with arrays shorter than this is joined into one buffer and written with one ``write``;
a longer one is written from the arrays' own memory (``writev``)."""


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _send(fd: int, identity: tuple[int, int], obj: JSON, blobs: Sequence[Any] = ()) -> None:
    """Write one frame to the grader, or leave if the submission closed or replaced ``fd``."""
    try:
        if _identity(fd) != identity:
            os._exit(CHANNEL_LOST_EXIT)
        _emit(fd, obj, blobs)
    except OSError:  # closed (EBADF), or the grader is gone (EPIPE)
        os._exit(CHANNEL_LOST_EXIT)


def _text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # a student exception whose __str__ fails
        text = "<message could not be read>"
    if type(text) is not str:
        text = "<message could not be read>"
    return text[:MAX_MESSAGE]


def _where(tb: TracebackType | None, filename: str) -> str:
    """'<file>, line N' (e.g. 'attention.py, line 12') for the innermost traceback frame in the submission.

    Walks the traceback itself: ``traceback.extract_tb`` would read source
    lines from disk for every frame.
    """
    found = ""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            found = "%s, line %d" % (os.path.basename(filename), tb.tb_lineno)
        tb = tb.tb_next
    return found


def _digits(n: int) -> str:
    """How many decimal digits ``n`` has, in words (exact up to about 4000 digits)."""
    bits = abs(n).bit_length()
    if bits <= 13000:
        return "%d digits" % len(str(abs(n)))
    return "about %d digits" % int(bits * 0.30103 + 1)


def _number(value: Any) -> JSON:
    """A bool, int or float (or a subclass) as its plain base value; an int must fit a float."""
    for base in (bool, int, float):
        if isinstance(value, base):
            value = base(value)
            break
    if type(value) is int and not -_FLOAT_MAX <= value <= _FLOAT_MAX:
        raise BadReturn("the result holds an integer too large to be a float (%s); return floats" % _digits(value))
    return value


def _numpy_kind(dtype: Any, what: str) -> str | None:
    """Why a numpy value of ``dtype`` cannot be returned, and how to convert it (None: it can)."""
    if dtype.kind in "biu" or (dtype.kind == "f" and dtype.itemsize <= 8):
        return None
    if dtype.kind == "f":
        how = "convert it with float()" if what == "scalar" else "convert it with .astype(float)"
        return "the result holds a numpy %s (longdouble) %s; %s" % (dtype, what, how)
    if dtype.kind == "c":
        held = "array of dtype %s" % dtype if what == "array" else "%s scalar" % dtype
        return "the result holds a numpy %s; return real numbers (for example its .real part)" % held
    if what == "array":
        return "the result holds a numpy array of dtype %s; return numbers" % dtype
    return "the result holds a numpy %s scalar; return numbers" % dtype


def to_data(
    value: Any, np: Any, depth: int = 0, budget: list[int] | None = None, blobs: list[Any] | None = None
) -> JSON:
    """Convert a return value to JSON data, or raise BadReturn.

    With ``blobs`` (a list), a numpy array of one dimension or more becomes
    ``{"$array": [DTYPE, SHAPE]}`` and a flat C-ordered little-endian view or
    copy of it is appended to ``blobs`` (its bytes are what `_emit` writes); without it,
    the array becomes nested lists.
    """
    budget = budget if budget is not None else [MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0:
        raise BadReturn("the result is too large")
    if depth > MAX_DEPTH:
        raise BadReturn("the result is nested too deeply")
    kind = type(value)
    if kind is float or kind is bool:
        return value
    if blobs is not None and np is not None and kind is np.ndarray and value.ndim:
        # The common array result, checked in a few attribute reads: its bytes already as they travel.
        wire = _READY_DTYPES.get(value.dtype.str)
        if wire is not None and value.flags.c_contiguous and value.size <= MAX_ITEMS:
            blobs.append(value.reshape(-1))
            return {ARRAY_KEY: [wire, list(value.shape)]}
    if kind is list or kind is tuple:  # before the checks below: neither exact type passes any of them
        if blobs is not None and (len(value) >= _RAW_ITEMS or (len(value) > 1 and type(value[0]) in _SEQUENCES)):
            raw = _DOUBLES.float_block(value, np, MAX_DEPTH - depth, budget) if np is not None else None
            if raw is not None:  # rectangular floats: their bytes, as an array of theirs would travel
                blobs.append(raw.reshape(-1))
                return {ARRAY_KEY: ["<f8", list(raw.shape)]}
        if depth < MAX_DEPTH and len(value) <= budget[0] and set(map(type, value)) <= _PLAIN_NUMBERS:
            # A row of plain numbers, checked in C: what converting each one gives, unless an int is
            # too large for a float (then element by element, for the same message).
            if int not in set(map(type, value)) or (-_FLOAT_MAX <= min(value) and max(value) <= _FLOAT_MAX):
                budget[0] -= len(value)
                return value if kind is list else list(value)
        return [to_data(v, np, depth + 1, budget, blobs) for v in value]
    if kind is int or isinstance(value, (bool, int, float)):
        return _number(value)
    if np is not None:
        if isinstance(value, np.generic):
            why = _numpy_kind(value.dtype, "scalar")
            if why:
                raise BadReturn(why)
            return _number(value.item())
        if isinstance(value, np.ndarray):
            why = _numpy_kind(value.dtype, "array")
            if why:
                raise BadReturn(why)
            if value.size > MAX_ITEMS:
                raise BadReturn("the result is too large")
            if blobs is None or value.ndim == 0:
                return np.asarray(value).tolist()
            wire = _WIRE_DTYPES[value.dtype.kind]
            array = np.ascontiguousarray(value, dtype=wire)  # the value itself when it is already so
            blobs.append(array.reshape(-1))
            return {ARRAY_KEY: [wire, list(array.shape)]}
    if value is None and depth == 0:
        raise BadReturn(
            "the function returned None (is a return statement missing?); return numbers, lists, tuples or numpy arrays"
        )
    raise BadReturn("the result holds a %s; return numbers, lists, tuples or numpy arrays" % kind.__name__)


_PLAIN_NUMBERS = frozenset({float, int, bool})
_SEQUENCES = (list, tuple)


def main(argv: list[str]) -> NoReturn:
    """Script entry: read the request file, set limits, then `run`."""
    request_path, fd = argv[1], int(argv[2])
    with open(request_path, encoding="utf-8") as fh:
        request = json.load(fh)
    _limits(request["cpu_seconds"])
    preimport()  # what a forked job starts with, so the same modules are there to import
    run(request, fd)


def _stdin_aside() -> int:
    """Keep stdin (the grader's call pipe) aside on a new descriptor; point fd 0 at /dev/null.

    ``os.dup`` gives a close-on-exec descriptor: a program the submission
    starts does not get the call pipe.
    """
    call_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return call_fd


def _read_exactly(fd: int, n: int) -> bytes | bytearray | None:
    if n >= _LARGE_MESSAGE_BYTES:  # a phase with large arguments: read in place, not chunk by chunk and joined
        buffer = bytearray(n)
        view = memoryview(buffer)
        done = 0
        while done < n:
            got = os.readv(fd, [view[done:]])
            if not got:
                return None
            done += got
        view.release()
        return buffer
    chunks = []
    while n > 0:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


_LARGE_MESSAGE_BYTES = 1 << 18
"""A call message at least this long (a phase with large arguments) is read straight into one buffer."""


def _next_call(call_fd: int) -> bytes | bytearray:
    """The next call message's bytes; leaves at end-of-file (the grader needs nothing more)."""
    try:
        header = os.read(call_fd, 4)
        if not header:
            os._exit(0)
        if len(header) < 4:
            header += _read_exactly(call_fd, 4 - len(header)) or b""
        size = int.from_bytes(header, "big")
        if len(header) < 4 or size > MAX_CALL_BYTES:
            os._exit(CHANNEL_LOST_EXIT)
        data = _read_exactly(call_fd, size)
    except OSError:  # the submission closed the call pipe
        os._exit(CHANNEL_LOST_EXIT)
    if data is None:
        os._exit(CHANNEL_LOST_EXIT)
    return data


def run(request: dict[str, Any], fd: int) -> NoReturn:
    """Import the submission named in ``request``, then answer calls from stdin, writing frames to ``fd``.

    Also used by the sandbox's zygote, inside an isolated job. ``request``
    holds ``file`` (``cpu_seconds``, used by `main`; ``source`` and ``module``: `jobsetup`); calls arrive on
    stdin a phase at a time (``{"calls": [...]}``), each call answered with
    its own frame as soon as it is done, the phase's last answer written
    before the next phase is read. Never returns.
    """
    call_fd = _stdin_aside()
    identity = _identity(fd)
    np: Any
    try:
        import numpy as np  # imported once, before the submission, for conversions
    except ImportError:  # pragma: no cover - numpy is a grader dependency
        np = None

    filename = request["file"]
    import importlib.util

    try:
        module = request.get("module")  # made before the fork (``jobsetup.prepare_module``), or here
        if module is None or module.__file__ != filename:
            module_name = os.path.splitext(os.path.basename(filename))[0]  # the course pack's module name
            spec = importlib.util.spec_from_file_location(module_name, filename)
            assert spec is not None and spec.loader is not None  # a path ending in .py always has both
            module = importlib.util.module_from_spec(spec)
        sys.modules[module.__name__] = module
        sys.meta_path.insert(0, OnlyListed)
        if (source := request.get("source")) is None:  # else the bytes a sandbox's job wrote there itself
            with open(filename, "rb") as fh:
                source = fh.read()
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)  # noqa: S102 - as exec_module does
    except BaseException as exc:  # anything at import: syntax error, exit, crash
        if isinstance(exc, SyntaxError):
            where = os.path.basename(filename) + (", line %s" % exc.lineno if exc.lineno else "")
            why = exc.msg[:MAX_MESSAGE] if type(exc.msg) is str else ""
        else:
            where = _where(exc.__traceback__, filename)
            why = _text(exc)
        _send(
            fd, identity, {"event": "import", "ok": False, "type": type(exc).__name__, "message": why, "where": where}
        )
        os._exit(0)
    _send(fd, identity, {"event": "import", "ok": True})
    del request, source

    while True:
        message = _next_call(call_fd)
        collecting = _gc_isenabled()
        _gc_disable()  # the lists made here hold no cycle: no collection walks them while they are made
        try:
            calls, blob = _phase(message)
            work = _work(calls, blob)
        except (ValueError, KeyError, TypeError, AttributeError, EOFError):  # not the grader's: the pipe was replaced
            os._exit(CHANNEL_LOST_EXIT)
        if blob is not None:
            _gc_freeze()  # the large arguments' lists: no collection during the calls walks them either
        if collecting:
            _gc_enable()
        del message, calls, blob
        # The phase's arguments are freed when the next phase arrives (`work` is bound again), or
        # never: a job whose last phase is answered is ended, and freeing large lists costs time.
        for name, args, clean in work:
            blobs: list[Any] = []
            frame = _answer(module, name, args, clean, np, filename, blobs)
            _send(fd, identity, frame, blobs)
            del frame, blobs


def _phase(message: bytes | bytearray) -> tuple[list[Any], memoryview | None]:
    """A phase's calls (``[{"function": ..., "args": [...]}, ...]``) and the bytes of the arguments
    that travel apart after them (None: none), from its message (`grader.models.phase_wire`:
    ``b"\\x01"``, the marshalled data's length, the data, each such argument's marshal).

    Raises ValueError, KeyError, TypeError or EOFError when the message is not the grader's.
    """
    if message[:1] != b"\x01":
        raise ValueError
    size = int.from_bytes(message[1:5], "big")
    if len(message) < 5 + size:
        raise ValueError
    with memoryview(message) as view:
        calls = _unmarshal(view[5 : 5 + size])["calls"]
    if type(calls) is not list:
        raise TypeError
    blob = memoryview(message)[5 + size :] if len(message) > 5 + size else None
    return calls, blob


def _work(calls: list[Any], blob: memoryview | None) -> list[tuple[Any, Any, Any]]:
    """Each call of a phase as ``(function, args, pristine copy of the args)``, the arguments that
    travel apart (`_unpack`) made from their bytes.

    Raises ValueError, KeyError, TypeError or AttributeError when the phase is not the grader's.
    """
    if blob is None:  # each call's argument list marshalled whole: one C call to make, one to check (`_mutated`)
        if any(type(c["args"]) is not list for c in calls):
            raise TypeError
        return [(c["function"], c["args"], _Marshalled(c["args"])) for c in calls]
    work = []
    offset = [0]
    for c in calls:
        unpacked = [_unpack(a, blob, offset) for a in c["args"]]
        args = [value for value, _ in unpacked]
        work.append((c["function"], args, [kept or _Marshalled(v) for v, kept in unpacked]))
    if offset[0] != len(blob):
        raise ValueError
    return work


def _unpack(arg: JSON, blob: memoryview, offset: list[int]) -> tuple[JSON, _Marshalled | None]:
    """An argument of a phase with arguments apart, and its pristine copy when it came apart (None:
    it did not): ``{"$marshal": NBYTES}`` is the list those bytes of ``blob`` hold (`grader.models.Call.encoded`),
    and they are its pristine copy as they are: nothing is copied or marshalled before the call."""
    if type(arg) is not dict or list(arg) != [MARSHAL_KEY]:
        return arg, None
    size = arg[MARSHAL_KEY]
    if type(size) is not int or size < 0 or offset[0] + size > len(blob):
        raise ValueError
    kept = _Marshalled.made(blob[offset[0] : offset[0] + size])
    offset[0] += size
    value = _unmarshal(kept.data)
    if type(value) is not list:
        raise TypeError
    return value, kept


class _Marshalled:
    """The pristine copy of an argument (or of a call's whole argument list) as its marshal (version 2), made and compared in C.

    Marshal writes the exact built-in types only (a float subclass, a list subclass or a numpy
    float cannot be written; a tuple, an int or a bool is written otherwise than a list or a
    float), values bit for bit, and no reference between objects (version 2), and it calls no
    code of the objects it writes. So an argument whose marshal is still its pristine one holds
    the same data of the same exact types: unchanged. When they differ (or the argument no
    longer marshals), `_same` decides against the pristine copy, as before: a NaN is still NaN,
    -0.0 equals 0.0, shared or interned strings count for nothing. The marshal is made here, or
    is the bytes an argument that travelled apart came as (`_unpack`: a view of the phase's
    message, compared with ``startswith``, a ``memcmp``).
    """

    __slots__ = ("data",)

    data: bytes | memoryview

    def __init__(self, value: JSON) -> None:
        self.data = _marshal(value, 2)

    @classmethod
    def made(cls, data: bytes | memoryview) -> _Marshalled:
        """The pristine copy whose marshal is ``data`` (already made: an argument that travelled apart)."""
        kept = cls.__new__(cls)
        kept.data = data
        return kept

    def same(self, value: Any) -> bool:
        """Whether ``value`` is still the data marshalled here (`_same`)."""
        try:
            now = _marshal(value, 2)
            if len(now) == len(self.data) and now.startswith(self.data):
                return True
        except BaseException:  # an object marshal cannot write (a subclass, a cycle too deep): decided below
            pass
        return _same(value, self.pristine())

    def pristine(self) -> JSON:
        """A fresh copy of the argument as it came."""
        return _unmarshal(self.data)


def _copy(value: JSON) -> JSON:
    """A pristine copy of JSON data (what parsing the message again gives, at the cost of list copies).

    Numbers, strings, booleans and None are immutable: a list of them is copied by slicing.
    """
    kind = type(value)
    if kind is list:
        if set(map(type, value)) <= _SCALARS:
            return value[:]
        return [_copy(v) for v in value]
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    return value


_SCALARS = frozenset({float, int, bool, str, type(None)})


def _answer(
    module: ModuleType,
    name: Any,
    args: JSON,
    pristine: JSON,
    np: Any,
    filename: str,
    blobs: list[Any] | None = None,
) -> dict[str, JSON]:
    """Make one call; return its frame (the bytes of the arrays it names appended to ``blobs``)."""
    fn = getattr(module, name, None) if type(name) is str else None
    if not callable(fn):
        return {
            "event": "call",
            "status": "not_implemented",
            "message": "%s defines no function %s" % (os.path.basename(filename), name),
        }
    try:
        value = fn(*args)
    except NotImplementedError as exc:
        return {"event": "call", "status": "not_implemented", "message": _text(exc)}
    except BaseException as exc:
        return {
            "event": "call",
            "status": "raised",
            "type": type(exc).__name__,
            "value_error": isinstance(exc, ValueError),
            "message": _text(exc),
            "where": _where(exc.__traceback__, filename),
            "mutated": _mutated(args, pristine),
        }
    mutated = _mutated(args, pristine)
    try:
        return {"event": "call", "status": "returned", "value": to_data(value, np, blobs=blobs), "mutated": mutated}
    except BadReturn as exc:
        if blobs:
            del blobs[:]
        return {"event": "call", "status": "bad_return", "message": str(exc), "mutated": mutated}
    except BaseException as exc:  # a hostile object raising during conversion
        if blobs:
            del blobs[:]
        return {
            "event": "call",
            "status": "bad_return",
            "mutated": mutated,
            "message": "the result holds a %s that could not be read (converting it raised %s)"
            % (type(value).__name__, type(exc).__name__),
        }


def _snapshot(arg: JSON) -> str | None:
    """The JSON text of one argument, or None if it no longer serializes."""
    try:
        return _snapshot_encode(arg)
    except BaseException:  # the submission put an object, or a cycle, into the list
        return None


def _mutated(args: list[JSON], pristine: list[JSON] | _Marshalled) -> list[int]:
    """Positions of the arguments the call changed in place (lists it was handed), against a copy of
    each, or (`_work`) the argument list's marshal: if it still marshals so, none changed."""
    if type(pristine) is _Marshalled:
        try:
            now = _marshal(args, 2)
            if len(now) == len(pristine.data) and now.startswith(pristine.data):
                return []
        except BaseException:  # an object marshal cannot write: decided argument by argument below
            pass
    copies = pristine.pristine() if isinstance(pristine, _Marshalled) else pristine
    changed = []
    for i, (a, p) in enumerate(zip(args, copies)):
        try:
            same = _same(a, p)
        except BaseException:  # an object with a hostile __eq__, a cycle: not the data it was given
            same = False
        if not same:
            changed.append(i)
    return changed


def _same(a: JSON, p: JSON) -> bool:
    """Whether ``a`` is still exactly the JSON data ``p``: same types, same values, NaN equal to NaN.

    Flat lists are compared in C (their element types, then their values);
    nested lists one row at a time. 1 and 1.0 differ, as their JSON does.
    """
    if type(p) is _Marshalled:
        return p.same(a)
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
    return bool(a == p)  # int, str, bool or None (the same type): == is already a bool


if __name__ == "__main__":
    main(sys.argv)
