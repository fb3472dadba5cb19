"""SAPIEN bodies for G's objects and the table: collision shapes (plus coloured visuals when the scene
renders), masses and frictions from G, and the name of every shape for contact events.

Each object's mass is G's mass exactly (shapes are built with a uniform density, then mass and
inertia are rescaled together), its friction is G's coefficient (static = dynamic) times the
settings' friction scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sapien

from datafarm.artifacts.grounding import DrawerCabinetObject, Table
from datafarm.sim.world.frames import Z_FROM_X, local_pose, rotation_z, to_sapien
from datafarm.sim.world.settings import WorldSettings
from datafarm.sim.world.shapes import ShapeSpec, drawer_geometry, rigid_shapes

TABLE_THICKNESS = 0.04
"""Thickness of the table-top slab, metres (only its upper surface matters)."""

TABLE_GROUPS = [1 << 1, 1, 0, 0]
"""Collision groups of the table top. Shapes A and B collide when (A.g0 & B.g1) or (B.g0 & A.g1);
the table's g0 bit differs from every other shape's so that only `ROBOT_BASE_GROUP0` can opt out."""
ROBOT_BASE_GROUP0 = 1 << 2
"""g0 given to the robots' base links: they still collide with objects and the other arm (whose
g1 has bit 0) but not with the table top they are bolted to (whose g1 lacks bit 2, and whose g0
lacks bit 0), so a table raised or tilted by the sampler never registers contacts with them."""
ARTICULATED_OBJECT_BIT = 1 << 29
"""g2 bit of articulated objects' links; with a per-object g3 id their links ignore each other."""
_ARTICULATED_ID_BASE = 0x8000
DRAWER_SLEEP_THRESHOLD = 1e-7
"""Mass-normalized kinetic energy below which a drawer may sleep (SAPIEN's default, 0.005, is too high)."""
_DENSITY = 1000.0


@dataclass
class SimObject:
    """One of G's objects in the scene."""

    id: str
    """G object id."""
    kind: str
    """G object kind."""
    entity: sapien.Entity
    """The object's root entity: its pose is world_from_object."""
    body: sapien.physx.PhysxRigidBodyComponent
    """The rigid body carrying the object's frame (a dynamic actor, or an articulation's root link)."""
    articulation: sapien.physx.PhysxArticulation | None = None
    """The articulation of an articulated object (drawer cabinet), else None."""
    joints: dict[str, sapien.physx.PhysxArticulationJoint] = field(default_factory=dict)
    """Its movable joints by name (e.g. `drawer`)."""
    part_shapes: dict[str, list[sapien.physx.PhysxCollisionShape]] = field(default_factory=dict)
    """Collision shapes per part ("" = the object itself)."""
    fixed: bool = False
    """True when the object's root never moves (a drawer cabinet's carcass)."""

    def body_ref(self, part: str = "") -> str:
        """The BodyRef of the object or one of its parts: `<id>` or `<id>.<part>`."""
        return f"{self.id}.{part}" if part else self.id


def _material(friction: float, settings: WorldSettings) -> sapien.physx.PhysxMaterial:
    mu = friction * settings.friction_scale
    return sapien.physx.PhysxMaterial(mu, mu, settings.restitution)


def _shape_pose(spec: ShapeSpec) -> sapien.Pose:
    rotation = rotation_z(spec.yaw) if spec.yaw else None
    if spec.geometry == "cylinder":
        rotation = (rotation if rotation is not None else np.eye(3)) @ Z_FROM_X
    return local_pose(spec.position, rotation)


