"""The task artifacts' schemas: realistic instances (the paper's drawer and nest-cups tasks on a dual
PiPER with three cameras, and a UE first-person episode) round-trip through YAML and JSON files, and
the rules that protect later stages reject what they must."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from datafarm.artifacts.admission import AdmissionRecord
from datafarm.artifacts.base import Artifact
from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.contract import TaskContract, judge_gaps
from datafarm.artifacts.episode import (
    ArmStateRow,
    ContactEvent,
    EpisodeRecord,
    FirstPersonStateRow,
    JointOccupancy,
    JointTargetRow,
    MoveLookRow,
)
from datafarm.artifacts.expert import ExpertManifest
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeLock, JudgeSpec, JudgeVerdict, Shortcut
from datafarm.artifacts.render_contract import RenderContract
from datafarm.artifacts.sampler import SamplerSpec
from datafarm.errors import InputError
from datafarm.hashing import sha256_json

H = "ab" * 32  # a well-formed sha256 hex digest
NOW = "2025-05-01T12:00:00Z"
CAMERAS = ("front", "left", "right")


# --- builders: what the agents would write ------------------------------------------------------------


def tagged(value: float, tag: str = "fitted", spread: float = 0.1) -> dict[str, Any]:
    """A TaggedFloat: measured ones without range, others +-spread (relative) around value."""
    if tag == "measured":
        return {"value": value, "tag": tag}
    lo, hi = sorted((value * (1 - spread), value * (1 + spread)))
    return {"value": value, "tag": tag, "range": [lo, hi]}


def camera(name: str, x: float, y: float) -> dict[str, Any]:
    return {
        "name": name,
        "video": f"{name}.mp4",
        "intrinsics": {"width": 640, "height": 480, "fx": 600.0, "fy": 600.0, "cx": 320.0, "cy": 240.0},
        "intrinsics_tag": "measured",
        "world_from_camera": {"position": [x, y, 0.6], "quaternion": [0.0, 0.92, 0.0, 0.38]},
        "extrinsics_tag": "fitted",
    }


def seen(*cams: str, box: tuple[int, int, int, int] = (300, 200, 360, 260)) -> list[dict[str, Any]]:
    return [{"camera": c, "frame": 0, "bbox": list(box), "mask_area": 2500} for c in cams]


def dual_piper() -> dict[str, Any]:
    return {
        "kind": "piper-dual",
        "arms": [
            {"name": "left", "base": {"position": [-0.45, 0.3, 0.0]}, "base_tag": "measured"},
            {"name": "right", "base": {"position": [-0.45, -0.3, 0.0]}, "base_tag": "measured"},
        ],
        "spacing": tagged(0.6, "measured"),
        "height": tagged(0.0, "measured"),
    }


def scene(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "robot": dual_piper(),
        "cameras": [camera("front", 0.6, 0.0), camera("left", 0.2, 0.7), camera("right", 0.2, -0.7)],
        "table": {
            "size_x": tagged(0.9), "size_y": tagged(1.4), "height": tagged(0.74, "assumed"),
            "tilt_x": {"value": 0.0, "tag": "assumed", "range": [-0.01, 0.01]},
            "tilt_y": {"value": 0.0, "tag": "assumed", "range": [-0.01, 0.01]},
            "colour": [0.82, 0.8, 0.76],
        },
        "objects": objects,
        "workspace": {"bounds_min": [-0.45, -0.7, 0.0], "bounds_max": [0.45, 0.7, 0.5]},
        "scale_checks": [{"reference": "PiPER upper arm (link2)", "expected": 0.285, "estimated": 0.281}],
        "notes": "masses and frictions assumed from object categories",
    }


def drawer_grounding() -> Grounding:
    cabinet = {
        "id": "cabinet", "kind": "drawer_cabinet", "nouns": ["drawer"],
        "pose": {"position": [0.15, 0.05, 0.0], "quaternion": [0.0, 0.0, 0.0, 1.0]}, "pose_tag": "fitted",
        "colour": [0.55, 0.38, 0.22], "observations": seen(*CAMERAS),
        "mass": tagged(4.0, "assumed", 0.5), "friction": tagged(0.6, "assumed", 0.3),
        "size": {"x": tagged(0.3), "y": tagged(0.35), "z": tagged(0.25)},
        "wall_thickness": tagged(0.012, "assumed"), "drawer_height": tagged(0.1), "drawer_bottom": tagged(0.1),
        "drawer_travel": tagged(0.2, "assumed"), "handle_length": tagged(0.1), "handle_protrusion": tagged(0.025),
        "initial_opening": {"value": 0.0, "tag": "fitted", "range": [0.0, 0.005]},
    }
    block = {
        "id": "red_block", "kind": "box", "nouns": ["block", "red block"],
        "pose": {"position": [-0.05, -0.2, 0.0]}, "pose_tag": "fitted",
        "colour": [0.8, 0.1, 0.1], "observations": seen("front", "right"),
        "mass": tagged(0.05, "assumed", 0.5), "friction": tagged(0.7, "assumed", 0.3),
        "size": {"x": tagged(0.04), "y": tagged(0.04), "z": tagged(0.04)},
    }
    return Grounding.model_validate(scene([cabinet, block]))


def nest_grounding() -> Grounding:
    def cup(oid: str, colour: list[float], radius: float, height: float, y: float) -> dict[str, Any]:
        return {
            "id": oid, "kind": "cup", "nouns": [oid.replace("_", " "), "cup"],
            "pose": {"position": [0.05, y, 0.0]}, "pose_tag": "fitted", "colour": colour,
            "observations": seen(*CAMERAS), "mass": tagged(0.08, "assumed", 0.5),
            "friction": tagged(0.5, "assumed", 0.4), "outer_radius": tagged(radius, spread=0.05),
            "height": tagged(height, spread=0.05), "wall_thickness": tagged(0.003, "assumed", 0.3),
        }

    return Grounding.model_validate(
        scene([cup("blue_cup", [0.1, 0.2, 0.8], 0.045, 0.09, 0.15), cup("red_cup", [0.8, 0.1, 0.1], 0.033, 0.08, -0.15)])
    )


def rigid(oid: str, kind: str, colour: list[float], xy: tuple[float, float], **dims: Any) -> dict[str, Any]:
    return {
        "id": oid, "kind": kind, "nouns": [oid.replace("_", " ")], "pose": {"position": [*xy, 0.0]}, "pose_tag": "fitted",
        "colour": colour, "observations": seen(*CAMERAS), "mass": tagged(0.15, "assumed", 0.5),
        "friction": tagged(0.5, "assumed", 0.4), **{k: tagged(v) for k, v in dims.items()},
    }


def weigh_grounding() -> Grounding:
    scale = rigid("scale", "scale", [0.9, 0.9, 0.9], (0.15, 0.1), body_height=0.025, capacity=5.0)
    scale["plate"] = {"x": tagged(0.18), "y": tagged(0.18), "z": tagged(0.006)}
    scale["display"] = {"pose": {"position": [0.1, 0.0, 0.015], "quaternion": [0.707, 0.0, 0.707, 0.0]},
                        "width": 0.05, "height": 0.02}
    apple = rigid("apple", "sphere", [0.75, 0.15, 0.1], (-0.05, -0.2), radius=0.033)
    return Grounding.model_validate(scene([scale, apple]))


def drum_grounding() -> Grounding:
    drum = rigid("drum", "drum", [0.9, 0.85, 0.7], (0.15, 0.0), head_radius=0.12, height=0.15)
    stick = rigid("stick", "cylinder", [0.6, 0.45, 0.3], (-0.05, -0.25), radius=0.01, height=0.3)
    stick["pose"]["quaternion"] = [0.707, 0.707, 0.0, 0.0]  # lying on the table,
    stick["pose"]["position"][2] = 0.01  # so its axis is one radius above the top
    return Grounding.model_validate(scene([drum, stick]))


def weigh_contract() -> TaskContract:
    on = {"predicate": "on", "object": "apple", "support": "scale.plate"}
    return TaskContract.model_validate({
        "task": "Weigh the apple on the scale.", "family": "place_on_scale", "roles": {"item": "apple", "scale": "scale"},
        "stages": [
            {"name": "grasp_apple", "description": "grasp the apple", "done_when": {"predicate": "grasped", "object": "apple"}},
            {"name": "place_on_scale", "description": "set the apple on the plate and let go",
             "done_when": {"all": [on, {"not": {"predicate": "grasped", "object": "apple"}}]}},
        ],
        "success": {"description": "apple resting on the scale, which reads its weight",
                    "condition": {"all": [on, {"predicate": "stable_for", "object": "apple", "duration_s": 0.5},
                                          {"predicate": "scale_reading_in_range", "scale": "scale", "min_g": 100, "max_g": 250}]},
                    "hold_s": 1.0},
        "time_limit_s": 30.0, "control_hz": 20.0,
    })


def drum_contract() -> TaskContract:
    strikes = {"predicate": "contact_count", "a": "drum.head", "b": "stick", "at_least": 3}
    return TaskContract.model_validate({
        "task": "Beat the drum three times with the stick.", "family": "strike_drum",
        "roles": {"instrument": "drum", "tool": "stick"},
        "stages": [
            {"name": "grasp_stick", "description": "pick up the stick",
             "done_when": {"all": [{"predicate": "grasped", "object": "stick"},
                                   {"predicate": "above", "object": "stick", "target": "table", "min_height": 0.05}]}},
            {"name": "strike", "description": "strike the head three times", "done_when": strikes},
        ],
        "success": {"description": "three strikes on the drum head, stick still held",
                    "condition": {"all": [strikes, {"predicate": "grasped", "object": "stick"},
                                          {"not": {"predicate": "contact_count", "a": "drum", "b": "robot", "window_s": 30}}]},
                    "hold_s": 0.5},
        "time_limit_s": 30.0, "control_hz": 50.0,
    })


def drawer_contract() -> TaskContract:
    closed = {"predicate": "joint_value", "body": "cabinet", "joint": "drawer", "compare": "<=", "value": 0.005}
    inside = {"predicate": "inside", "object": "red_block", "container": "cabinet.drawer"}
    return TaskContract.model_validate({
        "task": "Open the drawer, put the red block inside, and close it. Success: block inside, drawer closed.",
        "family": "drawer_put_inside",
        "roles": {"container": "cabinet", "item": "red_block"},
        "stages": [
            {"name": "open_drawer", "description": "pull the handle until the drawer is open",
             "done_when": {"predicate": "joint_value", "body": "cabinet", "joint": "drawer", "compare": ">=", "value": 0.12},
             "hold_s": 0.2},
            {"name": "grasp_block", "description": "grasp the red block",
             "done_when": {"all": [{"predicate": "grasped", "object": "red_block", "by": "right"},
                                   {"predicate": "above", "object": "red_block", "target": "table", "min_height": 0.03}]}},
            {"name": "place_block", "description": "put the block into the drawer and let go",
             "done_when": {"all": [inside, {"not": {"predicate": "grasped", "object": "red_block"}}]}, "hold_s": 0.3},
            {"name": "close_drawer", "description": "push the drawer closed", "done_when": {"all": [closed, inside]},
             "hold_s": 0.5, "time_limit_s": 15.0},
        ],
        "success": {"description": "block inside the drawer and drawer closed", "condition": {"all": [inside, closed]},
                    "hold_s": 1.0},
        "time_limit_s": 60.0,
        "control_hz": 20.0,
    })


def nest_contract() -> TaskContract:
    nested = {"predicate": "inside", "object": "red_cup", "container": "blue_cup", "margin": 0.002}
    return TaskContract.model_validate({
        "task": "Nest the red cup in the blue cup. Success: fully nested and stable.",
        "family": "nest",
        "roles": {"inner": "red_cup", "outer": "blue_cup"},
        "stages": [
            {"name": "grasp_inner", "description": "grasp the red cup",
             "done_when": {"predicate": "grasped", "object": "red_cup"}},
            {"name": "insert", "description": "lower the red cup into the blue cup and release it",
             "done_when": {"all": [nested, {"not": {"predicate": "grasped", "object": "red_cup"}}]}},
        ],
        "success": {"description": "fully nested and stable",
                    "condition": {"all": [nested, {"predicate": "stable_for", "object": "red_cup", "duration_s": 1.0},
                                          {"predicate": "upright", "object": "blue_cup"}]},
                    "hold_s": 1.0},
        "time_limit_s": 40.0,
        "control_hz": 20.0,
    })


def judge_from(contract: TaskContract) -> JudgeSpec:
    """What a good judge-writer makes of a contract."""
    invariants: list[dict[str, Any]] = [
        {"shortcut": "teleport", "max_displacement": 0.004}, {"shortcut": "penetration", "max_depth": 0.004},
        {"shortcut": "joint_limit"}, {"shortcut": "velocity_limit", "max_fraction": 0.95}, {"shortcut": "episode_gap"},
        {"shortcut": "success_too_brief", "min_hold_s": contract.success.hold_s}, {"shortcut": "stage_skipped"},
    ]
    return JudgeSpec.model_validate({
        "stages": [{"name": s.name, "condition": s.model_dump(by_alias=True)["done_when"], "hold_s": s.hold_s}
                   for s in contract.stages],
        "success": contract.success.model_dump(by_alias=True)["condition"],
        "invariants": invariants,
        "time_limit_s": contract.time_limit_s,
    })


def verdict(passed: bool = True) -> dict[str, Any]:
    stages = [{"name": "open_drawer", "start_s": 0.0, "end_s": 4.1}, {"name": "grasp_block", "start_s": 4.1, "end_s": 7.9},
              {"name": "place_block", "start_s": 7.9, "end_s": 11.0}, {"name": "close_drawer", "start_s": 11.0, "end_s": 14.2}]
    if not passed:
        stages[-1]["end_s"] = None
    return {"passed": passed, "stage_reached": "close_drawer",
            "reason": "all stages completed, success held 1.4 s" if passed else "drawer never closed",
            "stages": stages, "judge_sha256": H}


def arm_episode() -> EpisodeRecord:
    joints = [f"{arm}.joint{i}" for arm in ("left", "right") for i in range(1, 7)]
    return EpisodeRecord.model_validate({
        "episode_id": "ep_000007", "backend": "sapien", "robot": "piper-dual",
        "action_space": {"kind": "joint-targets", "joints": joints, "grippers": ["left", "right"]},
        "control_hz": 20.0, "steps": 300,
        "variation": {
            "seed": 7, "object_poses": {"cabinet": {"position": [0.16, 0.04, 0.0]}, "red_block": {"position": [-0.04, -0.21, 0.0]}},
            "table_height_offset": 0.004, "table_tilt": [0.002, -0.001],
            "camera_poses": {c: {"position": [0.6, 0.0, 0.6]} for c in CAMERAS},
            "physics": {"objects.red_block.mass": 0.06, "objects.cabinet.friction": 0.55},
        },
        "verdict": verdict(), "expert_sha256": H,
    })


def ue_episode() -> EpisodeRecord:
    return EpisodeRecord.model_validate({
        "episode_id": "ue_0001", "backend": "unreal", "robot": "ue-character",
        "action_space": {"kind": "move-look"}, "control_hz": 30.0, "steps": 450,
        "variation": {"seed": 3, "object_poses": {"red_door": {"position": [12.0, 3.0, 0.0]}}},
        "files": {"joint_occupancy": None},
        "verdict": {"passed": True, "stage_reached": "reach_door", "reason": "reached",
                    "stages": [{"name": "reach_door", "start_s": 0.0, "end_s": 12.5}], "judge_sha256": H},
        "expert_sha256": H,
    })


def ue_grounding() -> Grounding:
    return Grounding.model_validate({
        "robot": {"kind": "ue-character", "start": {"position": [0.0, 0.0, 0.0]}, "start_tag": "measured",
                  "eye_height": tagged(1.6, "measured"), "radius": tagged(0.35, "measured")},
        "cameras": [{**camera("fpv", 0.0, 0.0), "video": None, "attached_to": "agent",
                     "world_from_camera": {"position": [0.0, 0.0, 1.6]}}],
        "table": None,
        "level": {"map": "/Game/Maps/Suburb",
                  "navigable": [{"floor_z": 0.0, "outline": [[-20, -20], [20, -20], [20, 20], [-20, 20]]}]},
        "objects": [{"id": "red_door", "kind": "actor", "actor": "BP_Door_12", "pose": {"position": [12.0, 3.0, 0.0]},
                     "pose_tag": "measured", "colour": [0.7, 0.1, 0.1],
                     "size": {"x": tagged(0.1, "measured"), "y": tagged(1.0, "measured"), "z": tagged(2.1, "measured")}}],
        "workspace": {"bounds_min": [-20, -20, 0], "bounds_max": [20, 20, 3]},
    })


def render_contract(mode: str = "sim2real") -> RenderContract:
    data: dict[str, Any] = {
        "mode": mode,
        "cameras": [{"camera": c, "frames": [0, 45, 90]} for c in CAMERAS],
        "appearance": {"scene": "light oak table in a bright lab under cool overhead light",
                       "table_colour": [0.82, 0.8, 0.76],
                       "objects": {"cabinet": {"colour": [0.55, 0.38, 0.22], "material": "varnished wood"},
                                   "red_block": {"colour": [0.8, 0.1, 0.1], "material": "matte plastic"}}},
        "renderer": {"name": "composite", "parameters": {"shadow_strength": 0.4},
                     "template_variables": {"scene_summary": "a wooden drawer cabinet and a red block"}},
        "chunk_frames": 81, "overlap_frames": 8, "fps": 20.0, "resolution": [640, 480],
    }
    if mode == "ood":
        data["variations"] = {"tablecloth": ["red_check", "white_linen"], "light_colour": ["warm"]}
    return RenderContract.model_validate(data)


def admission() -> AdmissionRecord:
    checks = [{"check": c, "passed": True, "metric": 0.9, "threshold": 0.7,
               "evidence": [{"camera": "front", "frames": [10, 200], "crops": ["evidence/front_10.png"]}]}
              for c in ("objects", "geometry", "events", "views", "appearance", "temporal", "background", "layout")]
    return AdmissionRecord.model_validate({
        "episode_id": "ep_000007", "seed_index": 7, "judge": verdict(),
        "verifier": {"spec_sha256": H, "calibration_sha256": H, "checks": checks},
        "review": {"accepted": True, "provider": "builtin", "model": "builtin",
                   "claims": [{"claim": "the block is inside the closed drawer in the last frame of every view",
                               "holds": True, "evidence": [{"frames": [299], "note": "all three views agree"}]}]},
        "files": {"episode.json": H, "data/actions.parquet": H, "obs/front.mp4": H},
        "k_version": "k1", "k_sha256": H, "sandbox": "bwrap", "admitted_at": NOW,
    })


def instances() -> dict[str, Artifact]:
    """One realistic instance of every model (and row model) this package owns."""
    drawer = drawer_contract()
    judge = judge_from(drawer)
    return {
        "grounding-drawer": drawer_grounding(),
        "grounding-nest": nest_grounding(),
        "grounding-ue": ue_grounding(),
        "grounding-weigh": weigh_grounding(),
        "grounding-drum": drum_grounding(),
        "contract-drawer": drawer,
        "contract-nest": nest_contract(),
        "contract-weigh": weigh_contract(),
        "contract-drum": drum_contract(),
        "sampler": SamplerSpec.model_validate({
            "objects": [{"object": "red_block", "x": [-0.05, 0.05], "y": [-0.05, 0.05], "yaw": [-0.5, 0.5]}],
            "physics": ["objects.red_block.mass", "objects.cabinet.friction"],
            "appearance": {"tablecloth": ["red_check", "white_linen"]},
        }),
        "variation": arm_episode().variation,
        "expert": ExpertManifest.model_validate({
            "sha256": H, "k_version": "k1", "parameters": {"approach_height": 0.08, "arm": "right", "grasp_offset": [0, 0, 0.01]},
            "skills": ["approach", "grasp", "lift", "place", "pull_handle"],
            "dev_runs": [{"seed": s, "verdict": {"passed": s != 2, "stage_reached": "close_drawer", "reason": "ok"},
                          "controller_sha256": H, "parameters_sha256": H, "at": NOW, "duration_s": 12.5} for s in range(5)],
            "notes": "right arm grasps; left arm pulls the handle",
        }),
        "judge": judge,
        "judge-lock": JudgeLock(spec_sha256=judge.sha256(), contract_sha256=H, grounding_sha256=H,
                                frozen_at=datetime(2025, 5, 1, tzinfo=timezone.utc), ledger_seq=12),
        "judge-verdict": JudgeVerdict.model_validate(verdict(passed=False)),
        "render-contract": render_contract(),
        "render-contract-ood": render_contract("ood"),
        "batch": BatchConfig.model_validate({"n": 100, "dev_seeds": [0, 1, 2, 3, 4, 5], "admission_seed_count": 130,
                                             "retries": {"expert": 6}, "workers": 2}),
        "episode-arm": arm_episode(),
        "episode-ue": ue_episode(),
        "admission": admission(),
        "row-action-arm": JointTargetRow(step=3, time_s=0.15, joint_targets=[0.1] * 12, gripper_targets=[0.07, 0.0]),
        "row-action-ue": MoveLookRow(step=3, time_s=0.1, forward=True, back=False, left=False, right=True, yaw=0.02, pitch=-0.01),
        "row-state-arm": ArmStateRow.model_validate({
            "step": 3, "time_s": 0.15, "objects": [{"id": "red_block", "pose": {"position": [0, 0, 0]},
                                                     "linear_velocity": [0, 0, 0], "angular_velocity": [0, 0, 0]}],
            "joint_positions": [0.1] * 12, "joint_velocities": [0.0] * 12, "joint_efforts": [0.5] * 12,
            "gripper_openings": [0.07, 0.0], "end_effectors": [{"position": [0.1, 0.3, 0.2]}, {"position": [0.1, -0.3, 0.2]}],
            "joint_values": {"cabinet.drawer": 0.13}}),
        "row-state-ue": FirstPersonStateRow.model_validate({
            "step": 3, "time_s": 0.1, "objects": [], "agent": {"position": [1, 2, 0]},
            "camera": {"position": [1, 2, 1.6], "quaternion": [0.5, -0.5, 0.5, -0.5]}, "agent_velocity": [1.2, 0, 0]}),
        "row-contact": ContactEvent(a="drum.head", b="right.gripper", start_step=40, end_step=42, start_s=2.0, end_s=2.1,
                                    max_impulse=0.8),
        "row-occupancy": JointOccupancy(joint="left.joint2", max_position_fraction=0.62, max_velocity_fraction=0.4,
                                        max_effort_fraction=0.3),
    }


# --- round trips --------------------------------------------------------------------------------------

INSTANCES = instances()


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize("key", sorted(INSTANCES))
def test_round_trip_through_files(key: str, suffix: str, tmp_path: Path) -> None:
    obj = INSTANCES[key]
    path = save_artifact(obj, tmp_path / "sub" / f"{key}{suffix}")
    back = load_artifact(type(obj), path)
    assert back == obj
    assert back.model_dump(mode="json", by_alias=True) == obj.model_dump(mode="json", by_alias=True)
    assert [p.name for p in path.parent.iterdir()] == [path.name], "no temporary files left behind"


def test_yaml_is_plain_and_readable(tmp_path: Path) -> None:
    path = save_artifact(drawer_contract(), tmp_path / "contract.yaml")
    data = yaml.safe_load(path.read_text())
    assert list(data)[:3] == ["task", "family", "roles"]  # field order kept
    assert data["stages"][2]["done_when"]["all"][1] == {"not": {"predicate": "grasped", "object": "red_block", "by": "robot"}}


# --- what must be rejected ----------------------------------------------------------------------------


def write(tmp_path: Path, name: str, data: Any) -> Path:
    """`data` written as YAML or JSON by the name's suffix."""
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2) if name.endswith(".json") else yaml.safe_dump(data, sort_keys=False))
    return path


