"""Worlds built from G in real SAPIEN (CPU, physics-only): every object kind with G's sizes, masses
and frictions; the table's height and tilt; variations drawn from S reproducibly; cups that nest;
a block that fits in the drawer; a scale that reads the load in grams; round bodies and drawers that
hold still on a slightly tilted table and still roll when pushed; what a world refuses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sapien

from datafarm.artifacts.common import Pose
from datafarm.artifacts.sampler import ObjectPlacement, SamplerSpec, Variation
from datafarm.errors import InputError
from datafarm.sim.sapien_scene import (
    RenderDeviceError,
    has_render_device,
    is_physics_only,
)
from datafarm.sim.world import (
    World,
    WorldSettings,
    build_world,
    drawn_paths,
    sample_variation,
)
from datafarm.sim.world.bodies import (
    CYLINDER_HULL_SIDES,
    cylinder_hull,
    sphere_facet_normals,
    sphere_hull,
)
from datafarm.sim.world.frames import (
    matrix_to_pose,
    pose_to_matrix,
    quat_to_matrix,
    table_top_matrix,
)
from datafarm.sim.world.reference import reference_grounding
from datafarm.sim.world.shapes import drawer_geometry
from tests.artifacts.test_schemas import dual_piper, ue_grounding
from tests.sim.conftest import (
    block,
    drawer_grounding,
    drum_grounding,
    grounding_with,
    nest_grounding,
    weigh_grounding,
)

PAPER_SCENES = {"drawer": drawer_grounding, "nest": nest_grounding, "weigh": weigh_grounding, "drum": drum_grounding,
                "reference": reference_grounding}


def _aabb(world: World, oid: str) -> np.ndarray:
    """World-axis bounding box (2 x 3) of all bodies of an object."""
    obj = world.object(oid)
    bodies = obj.articulation.links if obj.articulation is not None else [obj.body]
    boxes = np.array([b.compute_global_aabb_tight() for b in bodies])
    return np.array([boxes[:, 0].min(axis=0), boxes[:, 1].max(axis=0)])


def _extent_in_object_frame(world: World, oid: str) -> np.ndarray:
    """Size of the object's bounding box along its own axes (for objects G rotates about z)."""
    box = _aabb(world, oid)
    yaw = math.atan2(*quat_to_matrix(world.object_pose(oid).q)[[1, 0], 0])
    size = box[1] - box[0]
    if abs(math.sin(yaw)) > 0.5:
        size[[0, 1]] = size[[1, 0]]
    return size


def _expected_size(obj) -> tuple[float, float, float]:
    v = lambda q: q.value
    if obj.kind == "box":
        return v(obj.size.x), v(obj.size.y), v(obj.size.z)
    if obj.kind in ("cylinder",):
        return 2 * v(obj.radius), 2 * v(obj.radius), v(obj.height)
    if obj.kind == "sphere":
        return (2 * v(obj.radius),) * 3
    if obj.kind == "cup":
        return 2 * v(obj.outer_radius), 2 * v(obj.outer_radius), v(obj.height)
    if obj.kind == "drum":
        return 2 * v(obj.head_radius), 2 * v(obj.head_radius), v(obj.height)
    if obj.kind == "scale":
        return v(obj.plate.x), v(obj.plate.y), v(obj.body_height) + v(obj.plate.z)
    return v(obj.size.x) + v(obj.handle_protrusion), v(obj.size.y), v(obj.size.z)  # drawer cabinet


