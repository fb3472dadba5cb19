"""Validating and saving what a role writes: the artifact's pydantic model first, then any checks
the stage adds (e.g. the expert manifest's hash must match the controller file), then an atomic save
to a path the role may write. A refusal is a WriteOutcome whose error text goes back to the same
role, listing every problem with its field and what was expected."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from datafarm.agents.access import RoleAccess
from datafarm.agents.messages import TextPart
from datafarm.agents.tools.base import ToolContext, ToolOutput, WriteOutcome
from datafarm.artifacts.base import Artifact
from datafarm.artifacts.io import save_artifact
from datafarm.hashing import sha256_file
from datafarm.intake.load import problems_from_validation_error

ExtraCheck = Callable[[Artifact], Sequence[str]]
"""A stage's own check of a validated artifact: the problems found (empty when fine)."""

_MAX_PROBLEMS = 30


def _problem_lines(error: ValidationError, model: type[Artifact]) -> list[str]:
    lines = [p.render() for p in problems_from_validation_error(error, model)]
    if len(lines) > _MAX_PROBLEMS:
        lines = lines[:_MAX_PROBLEMS] + [f"... and {len(lines) - _MAX_PROBLEMS} more"]
    return lines


def refusal_text(what: str, problems: Sequence[str], tool: str) -> str:
    """The message a role gets back for an invalid artifact."""
    listed = "\n".join(f"- {p}" for p in problems)
    return (
        f"{what} was NOT written: it does not validate ({len(problems)} problem(s)):\n{listed}\n"
        f"Fix every problem and call {tool} again with the complete artifact."
    )


def validate_and_save(
    what: str,
    model: type[Artifact],
    content: Any,
    path: Path,
    access: RoleAccess,
    *,
    tool: str,
    checks: Sequence[ExtraCheck] = (),
    inject: Mapping[str, Any] | None = None,
) -> WriteOutcome:
    """Validate `content` as `model` (after setting the `inject` fields), run `checks`, save to `path`.

    Raises AccessDenied when the role may not write `path` (a bug in the caller, not the model's
    fault); every other problem is a refused WriteOutcome.
    """
    target = access.writable(path)
    if not isinstance(content, dict):
        problems = [f"the content must be a JSON object (the artifact), got {type(content).__name__}"]
        return WriteOutcome(what, ok=False, error=refusal_text(what, problems, tool))
    data = {**content, **(inject or {})}
    try:
        value = model.model_validate(data)
    except ValidationError as e:
        return WriteOutcome(what, ok=False, error=refusal_text(what, _problem_lines(e, model), tool))
    problems = [p for check in checks for p in check(value)]
    if problems:
        return WriteOutcome(what, ok=False, value=value, error=refusal_text(what, problems, tool))
    save_artifact(value, target)
    return WriteOutcome(what, ok=True, value=value, path=target, sha256=sha256_file(target))


def write_output(outcome: WriteOutcome, context: ToolContext) -> ToolOutput:
    """The tool result for a write: confirmation with the file's hash, or the refusal."""
    if outcome.ok:
        remaining = [w for w in context.task.writes if w != outcome.artifact]
        text = (
            f"{outcome.artifact} validated and saved as {outcome.path.name if outcome.path else '?'} (sha256 {outcome.sha256})."
        )
        if remaining:
            text += f" This stage still needs: {', '.join(remaining)} (unless already written)."
        return ToolOutput([TextPart(text)], write=outcome)
    return ToolOutput([TextPart(outcome.error or "refused")], is_error=True, write=outcome)


def guarded_text(access: RoleAccess, path: Path, missing: str) -> str:
    """The text of a file the role may read; `missing` is returned when it does not exist yet."""
    target = access.readable(path)
    if not target.is_file():
        return missing
    return target.read_text(encoding="utf-8")

