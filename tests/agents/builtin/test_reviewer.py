"""The builtin reviewer on a rendered demo episode: it accepts the clean episode with evidence for every
claim, and rejects corrupted copies of it with the claim that the corruption breaks failing (views
swapped, an object recoloured, the background replaced, the video frozen, the video cut short). It
works through its own tools only (no tool reaches the author's transcripts or J), and its exchanges
are recorded in transcripts/reviewer/ and the ledger under the builtin provider."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

from datafarm.agents import ReviewMaterial, TaskAgents, review_task
from datafarm.agents.access import AccessDenied
from datafarm.agents.builtin.common import BuiltinRefusal
from datafarm.agents.builtin.review_checks import parse_facts
from datafarm.agents.builtin.reviewer import respond, state_summary
from datafarm.agents.messages import ToolCall
from datafarm.agents.providers.function import _BUILTIN_LOADED
from datafarm.agents.tools.base import ToolContext
from datafarm.artifacts.admission import ReviewVerdict
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.request import Request
from datafarm.artifacts.stages import Stage
from datafarm.errors import InputError
from datafarm.ledger import Ledger
from datafarm.renderers import render_episode
from datafarm.renderers.demo import (
    example_grounding,
    write_demo_clip,
    write_demo_episode,
)
from datafarm.renderers.video import VideoWriter, read_video
from datafarm.taskdir import TaskDir
from tests.renderers.helpers import CAMERAS, TASK, contract, device

STEPS = 24
"""Control steps of the demo episode (frames per video)."""
REFERENCES = {camera: [0, 15] for camera in CAMERAS}
"""R's reference frames per camera (as tests.renderers.helpers.contract names them)."""
REVIEWER_TOOLS = {"fetch_rendered_frame", "fetch_reference_frame", "pixel_colour", "region_stats", "find_colour",
                  "sim_state_summary", "write_verdict"}
CLAIMS = ("frames", "views", "background", "appearance", "motion")
"""The reviewer's claims (each claim's text starts with its name), in the order it writes them."""


@pytest.fixture(autouse=True)
def builtin_reviewer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builtin provider's reviewer logic (what register_builtin_role does), undone after each test."""
    monkeypatch.setitem(_BUILTIN_LOADED, "reviewer", respond)


def _request(clip: Path) -> Request:
    return Request.model_validate({"task": TASK, "clip": str(clip), "episodes": 1, "mode": "sim2real"})


def _task(root: Path, request: Request) -> TaskDir:
    root.mkdir(parents=True, exist_ok=True)
    (root / "request.yaml").write_text(yaml.safe_dump(request.model_dump(mode="json"), sort_keys=False))
    return TaskDir(root)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[TaskDir, Request, str]:
    """A task folder with the demo episode rendered as `episodes/clean`, and its sim-state summary."""
    base = tmp_path_factory.mktemp("review")
    clip = write_demo_clip(base / "clip")
    grounding = example_grounding(clip)
    request = _request(clip)
    task = _task(base / "task", request)
    episode = task.episode("clean")
    write_demo_episode(episode, grounding, steps=STEPS, episode_id="clean")
    render_episode(episode, grounding=grounding, contract=contract(), clip_dir=clip, task=TASK)
    summary = state_summary(episode, grounding, reference_frames=REFERENCES)
    return task, request, summary


def _review(task: TaskDir, request: Request, episode: str, summary: str) -> ReviewVerdict:
    material = ReviewMaterial(Path("episodes") / episode, summary, REFERENCES)
    TaskAgents.open(request, task).reviewer(material).run(review_task())
    return load_artifact(ReviewVerdict, task.episode(episode) / "review.json")


def _claim(verdict: ReviewVerdict, name: str):
    [claim] = [c for c in verdict.claims if c.claim.startswith(f"{name}:")]
    return claim


# --- corruptions of the rendered videos (obs/ only: the sim state stays the clean episode's) -----------


def _rewrite(video: Path, change: Callable[[np.ndarray, int], np.ndarray | None]) -> None:
    frames, _ = read_video(video)
    height, width = frames.shape[1:3]
    with VideoWriter(video, width, height, 20.0) as writer:
        for i, frame in enumerate(frames):
            out = change(frame.copy(), i)
            if out is not None:
                writer.write(out)


def swap_views(obs: Path, summary: str) -> None:
    """The front and left videos trade places."""
    (obs / "front.mp4").rename(obs / "tmp.mp4")
    (obs / "left.mp4").rename(obs / "front.mp4")
    (obs / "tmp.mp4").rename(obs / "left.mp4")


def recolour_red_cup(obs: Path, summary: str) -> None:
    """The red cup turns green in every frame of every camera (its red and green channels swapped)."""
    def change(frame: np.ndarray, _: int) -> np.ndarray:
        r, g, b = (frame[..., c].astype(int) for c in range(3))
        red = (r > 80) & (r - g > 45) & (r - b > 45)
        frame[red] = frame[red][:, [1, 0, 2]]
        return frame

    for camera in CAMERAS:
        _rewrite(obs / f"{camera}.mp4", change)


