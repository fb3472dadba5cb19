"""A self-contained demo for the render benchmark and the renderer tests: a synthetic calibration
clip, the G a grounding agent would write for it, and a scripted episode.

`write_demo_clip` draws a "real" scene with OpenCV (no simulator): a grey wall, a wooden table with
grain lines, two dark PiPER base blocks, a tapered red cup and a tapered blue cup, seen by three
cameras; the room light drifts slowly, and during the first third of the clip a dark shape passes
along the wall (a moving part the clean plate must drop). `example_grounding` is G for it. G's
table has the clip's colour; its cups are straight (the mean of the clip's tapered radii) and their
colours are deliberately *not* the clip's, so a renderer that copies sim colours instead of
transferring the real ones is caught.

`demo_recording` drives the left arm through IK waypoints over the red cup with the Recorder (real
physics for the robot) and then moves the red cup along with the gripper as if carried (its recorded
pose is written, not simulated): renderers only replay states, and a cup that travels across the
views is what the frame-alignment and appearance checks need.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import sapien

from datafarm.artifacts.clip import CameraSpec, ClipSpec
from datafarm.artifacts.common import Intrinsics, Pose
from datafarm.artifacts.episode import EpisodeRecord
from datafarm.artifacts.grounding import GroundedCamera, Grounding
from datafarm.artifacts.io import save_artifact
from datafarm.artifacts.judge import JudgeVerdict
from datafarm.artifacts.sampler import Variation
from datafarm.intake.load import load_model
from datafarm.renderers.scene import Projector
from datafarm.renderers.video import VideoWriter
from datafarm.sim.episode_io import make_record, write_episode
from datafarm.sim.recording import Recorder, Recording
from datafarm.sim.world import build_world
from datafarm.sim.world.frames import matrix_to_quat

CAMERAS = {  # name -> (position, point looked at), world metres
    "front": ((0.85, 0.0, 0.55), (0.0, 0.0, 0.0)),
    "left": ((0.30, 0.85, 0.55), (-0.12, 0.0, 0.0)),
    "right": ((0.30, -0.85, 0.55), (-0.12, 0.0, 0.0)),
}
"""The demo's cameras."""
TABLE_HALF = (0.45, 0.60)
"""Half extents of the table top, metres."""
TABLE_HEIGHT = 0.75
"""Table height, metres."""
ARM_BASES = ((-0.38, 0.25), (-0.38, -0.25))
"""Left and right PiPER base positions (x, y)."""
CUPS = {  # id -> ((x, y), bottom radius, rim radius, height)
    "red_cup": ((0.10, 0.14), 0.026, 0.032, 0.080),
    "blue_cup": ((0.06, -0.12), 0.034, 0.042, 0.090),
}
"""The clip's cups."""
REAL_COLOURS = {"red_cup": (200 / 255, 40 / 255, 40 / 255), "blue_cup": (30 / 255, 100 / 255, 190 / 255)}
"""The cups' colours in the clip (sRGB, 0-1): the truth the renderer must reach."""
REAL_TABLE_COLOUR = (205 / 255, 165 / 255, 120 / 255)
"""The table top's colour in the clip."""
SIM_COLOURS = {"red_cup": (0.7, 0.25, 0.25), "blue_cup": (0.25, 0.3, 0.6)}
"""G's (deliberately wrong) cup colours."""

_DOWN = (0.0, 1.0, 0.0, 0.0)  # TCP pointing straight down


# --- the clip -----------------------------------------------------------------------------------------


def look_at(position: tuple[float, float, float], target: tuple[float, float, float]) -> Pose:
    """world_from_camera (OpenCV: z towards the target, x right, y down) of a camera at `position`."""
    z = np.subtract(target, position).astype(float)
    z /= np.linalg.norm(z)
    x = np.cross(z, (0.0, 0.0, 1.0))
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    q = matrix_to_quat(np.stack([x, y, z], axis=1))
    return Pose(position=tuple(float(v) for v in position), quaternion=tuple(float(v) for v in q))


def _intrinsics(width: int, height: int) -> Intrinsics:
    focal = 260.0 * width / 320.0
    return Intrinsics(width=width, height=height, fx=focal, fy=focal, cx=width / 2, cy=height / 2)