def _add_shape(builder: sapien.ActorBuilder | object, spec: ShapeSpec, material: sapien.physx.PhysxMaterial,
               colour: tuple[float, float, float] | None) -> None:
    """Add `spec` as a collision shape (and a visual of `colour` when not None) to an actor or link builder."""
    pose = _shape_pose(spec)
    rgba = (*colour, 1.0) if colour is not None else None
    if spec.geometry == "box":
        builder.add_box_collision(pose, half_size=spec.size, material=material, density=_DENSITY)  # type: ignore[attr-defined]
        if rgba:
            builder.add_box_visual(pose, half_size=spec.size, material=rgba)  # type: ignore[attr-defined]
    elif spec.geometry == "cylinder":
        builder.add_cylinder_collision(pose, radius=spec.size[0], half_length=spec.size[1], material=material,  # type: ignore[attr-defined]
                                       density=_DENSITY)
        if rgba:
            builder.add_cylinder_visual(pose, radius=spec.size[0], half_length=spec.size[1], material=rgba)  # type: ignore[attr-defined]
    else:
        builder.add_sphere_collision(pose, radius=spec.size[0], material=material, density=_DENSITY)  # type: ignore[attr-defined]
        if rgba:
            builder.add_sphere_visual(pose, radius=spec.size[0], material=rgba)  # type: ignore[attr-defined]


def _set_mass(body: sapien.physx.PhysxRigidBodyComponent, mass: float) -> None:
    """Rescale a body built at uniform density to `mass` kg, keeping its centre of mass and the
    shape of its inertia tensor."""
    factor = mass / float(body.mass)
    inertia = np.asarray(body.inertia, dtype=np.float64) * factor
    body.set_mass(float(mass))
    body.set_inertia(inertia.astype(np.float32))


def _configure_shapes(body: sapien.physx.PhysxRigidBodyComponent, specs: list[ShapeSpec], settings: WorldSettings,
                      groups: list[int] | None = None, offset: float | None = None,
                      ) -> dict[str, list[sapien.physx.PhysxCollisionShape]]:
    """Offsets (and groups) on the body's shapes; the shapes grouped by part, in `specs` order."""
    shapes = list(body.collision_shapes)
    if len(shapes) != len(specs):
        raise RuntimeError(f"built {len(shapes)} collision shapes for {len(specs)} specs")
    parts: dict[str, list[sapien.physx.PhysxCollisionShape]] = {}
    for shape, spec in zip(shapes, specs):
        cap = spec.max_contact_offset if spec.max_contact_offset is not None else float("inf")
        shape.set_contact_offset(min(offset if offset is not None else settings.contact_offset, cap))
        shape.set_rest_offset(settings.rest_offset)
        if groups is not None:
            shape.set_collision_groups(groups)
        parts.setdefault(spec.part, []).append(shape)
    return parts


def _solver(body: sapien.physx.PhysxRigidDynamicComponent | sapien.physx.PhysxArticulation, settings: WorldSettings) -> None:
    body.set_solver_position_iterations(settings.solver_position_iterations)
    body.set_solver_velocity_iterations(settings.solver_velocity_iterations)


def build_rigid_object(scene: sapien.Scene, obj: object, pose: sapien.Pose, settings: WorldSettings,
                       visuals: bool) -> SimObject:
    """A single dynamic body for a box, cylinder, sphere, cup, drum or scale."""
    specs = rigid_shapes(obj)  # type: ignore[arg-type]
    material = _material(obj.friction.value, settings)  # type: ignore[attr-defined]
    builder = scene.create_actor_builder()
    colour = tuple(obj.colour) if visuals else None  # type: ignore[attr-defined]
    for spec in specs:
        _add_shape(builder, spec, material, colour)  # type: ignore[arg-type]
    builder.set_initial_pose(pose)
    entity = builder.build(name=obj.id)  # type: ignore[attr-defined]
    body = entity.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
    _set_mass(body, obj.mass.value)  # type: ignore[attr-defined]
    _solver(body, settings)
    parts = _configure_shapes(body, specs, settings)
    return SimObject(obj.id, obj.kind, entity, body, part_shapes=parts)  # type: ignore[attr-defined]


