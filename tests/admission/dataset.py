"""A real compiled dataset for the admission tests, and the tampering they do to it.

`compile_example` compiles a copy of examples/nest_cups with `episodes: 2` through all ten stages,
exactly as `datafarm compile` does (builtin agents, SAPIEN, bwrap, the composite renderer, the
calibrated verifier, the builtin reviewer), in two steps:

1. the stages up to review (`run_pipeline(..., stop_after=review)`): a snapshot is copied here: every
   episode rendered, verified and reviewed, none admitted yet (what `write_admission` is given);
2. `compile --resume`, which runs stage 10: q for every episode, `datafarm admit`, certificate.json.

So q holds real verifier results (under a calibrated spec), real builtin reviews and real renders.
Helpers below tamper with copies of it; nothing here stands in for a pipeline component.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.stages import Stage
from datafarm.compiler import compile_lock, compile_request
from datafarm.harness.rollout import RolloutResult, run_rollout
from datafarm.intake import check_request
from datafarm.ledger import Ledger
from datafarm.pipeline import PipelineContext, run_pipeline
from datafarm.renderers.record import RENDER_RECORD, RenderRecord
from datafarm.renderers.video import VideoWriter, read_video
from datafarm.sim.episode_io import read_episode, recording_tables
from datafarm.taskdir import TaskDir

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "nest_cups"
"""The example request compiled (its clip is reused as is)."""
EPISODES = 2
"""Episodes the compiled copy asks for (B's n)."""
SLOW_COMPILE = [pytest.mark.slow, pytest.mark.timeout(1800)]
"""The marks of every test module that uses the compile: slow, and a timeout that leaves room for the
session's compile, which runs inside whichever of their tests comes first."""


@dataclass(frozen=True)
class Compiled:
    """The two snapshots of one compile."""

    reviewed: Path
    """The task folder after stage 9: every episode rendered, verified and reviewed; none admitted."""
    admitted: Path
    """The same compile resumed to the end: every episode admitted, the dataset certified."""
    request: Path
    """The request compiled (a copy of the example's asking for EPISODES episodes)."""


def _progress() -> Callable[[str], None]:
    """Compile's progress lines on stderr with the seconds since the compile began (`pytest -s` shows them)."""
    started = time.monotonic()
    return lambda message: print(f"[compile {time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)


def example_request(folder: Path, episodes: int = EPISODES) -> Path:
    """A copy of the example request (and its clip) in `folder`, asking for `episodes` episodes."""
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("runs"))
    request = folder / "request.yaml"
    text, count = re.subn(r"^episodes: \d+$", f"episodes: {episodes}", request.read_text(), flags=re.MULTILINE)
    assert count == 1, "the example request no longer has an `episodes:` line"
    request.write_text(text)
    return request


def compile_example(base: Path, episodes: int = EPISODES) -> Compiled:
    """Compile the example in `base` (see the module docstring); AssertionError naming the stage and
    its reason when compile stops before a certified dataset."""
    request_path = example_request(base / "request", episodes)
    out, progress = base / "out", _progress()
    created = compile_request(request_path, output=out, run_stages=False)
    task = created.task_dir
    request, _ = check_request(request_path)
    with compile_lock(task):
        outcome = run_pipeline(PipelineContext(request=request, task=task, ledger=Ledger(task.ledger), progress=progress),
                               stop_after=Stage.review)
    assert outcome.stopped_at is None and not outcome.not_built, \
        f"compile stopped at {outcome.stopped_at}: {outcome.stop_reason} {outcome.not_built or ''}"
    reviewed = Path(shutil.copytree(task.root, base / "reviewed" / task.root.name, symlinks=True))
    resumed = compile_request(request_path, output=out, resume=True, progress=progress)
    assert resumed.pipeline.stopped_at is None, \
        f"compile --resume stopped at {resumed.pipeline.stopped_at}: {resumed.pipeline.stop_reason}"
    return Compiled(reviewed=reviewed, admitted=task.root, request=request_path)


# --- reading it -----------------------------------------------------------------------------------


def episodes(task: Path) -> list[Path]:
    """The episode folders of a task, sorted."""
    return sorted(p for p in TaskDir(task).episodes_dir.iterdir() if p.is_dir())


def cameras(folder: Path) -> list[str]:
    """The cameras an episode was rendered for."""
    return list(load_artifact(RenderRecord, folder / RENDER_RECORD).cameras)


def most_moved_object(folder: Path) -> tuple[str, int, int]:
    """(object id, first step, last step) of the object the episode moves the farthest, with the
    steps between which it moves (chosen from the recording, never by name)."""
    recording = read_episode(folder).recording
    best: tuple[float, str] = (-1.0, "")
    for oid in recording.object_ids:
        poses = recording.object_poses(oid)[:, :3]
        best = max(best, (float(np.linalg.norm(poses[-1] - poses[0])), oid))
    poses = recording.object_poses(best[1])[:, :3]
    moving = np.flatnonzero(np.linalg.norm(np.diff(poses, axis=0), axis=1) > 1e-4)
    return best[1], int(moving[0]), int(moving[-1])


def passing_admission_rollout(task: Path, indices: range, **options) -> RolloutResult:
    """Run real admission rollouts on `indices` in order until one passes J (admission seeds come from
    the task's random secret, so which one passes is not known in advance); AssertionError if none does."""
    failed = []
    for index in indices:
        result = run_rollout(task, kind="admission", index=index, **options)
        if result.passed and result.in_episodes:
            return result
        failed.append(f"#{index}: {result.summary.reason}")
    raise AssertionError(f"no admission seed in {list(indices)} passed: {'; '.join(failed) or 'none left'}")


# --- tampering ------------------------------------------------------------------------------------


def flip_byte(path: Path, at: float = 1 / 3) -> None:
    """Flip one bit of the byte at fraction `at` of the file."""
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x20
    path.write_bytes(bytes(data))


def shift_object(folder: Path, object_id: str, shift: float, from_step: int) -> None:
    """Rewrite `data/states.parquet` as a valid file in which `object_id` sits `shift` m further along
    x from `from_step` on (what a hand-edited trajectory looks like)."""
    recording = read_episode(folder).recording
    k = recording.object_ids.index(object_id)
    recording.objects[from_step:, k, 0] += shift
    pq.write_table(recording_tables(recording)["states"], folder / "data" / "states.parquet")


def rewrite_video(path: Path, change: Callable[[np.ndarray], np.ndarray], fps: float) -> None:
    """Decode `path`, apply `change` to every frame, and encode it again with datafarm's writer."""
    frames, _ = read_video(path)
    height, width = frames.shape[1:3]
    with VideoWriter(path, width, height, fps) as writer:
        for frame in frames:
            writer.write(change(frame.copy()))


def saturated(frame: np.ndarray, spread: int = 60) -> np.ndarray:
    """Pixels whose channels differ by more than `spread` (strongly coloured, not grey or white)."""
    f = frame.astype(np.int16)
    return (f.max(axis=-1) - f.min(axis=-1)) > spread


def recolour_objects(folder: Path) -> None:
    """A visibly wrong render: in every obs/ video, every strongly coloured pixel has its red and blue
    channels swapped (a red object turns blue, a blue one red); sim/ videos and the state stay."""
    fps = load_artifact(RenderRecord, folder / RENDER_RECORD).fps

    def swap(frame: np.ndarray) -> np.ndarray:
        mask = saturated(frame)
        frame[mask] = frame[mask][:, [2, 1, 0]]
        return frame

    for camera in cameras(folder):
        rewrite_video(folder / "obs" / f"{camera}.mp4", swap, fps)
