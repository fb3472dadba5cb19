"""Recording one episode in a `World`: per control step the action a, the state x, the contact events k
and the joint occupancy, into preallocated numpy buffers (`Recording`), stored by `episode_io`.

Control loop. `Recorder.step` applies one action (joint position targets per arm, a finger opening per
gripper), then runs `substeps` physics steps (`1 / (control_hz * timestep)`, which must be a whole
number), compensating gravity before each, and records the state after the last one. A harness that
runs the loop itself calls the same three parts: `set_targets`, `physics_step` (substeps times) and
`end_step`. Targets outside the joint limits are clamped before they reach the drives and flagged
(step and joint); the action recorded is the one applied, so every action label is executable on
the real robot.

State row i (`time_s = i / control_hz`, as the episode schema defines it) is the state after action i:
- joint position, velocity, effort of every arm joint; effort is what the motor must deliver, i.e. the
  PD drive's force (clipped to its limit) plus the gravity compensation;
- per gripper, the finger opening and the TCP pose;
- every object's pose and linear/angular velocity (in G order);
- every scale's reading, grams: the mean load on its plate over the control step's physics steps;
- every articulated object's joint value (`<id>.<joint>`, e.g. `cabinet.drawer`).

Contact events. Contacts are read after *every physics step* (a drum strike may last a few
milliseconds, well under one control period). Two bodies (named as in `datafarm.sim.world`) touch
in a physics step when PhysX reports an impulse between them or a point closer than
`touch_tolerance` (PhysX also reports speculative points up to the contact offset apart, which are
not touches). A pair that touches in at least one physics step of each of control steps i..j is one
event: `start_step` i, `end_step` j (null if still touching at the end), `start_s`/`end_s` the start
times of the first and last physics steps in contact, the largest impulse the pair exchanged in one
physics step, the deepest interpenetration. A bounce shorter than a control step therefore never
splits a strike into two events. To keep recording cheap (see `_ContactTracker`), once an event has
begun its pair's points are read in full only during the impact (`DENSE_STEPS` physics steps) and at
the last physics step of every control step; in between, PhysX still reporting the pair counts as
touching, and the event ends with the first control step whose last physics step finds the pair
apart or no longer reported.

Joint occupancy (per arm joint, plus `<arm>.gripper` per gripper): the largest |q - centre| /
half-range, |velocity| / velocity limit and |effort| / effort limit over the recorded states, and
the number of steps (and the first) whose command lay outside the position limits (for a gripper:
an opening outside [0, max]).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from datafarm.artifacts.episode import ContactEvent, JointOccupancy, JointTargetSpace
from datafarm.sim.world import World, load_grams

TOUCH_TOLERANCE = 5e-4
"""A contact point this close (metres) or closer counts as a touch even when it carried no impulse."""
DENSE_STEPS = 5
"""Physics steps after a contact starts during which its impulses are read every step (the impact)."""
OBJECT_STATE = 13
"""Numbers per object per step: position (3), quaternion wxyz (4), linear (3) and angular velocity (3)."""


def _qualified(arm: str, joint: str) -> str:
    """`<arm>.<joint>` with the arm prefix removed and the joint made a valid name."""
    if joint.startswith(f"{arm}_"):
        joint = joint[len(arm) + 1:]
    name = re.sub(r"[^a-z0-9_]", "_", joint.lower()) or "joint"
    return f"{arm}.{name if name[0].isalpha() else 'j' + name}"


@dataclass
class _ArmChannel:
    """Precomputed indices and drive constants of one arm (all active joints of its articulation)."""

    name: str
    articulation: object
    arm_index: np.ndarray
    finger_index: np.ndarray | None
    finger_signs: np.ndarray | None
    max_width: float
    stiffness: np.ndarray
    damping: np.ndarray
    force_limit: np.ndarray
    targets: np.ndarray
    """Current drive target of every active joint (what the recorder last set)."""
    columns: slice
    gripper_column: int | None


@dataclass
class Recording:
    """One recorded episode as arrays (row i = control step i) plus its events and occupancy."""

    control_hz: float
    """Control steps per second."""
    timestep: float
    """Physics step, seconds."""
    substeps: int
    """Physics steps per control step."""
    joints: list[str]
    """Qualified arm joint names (`<arm>.<joint>`): the column order of the joint arrays."""
    grippers: list[str]
    """Arms with a gripper: the column order of the gripper arrays."""
    object_ids: list[str]
    """G object ids, the order of `objects`' second axis."""
    scale_ids: list[str]
    """Scale object ids, the column order of `scale_readings`."""
    joint_value_names: list[str]
    """`<id>.<joint>` of articulated objects, the column order of `joint_values`."""
    joint_targets: np.ndarray
    """(steps, joints) applied joint position targets, radians."""
    gripper_targets: np.ndarray
    """(steps, grippers) applied finger-opening targets, metres."""
    joint_positions: np.ndarray
    """(steps, joints) measured positions."""
    joint_velocities: np.ndarray
    """(steps, joints) measured velocities."""
    joint_efforts: np.ndarray
    """(steps, joints) motor efforts (drive + gravity compensation)."""
    gripper_openings: np.ndarray
    """(steps, grippers) measured finger openings, metres."""
    end_effectors: np.ndarray
    """(steps, grippers, 7) world_from_tcp: x, y, z, qw, qx, qy, qz."""
    objects: np.ndarray
    """(steps, objects, 13): position, quaternion wxyz, linear velocity, angular velocity."""
    scale_readings: np.ndarray
    """(steps, scales) grams."""
    joint_values: np.ndarray
    """(steps, articulated joints) joint positions."""
    contacts: list[ContactEvent] = field(default_factory=list)
    """k: contact events, ordered by start then by body names."""
    occupancy: list[JointOccupancy] = field(default_factory=list)
    """One row per arm joint, then one per gripper."""
    over_limit: list[tuple[int, str]] = field(default_factory=list)
    """(step, joint) of every command that lay outside its limits."""

    @property
    def steps(self) -> int:
        """Number of control steps recorded."""
        return int(self.joint_targets.shape[0])

    @property
    def time_s(self) -> np.ndarray:
        """(steps,) step / control_hz."""
        return np.arange(self.steps, dtype=np.float64) / self.control_hz

    def action_space(self) -> JointTargetSpace:
        """The action space these columns follow (for the episode record)."""
        return JointTargetSpace(kind="joint-targets", joints=self.joints, grippers=self.grippers)

    def object_poses(self, object_id: str) -> np.ndarray:
        """(steps, 7) world_from_object of one object: x, y, z, qw, qx, qy, qz."""
        return self.objects[:, self.object_ids.index(object_id), :7]


