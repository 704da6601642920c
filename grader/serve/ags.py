"""LTI Assignment and Grade Services 2.0, the score service: a tool's final scores into the gradebook.

The access token comes from the platform's token endpoint by the OAuth 2 client-credentials grant,
with an RFC 7523 JWT client assertion signed by the tool's key (IMS Security Framework); scores are
posted to ``{lineitem}/scores`` as ``application/vnd.ims.lis.v1.score+json``. Callers import
`AgsClient` and `PushResult` from `grader.serve.lti`.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from grader.serve.lti_registration import (
    CLIENT_ASSERTION_TYPE,
    SCOPE_LINEITEM,
    SCOPE_SCORE,
    SCORE_MEDIA_TYPE,
    Platform,
    ToolKey,
    url_problem,
)

__all__ = ["AgsClient", "PushResult"]

LINEITEM_MEDIA_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEM_CONTAINER_MEDIA_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
MAX_ANSWER_BYTES = 256 * 1024
"""A platform's answer (token or score post) larger than this is refused."""


@dataclass(frozen=True)
class PushResult:
    """How a score post ended.

    Attributes
    ----------
    ok : bool
        The platform accepted the score (2xx).
    status : int or None
        The last HTTP status (None when no answer came: timeout, refused connection).
    attempts : int
        Score posts tried (each retry counts).
    detail : str
        One sentence for the staff's log.
    """

    ok: bool
    status: int | None
    attempts: int
    detail: str


