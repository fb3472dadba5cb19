"""What the SDK-backed providers (`openai`, `anthropic`) share: the key read from the environment only
and passed explicitly, the client built with the provider's base URL and the SDK's own retries off
(datafarm.agents.retry retries), any key value redacted from what is sent, and SDK exceptions turned
into datafarm's ProviderErrors without chaining them (a chained SDK exception carries the request).

A subclass names its SDK module, client and error classes, and supplies `to_wire` / `from_wire` and
the one SDK call (`_send`).
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

from datafarm.agents.errors import MissingKeyError, ProviderError, ProviderResponseError
from datafarm.agents.messages import ModelRequest, ModelResponse
from datafarm.agents.providers.base import ProviderSettings, provider_spec
from datafarm.agents.providers.sdk_errors import convert_sdk_error
from datafarm.agents.secrets import read_key, redact_obj


class SdkProvider:
    """Base of a provider that calls a vendor's official SDK once per `complete`."""

    name: ClassVar[str]
    """Provider name (the registry's)."""
    key_env: ClassVar[str]
    """The only environment variable the API key is read from."""
    sdk_module: ClassVar[str]
    """Import name of the SDK."""
    client_class: ClassVar[str]
    """The SDK's client class."""
    error_class: ClassVar[str]
    """The SDK's base exception class."""

    def __init__(self, model: str, settings: ProviderSettings, role: str | None = None) -> None:
        sdk = importlib.import_module(self.sdk_module)
        key = read_key(self.key_env)
        if key is None:
            raise MissingKeyError(self.name, self.key_env, role)
        self.model = model
        """Model name as the vendor spells it."""
        self.price_model = model
        """Priced under its own name."""
        self.settings = settings
        """Timeout, token limit, base URL."""
        self._sdk = sdk
        self._client = getattr(sdk, self.client_class)(
            api_key=key,
            base_url=provider_spec(self.name).base_url(settings),
            timeout=settings.timeout_s,
            max_retries=0,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    @staticmethod
    def to_wire(request: ModelRequest, model: str) -> dict[str, Any]:
        """The SDK call's keyword arguments for `request`."""
        raise NotImplementedError

    @staticmethod
    def from_wire(answer: Any, model: str) -> ModelResponse:
        """The SDK's answer as a ModelResponse."""
        raise NotImplementedError

    def _send(self, **kwargs: Any) -> Any:
        """The one SDK call."""
        raise NotImplementedError

    def complete(self, request: ModelRequest) -> ModelResponse:
        """One call (any API key value is redacted from what is sent: a key a model echoed would
        otherwise reach the SDK's DEBUG log of request bodies)."""
        failure: ProviderError | None = None
        try:
            answer = self._send(**redact_obj(self.to_wire(request, self.model)))
        except getattr(self._sdk, self.error_class) as error:
            failure = convert_sdk_error(self._sdk, error, provider=self.name, model=self.model,
                                        timeout_s=self.settings.timeout_s)
            if failure is None:
                failure = ProviderResponseError(f"{self.name} {self.model}: {type(error).__name__}",
                                                provider=self.name, model=self.model)
        if failure is not None:
            raise failure  # outside the except block: the SDK exception is not chained
        return self.from_wire(answer, self.model)
