"""Loading and checking versioned K bundles (`datafarm/capability/k<N>/`).

A bundle is immutable once released: its manifest records a hash over all its files, and
`releases.RELEASED` pins that hash in code, so editing a released bundle (even together with its
manifest) fails the test suite. A change to K is a new folder `k<N+1>`.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox
import yaml

from datafarm.capability.models import CapabilityLock, CapabilityManifest, PriceTable
from datafarm.errors import IntegrityError, input_error
from datafarm.hashing import sha256_file, sha256_tree

BUNDLES_DIR = Path(__file__).parent
MANIFEST = "manifest.json"
_VERSION = re.compile(r"^k([0-9]+)$")


def available_versions() -> list[str]:
    """Released K versions shipped with this package, oldest first. A version folder without a
    manifest is a draft being prepared for release and is not offered."""
    found = [
        p.name for p in BUNDLES_DIR.iterdir() if p.is_dir() and _VERSION.match(p.name) and (p / MANIFEST).is_file()
    ]
    return sorted(found, key=lambda v: int(v[1:]))


def latest_version() -> str:
    """The newest shipped K version (what `compile` pins by default)."""
    versions = available_versions()
    if not versions:
        raise IntegrityError(f"no capability bundle found in {BUNDLES_DIR}")
    return versions[-1]


def content_files(root: Path) -> list[str]:
    """Relative paths of the files a bundle's hash covers, sorted (caches and the manifest excluded)."""
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and rel != MANIFEST and "__pycache__" not in p.parts and not rel.endswith(".pyc"):
            out.append(rel)
    return out


def compute_manifest_hash(root: Path) -> str:
    """The bundle hash: sha256_tree of the folder without its manifest."""
    return sha256_tree(root, exclude={MANIFEST})


@dataclass(frozen=True)
class CapabilityBundle:
    """One K version on disk, checked against its manifest when loaded."""

    root: Path
    """Folder of the bundle."""
    manifest: CapabilityManifest
    """Its parsed manifest."""

    @property
    def version(self) -> str:
        """Version name, e.g. `k1`."""
        return self.manifest.version

    @property
    def sha256(self) -> str:
        """Content hash recorded in (and verified against) the manifest."""
        return self.manifest.sha256

    def files(self) -> list[str]:
        """Relative paths of the bundle's content files."""
        return content_files(self.root)

    def read_text(self, rel: str) -> str:
        """Text of one bundle file; a missing file raises an IntegrityError naming it."""
        path = self.root / rel
        if not path.is_file():
            raise IntegrityError(f"capability {self.version} has no file {rel!r}")
        return path.read_text(encoding="utf-8")

    def skill(self, stage: str) -> str:
        """The stage skill Markdown `skills/<stage>.md`."""
        return self.read_text(f"skills/{stage}.md")

    @cached_property
    def _jinja(self) -> jinja2.Environment:
        # Sandboxed and strict: templates are K's, variables are the task's, and a missing variable is
        # an error rather than a silently empty prompt.
        return jinja2.sandbox.SandboxedEnvironment(
            loader=jinja2.FileSystemLoader(str(self.root)),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
        )

    def render(self, template: str, **variables: Any) -> str:
        """Render a K template (e.g. `prompts/author.md.j2`) with task variables; missing ones raise."""
        if template not in self.files():
            raise IntegrityError(f"capability {self.version} has no template {template!r}")
        try:
            return self._jinja.get_template(template).render(**variables)
        except jinja2.UndefinedError as e:
            raise input_error(f"template variable missing: {e.message}", file=self.root / template) from e

    def price_table(self) -> PriceTable:
        """K's model price table."""
        return PriceTable.model_validate(yaml.safe_load(self.read_text("prices.yaml")))

    def lock(self, datafarm_version: str) -> CapabilityLock:
        """The `capability.lock` a task compiled under this bundle records."""
        return CapabilityLock(k_version=self.version, k_sha256=self.sha256, datafarm_version=datafarm_version)

    def verify(self) -> list[str]:
        """Problems found comparing the files with the manifest (empty list: intact)."""
        problems = []
        actual = {rel: sha256_file(self.root / rel) for rel in self.files()}
        for rel in sorted(set(actual) | set(self.manifest.files)):
            if rel not in actual:
                problems.append(f"{rel}: listed in the manifest but missing")
            elif rel not in self.manifest.files:
                problems.append(f"{rel}: not in the manifest (added after release)")
            elif actual[rel] != self.manifest.files[rel]:
                problems.append(f"{rel}: content changed since release")
        if compute_manifest_hash(self.root) != self.manifest.sha256:
            problems.append("bundle hash differs from the manifest's sha256")
        return problems


def load(version: str | None = None, *, check: bool = True) -> CapabilityBundle:
    """Load K `version` (default: the latest); with `check`, refuse a bundle that differs from its manifest."""
    version = version or latest_version()
    root = BUNDLES_DIR / version
    if not _VERSION.match(version) or not root.is_dir():
        raise input_error(
            f"unknown capability version {version!r}",
            field="capability",
            expected="one of: " + ", ".join(available_versions()),
        )
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise IntegrityError(f"{manifest_path}: missing manifest; the bundle is not a release")
    manifest = CapabilityManifest.model_validate(json.loads(manifest_path.read_text()))
    bundle = CapabilityBundle(root=root, manifest=manifest)
    if manifest.version != version:
        raise IntegrityError(f"{manifest_path}: manifest says {manifest.version!r} but the folder is {version!r}")
    if check:
        problems = bundle.verify()
        if problems:
            raise IntegrityError(
                f"capability {version} differs from its release manifest:\n  " + "\n  ".join(problems)
                + "\nA released K never changes: put the change in a new version folder."
            )
    return bundle


@functools.cache
def latest_with(relative: str) -> CapabilityBundle:
    """The newest released K bundle that ships `relative` (e.g. `probes.yaml`), checked against its
    manifest: what a caller with no task (hence no `capability.lock`) in hand reads that file from.
    IntegrityError when no release ships it."""
    for version in reversed(available_versions()):
        if (BUNDLES_DIR / version / relative).exists():
            return load(version)
    raise IntegrityError(f"no released capability bundle in {BUNDLES_DIR} ships {relative}")


def write_manifest(version: str, released: str, description: str) -> CapabilityManifest:
    """Create the manifest of a new version folder (release step; see README, "Capability layer")."""
    root = BUNDLES_DIR / version
    files = {rel: sha256_file(root / rel) for rel in content_files(root)}
    manifest = CapabilityManifest(
        version=version,
        released=released,
        description=description,
        sha256=compute_manifest_hash(root),
        files=files,
    )
    (root / MANIFEST).write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n")
    return manifest
