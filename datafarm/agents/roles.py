"""The three roles of a task, assembled: each with the provider and model the request chose for it,
its own path guard, tools and K prompt, and a share of the task's one budget.

    agents = TaskAgents.open(request, task_dir)
    result = agents.author().run(author_task(Stage.grounding))
    grounding = result.artifact("grounding")

Roles never share a conversation, a toolbox or a path guard; what one role may not reach, no tool of
it reaches (datafarm.agents.access).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from datafarm import capability
from datafarm.agents.access import ExternalRoot, RoleAccess
from datafarm.agents.budget import TaskBudget
from datafarm.agents.conversation import RoleAgent, RoleTask
from datafarm.agents.prompts import author_prompt, judge_writer_prompt, reviewer_prompt
from datafarm.agents.providers.base import Provider, ProviderSettings, create_provider
from datafarm.agents.tools.author import RolloutFunction, author_tools
from datafarm.agents.tools.base import Toolbox
from datafarm.agents.tools.frames import CLIP_ROOT
from datafarm.agents.tools.judge_writer import judge_writer_tools
from datafarm.agents.tools.reviewer import ReviewMaterial, reviewer_tools, verdict_schema
from datafarm.agents.tools.writing import ExtraCheck
from datafarm.artifacts.judge import JudgeSpec
from datafarm.artifacts.request import Request
from datafarm.artifacts.stages import Stage
from datafarm.capability.bundle import CapabilityBundle
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir

AUTHOR_STAGE_WRITES: dict[Stage, tuple[str, ...]] = {
    Stage.grounding: ("grounding",),
    Stage.contract: ("contract", "sampler"),
    Stage.expert: ("expert",),
    Stage.render: ("render-contract",),
}
"""What the author writes in each of its stages (the sampler S goes with the contract T)."""


def author_task(stage: Stage | str, instructions: str = "") -> RoleTask:
    """The author's task for one of its stages (the expert stage ends when the author stops calling tools)."""
    stage = Stage(stage)
    if stage not in AUTHOR_STAGE_WRITES:
        raise ValueError(f"the author has no stage {stage.value}; its stages: {', '.join(s.value for s in AUTHOR_STAGE_WRITES)}")
    finish = "on_reply" if stage == Stage.expert else "on_write"
    return RoleTask(stage, AUTHOR_STAGE_WRITES[stage], instructions=instructions, finish=finish)


def judge_task(instructions: str = "") -> RoleTask:
    """The judge-writer's task: write J."""
    return RoleTask(Stage.judge, ("judge",), instructions=instructions)


def review_task(instructions: str = "") -> RoleTask:
    """The reviewer's task: write a verdict on one episode."""
    return RoleTask(Stage.review, ("review",), instructions=instructions)


@dataclass
class TaskAgents:
    """The agent roles of one task folder, sharing one budget and one ledger."""

    request: Request
    """The task's request (roles, budget, task text, clip)."""
    task_dir: TaskDir
    """The task folder."""
    bundle: CapabilityBundle
    """K the task runs under (prompts, skills, prices)."""
    ledger: Ledger
    """The task's ledger."""
    budget: TaskBudget
    """The task's LLM budget, shared by every role."""
    settings: ProviderSettings = field(default_factory=ProviderSettings)
    """How providers are called."""
    providers: dict[str, Provider] = field(default_factory=dict)
    """Providers already made (or injected, e.g. a FunctionProvider in tests), by role."""
    repair_budget: int = 3
    """Invalid writes a role may repair per stage before the stage fails."""

    @classmethod
    def open(
        cls,
        request: Request,
        task_dir: TaskDir | Path,
        *,
        bundle: CapabilityBundle | None = None,
        settings: ProviderSettings | None = None,
        providers: Mapping[str, Provider] | None = None,
        repair_budget: int = 3,
    ) -> TaskAgents:
        """The roles of `task_dir`; the budget counts what the ledger already records as spent."""
        task_dir = task_dir if isinstance(task_dir, TaskDir) else TaskDir(Path(task_dir))
        ledger = Ledger(task_dir.ledger)
        return cls(
            request=request,
            task_dir=task_dir,
            bundle=bundle or capability.load(),
            ledger=ledger,
            budget=TaskBudget.from_ledger(request.budget.max_usd, request.budget.max_tokens, ledger),
            settings=settings or ProviderSettings(),
            providers=dict(providers or {}),
            repair_budget=repair_budget,
        )

    def provider(self, role: str) -> Provider:
        """The role's provider, made from the request on first use."""
        if role not in self.providers:
            config = getattr(self.request.roles, role)
            self.providers[role] = create_provider(config.provider, config.model, self.settings, role=role)
        return self.providers[role]

    def access(self, role: str) -> RoleAccess:
        """The role's path guard (author and reviewer may also read the calibration clip)."""
        external = {}
        if role in ("author", "reviewer"):
            external[CLIP_ROOT] = ExternalRoot(Path(self.request.clip).resolve())
        return RoleAccess(role, self.task_dir.root, external)

    def _agent(self, role: str, tools: Toolbox, prompt, write_tools: str) -> RoleAgent:
        return RoleAgent(
            role,
            self.provider(role),
            tools,
            prompt,
            task_dir=self.task_dir,
            ledger=self.ledger,
            budget=self.budget,
            prices=self.bundle.price_table(),
            settings=self.settings,
            repair_budget=self.repair_budget,
            write_tools=write_tools,
        )

    def author(
        self,
        *,
        rollout: RolloutFunction | None = None,
        dev_seeds: Sequence[int] | None = None,
        checks: dict[str, Sequence[ExtraCheck]] | None = None,
    ) -> RoleAgent:
        """The author: clip views and measurements, its artifacts G T S C R, the controller, dev-seed rollouts (when `rollout` is given)."""
        access = self.access("author")
        tools = author_tools(
            access, self.task_dir, k_version=self.bundle.version, rollout=rollout, dev_seeds=dev_seeds, checks=checks
        )
        box = Toolbox.of(tools)

        def prompt(task: RoleTask) -> str:
            return author_prompt(self.bundle, self.request, task.stage.value, task.skill or task.stage.value, task.writes, tools)

        return self._agent(
            "author", box, prompt, "write_artifact (G grounding, T contract, S sampler, C expert, R render-contract)"
        )

    def judge_writer(self, *, checks: Sequence[ExtraCheck] = ()) -> RoleAgent:
        """The judge-writer: reads T and G, writes J (to judge/draft.json, for the harness to freeze)."""
        access = self.access("judge_writer")
        tools = judge_writer_tools(access, self.task_dir, checks=checks)

        def prompt(task: RoleTask) -> str:
            return judge_writer_prompt(self.bundle, access, self.task_dir, JudgeSpec.model_json_schema(), tools)

        return self._agent("judge_writer", Toolbox.of(tools), prompt, "write_judge")

    def reviewer(self, material: ReviewMaterial, *, checks: Sequence[ExtraCheck] = ()) -> RoleAgent:
        """The reviewer of one episode: its rendered frames, the real reference frames, the sim-state summary."""
        access = self.access("reviewer")
        tools = reviewer_tools(access, material, checks=checks)

        def prompt(task: RoleTask) -> str:
            return reviewer_prompt(self.bundle, self.request.task, material.state_summary, verdict_schema(), tools)

        return self._agent("reviewer", Toolbox.of(tools), prompt, "write_verdict")
