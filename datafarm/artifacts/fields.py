"""Field types and helpers shared by the task artifacts (G, T, S, C, J, R, B, episodes, q)."""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Union, get_args

from pydantic import BeforeValidator, Discriminator, Field, StringConstraints, Tag
from pydantic_core import PydanticCustomError

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat

Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
"""A snake_case identifier (object ids, arm names, roles, stage names)."""

Unit = Annotated[FiniteFloat, Field(ge=0.0, le=1.0)]
Rgb = tuple[Unit, Unit, Unit]
"""An sRGB colour, each channel in [0, 1]."""


def require_unique(names: list[str], what: str) -> None:
    """Raise ValueError naming the repeated entries of `names` (`what` says what they are)."""
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{what} must be unique, repeated: {', '.join(repeated)}")


def tagged_union(field: str, *members: type[Artifact]) -> Any:
    """A union of models told apart by their Literal `field` (e.g. `kind`).

    Unlike `Field(discriminator=...)`, the union's internal tags are the class names, so error
    locations map back to the document's keys (datafarm.intake), and an unknown or missing `field`
    gets an error listing the valid values and the closest one."""
    by_value: dict[str, type[Artifact]] = {get_args(m.model_fields[field].annotation)[0]: m for m in members}
    valid = ", ".join(by_value)

    def tag(value: Any) -> str | None:
        if isinstance(value, dict):
            member = by_value.get(value.get(field))  # type: ignore[arg-type]
            return member.__name__ if member else None
        return type(value).__name__ if isinstance(value, members) else None

    def check(value: Any) -> Any:
        if tag(value) is not None:
            return value
        if not isinstance(value, dict):
            raise PydanticCustomError(
                "mapping_type", "expected a mapping", {"expected_words": f"a mapping with `{field}`: one of {valid}"}
            )
        if field not in value:
            raise PydanticCustomError(
                "tag_missing", "required key '{field}' is missing", {"field": field, "expected_words": f"one of: {valid}"}
            )
        got = str(value[field])
        ctx: dict[str, Any] = {"field": field, "got": got, "expected_words": f"one of: {valid}"}
        close = difflib.get_close_matches(got, list(by_value), n=1)
        if close:
            ctx["hint"] = f"did you mean '{close[0]}'?"
        raise PydanticCustomError("tag_unknown", "unknown {field} '{got}'", ctx)

    return Annotated[
        Union[tuple(Annotated[m, Tag(m.__name__)] for m in members)],  # type: ignore[valid-type]
        Discriminator(tag),
        BeforeValidator(check),
    ]