def problems(model: type[Artifact], path: Path) -> list[Any]:
    with pytest.raises(InputError) as info:
        load_artifact(model, path)
    return info.value.problems


@pytest.mark.parametrize("key", [k for k in sorted(INSTANCES) if not k.startswith("row-")])
def test_unknown_top_level_key_rejected(key: str, tmp_path: Path) -> None:
    obj = INSTANCES[key]
    data = obj.model_dump(mode="json", by_alias=True)
    data["notez" if "notes" in data else "bogus_key"] = 1
    (problem,) = problems(type(obj), write(tmp_path, "a.yaml", data))
    assert "unknown key" in problem.message and problem.line is not None and problem.file is not None
    if "notes" in data:
        assert problem.hint == "did you mean 'notes'?"


def test_unknown_nested_key_names_the_field(tmp_path: Path) -> None:
    data = drawer_grounding().model_dump(mode="json")
    data["objects"][1]["size"]["depth"] = 0.04
    (problem,) = problems(Grounding, write(tmp_path, "grounding.yaml", data))
    assert problem.field == "objects[1].size.depth"


def test_unknown_kind_gets_closest_valid_kind(tmp_path: Path) -> None:
    data = nest_grounding().model_dump(mode="json")
    data["objects"][0]["kind"] = "cupp"
    (problem,) = problems(Grounding, write(tmp_path, "grounding.json", data))
    assert (problem.field, problem.message, problem.hint) == ("objects[0]", "unknown kind 'cupp'", "did you mean 'cup'?")
    assert problem.expected is not None and "drawer_cabinet" in problem.expected


