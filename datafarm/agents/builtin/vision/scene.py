"""A whole grounding G from a clip's frames and what clip.yaml says: cameras (given, or fitted from a
ChArUco board), the robot at its given bases, the table (its plane is the world's z = 0; its edges
found in the views), the objects (segmented, matched across views, fitted with primitives, named after
the task text), and what cannot be seen (mass, friction, hidden dimensions) tagged assumed with
randomization ranges.

`ground_scene(SceneInput) -> dict` returns G as JSON-able data; `Grounding.model_validate` accepts it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from datafarm.agents.builtin.vision.camera import Camera
from datafarm.agents.builtin.vision.charuco import (
    Board,
    fit_camera,
    triangulated_square,
)
from datafarm.agents.builtin.vision.naming import Named, name_objects
from datafarm.agents.builtin.vision.objects import FoundObject, find_objects
from datafarm.agents.builtin.vision.robot import robot_solids
from datafarm.agents.builtin.vision.segment import (
    PlaneGrid,
    Segmentation,
    View,
    segment,
)
from datafarm.agents.builtin.vision.table import TableEdges, table_edges
from datafarm.artifacts.common import Intrinsics, Pose
from datafarm.sim.world.frames import matrix_to_pose, pose_to_matrix

ASSUMED_FOV_DEG = 60.0
"""Horizontal field of view assumed for a camera whose intrinsics are neither given nor fittable."""
TABLE_HEIGHT = (0.75, 0.6, 0.95)
"""Assumed height of the table top above the floor: (nominal, low, high), metres."""
TABLE_TILT = 0.01
"""Assumed table tilt range, +- radians."""
SIZE_RANGE = 0.1
"""Relative randomization range of a fitted dimension (+-)."""
POSE_EPS = 1e-9
MASS_RANGE = (0.5, 2.0)
"""Assumed mass range as factors of the nominal mass."""
FRICTION = (0.6, 0.4, 0.9)
"""Assumed friction: (nominal, low, high)."""
DENSITY = {"box": 600.0, "cylinder": 600.0, "sphere": 850.0, "drum": 300.0, "scale": 700.0, "drawer_cabinet": 200.0}
"""Assumed density of each kind's bounding volume, kg/m^3 (cups are weighed as thin shells)."""
CUP_MATERIAL = 1100.0
"""Assumed density of a cup's wall material, kg/m^3."""
REACH_TOP = 0.5
"""Top of the workspace above the table, metres."""
ASSUMED_MARGIN = 0.15
"""How far beyond what stands on it an unseen table side is assumed, metres."""
ARM_BASE_HALF = 0.06
"""Half the side of the square a PiPER base stands on, metres (with a little room)."""
BOARD_MARGIN = 0.012
"""Paper around a board's squares treated as part of the flat board, metres."""


class GroundingError(Exception):
    """The clip does not allow a grounding (no extrinsics and no board, too few views...)."""


@dataclass
class CameraInput:
    """One camera as the author's tools describe it, with the frames fetched from it."""

    name: str
    """Camera (view) name."""
    video: str | None
    """Its video file name."""
    width: int
    """Video width, pixels."""
    height: int
    """Video height, pixels."""
    intrinsics: Intrinsics | None
    """From clip.yaml, when given."""
    extrinsics: Pose | None
    """world_from_camera from clip.yaml, when given."""
    frames: list[np.ndarray]
    """RGB frames fetched (any size: a fetched image may be scaled down)."""
    indices: list[int]
    """Their frame indices."""


@dataclass
class SceneInput:
    """Everything a grounding is made from."""

    cameras: list[CameraInput]
    """The views."""
    robot_kind: str
    """`piper` or `piper-dual`."""
    robot_base: list[Pose] | None
    """Arm bases from clip.yaml (left then right for a dual rig), when given."""
    board: Mapping[str, Any] | None
    """The ChArUco board's description, when the clip has one."""
    task: str
    """The task text (its nouns name the objects)."""


@dataclass
class GroundedScene:
    """The grounding and what it was made from (for reports and tests)."""

    grounding: dict[str, Any]
    """G as JSON-able data."""
    segmentation: Segmentation
    """The segmentation."""
    objects: list[Named]
    """The named objects."""
    edges: TableEdges
    """The table's edges."""
    board_fits: dict[str, float] = field(default_factory=dict)
    """Camera name -> board reprojection RMS (px), for cameras fitted from the board."""