class _Event:
    """A contact event being tracked (see the module docstring)."""

    __slots__ = ("dense", "last_s", "last_step", "max_impulse", "max_penetration", "start_s", "start_step", "touching")

    def __init__(self, step: int, time_s: float, dense: int) -> None:
        self.start_step, self.start_s, self.last_step, self.last_s = step, time_s, step, time_s
        self.max_impulse = 0.0
        self.max_penetration = 0.0
        self.dense = dense
        """Physics steps left during which the pair's impulses are read in full (the impact)."""
        self.touching = True
        """Whether the last full read (the last physics step of a control step) found the pair touching."""


class _ContactTracker:
    """Turns per-physics-step contacts into events (see the module docstring).

    Reading every contact point of every pair after every physics step costs more than the physics
    step itself, so a pair already in an event is read in full only during its first
    `dense_steps` physics steps (the impact, where the largest impulse is) and at the last physics
    step of each control step (to learn whether it still touches); in between, PhysX still
    reporting the pair keeps the event alive. Pairs on a scale's plate are always read in full
    (their impulses are the reading)."""

    def __init__(self, world: World, touch_tolerance: float, dense_steps: int) -> None:
        self.names = world.shape_names
        self.tolerance = touch_tolerance
        self.dense_steps = dense_steps
        self.plate_of = {shape: sid for sid, shapes in world.scale_plates.items() for shape in shapes}
        self.plate_impulse = {sid: np.zeros(3) for sid in world.scale_plates}
        # (shape, shape) -> (event key, sign turning the pair's impulse into key order, scale id or None)
        self.pairs: dict[tuple[object, object], tuple[tuple[str, str], float, str | None, float] | None] = {}
        self.active: dict[tuple[str, str], _Event] = {}
        self.dense: list[_Event] = []
        self.closed: list[tuple[tuple[str, str], _Event]] = []

    def _pair(self, s0: object, s1: object) -> tuple[tuple[str, str], float, str | None, float] | None:
        n0, n1 = self.names.get(s0), self.names.get(s1)
        if n0 is None or n1 is None or n0 == n1:
            return None
        plate, plate_sign = None, 0.0
        if s0 in self.plate_of and s1 not in self.plate_of:
            plate, plate_sign = self.plate_of[s0], 1.0  # PhysX reports the impulse on the first body
        elif s1 in self.plate_of and s0 not in self.plate_of:
            plate, plate_sign = self.plate_of[s1], -1.0
        return ((n0, n1), 1.0, plate, plate_sign) if n0 < n1 else ((n1, n0), -1.0, plate, plate_sign)

    def observe(self, contacts: list, step: int, time_s: float, full: bool) -> None:
        """Take in the contacts after one physics step; `full` reads every pair's points."""
        pairs, active, tolerance = self.pairs, self.active, self.tolerance
        if full:  # whether an event goes on past this control step is decided by this read alone
            for event in active.values():
                event.touching = False
        touched: dict[tuple[str, str], list] | None = None
        for contact in contacts:
            s0, s1 = contact.shapes
            info = pairs.get((s0, s1), False)
            if info is False:
                info = pairs[(s0, s1)] = self._pair(s0, s1)
            if info is None:
                continue
            key, sign, plate, plate_sign = info
            event = active.get(key)
            if event is not None and not full and not event.dense and plate is None:
                event.last_step, event.last_s = step, time_s
                continue
            points = contact.points
            if not points:
                continue
            impulse = sum(p.impulse for p in points)
            gap = min(p.separation for p in points)
            if plate is not None:
                self.plate_impulse[plate] += plate_sign * impulse
            if gap > tolerance and not impulse.any():
                continue  # reported, but apart
            if touched is None:
                touched = {}
            entry = touched.get(key)
            if entry is None:
                touched[key] = [sign * impulse, gap]
            else:
                entry[0] = entry[0] + sign * impulse
                entry[1] = min(entry[1], gap)
        for key, (impulse, gap) in (touched or {}).items():
            event = active.get(key)
            if event is None:
                event = active[key] = _Event(step, time_s, self.dense_steps)
                self.dense.append(event)
            event.last_step, event.last_s, event.touching = step, time_s, True
            magnitude = float(np.linalg.norm(impulse))
            event.max_impulse = max(event.max_impulse, magnitude)
            if -gap > event.max_penetration:
                event.max_penetration = -float(gap)
        if self.dense:
            for event in self.dense:
                event.dense -= 1
            self.dense = [e for e in self.dense if e.dense > 0]

    def end_step(self, step: int) -> None:
        """After the last (full) read of control step `step`: close the events whose pair did not touch
        in this step, or no longer touches at its end."""
        for key in [k for k, e in self.active.items() if e.last_step < step or not e.touching]:
            self.closed.append((key, self.active.pop(key)))

    def events(self, last_step: int) -> list[ContactEvent]:
        """Every event, closed or still open at `last_step`, ordered by start, then body names."""
        rows = [(key, e, False) for key, e in self.closed]
        rows += [(key, e, e.last_step >= last_step) for key, e in self.active.items()]
        rows.sort(key=lambda r: (r[1].start_step, r[1].start_s, r[0]))
        return [ContactEvent(a=a, b=b, start_step=e.start_step, start_s=e.start_s,
                             end_step=None if open_ else e.last_step, end_s=None if open_ else e.last_s,
                             max_impulse=e.max_impulse, max_penetration=e.max_penetration)
                for (a, b), e, open_ in rows]


