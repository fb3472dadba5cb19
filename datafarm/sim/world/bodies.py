"""SAPIEN bodies for G's objects and the table: collision shapes (plus coloured visuals when the scene
renders), masses and frictions from G, and the name of every shape for contact events.

Each object's mass is G's mass exactly (shapes are built with a uniform density, then mass and
inertia are rescaled together), its friction is G's coefficient (static = dynamic) times the
settings' friction scale.

Rolling resistance. PhysX has none: an exact sphere, or a cylinder on its side, rolls away on a
table tilted by a fraction of a degree (S tilts the table by up to 0.5 degree about each axis; a
sphere rolls 20 cm in 2 s), and PhysX's cylinder even rolls off by itself on a level table. A real
round object does not: it touches the table on a small flat patch (a deformed or slightly lumpy
surface), and tipping over the patch's edge takes a torque. Spheres and cylinders
(`ShapeSpec.faceted`) therefore collide as convex hulls whose flat facets all touch the exact shape
(`sphere_hull`, `cylinder_hull`) and play that patch: a body resting on a facet stays put on a
slope of 2 degrees (measured in the paper scenes: an apple, a stick on its side; S tilts by at most
0.7), rolls away on steeper ones (from 4 to 8 degrees, by size and shape), rolls facet over facet
when pushed hard enough, and loses energy at each facet as a real object does to its rolling
resistance. The hull is turned so that a facet lies under the body at its initial
pose (`_hull_turn`). The facets are coarse on purpose: PhysX's persistent contact manifold (PCM,
which the thin walls of cups need) feeds a finer hull energy as it rolls over its edges (a 24-sided
cylinder pushed at 5 cm/s rolls on, faster and faster; a 12-sided one stops within centimetres).
A drawer's slide has the friction of real runners (`WorldSettings.drawer_friction`), so it holds
its position on a tilted table instead of sliding open or shut by itself.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import sapien

from datafarm.artifacts.grounding import DrawerCabinetObject, Table
from datafarm.sim.world.frames import (
    Z_FROM_X,
    local_pose,
    rotation_z,
    rotvec_to_matrix,
    to_sapien,
)
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
SPHERE_HULL_FACETS = 64
"""Facets of a sphere's collision hull (see the module docstring for why not more)."""
CYLINDER_HULL_SIDES = 12
"""Side faces of a cylinder's collision hull (see the module docstring for why not more)."""
_DEFAULT_GROUPS = [1, 1, 0, 0]


def sphere_facet_normals() -> np.ndarray:
    """Outward normals (n x 3) of a sphere hull's facets: a Fibonacci lattice of
    `SPHERE_HULL_FACETS` nearly evenly spread directions, with the two poles exactly on it."""
    n = SPHERE_HULL_FACETS
    z = 1.0 - 2.0 * (np.arange(n) + 0.5) / n
    azimuth = math.pi * (3.0 - math.sqrt(5.0)) * np.arange(n)
    ring = np.sqrt(1.0 - z**2)
    normals = np.stack([ring * np.cos(azimuth), ring * np.sin(azimuth), z], axis=-1)
    normals[0], normals[-1] = (0.0, 0.0, 1.0), (0.0, 0.0, -1.0)
    return normals


@functools.lru_cache(maxsize=1)
def _unit_sphere_hull() -> np.ndarray:
    normals = sphere_facet_normals()
    n = len(normals)
    # every hull vertex is where three facet planes n . x = 1 meet; only neighbouring facets share one
    near = normals @ normals.T > math.cos(3.0 * math.sqrt(4.0 * math.pi / n))
    triples = np.array([(i, j, k) for i in range(n) for j in range(i + 1, n) if near[i, j]
                        for k in range(j + 1, n) if near[i, k] and near[j, k]])
    planes = normals[triples]
    solvable = np.abs(np.linalg.det(planes)) > 1e-9
    points = np.linalg.solve(planes[solvable], np.ones((int(solvable.sum()), 3, 1)))[..., 0]
    inside = (points @ normals.T).max(axis=1) <= 1.0 + 1e-9
    return np.unique(np.round(points[inside], 9), axis=0)


