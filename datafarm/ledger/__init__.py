"""The append-only, hash-chained attempt ledger L."""

from datafarm.artifacts.ledger_entry import (
    GENESIS_HASH,
    Actor,
    Cost,
    LedgerActor,
    LedgerCost,
    LedgerEntry,
    LedgerEvent,
    LedgerOutcome,
    Outcome,
)
from datafarm.ledger.store import LEDGER_FILENAME, Ledger
from datafarm.ledger.verify import LedgerProblem, ProblemKind, VerifyReport, verify_bytes

__all__ = [
    "Actor",
    "Cost",
    "GENESIS_HASH",
    "LEDGER_FILENAME",
    "Ledger",
    "LedgerActor",
    "LedgerCost",
    "LedgerEntry",
    "LedgerEvent",
    "LedgerOutcome",
    "Outcome",
    "LedgerProblem",
    "ProblemKind",
    "VerifyReport",
    "verify_bytes",
]