def _box(cx: float, cy: float, z0: float, hx: float, hy: float, hz: float) -> np.ndarray:
    return np.array([(cx + sx * hx, cy + sy * hy, z0 + sz * hz) for sx in (-1, 1) for sy in (-1, 1) for sz in (0, 1)])


def _ring(cx: float, cy: float, radius: float, z: float, n: int = 48) -> np.ndarray:
    a = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.stack([cx + radius * np.cos(a), cy + radius * np.sin(a), np.full(n, z)], axis=1)


def _pixels(projector: Projector, points: np.ndarray) -> np.ndarray:
    uv, _ = projector.project(points)
    return np.round(uv * 16).astype(np.int32)


def _fill(image: np.ndarray, projector: Projector, points: np.ndarray, colour: tuple[int, int, int]) -> None:
    hull = cv2.convexHull(_pixels(projector, points).reshape(-1, 1, 2))
    cv2.fillConvexPoly(image, hull, colour, lineType=cv2.LINE_AA, shift=4)


def draw_scene(projector: Projector) -> np.ndarray:
    """The static scene through one camera (uint8 RGB)."""
    h, w = projector.height, projector.width
    rows = np.linspace(0.0, 1.0, h)[:, None, None]
    image = (np.array([170, 160, 150]) * (1 - rows) + np.array([110, 100, 95]) * rows).astype(np.uint8)
    image = np.ascontiguousarray(np.broadcast_to(image, (h, w, 3)))
    tx, ty = TABLE_HALF
    for sx in (-1, 1):
        for sy in (-1, 1):
            _fill(image, projector, _box(sx * (tx - 0.05), sy * (ty - 0.05), -TABLE_HEIGHT, 0.025, 0.025, TABLE_HEIGHT),
                  (80, 60, 45))
    _fill(image, projector, _box(0, 0, -0.03, tx, ty, 0.03), (115, 85, 60))
    top = np.array([(-tx, -ty, 0.0), (tx, -ty, 0.0), (tx, ty, 0.0), (-tx, ty, 0.0)])
    cv2.fillConvexPoly(image, _pixels(projector, top), tuple(round(c * 255) for c in REAL_TABLE_COLOUR),
                       lineType=cv2.LINE_AA, shift=4)
    for i in range(1, 12):  # grain lines, so the top is not a flat patch
        x = -tx + i * 2 * tx / 12
        a, b = _pixels(projector, np.array([(x, -ty, 0.0), (x, ty, 0.0)]))
        cv2.line(image, tuple(a), tuple(b), (195, 155, 110), 1, cv2.LINE_AA, shift=4)
    things = []
    for bx, by in ARM_BASES:
        corners = _box(bx, by, 0.0, 0.05, 0.05, 0.12)

        def base(c: np.ndarray = corners) -> None:
            _fill(image, projector, c, (64, 60, 60))
            _fill(image, projector, c[c[:, 2] > 0.0], (110, 105, 105))

        things.append((float(projector.project(corners)[1].mean()), base))
    for oid, ((cx, cy), r0, r1, height) in CUPS.items():
        colour = tuple(round(c * 255) for c in REAL_COLOURS[oid])
        bottom, rim = _ring(cx, cy, r0, 0.0), _ring(cx, cy, r1, height)

        def cup(bottom: np.ndarray = bottom, rim: np.ndarray = rim, colour: tuple[int, ...] = colour) -> None:
            _fill(image, projector, np.vstack([bottom, rim]), colour)
            ring = _pixels(projector, rim).reshape(-1, 1, 2)
            cv2.fillPoly(image, [ring], tuple(int(c * 0.45) for c in colour), lineType=cv2.LINE_AA, shift=4)
            cv2.polylines(image, [ring], True, (230, 230, 230), 1, cv2.LINE_AA, shift=4)

        things.append((float(projector.project(np.vstack([bottom, rim]))[1].mean()), cup))
    for _, draw in sorted(things, key=lambda t: -t[0]):
        draw()
    return image


