"""The judge's view of a recorded episode: a `Recording` (fresh from the `Recorder`, or read back from
its Parquet files with `read_episode`) plus G, z and the robot's joint limits -> `Trajectory`.

- Geometry: G with z's drawn physical values (`Grounding.with_values(z.physics)`), the table top at
  z's height offset, each object's rest pose where z put it.
- Objects: every recorded object (G order) with its recorded pose and the simulator's measured
  linear and angular velocities (never finite differences).
- Arms: measured joint positions and velocities per arm with the robot's limits, the finger
  opening, the TCP pose; joint names local to the arm (`joint1`), as `joint_value` names them.
- Contacts: the recorder's events, with their control steps, times, impulses and penetration
  depths; body names are already judge body references (`red_cup`, `scale.plate`, `table`,
  `left.link7`; `floor` names the floor and matches no reference).
- Scale readings (grams) and articulated joints (`cabinet.drawer`) as recorded.

A tilted table. The judge's table top is level (`TableGeometry` has a height, no tilt), while the
world's top is tilted by G's tilt plus z's drawn tilt (half a degree by default, i.e. up to ~4 mm
of height across a PiPER's reach). So that an object resting on the top is not read as sunk into
it (or floating above it), every pose, velocity and TCP is expressed in the *level table frame*:
the world turned about the top's centre until the top is level, at z's height offset. Contacts,
joint values, joint states and scale readings do not depend on the frame. Without a tilt the
level table frame is the world frame and nothing is changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.sampler import Variation
from datafarm.harness.judge.geometry import SceneGeometry
from datafarm.harness.judge.trajectory import ArmTrack, Contact, ObjectTrack, Trajectory
from datafarm.sim.episode_io import StoredEpisode, read_episode
from datafarm.sim.recording import Recording
from datafarm.sim.world.frames import matrix_to_quat, table_top_matrix


@dataclass(frozen=True)
class ArmLimits:
    """One arm's joint limits, in the recording's column order for that arm."""

    lower: np.ndarray
    """(J,) lower position limits."""
    upper: np.ndarray
    """(J,) upper position limits."""
    velocity: np.ndarray
    """(J,) velocity limits (positive)."""


def robot_limits(robot: object) -> dict[str, ArmLimits]:
    """Per-arm limits of a loaded `datafarm.sim.robots.Robot` (or a `World`'s robot)."""
    robot = getattr(robot, "robot", robot)
    return {arm: ArmLimits(np.asarray(lim.lower, float), np.asarray(lim.upper, float), np.asarray(lim.velocity, float))
            for arm in robot.arms for lim in [robot.limits(arm)]}  # type: ignore[attr-defined]


def grounding_limits(grounding: Grounding) -> dict[str, ArmLimits]:
    """Per-arm limits of G's robot, read from a physics-only world built from G (for stored episodes,
    where no world is at hand)."""
    from datafarm.sim.world import build_world  # a SAPIEN scene: only when asked

    return robot_limits(build_world(grounding).robot)


def level_from_world(grounding: Grounding, variation: Variation | None) -> np.ndarray:
    """4x4 transform from the world frame to the level table frame of an episode of G drawn as z
    (the identity when the top is not tilted; see the module docstring)."""
    g = grounding.with_values(variation.physics) if variation is not None else grounding
    if g.table is None:
        return np.eye(4)
    offset = variation.table_height_offset if variation is not None else 0.0
    drawn = variation.table_tilt if variation is not None else (0.0, 0.0)
    tilt_x, tilt_y = g.table.tilt_x.value + drawn[0], g.table.tilt_y.value + drawn[1]
    if tilt_x == 0.0 and tilt_y == 0.0:
        return np.eye(4)
    level = table_top_matrix(g.table.center, offset, 0.0, 0.0)
    return level @ np.linalg.inv(table_top_matrix(g.table.center, offset, tilt_x, tilt_y))


def _quat_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products a * b of wxyz quaternions (broadcasting over leading axes)."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def _move_poses(transform: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """(..., 7) poses (xyz + wxyz) carried by a rigid 4x4 transform."""
    if np.array_equal(transform, np.eye(4)):
        return np.array(poses, dtype=float)
    rotation = transform[:3, :3]
    out = np.empty(np.shape(poses), dtype=float)
    out[..., :3] = poses[..., :3] @ rotation.T + transform[:3, 3]
    out[..., 3:] = _quat_product(matrix_to_quat(rotation), poses[..., 3:])
    return out


def episode_geometry(grounding: Grounding, variation: Variation | None) -> SceneGeometry:
    """The scene geometry the judge uses for one episode of G drawn as z (G's nominal scene without
    z): G's shapes with z's physical values, the level table at z's height offset, and each object's
    rest pose where z put it (in the level table frame)."""
    if variation is None:
        return SceneGeometry.from_grounding(grounding)
    geometry = SceneGeometry.from_grounding(grounding.with_values(variation.physics),
                                            table_top_z=variation.table_height_offset)
    transform = level_from_world(grounding, variation)
    rest = dict(geometry.rest_poses)
    for oid, pose in variation.object_poses.items():
        if oid in rest:
            rest[oid] = _move_poses(transform, np.array([*pose.position, *pose.quaternion], dtype=float))
    return replace(geometry, rest_poses=rest)


def _arm_columns(recording: Recording, arm: str) -> list[int]:
    return [i for i, name in enumerate(recording.joints) if name.partition(".")[0] == arm]


def trajectory_from_recording(recording: Recording, grounding: Grounding, variation: Variation | None,
                              limits: Mapping[str, ArmLimits]) -> Trajectory:
    """The judge's `Trajectory` of `recording`, an episode of G drawn as `variation` (z), with the
    robot's per-arm `limits` (`robot_limits(world.robot)` or `grounding_limits(G)`).

    ValueError when the recording is empty or its arms do not match the limits."""
    if recording.steps < 1:
        raise ValueError("the recording holds no control step")
    transform = level_from_world(grounding, variation)
    rotation = transform[:3, :3]
    arms: dict[str, ArmTrack] = {}
    recorded_arms = list(dict.fromkeys(name.partition(".")[0] for name in recording.joints))
    if set(recorded_arms) != set(limits):
        raise ValueError(f"the recording has arms {recorded_arms}, the limits are for {sorted(limits)}")
    for arm in recorded_arms:
        cols = _arm_columns(recording, arm)
        lim = limits[arm]
        if len(cols) != len(lim.lower):
            raise ValueError(f"arm {arm!r}: {len(cols)} recorded joints, {len(lim.lower)} limits")
        gripper = recording.grippers.index(arm) if arm in recording.grippers else None
        arms[arm] = ArmTrack(
            joint_names=tuple(recording.joints[i].partition(".")[2] for i in cols),
            positions=recording.joint_positions[:, cols],
            velocities=recording.joint_velocities[:, cols],
            lower=lim.lower, upper=lim.upper, velocity_limits=lim.velocity,
            gripper_width=None if gripper is None else recording.gripper_openings[:, gripper],
            tcp=None if gripper is None else _move_poses(transform, recording.end_effectors[:, gripper, :]),
        )
    objects = {oid: ObjectTrack(pose=_move_poses(transform, recording.objects[:, k, :7]),
                                linear_velocity=recording.objects[:, k, 7:10] @ rotation.T,
                                angular_velocity=recording.objects[:, k, 10:13] @ rotation.T)
               for k, oid in enumerate(recording.object_ids)}
    contacts = [Contact(a=e.a, b=e.b, start_t=e.start_s, end_t=e.end_s, max_impulse=e.max_impulse,
                        max_penetration=e.max_penetration, start_step=e.start_step, end_step=e.end_step)
                for e in recording.contacts]
    return Trajectory(
        times=recording.time_s,
        control_hz=recording.control_hz,
        geometry=episode_geometry(grounding, variation),
        objects=objects,
        arms=arms,
        contacts=contacts,
        scale_readings={sid: recording.scale_readings[:, k] for k, sid in enumerate(recording.scale_ids)},
        joint_values={name: recording.joint_values[:, k] for k, name in enumerate(recording.joint_value_names)},
    )


def trajectory_from_episode(episode: StoredEpisode | Path | str, grounding: Grounding,
                            limits: Mapping[str, ArmLimits] | None = None) -> Trajectory:
    """The `Trajectory` of a stored episode (its folder, or what `read_episode` returned); z comes
    from the episode record; `limits` default to `grounding_limits(G)`."""
    stored = episode if isinstance(episode, StoredEpisode) else read_episode(episode)
    return trajectory_from_recording(stored.recording, grounding, stored.record.variation,
                                     limits if limits is not None else grounding_limits(grounding))