def replace_background(obs: Path, summary: str) -> None:
    """Everything but the robot and the objects (the sim's regions in each frame) shows another room:
    the same pixels with their colour channels rotated."""
    facts = parse_facts(summary)
    assert facts is not None

    def change(keyframes: list, frame: np.ndarray, i: int) -> np.ndarray:
        nearest = min(keyframes, key=lambda k: abs(k.frame - i))
        keep = np.zeros(frame.shape[:2], dtype=bool)
        for x0, y0, x1, y1 in nearest.boxes():
            keep[y0:y1, x0:x1] = True
        frame[~keep] = frame[~keep][:, [2, 0, 1]]
        return frame

    for camera in CAMERAS:
        _rewrite(obs / f"{camera}.mp4", functools.partial(change, facts.camera(camera).keyframes))


def freeze_video(obs: Path, summary: str) -> None:
    """Every camera's video shows its first frame throughout (nothing moves)."""
    def change(first: list[np.ndarray], frame: np.ndarray, i: int) -> np.ndarray:
        if i == 0:
            first.append(frame)
        return first[0]

    for camera in CAMERAS:
        _rewrite(obs / f"{camera}.mp4", functools.partial(change, []))


def cut_short(obs: Path, summary: str) -> None:
    """Every video loses its last three frames."""
    for camera in CAMERAS:
        _rewrite(obs / f"{camera}.mp4", lambda frame, i: frame if i < STEPS - 3 else None)


@pytest.mark.render
@pytest.mark.slow
@device
def test_the_clean_episode_is_accepted_with_evidence_for_every_claim(rendered) -> None:
    task, request, summary = rendered
    verdict = _review(task, request, "clean", summary)
    assert verdict.accepted and verdict.route_to is None, [c.model_dump() for c in verdict.claims if not c.holds]
    assert verdict.provider == "builtin" and verdict.model == "builtin"
    assert [c.claim.partition(":")[0] for c in verdict.claims] == list(CLAIMS)
    for claim in verdict.claims:
        assert claim.holds and claim.evidence
        assert {e.camera for e in claim.evidence if e.camera} == set(CAMERAS) and all(e.note for e in claim.evidence)
    assert "- red_cup (cup): starts at (0.1, 0.14, 0.0)" in summary and "- blue_cup (cup)" in summary
    assert "stays in place" in summary and "Judge: passed" in summary
    facts = parse_facts(summary)
    assert facts is not None and facts.keyframes[0] == 0 and facts.keyframes[-1] == STEPS - 1
    assert [c.camera for c in facts.cameras] == list(CAMERAS) and all(len(c.table) == 4 for c in facts.cameras)
    assert all(k.objects["red_cup"] and k.robot for c in facts.cameras for k in c.keyframes)
    moved = _claim(verdict, "motion")
    assert any("red_cup (moved" in e.note and "as the sim says" in e.note for e in moved.evidence)
    assert any("blue_cup (still" in e.note for e in moved.evidence)

    # its exchanges: transcripts/reviewer/ and the ledger, under the builtin provider
    transcripts = sorted((task.transcripts_dir / "reviewer").glob("*.json"))
    assert len(transcripts) == 3  # summary, frames, verdict
    records = [json.loads(p.read_text()) for p in transcripts]
    assert {r["provider"] for r in records} == {"builtin"} and all(r["role"] == "reviewer" for r in records)
    assert sum(p["type"] == "image" for r in records for t in r["tool_results"] for p in t["content"]) >= 3 * 5 + 3 * 2
    calls = [e for e in Ledger(task.ledger).entries() if e.actor.role == "reviewer"]
    assert len(calls) == 3 and {(e.actor.provider, e.stage) for e in calls} == {("builtin", Stage.review)}
    assert "episodes/clean/review.json" in calls[-1].outputs

    again = _review(task, request, "clean", summary)  # the builtin is deterministic
    assert again == verdict


CORRUPTIONS = [  # corruption, the claim it breaks, what that claim's evidence says, claims that still hold
    (swap_views, "views", "it shows left's view", {"frames"}),
    (recolour_red_cup, "appearance", "red_cup: real colour", {"frames", "views", "background"}),
    (replace_background, "background", "background pixels", {"frames", "views", "appearance", "motion"}),
    (freeze_video, "motion", "not where the sim puts it", {"frames", "views", "background", "appearance"}),
    (cut_short, "frames", "could not be fetched", {"views", "background", "appearance"}),
]


@pytest.mark.render
@pytest.mark.slow
@device
@pytest.mark.parametrize("corrupt, failing, says, holding", CORRUPTIONS, ids=[c[0].__name__ for c in CORRUPTIONS])
def test_a_corrupted_episode_is_rejected_by_the_claim_it_breaks(rendered, corrupt, failing: str, says: str,
                                                                 holding: set[str]) -> None:
    task, request, summary = rendered
    episode = task.episode(corrupt.__name__)
    shutil.copytree(task.episode("clean") / "obs", episode / "obs")
    corrupt(episode / "obs", summary)
    verdict = _review(task, request, corrupt.__name__, summary)
    assert not verdict.accepted and verdict.route_to == Stage.render
    claim = _claim(verdict, failing)
    assert not claim.holds
    assert any(says in e.note for e in claim.evidence), [e.note for e in claim.evidence]
    for name in holding:  # the reviewer pinpoints the defect: the rest of the episode still passes
        assert _claim(verdict, name).holds, (name, [e.note for e in _claim(verdict, name).evidence])


