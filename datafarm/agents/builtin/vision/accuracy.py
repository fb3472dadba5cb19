"""Measure the builtin grounding's accuracy on studio clips with a truth.json (the examples'):

    python -m datafarm.agents.builtin.vision.accuracy examples/nest_cups examples/weigh_apple ...

For each folder (`clip/`, `truth.json`, and `request.yaml` for the task text and robot), the clip is
grounded exactly as the builtin author's grounding stage does it (the same frames, the same vision:
`ground_scene`), and the result is scored against the truth with `datafarm studio score`'s logic.
Prints one line per folder and exits 1 when any misses the issue's targets (object position <= 20 mm,
size <= 20 %, camera pose <= 20 mm and 2 degrees, every object identified).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from datafarm.agents.builtin.grounding import frame_indices


def ground_folder(folder: Path, task: str | None = None, robot: str | None = None):
    """(G, seconds) for an example-like folder, grounded from its clip as the builtin stage does."""
    from datafarm.agents.builtin.vision.scene import (
        CameraInput,
        SceneInput,
        ground_scene,
    )
    from datafarm.agents.images import read_frame
    from datafarm.artifacts.clip import ClipSpec
    from datafarm.artifacts.grounding import Grounding
    from datafarm.artifacts.io import load_artifact
    from datafarm.intake.video import probe_video

    clip = folder / "clip"
    request = yaml.safe_load((folder / "request.yaml").read_text()) if (folder / "request.yaml").is_file() else {}
    task = task or request.get("task")
    if not task:
        raise SystemExit(f"{folder}: no request.yaml with a task; give --task")
    robot = robot or request.get("robot", "piper-dual")
    spec = load_artifact(ClipSpec, clip / "clip.yaml")
    board = yaml.safe_load((clip / "board.yaml").read_text()) if (clip / "board.yaml").is_file() else None
    start = time.perf_counter()
    cameras = []
    for cam in spec.cameras:
        probe = probe_video(clip / cam.video)
        indices = frame_indices(probe.frames)
        cameras.append(CameraInput(cam.name, cam.video, probe.width, probe.height, cam.intrinsics, cam.extrinsics,
                                   [read_frame(clip / cam.video, i) for i in indices], indices))
    scene = ground_scene(SceneInput(cameras, robot, spec.robot_base, board, task))
    return Grounding.model_validate(scene.grounding), time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    from datafarm.studio.score import score_grounding
    from datafarm.studio.truth import load_truth

    parser = argparse.ArgumentParser(description="Score the builtin grounding against studio truths.")
    parser.add_argument("folders", nargs="+", type=Path, help="folders holding clip/, truth.json and request.yaml")
    parser.add_argument("--task", help="task text (default: the folder's request.yaml)")
    args = parser.parse_args(argv)
    ok = True
    print(f"{'scene':<16}{'objects':>8}{'pos mm':>9}{'size %':>9}{'cam mm':>9}{'cam deg':>9}{'ids':>6}{'s':>7}  result")
    for folder in args.folders:
        g, seconds = ground_folder(folder, args.task)
        report = score_grounding(g, load_truth(folder / "truth.json"))
        ok &= report.passed

        def fmt(v: float | None, digits: int = 1) -> str:
            return "-" if v is None else f"{v:.{digits}f}"

        print(f"{folder.name:<16}{len(report.objects):>8}{fmt(report.max_position_error_mm):>9}"
              f"{fmt(report.max_size_error_pct):>9}{fmt(report.max_camera_position_error_mm):>9}"
              f"{fmt(report.max_camera_rotation_error_deg, 2):>9}{'ok' if report.identities_ok else 'no':>6}"
              f"{seconds:>7.1f}  {'pass' if report.passed else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
