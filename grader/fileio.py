"""Writing report files without leaving half-written ones behind."""

from __future__ import annotations

import errno
import itertools
import math
import os
import re
import select
import shutil
import stat
import tempfile
from collections.abc import Container, Iterable
from pathlib import Path

__all__ = [
    "MAX_SOURCE_BYTES",
    "MEMORY_FOLDER",
    "cache_dir",
    "memory_scratch",
    "names_in",
    "fd_ready",
    "output_file",
    "read_at_most",
    "read_regular",
    "remove_stale_scratch",
    "scratch_prefix",
    "write_atomic",
]

MAX_SOURCE_BYTES = 2 * 1024 * 1024
"""Largest submission file graded, in bytes (2 MiB): the locator refuses larger ones, the runner
reads no more (a file that grew after it was located)."""


def write_atomic(path: str | os.PathLike[str], text: str | Iterable[str], absent: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and a rename.

    Parameters
    ----------
    path : path-like
        The destination; missing folders are made.
    text : str or iterable of str
        The file's text, or its pieces in order (written one by one, so a
        large file is never held whole in memory).
    absent : bool
        The caller found nothing at ``path`` when it listed its folder (`names_in`): what is there is not
        looked up again (a new name's lookup reads the folder's index on disk). By default a destination
        that is a link, a FIFO, a device or a folder is refused.

    Raises
    ------
    OSError
        If the folder is not writable; the destination is then unchanged.
    """
    # Plain strings, not pathlib: a run writes two files per student through here.
    dest = os.fspath(path)
    kind = "" if absent else not_regular(dest)
    if kind:  # a rename would replace a device, a FIFO or a link (even /dev/null, as root)
        raise OSError(errno.EEXIST, f"{Path(dest)} is {kind}, not a regular file")
    folder, name = os.path.split(dest)
    folder = folder or "."
    if folder not in _FOLDERS_MADE:
        os.makedirs(folder, exist_ok=True)
        _FOLDERS_MADE.add(folder)
    # A name of its own (this process, a counter) opened exclusively: what mkstemp does, without its
    # random names; a name left by a crashed run is skipped.
    while True:
        tmp = os.path.join(folder, f".{name}.{_PID[0]}.{next(_TEMP_NUMBERS)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            break
        except FileExistsError:
            continue
        except FileNotFoundError:  # the folder went away since it was made: make it again
            _FOLDERS_MADE.discard(folder)
            os.makedirs(folder, exist_ok=True)
            _FOLDERS_MADE.add(folder)
    try:
        if isinstance(text, str):
            data = text.encode("utf-8")
            written = os.write(fd, data)
            if written < len(data):  # most files take one write; a short one (a full disk, a signal) goes on
                _write_all(fd, data[written:])
        else:
            with os.fdopen(os.dup(fd), "w", encoding="utf-8", newline="\n") as fh:
                fh.writelines(text)
        os.fchmod(fd, 0o644)
        os.close(fd)
        fd = -1
        os.replace(tmp, dest)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_FOLDERS_MADE: set[str] = set()
"""Folders `write_atomic` made or found (made again if one is removed meanwhile)."""

_TEMP_NUMBERS = itertools.count()

_PID = [os.getpid()]
"""This process's id, for temporary names (`write_atomic`): asked once, again in a forked child."""
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fd_ready(fd: int, timeout: float | None = 0.0, write: bool = False) -> bool:
    """Whether ``fd`` is readable (or, with ``write``, writable) within ``timeout`` seconds (None: no limit).

    ``select.select([fd], ...)`` for a descriptor below 1,024, else ``poll``: ``select`` refuses a
    descriptor of 1,024 or more (``ValueError``), which a grader gets when its process holds many
    files or sockets already (a web server, a notebook, a test runner). A hang-up or an error counts
    as ready, as ``select`` says (the read or write that follows sees it).

    Parameters
    ----------
    fd : int
    timeout : float or None
        Seconds to wait at most (0: look without waiting; negative: as 0).
    write : bool
        Wait until it can be written instead.

    Returns
    -------
    bool
    """
    if timeout is not None and timeout < 0.0:
        timeout = 0.0
    if fd < _SELECT_LIMIT:
        lists: tuple[list[int], list[int]] = ([], [fd]) if write else ([fd], [])
        return bool(select.select(*lists, [], timeout)[1 if write else 0])
    poller = select.poll()
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    return bool(poller.poll(None if timeout is None else math.ceil(timeout * 1000)))


