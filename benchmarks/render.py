"""Render throughput: raw sim render passes vs the full composite pipeline, on one demo episode.

    .venv/bin/python benchmarks/render.py [--steps 200] [--resolution 320x240] [--json]

Builds the demo (a synthetic three-camera clip, G for it, a scripted dual-PiPER episode; see
datafarm.renderers.demo) in a temporary folder, warms the renderer up (SAPIEN compiles its shaders
on the first frame of a process), then measures in the same process:

- raw passes: RGB + depth + segmentation of every camera for every control step, replayed from the
  recorded states (what `RenderPasses` costs alone);
- composite pipeline: `render_episode` end to end: world and cameras, clean plates and appearance fits
  from the clip, the passes again, edge maps, compositing, chunk joins, H.264 encoding of the obs and
  sim videos of every camera, render.json.

Frames/s count episode frames (one control step, all cameras). The target: the pipeline adds no more
than 50 % to the raw passes' time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from datafarm.artifacts.render_contract import RenderContract  # noqa: E402
from datafarm.renderers import render_episode  # noqa: E402
from datafarm.renderers.demo import REAL_COLOURS, example_grounding, write_demo_clip, write_demo_episode  # noqa: E402
from datafarm.renderers.pipeline import prepare_episode  # noqa: E402

TARGET_OVERHEAD = 0.5
"""The pipeline may add at most this fraction to the raw passes' time."""


def _contract(width: int, height: int, chunk: int, overlap: int) -> RenderContract:
    return RenderContract.model_validate({
        "mode": "sim2real", "cameras": [{"camera": c, "frames": [0, 12]} for c in ("front", "left", "right")],
        "appearance": {"scene": "a wooden table in front of a grey wall",
                       "objects": {k: {"colour": list(v)} for k, v in REAL_COLOURS.items()}},
        "renderer": {"name": "composite"}, "chunk_frames": chunk, "overlap_frames": overlap, "fps": 20.0,
        "resolution": [width, height]})


def run(steps: int, width: int, height: int, chunk: int, overlap: int) -> dict:
    """Measure both figures; returns them with the pipeline's own time breakdown."""
    with tempfile.TemporaryDirectory(prefix="datafarm-bench-") as tmp:
        root = Path(tmp)
        clip = write_demo_clip(root / "clip", width, height)
        grounding = example_grounding(clip)
        episode = root / "episode"
        write_demo_episode(episode, grounding, steps=steps)
        contract = _contract(width, height, chunk, overlap)
        task = "Pick up the red cup and place it inside the blue cup."

        started = time.perf_counter()
        prepared = prepare_episode(episode, grounding=grounding, contract=contract, clip_dir=clip, task=task,
                                   work_dir=root)
        prepared.passes.render(prepared.states[0])  # shader compilation happens here, once per process
        warmup = time.perf_counter() - started

        def raw_passes() -> float:
            t0 = time.perf_counter()
            for state in prepared.states:
                prepared.passes.render(state)
            return time.perf_counter() - t0

        # raw passes before and after the pipeline, averaged: a shared machine's load drifts
        before = raw_passes()
        t0 = time.perf_counter()
        record = render_episode(episode, grounding=grounding, contract=contract, clip_dir=clip, task=task)
        pipeline = time.perf_counter() - t0
        after = raw_passes()
        raw = (before + after) / 2
    cameras = len(record.cameras)
    return {
        "steps": steps, "cameras": cameras, "resolution": [width, height], "chunk_frames": chunk,
        "overlap_frames": overlap, "warmup_s": round(warmup, 3),
        "raw_passes": {"seconds": round(raw, 3), "runs_s": [round(before, 3), round(after, 3)],
                       "frames_per_s": round(steps / raw, 2),
                       "camera_images_per_s": round(steps * cameras / raw, 1)},
        "pipeline": {"seconds": round(pipeline, 3), "frames_per_s": round(steps / pipeline, 2),
                     "camera_images_per_s": round(steps * cameras / pipeline, 1),
                     "breakdown_s": {k: round(v, 3) for k, v in record.timing.model_dump().items()}},
        "overhead": round(pipeline / raw - 1.0, 3), "target_overhead": TARGET_OVERHEAD,
        "added_work": round((pipeline - record.timing.passes_s) / raw, 3),
        "meets_target": pipeline / raw - 1.0 <= TARGET_OVERHEAD,
    }


def table(result: dict) -> str:
    """The result as a plain-text table."""
    raw, pipe = result["raw_passes"], result["pipeline"]
    w, h = result["resolution"]
    lines = [
        f"render benchmark: demo episode, {result['steps']} control steps, {result['cameras']} cameras at {w}x{h}, "
        f"chunks of {result['chunk_frames']} (overlap {result['overlap_frames']})",
        "",
        f"{'stage':<34}{'seconds':>10}{'frames/s':>10}{'images/s':>10}",
        f"{'raw sim render passes':<34}{raw['seconds']:>10.2f}{raw['frames_per_s']:>10.1f}{raw['camera_images_per_s']:>10.1f}",
        f"{'composite pipeline (end to end)':<34}{pipe['seconds']:>10.2f}{pipe['frames_per_s']:>10.1f}"
        f"{pipe['camera_images_per_s']:>10.1f}",
        "",
        f"pipeline overhead over raw passes: {100 * result['overhead']:+.1f} % "
        f"(target <= +{100 * result['target_overhead']:.0f} %: {'met' if result['meets_target'] else 'NOT met'})",
        f"work the pipeline adds besides its own passes: {100 * result['added_work']:.1f} % of the raw passes' time",
        "pipeline breakdown (s): " + ", ".join(f"{k.removesuffix('_s')} {v:.2f}" for k, v in pipe["breakdown_s"].items()),
        f"(warm-up, not counted: {result['warmup_s']:.1f} s incl. shader compilation)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="control steps in the demo episode (default 200)")
    parser.add_argument("--resolution", default="320x240", help="per-camera WIDTHxHEIGHT, even (default 320x240)")
    parser.add_argument("--chunk", type=int, default=81, help="chunk_frames (default 81)")
    parser.add_argument("--overlap", type=int, default=8, help="overlap_frames (default 8)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.resolution.lower().split("x"))
    result = run(args.steps, width, height, args.chunk, args.overlap)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
