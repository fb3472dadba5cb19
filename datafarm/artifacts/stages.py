"""The compiler's stages (DESIGN.md, "The compiler: stages and their checkers"), in pipeline order.

`request` and `resume` are bookkeeping stages: validating the request and continuing a killed run.
A rejection routes back to one of the numbered stages.
"""

from __future__ import annotations

from enum import Enum


class Stage(str, Enum):
    """A stage of compilation; the value is what the ledger and task folder use."""

    request = "request"
    grounding = "grounding"
    qualification = "qualification"
    contract = "contract"
    judge = "judge"
    expert = "expert"
    rollout = "rollout"
    render = "render"
    verify = "verify"
    review = "review"
    admit = "admit"
    audit = "audit"
    resume = "resume"


PIPELINE: tuple[Stage, ...] = (
    Stage.grounding,
    Stage.qualification,
    Stage.contract,
    Stage.judge,
    Stage.expert,
    Stage.rollout,
    Stage.render,
    Stage.verify,
    Stage.review,
    Stage.admit,
)
"""The ten stages of DESIGN.md in the order compile runs them."""
