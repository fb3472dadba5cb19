"""The judge's input: one recorded episode held in memory as numpy arrays (`Trajectory`).

The harness fills it from the recorder's files; the judge never reads files itself. N is the number
of recorded control steps; every per-step array has N rows, row i being the state after step i's
action was applied (the same rows as `ArmStateRow`).

Body names. Contacts name their bodies with the judge's body references (`BodyRef`):
- an object by its G id (`red_cup`), or a part of it as `<id>.<part>` (`cabinet.drawer`,
  `cabinet.handle`, `scale.plate`, `drum.head`) when the simulator has that part as its own link;
- a robot link as `<arm>.<link>` (`left.link7`); each arm's two finger links are listed in
  `ArmTrack.finger_links` (PiPER: `<arm>.link7` and `<arm>.link8`);
- the table as `table`.
Articulated joints are keyed `<object id>.<joint>` (`cabinet.drawer`: opening in metres).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from datafarm.harness.judge.geometry import SceneGeometry


def _array(value: Any, shape: tuple[int | None, ...], what: str, dtype: type = float) -> np.ndarray:
    """`value` as an array of `dtype` whose shape matches `shape` (None = any); ValueError otherwise."""
    arr = np.asarray(value, dtype=dtype)
    if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{what} has shape {arr.shape}, expected {want}")
    return arr


@dataclass
class ObjectTrack:
    """One object's recorded motion."""

    pose: np.ndarray
    """(N, 7): world position (x, y, z) then orientation quaternion (w, x, y, z), per step."""
    linear_velocity: np.ndarray
    """(N, 3): world linear velocity the simulator reports (not a finite difference), m/s."""
    angular_velocity: np.ndarray
    """(N, 3): world angular velocity the simulator reports, rad/s."""

    def check(self, n: int, name: str) -> None:
        """Coerce to float arrays and check their shapes against N = `n`."""
        self.pose = _array(self.pose, (n, 7), f"object {name!r} pose")
        self.linear_velocity = _array(self.linear_velocity, (n, 3), f"object {name!r} linear_velocity")
        self.angular_velocity = _array(self.angular_velocity, (n, 3), f"object {name!r} angular_velocity")


@dataclass
class ArmTrack:
    """One arm's joints (measured) and their limits."""

    joint_names: tuple[str, ...]
    """Local joint names, e.g. `joint1`..`joint6` (what `joint_value` predicates name)."""
    positions: np.ndarray
    """(N, J) measured joint positions, radians (metres for prismatic joints)."""
    velocities: np.ndarray
    """(N, J) measured joint velocities."""
    lower: np.ndarray
    """(J,) lower position limits."""
    upper: np.ndarray
    """(J,) upper position limits."""
    velocity_limits: np.ndarray
    """(J,) velocity limits (positive)."""
    gripper_width: np.ndarray | None = None
    """(N,) measured opening between the fingers, metres, or None for an arm without a gripper."""
    finger_links: tuple[str, str] | None = None
    """Contact body names of the two fingers; None means the PiPER's `<arm>.link7`, `<arm>.link8`."""
    tcp: np.ndarray | None = None
    """(N, 7) world pose of the tool centre point, when recorded (used by `near` on an arm)."""

    def check(self, n: int, name: str) -> None:
        """Coerce arrays, fill the finger links, and check shapes against N = `n`."""
        self.joint_names = tuple(self.joint_names)
        j = len(self.joint_names)
        self.positions = _array(self.positions, (n, j), f"arm {name!r} positions")
        self.velocities = _array(self.velocities, (n, j), f"arm {name!r} velocities")
        self.lower = _array(self.lower, (j,), f"arm {name!r} lower")
        self.upper = _array(self.upper, (j,), f"arm {name!r} upper")
        self.velocity_limits = _array(self.velocity_limits, (j,), f"arm {name!r} velocity_limits")
        if self.gripper_width is not None:
            self.gripper_width = _array(self.gripper_width, (n,), f"arm {name!r} gripper_width")
        if self.tcp is not None:
            self.tcp = _array(self.tcp, (n, 7), f"arm {name!r} tcp")
        if self.finger_links is None:
            self.finger_links = (f"{name}.link7", f"{name}.link8")


@dataclass
class Contact:
    """One contact event k between two bodies, from first touch to separation."""

    a: str
    """One body (see the module docstring for names)."""
    b: str
    """The other body."""
    start_t: float
    """Time of first contact, seconds; it counts for the control step whose time is the latest at or before it."""
    end_t: float | None
    """Time of the last contact, seconds (same rule); None when still in contact at the end."""
    max_impulse: float = 0.0
    """Largest contact impulse in one step, N·s."""
    max_penetration: float | None = None
    """Deepest interpenetration the simulator reported, metres; None when unknown."""
    start_step: int | None = None
    """Control step of the first contact (`ContactEvent.start_step`); None to derive it from `start_t`."""
    end_step: int | None = None
    """Control step of the last contact; None to derive it from `end_t` (or open-ended with it)."""

    def involves(self, body: str) -> bool:
        """True when `body` is one of the two bodies (exact name)."""
        return body in (self.a, self.b)


