"""Retrying model calls with tenacity: exponential backoff with jitter on 429, 5xx, timeouts and
connection errors; any other error (a 400, a 401, a bad response) is raised at once.

The SDK clients are built with `max_retries=0`, so this is the only retry layer, and every retry it
makes is recorded (and shown in the transcript of the exchange).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity
from tenacity.wait import wait_base, wait_exponential_jitter

from datafarm.agents.errors import ProviderError
from datafarm.agents.secrets import redact

log = logging.getLogger("datafarm.agents")

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed call is retried."""

    max_attempts: int = 5
    """Most attempts in all (1 means no retry)."""
    initial_wait_s: float = 1.0
    """Wait before the first retry, seconds; doubles each retry."""
    max_wait_s: float = 60.0
    """Longest single wait, seconds (a provider's Retry-After is honoured up to this)."""
    jitter_s: float = 1.0
    """Random extra wait up to this many seconds, so parallel workers do not retry in step."""


@dataclass(frozen=True)
class RetryRecord:
    """One failed attempt that was retried."""

    attempt: int
    """1-based number of the attempt that failed."""
    error: str
    """Why it failed (redacted)."""
    wait_s: float
    """Seconds waited before the next attempt."""

    def to_json(self) -> dict[str, object]:
        """As stored in transcripts."""
        return {"attempt": self.attempt, "error": self.error, "wait_s": round(self.wait_s, 3)}


class _BackoffOrRetryAfter(wait_base):
    """Exponential backoff with jitter, but never shorter than the provider's Retry-After."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._expo = wait_exponential_jitter(
            multiplier=policy.initial_wait_s, max=policy.max_wait_s, exp_base=2, jitter=policy.jitter_s
        )
        self._max = policy.max_wait_s

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        wait = self._expo(retry_state)
        error = retry_state.outcome.exception() if retry_state.outcome else None
        after = getattr(error, "retry_after_s", None)
        if after:
            wait = max(wait, float(after))
        return min(wait, self._max)


def _retryable(error: BaseException) -> bool:
    return isinstance(error, ProviderError) and bool(error.retryable)


def call_with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str = "model call",
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, list[RetryRecord]]:
    """Run `call` under `policy`; return its result and the retries it took.

    Raises the last ProviderError when a non-retryable error occurs or the attempts run out; the
    retries made before that are attached to it as `error.retries`.
    """
    records: list[RetryRecord] = []

    def before_sleep(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        message = redact(str(error))
        records.append(RetryRecord(attempt=state.attempt_number, error=message, wait_s=wait))
        log.warning(
            "%s failed (attempt %d of %d): %s; retrying in %.2f s",
            what,
            state.attempt_number,
            policy.max_attempts,
            message,
            wait,
        )

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max(1, policy.max_attempts)),
        wait=_BackoffOrRetryAfter(policy),
        retry=tenacity.retry_if_exception(_retryable),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )
    try:
        result = retrying(call)
    except ProviderError as error:
        error.retries = list(records)  # type: ignore[attr-defined]
        raise
    return result, records
