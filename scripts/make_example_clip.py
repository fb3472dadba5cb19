"""Write the example calibration clip `examples/nest_cups/clip/`: clip.yaml and three H.264 videos.

SYNTHETIC PLACEHOLDER. The videos are drawn with numpy/OpenCV: a table, two tapered cups (red and
blue) and the two PiPER base blocks, projected through each camera's intrinsics and extrinsics from
clip.yaml. They are not photographs and not a simulator render; the SAPIEN studio (a later issue)
will render the examples instead. The output is deterministic (fixed scene, single-threaded x264).

World frame (datafarm convention): z up, origin at the centre of the table top, metres. The two arms
sit at the back edge (x = -0.38) facing +x; `front` looks back at them across the table, `left` and
`right` look in from either side.

Usage: python scripts/make_example_clip.py [--out examples/nest_cups/clip]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Callable

import av
import cv2
import numpy as np

from datafarm.artifacts.clip import ClipSpec
from datafarm.artifacts.common import Pose
from datafarm.intake import load_model
from datafarm.sim.world.frames import look_at, matrix_to_quat, quat_to_matrix

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "examples" / "nest_cups" / "clip"

FPS = 15
SECONDS = 2
WIDTH, HEIGHT = 320, 240
FOCAL = 260.0

CAMERAS = {  # name -> (camera position, point it looks at), world frame
    "front": ((0.85, 0.0, 0.55), (0.0, 0.0, 0.0)),
    "left": ((0.30, 0.85, 0.55), (-0.12, 0.0, 0.0)),
    "right": ((0.30, -0.85, 0.55), (-0.12, 0.0, 0.0)),
}
ARM_BASES = ((-0.38, 0.25, 0.0), (-0.38, -0.25, 0.0))  # left arm, right arm; both face +x

TABLE_X, TABLE_Y, TABLE_THICKNESS, TABLE_HEIGHT = 0.45, 0.60, 0.03, 0.75  # half extents, metres
CUPS = (  # (centre x, y), bottom radius, top radius, height, BGR colour
    ((0.10, 0.14), 0.026, 0.032, 0.080, (40, 40, 200)),
    ((0.06, -0.12), 0.034, 0.042, 0.090, (190, 100, 30)),
)

CLIP_YAML_HEADER = """\
# Calibration clip of the nest_cups example: three cameras looking at a table with two cups and two
# PiPER arm bases. Written by scripts/make_example_clip.py; edit that script, not this file.
# World frame: z up, origin at the centre of the table top, metres. Extrinsics are world_from_camera
# in the OpenCV camera frame (x right, y down, z forward); quaternions are (w, x, y, z).
"""

NOTES = (
    "SYNTHETIC PLACEHOLDER drawn by scripts/make_example_clip.py (numpy/OpenCV projection of a table, "
    "a red and a blue cup and two PiPER base blocks); not a real recording. The SAPIEN studio (a later "
    "issue) will render the example clips instead."
)


def clip_yaml() -> str:
    """The text of clip.yaml: fps, the three cameras with intrinsics and extrinsics, the arm bases."""
    fmt = lambda v: "[" + ", ".join(f"{c:.6f}".rstrip("0").rstrip(".") if c else "0" for c in v) + "]"  # noqa: E731
    lines = [CLIP_YAML_HEADER, f"fps: {FPS}", "cameras:"]
    for name, (position, target) in CAMERAS.items():
        q = tuple(float(c) for c in matrix_to_quat(look_at(position, target)))
        lines += [
            f"  - name: {name}",
            f"    video: {name}.mp4",
            "    intrinsics:",
            f"      {{width: {WIDTH}, height: {HEIGHT}, fx: {FOCAL:g}, fy: {FOCAL:g}, cx: {WIDTH / 2:g}, cy: {HEIGHT / 2:g}}}",
            "    extrinsics:  # world_from_camera",
            f"      position: {fmt(position)}",
            f"      quaternion: {fmt(q)}",
        ]
    lines.append("robot_base:  # left arm, then right arm; both face +x (towards the front camera)")
    for base in ARM_BASES:
        lines.append(f"  - {{position: {fmt(base)}, quaternion: [1, 0, 0, 0]}}")
    lines.append(f"notes: >-\n  {NOTES}")
    return "\n".join(lines) + "\n"


class Projector:
    """Projects world points into one camera's image (pinhole, no distortion)."""

    def __init__(self, k: np.ndarray, pose: Pose) -> None:
        self.k = k
        r_wc = quat_to_matrix(pose.quaternion)
        self.r_cw = r_wc.T
        self.t_cw = -r_wc.T @ np.asarray(pose.position)

    def depth(self, points: np.ndarray) -> np.ndarray:
        """Distance along the optical axis of each world point."""
        return (points @ self.r_cw.T + self.t_cw)[:, 2]

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """Pixel coordinates (N, 2) of world points (N, 3), in 1/16 pixel fixed point for cv2 drawing."""
        cam = points @ self.r_cw.T + self.t_cw
        uv = (cam @ self.k.T)[:, :2] / cam[:, 2:3]
        return np.round(uv * 16).astype(np.int32)


