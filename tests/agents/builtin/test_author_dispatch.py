"""The builtin roles end to end through TaskAgents, exactly as with a hosted model: the author's
contract stage reads G and writes a valid T and S with its tools, the judge-writer reads T and G and
writes a J that judge acceptance takes and freeze locks, every exchange is a transcript and a free
builtin llm_call in the ledger; unsupported requests and stages without builtin logic are refused
with a message that says why, and recorded too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import datafarm.agents.builtin  # noqa: F401  (registers the builtin roles)
import datafarm.agents.builtin.author as author_module
from datafarm.agents import TaskAgents, author_task, judge_task
from datafarm.agents.builtin import BuiltinRefusal
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeSpec
from datafarm.artifacts.ledger_entry import LedgerEvent, LedgerOutcome
from datafarm.artifacts.request import Request
from datafarm.artifacts.sampler import SamplerSpec
from datafarm.harness.judge import accept_judge, canned_shortcuts, freeze, load_frozen
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir
from datafarm.harness.judge.reference_episode import good_episode
from tests.agents.conftest import make_task_dir
from tests.artifacts.test_schemas import drum_grounding, nest_grounding

NEST_TEXT = "Pick up the red cup and place it inside the blue cup. Success: fully nested and still for two seconds."


def task_with_grounding(tmp_path: Path, text: str, g: Grounding, **extra) -> tuple[Request, TaskDir]:
    request = Request.model_validate({"task": text, "clip": str(tmp_path / "clip"), "episodes": 2, "mode": "sim2real",
                                      **extra})
    tdir = make_task_dir(tmp_path / "task", request)
    save_artifact(g, tdir.grounding)
    return request, tdir


@pytest.mark.parametrize(("make", "text"), [(nest_grounding, NEST_TEXT),
                                            (drum_grounding, "With the stick, beat the drum four times.")])
def test_contract_then_judge_through_the_role_loop(tmp_path: Path, make, text: str) -> None:
    g = make()
    request, tdir = task_with_grounding(tmp_path, text, g, mode="ood", ood_axes={"light_colour": ["warm", "cool"],
                                                                                   "light_intensity": [0.5, 1.5]})
    agents = TaskAgents.open(request, tdir)
    result = agents.author().run(author_task("contract"))
    t = load_artifact(TaskContract, tdir.contract)
    s = load_artifact(SamplerSpec, tdir.sampler)
    assert result.artifact("contract") == t and t.task == text
    assert s.appearance == {"light_colour": ["warm", "cool"], "light_intensity": [0.5, 1.5]}
    assert set(t.roles.values()) == {o.id for o in g.objects}

    judged = agents.judge_writer().run(judge_task())
    j = load_artifact(JudgeSpec, tdir.root / "judge" / "draft.json")
    assert judged.artifact("judge") == j
    good = good_episode(g, t)
    report = accept_judge(j, good, canned_shortcuts(good, g, t), contract=t)
    assert report.accepted, report.reason
    lock = freeze(j, tdir.judge_dir, agents.ledger, contract=t, grounding=g, acceptance=report.ledger_details())
    assert load_frozen(tdir.judge_dir).sha256() == lock.spec_sha256 == j.sha256()

    # every exchange: a transcript and a free llm_call of the builtin provider, through the role's tools
    calls = [e for e in Ledger(tdir.ledger).entries() if e.event == LedgerEvent.llm_call]
    assert [(e.stage.value, e.details["tool_calls"]) for e in calls] == [
        ("contract", ["read_artifact"]), ("contract", ["write_artifact", "write_artifact"]),
        ("judge", ["read_contract", "read_grounding"]), ("judge", ["write_judge"]),
    ]
    assert all(e.actor.provider == "builtin" and e.actor.model == "builtin" and e.cost.usd == 0.0
               and e.outcome == LedgerOutcome.ok and e.cost.input_tokens > 0 for e in calls)
    first = json.loads(result.transcripts[0].read_text())
    assert first["provider"] == "builtin" and first["cost_usd"] == 0.0
    assert first["response"]["parts"][-1]["name"] == "read_artifact"
    second = json.loads(result.transcripts[1].read_text())
    assert [w["artifact"] for w in second["writes"]] == ["contract", "sampler"] and all(w["ok"] for w in second["writes"])
    assert t.family in json.dumps(second["response"])  # the answer says how the text was read


def test_an_unsupported_request_fails_at_the_contract_stage_naming_the_families(tmp_path: Path) -> None:
    request, tdir = task_with_grounding(tmp_path, "Fold the towel twice. Success: towel folded twice.", nest_grounding())
    agents = TaskAgents.open(request, tdir)
    with pytest.raises(BuiltinRefusal) as info:
        agents.author().run(author_task("contract"))
    error = info.value
    assert error.stage == "contract" and error.route_to == "contract" and not error.retryable
    assert "deformable-capable simulator" in str(error) and "strike_drum" in str(error)
    assert not tdir.contract.exists()
    entries = list(Ledger(tdir.ledger).entries())
    assert [(e.event, e.outcome) for e in entries] == [(LedgerEvent.llm_call, LedgerOutcome.ok),
                                                       (LedgerEvent.llm_call, LedgerOutcome.error)]
    assert "deformable" in entries[-1].reason
    transcripts = sorted((tdir.transcripts_dir / "author").glob("*.json"))
    assert len(transcripts) == 2 and "deformable" in json.loads(transcripts[-1].read_text())["error"]


def test_a_task_naming_an_object_g_lacks_is_routed_to_grounding(tmp_path: Path) -> None:
    request, tdir = task_with_grounding(tmp_path, "Nest the green cup in the blue cup.", nest_grounding())
    with pytest.raises(BuiltinRefusal) as info:
        TaskAgents.open(request, tdir).author().run(author_task("contract"))
    assert info.value.route_to == "grounding" and "'green cup'" in str(info.value)


def test_the_contract_stage_needs_g(tmp_path: Path) -> None:
    request = Request.model_validate({"task": NEST_TEXT, "clip": str(tmp_path), "episodes": 1, "mode": "sim2real"})
    tdir = make_task_dir(tmp_path / "task", request)
    with pytest.raises(BuiltinRefusal) as info:
        TaskAgents.open(request, tdir).author().run(author_task("contract"))
    assert info.value.route_to == "grounding" and "grounding has not been written yet" in str(info.value)


@pytest.mark.parametrize("stage", ["grounding", "expert", "render"])
def test_a_stage_without_builtin_logic_says_it_is_not_built_yet(tmp_path: Path, stage: str, monkeypatch) -> None:
    monkeypatch.setitem(author_module.STAGE_MODULES, stage, f"datafarm.agents.builtin.no_{stage}_here")
    request, tdir = task_with_grounding(tmp_path, NEST_TEXT, nest_grounding())
    with pytest.raises(BuiltinRefusal, match=f"builtin {stage} is not built yet") as info:
        TaskAgents.open(request, tdir).author().run(author_task(stage))
    assert info.value.kind == "not_built" and info.value.stage == stage
    [entry] = list(Ledger(tdir.ledger).entries())
    assert entry.event == LedgerEvent.llm_call and entry.outcome == LedgerOutcome.error and entry.stage.value == stage


def test_the_dispatcher_hands_each_stage_to_its_module(tmp_path: Path, monkeypatch) -> None:
    """A stage module's `respond` gets the request; what it answers is what the author does."""
    import types

    from datafarm.agents.builtin.common import answer

    seen: list[str] = []

    def respond(request, info):
        seen.append(request.messages[0].text.split(".")[0])
        return answer(request, "", ("write_artifact", {"artifact": "G", "content": nest_grounding().model_dump(mode="json")}))

    fake = types.ModuleType("fake_grounding_stage")
    fake.respond = respond  # type: ignore[attr-defined]
    monkeypatch.setitem(__import__("sys").modules, "fake_grounding_stage", fake)
    monkeypatch.setitem(author_module.STAGE_MODULES, "grounding", "fake_grounding_stage")
    request, tdir = task_with_grounding(tmp_path, NEST_TEXT, nest_grounding())
    tdir.grounding.unlink()
    TaskAgents.open(request, tdir).author().run(author_task("grounding"))
    assert seen == ["Stage: grounding"] and load_artifact(Grounding, tdir.grounding) == nest_grounding()


