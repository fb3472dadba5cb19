"""Rejection routing in compile, with injected defects (issue 8, item 5).

The defects are injected by the tests, in the open: a composite renderer that leaves an object out
of one view on chosen renders (registered in the renderer registry under R's renderer name, producing
real videos that the real verifier checks; an object missing from *every* view would route to
grounding, as the objects check says), and an expert controller that claims success without acting
(written over the builtin author's controller after the expert stage). Everything else is the real
pipeline: SAPIEN rollouts in the sandbox, the frozen judge, the calibrated verifier, the reviewer,
admission and `admit`.

Measured on 2 cores shared with other work (load about 6): the render test, a whole compile of 2
episodes plus a replacement rollout and 3 more renders and verifications, 547 s (the verifier's
calibration is a third of it); the expert tests, which stop after the rollouts, 103 s and 81 s.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from datafarm import pipeline
from datafarm.admission.admit import admit
from datafarm.agents.builtin import default_batch
from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.ledger_entry import LedgerEntry, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.compiler import compile_request
from datafarm.intake import load_request
from datafarm.ledger import Ledger
from datafarm.pipeline import PipelineContext, run_pipeline
from datafarm.renderers import registry
from datafarm.renderers.base import RenderJob
from datafarm.renderers.composite.renderer import CompositeRenderer
from datafarm.renderers.record import RenderRecord

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nest_cups"
pytestmark = pytest.mark.slow


# --- the injected defects ------------------------------------------------------------------------------


class ObjectDroppingComposite(CompositeRenderer):
    """The composite renderer with an injected defect: on the renders `drops(episode_id, k)` picks (k:
    the k-th render of that episode in this process) it leaves G's first object out of the first
    camera's view, so the clean background plate shows where the object is. The videos are real; only
    the object is missing there, as from a broken video model."""

    drops: ClassVar[Callable[[str, int], bool]] = staticmethod(lambda episode_id, k: False)
    renders: ClassVar[dict[str, int]] = {}
    dropped: ClassVar[list[tuple[str, int, str]]] = []

    def prepare(self, job: RenderJob) -> None:
        """Prepare as the composite does, then drop the object from the first camera's lookup tables."""
        super().prepare(job)
        k = self.renders[job.episode_id] = self.renders.get(job.episode_id, 0) + 1
        if type(self).drops(job.episode_id, k):
            oid = job.segments.object_ids[0]
            del self._cameras[job.layout.cameras[0]].luts[job.segments.object_class(oid)]
            self.dropped.append((job.episode_id, k, oid))


def admission_index(episode_id: str) -> int:
    """The admission index in an admission episode's id (`adm-0001-...`)."""
    return int(re.match(r"adm-(\d+)-", episode_id).group(1))


@pytest.fixture
def dropping_renderer(monkeypatch):
    """R's renderer `composite` resolved to ObjectDroppingComposite for this test."""
    monkeypatch.setitem(registry._RENDERERS, "composite", f"{__name__}:ObjectDroppingComposite")
    monkeypatch.setattr(ObjectDroppingComposite, "renders", {})
    monkeypatch.setattr(ObjectDroppingComposite, "dropped", [])
    return ObjectDroppingComposite


def defective_expert(versions: set[int], calls: list[int]) -> Callable[[PipelineContext], list[Path]]:
    """The real expert stage, after which expert versions in `versions` (1 = the first time the stage
    runs) get a controller that waits a second and claims success without moving the robot."""

    def run(ctx: PipelineContext) -> list[Path]:
        outputs = pipeline.run_expert(ctx)
        calls.append(len(calls) + 1)
        if calls[-1] in versions:
            controller = ctx.task.expert_dir / "controller.py"
            code = controller.read_text()
            assert code.rstrip().endswith("main()")
            controller.write_text(code.rstrip()[: -len("main()")]
                                  + "robot = Harness()\nrobot.wait(1.0)\n"
                                  + "robot.done(success=True, note='injected defect: claims success without acting')\n")
        return outputs

    return run


# --- helpers ----------------------------------------------------------------------------------------------


def task_context(tmp_path: Path, episodes: int) -> PipelineContext:
    """A fresh task folder for a private copy of the nest_cups example asking for `episodes` episodes."""
    dst = tmp_path / "nest_cups"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("runs"))
    request = dst / "request.yaml"
    request.write_text(re.sub(r"^episodes: \d+", f"episodes: {episodes}", request.read_text(), flags=re.MULTILINE))
    task = compile_request(request, run_stages=False).task_dir
    return PipelineContext(request=load_request(request), task=task, ledger=Ledger(task.root))


