"""One entry of the ledger L: an attempt or outcome, hash-chained to the entry before it.

An entry is stored as one line of canonical JSON (sorted keys, no whitespace, UTF-8; see
`datafarm.hashing.canonical_json`). Its `hash` is the sha256 of the canonical JSON of the entry
without `hash`, and `prev_hash` is the `hash` of the entry before it, so editing, removing or
reordering any entry breaks the chain. Because the stored line must be exactly the canonical
encoding, even an edit that leaves the parsed values unchanged (e.g. `1e-05` -> `1E-05`) is caught.
"""

from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum
from typing import Annotated, Any

from pydantic import Field, JsonValue, field_serializer, field_validator

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.stages import Stage
from datafarm.hashing import canonical_json, sha256_json

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
"""A lowercase hex sha256 digest."""

GENESIS_HASH = "0" * 64
"""The `prev_hash` of the first entry (seq 0): there is no entry before it."""

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
"""How `time` is written: UTC, ISO-8601, microseconds, 'Z' suffix (one spelling, so hashes are stable)."""


class LedgerEvent(str, Enum):
    """What happened; the value is what the ledger stores."""

    stage_started = "stage_started"
    stage_finished = "stage_finished"
    stage_not_implemented = "stage_not_implemented"
    llm_call = "llm_call"
    rollout = "rollout"
    render = "render"
    check = "check"
    review = "review"
    admission = "admission"
    rejection = "rejection"
    route = "route"
    resume = "resume"
    repair = "repair"
    freeze = "freeze"
    note = "note"


class LedgerOutcome(str, Enum):
    """How the event ended: `info` for events that neither pass nor fail (notes, stage starts)."""

    ok = "ok"
    fail = "fail"
    skipped = "skipped"
    info = "info"
    error = "error"


class LedgerActor(Artifact):
    """Who acted: a role, and for LLM roles the provider and model that answered."""

    role: str = Field(min_length=1)
    """The acting role, e.g. `harness`, `author`, `judge-writer`, `reviewer`, `verifier`, `cli`."""
    provider: str | None = None
    """LLM provider (`builtin`, `openai`, `anthropic`), or null for non-LLM actors."""
    model: str | None = None
    """Model name as the provider spells it, or null for non-LLM actors."""

    def label(self) -> str:
        """Short human form: `role` or `role (provider/model)`."""
        if self.provider or self.model:
            return f"{self.role} ({self.provider or '?'}/{self.model or '?'})"
        return self.role


class LedgerCost(Artifact):
    """What the event cost; zero for events that call no model."""

    input_tokens: int = Field(default=0, ge=0)
    """Prompt tokens billed."""
    output_tokens: int = Field(default=0, ge=0)
    """Completion tokens billed."""
    usd: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    """Price in US dollars, from the capability layer's price table."""

    def is_zero(self) -> bool:
        """True when nothing was spent."""
        return self.input_tokens == 0 and self.output_tokens == 0 and self.usd == 0.0


Actor = LedgerActor
"""Short alias of `LedgerActor`."""
Outcome = LedgerOutcome
"""Short alias of `LedgerOutcome`."""
Cost = LedgerCost
"""Short alias of `LedgerCost`."""


class LedgerEntry(Artifact):
    """One line of the ledger L: an attempt or an outcome, chained to the previous entry by hash."""

    seq: int = Field(ge=0)
    """Sequence number: 0 for the first entry, then +1 per entry with no gaps."""
    time: datetime
    """When the entry was appended, UTC, written as ISO-8601 with microseconds and a 'Z' suffix."""
    stage: Stage
    """The compiler stage the event belongs to."""
    event: LedgerEvent
    """What happened."""
    actor: LedgerActor | None = None
    """Who acted (role, provider, model), or null when no particular actor applies."""
    inputs: dict[str, Sha256Hex] = Field(default_factory=dict)
    """What the event read: name -> sha256 hex of its content (file, folder tree or canonical JSON)."""
    outputs: dict[str, Sha256Hex] = Field(default_factory=dict)
    """What the event produced: name -> sha256 hex of its content."""
    outcome: LedgerOutcome
    """How the event ended."""
    reason: str = ""
    """Why, in plain words (empty when there is nothing to explain)."""
    route_to: Stage | None = None
    """For a rejection: the earliest responsible stage the work returns to; null otherwise."""
    cost: LedgerCost = Field(default_factory=LedgerCost)
    """Tokens and dollars the event spent, charged to `stage`."""
    details: dict[str, JsonValue] = Field(default_factory=dict)
    """Event-specific data (JSON values only, finite numbers), e.g. a seed, a check's score, a file name."""
    prev_hash: Sha256Hex
    """`hash` of the previous entry; 64 zeros for seq 0."""
    hash: Sha256Hex
    """sha256 of the canonical JSON of this entry without `hash`."""

    @field_validator("time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("time must carry a timezone (UTC, written with a 'Z' suffix)")
        return value.astimezone(timezone.utc)

    @field_serializer("time")
    def _write_time(self, value: datetime) -> str:
        return value.astimezone(timezone.utc).strftime(TIME_FORMAT)

    @field_validator("details")
    @classmethod
    def _encodable(cls, value: dict[str, Any]) -> dict[str, Any]:
        # NaN/Infinity are not JSON; refusing them here keeps every entry hashable and parseable.
        try:
            canonical_json(value)
        except ValueError as e:
            raise ValueError(f"details must be plain JSON with finite numbers: {e}") from None
        return value

    @classmethod
    def sealed(cls, **fields: Any) -> LedgerEntry:
        """Build an entry from every field but `hash`, and set `hash` to its content hash."""
        entry = cls(hash=GENESIS_HASH, **fields)
        entry.hash = entry.content_hash()
        return entry

    def content_hash(self) -> str:
        """sha256 of the canonical JSON of this entry without `hash` (what `hash` must equal)."""
        return sha256_json(self.model_dump(mode="json", exclude={"hash"}))

    def to_line(self) -> bytes:
        """The entry as stored: canonical JSON plus a newline."""
        return canonical_json(self.model_dump(mode="json")) + b"\n"
