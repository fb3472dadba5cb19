"""Robots in a SAPIEN scene: `load_robot` and the `Robot` handle (PD drives, gravity compensation,
parallel gripper, joint limits, TCP pose, FK and IK per arm).

One articulation per arm. `piper` has one arm called `arm`; `piper-dual` has `left` and `right`
(link and joint names prefixed `left_`/`right_`); a user URDF has one arm called `arm`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sapien

from datafarm.artifacts.common import Pose as ArtifactPose
from datafarm.errors import InputError, Problem
from datafarm.sim.robots import piper
from datafarm.sim.robots.description import to_urdf
from datafarm.sim.robots.kinematics import ArmKinematics, IkResult, matrix_to_pose, pose_to_matrix
from datafarm.sim.robots.spec import RobotSpec
from datafarm.sim.robots.urdf_loading import (
    UrdfJointLimit,
    build_articulation,
    joint_limits,
    parse_urdf_text,
    pose_from_xyz_yaw,
    strip_render_elements,
)
from datafarm.sim.sapien_scene import RENDER_SETUP_HINT, RenderDeviceError, is_physics_only

SELF_COLLISION_IGNORE_BIT = 1 << 30
"""Collision group 2 bit set on every robot shape; with a per-arm id in group 3 it turns off
collisions between links of the same arm (SAPIEN: shapes with equal g3 and a common g2 bit ignore
each other). World objects keep the default groups and collide with the robot."""
_ARM_COLLISION_ID_BASE = 0x7000


@dataclass(frozen=True)
class JointLimits:
    """Limits of an arm's joints, in joint order: position (rad or m), velocity, effort."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass(frozen=True)
class Gripper:
    """A parallel gripper: two finger joints, each opening towards `signs[i]` (+1: positive q)."""

    joint_names: tuple[str, ...]
    joint_indices: np.ndarray
    signs: np.ndarray
    max_width: float


@dataclass
class _Arm:
    name: str
    articulation: sapien.physx.PhysxArticulation
    joint_indices: np.ndarray
    limits: JointLimits
    gripper: Gripper | None
    ee_link: sapien.physx.PhysxArticulationLinkComponent
    tcp_in_link: np.ndarray
    kinematics: ArmKinematics
    stiffness: np.ndarray
    damping: np.ndarray
    effort: np.ndarray
    """Drive force limit for every active joint of the articulation (arm joints and fingers)."""


def robot_urdf_text(model: str, prefix: str = "", visuals: bool = False) -> str:
    """URDF text of a builtin robot arm (`piper`; `piper-dual` is two `piper` arms with prefixes)."""
    if model not in ("piper", "piper-dual"):
        raise ValueError(f"no builtin robot called {model!r} (expected piper or piper-dual)")
    return to_urdf(piper.piper_description(prefix), visuals=visuals)


