"""Reading URDF text into SAPIEN articulations, physics-only unless visuals are asked for.

SAPIEN's URDF loader creates render objects for every `<visual>`, `<material>` and camera `<sensor>`,
which fails without a render device. For a physics-only scene we remove those elements from the XML
before SAPIEN parses it; collision shapes, inertials and joints are untouched. The joint limits SAPIEN
ignores (velocity, effort) are read here so the robot can report and enforce them.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sapien
from sapien.wrapper.urdf_loader import URDFLoader

from datafarm.errors import Problem, InputError


@dataclass(frozen=True)
class UrdfJointLimit:
    """The `<limit>` of one movable URDF joint (lower/upper in rad or m; inf when absent)."""

    name: str
    type: str
    lower: float
    upper: float
    velocity: float
    effort: float


def parse_urdf_text(text: str, source: Path | None = None) -> ET.Element:
    """The root `<robot>` element of URDF `text`; an InputError naming the file and line otherwise."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line, col = exc.position
        raise InputError([Problem(f"not well-formed XML: {exc}", file=source, line=line, column=col + 1,
                                  expected="a URDF file (<robot> with <link> and <joint> elements)")]) from exc
    if root.tag != "robot":
        raise InputError([Problem(f"the root element is <{root.tag}>, not <robot>", file=source,
                                  expected="a URDF file whose root element is <robot>")])
    return root


def strip_render_elements(root: ET.Element) -> int:
    """Remove every `<visual>`, top-level `<material>` and camera `<sensor>` in place; returns how many."""
    removed = 0
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag in ("visual", "sensor") or (parent is root and child.tag == "material"):
                parent.remove(child)
                removed += 1
    return removed


def joint_limits(root: ET.Element) -> dict[str, UrdfJointLimit]:
    """Limits of every revolute, continuous and prismatic joint, by joint name."""
    out: dict[str, UrdfJointLimit] = {}
    for joint in root.findall("joint"):
        kind = joint.get("type", "")
        if kind not in ("revolute", "continuous", "prismatic"):
            continue
        limit = joint.find("limit")
        attr = limit.attrib if limit is not None else {}
        lower = float(attr.get("lower", "-inf")) if kind != "continuous" else -math.inf
        upper = float(attr.get("upper", "inf")) if kind != "continuous" else math.inf
        velocity = float(attr.get("velocity", "inf")) or math.inf  # 0 in a URDF means "not given"
        effort = float(attr.get("effort", "inf")) or math.inf
        out[joint.get("name", "")] = UrdfJointLimit(joint.get("name", ""), kind, lower, upper, velocity, effort)
    return out


def build_articulation(scene: sapien.Scene, root: ET.Element, urdf_dir: Path, base_pose: sapien.Pose,
                       materials: dict[str, tuple[float, float, float]] | None = None,
                       name: str = "", source: Path | None = None) -> sapien.physx.PhysxArticulation:
    """Build the single fixed-base articulation described by `root` into `scene` at `base_pose`.

    `materials` gives (static friction, dynamic friction, restitution) per link name. Relative mesh
    paths resolve against `urdf_dir`. The XML is used as given: strip render elements first for a
    physics-only scene."""
    loader = URDFLoader()
    loader.set_scene(scene)
    loader.fix_root_link = True
    for link, (static, dynamic, restitution) in (materials or {}).items():
        loader.set_link_material(link, static, dynamic, restitution)
    # What URDFLoader.parse sets before `_parse_urdf`; we hand it XML text instead of a file name so
    # the stripped document never has to be written next to the user's meshes.
    loader.urdf_dir = str(urdf_dir)
    loader.package_dir = None
    loader.ignore_pairs = []
    try:
        articulation_builders, actor_builders, _cameras = loader._parse_urdf(ET.tostring(root, encoding="unicode"))
    except Exception as exc:  # urchin raises bare ValueError/KeyError/AssertionError on bad URDFs
        raise InputError([Problem(f"SAPIEN could not read this URDF: {type(exc).__name__}: {exc}", file=source,
                                  expected="a URDF with one tree of links joined by revolute, prismatic or "
                                           "fixed joints")]) from exc
    if len(articulation_builders) != 1 or actor_builders:
        raise InputError([Problem(
            f"the URDF describes {len(articulation_builders)} articulations and {len(actor_builders)} loose "
            "bodies", file=source, expected="exactly one robot (one tree of links with at least one joint)")])
    builder = articulation_builders[0]
    builder.set_initial_pose(base_pose)
    articulation = builder.build(fix_root_link=True)
    articulation.set_name(name or root.get("name", "robot"))
    return articulation


def pose_from_xyz_yaw(xyz: tuple[float, float, float], yaw: float) -> sapien.Pose:
    """A pose at `xyz` turned by `yaw` radians about world z."""
    half = 0.5 * yaw
    return sapien.Pose(np.array(xyz, dtype=np.float32), np.array([math.cos(half), 0, 0, math.sin(half)], dtype=np.float32))