class Recorder:
    """Steps a World under joint-target actions and records a, x, k and joint occupancy.

    `control_hz` sets the control rate; the physics runs `round(1 / (control_hz * timestep))`
    substeps per control step (ValueError if that is not a whole number)."""

    def __init__(self, world: World, control_hz: float = 20.0, *, touch_tolerance: float = TOUCH_TOLERANCE,
                 dense_steps: int = DENSE_STEPS, capacity: int = 256) -> None:
        if control_hz <= 0:
            raise ValueError(f"control_hz must be positive, got {control_hz}")
        dt = world.timestep
        substeps = round(1.0 / (control_hz * dt))
        if substeps < 1 or abs(substeps * dt * control_hz - 1.0) > 1e-6:
            raise ValueError(f"control period 1/{control_hz} s is not a whole number of {dt} s physics steps")
        self.world, self.control_hz, self.substeps = world, float(control_hz), substeps
        robot = world.robot
        self._channels: list[_ArmChannel] = []
        joints: list[str] = []
        grippers: list[str] = []
        for arm in robot.arms:
            art = robot.articulation(arm)
            active = list(art.active_joints)
            index = {j.name: i for i, j in enumerate(active)}
            arm_index = np.array([index[n] for n in robot.joint_names(arm)], dtype=np.int64)
            gripper = robot.gripper(arm)
            targets = np.array([float(np.asarray(j.drive_target).reshape(-1)[0]) for j in active])
            column = None
            if gripper is not None:
                column = len(grippers)
                grippers.append(arm)
            self._channels.append(_ArmChannel(
                arm, art, arm_index,
                gripper.joint_indices if gripper is not None else None,
                gripper.signs if gripper is not None else None,
                gripper.max_width if gripper is not None else 0.0,
                np.array([j.stiffness for j in active]), np.array([j.damping for j in active]),
                np.array([j.force_limit for j in active]), targets,
                slice(len(joints), len(joints) + len(arm_index)), column))
            joints += [_qualified(arm, n) for n in robot.joint_names(arm)]
        self.joints, self.grippers = joints, grippers
        self._limits = self._joint_limits()
        self.object_ids = list(world.objects)
        self.scale_ids = list(world.scale_plates)
        self.joint_value_names = world.joint_names()
        self._joint_value_sources = []
        for name in self.joint_value_names:
            oid, _, joint = name.partition(".")
            obj = world.objects[oid]
            self._joint_value_sources.append((obj.articulation, list(obj.articulation.active_joints).index(obj.joints[joint])))
        self._bodies = [(o.entity, o.body) for o in world.objects.values()]
        self._contacts = _ContactTracker(world, touch_tolerance, dense_steps)
        self._physx = world.scene.physx_system
        self._dt = world.timestep
        self._step = 0
        self._substep = 0
        self._capacity = 0
        self._buffers: dict[str, np.ndarray] = {}
        self._grow(max(1, capacity))

    # --- description -------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        """Control steps recorded so far."""
        return self._step

    @property
    def time_s(self) -> float:
        """Simulated time since the recording started, seconds."""
        return self._step / self.control_hz

    def action_space(self) -> JointTargetSpace:
        """Joint and gripper order of `step_vector` and of the recorded columns."""
        return JointTargetSpace(kind="joint-targets", joints=self.joints, grippers=self.grippers)

    def _joint_limits(self) -> dict[str, np.ndarray]:
        robot = self.world.robot
        limits = [robot.limits(ch.name) for ch in self._channels]
        out = {key: np.concatenate([getattr(lim, key) for lim in limits]) if limits else np.zeros(0)
               for key in ("lower", "upper", "velocity", "effort")}
        finger_velocity, finger_effort = [], []
        for ch in self._channels:
            if ch.finger_index is not None:
                joint = list(ch.articulation.active_joints)[int(ch.finger_index[0])]  # type: ignore[attr-defined]
                finger_velocity.append(float(joint.max_velocity))
                finger_effort.append(float(ch.force_limit[ch.finger_index[0]]))
        out["finger_velocity"], out["finger_effort"] = np.array(finger_velocity), np.array(finger_effort)
        return out

    # --- buffers -----------------------------------------------------------------------------------
    def _grow(self, capacity: int) -> None:
        nj, ng, no = len(self.joints), len(self.grippers), len(self.object_ids)
        shapes = {
            "joint_targets": (nj,), "gripper_targets": (ng,), "joint_positions": (nj,), "joint_velocities": (nj,),
            "joint_efforts": (nj,), "gripper_openings": (ng,), "end_effectors": (ng, 7), "objects": (no, OBJECT_STATE),
            "scale_readings": (len(self.scale_ids),), "joint_values": (len(self.joint_value_names),),
            "over_joint": (nj,), "over_gripper": (ng,), "finger_velocity": (ng,), "finger_effort": (ng,),
        }
        for name, shape in shapes.items():
            dtype = bool if name.startswith("over_") else np.float64
            new = np.zeros((capacity, *shape), dtype=dtype)
            if name in self._buffers:
                old = self._buffers[name]
                rows = min(self._step + 1, old.shape[0])  # the current row may hold flags already
                new[:rows] = old[:rows]
            self._buffers[name] = new
        self._capacity = capacity

    # --- stepping ----------------------------------------------------------------------------------
    def step(self, joint_targets: Mapping[str, np.ndarray] | None = None,
             gripper_targets: Mapping[str, float] | None = None) -> None:
        """Apply one action and advance one control step: `set_targets`, `substeps` x `physics_step`,
        `end_step`. Arms (grippers) not named keep their targets.

        ValueError for an unknown arm, a wrong-length or non-finite vector."""
        self.set_targets(joint_targets, gripper_targets)
        for _ in range(self.substeps):
            self.physics_step()
        self.end_step()

    def set_targets(self, joint_targets: Mapping[str, np.ndarray] | None = None,
                    gripper_targets: Mapping[str, float] | None = None) -> None:
        """Set drive targets for the current control step (clamped into the limits; a target outside
        them is flagged for this step). For a harness that steps the physics itself: call this instead
        of setting the robot's targets directly, `physics_step` after each physics step, and
        `end_step` after the last one."""
        if self._step == self._capacity:
            self._grow(2 * self._capacity)
        i, b, robot = self._step, self._buffers, self.world.robot
        joint_targets = joint_targets or {}
        gripper_targets = gripper_targets or {}
        unknown = (set(joint_targets) | set(gripper_targets)) - {ch.name for ch in self._channels}
        if unknown:
            raise ValueError(f"no arm called {sorted(unknown)}; arms: {[ch.name for ch in self._channels]}")
        for ch in self._channels:
            if ch.name in joint_targets:
                wanted = np.asarray(joint_targets[ch.name], dtype=np.float64)
                if wanted.shape != ch.arm_index.shape or not np.all(np.isfinite(wanted)):
                    raise ValueError(f"arm {ch.name!r}: expected {ch.arm_index.size} finite joint targets, got {wanted}")
                clamped, outside = robot.clamp_to_limits(ch.name, wanted)
                robot.set_joint_targets(ch.name, clamped)
                ch.targets[ch.arm_index] = clamped
                b["over_joint"][i, ch.columns] |= outside
            if ch.gripper_column is not None and ch.name in gripper_targets:
                width = float(gripper_targets[ch.name])
                if not math.isfinite(width):
                    raise ValueError(f"arm {ch.name!r}: gripper target {width} is not finite")
                b["over_gripper"][i, ch.gripper_column] |= not 0.0 <= width <= ch.max_width
                applied = robot.set_gripper(ch.name, width)
                ch.targets[ch.finger_index] = ch.finger_signs * applied / 2  # type: ignore[index, operator]

    def physics_step(self) -> None:
        """One physics step of the current control step: gravity compensation, step, contacts."""
        if self._substep >= self.substeps:
            raise RuntimeError(f"a control step has {self.substeps} physics steps; call end_step")
        self.world.robot.apply_gravity_compensation()
        physx = self._physx
        physx.step()
        t = (self._step * self.substeps + self._substep) * self._dt
        self._contacts.observe(physx.get_contacts(), self._step, t, self._substep == self.substeps - 1)
        self._substep += 1

    def end_step(self) -> None:
        """Close the current control step: record the targets it held (a) and the state after it (x)."""
        if self._substep != self.substeps:
            raise RuntimeError(f"control step {self._step} ran {self._substep} physics steps, not {self.substeps}")
        if self._step == self._capacity:
            self._grow(2 * self._capacity)
        i, b = self._step, self._buffers
        for ch in self._channels:
            b["joint_targets"][i, ch.columns] = ch.targets[ch.arm_index]
            if ch.gripper_column is not None:
                b["gripper_targets"][i, ch.gripper_column] = np.sum(ch.targets[ch.finger_index] * ch.finger_signs)  # type: ignore[index]
        self._contacts.end_step(i)
        self._record_state(i)
        self._step += 1
        self._substep = 0

    def step_vector(self, action: np.ndarray) -> None:
        """`step` with one flat vector: the joint targets in `action_space().joints` order, then the
        gripper openings in `action_space().grippers` order."""
        action = np.asarray(action, dtype=np.float64)
        nj = len(self.joints)
        if action.shape != (nj + len(self.grippers),):
            raise ValueError(f"expected an action of {nj + len(self.grippers)} numbers, got shape {action.shape}")
        joints = {ch.name: action[ch.columns] for ch in self._channels}
        grippers = {arm: float(action[nj + c]) for c, arm in enumerate(self.grippers)}
        self.step(joints, grippers)

    def _record_state(self, i: int) -> None:
        b, robot = self._buffers, self.world.robot
        for ch in self._channels:
            art = ch.articulation
            q = np.asarray(art.get_qpos(), dtype=np.float64)  # type: ignore[attr-defined]
            qd = np.asarray(art.get_qvel(), dtype=np.float64)  # type: ignore[attr-defined]
            qf = np.asarray(art.get_qf(), dtype=np.float64)  # type: ignore[attr-defined]
            drive = np.clip(ch.stiffness * (ch.targets - q) - ch.damping * qd, -ch.force_limit, ch.force_limit)
            effort = drive + qf
            b["joint_positions"][i, ch.columns] = q[ch.arm_index]
            b["joint_velocities"][i, ch.columns] = qd[ch.arm_index]
            b["joint_efforts"][i, ch.columns] = effort[ch.arm_index]
            if ch.gripper_column is not None:
                c, fi = ch.gripper_column, ch.finger_index
                b["gripper_openings"][i, c] = float(np.sum(q[fi] * ch.finger_signs))  # type: ignore[index, operator]
                b["finger_velocity"][i, c] = float(np.abs(qd[fi]).max())  # type: ignore[index]
                b["finger_effort"][i, c] = float(np.abs(drive[fi]).max())  # type: ignore[index]
                tcp = robot.ee_pose(ch.name)
                b["end_effectors"][i, c, :3] = tcp.p
                b["end_effectors"][i, c, 3:] = tcp.q
        objects = b["objects"][i]
        for n, (entity, body) in enumerate(self._bodies):
            pose = entity.pose
            objects[n, :3] = pose.p
            objects[n, 3:7] = pose.q
            objects[n, 7:10] = body.linear_velocity
            objects[n, 10:13] = body.angular_velocity
        tracker, span = self._contacts, self.substeps * self.world.timestep
        for n, sid in enumerate(self.scale_ids):
            b["scale_readings"][i, n] = load_grams(tracker.plate_impulse[sid], self.world.objects[sid].entity.pose, span,
                                                   self.world.settings.gravity)
            tracker.plate_impulse[sid][:] = 0.0
        for n, (art, index) in enumerate(self._joint_value_sources):
            b["joint_values"][i, n] = float(art.get_qpos()[index])  # type: ignore[union-attr]

    # --- result ------------------------------------------------------------------------------------
    def finish(self) -> Recording:
        """The recording so far (the recorder may keep stepping; a later `finish` includes more)."""
        n = self._step
        b = {k: v[:n].copy() for k, v in self._buffers.items()}
        return Recording(
            control_hz=self.control_hz, timestep=self.world.timestep, substeps=self.substeps,
            joints=list(self.joints), grippers=list(self.grippers), object_ids=list(self.object_ids),
            scale_ids=list(self.scale_ids), joint_value_names=list(self.joint_value_names),
            joint_targets=b["joint_targets"], gripper_targets=b["gripper_targets"],
            joint_positions=b["joint_positions"], joint_velocities=b["joint_velocities"],
            joint_efforts=b["joint_efforts"], gripper_openings=b["gripper_openings"],
            end_effectors=b["end_effectors"], objects=b["objects"], scale_readings=b["scale_readings"],
            joint_values=b["joint_values"], contacts=self._contacts.events(n - 1),
            occupancy=self._occupancy(b), over_limit=self._over_limit(b))

    def _over_limit(self, b: dict[str, np.ndarray]) -> list[tuple[int, str]]:
        names = self.joints + [f"{arm}.gripper" for arm in self.grippers]
        flags = np.concatenate([b["over_joint"], b["over_gripper"]], axis=1)
        steps, cols = np.nonzero(flags)
        return [(int(s), names[c]) for s, c in zip(steps, cols)]

    def _occupancy(self, b: dict[str, np.ndarray]) -> list[JointOccupancy]:
        lim = self._limits

        def fraction(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
            if values.shape[0] == 0:
                return np.zeros(values.shape[1])
            with np.errstate(divide="ignore", invalid="ignore"):
                out = np.abs(values).max(axis=0) / scale
            return np.where(np.isfinite(scale) & (scale > 0), out, 0.0)

        centre, half = (lim["lower"] + lim["upper"]) / 2, (lim["upper"] - lim["lower"]) / 2
        finite = np.isfinite(centre)
        position = fraction(np.where(finite, b["joint_positions"] - np.where(finite, centre, 0.0), 0.0), half)
        rows = []
        columns = [
            (self.joints, position, fraction(b["joint_velocities"], lim["velocity"]),
             fraction(b["joint_efforts"], lim["effort"]), b["over_joint"]),
        ]
        if self.grippers:
            widths = np.array([ch.max_width for ch in self._channels if ch.gripper_column is not None])
            grip_pos = fraction(b["gripper_openings"] - widths / 2, widths / 2)
            columns.append(([f"{arm}.gripper" for arm in self.grippers], grip_pos,
                            fraction(b["finger_velocity"], lim["finger_velocity"]),
                            fraction(b["finger_effort"], lim["finger_effort"]), b["over_gripper"]))
        for names, pos, vel, eff, over in columns:
            counts = over.sum(axis=0)
            for c, name in enumerate(names):
                first = int(np.argmax(over[:, c])) if counts[c] else None
                rows.append(JointOccupancy(joint=name, max_position_fraction=float(pos[c]),
                                           max_velocity_fraction=float(vel[c]), max_effort_fraction=float(eff[c]),
                                           actions_over_limit=int(counts[c]), first_over_limit_step=first))
        return rows


def merged_contacts(events: list[ContactEvent], group_a: set[str], group_b: set[str]) -> list[tuple[int, int | None]]:
    """(start_step, end_step) of the periods during which any body of `group_a` touches any of
    `group_b`: events between the groups merged where they overlap or abut (end_step None = still
    touching at the end). With `World.body_aliases()` this answers e.g. "how many times did
    `left.gripper` strike `drum.head`"."""
    spans = sorted((e.start_step, e.end_step) for e in events
                   if (e.a in group_a and e.b in group_b) or (e.b in group_a and e.a in group_b))
    merged: list[tuple[int, int | None]] = []
    for start, end in spans:
        if merged:
            last_start, last_end = merged[-1]
            if last_end is None or start <= last_end + 1:
                merged[-1] = (last_start, None if last_end is None or end is None else max(last_end, end))
                continue
        merged.append((start, end))
    return merged


def replay_states(world: World, recording: Recording) -> list[dict[str, dict]]:
    """Per control step, what reproduces the recorded scene in `world` (built from the same G and z)
    without physics: `{"bodies": {object id: (x, y, z, qw, qx, qy, qz)}, "articulations": {name:
    {joint: position}}}` — the mapping `datafarm.sim.render_passes.RenderPasses.apply` takes. Robot
    fingers are set symmetrically from the recorded opening; a drawer from its recorded joint value."""
    robot = world.robot
    columns = {name: i for i, name in enumerate(recording.joints)}
    # (articulation, joint, recording column) of every arm joint
    arm_joints = [(robot.articulation(arm).name, joint, columns[_qualified(arm, joint)])
                  for arm in robot.arms for joint in robot.joint_names(arm)]
    moving = [i for i, oid in enumerate(recording.object_ids) if not world.object(oid).fixed]
    drawers = [(world.object(name.partition(".")[0]).articulation.name, name.partition(".")[2], n)  # type: ignore[union-attr]
               for n, name in enumerate(recording.joint_value_names)]
    states = []
    for i in range(recording.steps):
        articulations: dict[str, dict[str, float]] = {}
        for art, joint, column in arm_joints:
            articulations.setdefault(art, {})[joint] = float(recording.joint_positions[i, column])
        for arm in robot.arms:
            gripper = robot.gripper(arm)
            if gripper is not None:
                width = float(recording.gripper_openings[i, recording.grippers.index(arm)])
                for joint, sign in zip(gripper.joint_names, gripper.signs):
                    articulations[robot.articulation(arm).name][joint] = float(sign) * width / 2
        for art, joint, n in drawers:
            articulations.setdefault(art, {})[joint] = float(recording.joint_values[i, n])
        bodies = {recording.object_ids[k]: tuple(float(v) for v in recording.objects[i, k, :7]) for k in moving}
        states.append({"bodies": bodies, "articulations": articulations})
    return states