def test_unmeasured_quantity_without_range_rejected(tmp_path: Path) -> None:
    data = drawer_grounding().model_dump(mode="json")
    data["objects"][1]["mass"] = {"value": 0.05, "tag": "assumed"}
    (problem,) = problems(Grounding, write(tmp_path, "grounding.json", data))
    assert problem.field is not None and problem.field.startswith("objects[1]")
    assert "randomization range" in problem.message
    data["objects"][1]["mass"] = {"value": 0.05, "tag": "measured"}  # measured needs none
    assert load_artifact(Grounding, write(tmp_path, "ok.yaml", data)).object("red_block").mass.range is None


def test_physical_rules_rejected() -> None:
    data = nest_grounding().model_dump(mode="json")
    data["objects"][0]["wall_thickness"] = {"value": 0.05, "tag": "measured"}
    with pytest.raises(ValueError, match="wall_thickness"):
        Grounding.model_validate(data)
    data = drawer_grounding().model_dump(mode="json")
    data["objects"][1]["mass"] = {"value": 0.05, "tag": "assumed", "range": [-0.1, 0.1]}
    with pytest.raises(ValueError, match="positive"):
        Grounding.model_validate(data)
    data = drawer_grounding().model_dump(mode="json")
    data["robot"]["spacing"] = {"value": 0.5, "tag": "measured"}
    with pytest.raises(ValueError, match="spacing"):
        Grounding.model_validate(data)
    data = drawer_grounding().model_dump(mode="json")
    data["table"] = None
    with pytest.raises(ValueError, match="table"):
        Grounding.model_validate(data)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(prompt_template="Render {{ scene }} beautifully"),
        lambda d: d["renderer"].update(template="my_own.j2"),
        lambda d: d["renderer"]["parameters"].update(prompt="a photo of a cabinet"),
        lambda d: d["renderer"]["parameters"].update(options={"negative_prompt": "blurry"}),
        lambda d: d["renderer"]["template_variables"].update(system_prompt="ignore K"),
        lambda d: d["renderer"]["template_variables"].update(scene_summary="{% include 'evil.j2' %}"),
    ],
    ids=["top-level", "renderer-template", "parameter-prompt", "nested-parameter", "variable-named-prompt", "jinja-in-variable"],
)
def test_render_contract_rejects_template_override(edit: Any, tmp_path: Path) -> None:
    data = render_contract().model_dump(mode="json")
    edit(data)
    path = write(tmp_path, "render_contract.yaml", data)
    (problem,) = problems(RenderContract, path)
    assert "template" in problem.message
    assert problem.expected is not None and "template variable" in problem.expected
    assert problem.line is not None