@dataclass
class Trajectory:
    """One recorded episode, as the judge sees it. Construct it with keyword arguments; the
    constructor coerces every array to numpy and checks the shapes (ValueError on a mismatch)."""

    times: np.ndarray
    """(N,) time of each recorded step, seconds from the episode start (step / control_hz when continuous)."""
    control_hz: float
    """Control rate, steps per second."""
    geometry: SceneGeometry
    """Object shapes and rest poses, table and arm names (`SceneGeometry.from_grounding(G)`)."""
    objects: dict[str, ObjectTrack]
    """Object id -> its recorded motion; objects of G without a track stay at their rest pose."""
    arms: dict[str, ArmTrack] = field(default_factory=dict)
    """Arm name -> its joints."""
    contacts: list[Contact] = field(default_factory=list)
    """Every contact event."""
    scale_readings: dict[str, np.ndarray] = field(default_factory=dict)
    """Scale object id -> (N,) reading, grams."""
    joint_values: dict[str, np.ndarray] = field(default_factory=dict)
    """`<object id>.<joint>` -> (N,) position of an articulated object's joint (drawer opening, metres)."""
    step_indices: np.ndarray | None = None
    """(N,) control step index of each recorded row; None means 0..N-1. Gaps and repeats show up here."""
    resets: np.ndarray | None = None
    """(N,) True where the simulator state was reset or the expert restarted before that step; None = never."""
    commanded_motion: np.ndarray | None = None
    """(N,) True where the controller commanded motion (UE: movement keys or view change); for `stuck`."""

    def __post_init__(self) -> None:
        self.times = _array(self.times, (None,), "times")
        n = len(self.times)
        if n < 1:
            raise ValueError("a trajectory has at least one step")
        if not self.control_hz > 0:
            raise ValueError(f"control_hz must be positive, got {self.control_hz}")
        for name, track in self.objects.items():
            track.check(n, name)
        for name, arm in self.arms.items():
            arm.check(n, name)
        self.scale_readings = {k: _array(v, (n,), f"scale reading {k!r}") for k, v in self.scale_readings.items()}
        self.joint_values = {k: _array(v, (n,), f"joint value {k!r}") for k, v in self.joint_values.items()}
        self.step_indices = (
            np.arange(n) if self.step_indices is None else _array(self.step_indices, (n,), "step_indices", dtype=np.int64)
        )
        self.resets = np.zeros(n, bool) if self.resets is None else _array(self.resets, (n,), "resets", dtype=bool)
        if self.commanded_motion is not None:
            self.commanded_motion = _array(self.commanded_motion, (n,), "commanded_motion", dtype=bool)
        unknown = sorted(set(self.objects) - set(self.geometry.shapes) - {"agent"})
        if unknown:
            raise ValueError(f"objects {unknown} have no geometry (not in G)")

    @property
    def n_steps(self) -> int:
        """N, the number of recorded steps."""
        return len(self.times)

    @property
    def dt(self) -> float:
        """Control period, seconds."""
        return 1.0 / self.control_hz

    @property
    def duration(self) -> float:
        """Time of the last recorded step, seconds."""
        return float(self.times[-1])

    def index_at(self, t: float) -> int:
        """Index of the first step at or after time `t` (clamped to the last step)."""
        return int(min(np.searchsorted(self.times, t - 1e-9), self.n_steps - 1))

    def copy(self, **changes: Any) -> Trajectory:
        """A deep copy with some fields replaced (arrays are copied, so edits never touch the original)."""
        return replace(copy.deepcopy(self), **changes)

    def truncated(self, n: int) -> Trajectory:
        """The first `n` steps; contacts after them are dropped and ones still open become open-ended."""
        if not 1 <= n <= self.n_steps:
            raise ValueError(f"cannot keep {n} of {self.n_steps} steps")
        end = float(self.times[n - 1])
        last_step = int(self.step_indices[n - 1])
        contacts = [
            replace(c, end_t=None, end_step=None) if c.end_t is None or c.end_t > end + 1e-9 else c
            for c in self.contacts
            if c.start_t <= end + 1e-9
        ]
        contacts = [c if c.end_step is None or c.end_step <= last_step else replace(c, end_step=None) for c in contacts]
        return Trajectory(
            times=self.times[:n].copy(),
            control_hz=self.control_hz,
            geometry=self.geometry,
            objects={k: ObjectTrack(v.pose[:n].copy(), v.linear_velocity[:n].copy(), v.angular_velocity[:n].copy())
                     for k, v in self.objects.items()},
            arms={k: replace(a, positions=a.positions[:n].copy(), velocities=a.velocities[:n].copy(),
                             gripper_width=None if a.gripper_width is None else a.gripper_width[:n].copy(),
                             tcp=None if a.tcp is None else a.tcp[:n].copy())
                  for k, a in self.arms.items()},
            contacts=contacts,
            scale_readings={k: v[:n].copy() for k, v in self.scale_readings.items()},
            joint_values={k: v[:n].copy() for k, v in self.joint_values.items()},
            step_indices=self.step_indices[:n].copy(),
            resets=self.resets[:n].copy(),
            commanded_motion=None if self.commanded_motion is None else self.commanded_motion[:n].copy(),
        )
