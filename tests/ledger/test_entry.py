"""The ledger entry schema: documented fields, a stable stored form, and a hash over its content."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import BaseModel, ValidationError

from datafarm.artifacts.ledger_entry import GENESIS_HASH, LedgerActor, LedgerCost, LedgerEntry
from datafarm.hashing import sha256_json


def _entry(**overrides) -> LedgerEntry:
    fields = dict(
        seq=0,
        time=datetime(2025, 1, 2, 3, 4, 5, 6000, tzinfo=timezone.utc),
        stage="grounding",
        event="rejection",
        outcome="fail",
        reason="IoU too low",
        route_to="grounding",
        prev_hash=GENESIS_HASH,
    )
    fields.update(overrides)
    return LedgerEntry.sealed(**fields)


@pytest.mark.parametrize("model", [LedgerEntry, LedgerActor, LedgerCost])
def test_every_field_is_documented(model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    props = schema["properties"]
    missing = [name for name, prop in props.items() if not prop.get("description")]
    assert not missing, f"{model.__name__} fields without a docstring: {missing}"


def test_hash_is_sha256_of_canonical_json_without_hash() -> None:
    entry = _entry()
    stored = json.loads(entry.to_line())
    assert stored.pop("hash") == entry.hash == sha256_json(stored)
    assert stored["prev_hash"] == "0" * 64


def test_time_is_utc_iso8601_with_z_and_round_trips() -> None:
    entry = _entry(time=datetime(2025, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2))))
    stored = json.loads(entry.to_line())
    assert stored["time"] == "2025-01-02T03:04:05.000000Z"
    again = LedgerEntry.model_validate(stored)
    assert again == entry and again.to_line() == entry.to_line()


def test_changing_any_field_changes_the_hash() -> None:
    base = _entry()
    for change in (
        {"seq": 1},
        {"reason": "IoU too low!"},
        {"route_to": "contract"},
        {"cost": {"usd": 0.01}},
        {"details": {"iou": 0.4}},
        {"actor": {"role": "harness"}},
    ):
        assert _entry(**change).hash != base.hash, change


@pytest.mark.parametrize(
    "bad",
    [
        {"time": datetime(2025, 1, 1)},  # naive: which timezone?
        {"details": {"score": math.nan}},
        {"cost": {"usd": -1.0}},
        {"inputs": {"clip": "not-a-hash"}},
        {"prev_hash": "0" * 63},
        {"seq": -1},
        {"event": "teleport"},
        {"stage": "nowhere"},
        {"surprise": 1},
    ],
)
def test_invalid_fields_are_refused(bad: dict) -> None:
    with pytest.raises(ValidationError):
        _entry(**bad)
