"""``grader serve``: a web server where students submit and read their visible feedback in seconds.

Its LTI 1.3 tool side is `grader.serve.lti`.

The web process stores uploads and queue rows and renders pages; it never imports or runs a
student's code. Grading worker processes (`grader.serve.worker`) drain the queue with the batch
path's machinery (`grader.grading.session`) and its sandboxed jobs. `create_app` builds the ASGI
application; `grader.serve.testing.run_server` starts one on a free port for tests.
"""

from __future__ import annotations

__all__ = ["create_app"]


def create_app(*args: object, **kwargs: object) -> object:
    """Build the ASGI application (see `grader.serve.app.create_app`)."""
    from grader.serve.app import create_app as build

    return build(*args, **kwargs)  # type: ignore[arg-type]
