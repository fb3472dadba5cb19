"""Small studio scenes for the tests: cheap to render (few frames), with a board the front camera can read."""

from __future__ import annotations

from typing import Any

from datafarm.studio.scene import SceneSpec


def small_scene(**changes: Any) -> SceneSpec:
    """One PiPER, a red cup, a blue box and a scale; a ChArUco board; a 640x480 front camera (it reads
    the board) and two 320x240 side cameras; 4 frames; camera poses left to the board."""
    data: dict[str, Any] = {
        "name": "small",
        "robot": {"kind": "piper", "base": [-0.38, 0.0]},
        "table": {"texture": "check", "colour": "blue"},
        "objects": [
            {"id": "red_cup", "kind": "cup", "colour": "red", "position": [0.0, 0.15], "outer_radius": 0.03,
             "height": 0.07, "mass": 0.06},
            {"id": "blue_box", "kind": "box", "colour": "blue", "position": [-0.05, -0.2], "yaw": 0.4,
             "size": {"x": 0.04, "y": 0.05, "z": 0.04}},
            {"id": "scale", "kind": "scale", "colour": [0.2, 0.2, 0.22], "position": [0.05, -0.02],
             "plate": {"x": 0.12, "y": 0.12, "z": 0.006}, "body_height": 0.025},
        ],
        "board": {"center": [0.27, 0.0]},
        "cameras": [
            {"name": "front", "width": 640, "height": 480, "fx": 540, "position": [0.9, 0.0, 0.62]},
            {"name": "left", "position": [0.35, 0.8, 0.65]},
            {"name": "right", "position": [0.35, -0.8, 0.65], "roll": 0.05},
        ],
        "known": {"extrinsics": False},
        "seconds": 0.4,
        "fps": 10,
        "seed": 7,
    }
    data.update(changes)
    return SceneSpec.model_validate(data)


def same(a: object, b: object) -> bool:
    """Two artifacts equal up to float rounding (a quaternion is renormalized when it is read back)."""
    def rounded(value: object) -> object:
        if isinstance(value, float):
            return round(value, 12)
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rounded(v) for v in value]
        return value

    return rounded(a.model_dump(mode="json")) == rounded(b.model_dump(mode="json"))  # type: ignore[attr-defined]
