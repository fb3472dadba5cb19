"""LLM providers behind one interface and one registry: `builtin` (offline), `openai`, `anthropic`.

`create_provider(name, model, settings, role=)` makes one; `provider_names()` lists them;
`FunctionProvider` is the function-driven stand-in (the builtin provider, and tests' fake model).
"""

from datafarm.agents.providers.base import (
    Provider,
    ProviderSettings,
    ProviderSpec,
    create_provider,
    provider_names,
    provider_spec,
    register_provider,
)
from datafarm.agents.providers.function import FunctionInfo, FunctionProvider, ModelFunction, register_builtin_role

__all__ = [
    "FunctionInfo",
    "FunctionProvider",
    "ModelFunction",
    "Provider",
    "ProviderSettings",
    "ProviderSpec",
    "create_provider",
    "provider_names",
    "provider_spec",
    "register_builtin_role",
    "register_provider",
]
