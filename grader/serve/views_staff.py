"""Staff routes (filled in below)."""

from __future__ import annotations

from starlette.routing import Route

from grader.serve.pages import Pages
from grader.serve.state import ServerState


def routes(state: ServerState, pages: Pages) -> list[Route]:
    """The staff routes."""
    return []