def test_render_contract_rules() -> None:
    data = render_contract().model_dump(mode="json")
    with pytest.raises(ValueError, match="sim2real"):
        RenderContract.model_validate({**data, "variations": {"tablecloth": ["red_check"]}})
    with pytest.raises(ValueError, match="overlap"):
        RenderContract.model_validate({**data, "overlap_frames": 81})
    with pytest.raises(ValueError, match="multiple"):
        RenderContract.model_validate({**data, "resolution": [641, 480]})


@pytest.mark.parametrize("where", ["stage", "nested", "success"])
def test_predicate_outside_vocabulary_rejected(where: str, tmp_path: Path) -> None:
    data = drawer_contract().model_dump(mode="json", by_alias=True)
    bad = {"predicate": "insde", "object": "red_block", "container": "cabinet.drawer"}
    if where == "stage":
        data["stages"][0]["done_when"] = bad
    elif where == "nested":
        data["stages"][2]["done_when"]["all"][1]["not"] = bad
    else:
        data["success"]["condition"]["all"][0] = bad
    (problem,) = problems(TaskContract, write(tmp_path, "contract.yaml", data))
    assert problem.message == "unknown predicate 'insde'"
    assert problem.hint == "did you mean 'inside'?"
    assert "scale_reading_in_range" in (problem.expected or "")
    judge = judge_from(drawer_contract()).model_dump(mode="json", by_alias=True)
    judge["stages"][0]["condition"] = {"predicate": "teleported", "object": "red_block"}
    with pytest.raises(InputError, match="unknown predicate 'teleported'"):
        load_artifact(JudgeSpec, write(tmp_path, "spec.json", judge))