def sphere_hull() -> np.ndarray:
    """Vertices (n x 3) of a unit sphere's collision hull: the polyhedron whose facets (normals from
    `sphere_facet_normals`) all touch the unit sphere. Resting on any facet, the body's centre is
    exactly one radius above the surface, as the sphere's would be, so no resting pose is lower
    than another and nothing rolls the body from one to the next; the corners stick out up to 7%."""
    return _unit_sphere_hull().copy()


def cylinder_hull() -> np.ndarray:
    """Vertices (n x 3) of a unit cylinder's collision hull (axis along z from -1 to 1): a prism of
    `CYLINDER_HULL_SIDES` sides whose faces touch the unit cylinder, so on its side the body rests
    one radius above the table."""
    radius = 1.0 / math.cos(math.pi / CYLINDER_HULL_SIDES)
    angle = 2 * math.pi * np.arange(CYLINDER_HULL_SIDES) / CYLINDER_HULL_SIDES
    ring = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=-1)
    return np.concatenate([np.insert(ring, 2, end, axis=1) for end in (-1.0, 1.0)])


def _cylinder_facet_normals() -> np.ndarray:
    """Outward normals of the cylinder hull's side faces and end caps."""
    angle = 2 * math.pi * (np.arange(CYLINDER_HULL_SIDES) + 0.5) / CYLINDER_HULL_SIDES
    sides = np.stack([np.cos(angle), np.sin(angle), np.zeros_like(angle)], axis=-1)
    return np.concatenate([sides, [[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]])


def _hull_turn(spec: ShapeSpec, down: np.ndarray) -> np.ndarray:
    """3x3 turn of a hull in its shape frame that puts a flat facet under it, `down` being the
    direction of its support in the shape frame at the body's initial pose: a sphere's polar cap, or
    the cylinder's side face nearest below its axis (a standing cylinder already rests on its end
    cap). The facets' layout is arbitrary, so this makes the pose G gives an equilibrium rather than
    a balance on an edge."""
    if spec.geometry == "cylinder":
        if math.hypot(down[0], down[1]) < 1e-6:
            return np.eye(3)
        # the side faces' normals lie half a step from the vertices, at angles (k + 1/2) 2 pi / n
        return rotation_z(math.atan2(down[1], down[0]) - math.pi / CYLINDER_HULL_SIDES)
    south = np.array([0.0, 0.0, -1.0])
    axis = np.cross(south, down)
    if np.linalg.norm(axis) < 1e-9:
        return np.eye(3) if down[2] < 0 else np.diag([1.0, -1.0, -1.0])
    angle = math.atan2(float(np.linalg.norm(axis)), float(np.dot(south, down)))
    return rotvec_to_matrix(axis / np.linalg.norm(axis) * angle)


def _resting_down(world_from_object: np.ndarray) -> np.ndarray:
    """World direction of the surface an object at this orientation (3x3) rests on: its own -z when
    it stands upright, give or take a tilted table (G's object frames have z up from the face they
    rest on), else straight down (an object laid on its side)."""
    up = world_from_object[:, 2]
    return -up if up[2] > math.cos(math.radians(30.0)) else np.array([0.0, 0.0, -1.0])


def _hull_shape(spec: ShapeSpec, material: sapien.physx.PhysxMaterial,
                world_from_object: np.ndarray) -> sapien.physx.PhysxCollisionShapeConvexMesh:
    """The faceted collision hull of a sphere or cylinder spec, posed in its body's frame with a
    facet flush with what the body rests on at its initial pose `world_from_object` (3x3).

    The hull is cooked at unit size and scaled to the spec's: PhysX merges hull vertices closer than
    its fixed cooking tolerance (under a millimetre), which would erase the facets of a small body."""
    if spec.geometry == "sphere":
        vertices, scale = sphere_hull(), np.full(3, spec.size[0])
    elif spec.geometry == "cylinder":
        vertices, scale = cylinder_hull(), np.array([spec.size[0], spec.size[0], spec.size[1]])
    else:
        raise ValueError(f"only spheres and cylinders are faceted, not a {spec.geometry}")
    shape = sapien.physx.PhysxCollisionShapeConvexMesh(vertices.astype(np.float32), scale.astype(np.float32), material)
    # PhysX may merge a few nearly coincident corners; the facets must stay where they were designed
    normals = sphere_facet_normals() if spec.geometry == "sphere" else _cylinder_facet_normals()
    support = (np.asarray(shape.get_vertices(), dtype=np.float64) @ normals.T).max(axis=0)
    if np.abs(support - 1.0).max() > 2e-3:
        raise RuntimeError(f"PhysX cooked the {spec.geometry} hull with facets up to "
                           f"{np.abs(support - 1.0).max():.2%} of its size away from the {spec.geometry}")
    # the hull already stands along z, as the spec's cylinder does (no turn from PhysX's x axis)
    rotation = rotation_z(spec.yaw)
    down = (world_from_object @ rotation).T @ _resting_down(world_from_object)
    shape.set_local_pose(local_pose(spec.position, rotation @ _hull_turn(spec, down)))
    shape.set_density(_DENSITY)
    shape.set_collision_groups(_DEFAULT_GROUPS)
    return shape


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
    """Add `spec` as a collision shape (and a visual of `colour` when not None) to an actor or link
    builder; a faceted spec adds its exact visual only (its hull is attached by `build_rigid_object`)."""
    pose = _shape_pose(spec)
    rgba = (*colour, 1.0) if colour is not None else None
    if spec.geometry == "box":
        builder.add_box_collision(pose, half_size=spec.size, material=material, density=_DENSITY)  # type: ignore[attr-defined]
        if rgba:
            builder.add_box_visual(pose, half_size=spec.size, material=rgba)  # type: ignore[attr-defined]
    elif spec.geometry == "cylinder":
        if not spec.faceted:
            builder.add_cylinder_collision(pose, radius=spec.size[0], half_length=spec.size[1], material=material,  # type: ignore[attr-defined]
                                           density=_DENSITY)
        if rgba:
            builder.add_cylinder_visual(pose, radius=spec.size[0], half_length=spec.size[1], material=rgba)  # type: ignore[attr-defined]
    else:
        if not spec.faceted:
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
    entity = builder.build_entity()
    body = entity.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
    hulls = [spec for spec in specs if spec.faceted]
    for spec in hulls:  # after the builder's shapes, so the body's shape order is `ordered`'s
        body.attach(_hull_shape(spec, material, pose.to_transformation_matrix()[:3, :3]))
    ordered = [spec for spec in specs if not spec.faceted] + hulls
    entity.name = obj.id  # type: ignore[attr-defined]
    entity.pose = pose
    scene.add_entity(entity)
    _set_mass(body, obj.mass.value)  # type: ignore[attr-defined]
    _solver(body, settings)
    parts = _configure_shapes(body, ordered, settings)
    return SimObject(obj.id, obj.kind, entity, body, part_shapes=parts)  # type: ignore[attr-defined]


def build_drawer_cabinet(scene: sapien.Scene, obj: DrawerCabinetObject, pose: sapien.Pose, settings: WorldSettings,
                         visuals: bool, index: int) -> SimObject:
    """A fixed carcass with a prismatic drawer (joint `drawer`, 0 = closed, limit = G's travel).

    G's mass is the whole cabinet's; each link gets the share of its shapes' volume (the carcass is
    fixed, so only the drawer's share acts). The slide has the runners' friction `settings.drawer_friction`
    and viscous damping `settings.drawer_damping`."""
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
    joint.set_friction(settings.drawer_friction)
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
