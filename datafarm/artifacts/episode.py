"""The episode record E (`episodes/<id>/episode.json`) and the rows of its columnar data files.

One record serves both tracks: the SAPIEN arm track (action space `joint-targets`) and the Unreal
first-person track (`move-look`: a 6-dim movement/view action with player and camera poses). The
record's `action_space` says which row models its action and state files hold.

Data files are Parquet: actions and states have one row per control step, contacts one row per
contact event, joint occupancy one row per joint. Columns are the row models' fields; a nested model
is a struct column, a list a list column. Frame i of every rendered video is control step i.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, StringConstraints, model_validator

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat, Pose, Vec3
from datafarm.artifacts.fields import Name, tagged_union
from datafarm.artifacts.judge import BodyRef, JudgeVerdict, Seconds, StageTiming
from datafarm.artifacts.ledger_entry import Sha256Hex
from datafarm.artifacts.sampler import Variation


def _inside(path: str) -> str:
    if any(part in (".", "..") for part in path.split("/")):
        raise ValueError(f"{path!r} must stay inside the episode folder (no . or .. parts)")
    return path


EpisodePath = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$"), AfterValidator(_inside)
]
"""A file path relative to the episode folder: `/`-separated names, no leading `/`, no `.` or `..` parts."""
QualifiedJoint = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")]
"""`<arm>.<joint>`, e.g. `left.joint3`."""


# --- rows ---------------------------------------------------------------------------------------------


class ActionRow(Artifact):
    """Columns every action row has."""

    step: int = Field(ge=0)
    """Control step index, from 0 without gaps."""
    time_s: Seconds
    """step / control rate, seconds."""


class JointTargetRow(ActionRow):
    """Arm track action a_t: joint position targets and gripper openings."""

    joint_targets: list[FiniteFloat]
    """Target position per joint, radians, in `action_space.joints` order."""
    gripper_targets: list[FiniteFloat]
    """Target finger opening per gripper, metres between the fingers, in `action_space.grippers` order."""

    def as_vector(self) -> list[float]:
        """The action as one flat vector: joint targets then gripper targets."""
        return [*self.joint_targets, *self.gripper_targets]


class MoveLookRow(ActionRow):
    """UE track action a_t: movement keys held during the step and the view change over it."""

    forward: bool
    """W held."""
    back: bool
    """S held."""
    left: bool
    """A held."""
    right: bool
    """D held."""
    yaw: FiniteFloat
    """View yaw change over the step, radians, positive turning left (about world z)."""
    pitch: FiniteFloat
    """View pitch change over the step, radians, positive looking up."""

    def as_vector(self) -> list[float]:
        """The 6-dim action (forward, back, left, right, yaw, pitch)."""
        return [float(self.forward), float(self.back), float(self.left), float(self.right), self.yaw, self.pitch]


class ObjectState(Artifact):
    """One object's state at one step."""

    id: Name
    """G object id."""
    pose: Pose
    """world_from_object."""
    linear_velocity: Vec3
    """World-frame linear velocity, m/s."""
    angular_velocity: Vec3
    """World-frame angular velocity, rad/s."""


class StateRow(Artifact):
    """Columns every state row has."""

    step: int = Field(ge=0)
    """Control step index (the state after the step's action was applied)."""
    time_s: Seconds
    """step / control rate, seconds."""
    objects: list[ObjectState]
    """Every dynamic object's state, in G order."""


class ArmStateRow(StateRow):
    """Arm track state x_t."""

    joint_positions: list[FiniteFloat]
    """Measured position per joint, radians, in `action_space.joints` order."""
    joint_velocities: list[FiniteFloat]
    """Measured velocity per joint, rad/s, same order."""
    joint_efforts: list[FiniteFloat]
    """Applied effort per joint, N·m, same order."""
    gripper_openings: list[FiniteFloat]
    """Measured finger opening per gripper, metres, in `action_space.grippers` order."""
    end_effectors: list[Pose]
    """world_from_tcp per gripper (tool centre point between the fingertips), same order."""
    scale_readings: dict[Name, FiniteFloat] = Field(default_factory=dict)
    """Scale object id -> measured vertical load on its plate, grams."""
    joint_values: dict[str, FiniteFloat] = Field(default_factory=dict)
    """`<object id>.<joint>` -> position of an articulated object's joint (e.g. `cabinet.drawer`, metres)."""


class FirstPersonStateRow(StateRow):
    """UE track state x_t: the player's and the camera's poses."""

    agent: Pose
    """world_from_agent (player pose; agent x forward, z up)."""
    camera: Pose
    """world_from_camera of the first-person camera (6-DoF, OpenCV frame)."""
    agent_velocity: Vec3
    """World-frame linear velocity of the agent, m/s."""


