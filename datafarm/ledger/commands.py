"""`datafarm ledger ...`: check, show and repair a task's ledger from the command line.

Exit codes follow datafarm.errors: 0 ok, 2 no ledger at the path, 4 the ledger failed a check.
"""

from __future__ import annotations

import os
import sys

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEntry
from datafarm.artifacts.stages import Stage
from datafarm.errors import DatafarmError, IntegrityError
from datafarm.ledger.store import Ledger

app = typer.Typer(
    help="Check, show and repair a task's append-only, hash-chained ledger (ledger.jsonl).",
    no_args_is_help=True,
    add_completion=False,
)

LedgerPath = Annotated[
    Path, typer.Argument(help="A task folder (its ledger.jsonl is used) or the path of a .jsonl ledger.")
]


def _fail(error: DatafarmError) -> typer.Exit:
    """Print a datafarm error to stderr and return the Exit carrying its exit code."""
    Console(stderr=True, highlight=False).print(f"[red]error:[/red] {error}", markup=True)
    return typer.Exit(error.exit_code)


@app.command()
def verify(path: LedgerPath) -> None:
    """Check the hash chain, seq order and every entry; exit 4 naming the first bad entry."""
    ledger = Ledger(path)
    try:
        report = ledger.verify()
    except DatafarmError as e:
        raise _fail(e) from None
    Console(highlight=False, soft_wrap=True).print(f"{ledger.path}: {report.render()}", markup=False)
    if not report.ok:
        raise typer.Exit(IntegrityError.exit_code)


@app.command()
def show(
    path: LedgerPath,
    stage: Annotated[Stage | None, typer.Option(help="Only entries of this stage.")] = None,
    last: Annotated[int | None, typer.Option(min=1, help="Only the last N entries (after --stage).")] = None,
) -> None:
    """Print the ledger as a table: seq, time, stage, event, actor, outcome, reason, route, cost."""
    ledger = Ledger(path)
    rows: list[LedgerEntry] = []
    error: DatafarmError | None = None
    try:
        for entry in ledger.entries():
            if stage is None or entry.stage == stage:
                rows.append(entry)
    except DatafarmError as e:
        if not ledger.exists():
            raise _fail(e) from None
        error = e  # show what could be read, then the problem
    if last is not None:
        rows = rows[-last:]
    # Piped output (files, CI logs) has no terminal width; rich would squeeze the table into 80 columns.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    Console(width=width).print(_table(ledger, rows))
    if error is not None:
        raise _fail(error)


@app.command()
def repair(path: LedgerPath) -> None:
    """Move a torn last line (crash mid-write) aside into ledger.torn-<time>.bin and record the repair."""
    ledger = Ledger(path)
    try:
        if not ledger.exists():
            ledger.verify()  # raises the "no ledger here" error
        entry = ledger.repair_torn_tail(actor=LedgerActor(role="cli"))
    except DatafarmError as e:
        raise _fail(e) from None
    Console(highlight=False, soft_wrap=True).print(f"{ledger.path}: {entry.reason} (seq {entry.seq})", markup=False)


def _table(ledger: Ledger, rows: list[LedgerEntry]) -> Table:
    table = Table(
        title=str(ledger.path), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True
    )
    # Short fields stay on one line; the free-text reason (and actor) wrap on a narrow terminal.
    for name in ("seq", "time (UTC)", "stage", "event", "actor", "outcome", "reason", "route to", "cost"):
        justify = "right" if name in ("seq", "cost") else "left"
        wraps = name in ("reason", "actor")
        table.add_column(name, justify=justify, overflow="fold", no_wrap=not wraps, min_width=24 if name == "reason" else None)
    for e in rows:
        table.add_row(
            str(e.seq),
            e.time.strftime("%m-%d %H:%M:%S"),
            e.stage.value,
            e.event.value,
            Text(e.actor.label() if e.actor else ""),
            Text(e.outcome.value, style=_OUTCOME_STYLE.get(e.outcome.value, "")),
            Text(e.reason),
            e.route_to.value if e.route_to else "",
            _cost(e),
        )
    return table


def _cost(entry: LedgerEntry) -> str:
    """`$0.000015 1200+300 tok` (dollars, input+output tokens), or empty for a free event."""
    cost = entry.cost
    if cost.is_zero():
        return ""
    usd = f"${cost.usd:.4f}" if cost.usd >= 0.01 else f"${cost.usd:.6f}"
    return f"{usd} {cost.input_tokens}+{cost.output_tokens} tok"


_OUTCOME_STYLE = {"ok": "green", "fail": "red", "error": "bold red"}
