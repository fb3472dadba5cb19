"""Provider-neutral conversation types: what a role sends to a model and what comes back.

Every provider (builtin, openai, anthropic) translates these to and from its own wire format, so
the conversation loop, the tools, the transcripts and the cost accounting never depend on one SDK.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from datafarm.hashing import sha256_bytes


@dataclass(frozen=True)
class TextPart:
    """Plain text."""

    text: str
    """The text."""


@dataclass(frozen=True)
class ImagePart:
    """An image (a clip frame, a rendered frame) sent to a vision-capable model."""

    data: bytes
    """Encoded image bytes."""
    media_type: str = "image/png"
    """MIME type of `data`."""
    label: str = ""
    """What the image shows, e.g. `front frame 12` (for transcripts and for models without vision)."""

    @property
    def sha256(self) -> str:
        """Content hash of the image bytes."""
        return sha256_bytes(self.data)

    def base64(self) -> str:
        """`data` as base64 text, as both wire formats want it."""
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        """`data:<media type>;base64,...` (OpenAI's image_url form)."""
        return f"data:{self.media_type};base64,{self.base64()}"


@dataclass(frozen=True)
class ToolCall:
    """The model asks for one tool to run."""

    id: str
    """Provider-assigned id that the tool's result must quote."""
    name: str
    """Tool name."""
    arguments: dict[str, Any] | None
    """Parsed JSON arguments; None when the model sent arguments that are not a JSON object."""
    raw_arguments: str = ""
    """The arguments exactly as sent (OpenAI sends a JSON string), kept for the transcript."""


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned for one call (text and images), or the error it raised."""

    call_id: str
    """The `ToolCall.id` it answers."""
    name: str
    """Tool name."""
    content: tuple[TextPart | ImagePart, ...]
    """What the tool returned."""
    is_error: bool = False
    """True when the call was refused or failed; `content` then says why."""

    @property
    def text(self) -> str:
        """The text parts joined (images named by their label)."""
        out = []
        for part in self.content:
            out.append(part.text if isinstance(part, TextPart) else f"[image: {part.label or part.media_type}]")
        return "\n".join(out)


Part = Union[TextPart, ImagePart, ToolCall, ToolResult]
"""Anything a message can hold: user messages hold text, images and tool results; assistant
messages hold text and tool calls."""


@dataclass(frozen=True)
class Message:
    """One turn of a conversation."""

    role: Literal["user", "assistant"]
    """Who speaks. The system prompt is not a message (see `ModelRequest.system`)."""
    parts: tuple[Part, ...]
    """What was said, in order."""

    @classmethod
    def user(cls, *parts: Part | str) -> Message:
        """A user message; plain strings become text parts."""
        return cls("user", tuple(TextPart(p) if isinstance(p, str) else p for p in parts))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls in this message."""
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def text(self) -> str:
        """The text parts joined by newlines."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, what it does, the JSON Schema of its arguments."""

    name: str
    """Tool name (letters, digits, underscores)."""
    description: str
    """What it does and when to use it."""
    parameters: dict[str, Any]
    """JSON Schema of the arguments object."""


@dataclass(frozen=True)
class ModelRequest:
    """One call to a model: the whole conversation so far plus what the model may do."""

    system: str
    """The system prompt (the role prompt rendered from K)."""
    messages: tuple[Message, ...]
    """The conversation, oldest first; the first message is from the user."""
    tools: tuple[ToolSpec, ...] = ()
    """Tools the model may call."""
    max_output_tokens: int = 4096
    """Most tokens the model may generate."""
    output_schema: dict[str, Any] | None = None
    """When set, a JSON Schema the text answer must follow (structured output, where the API has it)."""
    output_name: str = "answer"
    """Name of `output_schema` (OpenAI requires one)."""


@dataclass(frozen=True)
class Usage:
    """Tokens one call was billed for."""

    input_tokens: int = 0
    """Prompt tokens (including any cached prompt tokens the provider bills)."""
    output_tokens: int = 0
    """Completion tokens."""

    @property
    def total(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ModelResponse:
    """What the model answered: text and/or tool calls, with its token usage."""

    parts: tuple[TextPart | ToolCall, ...]
    """Text and tool calls, in the order the model produced them."""
    usage: Usage = field(default_factory=Usage)
    """Tokens billed."""
    stop_reason: str = ""
    """Why generation stopped, as the provider says (`tool_calls`, `tool_use`, `stop`, `end_turn`...)."""
    model: str = ""
    """The model that answered, as the provider reports it (may carry a date suffix)."""
    response_id: str = ""
    """The provider's id of the response, for support requests."""

    @classmethod
    def of(cls, *parts: TextPart | ToolCall | str, usage: Usage | None = None) -> ModelResponse:
        """A response from parts; strings become text (handy for function-driven models)."""
        built = tuple(TextPart(p) if isinstance(p, str) else p for p in parts)
        return cls(
            parts=built,
            usage=usage or Usage(),
            stop_reason="tool_calls" if any(isinstance(p, ToolCall) for p in built) else "stop",
        )

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls, in order."""
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def text(self) -> str:
        """The text parts joined by newlines."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    def as_message(self) -> Message:
        """The response as the assistant turn of the conversation."""
        return Message("assistant", tuple(self.parts))
