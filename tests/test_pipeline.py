"""The pipeline after grounding, on a real task folder: contract, qualification and the judge run
through the builtin roles and the harness, each recorded in the ledger; resume skips finished stages.

Grounding is seeded from a known-good G fixture (the ledger entry says so), so these tests exercise
the later stages whatever the state of the builtin grounding.

The bookkeeping that makes routes and resume work is tested on its own too (fast): which stages a
route re-opens, and how `_settle` brings a task folder that a killed compile left behind in line with
the ledger (the ledger entries it starts from are written by the test, labelled as fixtures).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from datafarm import pipeline
from datafarm.artifacts.io import save_artifact
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.compiler import compile_request
from datafarm.hashing import sha256_file
from datafarm.intake import load_request
from datafarm.ledger import Ledger
from datafarm.pipeline import (
    ORDER,
    PipelineContext,
    _settle,
    finished_stages,
    live_episodes,
    run_pipeline,
)
from datafarm.taskdir import TaskDir
from tests.artifacts.test_schemas import nest_grounding

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nest_cups"
FIXTURE = LedgerActor(role="test", provider="pytest", model="fixture")


def seeded_task(tmp_path: Path) -> tuple[Path, TaskDir]:
    """A task folder whose grounding stage is recorded as finished with a fixture G."""
    dst = tmp_path / "nest_cups"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("runs"))
    request = dst / "request.yaml"
    result = compile_request(request, run_stages=False)
    task = result.task_dir
    save_artifact(nest_grounding(), task.grounding)
    Ledger(task.root).append(
        stage=Stage.grounding, event=LedgerEvent.stage_finished, outcome=LedgerOutcome.ok,
        reason="TEST FIXTURE: G seeded from tests/artifacts nest_grounding()",
        actor=LedgerActor(role="test", provider="pytest", model="fixture"),
    )
    return request, task


@pytest.mark.slow
def test_contract_qualification_and_judge_run_and_are_recorded(tmp_path):
    request_path, task = seeded_task(tmp_path)
    ctx = PipelineContext(request=load_request(request_path), task=task, ledger=Ledger(task.root))
    outcome = run_pipeline(ctx, stop_after=Stage.judge)
    assert outcome.skipped_done == [Stage.grounding]
    assert outcome.finished == [Stage.contract, Stage.qualification, Stage.judge]
    for path in (task.contract, task.sampler, task.batch, task.qualification, task.judge_dir / "spec.json",
                 task.judge_dir / "lock.json", task.harness_dir / "secret"):
        assert path.is_file(), path
    entries = list(Ledger(task.root).entries())
    assert any(e.event == LedgerEvent.freeze for e in entries)
    assert any(e.event == LedgerEvent.llm_call and e.actor and e.actor.role == "judge_writer" for e in entries)
    assert Ledger(task.root).verify().ok

    # resume: the finished stages are not redone
    again = run_pipeline(PipelineContext(request=load_request(request_path), task=task, ledger=Ledger(task.root)),
                         stop_after=Stage.judge)
    assert {Stage.grounding, Stage.contract, Stage.qualification, Stage.judge} <= set(again.skipped_done)
    freezes = [e for e in Ledger(task.root).entries() if e.event == LedgerEvent.freeze]
    assert len(freezes) == 1


# --- routes and resume bookkeeping (fast) -------------------------------------------------------------


def fresh_context(tmp_path: Path) -> PipelineContext:
    """A new task folder for a copy of the example (no stage run)."""
    dst = tmp_path / "nest_cups"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("runs"))
    request = dst / "request.yaml"
    task = compile_request(request, run_stages=False).task_dir
    return PipelineContext(request=load_request(request), task=task, ledger=Ledger(task.root))


def test_a_route_reopens_its_target_and_every_later_stage(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for stage in ORDER[:8]:
        ledger.append(stage, LedgerEvent.stage_finished, LedgerOutcome.ok, "TEST FIXTURE", actor=FIXTURE)
    assert finished_stages(ledger.entries()) == set(ORDER[:8])
    ledger.append(Stage.verify, LedgerEvent.route, LedgerOutcome.info, "TEST FIXTURE", route_to=Stage.render,
                  actor=FIXTURE, details={"episode_id": "adm-0001-x"})
    assert finished_stages(ledger.entries()) == set(ORDER[: ORDER.index(Stage.render)])
    ledger.append(Stage.render, LedgerEvent.stage_finished, LedgerOutcome.ok, "TEST FIXTURE", actor=FIXTURE)
    ledger.append(Stage.verify, LedgerEvent.route, LedgerOutcome.info, "TEST FIXTURE", route_to=Stage.expert,
                  actor=FIXTURE)
    assert finished_stages(ledger.entries()) == {Stage.grounding, Stage.contract, Stage.qualification, Stage.judge}


def fixture_rollout(ctx: PipelineContext, episode_id: str, index: int) -> Path:
    """An episode folder and the passing admission rollout entry that wrote it (a fixture)."""
    folder = ctx.task.episode(episode_id)
    folder.mkdir(parents=True)
    (folder / "episode.json").write_text("{}")
    ctx.ledger.append(Stage.rollout, LedgerEvent.rollout, LedgerOutcome.ok, "TEST FIXTURE: a passing rollout",
                      actor=FIXTURE, outputs={f"episodes/{episode_id}/episode.json": sha256_file(folder / "episode.json")},
                      details={"seed_kind": "admission", "admission_index": index, "episode_id": episode_id,
                               "folder": f"episodes/{episode_id}"})
    return folder


def test_settle_sets_aside_what_a_killed_compile_left_and_is_idempotent(tmp_path):
    ctx = fresh_context(tmp_path)
    task = ctx.task
    good = fixture_rollout(ctx, "adm-0000-a", 0)
    # a render killed half-way: scratch videos under a temporary name, no render entry
    (good / ".render-1-ab" / "obs").mkdir(parents=True)
    (good / ".render-1-ab" / "obs" / "front.mp4").write_bytes(b"half a video")
    # a render that finished writing but was killed before its entry: not recorded, not counted
    (good / "obs").mkdir()
    (good / "obs" / "front.mp4").write_bytes(b"a video")
    (good / "render.json").write_text("{}")
    # a rollout killed between its folder's rename and its ledger entry, and one killed while staging
    (task.episodes_dir / "adm-0001-b").mkdir()
    (task.episodes_dir / "adm-0001-b" / "episode.json").write_text("{}")
    (task.episodes_dir / ".adm-0002-c.partial").mkdir()
    # a dev rollout killed the same way, in attempts/
    (task.attempts_dir / "dev-s3-d").mkdir(parents=True)
    (task.attempts_dir / "dev-s3-d" / "rollout.json").write_text("{}")
    before = len(list(ctx.ledger.entries()))

    _settle(ctx, Stage.render)

    assert sorted(p.name for p in task.episodes_dir.iterdir()) == ["adm-0000-a"]
    assert sorted(p.relative_to(good).as_posix() for p in good.rglob("*")) == ["episode.json"]
    assert (task.attempts_dir / "adm-0001-b" / "episode.json").is_file()
    assert (task.attempts_dir / ".adm-0002-c.partial").is_dir()
    asides = sorted((task.attempts_dir / "adm-0000-a").iterdir())
    assert [p.name for p in asides] == ["interrupted", "interrupted.2"]
    assert (asides[0] / ".render-1-ab" / "obs" / "front.mp4").read_bytes() == b"half a video"
    assert (asides[1] / "obs" / "front.mp4").read_bytes() == b"a video"
    assert (asides[1] / "render.json").is_file() and (asides[1] / "reason.json").is_file()
    new = list(ctx.ledger.entries())[before:]
    actions = sorted(str(e.details.get("action")) for e in new)
    assert actions == ["interrupted_rollout", "set_aside", "set_aside", "unrecorded_attempt", "unrecorded_attempt"]
    moved = [e for e in new if e.details.get("action") == "set_aside"][1]
    assert moved.inputs == {"episodes/adm-0000-a/obs/front.mp4": sha256_file(asides[1] / "obs" / "front.mp4"),
                            "episodes/adm-0000-a/render.json": sha256_file(asides[1] / "render.json")}
    assert set(moved.outputs) == {"attempts/adm-0000-a/interrupted.2/obs/front.mp4",
                                  "attempts/adm-0000-a/interrupted.2/render.json"}
    assert ctx.ledger.verify().ok

    # a second settle finds nothing to do; what the ledger records stays
    count = len(list(ctx.ledger.entries()))
    _settle(ctx, Stage.render)
    assert len(list(ctx.ledger.entries())) == count
    assert [b.episode_id for b in live_episodes(ctx)] == ["adm-0000-a"]


def test_a_recorded_move_cut_short_by_a_kill_is_finished(tmp_path, monkeypatch):
    ctx = fresh_context(tmp_path)
    folder = fixture_rollout(ctx, "adm-0000-a", 0)
    (folder / "review.json").write_text("{}")
    monkeypatch.setattr(pipeline, "_finish_move", lambda task, entry: None)  # killed right after the entry
    pipeline.remove_episode(ctx, Stage.review, "adm-0000-a", "reject", "TEST: rejected", route_to=Stage.rollout)
    assert folder.is_dir()
    monkeypatch.undo()

    _settle(ctx, Stage.rollout)

    assert not folder.exists()
    kept = ctx.task.attempts_dir / "adm-0000-a"
    assert sorted(p.name for p in kept.iterdir()) == ["episode.json", "reason.json", "review.json"]
    assert live_episodes(ctx) == []
    rejection = [e for e in ctx.ledger.entries() if e.event == LedgerEvent.rejection][-1]
    assert rejection.details["episode_id"] == "adm-0000-a" and rejection.route_to == Stage.rollout


def test_a_verification_of_an_earlier_render_is_set_aside(tmp_path):
    ctx = fresh_context(tmp_path)
    folder = fixture_rollout(ctx, "adm-0000-a", 0)

    def record(event: LedgerEvent, stage: Stage, *names: str) -> None:
        ctx.ledger.append(stage, event, LedgerOutcome.ok, "TEST FIXTURE", actor=FIXTURE, details={"episode_id": "adm-0000-a"},
                          outputs={f"episodes/adm-0000-a/{n}": sha256_file(folder / n) for n in names})

    (folder / "obs").mkdir()
    (folder / "obs" / "front.mp4").write_bytes(b"render 1")
    (folder / "render.json").write_text('{"render": 1}')
    record(LedgerEvent.render, Stage.render, "obs/front.mp4", "render.json")
    (folder / "verification.json").write_text('{"of": "render 1"}')
    record(LedgerEvent.check, Stage.verify, "verification.json")
    _settle(ctx, Stage.verify)
    assert (folder / "verification.json").is_file()  # as recorded: nothing to do

    # the episode is rendered again in place (`datafarm render --episode`): its verification is stale
    (folder / "obs" / "front.mp4").write_bytes(b"render 2")
    (folder / "render.json").write_text('{"render": 2}')
    record(LedgerEvent.render, Stage.render, "obs/front.mp4", "render.json")
    _settle(ctx, Stage.verify)
    assert not (folder / "verification.json").exists()
    assert (folder / "render.json").read_text() == '{"render": 2}'
    kept = ctx.task.attempts_dir / "adm-0000-a" / "interrupted" / "verification.json"
    assert kept.read_text() == '{"of": "render 1"}'


class _EscapedReport:
    """What CalibrationFailed carries, for a spec that lets one corruption escape."""

    def __init__(self, episode_id: str) -> None:
        self.episode_id, self.escaped, self.clean_failures = episode_id, ["duplicate_object"], []

    def summary(self) -> str:
        return "duplicate_object escaped every check"


def test_calibration_stops_once_corruptions_escape_on_two_episodes(tmp_path, monkeypatch):
    """Each calibration takes minutes: a spec that lets corruptions escape on two episodes is refused
    without trying the rest (final: no retry changes it), each try recorded."""
    from datafarm import verifiers
    from datafarm.verifiers.report import CalibrationFailed

    ctx = fresh_context(tmp_path)
    tried: list[str] = []

    def calibrate(root, eid, spec, evidence=None):
        tried.append(eid)
        raise CalibrationFailed(_EscapedReport(eid))

    monkeypatch.setattr(verifiers, "derive_spec", lambda root: "SPEC")
    monkeypatch.setattr(verifiers, "save_spec", lambda root, spec: None)
    monkeypatch.setattr(verifiers, "gather_evidence", lambda root, eid, spec: None)
    monkeypatch.setattr(verifiers, "calibrate", calibrate)
    with pytest.raises(pipeline.StageRejected) as caught:
        pipeline._calibrate(ctx, ["adm-0000-a", "adm-0001-b", "adm-0002-c", "adm-0003-d"])
    assert tried == ["adm-0000-a", "adm-0001-b"]
    assert caught.value.final and "duplicate_object escaped" in caught.value.reason
    notes = [e for e in ctx.ledger.entries() if e.details.get("calibration_episode")]
    assert [e.details["calibration_episode"] for e in notes] == tried
