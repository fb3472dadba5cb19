"""The `datafarm` command line. Every command listed by `datafarm --help` works; commands for stages
that are not built yet are not listed."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

import datafarm
from datafarm.errors import DatafarmError

# Tracebacks with local variables could print secrets (API keys live in memory); keep them off.
app = typer.Typer(
    help="datafarm: compile a robot data request into verified, admitted, action-labeled episodes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
capability_app = typer.Typer(help="The versioned capability layer K.", no_args_is_help=True)
app.add_typer(capability_app, name="capability")

out = Console()
err = Console(stderr=True)


def reports_errors(fn: Callable) -> Callable:
    """Turn a DatafarmError into its message on stderr and its exit code (2 for bad input)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DatafarmError as e:
            err.print(f"[bold red]error:[/] {e}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(code=e.exit_code) from None

    return wrapper


def _version_callback(value: bool) -> None:
    if value:
        out.print(f"datafarm {datafarm.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool | None, typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """datafarm: compile a robot data request into verified, admitted, action-labeled episodes."""


@app.command()
@reports_errors
def validate(
    request: Annotated[Path, typer.Argument(help="Path to request.yaml.")],
    unsafe_no_sandbox: Annotated[bool, typer.Option("--unsafe-no-sandbox", help="Allow `sandbox: none`.")] = False,
) -> None:
    """Check a request and its calibration clip without writing anything."""
    from datafarm.intake import check_request

    with err.status("validating the request and decoding the calibration clip..."):
        req, clip = check_request(request, allow_unsafe_sandbox=unsafe_no_sandbox)
    out.print(f"request ok: {request}")
    out.print(f"  task: {req.task}")
    out.print(f"  episodes: {req.episodes}, mode: {req.mode}, robot: {req.robot}")
    out.print(f"clip ok: {req.clip} (sha256 {clip.sha256[:12]}, {clip.frames} frames)")
    for cam in clip.cameras:
        out.print(f"  {cam.name}: {cam.width}x{cam.height} @ {cam.fps:g} fps, {cam.frames} frames, {cam.codec}")


@contextlib.contextmanager
def _progress_reporter(first: str) -> Iterator[Callable[[str], None]]:
    """A progress callback: a live status line on a terminal; elsewhere (logs, CI, a pipe) one
    timestamped line per message on stderr, so long work is visible where a spinner is not."""
    if err.is_terminal:
        with err.status(first) as status:
            yield lambda message: status.update(message)
        return
    start = time.monotonic()

    def report(message: str) -> None:
        err.print(f"[{time.monotonic() - start:7.1f}s] {message}", highlight=False, markup=False, soft_wrap=True)

    report(first)
    yield report


@app.command(name="compile")
@reports_errors
def compile_(
    request: Annotated[Path, typer.Argument(help="Path to request.yaml.")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue an existing task folder from its ledger.")] = False,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output folder (overrides the request's `output`).")] = None,
    unsafe_no_sandbox: Annotated[
        bool, typer.Option("--unsafe-no-sandbox", help="Allow `sandbox: none` (recorded; admission refuses it by default).")
    ] = False,
) -> None:
    """Compile a request into its task folder."""
    from datafarm.compiler import compile_request
    from datafarm.taskdir import describe

    with _progress_reporter("validating the request and decoding the calibration clip...") as progress:
        result = compile_request(
            request,
            resume=resume,
            allow_unsafe_sandbox=unsafe_no_sandbox,
            output=out_dir,
            progress=progress,
        )
    verb = "created" if result.created else "resumed"
    out.print(f"task folder {verb}: {result.task_dir.root}")
    if result.repaired_torn_tail:
        out.print("  repaired a torn last ledger line (the torn bytes were saved and the repair recorded)")
    for path in result.written:
        out.print(f"  wrote {path.name}")
    pipeline = result.pipeline
    if pipeline.skipped_done:
        out.print("already finished (from the ledger): " + ", ".join(s.value for s in pipeline.skipped_done))
    for stage in pipeline.finished:
        out.print(f"stage {stage.value}: accepted")
    if pipeline.not_built:
        out.print("stages not implemented yet (recorded in the ledger as skipped):")
        for stage, where in pipeline.not_built.items():
            out.print(f"  {stage.value}: {where}")
    if pipeline.stopped_at is not None:
        out.print(f"compile stopped at {pipeline.stopped_at.value}: {pipeline.stop_reason}")
        if not pipeline.not_built:
            raise typer.Exit(code=5)
    else:
        out.print("compile finished every stage")
    out.print(f"task folder {result.task_dir.root} holds:")
    for line in describe(result.task_dir):
        out.print(f"  {line}", highlight=False, markup=False)


@app.command()
@reports_errors
def render(
    task_dir: Annotated[Path, typer.Argument(help="The task folder.")],
    episode: Annotated[str, typer.Option("--episode", help="Episode id under episodes/.")],
) -> None:
    """Re-render one episode's obs/ and sim/ videos with the task's R (a new render entry in the ledger);
    its old render, verification and review move to attempts/<id>/rerender/."""
    from datafarm.pipeline import rerender_episode
    from datafarm.taskdir import TaskDir

    with err.status(f"rendering {episode}..."):
        record = rerender_episode(TaskDir(task_dir), episode)
    out.print(f"rendered {episode} with {record.renderer}: {task_dir / 'episodes' / episode / 'obs'}; "
              f"the previous render (if any) is kept in {task_dir / 'attempts' / episode}/; run `datafarm compile "
              "--resume` to verify and review it")


@app.command()
@reports_errors
def schema(
    name: Annotated[str | None, typer.Argument(help="Artifact name or symbol (G, T, S, C, J, R, B); omit to list.")] = None,
) -> None:
    """Print an artifact's JSON Schema (or list the names)."""
    from datafarm.artifacts import registry

    if name is None:
        letters = {full: letter for letter, full in registry.ALIASES.items()}
        table = Table("name", "symbol", "file in the task folder", "what it is")
        for n in registry.schema_names():
            doc = (registry.resolve(n).__doc__ or "").strip().splitlines()[0]
            table.add_row(n, letters.get(n, ""), registry.TASK_FILES.get(n, ""), doc)
        out.print(table)
        return
    sys.stdout.write(json.dumps(registry.json_schema(name), indent=2) + "\n")


@capability_app.command("show")
@reports_errors
def capability_show(
    version: Annotated[str | None, typer.Argument(help="K version, e.g. k1 (default: latest).")] = None,
) -> None:
    """Print a K version, its hash and its contents (refuses a bundle that differs from its release)."""
    from datafarm import capability
    from datafarm.capability.bundle import available_versions

    bundle = capability.load(version)
    out.print(f"capability {bundle.version} (released {bundle.manifest.released})")
    out.print(f"sha256 {bundle.sha256}")
    out.print(f"versions shipped: {', '.join(available_versions())}")
    out.print(bundle.manifest.description)
    table = Table("file", "bytes", "sha256")
    for rel in bundle.files():
        table.add_row(rel, str((bundle.root / rel).stat().st_size), bundle.manifest.files[rel][:16])
    out.print(table)


def _register_subcommands() -> None:
    """Sub-apps that live beside the code they drive."""
    from datafarm.admission.commands import admit_command, audit_command
    from datafarm.agents.commands import cost_command, doctor_command
    from datafarm.ledger.commands import app as ledger_app

    app.add_typer(ledger_app, name="ledger", help="Inspect, verify and repair a task's ledger.")
    app.command(name="cost")(cost_command)
    app.command(name="doctor")(doctor_command)
    app.command(name="admit")(admit_command)
    app.command(name="audit")(audit_command)
    from datafarm.studio.commands import app as studio_app

    app.add_typer(studio_app, name="studio", help="Synthetic calibration clips with ground truth, and grounding scores.")


_register_subcommands()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
