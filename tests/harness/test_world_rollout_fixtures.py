"""Shared pieces of the world-rollout and seed tests (no tests here): a pick-and-place task on the
paper's dual-PiPER table (a 4 cm block to be set on a 12 x 12 x 1 cm pad, both placed by S per seed),
its contract T, the judge J a judge-writer makes of it (frozen in the task folder), B, and a task
folder holding them with the scripted expert of `experts/place_block`."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.expert import ExpertManifest
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import save_artifact
from datafarm.artifacts.judge import JudgeSpec
from datafarm.artifacts.sampler import ObjectPlacement, SamplerSpec
from datafarm.harness.judge import freeze
from datafarm.harness.sandbox import SandboxLimits
from datafarm.harness.seeds import create_secret
from datafarm.harness.server import RolloutLimits
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir
from tests.artifacts.test_schemas import judge_from
from tests.sim.conftest import block, grounding_with, tagged

EXPERTS = Path(__file__).resolve().parent / "experts"
PLACE_EXPERT = EXPERTS / "place_block"

ROLLOUT_OPTIONS = {
    "limits": RolloutLimits(max_sim_seconds=20.0, reply_timeout_seconds=2.0, exit_grace_seconds=1.0),
    "sandbox_limits": SandboxLimits(cpu_seconds=20, wall_seconds=40, processes=32, memory_bytes=2 << 30),
}
"""run_rollout options for the tests: roomy, but nothing can run away."""


def place_grounding() -> Grounding:
    """The dual-PiPER table with a 4 cm block in front of the left arm and a 1 cm pad 20 cm to its right."""
    pad = block("pad", (-0.17, 0.2))
    pad["size"] = {"x": tagged(0.12), "y": tagged(0.12), "z": tagged(0.01)}
    pad["mass"] = tagged(0.3, "assumed", 0.3)
    return grounding_with(block("block", (-0.17, 0.4)), pad)


def place_sampler() -> SamplerSpec:
    """S: the block moves +-2 cm and turns +-0.4 rad, the pad moves +-1 cm; the table's default
    height and tilt changes (up to half a degree each way)."""
    return SamplerSpec(objects=[ObjectPlacement(object="block", x=(-0.02, 0.02), y=(-0.02, 0.02), yaw=(-0.4, 0.4)),
                                ObjectPlacement(object="pad", x=(-0.01, 0.01), y=(-0.01, 0.01))])


def place_contract() -> TaskContract:
    """T: grasp the block (left arm, off the table), then set it on the pad and let go."""
    on = {"predicate": "on", "object": "block", "support": "pad"}
    return TaskContract.model_validate({
        "task": "Put the block on the pad.", "family": "place_on", "roles": {"item": "block", "target": "pad"},
        "stages": [
            {"name": "grasp_block", "description": "pick the block up with the left arm",
             "done_when": {"all": [{"predicate": "grasped", "object": "block", "by": "left"},
                                   {"predicate": "above", "object": "block", "target": "table", "min_height": 0.02}]}},
            {"name": "place_block", "description": "set the block on the pad and let go",
             "done_when": {"all": [on, {"not": {"predicate": "grasped", "object": "block"}}]}, "hold_s": 0.3},
        ],
        "success": {"description": "the block rests on the pad",
                    "condition": {"all": [on, {"predicate": "stable_for", "object": "block", "duration_s": 0.5}]},
                    "hold_s": 1.0},
        "time_limit_s": 20.0, "control_hz": 20.0,
    })


def place_judge() -> JudgeSpec:
    """J as a judge-writer makes it of T (stages, success, every arm shortcut forbidden)."""
    return judge_from(place_contract())


def place_batch() -> BatchConfig:
    """B: three dev seeds, three admission seeds."""
    return BatchConfig(n=2, dev_seeds=[0, 1, 2], admission_seed_count=3)


def make_task(root: Path, expert: Path = PLACE_EXPERT, *, params: dict | None = None, manifest: bool = False) -> Path:
    """A task folder at `root`: G, T, S, B, the frozen J (in the ledger), the admission secret and
    the expert (a copy of `expert`, with `params.json` when `params` is given, and the expert
    manifest C when `manifest`)."""
    paths = TaskDir(root)
    root.mkdir(parents=True, exist_ok=True)
    grounding, contract = place_grounding(), place_contract()
    save_artifact(grounding, paths.grounding)
    save_artifact(contract, paths.contract)
    save_artifact(place_sampler(), paths.sampler)
    save_artifact(place_batch(), paths.batch)
    ledger = Ledger(root)
    freeze(place_judge(), paths.judge_dir, ledger, contract=contract, grounding=grounding)
    create_secret(root, ledger)
    shutil.copytree(expert, paths.expert_dir)
    if params is not None:
        (paths.expert_dir / "params.json").write_text(json.dumps(params))
    if manifest:
        save_artifact(ExpertManifest(sha256=sha256_file(paths.expert_dir / "controller.py"), k_version="k2",
                                     parameters={"arm": "left"}, skills=["grasp", "lift", "approach"]),
                      paths.artifact("expert"))
    return root


def write_expert(task: Path, source: str) -> None:
    """Replace the task's controller with `source`."""
    (TaskDir(task).expert_dir / "controller.py").write_text(textwrap.dedent(source))
