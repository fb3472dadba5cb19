"""The PiPER descriptions and user URDFs in real SAPIEN (CPU, physics-only): FK against an independent
numpy model of the kinematics table, IK, PD drives with gravity compensation, the gripper, the dual
arm layout, user URDFs, determinism."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import sapien

from datafarm.errors import InputError
from datafarm.sim.robots import RobotSpec, load_robot, robot_urdf_text, to_artifact_pose, write_robot_urdf
from datafarm.sim.robots import piper
from datafarm.sim.sapien_scene import add_ground, create_physics_scene
from tests.sim import piper_reference as ref

TCP = (0.0, 0.0, 0.13503 + 0.02)  # documented: centre of the 40 mm finger pads, 20 mm behind the tips


def _matrix(pose: sapien.Pose) -> np.ndarray:
    return np.asarray(pose.to_transformation_matrix(), dtype=np.float64)


def _rot_error(a: np.ndarray, b: np.ndarray) -> float:
    """Angle between two rotations: ||Ra - Rb||_F = 2 sqrt(2) sin(angle / 2) (exact, and well
    conditioned near 0, unlike acos of the trace)."""
    return 2 * math.asin(min(1.0, np.linalg.norm(a[:3, :3] - b[:3, :3]) / (2 * math.sqrt(2))))


JOINT_VECTORS = [
    np.zeros(6),
    np.array([0.5, 1.0, -1.2, 0.3, -0.5, 1.0]),
    np.array([-1.5, 2.5, -2.5, -1.5, 1.0, -2.5]),
    np.array([2.0, 0.3, -0.4, 1.7, 1.2, 3.0]),
    np.array([-2.6, 3.1, -0.1, -1.8, -1.2, -3.1]),
    np.array([1.0, 1.57, -1.57, 0.0, 0.0, 0.0]),
    *np.random.default_rng(7).uniform(ref.LOWER, ref.UPPER, size=(4, 6)),
]


@pytest.fixture
def arm():
    scene = create_physics_scene()
    return load_robot(scene, "piper")


def test_tcp_is_documented_point(arm):
    assert piper.TCP_IN_LINK6 == pytest.approx(TCP)
    assert piper.GRIPPER_MAX_WIDTH == pytest.approx(0.076)


def test_fk_matches_independent_numpy_model_of_the_table(arm):
    for q in JOINT_VECTORS:
        expected = ref.tcp_in_base(q, TCP)
        got = _matrix(arm.fk("arm", q))
        assert np.abs(got[:3, 3] - expected[:3, 3]).max() < 1e-4, q
        assert _rot_error(got, expected) < 1e-4, q


def test_simulated_links_match_the_table_too(arm):
    """Not only pinocchio: the SAPIEN articulation itself, placed at q, puts the TCP and both fingers
    where the numpy model says."""
    for q in JOINT_VECTORS[:6]:
        arm.reset("arm", q, gripper_width=0.05)
        expected = ref.tcp_in_base(q, TCP)
        got = _matrix(arm.ee_pose("arm"))
        assert np.abs(got[:3, 3] - expected[:3, 3]).max() < 1e-4
        assert _rot_error(got, expected) < 1e-4
        art = arm.articulation("arm")
        for finger, qf in (("link7", -0.025), ("link8", 0.025)):
            link = art.find_link_by_name(finger)
            want = ref.finger_in_base(q, finger, qf)
            assert np.abs(_matrix(link.entity_pose)[:3, 3] - want[:3, 3]).max() < 1e-4


def test_ik_reaches_reachable_targets_within_limits(arm):
    lim = arm.limits("arm")
    rng = np.random.default_rng(2024)
    for _ in range(12):
        q_true = rng.uniform(lim.lower, lim.upper)
        target = arm.fk("arm", q_true)
        q, ok, err = arm.ik("arm", target, q_init=np.zeros(6))
        assert ok, (q_true, err)
        assert np.all(q >= lim.lower) and np.all(q <= lim.upper)
        # checked with the independent model, not with our own error figure
        reached = ref.tcp_in_base(q, TCP)
        assert np.linalg.norm(reached[:3, 3] - _matrix(target)[:3, 3]) < 0.005
        assert err < 0.005
    # targets may also come as artifact poses (position + wxyz quaternion)
    target = to_artifact_pose(arm.fk("arm", np.array([0.2, 1.0, -0.8, 0.1, 0.4, 0.3])))
    q, ok, err = arm.ik("arm", target)
    assert ok and err < 0.005


def test_ik_refuses_an_unreachable_target_and_stays_in_limits(arm):
    lim = arm.limits("arm")
    q, ok, err = arm.ik("arm", sapien.Pose([1.5, 0.0, 0.3]), q_init=np.zeros(6), restarts=4)
    assert not ok
    assert err > 0.5
    assert np.all(q >= lim.lower) and np.all(q <= lim.upper)


def _settle_error_deg(spec: RobotSpec, q_goal: np.ndarray, seconds: float = 2.0) -> float:
    scene = create_physics_scene()
    robot = load_robot(scene, spec)
    robot.set_joint_targets("arm", q_goal)
    robot.step(int(round(seconds / scene.timestep)))
    return float(np.degrees(np.abs(robot.qpos("arm") - q_goal)).max())


def test_pd_drives_settle_on_target_with_gravity_compensation():
    q_goal = np.array([0.5, 1.2, -1.0, 0.4, 0.6, -0.8])
    assert _settle_error_deg(RobotSpec(model="piper"), q_goal) < 1.0
    # with soft gains the arm visibly sags without compensation, and not with it
    soft = dict(model="piper", stiffness=20.0, damping=4.0)
    sag = _settle_error_deg(RobotSpec(**soft, gravity_compensation=False), q_goal, 3.0)
    held = _settle_error_deg(RobotSpec(**soft), q_goal, 3.0)
    assert sag > 2.0
    assert held < 0.5 * sag


def test_joint_targets_are_clamped_to_limits(arm):
    lim = arm.limits("arm")
    wanted = np.array([3.5, -1.0, 1.0, 2.5, -2.0, 0.0])
    applied = arm.set_joint_targets("arm", wanted)
    assert np.all(applied >= lim.lower) and np.all(applied <= lim.upper)
    _, outside = arm.clamp_to_limits("arm", wanted)
    assert outside.tolist() == [True, True, True, True, True, False]
    arm.step(1000)
    assert np.all(arm.qpos("arm") >= lim.lower - 1e-3) and np.all(arm.qpos("arm") <= lim.upper + 1e-3)
    with pytest.raises(ValueError):
        arm.set_joint_targets("arm", np.zeros(5))


def test_gripper_opens_to_76_mm_and_closes(arm):
    assert arm.set_gripper("arm", 0.2) == pytest.approx(0.076)
    arm.step(500)
    assert arm.gripper_width("arm") == pytest.approx(0.076, abs=0.001)
    # the gap measured between the finger links' inner faces (their frames), not from joint values
    art = arm.articulation("arm")
    gap = np.linalg.norm(art.find_link_by_name("link7").entity_pose.p - art.find_link_by_name("link8").entity_pose.p)
    assert gap == pytest.approx(0.076, abs=0.001)
    q7, q8 = np.asarray(art.get_qpos())[6:8]
    assert q7 == pytest.approx(-q8, abs=1e-4)  # mirrored
    arm.set_gripper("arm", 0.0)
    arm.step(500)
    assert arm.gripper_width("arm") < 0.001


def test_grasp_and_lift_a_box_with_the_finger_pads():
    scene = create_physics_scene()
    add_ground(scene)
    robot = load_robot(scene, "piper")
    builder = scene.create_actor_builder()
    builder.add_box_collision(half_size=[0.02, 0.02, 0.03], material=sapien.physx.PhysxMaterial(0.8, 0.8, 0), density=500)
    box = builder.build(name="box")
    box.pose = sapien.Pose([0.3, 0.0, 0.03])
    down = [0.0, 1.0, 0.0, 0.0]  # TCP z pointing down
    for z, width in ((0.1, 0.07), (0.035, 0.07), (0.035, 0.0), (0.1, 0.0)):
        q, ok, _ = robot.ik("arm", sapien.Pose([0.3, 0.0, z], down))
        assert ok
        robot.set_joint_targets("arm", q)
        robot.set_gripper("arm", width)
        robot.step(500)
    assert robot.gripper_width("arm") == pytest.approx(0.04, abs=0.002)  # holding the 40 mm box
    assert box.pose.p[2] > 0.09  # lifted 6 cm with the gripper
    assert abs(box.pose.p[0] - robot.ee_pose("arm").p[0]) < 0.003  # centred between the fingers


def test_dual_arm_has_two_arms_at_the_given_spacing():
    scene = create_physics_scene()
    robot = load_robot(scene, RobotSpec(model="piper-dual", spacing=0.5, base_height=0.1, base_xy=(-0.2, 0.05)))
    assert robot.arms == ("left", "right")
    assert robot.joint_names("left")[0] == "left_joint1" and robot.joint_names("right")[5] == "right_joint6"
    left, right = robot.base_pose("left").p, robot.base_pose("right").p
    assert np.linalg.norm(left - right) == pytest.approx(0.5, abs=1e-6)
    assert left == pytest.approx([-0.2, 0.3, 0.1]) and right == pytest.approx([-0.2, -0.2, 0.1])
    q = np.array([0.3, 1.0, -1.0, 0.0, 0.5, 0.0])
    assert robot.fk("left", q).p - robot.fk("right", q).p == pytest.approx([0, 0.5, 0], abs=1e-6)
    # each arm moves on its own
    robot.set_joint_targets("left", q)
    robot.step(500)
    assert np.abs(robot.qpos("left") - q).max() < 0.02 and np.abs(robot.qpos("right")).max() < 0.02
    yawed = load_robot(create_physics_scene(), RobotSpec(model="piper-dual", spacing=0.6, base_yaw=math.pi / 2))
    assert yawed.base_pose("left").p == pytest.approx([-0.3, 0.0, 0.0], abs=1e-6)  # left of an arm facing +y


def test_dual_arms_collide_with_each_other_but_not_with_themselves():
    scene = create_physics_scene()
    robot = load_robot(scene, RobotSpec(model="piper-dual", spacing=0.3))
    robot.step(200)
    assert scene.get_contacts() == []  # folded at q = 0: the simple capsules overlap, no self-contact
    # swing the left gripper over into the right arm's gripper
    robot.set_joint_targets("left", np.array([-1.65, 1.8, -1.05, -1.6, 1.2, 2.4]))
    robot.step(1000)
    pairs = {tuple(sorted(b.entity.name.split("_")[0] for b in c.bodies)) for c in scene.get_contacts()}
    assert ("left", "right") in pairs


def test_user_urdf_loads_physics_only(tmp_path):
    urdf = tmp_path / "two_link.urdf"
    urdf.write_text("""<?xml version="1.0"?>
