"""Load any artifact model from a YAML (or JSON) file, turning every pydantic error into a Problem
that names the file, the line, the dotted field, what was expected and, for a misspelled key or
value, the closest valid one.

A model's own validator can say what it expected and how to fix it by raising
`pydantic_core.PydanticCustomError(kind, message, {"expected_words": ..., "hint": ...})`; otherwise
`expected` is derived from the field's type and constraints (e.g. "an integer >= 1").
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Iterable, Mapping, TypeVar

from pydantic import BaseModel, ValidationError

from datafarm.errors import InputError, Problem
from datafarm.intake.describe import Target, describe, resolve_location
from datafarm.intake.yaml_source import YamlDocument, read_yaml

M = TypeVar("M", bound=BaseModel)

# Error types whose pydantic message only restates the expectation: for these the Problem says what
# was found, and `expected` says what would be valid.
_RESTATING_TYPES = {
    "int_type", "int_parsing", "int_from_float", "float_type", "float_parsing", "string_type",
    "bool_type", "bool_parsing", "literal_error", "enum", "greater_than", "greater_than_equal",
    "less_than", "less_than_equal", "too_short", "too_long", "string_too_short", "string_too_long",
    "string_pattern_mismatch", "model_type", "model_attributes_type", "dict_type", "list_type",
    "tuple_type", "path_type", "finite_number", "none_required", "string_unicode", "set_type",
}


def show_value(value: Any) -> str:
    """A short, YAML-flavoured rendering of a value a user wrote."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if not value:
            return "an empty string"
        text = value if len(value) <= 60 else value[:57] + "..."
        return repr(text)
    if isinstance(value, Mapping):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, (list, tuple)):
        if not value:
            return "an empty list"
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    return str(value)


def _closest(word: Any, choices: Iterable[str]) -> str | None:
    """`did you mean 'x'?` for the valid choice closest to `word`, if any is close enough."""
    if not isinstance(word, str):
        return None
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def _number_as_text_hint(value: Any) -> str | None:
    """Explain PyYAML's YAML 1.1 rule that `1e6` or `1_0` without a dot/sign is text, not a number."""
    if not isinstance(value, str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return f"YAML reads {value} as text, not a number: write it as {number:.10g} (exponents need a dot and a sign, e.g. 1.5e+6)"


def _choices(target: Target) -> list[str]:
    """The valid spellings at `target` when it is a closed set of names (Literal or Enum)."""
    text = describe(target.annotation, target.metadata)
    if text.startswith("one of: "):
        return [c.strip() for c in text[len("one of: "):].split(",")]
    return []


def _problem(error: Mapping[str, Any], model: type[BaseModel], doc: YamlDocument | None, file: Path | None) -> Problem:
    """One Problem from one pydantic error dict."""
    kind: str = error["type"]
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    loc = tuple(error["loc"])
    if kind == "missing" and loc and isinstance(loc[-1], int):
        # a fixed-length list (tuple) that is too short: report the list, not its absent item
        kind, loc = "too_short", loc[:-1]
    target = resolve_location(model, loc)
    name = target.path[-1] if target.path else None
    line = doc.line_of(target.path, key=kind in ("extra_forbidden", "invalid_key", "missing")) if doc and target.path else None
    if doc and not target.path and doc.root is not None:
        line = doc.root.start_mark.line + 1

    hint = ctx.get("hint")
    if kind in ("extra_forbidden", "invalid_key"):
        valid = list(target.parent_model.model_fields) if target.parent_model else []
        message = f"unknown key '{name}'"
        expected = "one of the keys: " + ", ".join(valid) if valid else "no such key"
        hint = hint or _closest(name, valid)
    elif kind == "missing":
        message = f"required key '{name}' is missing"
        expected = describe(target.annotation, target.metadata)
    else:
        expected = ctx.get("expected_words") or describe(target.annotation, target.metadata)
        if kind in _RESTATING_TYPES:
            message = f"got {show_value(error.get('input'))}"
            if target.is_key:
                message = f"unknown key {show_value(error.get('input'))}"
        else:
            message = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if hint is None and kind in ("literal_error", "enum"):
            hint = _closest(error.get("input"), _choices(target))
        if hint is None and kind in ("int_type", "float_type"):
            hint = _number_as_text_hint(error.get("input"))
    return Problem(message, file=file, line=line, field=target.dotted() or None, expected=expected, hint=hint)


def problems_from_validation_error(
    err: ValidationError, model: type[BaseModel], doc: YamlDocument | None = None, file: Path | None = None
) -> list[Problem]:
    """Every error in `err` as a Problem, located in `doc` when given, sorted by line.

    Errors pydantic reports once per union member for the same value are merged into one.
    """
    file = file if file is not None else (doc.path if doc else None)
    problems: list[Problem] = []
    seen: set[tuple[Any, ...]] = set()
    for error in err.errors(include_url=False):
        problem = _problem(error, model, doc, file)
        ident = (problem.field, problem.line, problem.expected)
        if ident in seen:
            continue
        seen.add(ident)
        problems.append(problem)
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0))


def validate_document(model: type[M], doc: YamlDocument, context: dict[str, Any] | None = None) -> M:
    """Validate a parsed document against `model`; raise InputError listing every problem found."""
    if doc.data is None:
        raise InputError(
            [Problem("the file is empty", file=doc.path, expected=describe(model))]
        )
    if not isinstance(doc.data, dict):
        line = doc.root.start_mark.line + 1 if doc.root is not None else None
        raise InputError(
            [
                Problem(
                    f"the top level must be a mapping of keys, found {show_value(doc.data)}",
                    file=doc.path,
                    line=line,
                    expected=describe(model),
                )
            ]
        )
    try:
        return model.model_validate(doc.data, context=context)
    except ValidationError as err:
        raise InputError(problems_from_validation_error(err, model, doc)) from None


def load_model(model_cls: type[M], path: Path | str, context: dict[str, Any] | None = None) -> M:
    """Read `path` (YAML, or JSON which YAML reads too) into `model_cls`.

    `context` is passed to pydantic validators (`model_validate(..., context=)`). Raises InputError
    with one Problem per defect (file, line, dotted field, what was expected, closest valid key).
    """
    return validate_document(model_cls, read_yaml(Path(path)), context)
