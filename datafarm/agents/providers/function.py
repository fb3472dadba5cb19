"""A provider driven by a Python function instead of a language model (in the manner of
pydantic-ai's FunctionModel), and the `builtin` provider built on it.

`FunctionProvider` is deterministic and offline: its "model" is whatever the function computes from
the request. Tests use it as a scripted fake model, under the provider name `function` and a model
name `function:<function name>`, so a transcript can never be mistaken for a real model's. The
`builtin` provider is the same mechanism with datafarm's own per-role logic (the offline default),
so its exchanges go through the same conversation loop, transcripts and ledger as a hosted model.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from datafarm.agents.messages import ImagePart, ModelRequest, ModelResponse, TextPart, ToolCall, ToolResult, Usage
from datafarm.agents.providers.base import ProviderSettings, register_provider
from datafarm.errors import StateError


@dataclass(frozen=True)
class FunctionInfo:
    """What a model function is told besides the request."""

    call_index: int
    """0 for the first call this provider answers, then +1 per call."""
    role: str | None
    """The role the provider serves, when known."""
    model: str
    """The provider's model name."""


ModelFunction = Callable[[ModelRequest, FunctionInfo], "ModelResponse | str"]
"""`function(request, info) -> response`; a plain string answers with that text."""

_IMAGE_TOKENS = 85  # what a low-detail image costs in OpenAI's accounting; a fair flat estimate


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token), for functions that report no usage."""
    return max(1, (len(text) + 3) // 4) if text else 0


def estimate_request_tokens(request: ModelRequest) -> int:
    """Rough input tokens of a request (text, images at a flat rate, tool schemas)."""
    total = estimate_tokens(request.system)
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                total += estimate_tokens(part.text)
            elif isinstance(part, ImagePart):
                total += _IMAGE_TOKENS
            elif isinstance(part, ToolCall):
                total += estimate_tokens(part.raw_arguments or json.dumps(part.arguments))
            elif isinstance(part, ToolResult):
                total += estimate_tokens(part.text) + _IMAGE_TOKENS * sum(isinstance(p, ImagePart) for p in part.content)
    total += sum(estimate_tokens(json.dumps(t.parameters)) for t in request.tools)
    return total


def estimate_response_tokens(response: ModelResponse) -> int:
    """Rough output tokens of a response."""
    total = 0
    for part in response.parts:
        if isinstance(part, TextPart):
            total += estimate_tokens(part.text)
        else:
            total += estimate_tokens(part.raw_arguments or json.dumps(part.arguments))
    return total


class FunctionProvider:
    """A deterministic stand-in for a model: `function(request, info)` computes each answer.

    Not a language model. Usage the function does not report is estimated from the text length so
    token budgets still apply; cost is priced under `price_model` (default `builtin`, which is free).
    """

    def __init__(
        self,
        function: ModelFunction,
        *,
        name: str = "function",
        model: str | None = None,
        price_model: str = "builtin",
        role: str | None = None,
    ) -> None:
        self.function = function
        """The function that answers."""
        self.name = name
        """Provider name (`function` for a test fake, `builtin` for datafarm's own logic)."""
        self.model = model or f"function:{getattr(function, '__name__', 'anonymous')}"
        """Model name shown in transcripts and the ledger."""
        self.price_model = price_model
        """Name under which K's price table prices the calls."""
        self.role = role
        """Role served, passed to the function."""
        self.calls = 0
        """Calls answered so far."""

    def __repr__(self) -> str:
        return f"FunctionProvider(name={self.name!r}, model={self.model!r})"

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the function; fill in usage estimates it did not give."""
        info = FunctionInfo(call_index=self.calls, role=self.role, model=self.model)
        self.calls += 1
        answer = self.function(request, info)
        response = ModelResponse.of(answer) if isinstance(answer, str) else answer
        if response.usage.total == 0:
            usage = Usage(estimate_request_tokens(request), estimate_response_tokens(response))
            response = ModelResponse(
                parts=response.parts,
                usage=usage,
                stop_reason=response.stop_reason,
                model=self.model,
                response_id=response.response_id,
            )
        elif not response.model:
            response = ModelResponse(
                parts=response.parts,
                usage=response.usage,
                stop_reason=response.stop_reason,
                model=self.model,
                response_id=response.response_id,
            )
        return response


# --- builtin: datafarm's own offline role logic ------------------------------------------------------

BUILTIN_ROLE_FUNCTIONS: dict[str, str] = {
    "author": "datafarm.agents.builtin.author:author",
    "judge_writer": "datafarm.agents.builtin.judge_writer:respond",
    "reviewer": "datafarm.agents.builtin.reviewer:respond",
}
"""Role -> `module:function` of the builtin provider's logic for it, imported when first used.
Filled as the builtin task logic lands (the builtin author, judge-writer and reviewer)."""

_BUILTIN_LOADED: dict[str, ModelFunction] = {}


def register_builtin_role(role: str, function: ModelFunction) -> None:
    """Use `function` as the builtin provider's logic for `role`."""
    _BUILTIN_LOADED[role] = function


def builtin_function(role: str | None) -> ModelFunction:
    """The builtin logic for `role`; StateError when there is none yet."""
    if role in _BUILTIN_LOADED:
        return _BUILTIN_LOADED[role]
    target = BUILTIN_ROLE_FUNCTIONS.get(role or "")
    if target is None:
        raise StateError(
            f"the builtin provider has no logic for the {role or 'unnamed'} role yet; "
            f"choose openai or anthropic for roles.{role} in the request"
        )
    module, _, attr = target.partition(":")
    function = getattr(importlib.import_module(module), attr)
    _BUILTIN_LOADED[role or ""] = function
    return function


@register_provider("builtin", description="offline and deterministic: datafarm's own logic per role, no key, no cost")
def _builtin(model: str, settings: ProviderSettings, role: str | None) -> FunctionProvider:
    return FunctionProvider(builtin_function(role), name="builtin", model=model or "builtin", price_model="builtin", role=role)
