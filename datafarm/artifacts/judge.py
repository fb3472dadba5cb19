"""J, the judge: a declarative spec (`judge/spec.json`) evaluated by the harness over a recorded
trajectory, its lock (`judge/lock.json`), and the verdict it returns.

The predicate vocabulary below is the one K implements; the contract T uses the same conditions.
A condition is either one predicate, `{predicate: NAME, ...arguments}`, or a composition
`{all: [...]}`, `{any: [...]}`, `{not: ...}`.

Body references (`BodyRef`) name an object by its G id, a part of it as `<id>.<part>` (e.g.
`cabinet.drawer`, `drum.head`, `scale.plate`), an arm by name (`left`, `right`, `arm`), an arm's
gripper as `<arm>.gripper`, `robot` for any robot link, `table`, or `agent` on the UE track.
Every predicate is evaluated per control step on the recorded states; a stage completes once its
condition has held continuously for the stage's `hold_s`.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import (
    AwareDatetime, BeforeValidator, ConfigDict, Discriminator, Field, StringConstraints, Tag, model_validator,
)
from pydantic_core import PydanticCustomError

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.fields import Name, require_unique, tagged_union
from datafarm.artifacts.ledger_entry import Sha256Hex
from datafarm.hashing import sha256_json

BodyRef = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?$")]
"""An object id, `<id>.<part>`, an arm, `<arm>.gripper`, `robot`, `table` or `agent`."""

Seconds = Annotated[FiniteFloat, Field(ge=0)]
Metres = Annotated[FiniteFloat, Field(ge=0)]
Compare = Literal["<", "<=", ">", ">="]


# --- predicates ---------------------------------------------------------------------------------------


class Inside(Artifact):
    """`object` lies within the interior of `container` (a cup's cavity, a drawer's box), shrunk by `margin`."""

    predicate: Literal["inside"]
    """Predicate name."""
    object: BodyRef
    """The contained body."""
    container: BodyRef
    """The containing body (e.g. `big_cup`, `cabinet.drawer`)."""
    margin: Metres = 0.0
    """How far inside the interior walls the object's bounding box must stay, metres."""


class On(Artifact):
    """`object` rests on the top surface of `support`: in contact with it and above it."""

    predicate: Literal["on"]
    """Predicate name."""
    object: BodyRef
    """The supported body."""
    support: BodyRef
    """The supporting body (e.g. `scale.plate`, `table`)."""


class Above(Artifact):
    """The bottom of `object` is between `min_height` and `max_height` above the top of `target`."""

    predicate: Literal["above"]
    """Predicate name."""
    object: BodyRef
    """The upper body."""
    target: BodyRef
    """The lower body."""
    min_height: FiniteFloat = 0.0
    """Least clearance, metres."""
    max_height: FiniteFloat | None = None
    """Greatest clearance, metres; null for no bound."""


class Grasped(Artifact):
    """`object` is held between the fingers of a gripper of `by`."""

    predicate: Literal["grasped"]
    """Predicate name."""
    object: BodyRef
    """The held body."""
    by: BodyRef = "robot"
    """Who holds it: an arm name, or `robot` for any arm."""


class ContactCount(Artifact):
    """The number of distinct contact events between `a` and `b` that began in the window is within bounds."""

    predicate: Literal["contact_count"]
    """Predicate name."""
    a: BodyRef
    """One body (e.g. `drum.head`)."""
    b: BodyRef
    """The other body (e.g. `robot`, `stick`)."""
    at_least: int = Field(default=1, ge=0)
    """Fewest events."""
    at_most: int | None = Field(default=None, ge=0)
    """Most events; null for no bound."""
    window_s: Seconds | None = None
    """Count events that began in the last `window_s` seconds; null counts since the stage began."""


class JointValue(Artifact):
    """A joint's position compared with a value (e.g. a drawer's opening, an arm joint's angle)."""

    predicate: Literal["joint_value"]
    """Predicate name."""
    body: BodyRef
    """The articulated object or arm."""
    joint: Name
    """Joint name (`drawer` for a drawer cabinet; `joint1`..`joint6` for a PiPER arm)."""
    compare: Compare
    """Comparison: joint value <compare> value."""
    value: FiniteFloat
    """Metres for prismatic joints, radians for revolute ones."""