def _tagged(value: float, tag: str, spread: float | None = None, low: float | None = None,
            high: float | None = None) -> dict[str, Any]:
    """A TaggedFloat as data; `spread` is relative (+-), or give `low` and `high`."""
    value = float(value)
    if tag == "measured":
        return {"value": value, "tag": tag}
    if low is None or high is None:
        s = abs(value) * (spread if spread is not None else SIZE_RANGE)
        low, high = value - s, value + s
    return {"value": value, "tag": tag, "range": [float(min(low, value)), float(max(high, value))]}


def _assumed_camera(c: CameraInput) -> Intrinsics:
    fx = c.width / (2 * math.tan(math.radians(ASSUMED_FOV_DEG) / 2))
    return Intrinsics(width=c.width, height=c.height, fx=fx, fy=fx, cx=(c.width - 1) / 2, cy=(c.height - 1) / 2)


def calibrate(inputs: SceneInput, board: Board | None) -> tuple[list[Camera], list[dict[str, Any]], dict[str, float]]:
    """Each view's camera: from clip.yaml (measured) or the board (fitted). Returns the cameras at the
    fetched frames' size, G's camera entries and the board fits' reprojection errors."""
    cameras, entries, rms = [], [], {}
    for c in inputs.cameras:
        intrinsics, intrinsics_tag = c.intrinsics, "measured"
        pose, pose_tag = c.extrinsics, "measured"
        frames_full = [cv2.resize(f, (c.width, c.height), interpolation=cv2.INTER_LINEAR)
                       if f.shape[:2] != (c.height, c.width) else f for f in c.frames]
        if pose is None or intrinsics is None:
            if board is None:
                if pose is None:
                    raise GroundingError(f"camera {c.name}: clip.yaml gives no extrinsics and the clip describes no "
                                         "calibration board to fit them from")
            else:
                K = None
                dist = None
                if intrinsics is not None:
                    K = np.array([[intrinsics.fx, 0, intrinsics.cx], [0, intrinsics.fy, intrinsics.cy], [0, 0, 1]])
                    dist = np.asarray(intrinsics.distortion, float)
                fit = fit_camera(board, frames_full, K, dist)
                if fit is None and pose is None:
                    raise GroundingError(f"camera {c.name}: the calibration board is not visible enough to fit its pose")
                if fit is not None:
                    if pose is None:
                        pose, pose_tag = matrix_to_pose(fit.world_from_camera), "fitted"
                    if intrinsics is None:
                        K = fit.K
                        intrinsics = Intrinsics(width=c.width, height=c.height, fx=float(K[0, 0]), fy=float(K[1, 1]),
                                                cx=float(K[0, 2]), cy=float(K[1, 2]))
                        intrinsics_tag = "fitted"
                    rms[c.name] = fit.rms_px
        if intrinsics is None:
            intrinsics, intrinsics_tag = _assumed_camera(c), "assumed"
        assert pose is not None
        camera = Camera.of(c.name, intrinsics, pose)
        cameras.append(camera)
        entries.append({"name": c.name, "video": c.video, "intrinsics": intrinsics.model_dump(mode="json"),
                        "intrinsics_tag": intrinsics_tag, "world_from_camera": pose.model_dump(mode="json"),
                        "extrinsics_tag": pose_tag})
    return cameras, entries, rms


def robot_entry(kind: str, bases: Sequence[Pose]) -> dict[str, Any]:
    """G's robot from its arm bases (given by clip.yaml: measured)."""
    names = ["arm"] if kind == "piper" else ["left", "right"]
    if len(bases) != len(names):
        raise GroundingError(f"a {kind} has {len(names)} arm(s) but clip.yaml gives {len(bases)} robot_base pose(s)")
    robot: dict[str, Any] = {"kind": kind, "arms": [{"name": n, "base": b.model_dump(mode="json"), "base_tag": "measured"}
                                                    for n, b in zip(names, bases)]}
    if kind == "piper-dual":
        (l, r) = (np.asarray(b.position) for b in bases)
        robot["spacing"] = _tagged(float(np.linalg.norm(l - r)), "measured")
        robot["height"] = _tagged(float(bases[0].position[2]), "measured")
    return robot