def write_demo_clip(folder: Path | str, width: int = 320, height: int = 240, frames: int = 24, fps: float = 15.0) -> Path:
    """Write the demo calibration clip (clip.yaml and one H.264 video per camera) into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    specs = []
    for name, (position, target) in CAMERAS.items():
        pose, intrinsics = look_at(position, target), _intrinsics(width, height)
        specs.append(CameraSpec(name=name, video=f"{name}.mp4", intrinsics=intrinsics, extrinsics=pose))
        camera = GroundedCamera(name=name, video=f"{name}.mp4", intrinsics=intrinsics, intrinsics_tag="measured",
                                world_from_camera=pose, extrinsics_tag="measured")
        still = draw_scene(Projector.of(camera)).astype(np.float32)
        with VideoWriter(folder / f"{name}.mp4", width, height, fps, crf=20) as writer:
            for i in range(frames):
                image = still * (1.0 + 0.04 * math.sin(2 * math.pi * i / frames))  # the room light drifts
                if i < frames // 3:  # someone walks past the wall
                    x = round(width * (0.1 + 0.8 * i / max(1, frames // 3)))
                    cv2.circle(image, (x, round(height * 0.12)), max(3, width // 26), (45, 45, 50), -1, cv2.LINE_AA)
                writer.write(np.clip(image + 0.5, 0, 255).astype(np.uint8))
    bases = [Pose(position=(x, y, 0.0)) for x, y in ARM_BASES]
    save_artifact(ClipSpec(fps=fps, cameras=specs, robot_base=bases,
                           notes="synthetic demo clip drawn by datafarm.renderers.demo (not a recording)"),
                  folder / "clip.yaml")
    return folder


# --- G, z and the episode ----------------------------------------------------------------------------


def _tagged(value: float, tag: str = "fitted", spread: float = 0.1) -> dict[str, Any]:
    if tag == "measured":
        return {"value": value, "tag": tag}
    lo, hi = sorted((value * (1 - spread), value * (1 + spread)))
    return {"value": value, "tag": tag, "range": [lo, hi]}


def _cup(oid: str, cameras: list[str]) -> dict[str, Any]:
    (x, y), r0, r1, height = CUPS[oid]
    return {
        "id": oid, "kind": "cup", "nouns": [oid.replace("_", " "), "cup"], "pose": {"position": [x, y, 0.0]},
        "pose_tag": "fitted", "colour": list(SIM_COLOURS[oid]),
        "observations": [{"camera": c, "frame": 0, "bbox": [100, 80, 140, 130], "mask_area": 900} for c in cameras],
        "mass": _tagged(0.08, "assumed", 0.5), "friction": _tagged(0.6, "assumed", 0.3),
        "outer_radius": _tagged((r0 + r1) / 2, spread=0.05), "height": _tagged(height, spread=0.05),
        "wall_thickness": _tagged(0.003, "assumed", 0.3),
    }


def example_grounding(clip_dir: Path | str) -> Grounding:
    """G for the demo clip in `clip_dir` (cameras and arm bases from its clip.yaml)."""
    spec = load_model(ClipSpec, Path(clip_dir) / "clip.yaml")
    cameras = [{"name": c.name, "video": c.video, "intrinsics": c.intrinsics.model_dump(), "intrinsics_tag": "measured",
                "world_from_camera": c.extrinsics.model_dump(), "extrinsics_tag": "measured"}
               for c in spec.cameras if c.intrinsics is not None and c.extrinsics is not None]
    names = [c["name"] for c in cameras]
    if spec.robot_base is None or len(spec.robot_base) != 2:
        raise ValueError("the demo clip lists two arm bases")
    left, right = spec.robot_base
    spacing = float(np.linalg.norm(np.subtract(left.position, right.position)))
    return Grounding.model_validate({
        "robot": {"kind": "piper-dual",
                  "arms": [{"name": "left", "base": left.model_dump(), "base_tag": "measured"},
                           {"name": "right", "base": right.model_dump(), "base_tag": "measured"}],
                  "spacing": _tagged(spacing, "measured"), "height": _tagged(0.0, "measured")},
        "cameras": cameras,
        "table": {"size_x": _tagged(2 * TABLE_HALF[0]), "size_y": _tagged(2 * TABLE_HALF[1]),
                  "height": _tagged(TABLE_HEIGHT, "assumed"),
                  "tilt_x": {"value": 0.0, "tag": "assumed", "range": [-0.01, 0.01]},
                  "tilt_y": {"value": 0.0, "tag": "assumed", "range": [-0.01, 0.01]},
                  "colour": list(REAL_TABLE_COLOUR)},
        "objects": [_cup(oid, names) for oid in CUPS],
        "workspace": {"bounds_min": [-0.45, -0.6, 0.0], "bounds_max": [0.45, 0.6, 0.5]},
        "notes": "demo grounding of the synthetic demo clip (datafarm.renderers.demo)",
    })


def example_variation(grounding: Grounding, seed: int = 0, appearance: dict[str, Any] | None = None) -> Variation:
    """z for the demo: G's poses, no table change, optionally a drawn appearance (ood)."""
    return Variation(seed=seed, object_poses={o.id: o.pose for o in grounding.objects}, appearance=appearance or {})