class Upright(Artifact):
    """`object`'s z axis is within `max_tilt` of world z."""

    predicate: Literal["upright"]
    """Predicate name."""
    object: BodyRef
    """The body."""
    max_tilt: FiniteFloat = Field(default=0.2, gt=0)
    """Largest tilt, radians."""


class StableFor(Artifact):
    """`object` has moved slower than `max_speed` for the last `duration_s` seconds."""

    predicate: Literal["stable_for"]
    """Predicate name."""
    object: BodyRef
    """The body."""
    duration_s: Seconds
    """How long it must have been still."""
    max_speed: Metres = 0.01
    """Linear speed counted as still, m/s."""


class SpeedBelow(Artifact):
    """`object`'s linear speed is below `max_speed` now."""

    predicate: Literal["speed_below"]
    """Predicate name."""
    object: BodyRef
    """The body."""
    max_speed: FiniteFloat = Field(gt=0)
    """Speed bound, m/s."""


class ScaleReadingInRange(Artifact):
    """The reading of scale `scale` is within [min_g, max_g]."""

    predicate: Literal["scale_reading_in_range"]
    """Predicate name."""
    scale: BodyRef
    """The scale object's id."""
    min_g: FiniteFloat
    """Lowest reading, grams."""
    max_g: FiniteFloat
    """Highest reading, grams."""


class Near(Artifact):
    """The origins of `a` and `b` are within `max_distance` (UE: reach, follow)."""

    predicate: Literal["near"]
    """Predicate name."""
    a: BodyRef
    """One body (e.g. `agent`)."""
    b: BodyRef
    """The other body."""
    max_distance: FiniteFloat = Field(gt=0)
    """Distance bound, metres."""


class Facing(Artifact):
    """`target` is within `max_angle` of `viewer`'s forward axis (UE: look at)."""

    predicate: Literal["facing"]
    """Predicate name."""
    viewer: BodyRef
    """The looking body or camera name (e.g. `agent`)."""
    target: BodyRef
    """The body looked at."""
    max_angle: FiniteFloat = Field(gt=0)
    """Angle bound, radians."""


class AllOf(Artifact):
    """True when every listed condition is true."""

    all: list[Condition] = Field(min_length=1)
    """The conditions."""


class AnyOf(Artifact):
    """True when at least one listed condition is true."""

    any: list[Condition] = Field(min_length=1)
    """The conditions."""


class NotOf(Artifact):
    """True when the condition is false."""

    model_config = ConfigDict(serialize_by_alias=True)

    not_: Condition = Field(alias="not")
    """The negated condition (written `not:`)."""


PREDICATES: dict[str, type[Artifact]] = {
    get_args(cls.model_fields["predicate"].annotation)[0]: cls
    for cls in (
        Inside, On, Above, Grasped, ContactCount, JointValue, Upright, StableFor, SpeedBelow,
        ScaleReadingInRange, Near, Facing,
    )
}
"""The predicate vocabulary: name -> argument model."""
_COMBINATORS: dict[str, type[Artifact]] = {"all": AllOf, "any": AnyOf, "not": NotOf}
_EXPECTED = (
    "{predicate: NAME, ...arguments} with NAME one of: " + ", ".join(PREDICATES)
    + "; or {all: [...]}, {any: [...]}, {not: ...}"
)


def _condition_class(value: Any) -> str | None:
    """The class name of the condition `value` is (the union's tag), or None when it is none."""
    if isinstance(value, dict):
        for key, cls in _COMBINATORS.items():
            if key in value:
                return cls.__name__
        cls = PREDICATES.get(value.get("predicate"))  # type: ignore[arg-type]
        return cls.__name__ if cls else None
    return type(value).__name__ if isinstance(value, Artifact) else None


