"""The named artifact schemas behind `datafarm schema NAME`, resolved lazily from dotted paths so
that listing names imports nothing.

Names are kebab-case; the single letters of DESIGN.md (G T S C J R B) are aliases.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from datafarm.artifacts.base import Artifact
from datafarm.errors import InputError, Problem

SCHEMAS: dict[str, str] = {
    "request": "datafarm.artifacts.request:Request",
    "clip": "datafarm.artifacts.clip:ClipSpec",
    "grounding": "datafarm.artifacts.grounding:Grounding",
    "contract": "datafarm.artifacts.contract:TaskContract",
    "sampler": "datafarm.artifacts.sampler:SamplerSpec",
    "variation": "datafarm.artifacts.sampler:Variation",
    "expert": "datafarm.artifacts.expert:ExpertManifest",
    "judge": "datafarm.artifacts.judge:JudgeSpec",
    "judge-lock": "datafarm.artifacts.judge:JudgeLock",
    "judge-verdict": "datafarm.artifacts.judge:JudgeVerdict",
    "render-contract": "datafarm.artifacts.render_contract:RenderContract",
    "batch": "datafarm.artifacts.batch:BatchConfig",
    "episode": "datafarm.artifacts.episode:EpisodeRecord",
    "admission": "datafarm.artifacts.admission:AdmissionRecord",
    "qualification": "datafarm.sim.qualification.report:QualificationReport",
    "verifier-spec": "datafarm.verifiers.spec:VerifierSpec",
    "verifier-calibration": "datafarm.verifiers.report:CalibrationReport",
    "ledger-entry": "datafarm.artifacts.ledger_entry:LedgerEntry",
}
"""Schema name -> `module:Class` of its model, in pipeline order."""

ALIASES: dict[str, str] = {
    "G": "grounding",
    "T": "contract",
    "S": "sampler",
    "C": "expert",
    "J": "judge",
    "R": "render-contract",
    "B": "batch",
}
"""DESIGN.md's artifact letters -> schema name (case-sensitive)."""

TASK_FILES: dict[str, str] = {
    "request": "request.yaml",
    "grounding": "grounding.json",
    "contract": "contract.yaml",
    "sampler": "sampler.yaml",
    "expert": "expert/manifest.json",
    "judge": "judge/spec.json",
    "judge-lock": "judge/lock.json",
    "render-contract": "render_contract.yaml",
    "batch": "batch.yaml",
    "qualification": "qualification.json",
    "verifier-spec": "verifier/spec.json",
    "verifier-calibration": "verifier/calibration.json",
    "episode": "episodes/{episode_id}/episode.json",
    "admission": "episodes/{episode_id}/admission.json",
    "ledger-entry": "ledger.jsonl",
}
"""Schema name -> where the artifact lives in a task folder (`{episode_id}` filled per episode)."""


def schema_names() -> list[str]:
    """Every schema name, in pipeline order (aliases not included)."""
    return list(SCHEMAS)


def canonical_name(name: str) -> str:
    """`name` with an alias replaced by its schema name; InputError (with the closest match) if unknown."""
    if name in SCHEMAS:
        return name
    if name in ALIASES:
        return ALIASES[name]
    choices = [*SCHEMAS, *ALIASES]
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    if not close and name.upper() in ALIASES:
        close = [name.upper()]
    hint = f"did you mean '{close[0]}'?" if close else None
    expected = "one of: " + ", ".join(SCHEMAS) + " (or an alias: " + ", ".join(f"{k}={v}" for k, v in ALIASES.items()) + ")"
    raise InputError([Problem(f"unknown schema '{name}'", field="NAME", expected=expected, hint=hint)])


def resolve(name: str) -> type[Artifact]:
    """The model class of schema `name` (or alias); InputError for an unknown name.

    Importing the model's module happens here; an ImportError means the package is broken, not the
    input, and propagates as is."""
    target = SCHEMAS[canonical_name(name)]
    module_name, _, attr = target.partition(":")
    model = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(model, type) and issubclass(model, Artifact)):
        raise TypeError(f"{target} is not an Artifact model")
    return model


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (validation mode, aliases as keys) of schema `name`."""
    return resolve(name).model_json_schema(by_alias=True)
