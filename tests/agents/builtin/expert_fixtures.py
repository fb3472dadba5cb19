"""Shared pieces of the builtin expert's tests (no tests here): one task per family on the paper's
dual-PiPER table (G from the schema fixtures, T, an S that moves the objects per seed, B with dev
seeds), a task folder holding them with J frozen, and a runner for dev rollouts in the real bwrap
sandbox against SAPIEN."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import save_artifact
from datafarm.artifacts.judge import JudgeSpec
from datafarm.artifacts.sampler import ObjectPlacement, SamplerSpec
from datafarm.harness.judge import freeze
from datafarm.harness.sandbox import SandboxLimits
from datafarm.harness.seeds import create_secret
from datafarm.harness.server import RolloutLimits
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir
from tests.artifacts.test_schemas import (
    drawer_grounding,
    drum_grounding,
    nest_grounding,
    scene,
    tagged,
    weigh_grounding,
)

ROLLOUT_OPTIONS: dict[str, Any] = {
    "limits": RolloutLimits(max_sim_seconds=60.0, reply_timeout_seconds=5.0, exit_grace_seconds=1.0),
    "sandbox_limits": SandboxLimits(cpu_seconds=60, wall_seconds=90, processes=32, memory_bytes=2 << 30),
}
"""run_rollout options for the tests: roomy, but nothing can run away."""

DEV_SEEDS = [0, 1, 2, 3, 4]
"""Dev seeds of every fixture task (B)."""


def drum_only_grounding() -> Grounding:
    """The paper's drum on the dual-PiPER table, without the stick (a lying cylinder rolls away in
    this simulator even on a level table)."""
    drum = drum_grounding().object("drum").model_dump(mode="json")
    return Grounding.model_validate(scene([drum]))


def low_drawer_grounding() -> Grounding:
    """The paper's drawer task laid out like examples/use_drawer (the arms 0.5 m apart, 7 cm nearer
    the table's middle; a 20 cm cabinet whose drawer's walls are 14 cm high): the schema fixture's
    20 cm walls need the PiPER's TCP 24 cm up over the drawer, at the edge of its reach."""
    data = drawer_grounding().model_dump(mode="json")
    data["robot"]["arms"][0]["base"]["position"] = [-0.38, 0.25, 0.0]
    data["robot"]["arms"][1]["base"]["position"] = [-0.38, -0.25, 0.0]
    data["robot"]["spacing"] = tagged(0.5, "measured")
    cabinet = next(o for o in data["objects"] if o["id"] == "cabinet")
    cabinet["pose"]["position"] = [0.16, 0.08, 0.0]
    cabinet["size"]["z"] = tagged(0.2)
    cabinet["drawer_bottom"] = tagged(0.05)
    cabinet["drawer_height"] = tagged(0.09)
    cabinet["drawer_travel"] = tagged(0.16, "assumed")
    return Grounding.model_validate(data)


def side_drawer_grounding() -> Grounding:
    """One PiPER arm, a low cabinet ahead of it facing it (its drawer 8.4 cm high, 5 cm up) and the
    block far to the other side, level with the cabinet's front (as the generality scenes draw it,
    seed 20266): carried straight from there towards the drawer, the block clips the cabinet's corner."""
    data = drawer_grounding().model_dump(mode="json")
    data["robot"] = {"kind": "piper", "arms": [{"name": "arm", "base": {"position": [-0.405, 0.013, 0.0],
                                                                      "quaternion": [0.99992, 0.0, 0.0, 0.0125]},
                                                "base_tag": "measured"}]}
    cabinet = next(o for o in data["objects"] if o["id"] == "cabinet")
    cabinet["pose"] = {"position": [0.121, -0.096, 0.0], "quaternion": [0.0244, 0.0, 0.0, -0.9997]}
    cabinet["size"] = {"x": tagged(0.261), "y": tagged(0.278), "z": tagged(0.186)}
    cabinet["drawer_bottom"] = tagged(0.0465)
    cabinet["drawer_height"] = tagged(0.0837)
    cabinet["drawer_travel"] = tagged(0.157, "assumed")
    block = next(o for o in data["objects"] if o["id"] == "red_block")
    block["pose"] = {"position": [-0.015, 0.228, 0.0], "quaternion": [0.9886, 0.0, 0.0, -0.1506]}
    block["size"] = {"x": tagged(0.047), "y": tagged(0.05), "z": tagged(0.039)}
    return Grounding.model_validate(data)


def judge_for(contract: TaskContract, grounding: Grounding) -> JudgeSpec:
    """J for T: the builtin judge-writer's."""
    from datafarm.agents.builtin.judge_writer import judge_for as builtin_judge

    return builtin_judge(contract, grounding)


def contract_from_text(text: str) -> Callable[[Grounding], TaskContract]:
    """T as the builtin contract stage makes it of `text` for a G."""
    from datafarm.agents.builtin import contract_for, read_task

    return lambda grounding: contract_for(read_task(text, grounding), grounding, text)


