"""The builtin provider's own role logic: a deterministic, offline agent that plays the author and
the judge-writer through the same tools, validation, transcripts and ledger as a language model.

Importing this package registers its role functions with the builtin provider
(`datafarm.agents.providers.register_builtin_role`):

- `author`: `author.author`, which dispatches by stage to the modules `grounding`, `contract`,
  `expert`, `render` (each with `respond(request, info)`);
- `judge_writer`: `judge_writer.respond`, which reads T and G and writes J.

Plain functions for compile and tests: `read_task` (text + G -> family, roles, parameters),
`contract_for`, `sampler_for`, `default_batch`, `judge_for`. A builtin role that cannot do its
stage raises `BuiltinRefusal` (a non-retryable ProviderError naming why, with `stage` and `route_to`).
"""

from __future__ import annotations

from datafarm.agents.builtin import author as _author
from datafarm.agents.builtin import judge_writer as _judge_writer
from datafarm.agents.builtin.common import BuiltinRefusal
from datafarm.agents.builtin.contract import contract_for, default_batch, sampler_for
from datafarm.agents.builtin.judge_writer import judge_for
from datafarm.agents.builtin.reading import (
    FAMILIES,
    TaskNotSupported,
    TaskReading,
    read_task,
)
from datafarm.agents.providers.function import register_builtin_role

BUILTIN_ROLES = {"author": _author.author, "judge_writer": _judge_writer.respond}
"""Role -> the builtin role function."""


def register() -> None:
    """Make these the builtin provider's logic for the author and judge-writer roles."""
    for role, function in BUILTIN_ROLES.items():
        register_builtin_role(role, function)


register()

__all__ = [
    "BUILTIN_ROLES",
    "FAMILIES",
    "BuiltinRefusal",
    "TaskNotSupported",
    "TaskReading",
    "contract_for",
    "default_batch",
    "judge_for",
    "read_task",
    "register",
    "sampler_for",
]
