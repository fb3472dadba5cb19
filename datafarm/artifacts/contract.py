"""T, the task contract (`contract.yaml`): what the task is, as ordered stages with completion
conditions in the judge's predicate vocabulary, the success condition and the forbidden shortcuts.

The judge-writer turns T (with G) into J; `judge_gaps` lists what a J leaves out of its T.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.fields import Name, require_unique
from datafarm.artifacts.judge import ARM_SHORTCUTS, Condition, JudgeSpec, Seconds, Shortcut


class TaskStage(Artifact):
    """One stage of the task, in words and as a condition."""

    name: Name
    """Stage name, e.g. `open_drawer`; the task labels y use it."""
    description: str = Field(min_length=1)
    """What happens in this stage, in one sentence."""
    done_when: Condition
    """Completion condition, in the judge's predicate vocabulary."""
    hold_s: Seconds = 0.0
    """How long `done_when` must hold continuously to complete the stage, seconds."""
    time_limit_s: FiniteFloat | None = Field(default=None, gt=0)
    """Most time the stage may take from its start, seconds; null for none."""


class SuccessCondition(Artifact):
    """The task's success condition (the final state) and how long it must hold."""

    description: str = Field(min_length=1)
    """The success condition in words, e.g. `block inside the drawer and the drawer closed`."""
    condition: Condition
    """The same, in the predicate vocabulary."""
    hold_s: FiniteFloat = Field(gt=0)
    """How long it must hold at the end of the episode, seconds."""


class TaskContract(Artifact):
    """T (`contract.yaml`): stages, completion conditions, success and forbidden shortcuts."""

    task: str = Field(min_length=1)
    """The request's task text, verbatim."""
    family: Name
    """Task family from K's skill library, e.g. `place_in`, `nest`, `place_on_scale`, `drawer_put_inside`, `strike_drum`, `reach`."""
    roles: dict[Name, Name] = Field(min_length=1)
    """Role -> G object id playing it, e.g. `{item: red_block, container: cabinet}`."""
    stages: list[TaskStage] = Field(min_length=1)
    """The stages, in the order they must complete."""
    success: SuccessCondition
    """What success means."""
    forbidden: list[Shortcut] = Field(default_factory=lambda: list(ARM_SHORTCUTS))
    """Forbidden shortcuts the judge must enforce."""
    time_limit_s: FiniteFloat = Field(gt=0)
    """Longest episode, seconds."""
    control_hz: FiniteFloat = Field(gt=0)
    """Control rate: action steps per second."""

    @model_validator(mode="after")
    def _unique_names(self) -> TaskContract:
        require_unique([s.name for s in self.stages], "stage names")
        require_unique(list(self.forbidden), "forbidden shortcuts")
        require_unique(list(self.roles.values()), "objects across roles (one role per object)")
        return self


def judge_gaps(contract: TaskContract, judge: JudgeSpec) -> list[str]:
    """What `judge` fails to formalize of `contract`, one line each; empty when it covers all of it.

    The judge must have the contract's stages by name and in order, an invariant for every forbidden
    shortcut, and demand success for at least the contract's hold time."""
    gaps: list[str] = []
    want, have = [s.name for s in contract.stages], [s.name for s in judge.stages]
    if want != have:
        gaps.append(f"judge stages {have} differ from the contract's {want}")
    invariants = {i.shortcut: i for i in judge.invariants}
    for shortcut in contract.forbidden:
        if shortcut not in invariants:
            gaps.append(f"no invariant enforces forbidden shortcut {shortcut!r}")
    brief = invariants.get("success_too_brief")
    if brief is not None and brief.min_hold_s < contract.success.hold_s:  # type: ignore[union-attr]
        gaps.append(
            f"success_too_brief min_hold_s {brief.min_hold_s} is below the contract's hold {contract.success.hold_s}"  # type: ignore[union-attr]
        )
    if judge.time_limit_s > contract.time_limit_s:
        gaps.append(f"judge time limit {judge.time_limit_s} s exceeds the contract's {contract.time_limit_s} s")
    return gaps