@dataclass(frozen=True)
class FamilyCase:
    """One family's fixture task."""

    name: str
    """Short name for test ids."""
    grounding: Callable[[], Grounding]
    """G."""
    contract_of: Callable[[Grounding], TaskContract]
    """T for a G."""
    sampler: Callable[[], SamplerSpec]
    """S."""

    def contract(self) -> TaskContract:
        """T for this case's G."""
        return self.contract_of(self.grounding())


def _moves(*objects: str, xy: float = 0.02, yaw: float = 0.3, level: bool = False) -> SamplerSpec:
    return SamplerSpec(objects=[ObjectPlacement(object=o, x=(-xy, xy), y=(-xy, xy), yaw=(-yaw, yaw)) for o in objects],
                       **({"table_tilt": (0.0, 0.0)} if level else {}))


CASES: dict[str, FamilyCase] = {
    "nest": FamilyCase("nest", nest_grounding, contract_from_text("Nest the red cup in the blue cup."),
                       lambda: _moves("red_cup", "blue_cup")),
    # S's default table tilt: the apple's faceted hull stays put on it (datafarm.sim.world.bodies)
    "weigh": FamilyCase("weigh", weigh_grounding, contract_from_text("Weigh the apple on the scale."),
                        lambda: SamplerSpec(objects=[ObjectPlacement(object="apple", x=(-0.02, 0.02), y=(-0.02, 0.02)),
                                                     ObjectPlacement(object="scale", x=(-0.01, 0.01), y=(-0.01, 0.01),
                                                                     yaw=(-0.2, 0.2))])),
    "drum": FamilyCase("drum", drum_only_grounding, contract_from_text("Beat the drum three times."), lambda: _moves("drum")),
    # S's default table tilt: the drawer's slide friction holds it where it is left
    "drawer": FamilyCase("drawer", low_drawer_grounding,
                         contract_from_text("Open the drawer, put the red block inside and close the drawer."),
                         lambda: SamplerSpec(objects=[ObjectPlacement(object="red_block", x=(-0.02, 0.02), y=(-0.02, 0.02),
                                                                      yaw=(-0.4, 0.4)),
                                                      ObjectPlacement(object="cabinet", x=(-0.01, 0.01), y=(-0.01, 0.01))])),
}
"""The fixture task of each family: the paper-task scenes of the schema tests, T from the builtin
contract stage's reading of a sentence, J from the builtin judge-writer."""


def make_task(root: Path, case: FamilyCase, *, dev_seeds: list[int] | None = None) -> Path:
    """A task folder at `root` for `case`: G, T, S, B, the frozen J (in the ledger) and the admission
    secret; no expert yet."""
    paths = TaskDir(root)
    root.mkdir(parents=True, exist_ok=True)
    grounding, contract = case.grounding(), case.contract()
    save_artifact(grounding, paths.grounding)
    save_artifact(contract, paths.contract)
    save_artifact(case.sampler(), paths.sampler)
    save_artifact(BatchConfig(n=2, dev_seeds=dev_seeds or DEV_SEEDS, admission_seed_count=4), paths.batch)
    ledger = Ledger(root)
    freeze(judge_for(contract, grounding), paths.judge_dir, ledger, contract=contract, grounding=grounding)
    create_secret(root, ledger)
    paths.expert_dir.mkdir(exist_ok=True)
    return root


def put_controller(task: Path, source: str) -> Path:
    """Write `source` as the task's expert/controller.py."""
    path = TaskDir(task).expert_dir / "controller.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    return path


def author_agent(task: Path, *, dev_seeds: list[int], options: dict[str, Any] | None = None, max_turns: int = 30):
    """The builtin author (the provider's real role function) with the author's real tools on `task`,
    its dev rollouts run by the harness in the bwrap sandbox."""
    from datafarm import capability
    from datafarm.agents.access import RoleAccess
    from datafarm.agents.budget import TaskBudget
    from datafarm.agents.builtin.author import author
    from datafarm.agents.conversation import RoleAgent
    from datafarm.agents.providers.function import FunctionProvider
    from datafarm.agents.tools.author import author_tools
    from datafarm.agents.tools.base import Toolbox
    from datafarm.harness.rollout import request_rollout

    paths = TaskDir(task)
    bundle = capability.load()
    tools = author_tools(RoleAccess("author", paths.root), paths, k_version=bundle.version,
                         rollout=lambda seed: request_rollout(task, seed, **(options or ROLLOUT_OPTIONS)),
                         dev_seeds=dev_seeds)
    provider = FunctionProvider(author, name="builtin", model="builtin", price_model="builtin", role="author")
    return RoleAgent("author", provider, Toolbox.of(tools), lambda t: f"Stage: {t.stage.value}\nYou are the author.",
                     task_dir=paths, ledger=Ledger(paths.root), budget=TaskBudget(50.0, 2_000_000),
                     prices=bundle.price_table(), max_turns=max_turns)
