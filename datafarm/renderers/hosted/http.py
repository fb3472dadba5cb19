"""A small JSON-over-HTTPS client for the hosted video services (stdlib urllib + tenacity retries).

- Bearer key on every request to the service's own host, never to another host (result downloads
  are signed URLs on storage hosts).
- Rate limits honoured: an HTTP 429 (or a service's own rate-limit code, raised by its `check`) is
  retried after the server's `Retry-After` (seconds or an HTTP date) or, without one, after an
  exponential backoff; an optional client-side pace (`requests_per_minute`) spaces requests out.
- Server errors (5xx), connection failures and requests that get no answer within
  `request_timeout_s` are retried with backoff; other 4xx answers fail at once with the service's
  error code and message.
- Counters (requests, retries, rate-limited answers) and the last `Trace-Id` are kept for the record.
"""

from __future__ import annotations

import email.utils
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from datafarm.errors import DatafarmError

MAX_RETRY_AFTER_S = 600.0
"""Longest `Retry-After` the client obeys; a longer one is cut to this."""


class HostedServiceError(DatafarmError):
    """A hosted video service refused or failed a request (after any retries)."""

    exit_code = 5

    def __init__(self, service: str, message: str, *, status: int | None = None, code: str | int | None = None,
                 trace_id: str | None = None) -> None:
        self.service, self.status, self.code, self.trace_id = service, status, code, trace_id
        detail = ", ".join(p for p in (f"HTTP {status}" if status else "", f"code {code}" if code is not None else "",
                                        f"trace id {trace_id}" if trace_id else "") if p)
        super().__init__(f"{service}: {message}" + (f" ({detail})" if detail else ""))


