"""The task folder's layout (DESIGN.md, "Task folder"): one place that names every path in it, so
that compile, review, admit, audit and export agree on where things live."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from datafarm.artifacts.registry import TASK_FILES
from datafarm.hashing import canonical_json


def task_id(task_text: str, request_fingerprint: dict) -> str:
    """A stable, readable id: a slug of the task text plus 8 hex of the request's content hash.

    The same request (same fields, same clip bytes) always maps to the same id, which is what lets
    compile refuse to overwrite an existing task and `--resume` find it again.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", task_text.lower()).strip("-")[:40].rstrip("-") or "task"
    digest = hashlib.sha256(canonical_json(request_fingerprint)).hexdigest()[:8]
    return f"{slug}-{digest}"


@dataclass(frozen=True)
class TaskDir:
    """Paths inside one task folder `<out>/<task-id>/`."""

    root: Path
    """The task folder."""

    @property
    def request(self) -> Path:
        """Copy of the request with the clip's sha256 added."""
        return self.artifact("request")

    @property
    def capability_lock(self) -> Path:
        """K version and hash the task was compiled with."""
        return self.root / "capability.lock"

    @property
    def ledger(self) -> Path:
        """The append-only ledger L."""
        return self.artifact("ledger-entry")

    @property
    def grounding(self) -> Path:
        """G."""
        return self.artifact("grounding")

    @property
    def qualification(self) -> Path:
        """Chosen sim variant and probe report."""
        return self.root / "qualification.json"

    @property
    def contract(self) -> Path:
        """T."""
        return self.artifact("contract")

    @property
    def sampler(self) -> Path:
        """S."""
        return self.artifact("sampler")

    @property
    def judge_dir(self) -> Path:
        """J: spec and lock; never visible to the author."""
        return self.root / "judge"

    @property
    def expert_dir(self) -> Path:
        """C: controller.py, manifest, dev-seed runs."""
        return self.root / "expert"

    @property
    def render_contract(self) -> Path:
        """R."""
        return self.artifact("render-contract")

    @property
    def batch(self) -> Path:
        """B."""
        return self.artifact("batch")

    @property
    def verifier_dir(self) -> Path:
        """Verifier spec and calibration."""
        return self.root / "verifier"

    @property
    def episodes_dir(self) -> Path:
        """Admitted episodes."""
        return self.root / "episodes"

    @property
    def attempts_dir(self) -> Path:
        """Every rejected attempt, with its reason."""
        return self.root / "attempts"

    @property
    def transcripts_dir(self) -> Path:
        """Every LLM exchange, per role."""
        return self.root / "transcripts"

    @property
    def certificate(self) -> Path:
        """The admission certificate `datafarm admit` writes when the dataset passes every check."""
        return self.root / "certificate.json"

    @property
    def harness_dir(self) -> Path:
        """Harness-private files (the admission-seed secret): never mounted into a sandbox, never
        given to an agent tool, skipped by review and export."""
        return self.root / "harness"

    def artifact(self, name: str, **fields: str) -> Path:
        """Where the artifact registered as `name` lives (datafarm.artifacts.registry.TASK_FILES), with
        placeholders such as `{episode_id}` filled from `fields`."""
        return self.root / TASK_FILES[name].format(**fields)

    def episode(self, episode_id: str) -> Path:
        """Folder of one admitted episode."""
        return self.episodes_dir / episode_id


FOLDER_GUIDE: tuple[tuple[str, str], ...] = (
    ("grounding.json", "G, the grounded scene"),
    ("qualification.json", "simulator qualification (probes per variant)"),
    ("contract.yaml", "T, the task contract"),
    ("sampler.yaml", "S, the per-episode variation sampler"),
    ("batch.yaml", "B, episode count, seeds and retry budgets"),
    ("judge/spec.json", "J, the frozen judge (lock.json holds its hash)"),
    ("expert/manifest.json", "C, the expert controller and its dev-seed results"),
    ("render_contract.yaml", "R, the render contract"),
    ("verifier/calibration.json", "the verifier spec's calibration matrix"),
    ("certificate.json", "the admission certificate (dataset digest)"),
    ("ledger.jsonl", "the hash-chained ledger of every step"),
)
"""Files a finished task folder holds, with what each one is (for the summary compile prints)."""


def describe(task: TaskDir) -> list[str]:
    """One line per artifact present in the task folder (path and what it is), then episode and attempt
    counts: what a user looks at first after compile."""
    lines = [f"{name:27s} {what}" for name, what in FOLDER_GUIDE if (task.root / name).is_file()]
    episodes = [p for p in task.episodes_dir.glob("*") if (p / "episode.json").is_file()]
    if episodes:
        admitted = sum((p / "admission.json").is_file() for p in episodes)
        rendered = sum((p / "obs").is_dir() for p in episodes)
        lines.append(f"{'episodes/':27s} {len(episodes)} judged episodes ({rendered} rendered to obs/ and sim/ videos, "
                     f"{admitted} admitted)")
    if task.attempts_dir.is_dir():
        attempts = [p for p in task.attempts_dir.iterdir() if p.is_dir()]
        lines.append(f"{'attempts/':27s} {len(attempts)} other attempts (dev-seed rollouts, rejected or superseded "
                     "work), each with its reason")
    return lines
