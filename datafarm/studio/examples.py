"""The example requests' clips: every `examples/<task>/scene.yaml` rendered into `examples/<task>/clip/`
with its truth in `examples/<task>/truth.json`.

Regenerate them all with `python -m datafarm.studio.examples` (what `make examples` runs), or some of
them by name: `python -m datafarm.studio.examples nest_cups use_drawer`. One process renders them all
(SAPIEN compiles its shaders once per process).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from datafarm.studio.render import RenderedClip, render_clip

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
"""The repository's examples folder (one subfolder per task, each with scene.yaml and request.yaml)."""
SCENE_FILE = "scene.yaml"
"""The studio scene of an example."""
CLIP_DIR = "clip"
"""The example's clip folder, named by its request.yaml."""


def example_names(root: Path | str = EXAMPLES_DIR) -> list[str]:
    """Names of the examples under `root` that have a scene.yaml, sorted."""
    return sorted(p.parent.name for p in Path(root).glob(f"*/{SCENE_FILE}"))


def regenerate(names: Sequence[str] | None = None, root: Path | str = EXAMPLES_DIR) -> list[RenderedClip]:
    """Render the named examples (default: all) from their scene.yaml; returns what was written."""
    root = Path(root)
    available = example_names(root)
    chosen = list(names) if names else available
    unknown = sorted(set(chosen) - set(available))
    if unknown:
        raise SystemExit(f"no example scene for {', '.join(unknown)}; examples: {', '.join(available)}")
    return [render_clip(root / name / SCENE_FILE, root / name / CLIP_DIR, root / name / "truth.json") for name in chosen]


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: regenerate example clips and print what each holds."""
    parser = argparse.ArgumentParser(description="Regenerate the example clips from their studio scenes.")
    parser.add_argument("names", nargs="*", help="examples to render (default: all)")
    parser.add_argument("--root", type=Path, default=EXAMPLES_DIR, help="examples folder (default: %(default)s)")
    args = parser.parse_args(argv)
    total = 0
    for clip in regenerate(args.names, args.root):
        size = sum(p.stat().st_size for p in clip.clip_dir.iterdir() if p.is_file())
        total += size
        cams = ", ".join(f"{c.name} {c.width}x{c.height}" for c in clip.report.cameras)
        print(f"{clip.clip_dir}: {clip.report.frames} frames @ {clip.truth.fps:g} fps ({cams}), "
              f"{size / 1e6:.2f} MB, {clip.seconds:.1f} s; truth {clip.truth_path}")
    print(f"total clip size {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