def _box(cx: float, cy: float, z0: float, hx: float, hy: float, hz: float) -> np.ndarray:
    return np.array([(cx + sx * hx, cy + sy * hy, z0 + sz * hz) for sx in (-1, 1) for sy in (-1, 1) for sz in (0, 1)])


def _ring(cx: float, cy: float, radius: float, z: float, n: int = 48) -> np.ndarray:
    a = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.stack([cx + radius * np.cos(a), cy + radius * np.sin(a), np.full(n, z)], axis=1)


def _fill(img: np.ndarray, pixels: np.ndarray, colour: tuple[int, int, int]) -> None:
    hull = cv2.convexHull(pixels.reshape(-1, 1, 2))
    cv2.fillConvexPoly(img, hull, colour, lineType=cv2.LINE_AA, shift=4)


def draw_scene(project: Projector) -> np.ndarray:
    """One BGR image of the static scene seen by `project`'s camera."""
    rows = np.linspace(0.0, 1.0, HEIGHT)[:, None, None]
    img = (np.array([150, 160, 170]) * (1 - rows) + np.array([95, 100, 110]) * rows).astype(np.uint8)
    img = np.ascontiguousarray(np.broadcast_to(img, (HEIGHT, WIDTH, 3)))

    # table: legs, then the slab's sides, then the top (the cameras are all above the table)
    for sx in (-1, 1):
        for sy in (-1, 1):
            leg = _box(sx * (TABLE_X - 0.05), sy * (TABLE_Y - 0.05), -TABLE_HEIGHT, 0.025, 0.025, TABLE_HEIGHT)
            _fill(img, project(leg), (45, 60, 80))
    _fill(img, project(_box(0, 0, -TABLE_THICKNESS, TABLE_X, TABLE_Y, TABLE_THICKNESS)), (60, 85, 115))
    top = np.array([(-TABLE_X, -TABLE_Y, 0), (TABLE_X, -TABLE_Y, 0), (TABLE_X, TABLE_Y, 0), (-TABLE_X, TABLE_Y, 0)])
    cv2.fillConvexPoly(img, project(top), (120, 165, 205), lineType=cv2.LINE_AA, shift=4)
    for i in range(1, 12):  # a few grain lines so the top is not a flat patch
        x = -TABLE_X + i * 2 * TABLE_X / 12
        seg = project(np.array([(x, -TABLE_Y, 0.0), (x, TABLE_Y, 0.0)]))
        cv2.line(img, tuple(seg[0]), tuple(seg[1]), (110, 155, 195), 1, cv2.LINE_AA, shift=4)

    # objects, far to near
    objects: list[tuple[float, Callable[[], None]]] = []
    for bx, by, bz in ARM_BASES:
        corners = _box(bx, by, bz, 0.05, 0.05, 0.12)

        def base(c: np.ndarray = corners) -> None:
            _fill(img, project(c), (60, 60, 64))  # the sides
            _fill(img, project(c[c[:, 2] > c[:, 2].min()]), (105, 105, 110))  # the lighter top face

        objects.append((float(project.depth(corners).mean()), base))
    for (cx, cy), r0, r1, height, colour in CUPS:
        bottom, rim = _ring(cx, cy, r0, 0.0), _ring(cx, cy, r1, height)
        inner = tuple(int(c * 0.45) for c in colour)

        def cup(bottom=bottom, rim=rim, colour=colour, inner=inner) -> None:
            _fill(img, project(np.vstack([bottom, rim])), colour)
            cv2.fillPoly(img, [project(rim).reshape(-1, 1, 2)], inner, lineType=cv2.LINE_AA, shift=4)
            cv2.polylines(img, [project(rim).reshape(-1, 1, 2)], True, (230, 230, 230), 1, cv2.LINE_AA, shift=4)

        objects.append((float(project.depth(np.vstack([bottom, rim])).mean()), cup))
    for _, draw in sorted(objects, key=lambda o: -o[0]):
        draw()
    return img


def write_video(path: Path, frames: list[np.ndarray]) -> None:
    """Encode BGR frames as H.264 (yuv420p) in mp4, single-threaded so the bytes are reproducible."""
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=FPS, options={"crf": "26", "preset": "medium", "threads": "1"})
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.thread_count = 1
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def make_clip(out: Path) -> None:
    """Write clip.yaml and one video per camera into `out` (created if needed)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "clip.yaml").write_text(clip_yaml())
    spec = load_model(ClipSpec, out / "clip.yaml")  # draw from what the file says, rounding included
    n = FPS * SECONDS
    for cam in spec.cameras:
        assert cam.intrinsics is not None and cam.extrinsics is not None
        k = np.array([[cam.intrinsics.fx, 0, cam.intrinsics.cx], [0, cam.intrinsics.fy, cam.intrinsics.cy], [0, 0, 1]])
        still = draw_scene(Projector(k, cam.extrinsics)).astype(np.float32)
        # a slow, small brightness drift (as from room light) so consecutive frames differ
        frames = [np.clip(still * (1.0 + 0.04 * math.sin(2 * math.pi * i / n)), 0, 255).astype(np.uint8) for i in range(n)]
        write_video(out / cam.video, frames)


def main() -> None:
    """Command line entry: write the example clip."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="clip folder to write (default: %(default)s)")
    args = parser.parse_args()
    make_clip(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
