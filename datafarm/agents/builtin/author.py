"""The builtin author: one role function that works whichever author stage the conversation is in,
by handing the request to that stage's builtin module.

| stage | module (`datafarm.agents.builtin.<module>`) |
| --- | --- |
| grounding | `grounding` |
| contract | `contract` |
| expert | `expert` |
| render | `render` |

A stage module exposes `respond(request: ModelRequest, info: FunctionInfo) -> ModelResponse`: it
reads the conversation so far (the tools' results included) and answers with tool calls of the
author's tools, like a model. A stage whose module does not exist yet is refused with "builtin
<stage> is not built yet" (BuiltinRefusal, recorded in the transcript and ledger like any call).
"""

from __future__ import annotations

import importlib

from datafarm.agents.builtin.common import BuiltinRefusal, stage_of
from datafarm.agents.messages import ModelRequest, ModelResponse
from datafarm.agents.providers.function import FunctionInfo, ModelFunction

STAGE_MODULES: dict[str, str] = {
    "grounding": "datafarm.agents.builtin.grounding",
    "contract": "datafarm.agents.builtin.contract",
    "expert": "datafarm.agents.builtin.expert",
    "render": "datafarm.agents.builtin.render",
}
"""Author stage -> the module holding its builtin logic."""
ENTRY_POINTS = ("respond", "author")
"""Names a stage module's role function may have, in the order they are looked up."""


def stage_function(stage: str) -> ModelFunction:
    """The builtin role function of an author stage; BuiltinRefusal when there is none (yet)."""
    target = STAGE_MODULES.get(stage)
    if target is None:
        raise BuiltinRefusal(f"the author has no stage {stage!r}; its stages: {', '.join(STAGE_MODULES)}", stage=stage,
                             kind="not_built")
    try:
        module = importlib.import_module(target)
    except ModuleNotFoundError as e:
        if e.name == target:  # the stage's own module is missing, not one it imports
            raise BuiltinRefusal(
                f"builtin {stage} is not built yet ({target} does not exist); choose openai or anthropic for "
                "roles.author in the request", stage=stage, kind="not_built") from None
        raise
    for name in ENTRY_POINTS:
        function = getattr(module, name, None)
        if callable(function):
            return function
    raise BuiltinRefusal(f"builtin {stage} is not built yet ({target} has no {' or '.join(ENTRY_POINTS)} function)",
                         stage=stage, kind="not_built")


def author(request: ModelRequest, info: FunctionInfo) -> ModelResponse:
    """The builtin author's role function: dispatch to the stage the conversation works on."""
    stage = stage_of(request)
    if stage is None:
        raise BuiltinRefusal("the conversation names no stage (no `Stage: <name>.` in the first message or the prompt)",
                             stage="unknown", kind="needs_input")
    return stage_function(stage)(request, info)
