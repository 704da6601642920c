"""The PostgreSQL server the server tests also run on: ``GRADER_TEST_POSTGRES_URL``, set by ``.ci/postgres``.

`postgres_url` gives the URL, or skips the calling test with the reason on a developer's machine, and
fails it under ``CI=true``: ``.ci/run`` starts the server, so a missing URL there is a broken CI, not a
reason to run the server tests on SQLite alone.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote

import pytest

ENV = "GRADER_TEST_POSTGRES_URL"
WHY = f"{ENV} is not set: 'source .ci/postgres' starts a throwaway PostgreSQL server and sets it (.ci/run does)"


def postgres_url() -> str:
    """The SQLAlchemy URL of the test server (``postgresql+psycopg://...``); skip, or fail under CI, without it."""
    url = os.environ.get(ENV, "")
    if url:
        return url
    if os.environ.get("CI") == "true":
        pytest.fail(WHY)
    pytest.skip(WHY)


def worker_schema(worker: str | None = None) -> str:
    """The schema this pytest process's server tests use: one per xdist worker (``t_gw0``, ...), ``t_main`` alone.

    Tests of different files run at once in two processes (``-n 2 --dist loadfile``) against the one
    server; a test empties its database when it starts, so each process keeps to a schema of its own.
    """
    name = worker if worker is not None else os.environ.get("PYTEST_XDIST_WORKER", "main")
    return "t_" + re.sub(r"[^a-z0-9_]", "_", name.lower())


def in_schema(url: str, schema: str) -> str:
    """``url`` with libpq's ``options`` setting the ``search_path`` to ``schema`` (the tables are made there)."""
    return url + ("&" if "?" in url else "?") + "options=" + quote(f"-csearch_path={schema}", safe="")
