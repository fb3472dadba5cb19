"""`build_world`: a SAPIEN scene reproducing a grounding G (table, robot, objects), with the quantities
a variation z drew; and `World`, the handle the recorder, the harness and the probes work with.

Physics-only by default: `PhysxCpuSystem`, collision shapes only. `render=True` adds a render system
and coloured visuals (it needs a render device; see `datafarm.sim.sapien_scene`).

Frames (datafarm.artifacts.common): world z up with its origin on the nominal table top. The table
top is the plane through (table.center, 0), tilted by G's tilt plus z's drawn tilt and raised by z's
height offset (`frames.table_top_matrix`); the floor lies `table.height` below the nominal top. The
robot stays where G mounts it. Objects start at z's poses (already carried along with the sampled
table change by `sample_variation`), or at G's poses without a variation.

Body names (for contact events; BodyRef in datafarm.artifacts.judge): an object is `<id>`, its
parts `<id>.<part>` (`cabinet.drawer`, `cabinet.handle`, `drum.head`, `scale.plate`), a robot link
`<arm>.<link>` (e.g. `left.link7`; the finger pads are links 7 and 8), the table `table`, the floor
`floor`. `World.body_aliases` maps the judge's coarser names (`<arm>`, `<arm>.gripper`, `robot`) to
these.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import sapien

from datafarm.artifacts.grounding import (
    Grounding,
    PiperDualRobot,
    PiperRobot,
    UrdfRobot,
)
from datafarm.artifacts.sampler import Variation
from datafarm.errors import InputError, Problem
from datafarm.sim.robots import Robot, RobotSpec, load_robot
from datafarm.sim.sapien_scene import add_ground, create_scene
from datafarm.sim.world.bodies import (
    ROBOT_BASE_GROUP0,
    SimObject,
    build_drawer_cabinet,
    build_rigid_object,
    build_table,
)
from datafarm.sim.world.frames import table_top_matrix, tilt_of, to_sapien, yaw_of
from datafarm.sim.world.settings import WorldSettings

GRIPPER_LINKS = ("link7", "link8")
"""PiPER links that make up `<arm>.gripper`: the two finger pads (as the judge reads it)."""
_PLACEMENT_TOLERANCE = 1e-3


@dataclass
class World:
    """A scene built from G: the robot, the table, G's objects by id, and every shape's body name."""

    scene: sapien.Scene
    """The SAPIEN scene (CPU PhysX; a render system only when built with render=True)."""
    grounding: Grounding
    """G with the variation's drawn values applied (what was actually built)."""
    variation: Variation | None
    """The variation z the world was built with, or None for G's nominal scene."""
    settings: WorldSettings
    """Physics parameters used."""
    robot: Robot
    """The robot, mounted where G says."""
    table: sapien.Entity | None
    """The static table top (None when G has no table)."""
    world_from_table_top: np.ndarray
    """4x4 pose of the table top's frame (origin at the top's centre on its surface)."""
    objects: dict[str, SimObject]
    """G's objects by id, in G order."""
    shape_names: dict[object, str] = field(default_factory=dict)
    """Every collision shape -> the body name contact events use (see the module docstring)."""
    scale_plates: dict[str, list[object]] = field(default_factory=dict)
    """Scale id -> the collision shapes of its plate."""

    # --- description -------------------------------------------------------------------------------
    @property
    def timestep(self) -> float:
        """Physics step, seconds (as configured; PhysX holds it as float32)."""
        return self.settings.timestep

    def object(self, object_id: str) -> SimObject:
        """The object with G id `object_id` (KeyError naming the ids there are)."""
        try:
            return self.objects[object_id]
        except KeyError:
            raise KeyError(f"no object {object_id!r}; this world has {list(self.objects)}") from None

    def body_aliases(self) -> dict[str, set[str]]:
        """Coarse body references -> the body names they cover: `robot`, each arm, `<arm>.gripper`,
        and each object id (the object with all its parts)."""
        names = set(self.shape_names.values())
        aliases: dict[str, set[str]] = {"robot": set()}
        for arm in self.robot.arms:
            links = {n for n in names if n.startswith(f"{arm}.")}
            aliases[arm] = links
            aliases[f"{arm}.gripper"] = {f"{arm}.{link}" for link in GRIPPER_LINKS} & links
            aliases["robot"] |= links
        for oid in self.objects:
            aliases[oid] = {n for n in names if n == oid or n.startswith(f"{oid}.")}
        return aliases

    def joint_names(self) -> list[str]:
        """`<object id>.<joint>` of every articulated object's joint, in G order (e.g. `cabinet.drawer`)."""
        return [f"{oid}.{j}" for oid, obj in self.objects.items() for j in obj.joints]

    # --- state -------------------------------------------------------------------------------------
    def object_pose(self, object_id: str) -> sapien.Pose:
        """world_from_object now."""
        return self.object(object_id).entity.pose

    def joint_value(self, ref: str) -> float:
        """Position of an articulated object's joint, `<object id>.<joint>` (e.g. `cabinet.drawer`, metres)."""
        oid, _, joint = ref.partition(".")
        obj = self.object(oid)
        if joint not in obj.joints or obj.articulation is None:
            raise KeyError(f"object {oid!r} has no joint {joint!r}; it has {list(obj.joints)}")
        index = list(obj.articulation.active_joints).index(obj.joints[joint])
        return float(np.asarray(obj.articulation.get_qpos())[index])

    def scale_reading_g(self, scale_id: str) -> float:
        """What scale `scale_id` reads now, grams: the load other bodies put on its plate during the last
        physics step (contact impulses along the scale's up axis / timestep / g)."""
        if scale_id not in self.scale_plates:
            raise KeyError(f"{scale_id!r} is not a scale; scales here: {list(self.scale_plates)}")
        plate = set(self.scale_plates[scale_id])
        impulse = np.zeros(3)
        for contact in self.scene.get_contacts():
            s0, s1 = contact.shapes
            if s0 in plate and s1 not in plate:
                impulse += np.sum([p.impulse for p in contact.points], axis=0)
            elif s1 in plate and s0 not in plate:
                impulse -= np.sum([p.impulse for p in contact.points], axis=0)
        return load_grams(impulse, self.object(scale_id).entity.pose, self.timestep, self.settings.gravity)

    # --- stepping ----------------------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance `n` physics steps (the robot's gravity compensation applied before each)."""
        self.robot.step(n)


