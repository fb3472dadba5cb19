"""A read-only view of a task's ledger for admission and audit: every readable entry with its line
number, and the questions admission asks of it (which rollout made an episode, which entry admitted
it, which J was frozen last, which files the ledger recorded).

Unlike `Ledger.entries()`, reading does not stop at a bad line: `admit` must list every problem of a
tampered dataset, so it reads what it can and leaves judging the chain to `Ledger.verify()`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from datafarm.artifacts.ledger_entry import LedgerEntry, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage


@dataclass(frozen=True)
class Line:
    """One readable ledger entry and where it is."""

    line: int
    """1-based line number in `ledger.jsonl`."""
    entry: LedgerEntry
    """The entry as written (its hash is not checked here)."""

    @property
    def where(self) -> str:
        """`ledger.jsonl:N (seq S)`, how problems name the entry."""
        return f"ledger.jsonl:{self.line} (seq {self.entry.seq})"

    def detail(self, key: str) -> object:
        """`details[key]`, or None."""
        return self.entry.details.get(key)


@dataclass(frozen=True)
class LedgerView:
    """Every readable entry of a ledger file, in file order."""

    lines: list[Line]
    """Readable entries with their line numbers; unreadable lines are skipped."""

    @classmethod
    def read(cls, path: Path) -> LedgerView:
        """Read `path` (a missing file gives an empty view); lines that are not entries are skipped."""
        lines: list[Line] = []
        if not path.is_file():
            return cls(lines)
        for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                lines.append(Line(number, LedgerEntry.model_validate(json.loads(raw.decode("utf-8")))))
            except (ValueError, UnicodeDecodeError, ValidationError):
                continue
        return cls(lines)

    # --- questions admission asks ------------------------------------------------------------------

    def rollouts_of(self, episode_id: str) -> list[Line]:
        """`rollout` events that wrote episode or attempt `episode_id`."""
        return [ln for ln in self.lines
                if ln.entry.event == LedgerEvent.rollout and ln.detail("episode_id") == episode_id]

    def admissions_of(self, episode_id: str) -> list[Line]:
        """`admission` events that admitted `episode_id`."""
        return [ln for ln in self.admissions() if ln.detail("episode_id") == episode_id]

    def admissions(self) -> list[Line]:
        """Every successful `admission` event (stage admit)."""
        return [ln for ln in self.lines if ln.entry.event == LedgerEvent.admission
                and ln.entry.stage == Stage.admit and ln.entry.outcome == LedgerOutcome.ok]

    def rejections_of(self, episode_id: str) -> list[Line]:
        """`rejection` events naming `episode_id` (a verifier or review rejection routed elsewhere)."""
        return [ln for ln in self.lines
                if ln.entry.event == LedgerEvent.rejection and ln.detail("episode_id") == episode_id]

    def admission_rollouts(self) -> list[Line]:
        """Every `rollout` event on an admission seed (stage rollout), whatever its outcome."""
        return [ln for ln in self.lines if ln.entry.event == LedgerEvent.rollout
                and ln.entry.stage == Stage.rollout and ln.detail("seed_kind") == "admission"]

    def mentions(self, name: str) -> list[Line]:
        """Entries whose details name `name` as their episode id or folder."""
        return [ln for ln in self.lines
                if name in (ln.detail("episode_id"), ln.detail("folder"))]

    def freezes(self) -> list[Line]:
        """Every `freeze` event of J, oldest first."""
        return [ln for ln in self.lines if ln.entry.event == LedgerEvent.freeze]

    def latest_freeze(self) -> str | None:
        """The spec hash of the latest `freeze` event, or None."""
        freezes = self.freezes()
        return str(freezes[-1].detail("spec_sha256")) if freezes else None

    def recorded_outputs(self, prefix: str) -> dict[str, tuple[str, Line]]:
        """Path -> (sha256, entry) of the latest ledger output recorded for each path under `prefix`
        (`episodes/<id>/`), the prefix removed."""
        found: dict[str, tuple[str, Line]] = {}
        for ln in self.lines:
            for name, digest in ln.entry.outputs.items():
                if name.startswith(prefix):
                    found[name[len(prefix):]] = (digest, ln)
        return found

    @property
    def head(self) -> Line | None:
        """The last readable entry."""
        return self.lines[-1] if self.lines else None
