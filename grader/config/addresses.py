"""The network addresses a run is given (``--dask``, ``--canvas-push``): parsed, validated and probed, bounded.

`check_dask_address` and `check_canvas_url` refuse a wrong address before anything starts, in
one line naming the option, what is wrong and the fix: an empty value, an unknown scheme, a
port that is not a number or out of 1-65535, ``tls://`` without certificates, a Canvas address
that is not an assignment's. `probe_dask` connects with a timeout and reads the scheduler's
greeting with one: a port where nothing listens, one that accepts and never speaks, or an HTTP
server are each named, well under 30 s. `bounded_canvas` gives canvasapi's HTTP session connect
and read timeouts, and `canvas_failure` words what a server that answered the wrong thing (an
HTML login page, JSON that is not Canvas's) or no answer at all did.
"""

from __future__ import annotations

import socket
import time
from typing import Any
from urllib.parse import urlsplit

from grader.errors import ConfigError, UsageError

__all__ = [
    "CONNECT_TIMEOUT",
    "READ_TIMEOUT",
    "bounded_canvas",
    "canvas_failure",
    "check_canvas_url",
    "check_dask_address",
    "probe_dask",
]

CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a TCP connection (Dask scheduler, Canvas)."""

READ_TIMEOUT = 15.0
"""Seconds to wait for an answer once connected (Canvas's API; a Dask scheduler's greeting is waited for 10 s)."""

DASK_SCHEMES = ("tcp", "tls", "ws", "wss", "inproc", "ucx")
_DASK_EXAMPLE = "give the address 'dask scheduler' prints (tcp://HOST:8786)"
_CANVAS_EXAMPLE = "give https://HOST/courses/COURSE/assignments/ASSIGNMENT"


def _port(parts: Any, option: str, value: str, fix: str) -> int | None:
    try:
        return parts.port  # type: ignore[no-any-return]
    except ValueError:
        port = parts.netloc.rpartition(":")[2]
        what = "not a number" if not port.isdigit() else "out of range (1-65535)"
        raise UsageError(f"{option} {value}: the port {port!r} is {what}; {fix}") from None


def check_dask_address(address: str, certificates: bool = False) -> tuple[str, str, int | None]:
    """Parse and validate ``--dask``.

    Parameters
    ----------
    address : str
        ``tcp://HOST:PORT``, ``HOST:PORT`` (tcp), ``tls://HOST:PORT`` and the other schemes Dask knows.
    certificates : bool
        Whether the run names the client's certificates itself (``--dask-tls-*``); otherwise
        ``tls://`` needs them in Dask's configuration.

    Returns
    -------
    (str, str, int or None)
        The scheme, the host and the port (None when not given).

    Raises
    ------
    grader.errors.UsageError
        Empty, an unknown scheme, no host, a port that is not a number or out of range,
        or ``tls://`` without the client's certificates (options or Dask's configuration).
    """
    if not address.strip():
        raise UsageError(f"--dask: empty; {_DASK_EXAMPLE}")
    try:
        parts = urlsplit(address if "://" in address else f"tcp://{address}")
        parts.hostname  # noqa: B018 - raises ValueError for a broken [IPv6] host
    except ValueError as exc:
        raise UsageError(f"--dask {address}: not an address ({exc}); {_DASK_EXAMPLE}") from None
    if parts.scheme not in DASK_SCHEMES:
        raise UsageError(
            f"--dask {address}: unknown scheme {parts.scheme!r}; Dask reads {', '.join(DASK_SCHEMES)}; {_DASK_EXAMPLE}"
        )
    port = _port(parts, "--dask", address, _DASK_EXAMPLE)
    if parts.scheme != "inproc" and not parts.hostname:
        raise UsageError(f"--dask {address}: no host; {_DASK_EXAMPLE}")
    if port == 0:
        raise UsageError(f"--dask {address}: the port 0 is out of range (1-65535); {_DASK_EXAMPLE}")
    if parts.path not in ("", "/") and parts.scheme in ("tcp", "tls"):
        raise UsageError(f"--dask {address}: a path ({parts.path}) in a scheduler's address; {_DASK_EXAMPLE}")
    if parts.scheme in ("tls", "wss") and not certificates:
        try:
            import dask.config

            ca = dask.config.get("distributed.comm.tls.ca-file", None)
            cert = dask.config.get("distributed.comm.tls.client.cert", None)
        except ImportError:
            ca = cert = None
        if not ca or not cert:
            raise UsageError(
                f"--dask {address}: {parts.scheme}:// needs certificates, and Dask's configuration names none; give "
                "--dask-tls-ca, --dask-tls-cert and --dask-tls-key, or set DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY (or use tcp:// on a trusted network)"
            )
    return parts.scheme, parts.hostname or "", port


def probe_dask(address: str, greeting_timeout: float = 10.0) -> None:
    """Refuse at once a ``tcp://`` scheduler address that is not a Dask scheduler's.

    A scheduler writes its handshake as soon as a connection is accepted; so a port where
    nothing listens, one that accepts and stays silent, and an HTTP server (the dashboard) are
    told apart within ``CONNECT_TIMEOUT + greeting_timeout + 3`` seconds.

    Raises
    ------
    grader.errors.UsageError
        In one line naming the address, what answered (or did not), and the fix.
    """
    scheme, host, port = check_dask_address(address, certificates=True)  # certificates: the caller's check
    if scheme != "tcp":
        return  # other protocols: the client's own (bounded) timeout says what is wrong
    port = port or 8786
    try:
        conn = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
    except TimeoutError:
        raise UsageError(
            f"--dask {address}: no connection within {CONNECT_TIMEOUT:g} s; check the host, the port and the "
            f"firewall; {_DASK_EXAMPLE}"
        ) from None
    except OSError as exc:
        raise UsageError(
            f"--dask {address}: cannot reach the Dask scheduler ({exc.strerror or type(exc).__name__}); {_DASK_EXAMPLE}"
        ) from None
    with conn:
        deadline = time.monotonic() + greeting_timeout
        data = b""
        try:
            conn.settimeout(greeting_timeout)
            data = conn.recv(64)
        except TimeoutError:
            data = b""
        except OSError:
            data = b""
        if data and not data.startswith((b"HTTP/", b"<", b"SSH-", b"220 ")):
            return  # a binary greeting: Dask's handshake frames
        if not data and time.monotonic() >= deadline - 0.1:
            try:  # silent: is it an HTTP server waiting for a request?
                conn.settimeout(3.0)
                conn.sendall(b"GET / HTTP/1.0\r\nHost: probe\r\n\r\n")
                data = conn.recv(64)
            except OSError:
                data = b""
    if data.startswith((b"HTTP/", b"<")):
        raise UsageError(
            f"--dask {address}: an HTTP server answered, not a Dask scheduler (the dashboard listens on 8787, the "
            f"scheduler on 8786); {_DASK_EXAMPLE}"
        )
    if data:
        shown = data[:20].decode("ascii", "replace").strip()
        raise UsageError(
            f"--dask {address}: another service answered ({shown!r}), not a Dask scheduler; {_DASK_EXAMPLE}"
        )
    raise UsageError(
        f"--dask {address}: the port accepted a connection but said nothing within {greeting_timeout:g} s: not a "
        f"Dask scheduler, or one that is stuck; {_DASK_EXAMPLE}"
    )


def check_canvas_url(url: str) -> tuple[str, int, int]:
    """Parse and validate ``--canvas-push``.

    Returns
    -------
    (str, int, int)
        The base address (``https://HOST[:PORT]``), the course id and the assignment id.

    Raises
    ------
    grader.errors.ConfigError
        Empty, not http(s), no host, a port that is not a number or out of range, user
        information in the address, or a path that is not ``/courses/C/assignments/A``.
    """
    import re

    if not url.strip():
        raise ConfigError(f"--canvas-push: empty; {_CANVAS_EXAMPLE}")
    try:
        parts = urlsplit(url)
        parts.hostname  # noqa: B018 - raises ValueError for a broken [IPv6] host
    except ValueError as exc:
        raise ConfigError(f"--canvas-push {url}: not an address ({exc}); {_CANVAS_EXAMPLE}") from None
    if parts.scheme not in ("https", "http"):
        raise ConfigError(
            f"--canvas-push {url}: the scheme {parts.scheme or '(none)'!r} is not https; {_CANVAS_EXAMPLE}"
        )
    try:
        port = parts.port
    except ValueError:
        port_text = parts.netloc.rpartition(":")[2]
        what = "not a number" if not port_text.isdigit() else "out of range (1-65535)"
        raise ConfigError(f"--canvas-push {url}: the port {port_text!r} is {what}; {_CANVAS_EXAMPLE}") from None
    if not parts.hostname or port == 0:
        raise ConfigError(f"--canvas-push {url}: no host or port 0; {_CANVAS_EXAMPLE}")
    if parts.username or parts.password:
        raise ConfigError(
            f"--canvas-push {url}: holds a user name or password; give the token in CANVAS_API_TOKEN instead"
        )
    if parts.query or parts.fragment:
        raise ConfigError(f"--canvas-push {url}: holds a query or fragment; {_CANVAS_EXAMPLE}")
    m = re.fullmatch(r"/courses/(\d{1,18})/assignments/(\d{1,18})/?", parts.path)
    if m is None:
        raise ConfigError(f"--canvas-push {url}: not an assignment's address; {_CANVAS_EXAMPLE}")
    return f"{parts.scheme}://{parts.netloc}", int(m[1]), int(m[2])


def bounded_canvas(base: str, token: str) -> Any:
    """A ``canvasapi.Canvas`` whose HTTP requests time out (`CONNECT_TIMEOUT`, `READ_TIMEOUT`).

    canvasapi sets no timeout of its own: a server that accepts and never answers would hold the
    run forever. Its session's ``request`` is given a default ``timeout``.
    """
    import functools

    from canvasapi import Canvas

    canvas = Canvas(base, token)
    requester = getattr(canvas, "_Canvas__requester", None)
    session = getattr(requester, "_session", None)
    if session is not None:
        session.request = functools.partial(session.request, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    return canvas


def canvas_failure(url: str, exc: BaseException) -> ConfigError:
    """One line for a push that failed on the network or on an answer that is not Canvas's.

    Parameters
    ----------
    url : str
        The ``--canvas-push`` address.
    exc : BaseException
        What canvasapi or requests raised.

    Returns
    -------
    grader.errors.ConfigError
        Naming what happened (no connection, no answer within the timeout, an HTML page, JSON that
        is not Canvas's) and the fix.
    """
    name = type(exc).__name__
    doc = getattr(exc, "doc", None)
    tail = "; the other files were written"
    if isinstance(doc, str) or name in ("JSONDecodeError", "InvalidJSONError"):
        html = isinstance(doc, str) and doc.lstrip()[:1] == "<"
        what = "an HTML page (a login page or a proxy?)" if html else "something that is not JSON"
        return ConfigError(
            f"--canvas-push {url}: the server answered {what}, not Canvas's API; check the address (the "
            f"Canvas host itself) and the token{tail}"
        )
    if name in ("ReadTimeout", "Timeout") or isinstance(exc, TimeoutError):
        return ConfigError(
            f"--canvas-push {url}: the server accepted the connection but sent no answer within "
            f"{READ_TIMEOUT:g} s; check the address and that Canvas is up{tail}"
        )
    if name == "ConnectTimeout":
        return ConfigError(
            f"--canvas-push {url}: no connection within {CONNECT_TIMEOUT:g} s; check the address and the network{tail}"
        )
    if isinstance(exc, (AttributeError, KeyError, TypeError, ValueError)):
        return ConfigError(
            f"--canvas-push {url}: the server answered JSON that is not Canvas's ({name}); check the address "
            f"(the Canvas host itself){tail}"
        )
    return ConfigError(
        f"--canvas-push {url}: Canvas could not be reached ({name}); check the address and the network{tail}"
    )