def _board_cells(board: Board, grid: PlaneGrid) -> np.ndarray:
    outline = board.outline_in_world(BOARD_MARGIN)[:, :2]
    cells = grid.cell_of(outline)
    out = np.zeros((grid.ny, grid.nx), np.uint8)
    cv2.fillConvexPoly(out, np.round(cells * 16).astype(np.int32), 1, shift=4)
    return out > 0


def _standing_extent(found: Sequence[FoundObject], bases: Sequence[Pose]) -> tuple[float, float, float, float]:
    """(x_min, x_max, y_min, y_max) of what stands on the table: the objects' footprints and the arm bases."""
    from datafarm.agents.builtin.vision.objects import footprint

    pts = [np.asarray(b.position[:2]) + d for b in bases for d in ((-ARM_BASE_HALF, -ARM_BASE_HALF), (ARM_BASE_HALF, ARM_BASE_HALF))]
    pts += [xy for f in found for xy in footprint(f.best)]
    a = np.array(pts)
    return (float(a[:, 0].min()), float(a[:, 0].max()), float(a[:, 1].min()), float(a[:, 1].max()))


def on_the_table(found: Sequence[FoundObject], seg: Segmentation,
                 bases: Sequence[Pose]) -> tuple[list[FoundObject], TableEdges]:
    """The found objects that stand on the table top, and the top's edges.

    Nothing found over an arm's base is an object. An edge is looked for beyond everything standing
    on the table, so something found beyond the real edge (the floor seen past a table whose colour
    it shares: a shade of it to the table model, and, being far below the plane, no agreement between
    the views there) hides that edge. When a side's edge is not found, it is looked for again beyond the robot alone: if it is found there,
    objects whose footprint centre lies beyond it cannot rest on the top and are dropped, provided
    the edges found without them then include that side (the drop explains the missing edge)."""
    # nothing stands where an arm's base does: an object found there is the robot itself, left over by
    # a robot mask drawn through a slightly wrong (fitted) camera
    found = [f for f in found if all(float(np.hypot(*(_centre(f) - np.asarray(b.position[:2])))) > ARM_BASE_HALF
                                     for b in bases)]
    edges = table_edges(seg.views, seg.model, _standing_extent(found, bases))
    missing = [side for side, seen in edges.seen.items() if not seen]
    if not missing or not found:
        return found, edges
    bare = table_edges(seg.views, seg.model, _standing_extent([], bases))
    beyond: set[int] = set()
    for side in missing:
        if not bare.seen[side]:
            continue
        axis, sign = (0 if side.startswith("x") else 1), (-1.0 if side.endswith("min") else 1.0)
        limit = getattr(bare, side)
        beyond |= {k for k, f in enumerate(found) if sign * float(_centre(f)[axis]) > sign * limit}
    if not beyond:
        return found, edges
    kept = [f for k, f in enumerate(found) if k not in beyond]
    again = table_edges(seg.views, seg.model, _standing_extent(kept, bases))
    explained = all(again.seen[side] for side in missing if bare.seen[side])
    return (kept, again) if explained else (found, edges)


def _centre(f: FoundObject) -> np.ndarray:
    """Centre of a found object's footprint (world x, y)."""
    from datafarm.agents.builtin.vision.objects import footprint

    return footprint(f.best).mean(axis=0)