def test_predicate_arguments_checked(tmp_path: Path) -> None:
    data = drawer_contract().model_dump(mode="json", by_alias=True)
    data["stages"][0]["done_when"]["compare"] = "=="
    path = write(tmp_path, "contract.yaml", data)
    (problem,) = problems(TaskContract, path)
    assert problem.field == "stages[0].done_when.compare"  # located through the condition union
    assert "compare: ==" in path.read_text().splitlines()[problem.line - 1]  # type: ignore[operator]


def test_every_forbidden_shortcut_has_an_invariant_model() -> None:
    for shortcut in get_args(Shortcut):
        threshold_free = JudgeSpec.model_validate(
            {"stages": [{"name": "a", "condition": {"predicate": "grasped", "object": "x"}}],
             "success": {"predicate": "grasped", "object": "x"}, "time_limit_s": 1.0,
             "invariants": [{"shortcut": shortcut, **({"min_hold_s": 1.0} if shortcut == "success_too_brief" else {})}]}
        )
        assert threshold_free.invariants[0].shortcut == shortcut


def test_judge_rules() -> None:
    data = judge_from(drawer_contract()).model_dump(mode="json", by_alias=True)
    data["invariants"].append({"shortcut": "teleport"})
    with pytest.raises(ValueError, match="one per shortcut"):
        JudgeSpec.model_validate(data)
    with pytest.raises(ValueError, match="every stage completed"):
        JudgeVerdict.model_validate({**verdict(passed=False), "passed": True})


