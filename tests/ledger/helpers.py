"""Shared helpers for the ledger tests: a small real ledger on disk."""

from __future__ import annotations

from pathlib import Path

from datafarm.ledger import Ledger

REASONS = ["request validated", "grounding drafted", "reprojection IoU 0.41 < 0.6", "judge frozen", "note"]


def small_ledger(folder: Path, n: int = 5) -> Ledger:
    """A ledger of `n` varied entries in `folder` (a task folder)."""
    ledger = Ledger(folder)
    for i in range(n):
        kind = i % 5
        if kind == 0:
            ledger.append("request", "stage_finished", "ok", REASONS[0], actor={"role": "cli"})
        elif kind == 1:
            ledger.append(
                "grounding",
                "llm_call",
                "ok",
                REASONS[1],
                actor={"role": "author", "provider": "builtin", "model": "k1"},
                cost={"input_tokens": 1200, "output_tokens": 300, "usd": 1.5e-05},
                outputs={"grounding.json": "ab" * 32},
            )
        elif kind == 2:
            ledger.append(
                "grounding", "rejection", "fail", REASONS[2], route_to="grounding", details={"iou": [0.41, 0.7]}
            )
        elif kind == 3:
            ledger.append("judge", "freeze", "ok", REASONS[3], inputs={"judge": "cd" * 32})
        else:
            ledger.append("expert", "note", "info", REASONS[4], details={"seed": 7, "dev": True, "x": None})
    return ledger


def line_of_each_byte(data: bytes) -> list[int]:
    """For every byte offset, the 1-based line it belongs to (a newline belongs to the line it ends)."""
    lines, line = [], 1
    for byte in data:
        lines.append(line)
        if byte == 0x0A:
            line += 1
    return lines


def append_many(path: str, count: int, worker: int, start) -> None:  # noqa: ANN001 (a multiprocessing Barrier)
    """Process body for the concurrency test: wait until every worker is ready, then append `count` entries."""
    ledger = Ledger(path)
    start.wait(60)
    for i in range(count):
        ledger.append("rollout", "rollout", "ok", f"worker {worker} attempt {i}", details={"worker": worker, "i": i})
