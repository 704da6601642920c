"""Code similarity in a process of its own: fingerprint each file within a budget, compare every pair.

Run by ``grader.builtin.similarity`` as ``python -I -B similarity_worker.py``
(a fresh interpreter: it inherits no memory of the grader's). It reads one
JSON request on stdin::

    {"files": [[ID, PATH], ...], "starter": PATH or null, "threshold": SHARE,
     "max_bytes": B, "max_tokens": T, "max_seconds": S}

and writes one JSON answer on stdout::

    {"pairs": [[ID, ID, SHARE], ...], "cut": [[ID, WHY], ...]}

Each file has a budget: its first ``max_bytes`` bytes are read, its first
``max_tokens`` tokens (copydetect's filtered token stream) fingerprinted,
and fingerprinting it may take ``max_seconds`` of this process's CPU time
(a file over it is compared with nothing). Every file cut or left out is
named in ``cut`` with the reason. The comparison is copydetect's (token
fingerprints by winnowing, the starter as boilerplate; the shares its
``compare_files`` gives); a pair is kept when both files share at least
``threshold`` of their tokens (the smaller share). It loads copydetect's
``utils`` module alone (`_copydetect_utils`: the package itself imports
matplotlib, half a second of CPU), numpy and the standard library, never
the grader; it runs no submission's code (it only tokenizes the text).
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
import os
import signal
import sys
import types
from typing import Any

K, WINDOW = 25, 1
"""copydetect's noise threshold (k-gram length, in tokens) and winnowing window."""


class _OverTime(Exception):
    """Raised by the CPU-time alarm when a file's fingerprint takes longer than its budget."""


def _alarm(signum: int, frame: Any) -> None:
    raise _OverTime


def _text(path: str, max_bytes: int) -> tuple[str, int]:
    """The first ``max_bytes`` bytes of ``path`` as text, and the file's size in bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        data = b""
        while len(data) < max_bytes:
            chunk = os.read(fd, max_bytes - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace"), size


@functools.cache
def _copydetect_utils() -> Any:
    """copydetect's ``utils`` module, without running the package's ``__init__`` (which imports matplotlib).

    The package is registered bare (its search path only), so ``utils`` and its relative imports load
    as usual. Only in this process, which imports nothing else of copydetect.
    """
    spec = importlib.util.find_spec("copydetect")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("copydetect is not installed")
    package = types.ModuleType("copydetect")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules["copydetect"] = package
    return importlib.import_module("copydetect.utils")


def fingerprint(path: str, boiler: Any, request: dict[str, Any]) -> tuple[Any, str]:
    """The file's fingerprint within its budget (None if none), and why it was cut ('' if it was not).

    The fingerprint is ``(hashes, index, token count, token coverage)``, as copydetect's
    ``CodeFingerprint`` keeps them.
    """
    utils = _copydetect_utils()
    max_bytes, max_tokens = int(request["max_bytes"]), int(request["max_tokens"])
    why = []
    signal.setitimer(signal.ITIMER_PROF, float(request["max_seconds"]))
    try:
        text, size = _text(path, max_bytes)
        if size > max_bytes:
            why.append(f"{size / (1 << 20):.1f} MiB: only its first {max_bytes >> 10} KiB compared")
        tokens, _ = utils.filter_code(text, path, "python")
        if len(tokens) > max_tokens:
            why.append(f"only its first {max_tokens} of {len(tokens)} tokens compared")
            tokens = tokens[:max_tokens]
        hashes, index = utils.get_document_fingerprints(tokens, K, WINDOW, [] if boiler is None else boiler)
        found = (hashes, index, len(tokens), utils.get_token_coverage(index, K, len(tokens)))
    except _OverTime:
        why.append(f"not compared: fingerprinting took more than {float(request['max_seconds']):g} s of CPU time")
        return None, "; ".join(why)
    except (OSError, ValueError) as exc:
        return None, f"not compared: unreadable ({type(exc).__name__})"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0.0)
    return found, "; ".join(why)


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The pairs over the threshold and the files cut, for one request (see the module's docstring)."""
    import numpy as np

    boiler = None
    starter = request.get("starter")
    if starter and os.path.isfile(starter):
        found, _ = fingerprint(starter, None, request)
        if found is not None:
            boiler = np.array(sorted(found[0]))
    prints: dict[str, Any] = {}
    cut = []
    for sid, path in request["files"]:
        found, why = fingerprint(path, boiler, request)
        if why:
            cut.append([sid, why])
        if found is not None:
            prints[sid] = found
    pairs = []
    threshold = float(request["threshold"])
    for a, b in itertools.combinations(prints, 2):
        share = shared(prints[a], prints[b])
        if share >= threshold:
            pairs.append([a, b, round(share, 3)])
    return {"pairs": pairs, "cut": cut}


def shared(one: Any, other: Any) -> float:
    """The smaller of the two files' shares of tokens in common (copydetect's ``compare_files``)."""
    import numpy as np

    utils = _copydetect_utils()
    idx1, idx2 = utils.find_fingerprint_overlap(one[0], other[0], one[1], other[1])
    slices1, slices2 = utils.get_copied_slices(idx1, K), utils.get_copied_slices(idx2, K)
    if len(slices1[0]) == 0:
        return 0.0
    shares = []
    for slices, (_, _, count, coverage) in ((slices1, one), (slices2, other)):
        shares.append(float(np.sum(slices[1] - slices[0]) / coverage) if count > 0 and coverage else 0.0)
    return min(shares)


def main() -> None:
    """Script entry: one request on stdin, one answer on stdout."""
    try:
        os.nice(10)  # beside the jobs, never ahead of the grader
    except OSError:
        pass
    signal.signal(signal.SIGPROF, _alarm)
    request = json.loads(sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(answer(request), allow_nan=False))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