@pytest.mark.render
@pytest.mark.slow
@device
def test_an_ood_episode_is_judged_against_its_allowed_variations(rendered) -> None:
    """A tablecloth and a warm light are what R allowed: accepted. The same video reviewed as if the
    episode were sim2real (no variations in the summary) has the wrong background."""
    task, request, _ = rendered
    base = task.root.parent
    grounding = example_grounding(base / "clip")
    episode = task.episode("ood")
    write_demo_episode(episode, grounding, steps=STEPS, episode_id="ood")
    record = render_episode(episode, grounding=grounding, contract=contract(mode="ood"), clip_dir=base / "clip", task=TASK)
    assert record.variations == {"tablecloth": "red_check", "light_colour": "warm"}
    summary = state_summary(episode, grounding, reference_frames=REFERENCES)
    verdict = _review(task, request, "ood", summary)
    assert verdict.accepted, [e.note for c in verdict.claims if not c.holds for e in c.evidence]
    assert any("the table top is left out (ood tablecloth)" in e.note for e in _claim(verdict, "background").evidence)

    as_sim2real = summary.replace('"mode":"ood","variations":{"tablecloth":"red_check","light_colour":"warm"}',
                                  '"mode":"sim2real","variations":{}')
    assert as_sim2real != summary
    shutil.copytree(episode / "obs", task.episode("ood_as_sim2real") / "obs")
    verdict = _review(task, request, "ood_as_sim2real", as_sim2real)
    assert not verdict.accepted and not _claim(verdict, "background").holds


# --- boundaries (no render needed) ---------------------------------------------------------------------


@pytest.fixture
def bare_task(tmp_path: Path) -> tuple[TaskDir, Request]:
    """A task folder with the author's transcript and J planted, and an episode folder to review."""
    clip = write_demo_clip(tmp_path / "clip", width=64, height=48, frames=4)
    request = _request(clip)
    task = _task(tmp_path / "task", request)
    for rel, text in {"transcripts/author/0001.json": '{"marker": "AUTHOR-9153"}', "judge/spec.json": '{"marker": "J-9153"}'}.items():
        (task.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (task.root / rel).write_text(text)
    (task.episode("ep") / "obs").mkdir(parents=True)
    return task, request


def test_the_reviewer_has_no_tool_that_reaches_transcripts_or_the_judge(bare_task) -> None:
    task, request = bare_task
    agents = TaskAgents.open(request, task)
    agent = agents.reviewer(ReviewMaterial(Path("episodes/ep"), "summary"))
    assert set(agent.tools.names) == REVIEWER_TOOLS
    context = ToolContext("reviewer", review_task(), "builtin", "builtin")
    for name, view in [("fetch_rendered_frame", "../../../transcripts/author/0001"),
                       ("fetch_rendered_frame", "../../../judge/spec"),
                       ("fetch_reference_frame", "../../task/transcripts/author/0001")]:
        result, _ = agent.tools.run(ToolCall("c", name, {"view": view, "frame": 0}), context)
        assert result.is_error and "9153" not in result.text
    assert "reviewer may not read transcripts" in agent.tools.run(
        ToolCall("c", "fetch_rendered_frame", {"view": "../../../transcripts/author/0001", "frame": 0}), context)[0].text
    with pytest.raises(AccessDenied, match="transcripts is private"):
        agents.reviewer(ReviewMaterial(Path("transcripts/author"), "summary"))
    with pytest.raises(AccessDenied, match="judge is private"):
        agents.reviewer(ReviewMaterial(Path("judge"), "summary"))


def test_a_summary_needs_a_rendered_episode(bare_task) -> None:
    task, _ = bare_task
    with pytest.raises(InputError, match="has not been rendered"):
        state_summary(task.episode("ep"), example_grounding(task.root.parent / "clip"))


def test_a_summary_without_review_facts_is_refused_and_recorded(bare_task) -> None:
    task, request = bare_task
    agent = TaskAgents.open(request, task).reviewer(ReviewMaterial(Path("episodes/ep"), "red cup ends in the blue cup"))
    with pytest.raises(BuiltinRefusal, match="no review facts") as refusal:
        agent.run(review_task())
    assert refusal.value.kind == "needs_input" and refusal.value.stage == "review"
    transcripts = sorted((task.transcripts_dir / "reviewer").glob("*.json"))
    assert [json.loads(p.read_text())["error"] is not None for p in transcripts] == [False, True]
    for p in transcripts:
        assert "9153" not in p.read_text()
    assert [e.outcome.value for e in Ledger(task.ledger).entries()] == ["ok", "error"]
    assert not (task.episode("ep") / "review.json").exists()
