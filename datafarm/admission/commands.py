"""The `datafarm admit` and `datafarm audit` commands, as typer command functions for the CLI to wire
in (`app.command("admit")(admit_command)`, `app.command("audit")(audit_command)`).

Exit codes follow datafarm.errors: 0 ok, 2 bad input (no such task folder), 4 the dataset failed
admission, the audit found a difference or refused to run (K or J differs from its lock).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datafarm.errors import DatafarmError, IntegrityError

TaskDirArg = Annotated[Path, typer.Argument(help="The task folder written by `datafarm compile`.")]


def _fail(error: DatafarmError) -> typer.Exit:
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {error}", markup=True)
    return typer.Exit(error.exit_code)


def admit_command(
    task_dir: TaskDirArg,
    allow_unsafe_sandbox: Annotated[bool, typer.Option(
        "--allow-unsafe-sandbox", help="Admit episodes whose expert ran without a sandbox (policy recorded).")] = False,
    check_only: Annotated[bool, typer.Option("--check", help="Only check; write no certificate.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Certify the dataset: exit 0 and write certificate.json only if it is complete, unmodified,
    fully recorded and every episode reviewed; otherwise list every problem and exit 4."""
    from datafarm.admission.admit import admit

    try:
        report = admit(task_dir, allow_unsafe_sandbox=allow_unsafe_sandbox, write_certificate=not check_only)
    except DatafarmError as e:
        raise _fail(e) from None
    if as_json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        Console(highlight=False, soft_wrap=True).print(report.render(), markup=False)
    if not report.ok:
        raise typer.Exit(IntegrityError.exit_code)


def audit_command(
    task_dir: TaskDirArg,
    sample: Annotated[int | None, typer.Option(
        min=0, help="Re-simulate this many admitted episodes (default: all).")] = None,
    sample_seed: Annotated[int, typer.Option(help="Seed choosing the sample.")] = 0,
    tolerance: Annotated[float, typer.Option(
        min=0.0, help="Largest state difference accepted (default 0: bit-identical).")] = 0.0,
    work_dir: Annotated[Path | None, typer.Option(
        help="Keep the re-simulated episodes here (outside the task folder).")] = None,
    allow_unsafe_sandbox: Annotated[bool, typer.Option(
        "--allow-unsafe-sandbox", help="Re-run experts that ran without a sandbox, without one.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Re-run the task under its pinned K: re-judge every stored trajectory with the frozen J,
    re-simulate admission seeds with the expert, re-run the verifier; exit 4 on any difference."""
    from datafarm.admission.audit import audit

    try:
        report = audit(task_dir, sample=sample, sample_seed=sample_seed, tolerance=tolerance, work_dir=work_dir,
                       allow_unsafe_sandbox=allow_unsafe_sandbox)
    except DatafarmError as e:
        raise _fail(e) from None
    if as_json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        Console(highlight=False, soft_wrap=True).print(report.render(), markup=False)
    if not report.ok:
        raise typer.Exit(IntegrityError.exit_code)