def write_robot_urdf(model: str, path: str | Path, visuals: bool = False) -> list[Path]:
    """Write a builtin robot's URDF for inspection; returns the files written.

    `piper` writes `path`; `piper-dual` writes one file per arm, `<stem>_left.urdf` and
    `<stem>_right.urdf` next to `path` (each arm is its own articulation)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if model == "piper":
        path.write_text(robot_urdf_text(model, visuals=visuals))
        return [path]
    out = []
    for side in ("left", "right"):
        p = path.with_name(f"{path.stem}_{side}.urdf")
        p.write_text(robot_urdf_text(model, prefix=f"{side}_", visuals=visuals))
        out.append(p)
    return out


def _as_spec(spec: str | Path | RobotSpec) -> RobotSpec:
    if isinstance(spec, RobotSpec):
        return spec
    return RobotSpec(model=str(spec))


def _arm_placements(spec: RobotSpec) -> list[tuple[str, str, sapien.Pose]]:
    """(arm name, name prefix, base pose) for each arm of a builtin robot."""
    x, y = spec.base_xy
    if spec.model == "piper":
        return [("arm", "", pose_from_xyz_yaw((x, y, spec.base_height), spec.base_yaw))]
    # the two bases sit along the yawed y axis, left at +spacing/2
    dx, dy = -math.sin(spec.base_yaw) * spec.spacing / 2, math.cos(spec.base_yaw) * spec.spacing / 2
    return [
        ("left", "left_", pose_from_xyz_yaw((x + dx, y + dy, spec.base_height), spec.base_yaw)),
        ("right", "right_", pose_from_xyz_yaw((x - dx, y - dy, spec.base_height), spec.base_yaw)),
    ]


def load_robot(scene: sapien.Scene, spec: str | Path | RobotSpec, visuals: bool = False) -> "Robot":
    """Put a robot into `scene`: `"piper"`, `"piper-dual"`, a URDF path, or a full RobotSpec.

    Physics-only unless `visuals` is True (then the scene must have a render system): a user URDF's
    `<visual>`, `<material>` and camera sensors are stripped. Every joint gets a PD drive; the arm
    starts at q = 0 (clamped into its limits) with its drive targets there and the gripper closed."""
    spec = _as_spec(spec)
    if visuals and is_physics_only(scene):
        raise RenderDeviceError("visuals were requested for a physics-only scene; create it with "
                                f"create_scene(render=True). {RENDER_SETUP_HINT}")
    arms: list[_Arm] = []
    if spec.builtin:
        for index, (arm_name, prefix, base) in enumerate(_arm_placements(spec)):
            root = parse_urdf_text(robot_urdf_text(spec.model, prefix, visuals=visuals))
            desc = piper.piper_description(prefix)
            materials = {link.name: link.friction for link in desc.links if link.friction is not None}
            # builtin robots reference no files, so the URDF directory is never read
            art = build_articulation(scene, root, Path(__file__).parent, base, materials, name=f"{prefix}piper")
            arms.append(_make_arm(
                arm_name, art, joint_limits(root), spec, index,
                arm_joints=[prefix + j for j in piper.ARM_JOINTS],
                finger_joints=[prefix + j for j in piper.FINGER_JOINTS],
                ee_link=prefix + piper.EE_LINK, tcp=piper.TCP_IN_LINK6))
    else:
        arms.append(_load_user_urdf(scene, spec, visuals))
    return Robot(scene, spec, arms)


def _load_user_urdf(scene: sapien.Scene, spec: RobotSpec, visuals: bool) -> _Arm:
    path = Path(spec.model)
    if not path.is_file():
        raise InputError([Problem("robot URDF file not found", file=path, field="robot",
                                  expected="piper, piper-dual, or the path of an existing .urdf file")])
    root = parse_urdf_text(path.read_text(), source=path)
    if not visuals:
        strip_render_elements(root)
    limits = joint_limits(root)
    base = pose_from_xyz_yaw((spec.base_xy[0], spec.base_xy[1], spec.base_height), spec.base_yaw)
    art = build_articulation(scene, root, path.parent.resolve(), base, name=root.get("name", "robot"), source=path)
    active = [j.name for j in art.active_joints]
    unknown = [j for j in spec.gripper_joints if j not in active]
    if unknown or len(spec.gripper_joints) not in (0, 2):
        raise InputError([Problem(f"gripper joints {list(spec.gripper_joints)} are not two movable joints of the URDF",
                                  file=path, field="gripper_joints", expected=f"two of {active}")])
    finger = set(spec.gripper_joints)
    ee_link = spec.ee_link or _deepest_link(art, exclude={art.find_joint_by_name(j).child_link.name for j in finger})
    if art.find_link_by_name(ee_link) is None:
        raise InputError([Problem(f"no link called {ee_link!r}", file=path, field="ee_link",
                                  expected=f"one of {[link.name for link in art.links]}")])
    return _make_arm("arm", art, limits, spec, 0, arm_joints=[j for j in active if j not in finger],
                     finger_joints=list(spec.gripper_joints), ee_link=ee_link, tcp=spec.tcp_offset)


def _deepest_link(art: sapien.physx.PhysxArticulation, exclude: set[str]) -> str:
    """The link farthest (in joints) from the root, ignoring `exclude` (the finger links)."""
    def depth(link: sapien.physx.PhysxArticulationLinkComponent) -> int:
        d = 0
        while link.parent is not None:
            link, d = link.parent, d + 1
        return d
    candidates = [link for link in art.links if link.name not in exclude]
    return max(candidates, key=lambda link: (depth(link), link.index)).name


def _make_arm(name: str, art: sapien.physx.PhysxArticulation, limits: dict[str, UrdfJointLimit],
              spec: RobotSpec, arm_index: int, arm_joints: list[str], finger_joints: list[str],
              ee_link: str, tcp: tuple[float, float, float]) -> _Arm:
    active = art.active_joints
    names = [j.name for j in active]
    index = {n: i for i, n in enumerate(names)}
    qlimits = np.asarray(art.get_qlimits(), dtype=np.float64).reshape(-1, 2)

    def limit_of(joint: str) -> UrdfJointLimit:
        i = index[joint]
        return limits.get(joint, UrdfJointLimit(joint, "", qlimits[i, 0], qlimits[i, 1], math.inf, math.inf))

    arm_idx = np.array([index[j] for j in arm_joints], dtype=np.int64)
    arm_limits = JointLimits(  # the URDF's float64 numbers, not PhysX's float32 copies
        tuple(arm_joints),
        np.array([limit_of(j).lower for j in arm_joints]),
        np.array([limit_of(j).upper for j in arm_joints]),
        np.array([limit_of(j).velocity for j in arm_joints]),
        np.array([limit_of(j).effort for j in arm_joints]),
    )
    gripper = None
    if finger_joints:
        f_idx = np.array([index[j] for j in finger_joints], dtype=np.int64)
        # each finger opens towards its nonzero limit
        signs = np.array([1.0 if abs(qlimits[i, 1]) >= abs(qlimits[i, 0]) else -1.0 for i in f_idx])
        travel = [qlimits[i, 1] if s > 0 else -qlimits[i, 0] for i, s in zip(f_idx, signs)]
        gripper = Gripper(tuple(finger_joints), f_idx, signs, float(sum(travel)))
        _couple_fingers(art, gripper)

    stiffness = np.full(len(names), spec.stiffness)
    damping = np.full(len(names), spec.damping)
    if gripper is not None:
        stiffness[gripper.joint_indices] = spec.gripper_stiffness
        damping[gripper.joint_indices] = spec.gripper_damping
    effort = np.array([limit_of(n).effort for n in names])
    for i, joint in enumerate(active):
        force_limit = float(effort[i]) if math.isfinite(effort[i]) else 3.4e38
        joint.set_drive_properties(float(stiffness[i]), float(damping[i]), force_limit=force_limit, mode="force")
        velocity = limit_of(joint.name).velocity
        if math.isfinite(velocity):
            joint.set_max_velocity(float(velocity))
        joint.set_friction(0.0)

    if not spec.self_collision:
        for link in art.links:
            for shape in link.collision_shapes:
                g = list(shape.get_collision_groups())
                g[2] |= SELF_COLLISION_IGNORE_BIT
                g[3] = _ARM_COLLISION_ID_BASE + arm_index
                shape.set_collision_groups(g)

    q0 = np.clip(np.zeros(len(names)), qlimits[:, 0], qlimits[:, 1])
    art.set_qpos(q0.astype(np.float32))
    art.set_qvel(np.zeros(len(names), dtype=np.float32))
    for i, joint in enumerate(active):
        joint.set_drive_target(float(q0[i]))
        joint.set_drive_velocity_target(0.0)

    link = art.find_link_by_name(ee_link)
    tcp_in_link = np.eye(4)
    tcp_in_link[:3, 3] = tcp
    revolute = np.array([active[i].type.startswith("revolute") for i in arm_idx])
    kin = ArmKinematics(art, arm_idx, link.index, tcp_in_link, pose_to_matrix(art.get_root_pose()),
                        arm_limits.lower, arm_limits.upper, revolute)
    return _Arm(name, art, arm_idx, arm_limits, gripper, link, tcp_in_link, kin, stiffness, damping, effort)


FINGER_COUPLING_STIFFNESS = 1e5
"""N/m of the tendon that keeps the two fingers mirrored (see `_couple_fingers`)."""
FINGER_COUPLING_DAMPING = 100.0
"""N s/m of that tendon."""


def _couple_fingers(art: sapien.physx.PhysxArticulation, gripper: Gripper) -> None:
    """Tie the fingers with a stiff fixed tendon so their openings stay equal, like the real
    single-motor gripper. Without it, two independently driven fingers squeezing an object both
    saturate at their force limit, and the object then drifts sideways between them."""
    joints = art.active_joints
    links = [joints[i].child_link for i in gripper.joint_indices]
    parent = links[0].parent
    if parent is None or links[1].parent is not parent:
        return  # fingers on different parents: leave them independent
    s0, s1 = (float(s) for s in gripper.signs)
    # tendon length s0 q0 - s1 q1 is held at 0: both fingers open by the same amount
    art.create_fixed_tendon([parent, links[0], links[1]], [0.0, s0, -s1], [0.0, 1.0 / s0, -1.0 / s1],
                            rest_length=0.0, stiffness=FINGER_COUPLING_STIFFNESS, damping=FINGER_COUPLING_DAMPING)


def to_sapien_pose(pose: sapien.Pose | ArtifactPose) -> sapien.Pose:
    """An artifact Pose (position, wxyz quaternion) as a sapien.Pose; a sapien.Pose passes through."""
    if isinstance(pose, ArtifactPose):
        return sapien.Pose(np.array(pose.position, dtype=np.float32), np.array(pose.quaternion, dtype=np.float32))
    return pose


def to_artifact_pose(pose: sapien.Pose) -> ArtifactPose:
    """A sapien.Pose as an artifact Pose (for recording and artifacts)."""
    return ArtifactPose(position=tuple(float(v) for v in pose.p), quaternion=tuple(float(v) for v in pose.q))


class Robot:
    """A loaded robot: per-arm joint limits, PD targets, gripper, TCP pose, FK/IK; steps with gravity
    compensation. Arm joint vectors are in `joint_names(arm)` order (fingers excluded)."""

    def __init__(self, scene: sapien.Scene, spec: RobotSpec, arms: list[_Arm]) -> None:
        self.scene = scene
        self.spec = spec
        self._arms = {a.name: a for a in arms}

    # --- description -------------------------------------------------------------------------------
    @property
    def arms(self) -> tuple[str, ...]:
        """Arm names: ("arm",) for one arm, ("left", "right") for piper-dual."""
        return tuple(self._arms)

    def _arm(self, arm: str) -> _Arm:
        try:
            return self._arms[arm]
        except KeyError:
            raise KeyError(f"no arm called {arm!r}; this robot has {list(self._arms)}") from None

    def articulation(self, arm: str) -> sapien.physx.PhysxArticulation:
        """The SAPIEN articulation of `arm` (for recording; do not set its state from an expert)."""
        return self._arm(arm).articulation

    def joint_names(self, arm: str) -> tuple[str, ...]:
        """The arm's joint names, base to wrist (fingers excluded)."""
        return self._arm(arm).limits.names

    def limits(self, arm: str) -> JointLimits:
        """Position, velocity and effort limits of the arm's joints."""
        return self._arm(arm).limits

    def gripper(self, arm: str) -> Gripper | None:
        """The arm's parallel gripper, or None if it has none."""
        return self._arm(arm).gripper

    def base_pose(self, arm: str) -> sapien.Pose:
        """World pose of the arm's base (root link), fixed."""
        return matrix_to_pose(self._arm(arm).kinematics.base_pose)

    # --- state -------------------------------------------------------------------------------------
    def qpos(self, arm: str) -> np.ndarray:
        """Simulated positions of the arm joints."""
        a = self._arm(arm)
        return np.asarray(a.articulation.get_qpos(), dtype=np.float64)[a.joint_indices]

    def qvel(self, arm: str) -> np.ndarray:
        """Simulated velocities of the arm joints."""
        a = self._arm(arm)
        return np.asarray(a.articulation.get_qvel(), dtype=np.float64)[a.joint_indices]

    def drive_targets(self, arm: str) -> np.ndarray:
        """Current PD position targets of the arm joints."""
        a = self._arm(arm)
        return np.array([float(np.asarray(a.articulation.active_joints[i].drive_target).reshape(-1)[0])
                         for i in a.joint_indices])

    def drive_efforts(self, arm: str) -> np.ndarray:
        """Force/torque the PD drives apply to the arm joints now: clip(k (target - q) - d qd, +-limit)."""
        a = self._arm(arm)
        k, d, lim = a.stiffness[a.joint_indices], a.damping[a.joint_indices], a.effort[a.joint_indices]
        return np.clip(k * (self.drive_targets(arm) - self.qpos(arm)) - d * self.qvel(arm), -lim, lim)

    def gripper_width(self, arm: str) -> float:
        """Gap between the inner finger faces, metres (from the finger joint positions)."""
        g = self._require_gripper(arm)
        q = np.asarray(self._arm(arm).articulation.get_qpos(), dtype=np.float64)[g.joint_indices]
        return float(np.sum(g.signs * q))

    def ee_pose(self, arm: str) -> sapien.Pose:
        """Simulated world pose of the arm's TCP (for PiPER: see `piper.TCP_IN_LINK6`)."""
        a = self._arm(arm)
        return matrix_to_pose(pose_to_matrix(a.ee_link.entity_pose) @ a.tcp_in_link)

    # --- commands ----------------------------------------------------------------------------------
    def clamp_to_limits(self, arm: str, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`q` clamped into the arm's position limits, and a mask of the joints that were outside."""
        lim = self._arm(arm).limits
        q = np.asarray(q, dtype=np.float64)
        if q.shape != lim.lower.shape:
            raise ValueError(f"arm {arm!r} has {lim.lower.size} joints, got a vector of shape {q.shape}")
        clamped = np.clip(q, lim.lower, lim.upper)
        return clamped, clamped != q

    def set_joint_targets(self, arm: str, q: np.ndarray) -> np.ndarray:
        """Set the arm joints' PD position targets, clamped into the joint limits; returns what was set."""
        a = self._arm(arm)
        clamped, _ = self.clamp_to_limits(arm, q)
        joints = a.articulation.active_joints
        for i, target in zip(a.joint_indices, clamped):
            joints[i].set_drive_target(float(target))
        return clamped

    def set_gripper(self, arm: str, width: float) -> float:
        """Drive the fingers (mirrored) to a gap of `width` metres, clamped to [0, max]; returns it."""
        g = self._require_gripper(arm)
        width = float(np.clip(width, 0.0, g.max_width))
        joints = self._arm(arm).articulation.active_joints
        for i, sign in zip(g.joint_indices, g.signs):
            joints[i].set_drive_target(float(sign * width / 2))
        return width

    def reset(self, arm: str, q: np.ndarray, gripper_width: float | None = None) -> None:
        """Place the arm at `q` at rest with its targets there (episode setup only, never mid-episode)."""
        a = self._arm(arm)
        full = np.asarray(a.articulation.get_qpos(), dtype=np.float64)
        full[a.joint_indices] = self.set_joint_targets(arm, q)
        if gripper_width is not None and a.gripper is not None:
            w = self.set_gripper(arm, gripper_width)
            full[a.gripper.joint_indices] = a.gripper.signs * w / 2
        a.articulation.set_qpos(full.astype(np.float32))
        a.articulation.set_qvel(np.zeros_like(full, dtype=np.float32))

    def _require_gripper(self, arm: str) -> Gripper:
        g = self._arm(arm).gripper
        if g is None:
            raise ValueError(f"arm {arm!r} has no gripper")
        return g

    # --- stepping ----------------------------------------------------------------------------------
    def apply_gravity_compensation(self) -> None:
        """Set each joint's external force to the passive forces (gravity, Coriolis, centrifugal) now.

        Call before every `scene.step()` when stepping the scene yourself; `step` does it for you."""
        if not self.spec.gravity_compensation:
            return
        for a in self._arms.values():
            a.articulation.set_qf(a.articulation.compute_passive_force(gravity=True, coriolis_and_centrifugal=True))

    def step(self, n: int = 1) -> None:
        """Advance the scene `n` physics steps, compensating gravity before each."""
        for _ in range(n):
            self.apply_gravity_compensation()
            self.scene.step()

    # --- kinematics --------------------------------------------------------------------------------
    def fk(self, arm: str, q: np.ndarray) -> sapien.Pose:
        """World pose of the arm's TCP at arm joint positions `q` (pinocchio, no simulation)."""
        return self._arm(arm).kinematics.fk(np.asarray(q, dtype=np.float64))

    def ik(self, arm: str, target_pose: sapien.Pose | ArtifactPose, q_init: np.ndarray | None = None,
           pos_tol: float = 1e-3, rot_tol: float = 1e-2, restarts: int = 16, seed: int = 0) -> IkResult:
        """Arm joint positions (inside the limits) putting the TCP at the world pose `target_pose`.

        Starts from `q_init` (default: the current joint positions), then from seeded restarts;
        `success` means within `pos_tol` m and `rot_tol` rad; `error_m` is the TCP position error."""
        q0 = self.qpos(arm) if q_init is None else np.asarray(q_init, dtype=np.float64)
        return self._arm(arm).kinematics.ik(to_sapien_pose(target_pose), q0, pos_tol=pos_tol, rot_tol=rot_tol,
                                            restarts=restarts, seed=seed)
