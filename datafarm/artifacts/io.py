"""Read and write artifacts as task-folder files: YAML for `.yaml`/`.yml`, JSON for `.json`.

Loading reports every defect as an `InputError` naming the file, line, dotted field, what was
expected and the closest valid key (through `datafarm.intake.load`). Saving is atomic (a temporary
file renamed into place), so a crash never leaves a half-written artifact.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import TypeVar

import yaml

from datafarm.artifacts.base import Artifact
from datafarm.errors import InputError, Problem
from datafarm.intake.load import load_model, validate_document
from datafarm.intake.yaml_source import YamlDocument, read_yaml

A = TypeVar("A", bound=Artifact)

YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)


def _format(path: Path) -> str:
    """`yaml` or `json` from the suffix; InputError for anything else."""
    suffix = path.suffix.lower()
    if suffix in YAML_SUFFIXES:
        return "yaml"
    if suffix in JSON_SUFFIXES:
        return "json"
    raise InputError(
        [Problem(f"unsupported file type {suffix or '(none)'}", file=path, expected="a .yaml, .yml or .json file")]
    )


def load_artifact(model: type[A], path: Path | str) -> A:
    """Read `path` into `model`, choosing YAML or JSON by suffix; InputError on any defect."""
    path = Path(path)
    if _format(path) == "yaml":
        return load_model(model, path)
    if not path.is_file():
        raise InputError([Problem("file not found", file=path)])
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(
            [Problem(f"JSON syntax error: {err.msg}", file=path, line=err.lineno, column=err.colno, expected="valid JSON")]
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError([Problem(f"cannot read: {err}", file=path)]) from None
    # JSON is parsed as JSON (YAML 1.1 would read `1e-05` as a string); the YAML node tree only
    # serves to put line numbers on validation errors.
    try:
        root = read_yaml(path).root
    except InputError:
        root = None
    return validate_document(model, YamlDocument(path=path, data=data, root=root))


def dump_artifact(obj: Artifact, fmt: str) -> str:
    """`obj` as YAML or JSON text (`fmt` is `yaml` or `json`), field order kept, aliases used."""
    data = obj.model_dump(mode="json", by_alias=True)
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def save_artifact(obj: Artifact, path: Path | str) -> Path:
    """Write `obj` to `path` (YAML or JSON by suffix) atomically, creating parent folders; returns the path."""
    path = Path(path)
    text = dump_artifact(obj, _format(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    # A unique sibling name (not mkstemp, whose 0600 mode would outlive the rename).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