def small_clip(folder: Path, cameras: tuple[str, ...] = ("front", "left", "right"), frames: int = 9) -> Path:
    """A clip folder: clip.yaml and a tiny grey MP4 per camera."""
    import av
    import numpy as np
    import yaml

    folder.mkdir(parents=True)
    for cam in cameras:
        with av.open(str(folder / f"{cam}.mp4"), "w") as out:
            stream = out.add_stream("mpeg4", rate=10)
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
            for _ in range(frames):
                out.mux(stream.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), 128, np.uint8), format="rgb24")))
            out.mux(stream.encode())
    spec = {"fps": 10.0, "cameras": [{"name": c, "video": f"{c}.mp4"} for c in cameras]}
    (folder / "clip.yaml").write_text(yaml.safe_dump(spec))
    return folder


def test_the_render_stage_writes_a_minimal_render_contract(tmp_path: Path) -> None:
    from datafarm.artifacts.render_contract import RenderContract

    clip = small_clip(tmp_path / "clip")
    request = Request.model_validate({"task": NEST_TEXT, "clip": str(clip), "episodes": 1, "mode": "ood",
                                      "ood_axes": {"tablecloth": ["red_check"]}})
    tdir = make_task_dir(tmp_path / "task", request)
    g = nest_grounding()
    save_artifact(g, tdir.grounding)
    result = TaskAgents.open(request, tdir).author().run(author_task("render", "Renderer: minimax"))
    r = load_artifact(RenderContract, tdir.render_contract)
    assert result.artifact("render-contract") == r
    assert [c.camera for c in r.cameras] == [c.name for c in g.cameras]
    assert all(c.frames == [0, 4, 8] for c in r.cameras) and r.fps == 10.0
    assert r.renderer.name == "minimax" and r.variations == {"tablecloth": ["red_check"]}
    assert set(r.appearance.objects) == {"red_cup", "blue_cup"} and r.resolution[0] <= 640


def test_a_checker_refusing_the_builtin_contract_ends_the_stage_with_its_reason(tmp_path: Path) -> None:
    request, tdir = task_with_grounding(tmp_path, NEST_TEXT, nest_grounding())
    agents = TaskAgents.open(request, tdir)
    author = agents.author(checks={"contract": [lambda t: ["stages: the lab wants a lift stage"]]})
    with pytest.raises(BuiltinRefusal) as info:
        author.run(author_task("contract"))
    assert info.value.kind == "refused" and "the lab wants a lift stage" in str(info.value)
    assert not tdir.contract.exists()