@pytest.mark.parametrize("name", sorted(PAPER_SCENES))
def test_every_object_is_built_with_g_size_pose_mass_and_friction(name):
    g = PAPER_SCENES[name]()
    world = build_world(g)
    assert is_physics_only(world.scene)
    assert list(world.objects) == [o.id for o in g.objects]
    for obj in g.objects:
        sim = world.object(obj.id)
        pose = world.object_pose(obj.id)
        assert pose.p == pytest.approx(obj.pose.position, abs=1e-6)
        assert abs(float(np.dot(pose.q, obj.pose.quaternion))) == pytest.approx(1.0, abs=1e-6)
        bodies = sim.articulation.links if sim.articulation is not None else [sim.body]
        assert sum(b.mass for b in bodies) == pytest.approx(obj.mass.value, rel=1e-5)
        for shapes in sim.part_shapes.values():
            for shape in shapes:
                assert shape.physical_material.static_friction == pytest.approx(obj.friction.value, rel=1e-6)
        size = _expected_size(obj)
        # a polygonal cup wall sticks out up to 1/cos(pi/16) of its radius, a faceted hull's corners
        # up to 7% (sphere) or 1/cos(pi/12) (cylinder) of theirs
        tolerance = {"cup": 0.02, "sphere": 0.07, "cylinder": 0.04}.get(obj.kind, 0.0) * size[0] or 2e-3
        if obj.kind == "cylinder" and abs(obj.pose.quaternion[0]) < 0.9:
            continue  # the lying stick: its bounding box is along other axes
        assert _extent_in_object_frame(world, obj.id) == pytest.approx(size, abs=tolerance), obj.id

    before = {oid: world.object_pose(oid).p.copy() for oid in world.objects}
    world.step(250)
    contacts = {frozenset((world.shape_names[c.shapes[0]], world.shape_names[c.shapes[1]]))
                for c in world.scene.get_contacts() if min(p.separation for p in c.points) < 1e-3}
    for obj in g.objects:  # resting, not exploding, sinking or rolling (a cylinder on its side too)
        oid = obj.id
        assert np.abs(world.object_pose(oid).p - before[oid]).max() < 2e-3, oid
        assert np.linalg.norm(world.object(oid).body.linear_velocity) < 0.05
    # the robot's bases stand on the table without touching it
    assert not any(any(n.startswith(("left.", "right.")) for n in pair) for pair in contacts)


def test_parts_are_addressable_by_id_and_part():
    names = set()
    for make in (drawer_grounding, weigh_grounding, drum_grounding):
        names |= set(build_world(make()).shape_names.values())
    assert {"cabinet", "cabinet.drawer", "cabinet.handle", "scale", "scale.plate", "drum", "drum.head", "table",
            "floor", "left.link7", "right.link8", "left.base_link"} <= names
    aliases = build_world(drum_grounding()).body_aliases()
    assert aliases["left.gripper"] == {"left.link7", "left.link8"}
    assert aliases["drum"] == {"drum", "drum.head"}
    assert "right.link3" in aliases["robot"] and "right.link3" not in aliases["left"]


def test_robot_is_mounted_where_g_says():
    world = build_world(drawer_grounding())
    assert world.robot.arms == ("left", "right")
    assert world.robot.base_pose("left").p == pytest.approx([-0.45, 0.3, 0.0], abs=1e-6)
    assert world.robot.base_pose("right").p == pytest.approx([-0.45, -0.3, 0.0], abs=1e-6)


def test_table_height_offset_and_tilt_are_applied_and_the_floor_lies_below():
    g = grounding_with(block("on_table", (0.25, 0.4)), block("off_table", (0.8, 0.0)))
    offset, tilt = 0.02, (0.03, -0.02)
    z = Variation(seed=0, table_height_offset=offset, table_tilt=tilt,
                  object_poses={"on_table": Pose(position=(0.25, 0.4, 0.06)), "off_table": Pose(position=(0.8, 0.0, 0.02))})
    world = build_world(g, z)
    top = world.world_from_table_top
    normal = top[:3, 2]
    assert top[:3, 3] == pytest.approx([0.0, 0.0, offset])
    assert normal == pytest.approx([math.sin(tilt[1]), -math.sin(tilt[0]) * math.cos(tilt[1]), math.cos(tilt[0]) * math.cos(tilt[1])], abs=1e-9)
    world.step(600)
    # the block settles on the tilted top: its bottom centre on the plane, its z axis along the normal
    p = world.object_pose("on_table")
    plane_z = offset - (normal[0] * p.p[0] + normal[1] * p.p[1]) / normal[2]
    assert p.p[2] == pytest.approx(plane_z, abs=1e-3)
    assert float(np.dot(quat_to_matrix(p.q)[:, 2], normal)) > math.cos(0.003)
    # untilted, the same spot is 1.9 cm lower: the tilt is really there
    assert abs(plane_z - offset) > 0.01
    # the floor lies table.height below the nominal top
    assert world.object_pose("off_table").p[2] == pytest.approx(-g.table.height.value, abs=1e-3)
    # G's own tilt counts too
    tilted_g = g.with_values({"table.tilt_x": 0.008})
    assert build_world(tilted_g).world_from_table_top[:3, 2] == pytest.approx([0, -math.sin(0.008), math.cos(0.008)], abs=1e-9)


