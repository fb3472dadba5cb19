"""The `anthropic` provider: Anthropic's Messages API through the official `anthropic` SDK.

Tools are `tools` with an `input_schema`; the model's `tool_use` blocks are answered by
`tool_result` blocks (which may hold images) at the start of the next user turn. Images are base64
`image` blocks. Structured output uses `output_config.format` (json_schema). The key comes from
ANTHROPIC_API_KEY only, passed explicitly so the SDK consults no profile or config file; the base
URL from settings, then ANTHROPIC_BASE_URL. The SDK's own retries are off.
"""

from __future__ import annotations

from typing import Any

from datafarm.agents.errors import ProviderResponseError
from datafarm.agents.messages import (
    ImagePart,
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
)
from datafarm.agents.providers.base import ProviderSettings, register_provider
from datafarm.agents.providers.sdk_provider import SdkProvider

NAME = "anthropic"
KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"


def _image_block(image: ImagePart) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": image.base64()}}


def _blocks(message: Message) -> list[dict[str, Any]]:
    """Content blocks of one message; tool results first, as the API requires."""
    results: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResult):
            content: list[dict[str, Any]] = []
            for p in part.content:
                content.append({"type": "text", "text": p.text} if isinstance(p, TextPart) else _image_block(p))
            if not content:
                content.append({"type": "text", "text": "(no output)"})
            results.append({"type": "tool_result", "tool_use_id": part.call_id, "content": content, "is_error": part.is_error})
        elif isinstance(part, TextPart):
            if part.text:
                others.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            others.append(_image_block(part))
        elif isinstance(part, ToolCall):
            others.append({"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments or {}})
    return results + others


def to_wire(request: ModelRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of `client.messages.create` for `request` (consecutive turns of one
    speaker merged, since the API alternates user and assistant)."""
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        blocks = _blocks(message)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == message.role:
            merged = messages[-1]["content"] + blocks
            # tool_result blocks must still come first in a merged user turn
            messages[-1]["content"] = [b for b in merged if b["type"] == "tool_result"] + [
                b for b in merged if b["type"] != "tool_result"
            ]
        else:
            messages.append({"role": message.role, "content": blocks})
    kwargs: dict[str, Any] = {"model": model, "max_tokens": request.max_output_tokens, "messages": messages}
    if request.system:
        kwargs["system"] = request.system
    if request.tools:
        kwargs["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools]
    if request.output_schema is not None:
        kwargs["output_config"] = {"format": {"type": "json_schema", "schema": request.output_schema}}
    return kwargs


def from_wire(message: Any, model: str) -> ModelResponse:
    """A ModelResponse from a Message object."""
    parts: list[TextPart | ToolCall] = []
    for block in getattr(message, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(TextPart(block.text))
        elif kind == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else None
            parts.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
    usage = getattr(message, "usage", None)
    if usage is None:
        raise ProviderResponseError(f"{NAME} {model}: the answer has no usage", provider=NAME, model=model)
    # Cached prompt tokens are billed too (at other rates); counting them as input keeps budgets safe.
    input_tokens = sum(
        int(getattr(usage, name, 0) or 0) for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return ModelResponse(
        parts=tuple(parts),
        usage=Usage(input_tokens, int(getattr(usage, "output_tokens", 0) or 0)),
        stop_reason=str(getattr(message, "stop_reason", "") or ""),
        model=str(getattr(message, "model", "") or model),
        response_id=str(getattr(message, "id", "") or ""),
    )


class AnthropicMessagesProvider(SdkProvider):
    """Anthropic Messages via the official SDK (one attempt per `complete`)."""

    name = NAME
    key_env = KEY_ENV
    sdk_module = "anthropic"
    client_class = "Anthropic"
    error_class = "AnthropicError"
    to_wire = staticmethod(to_wire)
    from_wire = staticmethod(from_wire)

    def _send(self, **kwargs: Any) -> Any:
        return self._client.messages.create(**kwargs)


@register_provider(
    NAME,
    description="Anthropic Messages (official SDK): tool use, images, structured output",
    key_env=KEY_ENV,
    base_url_env=BASE_URL_ENV,
)
def _anthropic(model: str, settings: ProviderSettings, role: str | None) -> AnthropicMessagesProvider:
    return AnthropicMessagesProvider(model, settings, role)
