"""What a task's LLM calls cost, from its ledger: tokens and dollars per stage and role, the one-off
adaptation cost (grounding through expert), the render-contract cost, and the recurring cost per
admitted episode (rollout, render, verify, review, admit, divided by the episodes admitted).

Every figure comes from the ledger's `cost` fields, which the conversation priced with K's table at
call time, so the report needs neither the providers nor the price table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from datafarm.artifacts.ledger_entry import LedgerEntry, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir

ADAPTATION_STAGES: tuple[Stage, ...] = (Stage.grounding, Stage.qualification, Stage.contract, Stage.judge, Stage.expert)
"""Stages whose cost is paid once per task."""
RECURRING_STAGES: tuple[Stage, ...] = (Stage.rollout, Stage.render, Stage.verify, Stage.review, Stage.admit)
"""Stages whose cost is paid per episode (the author's render contract, in stage render, excepted)."""

PAPER_REFERENCE = "the paper reports about $21 + $5 (render contract) per task and about $0.80 per admitted episode"


@dataclass
class CostLine:
    """Spending of one role with one model in one stage."""

    stage: str
    """Stage charged."""
    role: str
    """Role that spent it."""
    provider: str
    """Provider."""
    model: str
    """Model."""
    calls: int = 0
    """LLM calls made (answered or failed; calls refused by the budget are not counted)."""
    input_tokens: int = 0
    """Prompt tokens."""
    output_tokens: int = 0
    """Completion tokens."""
    usd: float = 0.0
    """Dollars."""

    def to_json(self) -> dict[str, Any]:
        """As printed by `--json`."""
        return {
            "stage": self.stage,
            "role": self.role,
            "provider": self.provider,
            "model": self.model,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "usd": round(self.usd, 6),
        }


@dataclass
class CostReport:
    """The cost of one task folder."""

    task_dir: Path
    """The task folder."""
    lines: list[CostLine] = field(default_factory=list)
    """Per stage, role and model, in pipeline order."""
    adaptation_usd: float = 0.0
    """One-off: grounding, qualification, contract, judge, expert."""
    render_contract_usd: float = 0.0
    """One-off: the author writing the render contract R."""
    recurring_usd: float = 0.0
    """Per-episode work: rollout, render, verify, review, admit."""
    other_usd: float = 0.0
    """Anything else (audit, resume bookkeeping)."""
    admitted: int = 0
    """Episodes admitted."""
    budget_usd: float | None = None
    """The request's dollar budget, when its copy in the task folder can be read."""
    budget_tokens: int | None = None
    """The request's token budget, likewise."""
    budget_stops: int = 0
    """Calls refused because the budget was spent."""

    @property
    def total_usd(self) -> float:
        """Everything spent."""
        return sum(line.usd for line in self.lines)

    @property
    def total_tokens(self) -> int:
        """Every token spent."""
        return sum(line.input_tokens + line.output_tokens for line in self.lines)

    @property
    def per_episode_usd(self) -> float | None:
        """Recurring cost per admitted episode; None before any episode is admitted."""
        return self.recurring_usd / self.admitted if self.admitted else None

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data."""
        return {
            "task_dir": str(self.task_dir),
            "lines": [line.to_json() for line in self.lines],
            "adaptation_usd": round(self.adaptation_usd, 6),
            "render_contract_usd": round(self.render_contract_usd, 6),
            "recurring_usd": round(self.recurring_usd, 6),
            "other_usd": round(self.other_usd, 6),
            "admitted_episodes": self.admitted,
            "per_episode_usd": None if self.per_episode_usd is None else round(self.per_episode_usd, 6),
            "total_usd": round(self.total_usd, 6),
            "total_tokens": self.total_tokens,
            "budget": {"max_usd": self.budget_usd, "max_tokens": self.budget_tokens, "calls_refused": self.budget_stops},
        }

    def summary_lines(self) -> list[str]:
        """The totals as plain lines."""
        per = "no episode admitted yet" if self.per_episode_usd is None else f"${self.per_episode_usd:.4f} per episode"
        lines = [
            f"one-off adaptation (grounding to expert): ${self.adaptation_usd:.4f}",
            f"render contract: ${self.render_contract_usd:.4f}",
            f"recurring: ${self.recurring_usd:.4f} over {self.admitted} admitted episode(s): {per}",
        ]
        if self.other_usd:
            lines.append(f"other (audit, resume): ${self.other_usd:.4f}")
        total = f"total: ${self.total_usd:.4f}, {self.total_tokens} tokens"
        if self.budget_usd is not None:
            total += f" (budget ${self.budget_usd:g}, {self.budget_tokens} tokens)"
        lines.append(total)
        if self.budget_stops:
            lines.append(f"the budget stopped {self.budget_stops} call(s)")
        return lines


def _actor_fields(entry: LedgerEntry) -> tuple[str, str, str]:
    actor = entry.actor
    if actor is None:
        return "-", "-", "-"
    return actor.role, actor.provider or "-", actor.model or "-"


def _admitted(entries: Iterable[LedgerEntry], task_dir: TaskDir) -> int:
    from_ledger = sum(1 for e in entries if e.event == LedgerEvent.admission and e.outcome == LedgerOutcome.ok)
    if from_ledger:
        return from_ledger
    if task_dir.episodes_dir.is_dir():
        return sum(1 for p in task_dir.episodes_dir.iterdir() if (p / "admission.json").is_file())
    return 0


def _budget(task_dir: TaskDir) -> tuple[float | None, int | None]:
    try:
        data = yaml.safe_load(task_dir.request.read_text(encoding="utf-8")) or {}
        budget = data.get("budget") or {}
        return float(budget.get("max_usd")), int(budget.get("max_tokens"))
    except (OSError, yaml.YAMLError, TypeError, ValueError, AttributeError):
        return None, None


def cost_report(task_dir: Path | str) -> CostReport:
    """Tokens and dollars of a task folder, from its ledger (see module docstring)."""
    tdir = task_dir if isinstance(task_dir, TaskDir) else TaskDir(Path(task_dir))
    entries = list(Ledger(tdir.ledger).entries())
    report = CostReport(task_dir=tdir.root)
    report.budget_usd, report.budget_tokens = _budget(tdir)
    by_key: dict[tuple[str, str, str, str], CostLine] = {}
    for entry in entries:
        if entry.event == LedgerEvent.llm_call and entry.outcome == LedgerOutcome.skipped:
            report.budget_stops += 1
            continue
        if entry.event != LedgerEvent.llm_call and entry.cost.is_zero():
            continue
        role, provider, model = _actor_fields(entry)
        key = (entry.stage.value, role, provider, model)
        line = by_key.setdefault(key, CostLine(*key))
        line.calls += 1 if entry.event == LedgerEvent.llm_call else 0
        line.input_tokens += entry.cost.input_tokens
        line.output_tokens += entry.cost.output_tokens
        line.usd += entry.cost.usd
        stage = entry.stage
        if stage in ADAPTATION_STAGES:
            report.adaptation_usd += entry.cost.usd
        elif stage == Stage.render and role == "author":
            report.render_contract_usd += entry.cost.usd
        elif stage in RECURRING_STAGES:
            report.recurring_usd += entry.cost.usd
        else:
            report.other_usd += entry.cost.usd
    order = {s.value: i for i, s in enumerate(Stage)}
    report.lines = sorted(by_key.values(), key=lambda line: (order.get(line.stage, 99), line.role, line.provider, line.model))
    report.admitted = _admitted(entries, tdir)
    return report
