"""`datafarm studio ...`: render synthetic calibration clips and score groundings against their truth.

A typer sub-app; the main CLI mounts it with `app.add_typer(studio_app, name="studio")`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from datafarm.errors import DatafarmError

app = typer.Typer(help="Synthetic calibration clips with known truth: render a scene, score a grounding.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)

out = Console()
err = Console(stderr=True)


def _reports_errors(fn: Callable) -> Callable:
    """A DatafarmError becomes its message on stderr and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DatafarmError as e:
            err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
            raise typer.Exit(code=e.exit_code) from None

    return wrapper


@app.command()
@_reports_errors
def render(
    scene: Annotated[Path, typer.Argument(help="The scene description (SCENE.yaml).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Clip folder to write (clip.yaml and one video per camera).")],
    truth: Annotated[Path | None, typer.Option(
        "--truth", help="Where to write truth.json (default: truth.json next to the clip folder, never inside it).")] = None,
) -> None:
    """Render a synthetic calibration clip of SCENE and write its ground truth apart from it."""
    from datafarm.studio.render import render_clip

    with err.status("rendering (the first frame compiles shaders; a few seconds)..."):
        clip = render_clip(scene, out_dir, truth)
    size = sum(p.stat().st_size for p in clip.clip_dir.iterdir() if p.is_file())
    out.print(f"clip: {clip.clip_dir} ({clip.report.frames} frames @ {clip.truth.fps:g} fps, {size / 1e6:.2f} MB, "
              f"{clip.seconds:.1f} s)")
    for cam in clip.report.cameras:
        out.print(f"  {cam.name}: {cam.video} {cam.width}x{cam.height}")
    known = clip.truth.known
    out.print(f"  clip.yaml gives: intrinsics {'yes' if known.intrinsics else 'no'}, "
              f"extrinsics {'yes' if known.extrinsics else 'no'}, robot bases {'yes' if known.robot_base else 'no'}"
              + (", a ChArUco board" if clip.truth.board is not None else ""))
    out.print(f"truth: {clip.truth_path} (keep it away from the pipeline)")


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


@app.command()
@_reports_errors
def score(
    task_dir: Annotated[Path, typer.Argument(help="A task folder holding grounding.json (or the grounding.json itself).")],
    truth: Annotated[Path, typer.Argument(help="The truth.json written by `datafarm studio render`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when the grounding misses the acceptance criteria.")] = False,
) -> None:
    """Compare a grounding with the truth: object position (mm), size (%), identity; camera pose (mm, degrees)."""
    from datafarm.studio.score import score_files

    report = score_files(task_dir, truth)
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        objects = Table(title=f"objects of scene {report.scene}")
        for column in ("truth", "kind", "matched", "position mm", "size %", "colour dist", "identity"):
            objects.add_column(column)
        for o in report.objects:
            objects.add_row(o.truth_id, o.truth_kind, o.matched_id or "-", _fmt(o.position_error_mm),
                            _fmt(o.size_error_pct), _fmt(o.colour_distance, 2),
                            "ok" if o.identity_ok else ("no match" if o.matched_id is None else
                                                        "wrong kind" if not o.kind_ok else "wrong colour"))
        out.print(objects)
        if report.extra_objects:
            out.print(f"grounded objects matching nothing: {', '.join(report.extra_objects)}")
        cameras = Table(title="cameras")
        for column in ("camera", "tag", "position mm", "rotation deg", "focal %"):
            cameras.add_column(column)
        for c in report.cameras:
            cameras.add_row(c.name, c.extrinsics_tag or "missing", _fmt(c.position_error_mm), _fmt(c.rotation_error_deg, 2),
                            _fmt(c.focal_error_pct))
        out.print(cameras)
        for a in report.arms:
            out.print(f"arm {a.name}: " + (f"base {_fmt(a.position_error_mm)} mm, yaw {_fmt(a.yaw_error_deg, 2)} deg"
                                           if a.found else "missing"))
        c = report.criteria
        out.print(f"{'PASS' if report.passed else 'FAIL'} (objects <= {c.position_mm:g} mm and {c.size_pct:g} %, "
                  f"identified; cameras <= {c.camera_position_mm:g} mm and {c.camera_rotation_deg:g} deg)")
    if strict and not report.passed:
        raise typer.Exit(code=1)
