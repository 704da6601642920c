"""The server's pages: jinja2 templates in ``grader/templates/serve/``, autoescaped, with safe headers."""

from __future__ import annotations

from typing import Any

import jinja2
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import HTMLResponse

from grader.serve.security import csrf_token, current_user
from grader.serve.state import ServerState

__all__ = ["Pages", "RowId"]


class RowId(Convertor[int]):
    """A row number in a URL (``{number:id}``): 1 to 9 digits, so it fits every database's integer.

    Starlette's ``int`` takes any number of digits, and a number past the database's integers made
    the query fail (a server error) instead of "not found".
    """

    regex = "[0-9]{1,9}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("id", RowId())


class Pages:
    """The jinja2 pages of the server (``grader/templates/serve/``), autoescaped."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("grader", "templates/serve"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """The page ``template`` with the course, the user, the CSRF token and ``base`` (the course's path
        prefix, before every link) in its context."""
        context.setdefault("refresh", None)
        html = self.env.get_template(template).render(
            course=self.state.pack,
            user=context.pop("user", None) or current_user(self.state, request),
            csrf=csrf_token(request),
            base=self.state.settings.prefix,
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Content-Security-Policy"] = (
            # forms post here, or (deep linking) to the LMS: over https, or on this machine for tests
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
            "form-action 'self' https: http://127.0.0.1:* http://localhost:*; frame-ancestors 'self' https:"
        )
        return response
