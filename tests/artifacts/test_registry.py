"""`datafarm schema NAME`'s registry: every name resolves to an Artifact model with a JSON Schema,
every field of every model (nested ones included) is documented, and bad names get a useful error."""

from __future__ import annotations

import json
import types
from typing import Any, Iterator, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.episode import (
    ArmStateRow, ContactEvent, FirstPersonStateRow, JointOccupancy, JointTargetRow, MoveLookRow,
)
from datafarm.artifacts.registry import ALIASES, SCHEMAS, json_schema, resolve, schema_names
from datafarm.errors import InputError

TASK_ARTIFACTS = [
    "grounding", "contract", "sampler", "variation", "expert", "judge", "judge-lock", "judge-verdict",
    "render-contract", "batch", "episode", "admission",
]
"""The task artifacts of DESIGN.md (plus their companions) defined in datafarm/artifacts/."""
ROWS = [JointTargetRow, MoveLookRow, ArmStateRow, FirstPersonStateRow, ContactEvent, JointOccupancy]


def models_below(annotation: Any) -> Iterator[type[BaseModel]]:
    """Every model class mentioned in a type annotation (through Annotated, unions, containers)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    if get_origin(annotation) in (Union, types.UnionType) or get_args(annotation):
        for arg in get_args(annotation):
            yield from models_below(arg)


def all_models(roots: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """`roots` and every model reachable from their fields, each once."""
    seen: list[type[BaseModel]] = []
    stack = list(roots)
    while stack:
        model = stack.pop()
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            stack.extend(models_below(field.annotation))
    return seen


def test_names_and_aliases() -> None:
    assert schema_names() == list(SCHEMAS)
    assert set(TASK_ARTIFACTS) <= set(SCHEMAS)
    assert {"request", "clip", "ledger-entry", "qualification"} <= set(SCHEMAS)
    for letter, name in ALIASES.items():
        assert resolve(letter) is resolve(name)
    assert resolve("G").__name__ == "Grounding" and resolve("R").__name__ == "RenderContract"


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_every_name_has_a_json_schema(name: str) -> None:
    model = resolve(name)
    assert issubclass(model, Artifact)
    schema = json_schema(name)
    assert schema["title"] == model.__name__ and schema["type"] == "object"
    assert schema.get("additionalProperties") is False  # extra fields are forbidden
    json.dumps(schema)  # plain JSON, ready for a prompt


def test_json_schema_shows_the_vocabularies() -> None:
    text = json.dumps(json_schema("judge"))
    for word in ("scale_reading_in_range", "contact_count", "stage_skipped", '"not"'):
        assert word in text
    assert '"drawer_cabinet"' in json.dumps(json_schema("G"))


def test_every_field_of_every_model_is_documented() -> None:
    roots = [resolve(name) for name in SCHEMAS] + ROWS
    models = all_models(roots)
    assert len(models) > 60  # the walk really descends into nested models
    undocumented = [
        f"{model.__name__}.{name}"
        for model in models
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert undocumented == []


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("grunding", "grounding"), ("render_contract", "render-contract"), ("judge-verdit", "judge-verdict"), ("g", "G")],
)
def test_unknown_name_lists_names_and_closest(name: str, suggestion: str) -> None:
    with pytest.raises(InputError) as info:
        resolve(name)
    (problem,) = info.value.problems
    assert problem.message == f"unknown schema '{name}'"
    assert problem.hint == f"did you mean '{suggestion}'?"
    assert all(n in (problem.expected or "") for n in SCHEMAS)
    assert info.value.exit_code == 2


def test_unrelated_name_has_no_hint() -> None:
    with pytest.raises(InputError) as info:
        resolve("xyzzy")
    assert info.value.problems[0].hint is None