def _sampling_grounding():
    cube = block("cube", (0.1, 0.2))
    cube["friction"] = {"value": 0.6, "tag": "unknown", "range": [0.2, 1.0]}
    other = block("other", (0.1, -0.2))
    return grounding_with(cube, other)


def test_variation_draws_listed_and_unknown_quantities_within_range_reproducibly():
    g = _sampling_grounding()
    s = SamplerSpec(physics=["objects.other.mass"], objects=[ObjectPlacement(object="cube", x=(-0.05, 0.05), y=(-0.04, 0.04), yaw=(-0.5, 0.5))])
    z = sample_variation(g, s, 11)
    assert z == sample_variation(g, s, 11)  # same seed, same draw
    assert z != sample_variation(g, s, 12)
    # listed paths plus every `unknown` quantity, nothing else
    assert set(z.physics) == {"objects.other.mass", "objects.cube.friction"} == set(drawn_paths(g, s))
    quantities = g.tagged_quantities()
    draws = [sample_variation(g, s, seed) for seed in range(25)]
    for path in z.physics:
        lo, hi = quantities[path].range
        values = [d.physics[path] for d in draws]
        assert all(lo <= v <= hi for v in values)
        assert max(values) - min(values) > 0.5 * (hi - lo)  # spread over the range, not stuck
    for d in draws:
        assert s.table_height[0] <= d.table_height_offset <= s.table_height[1]
        assert all(s.table_tilt[0] <= t <= s.table_tilt[1] for t in d.table_tilt)
        dx, dy = np.array(d.object_poses["cube"].position[:2]) - (0.1, 0.2)
        assert -0.051 <= dx <= 0.051 and -0.041 <= dy <= 0.041
        assert d.object_poses["other"].position[:2] == pytest.approx((0.1, -0.2), abs=2e-4)  # only carried by the tilt
        for cam in g.cameras:
            jitter = np.array(d.camera_poses[cam.name].position) - cam.world_from_camera.position
            assert np.abs(jitter).max() <= s.camera_jitter.translation + 1e-12
    # the world built from z has what z drew
    world = build_world(g, z)
    cube = world.object("cube")
    assert cube.part_shapes[""][0].physical_material.static_friction == pytest.approx(z.physics["objects.cube.friction"], rel=1e-6)
    assert world.object("other").body.mass == pytest.approx(z.physics["objects.other.mass"], rel=1e-6)
    assert world.object_pose("cube").p == pytest.approx(z.object_poses["cube"].position, abs=1e-6)
    assert world.world_from_table_top[2, 3] == pytest.approx(z.table_height_offset)
    # objects are carried along with the table so they rest on it
    top = world.world_from_table_top
    local = np.linalg.inv(top) @ np.array([*z.object_poses["other"].position, 1.0])
    assert local[2] == pytest.approx(0.0, abs=1e-9)