def demo_recording(grounding: Grounding, steps: int = 60, control_hz: float = 20.0) -> Recording:
    """`steps` control steps: the left arm reaches over the red cup, the cup rises and travels with
    the gripper over the blue cup (its pose written from the TCP), the arm's motion simulated."""
    world = build_world(grounding)
    recorder = Recorder(world, control_hz=control_hz, capacity=steps)
    robot = world.robot
    cup = np.array(grounding.object("red_cup").pose.position)
    blue = np.array(grounding.object("blue_cup").pose.position)
    waypoints = [cup + (0.0, 0.0, 0.2), cup + (0.0, 0.0, 0.13), (cup + blue) / 2 + (0.0, 0.0, 0.26),
                 blue + (0.0, 0.0, 0.24)]
    q = robot.qpos("left")
    solutions = []
    for target in waypoints:
        q = robot.ik("left", sapien.Pose(np.asarray(target, dtype=np.float64), np.asarray(_DOWN)), q_init=q).q
        solutions.append(q)
    start = robot.qpos("left")
    legs = len(solutions)
    for i in range(steps):
        leg = min(legs - 1, i * legs // steps)
        a = (i - leg * steps / legs) / (steps / legs)
        q_from = start if leg == 0 else solutions[leg - 1]
        smooth = 0.5 - 0.5 * math.cos(math.pi * min(1.0, a * 1.25))
        recorder.step({"left": (1 - smooth) * q_from + smooth * solutions[leg]}, {"left": 0.07})
    recording = recorder.finish()
    # carry the red cup with the gripper from the moment the gripper is lowest over it
    index = recording.object_ids.index("red_cup")
    tcp = recording.end_effectors[:, recording.grippers.index("left"), :3]
    pickup = int(np.argmin(tcp[: steps // 2 + 1, 2])) if steps > 2 else 0
    offset = recording.objects[pickup, index, :3] - tcp[pickup]
    for i in range(pickup, steps):
        recording.objects[i, index, :3] = tcp[i] + offset
        recording.objects[i, index, 3:7] = (1.0, 0.0, 0.0, 0.0)
    return recording


def write_demo_episode(folder: Path | str, grounding: Grounding, steps: int = 60, control_hz: float = 20.0,
                       episode_id: str = "ep_000000", seed: int = 0,
                       appearance: dict[str, Any] | None = None) -> EpisodeRecord:
    """Record the demo and write it as an episode folder (episode.json + data); returns the record."""
    recording = demo_recording(grounding, steps, control_hz)
    variation = example_variation(grounding, seed, appearance)
    verdict = JudgeVerdict.model_validate({
        "passed": True, "stage_reached": "demo", "reason": "demo episode (not judged)",
        "stages": [{"name": "demo", "start_s": 0.0, "end_s": steps / control_hz}], "judge_sha256": "0" * 64})
    record = make_record(recording, episode_id=episode_id, robot="piper-dual", variation=variation, verdict=verdict,
                         expert_sha256="0" * 64)
    write_episode(folder, record, recording)
    return record
