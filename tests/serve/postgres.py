"""The PostgreSQL server the server tests also run on: ``GRADER_TEST_POSTGRES_URL``, set by ``.ci/postgres``.

`postgres_url` gives the URL, or skips the calling test with the reason on a developer's machine, and
fails it under ``CI=true``: ``.ci/run`` starts the server, so a missing URL there is a broken CI, not a
reason to run the server tests on SQLite alone.
"""

from __future__ import annotations

import os

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