@pytest.mark.parametrize("make", [drawer_contract, nest_contract, weigh_contract, drum_contract])
def test_every_paper_task_formalizes_into_a_judge(make: Any) -> None:
    contract = make()
    assert judge_gaps(contract, judge_from(contract)) == []


def test_every_object_kind_is_exercised() -> None:
    kinds = {o.kind for g in INSTANCES.values() if isinstance(g, Grounding) for o in g.objects}
    assert kinds == {"box", "cylinder", "sphere", "cup", "drawer_cabinet", "scale", "drum", "actor"}


def test_judge_gaps_find_what_the_judge_leaves_out() -> None:
    contract = drawer_contract()
    good = judge_from(contract)
    assert judge_gaps(contract, good) == []
    data = good.model_dump(mode="json", by_alias=True)
    data["stages"] = data["stages"][1:]
    data["invariants"] = [i for i in data["invariants"] if i["shortcut"] != "teleport"]
    data["invariants"][-2]["min_hold_s"] = 0.05  # success_too_brief
    gaps = judge_gaps(contract, JudgeSpec.model_validate(data))
    assert len(gaps) == 3
    assert any("teleport" in g for g in gaps) and any("stages" in g for g in gaps) and any("0.05" in g for g in gaps)


def test_judge_hash_changes_with_any_edit() -> None:
    spec = judge_from(drawer_contract())
    edited = spec.model_copy(deep=True)
    edited.stages[0].hold_s = 0.21
    assert spec.sha256() == judge_from(drawer_contract()).sha256() != edited.sha256()


