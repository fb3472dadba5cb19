"""Turning an official SDK's exception into datafarm's ProviderError, keeping the provider's own
error message as it was sent.

Both SDKs (openai, anthropic) share one exception shape: `APITimeoutError` (a kind of
`APIConnectionError`), `APIConnectionError`, and `APIStatusError` carrying the HTTP status, the
response and its parsed body. Callers convert inside `except` and raise *after* the block, so the SDK
exception (and the request it references) is not chained onto ours.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

from datafarm.agents.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
    ProviderTimeout,
)

_MAX_BODY_CHARS = 2000


def _retry_after_s(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds form only), when present and sane."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date: the exponential backoff applies instead
        if 0 <= seconds <= 600:
            return seconds
    return None


def _error_fields(body: Any, response_text: str) -> tuple[str | None, str]:
    """(error type, message) from an error body of either provider, falling back to the raw text."""
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        message = inner.get("message")
        kind = inner.get("type") or inner.get("code")
        if isinstance(message, str):
            return (str(kind) if kind else None), message
    text = response_text.strip() or (json.dumps(body) if body is not None else "")
    return None, text[:_MAX_BODY_CHARS]


def convert_sdk_error(sdk: ModuleType, error: Exception, *, provider: str, model: str, timeout_s: float) -> ProviderError | None:
    """The ProviderError for an SDK exception, or None when `error` is not one of the SDK's API errors."""
    if isinstance(error, sdk.APITimeoutError):
        return ProviderTimeout(
            f"{provider} {model}: no answer within the {timeout_s:g} s timeout", provider=provider, model=model
        )
    if isinstance(error, sdk.APIConnectionError):
        cause = type(error.__cause__).__name__ if error.__cause__ else "connection failed"
        return ProviderConnectionError(f"{provider} {model}: cannot reach the API ({cause})", provider=provider, model=model)
    if isinstance(error, sdk.APIStatusError):
        response = error.response
        try:
            text = response.text
        except Exception:  # a streamed or closed body
            text = ""
        kind, message = _error_fields(error.body, text)
        status = int(error.status_code)
        label = f"HTTP {status}" + (f" {kind}" if kind else "")
        return ProviderHTTPError(
            f"{provider} {model}: {label}: {message}",
            provider=provider,
            model=model,
            status=status,
            error_type=kind,
            retry_after_s=_retry_after_s(response.headers),
        )
    if isinstance(error, sdk.APIResponseValidationError):
        return ProviderResponseError(f"{provider} {model}: the API's answer did not validate", provider=provider, model=model)
    return None
