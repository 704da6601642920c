"""Start a real server for a test or a benchmark: uvicorn on a free port of 127.0.0.1, in a thread."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["free_port", "run_server"]


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def run_server(app: Any, port: int | None = None, timeout: float = 30.0) -> Iterator[str]:
    """Serve ``app`` (e.g. `grader.serve.create_app`'s) with uvicorn on 127.0.0.1; yield its base URL.

    The application's lifespan runs (its grading workers start and stop with it). The server stops
    when the ``with`` block ends.

    Parameters
    ----------
    app : ASGI application
    port : int, optional
        Default: a free port.
    timeout : float
        Seconds to wait for the server to accept connections.
    """
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="grader-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server did not start on 127.0.0.1:{port}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