def test_placements_keep_clear_and_bad_sampler_paths_are_refused():
    g = grounding_with(block("a", (0.0, 0.05)), block("b", (0.0, -0.05)))
    s = SamplerSpec(min_clearance=0.02, objects=[ObjectPlacement(object="a", x=(-0.1, 0.1), y=(-0.1, 0.1)),
                                                 ObjectPlacement(object="b", x=(-0.1, 0.1), y=(-0.1, 0.1))])
    radius = 0.5 * math.hypot(0.04, 0.04)
    for seed in range(20):
        z = sample_variation(g, s, seed)
        gap = np.linalg.norm(np.subtract(z.object_poses["a"].position[:2], z.object_poses["b"].position[:2])) - 2 * radius
        assert gap >= 0.02 - 1e-6
    with pytest.raises(InputError, match="not a quantity of G"):
        sample_variation(g, SamplerSpec(physics=["objects.a.weight"]), 0)
    with pytest.raises(InputError, match="not an object of G"):
        sample_variation(g, SamplerSpec(objects=[ObjectPlacement(object="ghost")]), 0)
    with pytest.raises(InputError, match="apart"):
        sample_variation(g, SamplerSpec(min_clearance=0.0, objects=[ObjectPlacement(object="a", x=(0.0, 0.0), y=(-0.1, -0.1))]), 0)


def _drop(g, small: str, big: str) -> sapien.Pose:
    """Drop cup `small` from just above cup `big`'s rim, 3 mm off its axis; its pose after 1.5 s."""
    x, y, _ = g.object(big).pose.position
    z = Variation(seed=0, object_poses={small: Pose(position=(x + 0.003, y, g.object(big).height.value + 0.01))})
    world = build_world(g, z)
    world.step(750)
    return world.object_pose(small)


def test_a_smaller_cup_nests_inside_a_larger_one_and_not_the_reverse():
    g = nest_grounding()
    blue, red = g.object("blue_cup"), g.object("red_cup")
    inside = _drop(g, "red_cup", "blue_cup")
    offset = np.linalg.norm(inside.p[:2] - np.array(blue.pose.position[:2]))
    cavity = blue.outer_radius.value - blue.wall_thickness.value
    assert offset < cavity - red.outer_radius.value + 1e-3  # within the cavity
    assert inside.p[2] == pytest.approx(blue.wall_thickness.value, abs=1e-3)  # resting on the bottom
    assert inside.p[2] + red.height.value < blue.height.value  # below the rim
    assert quat_to_matrix(inside.q)[2, 2] > math.cos(0.05)  # upright
    # the larger cup cannot go into the smaller one: it ends up on the smaller one's rim
    on_top = _drop(g, "blue_cup", "red_cup")
    assert on_top.p[2] == pytest.approx(red.height.value, abs=2e-3)


def test_a_block_fits_in_the_open_drawer_and_the_drawer_closes_over_it():
    g = drawer_grounding()
    cabinet = g.object("cabinet")
    geometry = drawer_geometry(cabinet)
    lo, hi = np.array(geometry.interior_min), np.array(geometry.interior_max)
    opening = 0.15
    cabinet_pose = sapien.Pose(cabinet.pose.position, cabinet.pose.quaternion).to_transformation_matrix()
    above = cabinet_pose @ np.array([(lo[0] + hi[0]) / 2 + opening, 0.0, hi[2] + 0.01, 1.0])
    world = build_world(g, Variation(seed=0, object_poses={"red_block": Pose(position=tuple(above[:3]))}))
    drawer = world.object("cabinet")
    drawer.articulation.set_qpos(np.array([opening], dtype=np.float32))
    world.step(500)
    assert world.joint_value("cabinet.drawer") == pytest.approx(opening, abs=1e-3)

    def block_in_drawer_frame() -> np.ndarray:
        link = drawer.articulation.links[1]
        local = np.linalg.inv(link.entity_pose.to_transformation_matrix()) @ np.array([*world.object_pose("red_block").p, 1.0])
        return local[:3]

    half = 0.02
    inside = block_in_drawer_frame()
    assert np.all(inside[:2] - half > lo[:2]) and np.all(inside[:2] + half < hi[:2])
    assert inside[2] == pytest.approx(lo[2], abs=1e-3)  # resting on the drawer's bottom
    # close it (a stiff spring standing in for the robot's push, stiff enough that the slide's
    # friction stops it within a millimetre of closed): the block stays inside
    joint = drawer.joints["drawer"]
    joint.set_drive_properties(2000.0, 200.0)
    joint.set_drive_target(0.0)
    world.step(1500)
    assert world.joint_value("cabinet.drawer") < 1e-3
    inside = block_in_drawer_frame()
    assert np.all(inside[:2] - half > lo[:2]) and inside[2] == pytest.approx(lo[2], abs=1e-3)
    # and the slide stops at G's travel
    joint.set_drive_target(0.5)
    world.step(1500)
    assert world.joint_value("cabinet.drawer") == pytest.approx(cabinet.drawer_travel.value, abs=2e-3)


