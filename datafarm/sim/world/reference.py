"""The reference scene used to measure simulation and recording speed: a table, the dual PiPER rig
(bases 0.6 m apart at the table's near edge) and three objects (a box, a cylinder and a cup), with
three cameras. Also a scripted action sequence that keeps both arms moving over the objects.
"""

from __future__ import annotations

import math

import numpy as np

from datafarm.artifacts.grounding import Grounding
from datafarm.sim.world.frames import look_at, matrix_to_quat


def _tagged(value: float, tag: str = "assumed", spread: float = 0.2) -> dict:
    if tag == "measured":
        return {"value": value, "tag": tag}
    lo, hi = sorted((value * (1 - spread), value * (1 + spread)))
    return {"value": value, "tag": tag, "range": [lo, hi]}


def _camera(name: str, position: tuple[float, float, float], quaternion: tuple[float, float, float, float]) -> dict:
    return {
        "name": name, "video": f"{name}.mp4",
        "intrinsics": {"width": 320, "height": 240, "fx": 300.0, "fy": 300.0, "cx": 160.0, "cy": 120.0},
        "intrinsics_tag": "measured",
        "world_from_camera": {"position": list(position), "quaternion": list(quaternion)},
        "extrinsics_tag": "fitted",
    }


def _object(oid: str, kind: str, xy: tuple[float, float], colour: list[float], mass: float,
            **dims: float | dict) -> dict:
    """An object as G's author writes it; a dimension given as a dict (a box size) passes through."""
    return {
        "id": oid, "kind": kind, "nouns": [oid.replace("_", " ")], "pose": {"position": [*xy, 0.0]},
        "pose_tag": "fitted", "colour": colour, "mass": _tagged(mass), "friction": _tagged(0.6),
        **{k: v if isinstance(v, dict) else _tagged(v, "fitted", 0.05) for k, v in dims.items()},
    }


def _looking_at_table(position: tuple[float, float, float]) -> tuple[float, float, float, float]:
    """Orientation of a camera at `position` aimed at the middle of the table top."""
    q = matrix_to_quat(look_at(position, (0.0, 0.0, 0.05)))
    return tuple(float(c) for c in q)  # type: ignore[return-value]


def reference_grounding() -> Grounding:
    """G of the reference scene (table 0.9 x 1.4 m, dual PiPER, box + cylinder + cup)."""
    return Grounding.model_validate({
        "robot": {
            "kind": "piper-dual",
            "arms": [
                {"name": "left", "base": {"position": [-0.4, 0.3, 0.0]}, "base_tag": "measured"},
                {"name": "right", "base": {"position": [-0.4, -0.3, 0.0]}, "base_tag": "measured"},
            ],
            "spacing": _tagged(0.6, "measured"), "height": _tagged(0.0, "measured"),
        },
        "cameras": [
            _camera(name, position, _looking_at_table(position))
            for name, position in (("front", (0.7, 0.0, 0.5)), ("left", (0.1, 0.8, 0.5)), ("right", (0.1, -0.8, 0.5)))
        ],
        "table": {
            "size_x": _tagged(0.9, "measured"), "size_y": _tagged(1.4, "measured"),
            "height": _tagged(0.74, "assumed", 0.05),
            "tilt_x": {"value": 0.0, "tag": "assumed", "range": [-0.01, 0.01]},
            "tilt_y": {"value": 0.0, "tag": "assumed", "range": [-0.01, 0.01]},
            "colour": [0.8, 0.78, 0.74],
        },
        "objects": [
            _object("block", "box", (0.0, 0.3), [0.8, 0.1, 0.1], 0.05,
                    size={axis: _tagged(0.04, "fitted", 0.05) for axis in "xyz"}),
            _object("can", "cylinder", (0.05, 0.0), [0.2, 0.6, 0.2], 0.12, radius=0.03, height=0.1),
            _object("mug", "cup", (0.0, -0.3), [0.1, 0.2, 0.8], 0.09, outer_radius=0.04, height=0.09, wall_thickness=0.004),
        ],
        "workspace": {"bounds_min": [-0.45, -0.7, 0.0], "bounds_max": [0.45, 0.7, 0.5]},
    })


def reference_actions(steps: int, arms: tuple[str, ...] = ("left", "right")) -> list[tuple[dict[str, np.ndarray], dict[str, float]]]:
    """A smooth scripted joint-target sequence (one entry per control step) sweeping each arm over the
    table and opening and closing its gripper; deterministic."""
    base = np.array([0.0, 1.2, -1.1, 0.0, 0.6, 0.0])
    sweep = np.array([0.5, 0.3, -0.3, 0.4, 0.3, 0.8])
    out = []
    for i in range(steps):
        phase = 2 * math.pi * i / max(steps, 1)
        joints = {arm: base + sweep * math.sin(phase + k * math.pi / 2) for k, arm in enumerate(arms)}
        grippers = {arm: 0.038 + 0.03 * math.sin(2 * phase + k) for k, arm in enumerate(arms)}
        out.append((joints, grippers))
    return out
