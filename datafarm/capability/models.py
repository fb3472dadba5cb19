"""Schemas of the capability layer's own files: its manifest, its price table, and a task's lock."""

from __future__ import annotations

from pydantic import Field

from datafarm.artifacts.base import Artifact


class CapabilityManifest(Artifact):
    """`manifest.json` of a K bundle: which version it is and the hash of everything in it."""

    version: str = Field(pattern=r"^k[0-9]+$")
    """Version name, `k<N>`; equal to the bundle's folder name."""
    released: str
    """Date (YYYY-MM-DD) the version was released; a released bundle never changes."""
    description: str
    """What this version added or changed, for people choosing a version."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 over every file of the bundle except this manifest, in sorted path order
    (datafarm.hashing.sha256_tree)."""
    files: dict[str, str]
    """Relative path -> sha256 of each file, so a mismatch can name the file that changed."""


class ModelPrice(Artifact):
    """Price of one model, US dollars per million tokens."""

    provider: str
    """Provider that serves the model (builtin, openai, anthropic)."""
    input_per_mtok: float = Field(ge=0)
    """Dollars per million input (prompt) tokens."""
    output_per_mtok: float = Field(ge=0)
    """Dollars per million output (completion) tokens."""


class PriceTable(Artifact):
    """K's model price table used to charge every LLM call to its stage."""

    as_of: str
    """Date the prices were read from the providers' price lists."""
    currency: str = "USD"
    """Currency of every figure (always USD)."""
    models: dict[str, ModelPrice]
    """Model name -> price."""

    def cost_usd(self, model: str, input_tokens: int, output_tokens: int) -> float:
        """Dollar cost of one call; an unpriced model raises KeyError naming the priced ones."""
        if model not in self.models:
            raise KeyError(f"model {model!r} has no price in K's table; priced: {', '.join(sorted(self.models))}")
        p = self.models[model]
        return (input_tokens * p.input_per_mtok + output_tokens * p.output_per_mtok) / 1e6


class CapabilityLock(Artifact):
    """`capability.lock` of a task folder: the K version and hash it was compiled with."""

    k_version: str
    """K version the task was compiled with, e.g. `k1`."""
    k_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """That bundle's content hash; audit refuses to run under a K whose hash differs."""
    datafarm_version: str
    """Version of the datafarm package that compiled the task."""
