"""Scripted kinematic episodes: a `Trajectory` written step by step from a few commands (wait, touch,
move an object, move a joint), physically consistent in what the judge checks: objects move only
along smooth minimum-jerk paths with matching velocities, only while something touches them (or
rides a moving part), contacts begin and end where the script says, arm joints stay in their limits.

They serve as the good trajectory of judge acceptance before any expert exists, and in tests.
Arm joints follow a slow smooth wave inside the PiPER's limits; the judge does not relate them to
object motion (it has no forward kinematics).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from datafarm.harness.judge.geometry import SceneGeometry, quat_to_matrix
from datafarm.harness.judge.trajectory import ArmTrack, Contact, ObjectTrack, Trajectory

PIPER_ARM_LIMITS = ((-2.618, 2.618), (0.0, 3.14), (-2.967, 0.0), (-1.832, 1.832), (-1.22, 1.22), (-3.14, 3.14))
"""(lower, upper) of PiPER joint1..joint6, radians (shared/reference/piper-kinematics.md)."""
PIPER_ARM_VELOCITY = 3.0
"""PiPER joint velocity limit, rad/s (datafarm.sim.robots.piper.ARM_VELOCITY)."""
_WAVE = 0.25  # rad amplitude of the arms' synthetic joint motion
_WAVE_RATE = 0.8  # rad/s angular frequency of it


def _min_jerk(tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-jerk progress s(tau) and ds/dtau on [0, 1]."""
    return 10 * tau**3 - 15 * tau**4 + 6 * tau**5, 30 * tau**2 - 60 * tau**3 + 30 * tau**4