class RetryableError(HostedServiceError):
    """A failure worth retrying: rate limit, server error, timeout, lost connection."""

    def __init__(self, service: str, message: str, *, retry_after: float | None = None, rate_limited: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(service, message, **kwargs)
        self.retry_after, self.rate_limited = retry_after, rate_limited


class HostedTimeout(HostedServiceError):
    """A job did not finish within the renderer's `timeout_s`."""


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass
class Response:
    """A decoded JSON answer."""

    status: int
    """HTTP status."""
    body: Any
    """Parsed JSON."""
    headers: Mapping[str, str]
    """Response headers."""


ErrorParser = Callable[[int, Any], tuple[str | int | None, str]]
"""(HTTP status, parsed body or None) -> (service error code, message) for a failed answer."""
Check = Callable[[Response], None]
"""Raises for a 2xx answer that still reports a failure (MiniMax's base_resp)."""


class JsonHttpClient:
    """JSON requests to one service (see the module docstring)."""

    def __init__(self, service: str, base_url: str, api_key: str, *, request_timeout_s: float = 60.0,
                 max_retries: int = 5, backoff_initial_s: float = 2.0, backoff_max_s: float = 60.0,
                 requests_per_minute: float | None = None, parse_error: ErrorParser | None = None,
                 check: Check | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.service, self.base_url = service, base_url.rstrip("/")
        self._key = api_key
        self._host = urllib.parse.urlsplit(self.base_url).netloc
        self.request_timeout_s, self.max_retries = request_timeout_s, max_retries
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s
        self.min_interval_s = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._parse_error = parse_error or (lambda status, body: (None, str(body)[:300]))
        self._check = check
        self.sleep, self.clock = sleep, clock
        self._last_request = -1e18
        self.requests = 0
        """Requests sent (including retries)."""
        self.retries = 0
        """Requests repeated after a retryable failure."""
        self.rate_limited = 0
        """Answers that were rate-limit errors."""
        self.waited_s = 0.0
        """Time spent waiting before retries."""
        self.last_trace_id: str | None = None
        """`Trace-Id` of the last answer that had one."""

    # --- retry policy -----------------------------------------------------------------------------------
    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, RetryableError) and error.retry_after is not None:
            delay = min(error.retry_after, MAX_RETRY_AFTER_S)
        else:
            delay = min(self.backoff_max_s, self.backoff_initial_s * 2 ** (state.attempt_number - 1))
        self.waited_s += delay
        return delay

    def _before_retry(self, state: RetryCallState) -> None:
        self.retries += 1

    def _retrying(self) -> Retrying:
        return Retrying(stop=stop_after_attempt(self.max_retries + 1), wait=self._wait,
                        retry=retry_if_exception_type(RetryableError), reraise=True, sleep=self.sleep,
                        before_sleep=self._before_retry)

    # --- requests ---------------------------------------------------------------------------------------
    def url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        """Absolute URL of `path` under the base URL."""
        url = path if "://" in path else f"{self.base_url}/{path.lstrip('/')}"
        return url + ("?" + urllib.parse.urlencode(query) if query else "")

    def _pace(self) -> None:
        if self.min_interval_s:
            gap = self._last_request + self.min_interval_s - self.clock()
            if gap > 0:
                self.sleep(gap)
        self._last_request = self.clock()

    def _send(self, method: str, url: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, bytes, Mapping[str, str]]:
        self._pace()
        self.requests += 1
        if urllib.parse.urlsplit(url).netloc == self._host:
            headers = {**headers, "Authorization": f"Bearer {self._key}"}
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.request_timeout_s) as answer:
                return answer.status, answer.read(), answer.headers
        except urllib.error.HTTPError as err:
            return err.code, err.read(), err.headers
        except TimeoutError as err:
            raise RetryableError(self.service, f"no answer to {method} {urllib.parse.urlsplit(url).path} within "
                                               f"{self.request_timeout_s:g} s") from err
        except (urllib.error.URLError, ConnectionError, OSError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise RetryableError(self.service, f"no answer to {method} {urllib.parse.urlsplit(url).path} within "
                                                   f"{self.request_timeout_s:g} s") from err
            raise RetryableError(self.service, f"cannot reach {urllib.parse.urlsplit(url).netloc}: {reason}") from err

    def _once(self, method: str, url: str, body: Any | None) -> Response:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        status, raw, headers_in = self._send(method, url, data, headers)
        trace = headers_in.get("Trace-Id") or headers_in.get("trace-id") or headers_in.get("X-Request-Id")
        if trace:
            self.last_trace_id = trace
        try:
            parsed = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            parsed = None
        if status == 429:
            self.rate_limited += 1
            code, message = self._parse_error(status, parsed)
            raise RetryableError(self.service, f"rate limited: {message}", status=status, code=code, trace_id=trace,
                                 retry_after=retry_after_seconds(headers_in.get("Retry-After")), rate_limited=True)
        if status >= 500:
            code, message = self._parse_error(status, parsed)
            raise RetryableError(self.service, f"server error: {message}", status=status, code=code, trace_id=trace,
                                 retry_after=retry_after_seconds(headers_in.get("Retry-After")))
        if status >= 400:
            code, message = self._parse_error(status, parsed)
            raise HostedServiceError(self.service, message, status=status, code=code, trace_id=trace)
        if parsed is None:
            raise RetryableError(self.service, f"{method} {urllib.parse.urlsplit(url).path} answered {status} without JSON",
                                 status=status, trace_id=trace)
        response = Response(status, parsed, headers_in)
        if self._check is not None:
            try:
                self._check(response)
            except RetryableError as err:
                if err.rate_limited:
                    self.rate_limited += 1
                raise
        return response

    def call(self, method: str, path: str, *, body: Any | None = None, query: Mapping[str, str] | None = None) -> Response:
        """One JSON request, retried as the module docstring says; HostedServiceError when it fails for good."""
        url = self.url(path, query)
        for attempt in self._retrying():
            with attempt:
                return self._once(method, url, body)
        raise AssertionError("unreachable")  # pragma: no cover

    def download(self, url: str) -> bytes:
        """The bytes at `url` (the key is sent only to the service's own host), retried like `call`."""
        def once() -> bytes:
            status, raw, headers = self._send("GET", url, None, {})
            if status == 429:
                self.rate_limited += 1
                raise RetryableError(self.service, "rate limited while downloading the result", status=status,
                                     retry_after=retry_after_seconds(headers.get("Retry-After")), rate_limited=True)
            if status >= 500:
                raise RetryableError(self.service, "server error while downloading the result", status=status)
            if status >= 400:
                raise HostedServiceError(self.service, f"cannot download the result from {urllib.parse.urlsplit(url).netloc}",
                                         status=status)
            return raw

        for attempt in self._retrying():
            with attempt:
                return once()
        raise AssertionError("unreachable")  # pragma: no cover