def build_drawer_cabinet(scene: sapien.Scene, obj: DrawerCabinetObject, pose: sapien.Pose, settings: WorldSettings,
                         visuals: bool, index: int) -> SimObject:
    """A fixed carcass with a prismatic drawer (joint `drawer`, 0 = closed, limit = G's travel).

    G's mass is the whole cabinet's; each link gets the share of its shapes' volume (the carcass is
    fixed, so only the drawer's share acts). The slide has viscous damping `settings.drawer_damping`."""
    geometry = drawer_geometry(obj)
    material = _material(obj.friction.value, settings)
    colour = tuple(obj.colour) if visuals else None
    builder = scene.create_articulation_builder()
    builder.set_initial_pose(pose)
    carcass = builder.create_link_builder()
    carcass.set_name(obj.id)
    for spec in geometry.carcass:
        _add_shape(carcass, spec, material, colour)  # type: ignore[arg-type]
    drawer = builder.create_link_builder(carcass)
    drawer.set_name(f"{obj.id}_drawer")
    drawer.set_joint_name("drawer")
    travel = obj.drawer_travel.value
    drawer.set_joint_properties("prismatic", limits=[[0.0, travel]], pose_in_parent=sapien.Pose(), pose_in_child=sapien.Pose())
    for spec in geometry.drawer:
        _add_shape(drawer, spec, material, colour)  # type: ignore[arg-type]
    articulation = builder.build(fix_root_link=True)
    articulation.set_name(obj.id)
    root, slide = articulation.links[0], articulation.links[1]

    volumes = [sum(s.volume for s in geometry.carcass), sum(s.volume for s in geometry.drawer)]
    total = sum(volumes)
    for link, volume in zip((root, slide), volumes):
        _set_mass(link, obj.mass.value * volume / total)
    _solver(articulation, settings)
    # PhysX would put a slowly sliding drawer to sleep a few millimetres short of where it is pushed
    articulation.set_sleep_threshold(DRAWER_SLEEP_THRESHOLD)
    groups = [1, 1, ARTICULATED_OBJECT_BIT, _ARTICULATED_ID_BASE + index]
    parts = {"": _configure_shapes(root, geometry.carcass, settings, groups)[""]}
    parts.update(_configure_shapes(slide, geometry.drawer, settings, groups))

    joint = articulation.active_joints[0]
    joint.set_friction(0.0)  # PhysX's default 0.05 holds a slow drawer millimetres short of its goal
    joint.set_drive_properties(0.0, settings.drawer_damping, mode="force")
    joint.set_drive_velocity_target(0.0)
    opening = min(max(obj.initial_opening.value, 0.0), travel)
    articulation.set_qpos(np.array([opening], dtype=np.float32))
    articulation.set_qvel(np.zeros(1, dtype=np.float32))
    return SimObject(obj.id, obj.kind, root.entity, root, articulation, {"drawer": joint}, parts, fixed=True)


def build_table(scene: sapien.Scene, table: Table, world_from_top: np.ndarray, settings: WorldSettings,
                visuals: bool) -> tuple[sapien.Entity, list[sapien.physx.PhysxCollisionShape]]:
    """The static table top: a slab whose upper surface passes through the top frame's origin."""
    sx, sy = table.size_x.value, table.size_y.value
    spec = ShapeSpec("box", (sx / 2, sy / 2, TABLE_THICKNESS / 2), (0.0, 0.0, -TABLE_THICKNESS / 2))
    builder = scene.create_actor_builder()
    _add_shape(builder, spec, _material(settings.table_friction, settings), tuple(table.colour) if visuals else None)
    builder.set_initial_pose(to_sapien(world_from_top))
    entity = builder.build_static(name="table")
    body = entity.find_component_by_type(sapien.physx.PhysxRigidStaticComponent)
    shapes = _configure_shapes(body, [spec], settings, TABLE_GROUPS, settings.table_contact_offset)[""]
    return entity, shapes
