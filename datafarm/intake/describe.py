"""Describe, in words a user reads, what a field of a pydantic model accepts, and turn pydantic's
error locations (which include union-member tags and dict-key markers) into the user's key path."""

from __future__ import annotations

import enum
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Sequence, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

_NUMBER_WORDS = {int: "integer", float: "number"}


@dataclass
class Target:
    """Where a pydantic error location points, in terms of the user's document and the model."""

    path: list[str | int] = field(default_factory=list)
    """Keys and list indices as they appear in the document (union tags and markers removed)."""
    annotation: Any = None
    """The type expected at `path` (None when `path` names a key the model does not have)."""
    metadata: list[Any] = field(default_factory=list)
    """Constraints attached to that type (annotated_types objects, StringConstraints, ...)."""
    parent_model: type[BaseModel] | None = None
    """The model whose field (or unknown key) the last element of `path` is, when it is one."""
    is_key: bool = False
    """True when the error is about a mapping key itself (pydantic's `[key]` marker)."""

    def dotted(self) -> str:
        """`path` as `a.b[2].c`."""
        out = ""
        for part in self.path:
            if isinstance(part, int):
                out += f"[{part}]"
            else:
                out += f".{part}" if out else str(part)
        return out


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """Strip Annotated and Optional wrappers, collecting Annotated constraints."""
    metadata: list[Any] = []
    while True:
        if get_origin(annotation) is Annotated:
            base, *extra = get_args(annotation)
            for m in extra:
                metadata.extend(m.metadata if isinstance(m, FieldInfo) else [m])
            annotation = base
            continue
        if _is_union(annotation):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) == 1:  # Optional[X]: pydantic adds no location tag for it
                annotation = members[0]
                continue
        return annotation, metadata


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _match_union_tag(members: Sequence[Any], tag: str) -> Any | None:
    """The union member pydantic names `tag` in a location (e.g. `str`, `float`, `Pose`, `literal[...]`)."""
    for member in members:
        base, _ = _unwrap(member)
        name = getattr(base, "__name__", None)
        if name == tag or (name and tag.startswith(name)):
            return member
        if get_origin(base) is Literal and tag.startswith("literal["):
            return member
        if tag.startswith("constrained-") and name and tag.endswith(name):
            return member
    return None


def resolve_location(model: type[BaseModel], loc: Sequence[str | int]) -> Target:
    """Walk pydantic's error `loc` through `model`'s types, keeping only the parts a user wrote."""
    target = Target(annotation=model)
    annotation: Any = model
    parts = list(loc)
    i = 0
    while i < len(parts):
        part = parts[i]
        base, metadata = _unwrap(annotation)
        if _is_model(base):
            if not isinstance(part, str) or part not in base.model_fields:
                # an unknown key (extra_forbidden, or a key YAML read as a number): nothing typed below it
                target.path.append(str(part))
                target.parent_model = base
                target.annotation, target.metadata = None, []
                return target
            info = base.model_fields[part]
            target.path.append(part)
            target.parent_model = base
            annotation = info.annotation
            target.metadata = list(info.metadata)
            base2, meta2 = _unwrap(annotation)
            target.annotation, target.metadata = base2, target.metadata + meta2
            annotation = base2
            i += 1
            continue
        origin = get_origin(base)
        if _is_union(base) and isinstance(part, str):
            member = _match_union_tag(get_args(base), part)
            if member is None:
                return target  # a validator tag we cannot map: stop at the union
            annotation = member
            i += 1
            continue
        if origin in (list, tuple, set, frozenset) and isinstance(part, int):
            args = get_args(base)
            if origin is tuple and args and args[-1] is not Ellipsis:
                item = args[part] if part < len(args) else Any
            else:
                item = args[0] if args else Any
            target.path.append(part)
            target.parent_model = None
            target.annotation, target.metadata = _unwrap(item)
            annotation = item
            i += 1
            continue
        if origin is dict:
            key_type, value_type = get_args(base) or (Any, Any)
            target.path.append(str(part))  # a mapping key, even one YAML read as a number
            target.parent_model = None
            if i + 1 < len(parts) and parts[i + 1] == "[key]":
                target.annotation, target.metadata = _unwrap(key_type)
                target.is_key = True
                return target
            target.annotation, target.metadata = _unwrap(value_type)
            annotation = value_type
            i += 1
            continue
        # a scalar type followed by validator-internal parts (function names, etc.)
        return target
    return target


def _constraints(metadata: Sequence[Any]) -> dict[str, Any]:
    """Collect bound/length/pattern constraints from annotated metadata, whatever object carries them."""
    found: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, FieldInfo):
            found.update(_constraints(m.metadata))
            continue
        for attr in ("gt", "ge", "lt", "le", "min_length", "max_length", "pattern"):
            value = getattr(m, attr, None)
            if value is not None:
                found[attr] = value
    return found


def _bounds(c: dict[str, Any]) -> str:
    parts = [f"{sym} {c[k]}" for k, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")) if k in c]
    return " and ".join(parts)


def _article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def describe(annotation: Any, metadata: Sequence[Any] = ()) -> str:
    """What a value of `annotation` (with constraints `metadata`) looks like, e.g. "an integer >= 1"."""
    base, extra = _unwrap(annotation)
    c = _constraints([*metadata, *extra])
    origin = get_origin(base)

    if base is Any or base is None:
        return "a value"
    if origin is Literal:
        return "one of: " + ", ".join(str(getattr(v, "value", v)) for v in get_args(base))
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return "one of: " + ", ".join(str(m.value) for m in base)
    if base is bool:
        return "true or false"
    if base in _NUMBER_WORDS:
        text = _article(_NUMBER_WORDS[base])
        bounds = _bounds(c)
        return f"{text} {bounds}" if bounds else text
    if base is str:
        text = "a non-empty string" if c.get("min_length", 0) >= 1 else "a string"
        if "pattern" in c:
            text += f" matching {c['pattern'].strip('^$')}"
        return text
    if isinstance(base, type) and issubclass(base, Path):
        return "a path"
    if _is_model(base):
        return "a mapping with keys: " + ", ".join(base.model_fields)
    if _is_union(base):
        members = [a for a in get_args(base) if a is not type(None)]
        return " or ".join(describe(m) for m in members)
    if origin is tuple:
        args = get_args(base)
        if args and args[-1] is not Ellipsis:
            kinds = {describe(a) for a in args}
            if len(kinds) == 1:
                item = _unwrap(args[0])[0]
                if item in _NUMBER_WORDS:
                    return f"a list of {len(args)} {_NUMBER_WORDS[item]}s"
                return f"a list of {len(args)} items, each {kinds.pop()}"
            return f"a list of {len(args)} items: " + ", ".join(describe(a) for a in args)
        return f"a list (each item: {describe(args[0]) if args else 'a value'})"
    if origin in (list, set, frozenset):
        args = get_args(base)
        prefix = "a non-empty list" if c.get("min_length", 0) >= 1 else "a list"
        if c.get("min_length", 0) > 1:
            prefix = f"a list of at least {c['min_length']} items"
        return f"{prefix} (each item: {describe(args[0]) if args else 'a value'})"
    if origin is dict:
        key, value = get_args(base) or (Any, Any)
        return f"a mapping from ({describe(key)}) to ({describe(value)})"
    return _article(getattr(base, "__name__", str(base)))