@pytest.mark.parametrize("mass", [None, 0.2])
def test_the_scale_reads_the_resting_load_in_grams(mass):
    g = weigh_grounding()
    empty = build_world(g)
    empty.step(200)
    assert abs(empty.scale_reading_g("scale")) < 0.5
    physics = {"objects.apple.mass": mass} if mass else {}
    plate_top = g.object("scale").body_height.value + g.object("scale").plate.z.value
    world = build_world(g, Variation(seed=0, physics=physics,
                                     object_poses={"apple": Pose(position=(0.15, 0.1, plate_top + 0.002))}))
    world.step(600)
    expected = 1000.0 * (mass or g.object("apple").mass.value)
    assert world.scale_reading_g("scale") == pytest.approx(expected, rel=0.05)
    with pytest.raises(KeyError, match="not a scale"):
        world.scale_reading_g("apple")


TILT = math.radians(0.5)
"""S's largest default table tilt about each axis."""


def _on_tilted_table(g, tilt: tuple[float, float]) -> Variation:
    """A variation that tilts the table by `tilt` (about world x, y) and carries every object with it,
    as `sample_variation` does."""
    t = g.table
    before = table_top_matrix(t.center, 0.0, t.tilt_x.value, t.tilt_y.value)
    after = table_top_matrix(t.center, 0.0, t.tilt_x.value + tilt[0], t.tilt_y.value + tilt[1])
    carry = after @ np.linalg.inv(before)
    return Variation(seed=0, table_tilt=tilt, object_poses={o.id: matrix_to_pose(carry @ pose_to_matrix(o.pose)) for o in g.objects})


@pytest.mark.parametrize("tilt", [(TILT, TILT), (-TILT, TILT), (TILT, -TILT), (-TILT, -TILT)])
def test_round_bodies_and_an_open_drawer_hold_still_on_a_slightly_tilted_table(tilt):
    # PhysX has no rolling resistance: an exact sphere rolls 20 cm in 2 s down a 0.7 degree slope,
    # and a drawer slide without friction runs fully open or shut; the faceted hulls and the
    # slide's friction keep them where they are, as a real apple, stick and drawer stay
    for make, moving in ((weigh_grounding, ("apple",)), (drum_grounding, ("stick", "drum"))):
        g = make()
        world = build_world(g, _on_tilted_table(g, tilt))
        start = {oid: world.object_pose(oid).p.copy() for oid in moving}
        world.step(int(5.0 / world.timestep))
        for oid in moving:
            assert np.linalg.norm(world.object_pose(oid).p - start[oid]) < 2e-3, (make.__name__, oid)
    g = drawer_grounding()
    world = build_world(g, _on_tilted_table(g, tilt))
    world.object("cabinet").articulation.set_qpos(np.array([0.1], dtype=np.float32))
    world.step(int(5.0 / world.timestep))
    assert world.joint_value("cabinet.drawer") == pytest.approx(0.1, abs=1e-3)


