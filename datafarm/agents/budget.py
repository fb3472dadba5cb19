"""The per-task LLM budget: tokens and dollars all roles together may spend (the request's
`budget`). It is checked before every call (with an estimate of that call) and charged after it; a
call that would not fit is refused, which stops the stage cleanly with a ledger entry saying so.
Spending already recorded in the ledger counts, so a resumed task keeps its budget."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from datafarm.artifacts.ledger_entry import LedgerEvent
from datafarm.ledger import Ledger


@dataclass(frozen=True)
class BudgetState:
    """A snapshot of the budget."""

    max_usd: float
    """Dollar limit."""
    max_tokens: int
    """Token limit (input plus output)."""
    spent_usd: float
    """Dollars spent so far."""
    spent_tokens: int
    """Tokens spent so far."""

    def to_json(self) -> dict[str, float | int]:
        """For ledger details."""
        return {
            "max_usd": self.max_usd,
            "max_tokens": self.max_tokens,
            "spent_usd": round(self.spent_usd, 6),
            "spent_tokens": self.spent_tokens,
        }


class TaskBudget:
    """Tokens and dollars left for one task's LLM calls (shared by all its roles; thread-safe)."""

    def __init__(self, max_usd: float, max_tokens: int, *, spent_usd: float = 0.0, spent_tokens: int = 0) -> None:
        self.max_usd = float(max_usd)
        """Dollar limit."""
        self.max_tokens = int(max_tokens)
        """Token limit."""
        self._spent_usd = float(spent_usd)
        self._spent_tokens = int(spent_tokens)
        self._lock = threading.Lock()

    @classmethod
    def from_ledger(cls, max_usd: float, max_tokens: int, ledger: Ledger | None) -> TaskBudget:
        """A budget with what the ledger's `llm_call` entries already spent counted against it."""
        usd, tokens = 0.0, 0
        if ledger is not None and ledger.exists():
            for entry in ledger.entries():
                if entry.event == LedgerEvent.llm_call:
                    usd += entry.cost.usd
                    tokens += entry.cost.input_tokens + entry.cost.output_tokens
        return cls(max_usd, max_tokens, spent_usd=usd, spent_tokens=tokens)

    def state(self) -> BudgetState:
        """What is spent and what the limits are."""
        with self._lock:
            return BudgetState(self.max_usd, self.max_tokens, self._spent_usd, self._spent_tokens)

    @property
    def remaining_tokens(self) -> int:
        """Tokens left (0 when spent)."""
        with self._lock:
            return max(0, self.max_tokens - self._spent_tokens)

    @property
    def remaining_usd(self) -> float:
        """Dollars left (0 when spent)."""
        with self._lock:
            return max(0.0, self.max_usd - self._spent_usd)

    def refusal(self, estimated_tokens: int, estimated_usd: float) -> str | None:
        """Why a call estimated at this size must not be made, or None when it fits."""
        with self._lock:
            tokens_left = self.max_tokens - self._spent_tokens
            usd_left = self.max_usd - self._spent_usd
            spent = f"spent {self._spent_tokens} of {self.max_tokens} tokens and ${self._spent_usd:.4f} of ${self.max_usd:.2f}"
        if tokens_left <= 0 or usd_left <= 0:
            return f"LLM budget exhausted: {spent}"
        if estimated_tokens > tokens_left:
            return (
                f"LLM budget exhausted: the next call needs about {estimated_tokens} tokens but {tokens_left} are left ({spent})"
            )
        if estimated_usd > usd_left:
            return f"LLM budget exhausted: the next call costs about ${estimated_usd:.4f} but ${usd_left:.4f} is left ({spent})"
        return None

    def charge(self, tokens: int, usd: float) -> None:
        """Count a finished call."""
        with self._lock:
            self._spent_tokens += int(tokens)
            self._spent_usd += float(usd)