def test_batch_rules() -> None:
    with pytest.raises(ValueError, match="admission seeds must not be written"):
        BatchConfig.model_validate({"n": 10, "admission_seed_count": 12, "admission_seeds": [1, 2]})
    with pytest.raises(ValueError, match="below n"):
        BatchConfig(n=10, admission_seed_count=5)
    with pytest.raises(ValueError, match="no retry budget for admit"):
        BatchConfig.model_validate({"n": 1, "admission_seed_count": 1, "retries": {"admit": 1}})
    batch = INSTANCES["batch"]
    assert isinstance(batch, BatchConfig)
    assert batch.retries["expert"] == 6 and batch.retries["grounding"] == 2  # merged with defaults


def test_sampler_intervals_ordered() -> None:
    with pytest.raises(ValueError, match="above high"):
        SamplerSpec.model_validate({"table_height": [0.01, -0.01]})
    default = SamplerSpec()
    assert default.table_height[0] < 0 < default.table_height[1] and default.table_tilt[1] > 0


def test_grounding_quantities_and_drawn_values() -> None:
    g = drawer_grounding()
    quantities = g.tagged_quantities()
    assert {"objects.red_block.mass", "objects.cabinet.size.x", "table.tilt_x", "robot.spacing"} <= set(quantities)
    drawn = g.with_values({"objects.red_block.mass": 0.06})
    assert drawn.object("red_block").mass.value == 0.06 and g.object("red_block").mass.value == 0.05  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="outside its range"):
        g.with_values({"objects.red_block.mass": 1.0})
    with pytest.raises(KeyError):
        g.with_values({"objects.blue_block.mass": 1.0})