def load_grams(impulse_on_plate: np.ndarray, scale_pose: sapien.Pose, dt: float, gravity: float) -> float:
    """Scale reading in grams from the impulse other bodies applied to its plate over one step of `dt`
    seconds: the load is the push along the scale's -z (its up axis points away from the load)."""
    up = scale_pose.to_transformation_matrix()[:3, 2]
    return float(-np.dot(impulse_on_plate, up) / dt / gravity * 1000.0)


# --- building -----------------------------------------------------------------------------------------


def build_world(grounding: Grounding, variation: Variation | None = None, *, timestep: float | None = None,
                render: bool = False, settings: WorldSettings | None = None) -> World:
    """Build the SAPIEN scene of `grounding`, with `variation`'s draws when given.

    `variation.physics` values replace G's nominal values (`Grounding.with_values`), the table gets
    z's height offset and tilt, and objects start at z's poses. Without a variation the scene is G's
    nominal one. `timestep` overrides `settings.timestep`. `render=True` adds a render system and
    visuals (RenderDeviceError without a render device). InputError for what a SAPIEN world cannot
    hold (a UE-track grounding, robot bases that the robot description cannot place)."""
    settings = settings or WorldSettings()
    if timestep is not None:
        settings = settings.model_copy(update={"timestep": float(timestep)})
    if grounding.table is None or grounding.robot.kind == "ue-character":
        raise InputError([Problem("a SAPIEN world needs an arm robot at a table; this grounding is for the UE track",
                                  field="robot.kind", expected="piper, piper-dual or urdf, with `table`")])
    g = grounding.with_values(variation.physics) if variation is not None else grounding
    table = g.table
    assert table is not None

    scene = create_scene(timestep=settings.timestep, render=render, gravity=(0.0, 0.0, -settings.gravity),
                         enhanced_determinism=settings.enhanced_determinism)
    height_offset = variation.table_height_offset if variation is not None else 0.0
    drawn_tilt = variation.table_tilt if variation is not None else (0.0, 0.0)
    top = table_top_matrix(table.center, height_offset, table.tilt_x.value + drawn_tilt[0],
                           table.tilt_y.value + drawn_tilt[1])
    names: dict[object, str] = {}

    floor = add_ground(scene, altitude=-table.height.value, static_friction=settings.table_friction,
                       dynamic_friction=settings.table_friction)
    for component in floor.components:
        for shape in getattr(component, "collision_shapes", []):
            shape.set_contact_offset(settings.table_contact_offset)
            names[shape] = "floor"
    table_entity, table_shapes = build_table(scene, table, top, settings, visuals=render)
    names.update({shape: "table" for shape in table_shapes})

    robot = load_robot(scene, robot_spec(g, settings), visuals=render)
    _adapt_robot(robot, settings, names)

    objects: dict[str, SimObject] = {}
    plates: dict[str, list[object]] = {}
    for index, obj in enumerate(g.objects):
        if obj.kind == "actor":
            raise InputError([Problem(f"object {obj.id} is a UE level actor; SAPIEN cannot simulate it",
                                      field=f"objects.{obj.id}.kind")])
        pose = variation.object_poses.get(obj.id, obj.pose) if variation is not None else obj.pose
        if obj.kind == "drawer_cabinet":
            sim = build_drawer_cabinet(scene, obj, to_sapien(pose), settings, render, index)
        else:
            sim = build_rigid_object(scene, obj, to_sapien(pose), settings, render)
        objects[obj.id] = sim
        for part, shapes in sim.part_shapes.items():
            names.update({shape: sim.body_ref(part) for shape in shapes})
        if obj.kind == "scale":
            plates[obj.id] = list(sim.part_shapes["plate"])
    return World(scene, g, variation, settings, robot, table_entity, top, objects, names, plates)


