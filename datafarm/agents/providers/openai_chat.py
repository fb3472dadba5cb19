"""The `openai` provider: OpenAI's Chat Completions API through the official `openai` SDK.

Tool calls are `tools` of type `function`; images go as `image_url` parts holding a data URL.
Chat Completions only allows text in a `tool` message, so images a tool returned follow the tool
messages in one user message that names the calls they came from. Structured output uses
`response_format: json_schema`. The key comes from OPENAI_API_KEY only; the base URL from settings,
then OPENAI_BASE_URL. The SDK's own retries are off (datafarm.agents.retry retries).
"""

from __future__ import annotations

import json
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

NAME = "openai"
KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"


def _user_messages(message: Message) -> list[dict[str, Any]]:
    """A user turn: tool results become `tool` messages (text only), the rest one `user` message."""
    out: list[dict[str, Any]] = []
    result_images: list[tuple[ToolResult, ImagePart]] = []
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResult):
            text = "\n".join(p.text for p in part.content if isinstance(p, TextPart))
            images = [p for p in part.content if isinstance(p, ImagePart)]
            if images:
                text += ("\n" if text else "") + f"({len(images)} image(s) follow in the next user message)"
            if part.is_error:
                text = "ERROR: " + text
            out.append({"role": "tool", "tool_call_id": part.call_id, "content": text or "(no output)"})
            result_images += [(part, img) for img in images]
        elif isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "image_url", "image_url": {"url": part.data_url()}})
    if result_images:
        parts: list[dict[str, Any]] = []
        for result, image in result_images:
            parts.append({"type": "text", "text": f"Image from tool call {result.call_id} ({result.name}): {image.label}"})
            parts.append({"type": "image_url", "image_url": {"url": image.data_url()}})
        out.append({"role": "user", "content": parts})
    if content:
        if all(c["type"] == "text" for c in content):
            out.append({"role": "user", "content": "\n\n".join(c["text"] for c in content)})
        else:
            out.append({"role": "user", "content": content})
    return out


def _assistant_message(message: Message) -> dict[str, Any]:
    text = message.text
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": c.raw_arguments or json.dumps(c.arguments or {})},
        }
        for c in message.tool_calls
    ]
    body: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        body["tool_calls"] = calls
    return body


def to_wire(request: ModelRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of `client.chat.completions.create` for `request`."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    for message in request.messages:
        messages += _user_messages(message) if message.role == "user" else [_assistant_message(message)]
    kwargs: dict[str, Any] = {"model": model, "messages": messages, "max_completion_tokens": request.max_output_tokens}
    if request.tools:
        kwargs["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]
    if request.output_schema is not None:
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": request.output_name, "schema": request.output_schema, "strict": False},
        }
    return kwargs


def from_wire(completion: Any, model: str) -> ModelResponse:
    """A ModelResponse from a ChatCompletion object."""
    if not getattr(completion, "choices", None):
        raise ProviderResponseError(f"{NAME} {model}: the answer has no choices", provider=NAME, model=model)
    choice = completion.choices[0]
    message = choice.message
    parts: list[TextPart | ToolCall] = []
    if message.content:
        parts.append(TextPart(message.content))
    refusal = getattr(message, "refusal", None)
    if refusal:
        parts.append(TextPart(f"(refusal) {refusal}"))
    for call in message.tool_calls or []:
        function = getattr(call, "function", None)
        if function is None:  # a custom (non-function) tool call: not something datafarm offers
            continue
        raw = function.arguments or ""
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            parsed = None
        parts.append(
            ToolCall(id=call.id, name=function.name, arguments=parsed if isinstance(parsed, dict) else None, raw_arguments=raw)
        )
    usage = completion.usage
    return ModelResponse(
        parts=tuple(parts),
        usage=Usage(int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)),
        stop_reason=str(choice.finish_reason or ""),
        model=str(getattr(completion, "model", "") or model),
        response_id=str(getattr(completion, "id", "") or ""),
    )


class OpenAIChatProvider(SdkProvider):
    """OpenAI Chat Completions via the official SDK (one attempt per `complete`)."""

    name = NAME
    key_env = KEY_ENV
    sdk_module = "openai"
    client_class = "OpenAI"
    error_class = "OpenAIError"
    to_wire = staticmethod(to_wire)
    from_wire = staticmethod(from_wire)

    def _send(self, **kwargs: Any) -> Any:
        return self._client.chat.completions.create(**kwargs)


@register_provider(
    NAME,
    description="OpenAI Chat Completions (official SDK): tool calls, images, structured output",
    key_env=KEY_ENV,
    base_url_env=BASE_URL_ENV,
)
def _openai(model: str, settings: ProviderSettings, role: str | None) -> OpenAIChatProvider:
    return OpenAIChatProvider(model, settings, role)