class ContactEvent(Artifact):
    """k: one contact between two bodies, from first touch to separation."""

    a: BodyRef
    """One body."""
    b: BodyRef
    """The other body."""
    start_step: int = Field(ge=0)
    """First step in contact."""
    end_step: int | None = Field(ge=0)
    """Last step in contact; null when still in contact at the episode's end."""
    start_s: Seconds
    """Time of first contact, seconds."""
    end_s: Seconds | None
    """Time of the last step in contact, seconds; null as for end_step."""
    max_impulse: FiniteFloat = Field(ge=0)
    """Largest contact impulse in one step, N·s."""
    max_penetration: FiniteFloat = Field(default=0.0, ge=0)
    """Deepest interpenetration seen, metres."""


class JointOccupancy(Artifact):
    """How close one joint came to its limits over the episode (1.0 = at the limit)."""

    joint: QualifiedJoint
    """The joint, `<arm>.<joint>`."""
    max_position_fraction: FiniteFloat = Field(ge=0)
    """Largest |q - centre| / half-range of the position limits."""
    max_velocity_fraction: FiniteFloat = Field(ge=0)
    """Largest |velocity| / velocity limit."""
    max_effort_fraction: FiniteFloat = Field(ge=0)
    """Largest |effort| / effort limit."""
    actions_over_limit: int = Field(default=0, ge=0)
    """Steps whose commanded target lay outside the position limits (refused by the harness)."""
    first_over_limit_step: int | None = None
    """First such step; null when none."""


# --- the record ---------------------------------------------------------------------------------------


class JointTargetSpace(Artifact):
    """Arm track: position targets for every arm joint plus a finger opening per gripper."""

    kind: Literal["joint-targets"]
    """Discriminator."""
    joints: list[QualifiedJoint] = Field(min_length=1)
    """Joint order of the action and state vectors, e.g. `left.joint1` .. `right.joint6`."""
    grippers: list[Name] = Field(default_factory=list)
    """Arms with a gripper, in the order of gripper columns."""

    action_row: ClassVar[type[ActionRow]] = JointTargetRow
    state_row: ClassVar[type[StateRow]] = ArmStateRow


class MoveLookSpace(Artifact):
    """UE track: the 6-dim action (W, S, A, D keys; yaw and pitch change)."""

    kind: Literal["move-look"]
    """Discriminator."""
    labeled_from: Literal["measured", "commanded"] = "measured"
    """measured: keys and view change inferred from recorded pose deltas (what the video shows); commanded: what the controller sent."""

    action_row: ClassVar[type[ActionRow]] = MoveLookRow
    state_row: ClassVar[type[StateRow]] = FirstPersonStateRow


ActionSpace = tagged_union("kind", JointTargetSpace, MoveLookSpace)
"""What the action columns mean, chosen by `kind`."""


class EpisodeFiles(Artifact):
    """Where the episode's data files are, relative to the episode folder."""

    actions: EpisodePath = "data/actions.parquet"
    """a: one action row per step."""
    states: EpisodePath = "data/states.parquet"
    """x: one state row per step."""
    contacts: EpisodePath = "contacts.parquet"
    """k: one ContactEvent row per contact."""
    joint_occupancy: EpisodePath | None = "data/joint_occupancy.parquet"
    """One JointOccupancy row per joint; null on the UE track."""


class EpisodeRecord(Artifact):
    """E (`episodes/<id>/episode.json`): one continuous execution and where its data is."""

    episode_id: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$")]
    """Episode id, also its folder name."""
    backend: Literal["sapien", "unreal"]
    """Simulator that ran it."""
    robot: Literal["piper", "piper-dual", "urdf", "ue-character"]
    """G's robot kind."""
    action_space: ActionSpace
    """What the action and state columns are."""
    control_hz: FiniteFloat = Field(gt=0)
    """Control rate, steps per second."""
    steps: int = Field(ge=1)
    """Number of control steps (rows in the action and state files)."""
    variation: Variation
    """z: what the sampler drew (seed included)."""
    files: EpisodeFiles = Field(default_factory=EpisodeFiles)
    """The data files."""
    verdict: JudgeVerdict
    """J's verdict on the trajectory; its stage timings are the task labels y."""
    expert_sha256: Sha256Hex
    """Hash of the controller that produced it."""

    @model_validator(mode="after")
    def _consistent(self) -> EpisodeRecord:
        arm = self.action_space.kind == "joint-targets"
        if arm and self.files.joint_occupancy is None:
            raise ValueError("a joint-targets episode records joint occupancy")
        if (self.robot == "ue-character") == arm:
            raise ValueError(f"robot {self.robot} does not use action space {self.action_space.kind}")
        return self

    @property
    def labels(self) -> list[StageTiming]:
        """y: per-stage start and end times."""
        return self.verdict.stages