def _check_shape(value: Any) -> Any:
    """Reject a condition with an unknown predicate or shape, naming the closest predicate."""
    if _condition_class(value) is not None:
        return value
    name = value.get("predicate") if isinstance(value, dict) else None
    if name is None:
        raise PydanticCustomError("condition_shape", "not a condition", {"expected_words": _EXPECTED})
    close = difflib.get_close_matches(str(name), list(PREDICATES), n=1)
    ctx = {"name": str(name), "expected_words": "a predicate of the vocabulary: " + ", ".join(PREDICATES)}
    if close:
        ctx["hint"] = f"did you mean '{close[0]}'?"
    raise PydanticCustomError("predicate_unknown", "unknown predicate '{name}'", ctx)


# Union tags are class names so that error locations map back to the document's keys.
Condition = Annotated[
    Union[tuple(Annotated[c, Tag(c.__name__)] for c in (*PREDICATES.values(), *_COMBINATORS.values()))],  # type: ignore[misc]
    Discriminator(_condition_class),
    BeforeValidator(_check_shape),
]
"""A predicate or an all/any/not composition of conditions."""

for _cls in _COMBINATORS.values():
    _cls.model_rebuild()


# --- forbidden shortcuts ------------------------------------------------------------------------------

Shortcut = Literal[
    "teleport", "penetration", "joint_limit", "velocity_limit", "episode_gap", "success_too_brief",
    "stage_skipped", "stuck",
]
"""Forbidden shortcuts a contract lists and a judge enforces as global invariants."""

ARM_SHORTCUTS: tuple[Shortcut, ...] = (
    "teleport", "penetration", "joint_limit", "velocity_limit", "episode_gap", "success_too_brief", "stage_skipped",
)
"""The shortcuts every arm task forbids (the default of a contract)."""


class Teleport(Artifact):
    """An object moved without touching the robot or another moving object."""

    shortcut: Literal["teleport"]
    """Shortcut name."""
    max_displacement: Metres = 0.005
    """Largest displacement per step allowed without such a contact, metres."""


class Penetration(Artifact):
    """Two bodies interpenetrated (an object pushed through another; walking through a wall)."""

    shortcut: Literal["penetration"]
    """Shortcut name."""
    max_depth: Metres = 0.005
    """Deepest penetration allowed, metres."""


class JointLimit(Artifact):
    """A joint went beyond its position limits."""

    shortcut: Literal["joint_limit"]
    """Shortcut name."""
    max_fraction: FiniteFloat = Field(default=1.0, gt=0, le=1)
    """Largest position occupancy allowed (1.0 = at the limit); see JointOccupancy."""


class VelocityLimit(Artifact):
    """A joint moved faster than its velocity limit."""

    shortcut: Literal["velocity_limit"]
    """Shortcut name."""
    max_fraction: FiniteFloat = Field(default=1.0, gt=0, le=1)
    """Largest velocity occupancy allowed (1.0 = at the limit)."""


class EpisodeGap(Artifact):
    """The recording has a gap or restart: steps missing, repeated, or time going backwards."""

    shortcut: Literal["episode_gap"]
    """Shortcut name."""
    tolerance_s: Seconds = 1e-6
    """Allowed deviation of each step's time from step / control rate, seconds."""


class SuccessTooBrief(Artifact):
    """The success condition held for less than `min_hold_s` at the end of the episode."""

    shortcut: Literal["success_too_brief"]
    """Shortcut name."""
    min_hold_s: FiniteFloat = Field(gt=0)
    """How long success must hold continuously, seconds."""


class StageSkipped(Artifact):
    """A later stage's condition held before an earlier stage had completed."""

    shortcut: Literal["stage_skipped"]
    """Shortcut name."""


class Stuck(Artifact):
    """UE track: the agent's pose stayed frozen while it was commanded to move."""

    shortcut: Literal["stuck"]
    """Shortcut name."""
    max_still_s: FiniteFloat = Field(default=1.0, gt=0)
    """Longest commanded-but-frozen stretch allowed, seconds."""


