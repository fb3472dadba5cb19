"""Role prompts, rendered from K's Jinja2 role templates (`prompts/<role>.md.j2`) with the stage's
skill and the JSON Schemas of what the role writes. Templates are K's; only variables come from the
task. What a template reads about the task folder (the judge-writer's T and G) is read through the
role's own path guard."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from datafarm.agents.access import RoleAccess
from datafarm.agents.tools.base import Tool
from datafarm.agents.tools.writing import guarded_text
from datafarm.artifacts import registry
from datafarm.artifacts.request import Request
from datafarm.capability.bundle import CapabilityBundle
from datafarm.taskdir import TaskDir


def schema_text(schemas: dict[str, dict[str, Any]]) -> str:
    """Compact JSON of one schema, or of a name -> schema mapping when there are several."""
    value: Any = next(iter(schemas.values())) if len(schemas) == 1 else schemas
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _tool_lines(tools: Sequence[Tool]) -> list[dict[str, str]]:
    return [{"name": t.name, "description": t.description} for t in tools]


def author_prompt(
    bundle: CapabilityBundle, request: Request, stage: str, skill: str, writes: Sequence[str], tools: Sequence[Tool]
) -> str:
    """The author's prompt for one stage: task, robot, mode, the stage skill, the schemas to write."""
    return bundle.render(
        "prompts/author.md.j2",
        task=request.task,
        robot=request.robot,
        mode=request.mode,
        ood_axes=request.ood_axes or {},
        stage=stage,
        skill=bundle.skill(skill),
        schema=schema_text({w: registry.json_schema(w) for w in writes}),
        tools=_tool_lines(tools),
    )


def judge_writer_prompt(
    bundle: CapabilityBundle, access: RoleAccess, task_dir: TaskDir, schema: dict[str, Any], tools: Sequence[Tool]
) -> str:
    """The judge-writer's prompt: the judge skill, T and G (read through its guard), J's schema."""
    return bundle.render(
        "prompts/judge_writer.md.j2",
        skill=bundle.skill("judge"),
        contract=guarded_text(access, task_dir.contract, "(not written yet)"),
        grounding=guarded_text(access, task_dir.grounding, "(not written yet)"),
        schema=schema_text({"judge": schema}),
        tools=_tool_lines(tools),
    )


def reviewer_prompt(
    bundle: CapabilityBundle, task_text: str, state_summary: str, schema: dict[str, Any], tools: Sequence[Tool]
) -> str:
    """The reviewer's prompt: the review skill, the task, the sim-state summary, the verdict's schema."""
    return bundle.render(
        "prompts/reviewer.md.j2",
        skill=bundle.skill("review"),
        task=task_text,
        state_summary=state_summary,
        schema=schema_text({"review": schema}),
        tools=_tool_lines(tools),
    )