def _yaw_quaternion(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def _facing(yaw: float, sx: float, sy: float, toward: np.ndarray) -> tuple[float, float, float]:
    """The box's yaw (among yaw + k*90 degrees) whose +x faces `toward` (a horizontal direction), with
    its sizes along its new x and y."""
    best = None
    for k in range(4):
        a = yaw + k * math.pi / 2
        alignment = math.cos(a) * toward[0] + math.sin(a) * toward[1]
        if best is None or alignment > best[0]:
            best = (alignment, k, a)
    _, k, a = best  # type: ignore[misc]
    if k % 2:
        sx, sy = sy, sx
    return math.remainder(a, 2 * math.pi), sx, sy


def _mass(kind: str, extents: tuple[float, float, float], wall: float | None = None) -> dict[str, Any]:
    x, y, z = extents
    if kind == "cup" and wall is not None:
        r = x / 2
        area = 2 * math.pi * r * z + math.pi * r * r
        nominal = area * wall * CUP_MATERIAL
    else:
        volume = x * y * z * (math.pi / 4 if kind in ("cylinder", "drum") else math.pi / 6 if kind == "sphere" else 1.0)
        nominal = volume * DENSITY.get(kind, 600.0)
    nominal = float(min(max(nominal, 0.005), 30.0))
    return _tagged(nominal, "assumed", low=nominal * MASS_RANGE[0], high=nominal * MASS_RANGE[1])


def object_entry(n: Named, object_id: str, robot_bases: Sequence[Pose], cameras: Sequence[Camera],
                 observations: list[dict[str, Any]]) -> dict[str, Any]:
    """One G object from its fit and name (see the module docstring for what is assumed)."""
    fit = n.found.best
    p = fit.params
    kind = n.kind
    entry: dict[str, Any] = {
        "id": object_id, "kind": kind, "nouns": list(n.nouns),
        "colour": [round(float(c), 4) for c in n.found.colour],
        "pose_tag": "fitted", "observations": observations,
        "friction": _tagged(FRICTION[0], "assumed", low=FRICTION[1], high=FRICTION[2]),
    }
    yaw = 0.0
    centre = np.array([p["x"], p["y"]])
    if fit.kind == "box":
        sx, sy, sz = p["sx"], p["sy"], p["sz"]
        yaw = p["yaw"]
    else:
        sx = sy = 2 * p["r"]
        sz = fit.height
    if kind == "box":
        entry["size"] = {"x": _tagged(sx, "fitted"), "y": _tagged(sy, "fitted"), "z": _tagged(sz, "fitted")}
        entry["mass"] = _mass(kind, (sx, sy, sz))
    elif kind in ("cylinder", "drum"):
        r = (sx + sy) / 4
        key = "radius" if kind == "cylinder" else "head_radius"
        entry[key] = _tagged(r, "fitted")
        entry["height"] = _tagged(sz, "fitted")
        entry["mass"] = _mass(kind, (2 * r, 2 * r, sz))
        yaw = 0.0
    elif kind == "sphere":
        r = p["r"] if fit.kind == "sphere" else (sx + sy + sz) / 6
        entry["radius"] = _tagged(r, "fitted")
        entry["mass"] = _mass(kind, (2 * r, 2 * r, 2 * r))
        yaw = 0.0
    elif kind == "cup":
        r = (sx + sy) / 4
        wall = min(0.004, 0.15 * r)
        entry["outer_radius"] = _tagged(r, "fitted")
        entry["height"] = _tagged(sz, "fitted")
        entry["wall_thickness"] = _tagged(wall, "assumed", low=0.5 * wall, high=min(1.5 * wall, 0.5 * r))
        entry["mass"] = _mass(kind, (2 * r, 2 * r, sz), wall)
        yaw = 0.0
    elif kind == "scale":
        # the readout faces the cameras (the lab set the scale up to be read)
        toward = np.mean([c.centre[:2] - centre for c in cameras], axis=0)
        yaw, sx, sy = _facing(yaw, sx, sy, toward / (np.linalg.norm(toward) + 1e-9))
        plate_z = min(0.006, 0.3 * sz)
        body = sz - plate_z
        entry["plate"] = {"x": _tagged(sx, "fitted"), "y": _tagged(sy, "fitted"),
                          "z": _tagged(plate_z, "assumed", low=0.5 * plate_z, high=1.5 * plate_z)}
        entry["body_height"] = _tagged(body, "fitted")
        entry["capacity"] = _tagged(5.0, "assumed", low=3.0, high=10.0)
        width = min(0.06, 0.6 * sy)
        entry["display"] = {"pose": {"position": [sx / 2 + 0.001, 0.0, body / 2], "quaternion": [0.5, 0.5, 0.5, 0.5]},
                            "width": width, "height": min(0.02, 0.7 * body), "unit": "g", "decimals": 0}
        entry["mass"] = _mass(kind, (sx, sy, sz))
    elif kind == "drawer_cabinet":
        # the drawer's front faces the robot, which must pull it open
        nearest = min(robot_bases, key=lambda b: float(np.linalg.norm(np.asarray(b.position[:2]) - centre)))
        toward = np.asarray(nearest.position[:2]) - centre
        yaw, sx, sy = _facing(yaw, sx, sy, toward / (np.linalg.norm(toward) + 1e-9))
        entry["size"] = {"x": _tagged(sx, "fitted", 0.08), "y": _tagged(sy, "fitted", 0.08), "z": _tagged(sz, "fitted", 0.08)}
        entry["wall_thickness"] = _tagged(0.012, "assumed", low=0.008, high=0.016)
        entry["drawer_height"] = _tagged(0.45 * sz, "assumed", low=0.4 * sz, high=0.5 * sz)
        entry["drawer_bottom"] = _tagged(0.25 * sz, "assumed", low=0.2 * sz, high=0.3 * sz)
        entry["drawer_travel"] = _tagged(0.6 * sx, "assumed", low=0.5 * sx, high=0.7 * sx)
        handle = min(0.1, 0.4 * sy)
        entry["handle_length"] = _tagged(handle, "assumed", low=0.8 * handle, high=1.2 * handle)
        entry["handle_protrusion"] = _tagged(0.025, "assumed", low=0.02, high=0.03)
        entry["initial_opening"] = _tagged(0.0, "assumed", low=0.0, high=0.005)
        entry["mass"] = _mass(kind, (sx, sy, sz))
    else:
        raise GroundingError(f"no grounding rule for object kind {kind!r}")
    entry["pose"] = {"position": [float(p["x"]), float(p["y"]), 0.0], "quaternion": _yaw_quaternion(yaw)}
    return entry


def _observations(found: FoundObject, cameras: Sequence[Camera], inputs: SceneInput) -> list[dict[str, Any]]:
    out = []
    for vi, mask in sorted(found.masks.items()):
        ys, xs = np.nonzero(mask)
        if len(xs) == 0:
            continue
        c = inputs.cameras[vi]
        # the masks are at the fetched frames' size; observations are in video pixels
        sx, sy = c.width / cameras[vi].width, c.height / cameras[vi].height
        box = [int(xs.min() * sx), int(ys.min() * sy), math.ceil((xs.max() + 1) * sx), math.ceil((ys.max() + 1) * sy)]
        out.append({"camera": c.name, "frame": int(c.indices[0]) if c.indices else 0, "bbox": box,
                    "mask_area": round(len(xs) * sx * sy)})
    return out


def _ids(named: Sequence[Named]) -> list[str]:
    ids, count = [], {}
    for n in named:
        base = f"{n.colour_word}_{n.word}".replace(" ", "_")
        count[base] = count.get(base, 0) + 1
        ids.append(base)
    seen: dict[str, int] = {}
    out = []
    for base in ids:
        if count[base] > 1:
            seen[base] = seen.get(base, 0) + 1
            out.append(f"{base}_{seen[base]}")
        else:
            out.append(base)
    return out


def _lab_to_rgb(lab: np.ndarray) -> list[float]:
    rgb = cv2.cvtColor(np.asarray(lab, np.float32).reshape(1, 1, 3), cv2.COLOR_Lab2RGB).reshape(3)
    return [round(float(v), 4) for v in np.clip(rgb, 0, 1)]


def table_extent(edges: TableEdges, standing: Sequence[float]) -> tuple[list[float], dict[str, bool]]:
    """[x_min, x_max, y_min, y_max] of the table top and which sides were seen. An unseen side mirrors
    the opposite side when that was seen (the world's origin is the top's centre by convention), else
    it lies `ASSUMED_MARGIN` beyond what stands on the table."""
    values = {"x_min": edges.x_min, "x_max": edges.x_max, "y_min": edges.y_min, "y_max": edges.y_max}
    stand = dict(zip(("x_min", "x_max", "y_min", "y_max"), standing))
    opposite = {"x_min": "x_max", "x_max": "x_min", "y_min": "y_max", "y_max": "y_min"}
    out = {}
    for side, value in values.items():
        sign = -1.0 if side.endswith("min") else 1.0
        if edges.seen[side]:
            out[side] = value
        elif edges.seen[opposite[side]]:
            out[side] = -values[opposite[side]]
        else:
            out[side] = stand[side] + sign * ASSUMED_MARGIN
        # whatever the views say, the top holds what stands on it
        out[side] = sign * max(sign * out[side], sign * stand[side] + 0.01)
    return [out["x_min"], out["x_max"], out["y_min"], out["y_max"]], dict(edges.seen)


def table_entry(extent: Sequence[float], seen: dict[str, bool], seg: Segmentation) -> dict[str, Any]:
    """G's table: its size and centre from its edges (fitted where both sides of an axis were seen)."""
    x0, x1, y0, y1 = extent
    sx, sy = x1 - x0, y1 - y0
    colour = _lab_to_rgb(seg.model.colours[int(np.argmax([c[0] for c in seg.model.colours]))])

    def size(value: float, both_seen: bool) -> dict[str, Any]:
        if both_seen:
            return _tagged(value, "fitted", low=value - 0.03, high=value + 0.03)
        return _tagged(value, "assumed", low=value - 0.05, high=value + 0.3)

    return {
        "size_x": size(sx, seen["x_min"] and seen["x_max"]),
        "size_y": size(sy, seen["y_min"] and seen["y_max"]),
        "height": _tagged(TABLE_HEIGHT[0], "assumed", low=TABLE_HEIGHT[1], high=TABLE_HEIGHT[2]),
        "tilt_x": _tagged(0.0, "assumed", low=-TABLE_TILT, high=TABLE_TILT),
        "tilt_y": _tagged(0.0, "assumed", low=-TABLE_TILT, high=TABLE_TILT),
        "colour": colour,
        "center": [float((x0 + x1) / 2), float((y0 + y1) / 2)],
    }


def ground_scene(inputs: SceneInput) -> GroundedScene:
    """G from the clip (see the module docstring). GroundingError when the clip does not allow one."""
    if inputs.robot_kind not in ("piper", "piper-dual"):
        raise GroundingError(f"the builtin grounding knows the PiPER rigs (piper, piper-dual), not {inputs.robot_kind!r}")
    if inputs.robot_base is None:
        raise GroundingError("clip.yaml gives no robot_base: the builtin grounding needs the arm base poses")
    if len(inputs.cameras) < 2:
        raise GroundingError("the builtin grounding needs at least two views to place objects")
    board = Board.parse(inputs.board) if inputs.board else None
    cameras, camera_entries, rms = calibrate(inputs, board)
    # work at the fetched frames' resolution
    cameras = [cam.scaled(c.frames[0].shape[1], c.frames[0].shape[0]) for cam, c in zip(cameras, inputs.cameras)]
    robot = robot_solids([pose_to_matrix(b) for b in inputs.robot_base])
    views = [View.of(cam, c.frames, robot) for cam, c in zip(cameras, inputs.cameras)]
    grid = PlaneGrid.around_origin()
    flat = _board_cells(board, grid) if board is not None else None
    seg = segment(views, grid, flat)
    found, edges = on_the_table(find_objects(seg), seg, inputs.robot_base)
    standing = _standing_extent(found, inputs.robot_base)
    extent, seen = table_extent(edges, standing)
    named = name_objects(found, inputs.task)
    ids = _ids(named)
    objects = [object_entry(n, i, inputs.robot_base, [v.camera for v in seg.views],
                            _observations(n.found, [v.camera for v in seg.views], inputs))
               for n, i in zip(named, ids)]
    scale_checks = []
    if board is not None:
        projections = [v.camera.K @ v.camera.camera_from_world[:3] for v in seg.views]
        square = triangulated_square(board, [c.frames for c in inputs.cameras], projections)
        if square is not None:
            scale_checks.append({"reference": "ChArUco square", "expected": board.square_length, "estimated": square})
    x0, x1, y0, y1 = extent
    tags = {c["name"]: c["extrinsics_tag"] for c in camera_entries}
    notes = (f"builtin grounding: {len(objects)} object(s) found by segmentation against the table and the robot "
             f"in {len(views)} views and fitted with primitives; cameras {', '.join(f'{k} {v}' for k, v in tags.items())}"
             + (f" (board reprojection {', '.join(f'{k} {v:.2f} px' for k, v in rms.items())})" if rms else "")
             + "; mass, friction and hidden dimensions assumed")
    g = {
        "robot": robot_entry(inputs.robot_kind, inputs.robot_base),
        "cameras": camera_entries,
        "table": table_entry(extent, seen, seg),
        "objects": objects,
        "workspace": {"bounds_min": [x0, y0, 0.0], "bounds_max": [x1, y1, REACH_TOP]},
        "scale_checks": scale_checks,
        "notes": notes,
    }
    return GroundedScene(g, seg, named, edges, rms)