def test_round_bodies_still_roll_when_pushed_and_come_to_rest():
    # a push sets them rolling, facet over facet, and they stop: no energy appears from the contacts
    # (PhysX's persistent contact manifold speeds up a finer hull as it rolls: a 24-sided stick
    # pushed at 5 cm/s rolls on and on)
    for make, oid, radius in ((weigh_grounding, "apple", 0.033), (drum_grounding, "stick", 0.01)):
        world = build_world(make())
        body = world.object(oid).body

        def centre(body=body) -> np.ndarray:
            return (body.entity_pose * body.cmass_local_pose).p.copy()

        world.step(50)
        start = centre()
        speed = 0.2  # along world x, rolling without slipping (the stick lies across x)
        body.set_linear_velocity([speed, 0.0, 0.0])
        body.set_angular_velocity([0.0, speed / radius, 0.0])
        world.step(int(4.0 / world.timestep))
        travelled = centre() - start  # a polyhedron rolling over a corner may veer off sideways
        assert 0.02 < np.linalg.norm(travelled[:2]) < 0.3 and abs(travelled[2]) < 1e-3, (oid, travelled)
        assert np.linalg.norm(body.linear_velocity) < 1e-3 and np.linalg.norm(body.angular_velocity) < 0.05, oid


def test_the_round_hulls_touch_their_shape_on_every_facet():
    # every facet of the unit sphere's hull is tangent to the sphere (so the body rests one radius
    # high on any of them), the poles are facets, and the corners stay within 7% of the radius
    v, normals = sphere_hull(), sphere_facet_normals()
    assert (v @ normals.T).max(axis=0) == pytest.approx(np.ones(len(normals)), abs=1e-9)
    assert v[:, 2].min() == pytest.approx(-1.0) and v[:, 2].max() == pytest.approx(1.0)
    assert 1.0 < np.linalg.norm(v, axis=1).max() < 1.07
    # the cylinder's: side faces tangent to the unit cylinder, flat ends at +-1
    c = cylinder_hull()
    sides = np.linalg.norm(c[:, :2], axis=1)
    assert sides.min() == pytest.approx(sides.max()) and sides.max() * math.cos(math.pi / CYLINDER_HULL_SIDES) == pytest.approx(1.0)
    assert sorted(set(np.round(c[:, 2], 9))) == [-1.0, 1.0]


def test_what_a_sapien_world_refuses():
    with pytest.raises(InputError, match="UE track"):
        build_world(ue_grounding())
    tilted = dual_piper()
    tilted["arms"][0]["base"]["quaternion"] = [0.9998, 0.02, 0.0, 0.0]
    g = grounding_with(block())
    with pytest.raises(InputError, match="tilted"):
        build_world(g.model_copy(update={"robot": type(g.robot).model_validate(tilted)}))
    skewed = dual_piper()
    skewed["arms"][1]["base"]["quaternion"] = [math.cos(0.2), 0.0, 0.0, math.sin(0.2)]
    with pytest.raises(InputError, match="same way"):
        build_world(g.model_copy(update={"robot": type(g.robot).model_validate(skewed)}))


def test_settings_reach_the_physics():
    settings = WorldSettings(timestep=0.004, friction_scale=0.5, solver_position_iterations=20, gravity=5.0)
    falling = Variation(seed=0, object_poses={"red_block": Pose(position=(-0.05, -0.2, 0.3))})
    world = build_world(drawer_grounding(), falling, settings=settings)
    assert world.timestep == 0.004 and world.scene.timestep == pytest.approx(0.004)
    block_shape = world.object("red_block").part_shapes[""][0]
    assert block_shape.physical_material.static_friction == pytest.approx(0.35)
    finger = world.robot.articulation("left").find_link_by_name("left_link7").collision_shapes[0]
    assert finger.physical_material.static_friction == pytest.approx(0.75)
    assert world.object("red_block").body.solver_position_iterations == 20
    assert build_world(drawer_grounding(), timestep=0.001).timestep == 0.001
    world.step(25)  # 0.1 s of free fall at 5 m/s^2
    assert world.object("red_block").body.linear_velocity[2] == pytest.approx(-0.5, rel=0.02)


def test_render_path_adds_visuals_or_says_how_to_get_a_device():
    if not has_render_device():
        with pytest.raises(RenderDeviceError, match="lavapipe"):
            build_world(drum_grounding(), render=True)
        return
    world = build_world(drum_grounding(), render=True)
    assert not is_physics_only(world.scene)
    render_bodies = [c for c in world.object("drum").entity.components if type(c).__name__ == "RenderBodyComponent"]
    assert render_bodies and len(render_bodies[0].render_shapes) == 2  # shell and head