def set_batch(ctx: PipelineContext, **changes) -> BatchConfig:
    """Write B before compile does: the builtin's B for the request with `changes`, as a user
    tightening the budgets would (the contract stage keeps a B that is there and records it)."""
    body = default_batch(ctx.request).model_dump(mode="json")
    retries = changes.pop("retries", {})
    body.update(changes)
    body["retries"] = {**body["retries"], **{s.value: v for s, v in retries.items()}}
    batch = BatchConfig.model_validate(body)
    save_artifact(batch, ctx.task.batch)
    return batch


def events(ctx: PipelineContext, event: LedgerEvent, stage: Stage | None = None) -> list[LedgerEntry]:
    """The ledger's entries of one kind."""
    return [e for e in ctx.ledger.entries() if e.event == event and (stage is None or e.stage == stage)]


# --- per-episode routes: render ------------------------------------------------------------------------


@pytest.mark.timeout(2400)
def test_render_defects_route_back_to_render_and_a_spent_budget_replaces_the_episode(tmp_path, dropping_renderer):
    """n=2, B's render budget 1. Episode #0 renders clean (the verifier calibrates on it). Episode #1
    loses an object from a view on every render: re-rendered once, then rejected as a whole and
    replaced by seed #2, which loses it on its first render only: re-rendered with a new seed, then
    admitted."""
    ctx = task_context(tmp_path, episodes=2)
    set_batch(ctx, admission_seed_count=6, retries={Stage.render: 1})
    dropping_renderer.drops = staticmethod(
        lambda eid, k: admission_index(eid) == 1 or (admission_index(eid) >= 2 and k == 1))

    outcome = run_pipeline(ctx)

    assert outcome.stopped_at is None, outcome.stop_reason
    report = admit(ctx.task.root, write_certificate=False)
    assert report.ok, report.render()
    episodes = sorted(p.name for p in ctx.task.episodes_dir.iterdir())
    assert [admission_index(e) for e in episodes] == [0, 2]
    first, replacement = episodes
    rejected = next(e.details["episode_id"] for e in events(ctx, LedgerEvent.rejection)
                    if e.details.get("action") == "reject")
    assert admission_index(rejected) == 1

    # every route is in the ledger, with its attempt and budget
    routes = events(ctx, LedgerEvent.route)
    assert [(e.route_to, e.details.get("episode_id"), e.details["attempt"], e.details["budget"]) for e in routes] == [
        (Stage.render, rejected, 1, 1), (Stage.rollout, None, 1, 10), (Stage.render, replacement, 1, 1)]
    assert all(e.stage == Stage.verify for e in routes)
    assert routes[1].details["replaces"] == [rejected]

    # the rejected episode: both renders kept in attempts/ with the reasons, the last with the episode
    kept = ctx.task.attempts_dir / rejected
    assert (kept / "episode.json").is_file() and (kept / "obs").is_dir()
    assert (kept / "render-1" / "render.json").is_file() and (kept / "render-1" / "verification.json").is_file()
    assert "render budget is spent" in json.loads((kept / "reason.json").read_text())["reason"]
    for results in (kept / "render-1" / "verification.json", kept / "verification.json"):
        failed = {c["check"]: c["route_to"] for c in json.loads(results.read_text())["checks"] if not c["passed"]}
        assert failed.get("objects") == "render", failed

    # the replacement: its first render set aside, its second rendered with a new seed, recorded
    aside = ctx.task.attempts_dir / replacement / "render-1"
    assert sorted(p.name for p in (aside / "obs").iterdir()) == sorted(p.name for p in (ctx.task.episode(replacement) / "obs").iterdir())
    renders = [e for e in events(ctx, LedgerEvent.render) if e.details["episode_id"] == replacement]
    assert [e.details["render_attempt"] for e in renders] == [1, 2]
    assert "render_seed" not in renders[0].details  # z's seed: an admission seed never goes into the ledger
    record = load_artifact(RenderRecord, ctx.task.episode(replacement) / "render.json")
    assert record.seed == renders[1].details["render_seed"]
    note = next(e for e in events(ctx, LedgerEvent.note) if e.details.get("folder") == f"attempts/{replacement}/render-1")
    assert note.details["layers"] == ["render", "verify", "review", "admission"]
    assert all(k.startswith(f"episodes/{replacement}/") for k in note.inputs)
    assert all(k.startswith(f"attempts/{replacement}/render-1/") for k in note.outputs)

    # only failing episodes were redone: #0 rendered, verified and reviewed once
    assert [e.details["episode_id"] for e in events(ctx, LedgerEvent.render)].count(first) == 1
    assert [e.details.get("episode_id") for e in events(ctx, LedgerEvent.check, Stage.verify)].count(first) == 1
    assert dropping_renderer.dropped == [(rejected, 1, dropping_renderer.dropped[0][2]),
                                         (rejected, 2, dropping_renderer.dropped[0][2]),
                                         (replacement, 1, dropping_renderer.dropped[0][2])]
    assert Ledger(ctx.task.root).verify().ok


