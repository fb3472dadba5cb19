"""The judge-writer's tools: read the task contract T and the grounding G, write the judge spec J.

J is written to `judge/draft.json`; freezing it (spec, lock and the ledger's freeze event) is the
harness's job after J passes its acceptance, so a rejected draft never disturbs a frozen judge. The
judge-writer has no tool that reaches the expert (`expert/`), clip, episodes or transcripts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datafarm.agents.access import RoleAccess
from datafarm.agents.tools.base import NoArgs, Tool, ToolArgs, ToolContext, ToolError, ToolOutput
from datafarm.agents.tools.writing import ExtraCheck, guarded_text, validate_and_save, write_output
from datafarm.artifacts.contract import TaskContract, judge_gaps
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.judge import JudgeSpec
from datafarm.errors import InputError
from datafarm.taskdir import TaskDir

JUDGE_DRAFT = "judge/draft.json"
"""Where the judge-writer's J goes (relative to the task folder), before the harness freezes it."""


class WriteJudgeArgs(ToolArgs):
    """The judge spec to write."""

    content: dict[str, Any]
    """The complete judge spec J as a JSON object that validates against its JSON Schema (given in the instructions)."""


def judge_writer_tools(access: RoleAccess, task_dir: TaskDir, *, checks: Sequence[ExtraCheck] = ()) -> list[Tool]:
    """The judge-writer's tools for one task folder. J must also formalize the whole contract
    (`judge_gaps`): every stage in order, every forbidden shortcut, the success hold."""

    def read_contract(_args: NoArgs, _ctx: ToolContext) -> str:
        return guarded_text(access, task_dir.contract, "the task contract has not been written yet")

    def read_grounding(_args: NoArgs, _ctx: ToolContext) -> str:
        return guarded_text(access, task_dir.grounding, "the grounding has not been written yet")

    def covers_contract(spec: Any) -> list[str]:
        path = access.readable(task_dir.contract)
        if not path.is_file():
            return []
        try:
            contract = load_artifact(TaskContract, path)
        except InputError:
            return []  # a broken contract is the contract stage's failure, not the judge's
        return judge_gaps(contract, spec)

    def write_judge(args: WriteJudgeArgs, ctx: ToolContext) -> ToolOutput:
        if "judge" not in ctx.task.writes:
            raise ToolError(f"this stage ({ctx.task.stage.value}) does not write the judge")
        outcome = validate_and_save(
            "judge",
            JudgeSpec,
            args.content,
            task_dir.root / JUDGE_DRAFT,
            access,
            tool="write_judge",
            checks=[covers_contract, *checks],
        )
        return write_output(outcome, ctx)

    return [
        Tool(
            "read_contract",
            "Read the task contract T (YAML): stages, completion conditions, forbidden shortcuts.",
            NoArgs,
            read_contract,
        ),
        Tool(
            "read_grounding",
            "Read the grounding G (JSON): robot, objects and their ids and parts, cameras, table.",
            NoArgs,
            read_grounding,
        ),
        Tool(
            "write_judge",
            "Write the judge spec J as a complete JSON object. It is validated against its schema and must formalize every "
            "stage of the contract in order and every forbidden shortcut; if not, nothing is saved and you get every problem back.",
            WriteJudgeArgs,
            write_judge,
            writes=True,
        ),
    ]
