"""Tools a role's model may call: a name, a description, a pydantic model of the arguments (whose
JSON Schema the model sees) and a handler. A call's arguments are validated before the handler runs;
a refusal (bad arguments, a path the role may not touch, a missing frame) goes back to the model as
an error result, never as an exception out of the conversation."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from datafarm.agents.access import AccessDenied
from datafarm.agents.images import FrameError
from datafarm.agents.messages import ImagePart, TextPart, ToolCall, ToolResult, ToolSpec
from datafarm.errors import DatafarmError

if TYPE_CHECKING:
    from datafarm.agents.conversation import RoleTask
    from datafarm.artifacts.base import Artifact


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown keys refused, field docstrings become descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class NoArgs(ToolArgs):
    """A tool that takes no arguments."""


class ToolError(Exception):
    """A tool refuses a call; the message goes back to the model as an error result."""


@dataclass(frozen=True)
class WriteOutcome:
    """What a write tool did: the validated artifact and where it went, or why it was refused."""

    artifact: str
    """What was written (`grounding`, `contract`, `judge`, `review`...)."""
    ok: bool
    """True when it validated and was saved."""
    value: Artifact | None = None
    """The validated artifact."""
    path: Path | None = None
    """Where it was saved."""
    sha256: str | None = None
    """Hash of the saved file."""
    error: str | None = None
    """Why it was refused (the validation error sent back to the model)."""


@dataclass(frozen=True)
class ToolContext:
    """What a handler may know about the call besides its arguments."""

    role: str
    """The calling role."""
    task: RoleTask
    """The stage task being worked on (which artifacts it may write)."""
    provider: str
    """Provider name of the role."""
    model: str
    """Model name of the role."""


@dataclass
class ToolOutput:
    """A handler's answer."""

    content: list[TextPart | ImagePart]
    """What the model gets back."""
    is_error: bool = False
    """True for a refusal."""
    write: WriteOutcome | None = None
    """Set by write tools."""


Handler = Callable[[Any, ToolContext], "ToolOutput | str | dict | list"]


@dataclass(frozen=True)
class Tool:
    """One tool of a role."""

    name: str
    """Name the model calls it by."""
    description: str
    """What it does, for the model."""
    args: type[ToolArgs]
    """Its arguments."""
    handler: Handler
    """`handler(args, context)`; returns text, JSON-able data, or a ToolOutput."""
    writes: bool = False
    """True for a tool that writes an artifact: any refusal of it (bad arguments included) counts
    against the stage's repair budget, so a model cannot loop on malformed writes."""

    def spec(self) -> ToolSpec:
        """How the model sees it."""
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        schema.pop("description", None)
        schema.setdefault("properties", {})
        return ToolSpec(self.name, self.description, schema)


def _validation_text(error: ValidationError) -> str:
    lines = []
    for e in error.errors(include_url=False)[:20]:
        where = ".".join(str(p) for p in e["loc"]) or "(arguments)"
        lines.append(f"- {where}: {e['msg']}")
    return "\n".join(lines)


def as_output(value: ToolOutput | str | dict | list) -> ToolOutput:
    """A handler's return value as a ToolOutput (data becomes JSON text)."""
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput([TextPart(value)])
    return ToolOutput([TextPart(json.dumps(value, ensure_ascii=False))])


@dataclass
class Toolbox:
    """The tools of one role, by name."""

    tools: dict[str, Tool] = field(default_factory=dict)
    """Name -> tool."""

    @classmethod
    def of(cls, tools: Iterable[Tool]) -> Toolbox:
        """A toolbox from tools (names must be unique)."""
        box = cls()
        for tool in tools:
            if tool.name in box.tools:
                raise ValueError(f"two tools named {tool.name}")
            box.tools[tool.name] = tool
        return box

    @property
    def names(self) -> list[str]:
        """Tool names, in order."""
        return list(self.tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool as the model sees it."""
        return tuple(t.spec() for t in self.tools.values())

    def run(self, call: ToolCall, context: ToolContext) -> tuple[ToolResult, WriteOutcome | None]:
        """Run one call; refusals come back as error results (with a refused WriteOutcome for a write tool)."""
        tool = self.tools.get(call.name)
        if tool is None:
            return self._error(call, f"there is no tool {call.name!r}; the tools are: {', '.join(self.tools)}"), None
        if call.arguments is None:
            return self._refuse(tool, call, "the arguments are not a JSON object; send the arguments as one JSON object")
        try:
            args = tool.args.model_validate(call.arguments)
        except ValidationError as e:
            return self._refuse(tool, call, f"invalid arguments for {tool.name}:\n{_validation_text(e)}")
        try:
            output = as_output(tool.handler(args, context))
        except (ToolError, AccessDenied, FrameError) as e:
            return self._refuse(tool, call, str(e))
        except DatafarmError as e:
            return self._refuse(tool, call, f"{tool.name} failed: {e}")
        result = ToolResult(call.id, call.name, tuple(output.content), output.is_error)
        return result, output.write

    def _refuse(self, tool: Tool, call: ToolCall, message: str) -> tuple[ToolResult, WriteOutcome | None]:
        write = WriteOutcome(tool.name, ok=False, error=message) if tool.writes else None
        return self._error(call, message), write

    @staticmethod
    def _error(call: ToolCall, message: str) -> ToolResult:
        return ToolResult(call.id, call.name, (TextPart(message),), is_error=True)