_SELECT_LIMIT = 1024
"""``FD_SETSIZE``: ``select.select`` takes no descriptor from this one on."""


def names_in(folder: str | os.PathLike[str]) -> Container[str]:
    """The names in ``folder`` (none when it is missing), case-folded: a name whose case-folded form is
    not among them was not there (on a file system that ignores case too).

    Read once (one listing), for `write_atomic`'s ``absent``. A folder that is there but cannot be
    listed (searchable, not readable) holds every name as far as this says: what is at each file's
    place is then looked up as usual (a link there is refused, not renamed over).
    """
    try:
        with os.scandir(folder) as entries:
            return frozenset(entry.name.casefold() for entry in entries)
    except FileNotFoundError:
        return frozenset()
    except OSError:
        return _EVERY_NAME


class _EveryName:
    """`names_in`'s answer for a folder it could not list: it holds any name."""

    def __contains__(self, name: object) -> bool:
        return True


_EVERY_NAME = _EveryName()


def not_regular(path: str | os.PathLike[str]) -> str:
    """What ``path`` is when it exists and is not a regular file ("a symbolic link", "a FIFO"...), else ""."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISREG(mode):
        return ""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return ""


def read_at_most(fd: int, limit: int) -> bytes:
    """The bytes of the open file ``fd`` from its offset: all of them, or ``limit + 1`` if it holds more.

    Read in pieces of the size the file says it has (`os.fstat`), then 64 KiB: a single read or a
    buffered read of ``limit + 1`` allocates that much whole for every file, 2 MiB for each
    submission (`grader.execution.jobs.read_source`), 4 MiB for the entry points' few kilobytes.

    Parameters
    ----------
    fd : int
        An open regular file, read from its current offset (a read shorter than asked is taken for
        its end); not closed.
    limit : int
        The largest size wanted, in bytes: one byte more is read to tell a larger file.

    Returns
    -------
    bytes
        At most ``limit + 1`` bytes; longer than ``limit`` means the file is.

    Raises
    ------
    OSError
        If reading fails.
    """
    want = min(os.fstat(fd).st_size, limit) + 1
    chunks: list[bytes] = []
    size = 0
    while size <= limit and (chunk := os.read(fd, want)):
        chunks.append(chunk)
        size += len(chunk)
        if len(chunk) < want:  # the end: no read of 64 KiB more to find it
            break
        want = min(1 << 16, limit + 1 - size)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_input(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of an instructor's input file (a table, a JSON file), at most ``limit + 1`` of them.

    Opened without blocking and refused unless a regular file (a FIFO or a device in its place
    would wait forever or never end); read in pieces (`read_at_most`), so a small file costs
    little memory whatever ``limit`` is.

    Raises
    ------
    IsADirectoryError
        If ``path`` is a folder.
    OSError
        If it cannot be opened, or is not a regular file (``EINVAL``).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder")
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return read_at_most(fd, limit)
    finally:
        os.close(fd)


def read_regular(path: str | os.PathLike[str], limit: int, *, private: bool = False) -> bytes:
    """The bytes of ``path``, a regular file of this user's of at most ``limit`` bytes, read without blocking.

    What the grader's caches (`cache_dir`) read their files with: a FIFO or a link to ``/dev/zero``
    in a file's place would make a plain read wait forever or fill memory, and in a cache folder
    others can write (``GRADER_CACHE_DIR=/tmp/...``) another user's file would choose the plugins
    imported, or the mutants' outcomes.

    Parameters
    ----------
    path : path-like
        The file; a symbolic link is refused.
    limit : int
        The largest size read.
    private : bool
        Refuse a file its group or others may write too (one that holds code to run), as told by
        the open file itself: a check on the path before opening could see another file.

    Returns
    -------
    bytes
        The file's bytes.

    Raises
    ------
    OSError
        If ``path`` is missing, a link, a FIFO, a device or a folder, larger than ``limit``,
        another user's, or (``private``) one others may write.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise OSError(errno.EINVAL, f"{os.fspath(path)!r}: not a regular file of at most {limit} bytes")
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise OSError(errno.EPERM, f"{os.fspath(path)!r}: another user's file")
        if private and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise OSError(errno.EPERM, f"{os.fspath(path)!r}: others may write it")
        data = read_at_most(fd, limit)
        if len(data) > limit:  # it grew past the limit since fstat
            raise OSError(errno.EFBIG, f"{os.fspath(path)!r}: larger than {limit} bytes")
        return data
    finally:
        os.close(fd)


