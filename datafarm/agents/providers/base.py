"""The provider interface and the one registry every provider (builtin, openai, anthropic) is in.

A provider turns a `ModelRequest` into a `ModelResponse` in ONE attempt; retries, budgets,
transcripts and the ledger are the conversation's job, so they work the same for every provider.
Providers register under a name with the environment variables they read (in the manner of
`llm`'s plugin registry); `create_provider` is the only way the rest of datafarm makes one.
"""

from __future__ import annotations

import difflib
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from datafarm.agents.messages import ModelRequest, ModelResponse
from datafarm.agents.retry import RetryPolicy
from datafarm.agents.secrets import register_secret_env
from datafarm.errors import InputError, Problem


@runtime_checkable
class Provider(Protocol):
    """A model behind one API: answers one request per call, raising a ProviderError on failure."""

    name: str
    """Provider name as registered (`builtin`, `openai`, `anthropic`) or `function` for a test fake."""
    model: str
    """Model name as configured in the request."""
    price_model: str
    """Name under which K's price table prices this model."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        """One attempt at answering `request`."""
        ...


@dataclass(frozen=True)
class ProviderSettings:
    """How a provider is called (the same for every role unless a caller says otherwise)."""

    timeout_s: float = 120.0
    """Per-call timeout, seconds: a call with no complete answer by then fails (and is retried)."""
    max_output_tokens: int = 8192
    """Most tokens one answer may have."""
    base_url: str | None = None
    """API base URL; None uses the provider's environment variable (OPENAI_BASE_URL, ANTHROPIC_BASE_URL) or its default."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Retry policy for transient failures."""


ProviderFactory = Callable[[str, ProviderSettings, "str | None"], Provider]
"""`factory(model, settings, role) -> Provider`."""


@dataclass(frozen=True)
class ProviderSpec:
    """A registered provider: how to make it and which environment variables it reads."""

    name: str
    """Registry name, as written in a request's `roles.<role>.provider`."""
    factory: ProviderFactory
    """Makes a provider for a model."""
    description: str
    """One line for `datafarm doctor` and error messages."""
    key_env: str | None = None
    """Environment variable holding the API key; None when no key is needed."""
    base_url_env: str | None = None
    """Environment variable that overrides the API base URL, if any."""

    def base_url(self, settings: ProviderSettings) -> str | None:
        """The base URL a call will use when not the provider's default: settings first, then the environment."""
        if settings.base_url:
            return settings.base_url
        if self.base_url_env:
            return os.environ.get(self.base_url_env) or None
        return None


_REGISTRY: dict[str, ProviderSpec] = {}

_BUILTIN_MODULES: tuple[str, ...] = (
    "datafarm.agents.providers.function",
    "datafarm.agents.providers.openai_chat",
    "datafarm.agents.providers.anthropic_messages",
)
"""Modules that register the shipped providers when imported (they import their SDK lazily)."""


def register_provider(
    name: str, *, description: str, key_env: str | None = None, base_url_env: str | None = None
) -> Callable[[ProviderFactory], ProviderFactory]:
    """Decorator registering `factory` as provider `name` (re-registering a name replaces it)."""

    def decorate(factory: ProviderFactory) -> ProviderFactory:
        _REGISTRY[name] = ProviderSpec(
            name=name, factory=factory, description=description, key_env=key_env, base_url_env=base_url_env
        )
        if key_env:
            register_secret_env(key_env)
        return factory

    return decorate


def _load_builtin_providers() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def provider_names() -> list[str]:
    """Names of every registered provider."""
    _load_builtin_providers()
    return sorted(_REGISTRY)


def provider_spec(name: str) -> ProviderSpec:
    """The registered provider `name`; InputError naming the registered ones (and the closest) otherwise."""
    _load_builtin_providers()
    if name in _REGISTRY:
        return _REGISTRY[name]
    close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
    raise InputError(
        [
            Problem(
                f"unknown LLM provider {name!r}",
                field="provider",
                expected="one of: " + ", ".join(sorted(_REGISTRY)),
                hint=f"did you mean '{close[0]}'?" if close else None,
            )
        ]
    )


def create_provider(name: str, model: str, settings: ProviderSettings | None = None, *, role: str | None = None) -> Provider:
    """Make provider `name` for `model` (role given for error messages and the builtin's role logic)."""
    spec = provider_spec(name)
    return spec.factory(model, settings or ProviderSettings(), role)