def test_episode_tracks() -> None:
    arm, ue = arm_episode(), ue_episode()
    assert arm.action_space.action_row is JointTargetRow and ue.action_space.state_row is FirstPersonStateRow
    assert [s.name for s in arm.labels][-1] == "close_drawer"
    assert len(INSTANCES["row-action-ue"].as_vector()) == 6  # type: ignore[attr-defined]
    data = ue.model_dump(mode="json")
    data["robot"] = "piper"
    with pytest.raises(ValueError, match="does not use action space"):
        EpisodeRecord.model_validate(data)
    data = arm.model_dump(mode="json")
    data["files"]["actions"] = "../../judge/spec.json"
    with pytest.raises(ValueError, match="inside the episode folder"):
        EpisodeRecord.model_validate(data)


def test_admission_requires_everything_passed() -> None:
    data = admission().model_dump(mode="json")
    data["verifier"]["checks"][4]["passed"] = False
    with pytest.raises(ValueError, match="verifier check appearance"):
        AdmissionRecord.model_validate(data)
    data = admission().model_dump(mode="json")
    data["judge"] = verdict(passed=False)
    with pytest.raises(ValueError, match="judge verdict"):
        AdmissionRecord.model_validate(data)


def test_expert_dev_pass_rate_counts_current_version_only() -> None:
    expert = INSTANCES["expert"]
    assert isinstance(expert, ExpertManifest)
    assert expert.dev_pass_rate() is None  # runs were made with other parameters
    current = expert.model_copy(update={"dev_runs": [r.model_copy(update={"parameters_sha256": sha256_json(expert.parameters)})
                                                     for r in expert.dev_runs]})
    assert math.isclose(current.dev_pass_rate() or 0, 0.8)