def robot_spec(grounding: Grounding, settings: WorldSettings | None = None) -> RobotSpec:
    """The RobotSpec that mounts G's robot where G's arm bases are (InputError if it cannot)."""
    settings = settings or WorldSettings()
    robot = grounding.robot
    drives: dict[str, float] = {}
    if settings.drive_stiffness is not None:
        drives["stiffness"] = settings.drive_stiffness
    if settings.drive_damping is not None:
        drives["damping"] = settings.drive_damping
    if settings.gripper_stiffness is not None:
        drives["gripper_stiffness"] = settings.gripper_stiffness
    arms = robot.arms
    for arm in arms:
        if tilt_of(arm.base) > _PLACEMENT_TOLERANCE:
            raise InputError([Problem(f"arm {arm.name}'s base is tilted by {math.degrees(tilt_of(arm.base)):.2f} deg",
                                      field=f"robot.arms.{arm.name}.base",
                                      expected="a base that stands upright (a rotation about world z only)")])
    if isinstance(robot, PiperRobot):
        (x, y, z) = arms[0].base.position
        return RobotSpec(model="piper", base_xy=(x, y), base_height=z, base_yaw=yaw_of(arms[0].base), **drives)
    if isinstance(robot, UrdfRobot):
        if len(arms) != 1:
            raise InputError([Problem("a user URDF robot is loaded once; several mounted copies are not supported",
                                      field="robot.arms", expected="exactly one entry")])
        (x, y, z) = arms[0].base.position
        return RobotSpec(model=str(robot.urdf), base_xy=(x, y), base_height=z, base_yaw=yaw_of(arms[0].base), **drives)
    assert isinstance(robot, PiperDualRobot)
    left, right = (np.array(a.base.position, dtype=np.float64) for a in arms)
    mid = (left + right) / 2
    yaw = yaw_of(arms[0].base)
    spec = RobotSpec(model="piper-dual", base_xy=(float(mid[0]), float(mid[1])), base_height=float(mid[2]),
                     base_yaw=yaw, spacing=float(np.linalg.norm(left - right)), **drives)
    # RobotSpec puts the left base at +spacing/2 along the yawed y axis, both facing the same way
    expected_left = mid + spec.spacing / 2 * np.array([-math.sin(yaw), math.cos(yaw), 0.0])
    yaw_gap = abs(math.remainder(yaw_of(arms[1].base) - yaw, 2 * math.pi))
    if np.abs(expected_left - left).max() > _PLACEMENT_TOLERANCE or yaw_gap > _PLACEMENT_TOLERANCE:
        raise InputError([Problem(
            "the piper-dual description mounts both arms facing the same way, left at +spacing/2 along the "
            "arms' y axis; G's bases differ from that", field="robot.arms",
            expected=f"left at {np.round(expected_left, 4).tolist()} with the right arm's yaw equal to the left's")])
    return spec


def _link_name(arm: str, link: str) -> str:
    """`<arm>.<link>`, the link's own name without the arm prefix, made a valid BodyRef part."""
    if link.startswith(f"{arm}_"):
        link = link[len(arm) + 1:]
    part = re.sub(r"[^a-z0-9_]", "_", link.lower()) or "link"
    return f"{arm}.{part if part[0].isalpha() else 'l' + part}"


def _adapt_robot(robot: Robot, settings: WorldSettings, names: dict[object, str]) -> None:
    """Name the robot's shapes, lift its base links out of the table's collisions, apply the
    settings' friction scale and solver iterations."""
    for arm in robot.arms:
        articulation = robot.articulation(arm)
        articulation.set_solver_position_iterations(settings.solver_position_iterations)
        articulation.set_solver_velocity_iterations(settings.solver_velocity_iterations)
        for link in articulation.links:
            for shape in link.collision_shapes:
                names[shape] = _link_name(arm, link.name)
                if link.is_root:
                    groups = list(shape.get_collision_groups())
                    groups[0] = ROBOT_BASE_GROUP0
                    shape.set_collision_groups(groups)
                if settings.friction_scale != 1.0:
                    m = shape.physical_material
                    shape.set_physical_material(sapien.physx.PhysxMaterial(
                        m.static_friction * settings.friction_scale, m.dynamic_friction * settings.friction_scale,
                        m.restitution))