Invariant = tagged_union(
    "shortcut", Teleport, Penetration, JointLimit, VelocityLimit, EpisodeGap, SuccessTooBrief, StageSkipped, Stuck
)
"""A global invariant enforcing one forbidden shortcut with its thresholds."""


# --- spec and lock ------------------------------------------------------------------------------------


class JudgeStage(Artifact):
    """One ordered stage and its completion condition."""

    name: Name
    """Stage name (as in the contract); the verdict's labels use it."""
    condition: Condition
    """Completes the stage once it has held for `hold_s`."""
    hold_s: Seconds = 0.0
    """How long the condition must hold continuously, seconds."""
    time_limit_s: FiniteFloat | None = Field(default=None, gt=0)
    """Most time the stage may take from its start, seconds; null for none."""


class JudgeSpec(Artifact):
    """J (`judge/spec.json`): ordered stages, the final success condition, and global invariants."""

    stages: list[JudgeStage] = Field(min_length=1)
    """The stages, in the order they must complete."""
    success: Condition
    """Must hold at the end of the episode, after the last stage (for as long as `success_too_brief` demands)."""
    invariants: list[Invariant] = Field(min_length=1)
    """Forbidden shortcuts with thresholds; any violation fails the episode."""
    time_limit_s: FiniteFloat = Field(gt=0)
    """Longest episode, seconds."""

    @model_validator(mode="after")
    def _unique_names(self) -> JudgeSpec:
        require_unique([s.name for s in self.stages], "stage names")
        require_unique([i.shortcut for i in self.invariants], "invariants (one per shortcut)")
        return self

    def sha256(self) -> str:
        """Content hash of the spec (canonical JSON); what the lock and the ledger record."""
        return sha256_json(self.model_dump(mode="json", by_alias=True))


class JudgeLock(Artifact):
    """`judge/lock.json`: J frozen before the expert is written; the harness refuses any other J."""

    spec_sha256: Sha256Hex
    """`JudgeSpec.sha256()` of the frozen spec."""
    contract_sha256: Sha256Hex
    """Hash of the contract T the spec was written from."""
    grounding_sha256: Sha256Hex
    """Hash of the grounding G the spec was written from."""
    frozen_at: AwareDatetime
    """When it was frozen."""
    ledger_seq: int = Field(ge=0)
    """Sequence number of the ledger entry that recorded the freeze."""


# --- verdicts -----------------------------------------------------------------------------------------


class VerdictSummary(Artifact):
    """What the author may learn of a dev-seed rollout: pass/fail, how far it got, why."""

    passed: bool
    """True when every stage completed, success held and no invariant was violated."""
    stage_reached: Name
    """Name of the furthest stage entered (the last one when passed)."""
    reason: str
    """Why it failed, or a one-line summary when it passed."""


class StageTiming(Artifact):
    """When a stage ran: a task label y."""

    name: Name
    """Stage name."""
    start_s: Seconds
    """When the stage began (the previous stage's end, or 0), seconds from episode start."""
    end_s: Seconds | None
    """When it completed, seconds; null when it did not."""


class Violation(Artifact):
    """An invariant that fired."""

    shortcut: Shortcut
    """Which forbidden shortcut."""
    time_s: Seconds
    """When, seconds from episode start."""
    detail: str
    """What was seen (bodies, measured value vs threshold)."""


class JudgeVerdict(VerdictSummary):
    """The full verdict of J on one trajectory (harness, admission and audit only)."""

    stages: list[StageTiming]
    """Timing of every stage entered, in order: the episode's task labels y."""
    violations: list[Violation] = Field(default_factory=list)
    """Invariants that fired."""
    judge_sha256: Sha256Hex
    """Hash of the J that judged."""

    @model_validator(mode="after")
    def _consistent(self) -> JudgeVerdict:
        if self.passed and (self.violations or any(s.end_s is None for s in self.stages)):
            raise ValueError("a passing verdict has every stage completed and no violations")
        return self

    def summary(self) -> VerdictSummary:
        """The part the author may see."""
        return VerdictSummary(passed=self.passed, stage_reached=self.stage_reached, reason=self.reason)
