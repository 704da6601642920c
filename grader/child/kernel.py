"""libc through ctypes, for the sandbox child: the raw calls and constants every layer shares.

Python 3.11 has no ``os.unshare``, ``mount``, ``setns`` or ``prctl``; they
are called here through libc. Part of the sandbox child (``grader/child``),
loaded by path by the zygote (see the package's docstring): it imports only
the standard library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import sys
from typing import Any


def _libc_name() -> str | None:
    """The C library's name for ``ctypes.CDLL``: glibc's soname on Linux, without `ctypes.util.find_library`.

    ``find_library("c")`` runs ``ldconfig -p`` in a subprocess (a few milliseconds of every server's
    start, on the way to ``grader check``'s first job); the process has glibc loaded already, under
    that name. Elsewhere (musl, macOS), what ``find_library`` finds, or the process's own symbols.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True)
            return "libc.so.6"
        except OSError:
            pass
    return ctypes.util.find_library("c") or None


_LIBC = _libc_name()
libc = ctypes.CDLL(_LIBC, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWCGROUP = 0x02000000

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 16384, 1 << 18
MNT_DETACH = 2


_pylibc = ctypes.PyDLL(_LIBC, use_errno=True)
"""libc called with the GIL held (``fork`` must not release it: the child continues holding it)."""
_pylibc.fork.restype = ctypes.c_int
_pylibc.fork.argtypes = ()


def bare_fork() -> int:
    """libc ``fork()`` without Python's fork handling: the child's pid in the parent, 0 in the child.

    ``os.fork`` runs the interpreter's own before- and after-fork work
    (locks re-made, other threads' states dropped, and every
    ``os.register_at_fork`` hook: ``threading``, ``logging``,
    ``concurrent.futures``, ``random``); in a job forked from the zygote
    that work cost about 0.7 ms of CPU and 210 copy-on-write faults, two
    thirds of what a bare fork and exit cost. None of it is needed where
    the caller is the process's only thread: no lock can be held by another
    thread, no other thread state exists. The caller checks that (see
    ``jobsetup.fork_retrying``) and reseeds ``random`` before the fork (`fork_cheaply`).

    Raises
    ------
    OSError
        If ``fork`` fails (errno as set: EAGAIN, ENOMEM).
    """
    return check(_pylibc.fork(), "fork")


def fork_cheaply() -> int:
    """Fork, the cheap way (`bare_fork`) where this process has no other thread (Linux); else ``os.fork``.

    The servers that fork jobs (the sandbox's zygote, ``--insecure``'s fork
    server) have no other thread: the interpreter's after-fork work is
    skipped. The one hook whose effect a job can see is done here, before
    the fork, in this process: ``random`` is reseeded from the system's
    entropy, and so is ``numpy.random``'s global generator (`_reseed_numpy`,
    which ``os.fork`` never did), so that no two jobs share a random sequence.
    The job inherits generators seeded for it alone (the next fork reseeds
    them again first). Reseeding in the job itself cost it about 0.6 ms of
    CPU (numpy's seeding code: pages copied from this process's); here it
    costs about 40 pages copied (shared with the live jobs), 0.1 ms.
    """
    _reseed_random()
    _reseed_numpy()
    threading = sys.modules.get("threading")
    if sys.platform != "linux" or (threading is not None and threading.active_count() > 1):
        return os.fork()  # reseeds random in the child itself too
    return bare_fork()


def _reseed_random() -> None:
    """Reseed ``random``'s global generator from the system's entropy, if the server imported it.

    The same as ``random.seed()``, through the C method it ends in (found once, `_RANDOM_SEED`),
    while the generator holds no Gaussian drawn ahead (``gauss_next``, which ``random.seed()``
    also resets; a server draws nothing): its Python method's argument checks touched about ten
    more objects per fork, each a page copied (a server's live jobs share its pages).
    """
    if not _RANDOM_SEED:
        random = sys.modules.get("random")
        if random is None:
            return
        generator = getattr(random.seed, "__self__", None)
        if isinstance(generator, random.Random):
            _RANDOM_SEED.append((super(random.Random, generator).seed, generator, random.seed))
        else:
            _RANDOM_SEED.append((random.seed, None, random.seed))
    seed, generator, whole = _RANDOM_SEED[0]
    if generator is not None and generator.gauss_next is None:
        seed()  # the C generator's own: ``_random.Random.seed``, from the system's entropy
    else:
        whole()


_RANDOM_SEED: list[tuple[Any, Any, Any]] = []
"""Found once (`_reseed_random`): ``random``'s global generator's C ``seed`` method (bound), the
generator, and ``random.seed`` itself (used while a Gaussian drawn ahead waits)."""


def _reseed_numpy() -> None:
    """Give ``numpy.random``'s global generator a fresh state for the next job, if the server imported it.

    The servers import ``numpy.random`` (seeded there, once): without this, every job forked from
    one drew the same numbers, so one submission could predict another's unseeded ``np.random``.
    The generator (the legacy ``RandomState``'s MT19937) is given a whole new state from the
    system's entropy, read straight into it (`_mt19937_state`; ``/dev/urandom`` read with one
    ``readv`` into the state's memory, no object made): its Python seeding code touched about 90
    pages per fork, each copied in the server, whose pages its live jobs share. Where that state
    cannot be reached as checked, it is seeded the usual way, with 128 bits from ``random``
    (itself just reseeded from the system's entropy).
    """
    if not _MT_STATE:
        mtrand = sys.modules.get("numpy.random.mtrand")
        random = sys.modules.get("random")
        if mtrand is None or random is None:
            return
        _MT_STATE.append(_mt19937_state(mtrand._rand))
    state = _MT_STATE[0]
    if isinstance(state, tuple):
        key, pos, urandom = state
        if os.readv(urandom, [key]) == _MT_KEY_BYTES:
            pos.value = _MT_KEY_WORDS  # the next draw regenerates
            return
        ctypes.memmove(ctypes.addressof(key), os.urandom(_MT_KEY_BYTES), _MT_KEY_BYTES)  # a short read
        pos.value = _MT_KEY_WORDS
    else:
        mtrand = sys.modules["numpy.random.mtrand"]
        mtrand._rand.seed([sys.modules["random"].getrandbits(32) for _ in range(4)])


_MT_KEY_WORDS = 624
_MT_KEY_BYTES = 4 * _MT_KEY_WORDS
_MT_STATE: list[Any] = []
"""Found once (`_mt19937_state`): numpy's global MT19937 state as (its key, as a ctypes array over
it; its position, as a ctypes int; a descriptor of ``/dev/urandom``), or "seed" (seeded otherwise)."""


def _mt19937_state(generator: Any) -> Any:
    """Where ``generator``'s MT19937 state is (numpy's ``mt19937_state``: ``uint32_t key[624]; int pos``),
    as `_MT_STATE` holds it, once a state written there is what ``get_state`` reads back; else "seed".

    Only a generator that never drew a Gaussian qualifies (it keeps one drawn ahead, apart from this
    state): the servers' never drew anything. The descriptor of ``/dev/urandom`` is at 10 or above
    (clear of the fds a job dup2s over) and close-on-exec; jobs close it with every other before
    student code runs.
    """
    try:
        address = int(generator._bit_generator.ctypes.state_address)
        if generator.get_state()[3]:
            raise ValueError("a Gaussian drawn ahead")
        key = (ctypes.c_char * _MT_KEY_BYTES).from_address(address)
        pos = ctypes.c_int.from_address(address + _MT_KEY_BYTES)
        urandom = high_fd(os.open("/dev/urandom", os.O_RDONLY | os.O_CLOEXEC))
        try:
            if os.readv(urandom, [key]) != _MT_KEY_BYTES:
                raise OSError("short read")
            pos.value = _MT_KEY_WORDS
            name, read, at, has_gauss, _ = generator.get_state()
            if name == "MT19937" and read.tobytes() == key.raw and at == _MT_KEY_WORDS and not has_gauss:
                return key, pos, urandom
        except BaseException:
            os.close(urandom)
            raise
        os.close(urandom)
    except Exception:  # noqa: BLE001 - another numpy: seeded the usual way
        pass
    generator.seed()  # whatever was written is replaced
    return "seed"


def check(result: int, what: str) -> int:
    """``result`` of a libc call, or OSError (with errno and ``what``) when it is -1."""
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """libc ``prctl``; raises OSError (with errno) when it fails."""
    result: int = libc.prctl(
        option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(arg4), ctypes.c_ulong(arg5)
    )
    return check(result, f"prctl({option})")


def unshare(flags: int) -> bool | str:
    """libc ``unshare``: True if it applied, else the reason (``os.strerror`` of errno)."""
    return True if libc.unshare(flags) == 0 else os.strerror(ctypes.get_errno())


def high_fd(fd: int) -> int:
    """Move ``fd`` to 10 or above (clear of fds 0-4, which a job dup2s over); close-on-exec."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high