<robot name="two_link">
  <material name="red"><color rgba="1 0 0 1"/></material>
  <link name="base"><collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision>
    <visual><geometry><box size="0.1 0.1 0.1"/></geometry><material name="red"/></visual></link>
  <link name="upper">
    <inertial><origin xyz="0 0 0.15"/><mass value="0.5"/><inertia ixx="0.004" ixy="0" ixz="0" iyy="0.004" iyz="0" izz="0.0001"/></inertial>
    <visual><origin xyz="0 0 0.15"/><geometry><cylinder radius="0.02" length="0.3"/></geometry><material name="red"/></visual>
    <collision><origin xyz="0 0 0.15"/><geometry><cylinder radius="0.02" length="0.3"/></geometry></collision></link>
  <link name="lower">
    <inertial><origin xyz="0 0 0.1"/><mass value="0.3"/><inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.0001"/></inertial>
    <visual><origin xyz="0 0 0.1"/><geometry><sphere radius="0.03"/></geometry><material><color rgba="0 0 1 1"/></material></visual>
    <collision><origin xyz="0 0 0.1"/><geometry><sphere radius="0.03"/></geometry></collision></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><origin xyz="0 0 0.05"/>
    <axis xyz="0 1 0"/><limit lower="-1.5" upper="1.5" effort="20" velocity="2"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/><origin xyz="0 0 0.3"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="10" velocity="2"/></joint>
