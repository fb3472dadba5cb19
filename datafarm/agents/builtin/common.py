"""What every builtin role function needs to read its conversation and to answer through tools.

A builtin role function is stateless: each call gets the whole conversation (`ModelRequest`) and
works out from it where the stage stands (which tools already answered, with what), so the
transcript alone explains every step. It answers with tool calls, like a model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from datafarm.agents.errors import ProviderError
from datafarm.agents.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCall,
    ToolResult,
)

BUILTIN = "builtin"
"""The builtin provider's name and model name."""


class BuiltinRefusal(ProviderError):
    """The builtin agent cannot do what the stage asks (an unsupported task, a stage it has no logic
    for yet, an artifact of its own refused by a checker). Not retryable: the builtin is deterministic,
    so asking again gives the same answer. The conversation records the call (transcript and ledger,
    outcome `error`) before this reaches the caller.

    `stage` is the stage that failed; `route_to` the earliest stage responsible (e.g. `grounding`
    when the task names an object G does not have)."""

    retryable = False

    def __init__(self, message: str, *, stage: str, route_to: str | None = None, kind: str = "unsupported") -> None:
        self.stage = stage
        """Stage the builtin was asked to work."""
        self.route_to = route_to or stage
        """Earliest stage responsible for the failure."""
        self.kind = kind
        """`unsupported` (the request is outside the builtin's task families), `not_built` (no builtin
        logic for the stage yet), `needs_input` (an artifact the stage reads is missing) or `refused`
        (a write of its own was refused)."""
        super().__init__(message, provider=BUILTIN, model=BUILTIN)


# --- reading the conversation ------------------------------------------------------------------------

_KICKOFF_STAGE = re.compile(r"^Stage: ([a-z_]+)\.", re.MULTILINE)
_SYSTEM_STAGE = re.compile(r"^Stage: ([a-z_]+)\s*$", re.MULTILINE)


def stage_of(request: ModelRequest) -> str | None:
    """The stage the conversation works: from the kickoff message (`Stage: contract. ...`), else the
    system prompt's `Stage:` line; None when neither says."""
    for message in request.messages:
        if message.role == "user":
            match = _KICKOFF_STAGE.search(message.text)
            if match:
                return match.group(1)
            break
    match = _SYSTEM_STAGE.search(request.system)
    return match.group(1) if match else None


def kickoff_text(request: ModelRequest) -> str:
    """The first user message (the stage's instructions, including any the caller added)."""
    for message in request.messages:
        if message.role == "user":
            return message.text
    return ""


def prompt_field(request: ModelRequest, name: str, until: str | None = None) -> str | None:
    """The value of a `Name: value` line of the system prompt; with `until`, everything up to the
    line starting with `until:` (values that may span lines, like the task text)."""
    if until is not None:
        match = re.search(rf"^{re.escape(name)}: (.*?)\n{re.escape(until)}: ", request.system, re.MULTILINE | re.DOTALL)
    else:
        match = re.search(rf"^{re.escape(name)}: (.*)$", request.system, re.MULTILINE)
    return match.group(1).strip() if match else None


def task_text(request: ModelRequest) -> str:
    """The request's task text, as the author prompt states it."""
    text = prompt_field(request, "Task", until="Robot")
    if text is None:
        text = prompt_field(request, "Task")
    if not text:
        raise BuiltinRefusal("the author prompt states no task (no `Task:` line)", stage=stage_of(request) or "unknown",
                             kind="needs_input")
    return text


def mode_and_axes(request: ModelRequest) -> tuple[str, dict[str, list[Any]]]:
    """The request's mode and, for `ood`, its allowed appearance variations, as the author prompt states them."""
    line = prompt_field(request, "Mode") or "sim2real"
    mode, _, rest = line.partition(" ")
    axes: dict[str, list[Any]] = {}
    match = re.search(r"allowed appearance variations: (.*)\)\s*$", rest)
    if match:
        for part in match.group(1).split("; "):
            axis, _, values = part.partition(": ")
            parsed: list[Any] = []
            for value in values.split(", "):
                try:
                    parsed.append(float(value))
                except ValueError:
                    parsed.append(value.strip())
            if axis.strip() and parsed:
                axes[axis.strip()] = parsed
    return mode.strip(), axes


def tool_results(request: ModelRequest) -> list[ToolResult]:
    """Every tool result of the conversation, oldest first."""
    return [p for m in request.messages if m.role == "user" for p in m.parts if isinstance(p, ToolResult)]


def latest_results(request: ModelRequest) -> list[ToolResult]:
    """The tool results of the last user message (what the previous answer's calls returned)."""
    for message in reversed(request.messages):
        if message.role == "user":
            return [p for p in message.parts if isinstance(p, ToolResult)]
    return []


def last_result(request: ModelRequest, tool: str) -> ToolResult | None:
    """The most recent result of `tool`, or None when it has not been called."""
    found = [r for r in tool_results(request) if r.name == tool]
    return found[-1] if found else None


def calls_made(request: ModelRequest) -> list[ToolCall]:
    """Every tool call the role made so far, oldest first."""
    return [p for m in request.messages if m.role == "assistant" for p in m.parts if isinstance(p, ToolCall)]


def turn_of(request: ModelRequest) -> int:
    """1 for the first answer of the conversation, +1 per answer."""
    return 1 + sum(1 for m in request.messages if m.role == "assistant")


def answer(request: ModelRequest, text: str, *calls: tuple[str, dict[str, Any]]) -> ModelResponse:
    """A response saying `text` and making `calls` (tool name, arguments), with ids unique in the conversation."""
    turn = turn_of(request)
    parts: list[TextPart | ToolCall] = [TextPart(text)] if text else []
    for i, (name, arguments) in enumerate(calls):
        parts.append(ToolCall(f"builtin_{turn}_{i}", name, arguments, json.dumps(arguments, sort_keys=True)))
    return ModelResponse.of(*parts)


def refused_writes(request: ModelRequest, write_tools: tuple[str, ...]) -> list[ToolResult]:
    """Write calls of the previous answer that were refused."""
    return [r for r in latest_results(request) if r.name in write_tools and r.is_error]
