"""B, the batch and dataset config (`batch.yaml`): how many episodes, which seeds the author may
use, retry budgets, and where and how the work runs.

Admission seeds are never stored here: the harness derives them from a per-task secret the author
cannot read; B only says how many there are.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.request import Executor, Renderer, Sandbox
from datafarm.artifacts.stages import Stage

DEFAULT_RETRIES: dict[Stage, int] = {
    Stage.grounding: 2,
    Stage.qualification: 2,
    Stage.contract: 2,
    Stage.judge: 3,
    Stage.expert: 4,
    Stage.rollout: 10,
    Stage.render: 3,
}
"""Default retry budget of every stage a rejection can return to."""


class BatchConfig(Artifact):
    """B (`batch.yaml`): episode count, seeds, retry budgets, workers and backends."""

    n: int = Field(ge=1)
    """Episodes to admit."""
    dev_seeds: list[Annotated[int, Field(ge=0)]] = Field(default_factory=lambda: list(range(5)), min_length=1)
    """Seeds the author may request rollouts on while writing the expert."""
    admission_seed_count: int = Field(ge=1)
    """How many held-out admission seeds the harness derives (at least n; the surplus absorbs rejections)."""
    retries: dict[Stage, int] = Field(default_factory=lambda: dict(DEFAULT_RETRIES))
    """Times a rejection may send work back to each stage before compile stops; for `rollout`, failed admission rollouts tolerated before the expert is revised. Stages left out get the default."""
    dev_pass_rate: FiniteFloat = Field(default=0.8, gt=0, le=1)
    """Share of dev seeds the expert must pass before admission rollouts start."""
    workers: int = Field(default=1, ge=1)
    """Parallel rollout/render workers."""
    executor: Executor = "local"
    """Where episodes run: local process pool or ray."""
    sandbox: Sandbox = "bwrap"
    """Sandbox of the expert controller."""
    renderer: Renderer = "composite"
    """Renderer of the episodes."""

    @model_validator(mode="before")
    @classmethod
    def _no_admission_seeds(cls, data: Any) -> Any:
        if isinstance(data, dict) and "admission_seeds" in data:
            raise PydanticCustomError(
                "admission_seeds_stored",
                "admission seeds must not be written into B",
                {
                    "expected_words": "admission_seed_count (the harness derives the seeds from the task secret)",
                    "hint": "replace admission_seeds with admission_seed_count",
                },
            )
        return data

    @field_validator("retries")
    @classmethod
    def _retry_stages(cls, retries: dict[Stage, int]) -> dict[Stage, int]:
        unknown = sorted(s.value for s in retries if s not in DEFAULT_RETRIES)
        if unknown:
            raise ValueError(
                f"no retry budget for {', '.join(unknown)}: rejections return to {', '.join(s.value for s in DEFAULT_RETRIES)}"
            )
        if any(v < 0 for v in retries.values()):
            raise ValueError("retry budgets are >= 0")
        return {**DEFAULT_RETRIES, **retries}

    @model_validator(mode="after")
    def _counts(self) -> BatchConfig:
        if len(set(self.dev_seeds)) != len(self.dev_seeds):
            raise ValueError("dev_seeds must be unique")
        if self.admission_seed_count < self.n:
            raise ValueError(f"admission_seed_count {self.admission_seed_count} is below n {self.n}")
        return self