</robot>
""")
    scene = create_physics_scene()
    robot = load_robot(scene, RobotSpec(model=str(urdf), tcp_offset=(0, 0, 0.2)))
    assert robot.arms == ("arm",)
    assert robot.joint_names("arm") == ("shoulder", "elbow")
    lim = robot.limits("arm")
    assert lim.lower.tolist() == [-1.5, -2.0] and lim.effort.tolist() == [20.0, 10.0]
    assert lim.velocity.tolist() == [2.0, 2.0]
    assert robot.gripper("arm") is None
    # straight up: the TCP is 0.05 + 0.3 + 0.2 above the base
    assert robot.fk("arm", np.zeros(2)).p == pytest.approx([0, 0, 0.55], abs=1e-6)
    # bent 90 degrees at the shoulder about +y: the chain points along +x
    assert robot.fk("arm", np.array([math.pi / 2, 0.0])).p == pytest.approx([0.5, 0, 0.05], abs=1e-5)
    robot.set_joint_targets("arm", np.array([0.4, -0.6]))
    robot.step(1000)
    assert robot.qpos("arm") == pytest.approx([0.4, -0.6], abs=0.01)


def test_user_urdf_errors_name_the_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_robot(create_physics_scene(), str(tmp_path / "missing.urdf"))
    bad = tmp_path / "bad.urdf"
    bad.write_text('<robot name="x">\n  <link name="a">\n</robot>\n')
    with pytest.raises(InputError) as info:
        load_robot(create_physics_scene(), str(bad))
    assert info.value.problems[0].file == bad and info.value.problems[0].line == 3


def test_written_urdf_is_physics_only_and_loads_back_with_the_same_kinematics(tmp_path):
    [path] = write_robot_urdf("piper", tmp_path / "piper.urdf")
    root = ET.parse(path).getroot()
    assert [l.get("name") for l in root.findall("link")] == ["base_link"] + [f"link{i}" for i in range(1, 9)]
    assert root.find(".//visual") is None and root.find(".//material") is None
    rows = {j.get("name"): j for j in root.findall("joint")}
    assert rows["joint6"].find("origin").get("xyz") == "0 0.091 0.0014165"
    assert rows["joint8"].find("limit").get("upper") == "0.038"
    assert ET.fromstring(robot_urdf_text("piper", visuals=True)).find(".//visual/material") is not None
    left, right = write_robot_urdf("piper-dual", tmp_path / "dual.urdf")
    assert ET.parse(left).getroot().find("link").get("name") == "left_base_link"
    assert right.name == "dual_right.urdf"

    builtin = load_robot(create_physics_scene(), "piper")
    user = load_robot(create_physics_scene(), RobotSpec(model=str(path), ee_link="link6", tcp_offset=TCP,
                                                        gripper_joints=("joint7", "joint8")))
    assert user.joint_names("arm") == builtin.joint_names("arm")
    assert user.gripper("arm").max_width == pytest.approx(0.076)
    for q in JOINT_VECTORS[:4]:
        assert _matrix(user.fk("arm", q)) == pytest.approx(_matrix(builtin.fk("arm", q)), abs=1e-6)


def _trajectory() -> np.ndarray:
    scene = create_physics_scene()
    robot = load_robot(scene, "piper-dual")
    rows = []
    targets = [np.array([0.5, 1.2, -1.0, 0.4, 0.6, -0.8]), np.array([-0.3, 0.8, -0.5, -0.2, 0.3, 0.5])]
    for k, q in enumerate(targets):
        robot.set_joint_targets("left", q)
        robot.set_joint_targets("right", -q * np.array([1, -1, -1, 1, 1, 1]))
        robot.set_gripper("left", 0.05 * k)
        for _ in range(150):
            robot.step()
            rows.append(np.concatenate([robot.articulation(a).get_qpos() for a in robot.arms]))
    return np.array(rows)


def test_same_targets_give_bit_identical_trajectories():
    a, b = _trajectory(), _trajectory()
    assert a.shape == (300, 16)
    assert np.array_equal(a, b)
    assert np.abs(a[-1] - a[0]).max() > 0.3  # it did move