class _Retry(Exception):
    def __init__(self, status: int | None, detail: str, delay: float | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.delay = status, detail, delay


class _GiveUp(Exception):
    def __init__(self, status: int | None, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


class AgsClient:
    """Posts scores to a platform's AGS line items with the tool's own access token.

    Parameters
    ----------
    platform : Platform
    tool_key : ToolKey
        Signs the RFC 7523 client assertion the token endpoint checks against the tool's JWKS.
    http : httpx.Client, optional
        A client to use (tests pass one with a mock transport); by default one with a 10 s timeout.
    max_attempts : int
        Score posts tried before giving up (429, 5xx, timeouts and refused connections are retried).
    base_delay, max_delay : float
        Back-off: ``base_delay * 2**(attempt-1)`` seconds, or the platform's ``Retry-After``, at most
        ``max_delay``.
    sleep, clock : callable
        ``time.sleep`` and ``time.monotonic`` by default (tests pass their own).
    """

    def __init__(
        self,
        platform: Platform,
        tool_key: ToolKey,
        *,
        http: httpx.Client | None = None,
        max_attempts: int = 5,
        base_delay: float = 1.0,
        max_delay: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.platform = platform
        self._key = tool_key
        self._http = http if http is not None else httpx.Client(timeout=10.0, follow_redirects=False)
        self._max_attempts = max(1, max_attempts)
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._sleep = sleep
        self._clock = clock
        self._token: tuple[str, float] | None = None
        self._lock = threading.Lock()
        self.token_requests = 0
        """How many access tokens were requested (for tests and logs)."""

    def post_score(
        self,
        lineitem_url: str,
        user_id: str,
        score_given: float,
        score_maximum: float,
        comment: str = "",
        timestamp: dt.datetime | str | None = None,
    ) -> PushResult:
        """Publish a final score: ``POST {lineitem}/scores``, FullyGraded and Completed.

        Parameters
        ----------
        lineitem_url : str
            The line item (the launch's ``lineitem_url``); ``/scores`` is added to its path, before
            any query.
        user_id : str
            The student's ``sub``.
        score_given, score_maximum : float
            The final score and the line item's scale.
        comment : str
            Shown to the student in the gradebook ('' sends none).
        timestamp : datetime or str, optional
            When the score was given (timezone-aware); now by default.

        Returns
        -------
        PushResult
            Never raises on an HTTP failure: ``ok`` is False and ``detail`` says why.
        """
        score = {
            "userId": user_id,
            "scoreGiven": score_given,
            "scoreMaximum": score_maximum,
            "activityProgress": "Completed",
            "gradingProgress": "FullyGraded",
            "timestamp": _iso_timestamp(timestamp),
        }
        if comment:
            score["comment"] = comment
        body = json.dumps(score).encode()
        headers = {"Content-Type": SCORE_MEDIA_TYPE}
        outcome, result = self._retried("score post", "POST", _scores_url(lineitem_url), headers=headers, content=body)
        if outcome is not None:
            return PushResult(
                True,
                outcome.status_code,
                result.attempts,
                f"The platform accepted the score (HTTP {outcome.status_code}).",
            )
        return result

    def ensure_lineitem(
        self,
        lineitems_url: str,
        *,
        label: str,
        score_maximum: float,
        resource_link_id: str = "",
        resource_id: str = "",
    ) -> tuple[str | None, PushResult]:
        """The URL of the line item for a resource link, created in the platform's gradebook if it has none.

        For launches that carry the line items container (``lineitems_url``) but no line item: the
        container is searched by ``resource_link_id`` (and ``resource_id``), and a line item is created
        when none matches.

        Returns
        -------
        (str or None, PushResult)
            The line item's URL (None on failure) and how the calls ended (never raises on HTTP failure).
        """
        query = {k: v for k, v in (("resource_link_id", resource_link_id), ("resource_id", resource_id)) if v}
        found, result = self._retried(
            "line item search",
            "GET",
            _with_query(lineitems_url, query),
            headers={"Accept": LINEITEM_CONTAINER_MEDIA_TYPE},
        )
        if found is None:
            return None, result
        for item in _json_list(found):
            same_link = not resource_link_id or item.get("resourceLinkId") == resource_link_id
            same_resource = not resource_id or item.get("resourceId") == resource_id
            if same_link and same_resource and isinstance(item.get("id"), str):
                return item["id"], PushResult(True, found.status_code, result.attempts, "The line item exists.")
        body: dict[str, Any] = {"label": label, "scoreMaximum": score_maximum}
        if resource_link_id:
            body["resourceLinkId"] = resource_link_id
        if resource_id:
            body["resourceId"] = resource_id
        headers = {"Content-Type": LINEITEM_MEDIA_TYPE, "Accept": LINEITEM_MEDIA_TYPE}
        made, result = self._retried(
            "line item creation", "POST", lineitems_url, headers=headers, content=json.dumps(body).encode()
        )
        if made is None:
            return None, result
        try:
            url = json.loads(made.content)["id"]
        except (ValueError, KeyError, TypeError):
            url = None
        if not isinstance(url, str) or url_problem(url):
            return None, PushResult(
                False, made.status_code, result.attempts, "The platform created a line item without a usable id."
            )
        return url, PushResult(True, made.status_code, result.attempts, "The line item was created.")

    def _retried(self, what: str, method: str, url: str, **kwargs: Any) -> tuple[httpx.Response | None, PushResult]:
        """One AGS call with the access token, retried on 429, 5xx, timeouts and a refused token."""
        status: int | None = None
        detail = ""
        for attempt in range(1, self._max_attempts + 1):
            try:
                response = self._call_once(what, method, url, **kwargs)
                return response, PushResult(True, response.status_code, attempt, "")
            except _GiveUp as stop:
                return None, PushResult(False, stop.status, attempt, stop.detail)
            except _Retry as again:
                status, detail = again.status, again.detail
                if attempt < self._max_attempts:
                    self._sleep(self._delay(attempt, again.delay))
        return None, PushResult(
            False, status, self._max_attempts, f"{detail} Gave up after {self._max_attempts} attempts."
        )

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        wanted = retry_after if retry_after is not None else self._base_delay * 2 ** (attempt - 1)
        return float(min(max(wanted, 0.0), self._max_delay))

    def _call_once(
        self, what: str, method: str, url: str, *, headers: Mapping[str, str], **kwargs: Any
    ) -> httpx.Response:
        token = self._access_token()
        response = self._send(method, url, headers={**headers, "Authorization": f"Bearer {token}"}, **kwargs)
        if response.status_code == 401:
            with self._lock:
                self._token = None
            raise _Retry(401, "The platform refused the access token (HTTP 401).")
        if 200 <= response.status_code < 300:
            return response
        self._raise_for(response, what)
        raise AssertionError("unreachable")  # pragma: no cover

    def _access_token(self) -> str:
        """A cached bearer token for the score and line item scopes, fetched when absent or expiring."""
        with self._lock:
            if self._token is not None and self._clock() < self._token[1]:
                return self._token[0]
            self.token_requests += 1
            response = self._send("POST", self.platform.auth_token_url, data=self._token_form())
            if not 200 <= response.status_code < 300:
                self._raise_for(response, "access token request")
            try:
                body = json.loads(response.content)
                token = body["access_token"]
                lifetime = float(body.get("expires_in", 3600))
            except (ValueError, KeyError, TypeError):
                raise _GiveUp(response.status_code, "The platform's token endpoint answered without a token.") from None
            if not isinstance(token, str) or not token:
                raise _GiveUp(response.status_code, "The platform's token endpoint answered without a token.")
            self._token = (token, self._clock() + max(lifetime - 30.0, lifetime / 2))
            return token

    def _token_form(self) -> dict[str, str]:
        issued = int(time.time())
        assertion = self._key.sign(
            {
                "iss": self.platform.client_id,
                "sub": self.platform.client_id,
                "aud": self.platform.auth_token_url,
                "iat": issued,
                "exp": issued + 300,
                "jti": uuid.uuid4().hex,
            }
        )
        return {
            "grant_type": "client_credentials",
            "client_assertion_type": CLIENT_ASSERTION_TYPE,
            "client_assertion": assertion,
            "scope": f"{SCOPE_SCORE} {SCOPE_LINEITEM}",
        }

    def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request; the answer is read up to `MAX_ANSWER_BYTES` (streamed, so a huge one is never held)."""
        try:
            request = self._http.build_request(method, url, **kwargs)
            streamed = self._http.send(request, stream=True)
            try:
                body = bytearray()
                for chunk in streamed.iter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        raise _GiveUp(streamed.status_code, "The platform's answer is larger than the tool accepts.")
            finally:
                streamed.close()
        except httpx.TimeoutException:
            raise _Retry(None, "The platform did not answer in time.") from None
        except httpx.HTTPError as exc:
            raise _Retry(None, f"The platform could not be reached ({type(exc).__name__}).") from None
        return httpx.Response(streamed.status_code, headers=streamed.headers, content=bytes(body), request=request)

    def _raise_for(self, response: httpx.Response, what: str) -> None:
        code = response.status_code
        if code == 429 or code >= 500:
            raise _Retry(code, f"The platform answered the {what} with HTTP {code}.", _retry_after(response))
        raise _GiveUp(code, f"The platform refused the {what} with HTTP {code}.")

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


def _scores_url(lineitem_url: str) -> str:
    """``{lineitem}/scores``: the path gains /scores, the query (Moodle's ?type_id=...) stays."""
    parts = urlsplit(lineitem_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


def _iso_timestamp(value: dt.datetime | str | None) -> str:
    if isinstance(value, str):
        return value
    when = value if value is not None else dt.datetime.now(dt.UTC)
    if when.tzinfo is None:
        raise ValueError("the score's timestamp must be timezone-aware")
    return when.isoformat(timespec="milliseconds")


def _with_query(url: str, extra: Mapping[str, str]) -> str:
    """``url`` with ``extra`` added to its query (the platform's own parameters kept)."""
    if not extra:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=urlencode([*parse_qsl(parts.query), *extra.items()])))


def _json_list(response: httpx.Response) -> list[dict[str, Any]]:
    try:
        data = json.loads(response.content)
    except ValueError:
        return []
    return [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []
