"""`render_clip`: a synthetic calibration clip of a described scene, rendered with SAPIEN.

The scene's exact grounding (datafarm.studio.truth) is built as a render-enabled world (robot at
rest with open grippers, table, objects with G's colours), dressed with textures, a room, the ChArUco
board and scale readouts, and lit. Every camera renders every frame while the lights drift slowly;
a sensor model adds blur, vignetting, white balance, exposure flicker and noise; the frames are
encoded as H.264. The clip folder gets `clip.yaml` (with the calibration the scene says the lab
knows) and one `<camera>.mp4` per camera; the truth goes to a separate `truth.json`, outside the clip
folder, so nothing that reads the clip can read the truth.

Rendering needs a Vulkan device (lavapipe on the CPU is enough): without one, RenderDeviceError says
how to get it. SAPIEN keeps one renderer per process: its first frame costs seconds (shader
compilation), and every new scene's first frame a few seconds more on lavapipe, so render many clips
in one process (as `datafarm.studio.examples.regenerate` does).

The frames are bit-exact per scene and seed. The videos are encoded one at a time in a fresh process
(datafarm.studio.video explains why), so the mp4 bytes are reproducible too on a given machine.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from datafarm.artifacts.clip import ClipReport, ClipSpec
from datafarm.errors import InputError, Problem
from datafarm.intake import validate_clip
from datafarm.sim.render_passes import mount_camera
from datafarm.sim.world import build_world
from datafarm.studio.dressing import dress
from datafarm.studio.scene import SceneSpec, load_scene
from datafarm.studio.sensor import Sensor
from datafarm.studio.truth import TRUTH_FILE, StudioTruth, save_truth, scene_truth
from datafarm.studio.video import DEFAULT_CRF, RawVideo, encode_raw_videos

BOARD_FILE = "board.yaml"
"""Where the board description goes when clip.yaml has no `board` field (see `clip_document`)."""

CLIP_HEADER = """\
# Calibration clip rendered by the datafarm studio (`datafarm studio render`) from scene {scene!r}
# (scene sha256 {sha}, seed {seed}). Synthetic: a SAPIEN render with procedural textures, drifting
# light and a sensor noise model. Regenerate it from the scene; do not edit.
# World frame: z up, origin at the centre of the table top, metres. Extrinsics are world_from_camera
# in the OpenCV camera frame (x right, y down, z forward); quaternions are (w, x, y, z).
"""


@dataclass
class RenderedClip:
    """What `render_clip` wrote."""

    clip_dir: Path
    """The clip folder (clip.yaml and one video per camera)."""
    truth_path: Path
    """Where truth.json went (outside the clip folder)."""
    truth: StudioTruth
    """The truth it holds."""
    report: ClipReport
    """The clip as datafarm's intake validated it."""
    seconds: float
    """Wall time spent, seconds."""


class _ClipDumper(yaml.SafeDumper):
    """YAML with short lists and flat mappings of scalars on one line (`position: [0.85, 0.0, 0.55]`)."""


def _flow_if_flat(dumper: yaml.SafeDumper, data: list | dict) -> yaml.Node:
    values = data if isinstance(data, list) else list(data.values())
    flat = all(isinstance(v, (int, float, str, bool)) for v in values) and len(values) <= 8
    if isinstance(data, list):
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat)
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flat)


_ClipDumper.add_representer(list, _flow_if_flat)
_ClipDumper.add_representer(dict, _flow_if_flat)


def dump_yaml(data: dict[str, Any]) -> str:
    """`data` as readable YAML (key order kept, flat lists and mappings inline)."""
    return yaml.dump(data, Dumper=_ClipDumper, sort_keys=False, width=110, allow_unicode=True)


def default_truth_path(clip_dir: Path | str) -> Path:
    """`truth.json` next to the clip folder (in its parent), never inside it."""
    return Path(clip_dir).resolve().parent / TRUTH_FILE


def _rounded(values: Any, digits: int = 6) -> list[float]:
    return [round(float(v), digits) + 0.0 for v in values]


def clip_document(truth: StudioTruth, notes: str = "") -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(clip.yaml's content, a separate board document or None) for a truth.

    Intrinsics, extrinsics and arm bases appear only when `truth.known` says the lab knows them. The
    board goes into clip.yaml's `board` when ClipSpec has that field; otherwise it is returned
    separately, to be written as `board.yaml` in the clip folder."""
    g, known = truth.grounding, truth.known
    cameras = []
    for cam in g.cameras:
        entry: dict[str, Any] = {"name": cam.name, "video": cam.video}
        if known.intrinsics:
            i = cam.intrinsics
            entry["intrinsics"] = {"width": i.width, "height": i.height, "fx": round(i.fx, 4), "fy": round(i.fy, 4),
                                   "cx": round(i.cx, 4), "cy": round(i.cy, 4)}
        if known.extrinsics:
            entry["extrinsics"] = {"position": _rounded(cam.world_from_camera.position),
                                   "quaternion": _rounded(cam.world_from_camera.quaternion)}
        cameras.append(entry)
    doc: dict[str, Any] = {"fps": truth.fps, "cameras": cameras}
    if known.robot_base:
        doc["robot_base"] = [{"position": _rounded(a.base.position), "quaternion": _rounded(a.base.quaternion)}
                             for a in g.robot.arms]
    board = None
    if truth.board is not None:
        b = truth.board
        board = {"dictionary": b.dictionary, "squares_x": b.squares_x, "squares_y": b.squares_y,
                 "square_length": b.square_length, "marker_length": b.marker_length,
                 "world_from_board": {"position": _rounded(b.world_from_board.position),
                                      "quaternion": _rounded(b.world_from_board.quaternion)}}
        if "board" in ClipSpec.model_fields:
            doc["board"], board = board, None
    doc["notes"] = notes or f"Synthetic studio clip of scene {truth.scene!r}; its truth is kept apart from the clip."
    return doc, board


def clip_files(truth: StudioTruth, notes: str = "") -> tuple[str, str | None]:
    """The text of clip.yaml and, when ClipSpec has no `board` field, of board.yaml (else None)."""
    doc, board = clip_document(truth, notes)
    header = CLIP_HEADER.format(scene=truth.scene, sha=truth.scene_sha256[:12], seed=truth.seed)
    board_text = None
    if board is not None:
        board_text = ("# The ChArUco board of this clip (OpenCV board frame; see datafarm.studio.board).\n"
                      + dump_yaml(board))
    return header + "\n" + dump_yaml(doc), board_text


def _light_levels(scene: SceneSpec, rng: np.random.Generator) -> np.ndarray:
    """Relative light intensity per frame: two slow sinusoids with random phases (amplitude `drift`)."""
    t = np.arange(scene.frames) / scene.fps
    phases = rng.uniform(0, 2 * math.pi, 2)
    period = max(scene.seconds, 1.0)
    wave = 0.7 * np.sin(2 * math.pi * t / (1.7 * period) + phases[0]) + 0.3 * np.sin(2 * math.pi * t / (0.45 * period) + phases[1])
    return 1.0 + scene.lighting.drift * wave


def render_clip(scene: SceneSpec | Path | str, out_dir: Path | str, truth_path: Path | str | None = None,
                crf: int = DEFAULT_CRF) -> RenderedClip:
    """Render `scene` (a SceneSpec or a SCENE.yaml path) into the clip folder `out_dir` and write its
    truth to `truth_path` (default: truth.json in `out_dir`'s parent). Deterministic per scene and seed.

    InputError if the truth would land inside the clip folder; RenderDeviceError without a render
    device."""
    start = time.perf_counter()
    spec = scene if isinstance(scene, SceneSpec) else load_scene(scene)
    out = Path(out_dir).resolve()
    truth_file = Path(truth_path).resolve() if truth_path is not None else default_truth_path(out)
    if out == truth_file.parent or out in truth_file.parents:
        raise InputError([Problem("the truth must not be written inside the clip folder (the pipeline reads it)",
                                  file=truth_file, expected=f"a path outside {out}")])
    truth = scene_truth(spec)
    seeds = np.random.SeedSequence(spec.seed).spawn(3)
    texture_rng, light_rng = np.random.default_rng(seeds[0]), np.random.default_rng(seeds[1])

    world = build_world(truth.grounding, render=True)
    for arm in world.robot.arms:
        gripper = world.robot.gripper(arm)
        world.robot.reset(arm, np.zeros(len(world.robot.joint_names(arm))),
                          gripper_width=gripper.max_width if gripper is not None else None)
    lights = dress(world, spec, texture_rng)
    cameras = {c.name: mount_camera(world.scene, c.name, c.intrinsics, c.world_from_camera)
               for c in truth.grounding.cameras}
    sensors = {c.name: Sensor.create(c.intrinsics.width, c.intrinsics.height, spec.noise, np.random.default_rng(s))
               for c, s in zip(truth.grounding.cameras, seeds[2].spawn(len(cameras)))}
    levels = _light_levels(spec, light_rng)

    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("*.mp4"), out / BOARD_FILE]:
        stale.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix=".studio-", dir=out.parent) as spool:
        videos = {c.name: RawVideo(Path(spool) / f"{c.name}.rgb", out / c.video, c.intrinsics.width,
                                   c.intrinsics.height, spec.fps, crf).start() for c in truth.grounding.cameras}
        for level in levels:
            lights.set_level(float(level))
            world.scene.update_render()
            for name, camera in cameras.items():
                camera.take_picture()
                colour = camera.get_picture("Color")[..., :3]
                rgb = (np.clip(colour, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
                videos[name].append(sensors[name].expose(rgb))
        encode_raw_videos(list(videos.values()))

    clip_text, board_text = clip_files(truth, spec.notes)
    (out / "clip.yaml").write_text(clip_text)
    if board_text is not None:
        (out / BOARD_FILE).write_text(board_text)
    save_truth(truth, truth_file)
    report = validate_clip(out)
    return RenderedClip(out, truth_file, truth, report, time.perf_counter() - start)
