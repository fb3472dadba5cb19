"""Errors of the agent layer: what a provider call can fail with (and whether to retry it), a spent
budget, and a stage whose role could not produce a valid artifact.

Provider errors are built from the SDK's exception *after* leaving the SDK's `except` block, so no
SDK exception (whose request may hold headers) rides along as `__context__`; every message passes
through `secrets.redact` before it is stored.
"""

from __future__ import annotations

from datafarm.errors import DatafarmError, InputError, Problem, StateError


class ProviderError(DatafarmError):
    """A model call failed. `retryable` says whether the retry layer may try again."""

    retryable: bool = False

    def __init__(self, message: str, *, provider: str, model: str, retry_after_s: float | None = None) -> None:
        from datafarm.agents.secrets import redact

        self.provider = provider
        """Provider that failed."""
        self.model = model
        """Model that was asked."""
        self.retry_after_s = retry_after_s
        """Seconds the provider asked us to wait (a Retry-After header), when it said."""
        super().__init__(redact(message))


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error status; the message is the provider's own, as sent."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        status: int,
        error_type: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        self.status = status
        """HTTP status code."""
        self.error_type = error_type
        """The provider's error type or code (`rate_limit_error`, `invalid_request_error`...), when given."""
        super().__init__(message, provider=provider, model=model, retry_after_s=retry_after_s)

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        """429 and every 5xx (529 overloaded included) are transient; other 4xx are our request's fault."""
        return self.status == 429 or self.status >= 500


class ProviderTimeout(ProviderError):
    """No complete answer within the per-call timeout."""

    retryable = True


class ProviderConnectionError(ProviderError):
    """The provider could not be reached (refused, reset, DNS)."""

    retryable = True


class ProviderResponseError(ProviderError):
    """The provider answered 2xx with something that is not a valid response."""


class MissingKeyError(InputError):
    """A hosted provider was chosen but its API key's environment variable is not set."""

    def __init__(self, provider: str, env_var: str, role: str | None = None) -> None:
        where = f"roles.{role}.provider" if role else "provider"
        super().__init__(
            [
                Problem(
                    f"provider {provider} needs an API key but {env_var} is not set",
                    field=where,
                    expected=f"the environment variable {env_var}",
                    hint=f"export {env_var}=... in the shell that runs datafarm (keys are never read from files)",
                )
            ]
        )


class BudgetExhausted(StateError):
    """The task's LLM token or dollar budget is spent; the stage stops cleanly (recorded in the ledger)."""


class StageFailed(DatafarmError):
    """A role could not produce a valid artifact within its repair budget (or turn limit).

    `last_error` is the validation error (or other reason) of the final attempt."""

    def __init__(self, message: str, *, stage: str, role: str, last_error: str) -> None:
        from datafarm.agents.secrets import redact

        self.stage = stage
        """Stage that failed."""
        self.role = role
        """Role that could not produce the artifact."""
        self.last_error = redact(last_error)
        """Why the last attempt was refused."""
        super().__init__(redact(message))