def output_file(text: str) -> str:
    """argparse type for an output file option: checked when the command line is read.

    The path must not be a folder, and its nearest existing folder must be
    writable (missing folders are made when the file is written), so a batch
    never fails on its output after grading a whole class.

    Raises
    ------
    argparse.ArgumentTypeError
        Naming the problem, for argparse's one-line usage error.
    """
    import argparse

    path = Path(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("empty; give a file name")
    system = system_folder(path)
    if system is not None:
        raise argparse.ArgumentTypeError(f"{text} is under {system}, a kernel file system; give another file name")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name")
    kind = not_regular(path)
    if kind:
        raise argparse.ArgumentTypeError(
            f"{text} is {kind}, which the grader would replace; give a regular file's path"
        )
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: the folder {folder} is not writable")
    try:  # os.access says yes to root everywhere; only creating a file tells (/proc, read-only mounts)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".grader-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text}: cannot write in {folder} ({exc.strerror})") from None
    return text


def unreachable_folder(path: str) -> tuple[str, int] | None:
    """The first folder on ``path`` (from ``/`` down) that a uid other than its owner's may not enter.

    Parameters
    ----------
    path : str
        A folder or file.

    Returns
    -------
    (str, int) or None
        That folder and its permission bits, or None when every folder on the way lets others
        through (execute permission for others). Folders that cannot be examined are passed over.
    """
    current = os.path.abspath(path)
    chain = []
    while True:
        chain.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for folder in reversed(chain):
        try:
            mode = os.stat(folder).st_mode
        except OSError:
            continue
        if not mode & 0o001:
            return folder, mode & 0o7777
    return None


def scratch_prefix(kind: str) -> str:
    """``grader-<kind>-<pid>-n<pid namespace>-``: the prefix of this process's temporary folders.

    The pid in the name lets `remove_stale_scratch` find the folders of a
    grader that was killed (``kill -9``) before it could remove them. The pid
    namespace says where that pid means something: a memory folder (`MEMORY_FOLDER`)
    is often shared by graders that cannot see each other's processes (containers
    run with ``--ipc=host``), and another's live folder is no killed one's (without
    ``/proc``: ``grader-<kind>-<pid>-``).
    """
    namespace = _pid_namespace()
    return f"grader-{kind}-{os.getpid()}-" + (f"n{namespace}-" if namespace else "")


_PID_NAMESPACE: list[str] = []
"""This process's pid namespace (`_pid_namespace`), read once: a process never changes its own."""


def _pid_namespace() -> str:
    """The inode number of this process's pid namespace (``/proc/self/ns/pid``), or "" without ``/proc``."""
    if not _PID_NAMESPACE:
        try:
            link = os.readlink("/proc/self/ns/pid")
        except OSError:
            link = ""
        match = re.fullmatch(r"pid:\[(\d+)\]", link)
        _PID_NAMESPACE.append(match.group(1) if match else "")
    return _PID_NAMESPACE[0]


MEMORY_FOLDER = "/dev/shm"  # noqa: S108 - a folder made in it is tempfile's (0700, a random name)
"""Where scratch files that need not outlive the process go when it has room (`memory_scratch`): a
memory file system, whose folders and files are made and removed without the disk's journal."""


def memory_scratch(need: int) -> str | None:
    """`MEMORY_FOLDER` when it is a writable folder with ``need`` bytes free four times over, else None
    (the system's temporary folder then)."""
    try:
        st = os.statvfs(MEMORY_FOLDER)
    except OSError:
        return None
    if st.f_bavail * st.f_frsize < 4 * need or not os.access(MEMORY_FOLDER, os.W_OK | os.X_OK):
        return None
    return MEMORY_FOLDER


_SCRATCH = re.compile(r"grader-[a-z]+-(\d+)-(?:n(\d+)-)?")


def remove_stale_scratch(folder: str | None = None) -> int:
    """Remove the temporary folders (`scratch_prefix`) of grader processes that are gone.

    Parameters
    ----------
    folder : str, optional
        Where to look; by default the system's temporary folder and `MEMORY_FOLDER`.

    Returns
    -------
    int
        How many folders were removed. Folders of live processes, of another pid
        namespace's processes (`scratch_prefix`), and any folder this process may not
        remove, are left alone.
    """
    if folder is None:
        return remove_stale_scratch(tempfile.gettempdir()) + remove_stale_scratch(MEMORY_FOLDER)
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        match = _SCRATCH.match(name)
        if match is None or os.path.exists(f"/proc/{match.group(1)}") or not os.path.isdir("/proc/self"):
            continue
        if match.group(2) is not None and match.group(2) != _pid_namespace():
            continue  # a pid of another namespace's (a grader in another container sharing the folder)
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            removed += not os.path.exists(path)
    return removed


SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")
"""Kernel file systems: nothing the grader writes belongs there (a write may even succeed, to a kernel setting)."""


def system_folder(path: Path) -> str | None:
    """The kernel file system `path` lies under (``/proc``, ``/sys``, ``/dev``; links resolved), or None."""
    resolved = os.path.realpath(path)
    return next((f for f in SYSTEM_FOLDERS if resolved == f or resolved.startswith(f + "/")), None)


def check_out_dir(out: Path, option: str = "--out") -> None:
    """Refuse an output folder that could not be made or written, without making it.

    Parameters
    ----------
    out : pathlib.Path
        The folder.
    option : str
        The option that named it, for the message (``--out``, ``--dir``).

    Raises
    ------
    grader.errors.UsageError
        If ``out`` is empty, lies under /proc, /sys or /dev, exists and is not a writable
        folder, or does not exist and its nearest existing parent is not a writable folder.
    """
    from grader.errors import UsageError

    if not str(out).strip():
        raise UsageError(f"{option}: empty; give a folder")
    system = system_folder(out)
    if system is not None:
        raise UsageError(f"{option} {out}: under {system}, a kernel file system; choose another {option}")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{option} {out}: exists and is not a folder; choose another {option}")
    if out.is_dir():
        if not _writable(out):
            raise UsageError(f"{option} {out}: the folder is not writable; choose another {option}")
        return
    parent = out.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(
            f"{option} {out}: cannot create the folder ({parent} is not a folder); choose another {option}"
        )
    if not _writable(parent):
        raise UsageError(
            f"{option} {out}: cannot create the folder ({parent} is not writable); choose another {option}"
        )


def _writable(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (tried: os.access says yes to root everywhere)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".grader-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError:
        return False
    return True


def make_out_dir(out: Path) -> None:
    """Create the output folder (when grading starts: a refused run leaves none behind).

    Raises
    ------
    grader.errors.UsageError
        If the folder cannot be created.
    """
    from grader.errors import UsageError

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create the folder ({exc.strerror}); choose another --out") from None


def cache_dir() -> Path | None:
    """The grader's cache folder: ``$GRADER_CACHE_DIR``, else the user's cache folder.

    `grader.packs.catalogue.run_entries` keeps its results there, `grader.readers.entrypoints` the installed
    entry points and `grader.readers.keptyaml` the YAML files parsed before.

    ``GRADER_CACHE_DIR`` set to an empty string turns the cache off
    (returns None). Otherwise ``$XDG_CACHE_HOME/grader`` (an absolute path: a relative one is
    ignored, as the XDG specification says) or ``~/.cache/grader``; None when there is no home
    folder to put it in (``HOME`` empty or ``/``, or unset for a user the password database does
    not know), rather than a ``.cache`` folder at ``/`` or a ``~`` folder in the working folder.
    """
    if "GRADER_CACHE_DIR" in os.environ:
        value = os.environ["GRADER_CACHE_DIR"]
        return Path(value) if value else None
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")  # "~" itself when it cannot say, "/" for HOME=""
        if not os.path.isabs(home) or os.path.dirname(home) == home:
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "grader"
