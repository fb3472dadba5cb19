"""LLM roles (author, judge-writer, reviewer) and their providers (builtin, openai, anthropic).

- `TaskAgents.open(request, task_dir)` assembles the roles of a task; `.author()`, `.judge_writer()`,
  `.reviewer(material)` give a `RoleAgent` whose `run(RoleTask)` works one stage.
- `providers`: the one registry (`create_provider`), `FunctionProvider` (function-driven, offline).
- `cost_report(task_dir)` and `doctor(request)` back `datafarm cost` and `datafarm doctor`
  (`commands.cost_command`, `commands.doctor_command`).

Names are imported on first use, so `import datafarm.agents.commands` (the CLI) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "ROLES": "access",
    "AccessDenied": "access",
    "RoleAccess": "access",
    "TaskBudget": "budget",
    "RoleAgent": "conversation",
    "RoleResult": "conversation",
    "RoleTask": "conversation",
    "CostReport": "cost",
    "cost_report": "cost",
    "DoctorReport": "doctor",
    "doctor": "doctor",
    "BudgetExhausted": "errors",
    "MissingKeyError": "errors",
    "ProviderError": "errors",
    "ProviderHTTPError": "errors",
    "ProviderTimeout": "errors",
    "StageFailed": "errors",
    "FunctionProvider": "providers",
    "ProviderSettings": "providers",
    "create_provider": "providers",
    "provider_names": "providers",
    "RetryPolicy": "retry",
    "AUTHOR_STAGE_WRITES": "roles",
    "TaskAgents": "roles",
    "author_task": "roles",
    "judge_task": "roles",
    "review_task": "roles",
    "ReviewMaterial": "tools",
}
"""Public name -> submodule of datafarm.agents that defines it."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'datafarm.agents' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"datafarm.agents.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