# --- global routes: expert --------------------------------------------------------------------------------


@pytest.mark.timeout(1200)
def test_failing_admission_rollouts_route_to_the_expert(tmp_path, monkeypatch):
    """The first expert version claims success without acting: its admission rollouts fail the judge,
    the rollout stage routes to the expert when B's tolerance (1 failure) is exceeded, the expert stage
    runs again (its controller is the builtin's own) and the admission seeds it has not run pass."""
    calls: list[int] = []
    monkeypatch.setitem(pipeline.RUNNERS, Stage.expert, defective_expert({1}, calls))
    ctx = task_context(tmp_path, episodes=1)
    set_batch(ctx, admission_seed_count=4, retries={Stage.rollout: 1})

    outcome = run_pipeline(ctx, stop_after=Stage.rollout)

    assert outcome.stopped_at is None, outcome.stop_reason
    assert calls == [1, 2]
    rollouts = [(e.details["admission_index"], e.outcome) for e in events(ctx, LedgerEvent.rollout, Stage.rollout)]
    # seeds 0 and 1 failed under version 1; version 2 runs seed 0 again (a new C may retry a seed an
    # older C failed) and it passes
    assert rollouts == [(0, LedgerOutcome.fail), (1, LedgerOutcome.fail), (0, LedgerOutcome.ok)]
    (route,) = events(ctx, LedgerEvent.route)
    assert (route.stage, route.route_to, route.details["attempt"], route.details["budget"]) == (
        Stage.rollout, Stage.expert, 1, 4)
    (rejection,) = [e for e in events(ctx, LedgerEvent.rejection) if e.stage == Stage.rollout]
    assert rejection.route_to == Stage.expert and "2 admission rollouts" in rejection.reason
    assert [admission_index(p.name) for p in ctx.task.episodes_dir.iterdir()] == [0]
    # the judge was not re-entered: J was frozen once
    assert len(events(ctx, LedgerEvent.freeze)) == 1


@pytest.mark.timeout(1200)
def test_a_defect_that_never_goes_away_stops_after_the_budget(tmp_path, monkeypatch):
    """Every expert version claims success without acting. With B's expert budget 1 and no failed
    admission rollout tolerated, compile routes to the expert once, then stops saying which budget is
    spent; every route and rejection is in the ledger, and resume does not go past the budget."""
    calls: list[int] = []
    monkeypatch.setitem(pipeline.RUNNERS, Stage.expert, defective_expert({1, 2, 3}, calls))
    ctx = task_context(tmp_path, episodes=1)
    set_batch(ctx, retries={Stage.rollout: 0, Stage.expert: 1})

    outcome = run_pipeline(ctx)

    assert outcome.stopped_at == Stage.rollout
    assert "retry budget for expert is spent (1 of 1 routes used)" in outcome.stop_reason
    assert calls == [1, 2]
    routes = events(ctx, LedgerEvent.route)
    assert [(e.route_to, e.details["attempt"], e.details["budget"]) for e in routes] == [(Stage.expert, 1, 1)]
    rejections = [e for e in events(ctx, LedgerEvent.rejection) if e.stage == Stage.rollout]
    assert len(rejections) == 2 and all(e.route_to == Stage.expert for e in rejections)
    # a new expert version may run a seed an older one failed: each version ran seed 0
    assert [(e.details["admission_index"], e.outcome) for e in events(ctx, LedgerEvent.rollout, Stage.rollout)] == [
        (0, LedgerOutcome.fail), (0, LedgerOutcome.fail)]
    assert not ctx.task.episodes_dir.is_dir() or not list(ctx.task.episodes_dir.iterdir())

    # a resume stops at once for the same reason: the budget stays spent
    again = run_pipeline(PipelineContext(request=ctx.request, task=ctx.task, ledger=Ledger(ctx.task.root)))
    assert again.stopped_at == Stage.rollout and "retry budget for expert is spent" in again.stop_reason
    assert calls == [1, 2]
    assert len(events(ctx, LedgerEvent.route)) == 1