class ScriptedEpisode:
    """Build a trajectory by scripting it. Step 0 holds every object of the geometry at its rest
    pose; each command appends steps at `control_hz`; `build()` returns the Trajectory."""

    def __init__(self, geometry: SceneGeometry, control_hz: float = 20.0, arms: Iterable[str] | None = None,
                 joints: Mapping[str, float] | None = None, scales: Iterable[str] = ()) -> None:
        """`joints`: initial values of articulated joints (`cabinet.drawer`: 0.0); `scales`: scale ids to record."""
        self.geometry = geometry
        """The scene's geometry."""
        self.hz = float(control_hz)
        """Control rate."""
        self.arms = tuple(arms if arms is not None else geometry.arms)
        """Arms recorded."""
        self._pose = {k: [np.asarray(v, float)] for k, v in geometry.rest_poses.items()}
        self._lin = {k: [np.zeros(3)] for k in geometry.rest_poses}
        self._joint = {k: [float(v)] for k, v in (joints or {}).items()}
        self._scale = {k: [0.0] for k in scales}
        self._reading: dict[str, float] = {}
        self._contacts: list[Contact] = []
        self._open: dict[tuple[str, str], tuple[float, float | None]] = {}

    @property
    def steps(self) -> int:
        """Steps written so far."""
        return len(next(iter(self._pose.values())))

    @property
    def now(self) -> float:
        """Time of the last step written, seconds."""
        return (self.steps - 1) / self.hz

    # ----------------------------------------------------------------- contacts

    def touch(self, a: str, b: str, penetration: float | None = None) -> ScriptedEpisode:
        """Contact between `a` and `b` begins at the current step."""
        self._open[(a, b)] = (self.now, penetration)
        return self

    def part(self, a: str, b: str) -> ScriptedEpisode:
        """The contact between `a` and `b` ends at the current step (its last step in contact)."""
        start, pen = self._open.pop((a, b))
        self._contacts.append(Contact(a, b, start, self.now, max_impulse=0.1, max_penetration=pen))
        return self

    def grasp(self, arm: str, obj: str) -> ScriptedEpisode:
        """Both fingers of `arm` touch `obj`."""
        return self.touch(obj, f"{arm}.link7").touch(obj, f"{arm}.link8")

    def release(self, arm: str, obj: str) -> ScriptedEpisode:
        """Both fingers of `arm` let go of `obj`."""
        return self.part(obj, f"{arm}.link7").part(obj, f"{arm}.link8")

    # ----------------------------------------------------------------- motion

    def wait(self, seconds: float) -> ScriptedEpisode:
        """Nothing moves for `seconds`."""
        return self.advance(seconds)

    def set_reading(self, scale: str, grams: float) -> ScriptedEpisode:
        """The scale reads `grams` from the next step on."""
        self._reading[scale] = float(grams)
        return self

    def advance(self, seconds: float, moves: Mapping[str, Iterable[float]] | None = None,
                joints: Mapping[str, float] | None = None, riders: Mapping[str, Iterable[str]] | None = None) -> ScriptedEpisode:
        """Append `seconds` of motion: each object of `moves` travels to its target position on a
        minimum-jerk straight line, each joint of `joints` (`<object>.<joint>`) to its target value;
        the objects listed in `riders[joint]` ride along with that joint's moving part."""
        k = max(1, round(seconds * self.hz))
        s, ds = _min_jerk(np.arange(1, k + 1) / k)
        ds = ds / seconds
        targets = {o: np.asarray(list(p), float) for o, p in (moves or {}).items()}
        joints = dict(joints or {})
        start_pose = {o: poses[-1].copy() for o, poses in self._pose.items()}
        start_joint = {key: values[-1] for key, values in self._joint.items()}
        axes = {key: quat_to_matrix(start_pose[key.partition(".")[0]][3:]) @ self._joint_axis(key) for key in joints}
        for i in range(k):
            for obj, origin in start_pose.items():
                pose, vel = origin.copy(), np.zeros(3)
                if obj in targets:
                    pose[:3] = origin[:3] + s[i] * (targets[obj] - origin[:3])
                    vel = ds[i] * (targets[obj] - origin[:3])
                self._pose[obj].append(pose)
                self._lin[obj].append(vel)
            for key, q0 in start_joint.items():
                travel = joints.get(key, q0) - q0
                self._joint[key].append(q0 + s[i] * travel)
                for obj in (riders or {}).get(key, []):
                    self._pose[obj][-1][:3] = start_pose[obj][:3] + s[i] * travel * axes[key]
                    self._lin[obj][-1] = ds[i] * travel * axes[key]
            for scale, values in self._scale.items():
                values.append(self._reading.get(scale, values[-1]))
        return self

    def _joint_axis(self, key: str) -> np.ndarray:
        """Direction (object frame) in which joint `<object>.<joint>` moves its pieces."""
        owner, _, joint = key.partition(".")
        for piece in self.geometry.shapes[owner].pieces:
            if piece.joint == joint:
                return np.asarray(piece.axis, float)
        raise KeyError(f"object {owner!r} has no joint {joint!r}")

    def build(self) -> Trajectory:
        """The trajectory scripted so far (contacts still open stay open to the end)."""
        n = self.steps
        times = np.arange(n) / self.hz
        contacts = list(self._contacts) + [
            Contact(a, b, start, None, max_impulse=0.1, max_penetration=pen) for (a, b), (start, pen) in self._open.items()
        ]
        objects = {
            o: ObjectTrack(np.array(self._pose[o]), np.array(self._lin[o]), np.zeros((n, 3))) for o in self._pose
        }
        return Trajectory(
            times=times, control_hz=self.hz, geometry=self.geometry, objects=objects,
            arms={arm: _arm_track(arm, times) for arm in self.arms}, contacts=contacts,
            scale_readings={k: np.array(v) for k, v in self._scale.items()},
            joint_values={k: np.array(v) for k, v in self._joint.items()},
        )


def _arm_track(arm: str, times: np.ndarray) -> ArmTrack:
    """A PiPER arm waving slowly about the middle of its joint ranges."""
    lower = np.array([lo for lo, _ in PIPER_ARM_LIMITS])
    upper = np.array([hi for _, hi in PIPER_ARM_LIMITS])
    phase = np.arange(6) * 0.7 + (0.3 if arm == "right" else 0.0)
    arg = _WAVE_RATE * times[:, None] + phase[None, :]
    positions = (lower + upper) / 2 + _WAVE * np.sin(arg)
    velocities = _WAVE * _WAVE_RATE * np.cos(arg)
    return ArmTrack(joint_names=tuple(f"joint{i}" for i in range(1, 7)), positions=positions, velocities=velocities,
                    lower=lower, upper=upper, velocity_limits=np.full(6, PIPER_ARM_VELOCITY),
                    gripper_width=np.full(len(times), 0.05))
