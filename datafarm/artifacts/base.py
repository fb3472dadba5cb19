"""The base of every artifact model: unknown fields are an error, and every field is documented by
the docstring written under it (pydantic turns it into the field's JSON Schema description, which is
what the agents read)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Artifact(BaseModel):
    """Base for every artifact and config: extra fields forbidden, field docstrings as descriptions."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        validate_assignment=True,
        populate_by_name=False,
    )
