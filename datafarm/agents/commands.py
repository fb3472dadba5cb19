"""The agent layer's commands for the `datafarm` CLI, as plain typer command functions:

    app.command(name="cost")(cost_command)      # datafarm cost TASK_DIR [--json]
    app.command(name="doctor")(doctor_command)  # datafarm doctor REQUEST [--ping] [--json]

Exit codes: 0 fine; `doctor` exits 1 when a role is not ready; a DatafarmError exits with its code.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from datafarm.errors import DatafarmError


def _console() -> Console:
    """stdout; piped output (files, CI logs) has no terminal width, so use a wide one rather than squeeze tables."""
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    return Console(width=width, highlight=False, soft_wrap=True)


def _fail(error: DatafarmError) -> typer.Exit:
    Console(stderr=True, highlight=False).print(f"[red]error:[/red] {error}", markup=True, soft_wrap=True)
    return typer.Exit(error.exit_code)


def cost_command(
    task_dir: Annotated[Path, typer.Argument(help="A task folder.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Tokens and dollars per stage and role, the one-off adaptation cost and the recurring cost per admitted episode."""
    from datafarm.agents.cost import PAPER_REFERENCE, cost_report

    try:
        report = cost_report(task_dir)
    except DatafarmError as e:
        raise _fail(e) from None
    if json_output:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
        return
    console = _console()
    table = Table(title=f"LLM cost of {report.task_dir}", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("stage", "role", "provider/model", "calls", "input tok", "output tok", "USD"):
        table.add_column(name, justify="right" if name in ("calls", "input tok", "output tok", "USD") else "left", no_wrap=True)
    for line in report.lines:
        table.add_row(
            line.stage,
            line.role,
            f"{line.provider}/{line.model}",
            str(line.calls),
            str(line.input_tokens),
            str(line.output_tokens),
            f"{line.usd:.4f}",
        )
    console.print(table)
    for text in report.summary_lines():
        console.print(text, markup=False)
    console.print(f"(for scale: {PAPER_REFERENCE})", markup=False)


def doctor_command(
    request: Annotated[Path, typer.Argument(help="Path to request.yaml.")],
    ping: Annotated[bool, typer.Option("--ping", help="Make one minimal call per provider and model.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Per role: provider, model, whether its API key is set (never the key), whether K prices the model; --ping calls it."""
    from datafarm.agents.doctor import doctor
    from datafarm.artifacts.request import Request
    from datafarm.intake.load import load_model

    try:
        # Paths are not checked: doctor is about providers, and works before the clip is in place.
        report = doctor(load_model(Request, request), ping=ping)
    except DatafarmError as e:
        raise _fail(e) from None
    if json_output:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        console = _console()
        table = Table(
            title=f"LLM roles of {request} (prices from K {report.k_version})", title_justify="left", box=box.SIMPLE_HEAD
        )
        for name in ("role", "provider", "model", "key", "priced", "base URL", "ping", "status"):
            table.add_column(name)
        for r in report.roles:
            key = "not needed" if r.key_env is None else f"{r.key_env} {'set' if r.key_present else 'NOT SET'}"
            ping_text = "" if r.ping is None else (f"ok {r.ping.latency_s:.2f} s: " if r.ping.ok else "FAILED: ") + r.ping.detail
            status = "ready" if r.ready else "; ".join(r.problems) or "ping failed"
            table.add_row(
                r.role, r.provider, r.model, key, "yes" if r.priced else "NO", r.base_url or "default", ping_text, status
            )
        console.print(table)
    if not report.ok:
        raise typer.Exit(1)
