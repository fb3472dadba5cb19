"""Role conversations end to end: the author writing an invalid grounding, getting the validation
error back and writing a valid one (through both real SDKs and a loopback server), with every
exchange in transcripts/ and the ledger priced by K's table; the repair budget; the expert stage
with dev-seed rollouts; the judge-writer and the reviewer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from datafarm import capability
from datafarm.agents import (
    FunctionProvider,
    ReviewMaterial,
    StageFailed,
    TaskAgents,
    author_task,
    cost_report,
    judge_task,
    review_task,
)
from datafarm.agents.messages import ModelRequest, ModelResponse, ToolCall
from datafarm.agents.providers.base import ProviderSettings
from datafarm.artifacts.admission import ReviewVerdict
from datafarm.artifacts.expert import ExpertManifest
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeSpec, VerdictSummary
from datafarm.artifacts.ledger_entry import LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.hashing import sha256_bytes
from datafarm.ledger import Ledger
from tests.agents.conftest import EXAMPLE_CLIP, fast_settings, invalid_grounding, make_request, make_task_dir, valid_grounding
from tests.agents.loopback import WIRES, LoopbackAPI, Wire


def scripted(*steps):
    """A model function answering call i with steps[i] (a ModelResponse or a function of the request)."""

    def model(request: ModelRequest, info) -> ModelResponse:
        step = steps[min(info.call_index, len(steps) - 1)]
        return step(request) if callable(step) else step

    return model


def calls(*pairs) -> ModelResponse:
    return ModelResponse.of(*[ToolCall(f"call_{i}", name, args) for i, (name, args) in enumerate(pairs)])


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_author_repairs_an_invalid_grounding_through_the_real_sdk(wire: Wire, tmp_path: Path, canary_keys) -> None:
    request = make_request(roles={"author": {"provider": wire.provider, "model": wire.model}})
    tdir = make_task_dir(tmp_path / "task", request)
    script = [
        wire.reply(None, [("list_views", {})]),
        wire.reply("Let me look at the front view.", [("fetch_frame", {"view": "front", "frame": 0})]),
        wire.reply("Writing G.", [("write_artifact", {"artifact": "G", "content": invalid_grounding()})]),
        wire.reply(None, [("write_artifact", {"artifact": "G", "content": valid_grounding()})]),
    ]
    with LoopbackAPI(script) as api:
        settings = fast_settings()
        agents = TaskAgents.open(
            request, tdir, settings=ProviderSettings(settings.timeout_s, 2048, wire.base_url(api), settings.retry)
        )
        result = agents.author().run(author_task(Stage.grounding))

    # the valid grounding is on disk, and only it
    assert result.written["grounding"].ok
    assert load_artifact(Grounding, tdir.grounding) == Grounding.model_validate(valid_grounding())

    r1, r2, r3, r4 = (r.body for r in api.requests)
    # the prompt is K's author template with the grounding skill and G's JSON Schema
    system = r1["messages"][0]["content"] if wire.provider == "openai" else r1["system"]
    bundle = capability.load()
    assert system.startswith("You are the author agent of datafarm")
    assert request.task in system and bundle.skill("grounding").strip()[:200] in system
    assert json.dumps(Grounding.model_json_schema(by_alias=True), separators=(",", ":")) in system
    assert sorted(wire.tool_names(r1)) == sorted(
        [
            "list_views",
            "clip_info",
            "fetch_frame",
            "pixel_colour",
            "region_stats",
            "find_colour",
            "read_artifact",
            "write_artifact",
            "write_controller",
        ]
    )
    assert '"view": "front"' in next(iter(wire.tool_results(r2).values()))
    assert len(wire.images(r3)) == 1
    refusal = list(wire.tool_results(r4).values())[-1]
    assert "grounding was NOT written" in refusal
    assert "table: required key 'table' is missing" in refusal
    assert "objects[0].colour_name: unknown key 'colour_name'" in refusal
    assert "objects[1].pose_tag" in refusal

    # every exchange has a transcript and a priced ledger entry
    prices = bundle.price_table()
    per_call = prices.cost_usd(wire.model, 1000, 200)
    files = sorted((tdir.transcripts_dir / "author").glob("*.json"))
    assert [f.name for f in files] == ["0001.json", "0002.json", "0003.json", "0004.json"] == [p.name for p in result.transcripts]
    first, _, third, fourth = (json.loads(f.read_text()) for f in files)
    assert first["request"]["system"] == system and fourth["request"]["system"] is None
    assert first["request"]["system_sha256"] == fourth["request"]["system_sha256"]
    assert first["provider"] == wire.provider and first["model"] == wire.model
    assert first["usage"] == {"input_tokens": 1000, "output_tokens": 200}
    assert first["cost_usd"] == pytest.approx(per_call)
    assert third["writes"][0]["ok"] is False and "table" in third["writes"][0]["error"]
    assert fourth["writes"][0]["ok"] is True and fourth["writes"][0]["file"] == "grounding.json"
    image_refs = [p for r in json.loads(files[1].read_text())["tool_results"] for p in r["content"] if p["type"] == "image"]
    assert (tdir.transcripts_dir / "author" / image_refs[0]["file"]).is_file()

    entries = list(Ledger(tdir.ledger).entries())
    assert [e.event for e in entries] == [LedgerEvent.llm_call] * 4
    assert all(e.stage == Stage.grounding and e.outcome == LedgerOutcome.ok for e in entries)
    assert entries[0].actor.model_dump() == {"role": "author", "provider": wire.provider, "model": wire.model}
    assert all(e.cost.usd == pytest.approx(per_call) for e in entries)
    assert entries[2].details["writes"] == [{"artifact": "grounding", "ok": False, "error": third["writes"][0]["error"]}]
    assert "grounding.json" in entries[3].outputs and entries[3].details["transcript"] == "transcripts/author/0004.json"
    assert Ledger(tdir.ledger).verify().ok

    report = cost_report(tdir.root)
    assert report.adaptation_usd == pytest.approx(4 * per_call)
    assert [(line.stage, line.role, line.calls, line.input_tokens, line.output_tokens) for line in report.lines] == [
        ("grounding", "author", 4, 4000, 800)
    ]


def test_repair_budget_exhausted_fails_the_stage_with_the_last_error(task) -> None:
    model = scripted(calls(("write_artifact", {"artifact": "G", "content": invalid_grounding()})))
    agents = TaskAgents.open(make_request(), task, providers={"author": FunctionProvider(model)}, repair_budget=2)
    with pytest.raises(StageFailed) as caught:
        agents.author().run(author_task(Stage.grounding))
    assert "table: required key 'table' is missing" in caught.value.last_error
    assert not task.grounding.exists()
    entries = list(Ledger(task.ledger).entries())
    assert [e.event for e in entries] == [LedgerEvent.llm_call] * 3 + [LedgerEvent.rejection]
    rejection = entries[-1]
    assert rejection.route_to == Stage.grounding and rejection.outcome == LedgerOutcome.fail
    assert "table" in rejection.details["last_error"] and rejection.details["refused_attempts"] == 3
    assert "repair budget 2" in rejection.reason


def test_a_model_that_stops_without_writing_is_told_to_continue(task) -> None:
    seen: list[str] = []

    def nudged(request: ModelRequest) -> ModelResponse:
        seen.append(request.messages[-1].text)
        return calls(("write_artifact", {"artifact": "G", "content": valid_grounding()}))

    model = scripted(ModelResponse.of("I think I am done."), nudged)
    provider = FunctionProvider(model)
    result = TaskAgents.open(make_request(), task, providers={"author": provider}).author().run(author_task("grounding"))
    assert result.written["grounding"].ok and provider.calls == 2
    assert seen and "Not done: this stage needs grounding written" in seen[0]
    assert provider.model == "function:model" and provider.name == "function"


def test_author_may_write_only_the_stages_artifacts(task) -> None:
    model = scripted(
        calls(("write_artifact", {"artifact": "T", "content": {"stages": []}})),
        calls(("write_artifact", {"artifact": "G", "content": valid_grounding()})),
    )
    result = (
        TaskAgents.open(make_request(), task, providers={"author": FunctionProvider(model)})
        .author()
        .run(author_task("grounding"))
    )
    first = json.loads(result.transcripts[0].read_text())
    assert first["tool_results"][0]["is_error"] is True
    assert "T (contract) is not written in this stage (grounding)" in first["tool_results"][0]["content"][0]["text"]
    assert not task.contract.exists()


def test_expert_stage_with_dev_seed_rollouts(task) -> None:
    code = "def main(robot):\n    robot.hold()\n"
    digest = sha256_bytes(code.encode())
    manifest = {"entry": "controller.py", "sha256": digest, "k_version": capability.load().version, "skills": ["grasp"]}
    asked: list[int] = []

    def rollout(seed: int) -> VerdictSummary:
        asked.append(seed)
        return VerdictSummary(passed=seed == 1, stage_reached="place", reason="cup tipped over" if seed != 1 else "nested")

    model = scripted(
        calls(("write_controller", {"code": code})),
        calls(("write_artifact", {"artifact": "C", "content": {**manifest, "dev_runs": [{"fabricated": True}]}})),
        calls(("write_artifact", {"artifact": "C", "content": manifest})),
        calls(("request_rollout", {"dev_seed": 99}), ("request_rollout", {"dev_seed": 1})),
        ModelResponse.of("The expert passes seed 1."),
    )
    agents = TaskAgents.open(make_request(), task, providers={"author": FunctionProvider(model)})
    result = agents.author(rollout=rollout, dev_seeds=[0, 1, 2]).run(author_task(Stage.expert))
    assert asked == [1]
    assert load_artifact(ExpertManifest, task.expert_dir / "manifest.json").sha256 == digest
    second = json.loads(result.transcripts[1].read_text())
    assert "dev_runs" in second["tool_results"][0]["content"][0]["text"]
    rollouts = json.loads(result.transcripts[3].read_text())["tool_results"]
    assert "99 is not a dev seed" in rollouts[0]["content"][0]["text"]
    assert json.loads(rollouts[1]["content"][0]["text"]) == {"passed": True, "stage_reached": "place", "reason": "nested"}
    assert result.final_text == "The expert passes seed 1."


def _paper_contract_and_judge():
    from tests.artifacts.test_schemas import judge_from, nest_contract

    contract = nest_contract()
    return contract, judge_from(contract)


def test_judge_writer_reads_t_and_g_and_must_cover_the_contract(task) -> None:
    contract, judge = _paper_contract_and_judge()
    save_artifact(contract, task.contract)
    save_artifact(Grounding.model_validate(valid_grounding()), task.grounding)
    incomplete = judge.model_dump(mode="json", by_alias=True)
    incomplete["stages"] = incomplete["stages"][:-1]
    model = scripted(
        calls(("read_contract", {}), ("read_grounding", {})),
        calls(("write_judge", {"content": incomplete})),
        calls(("write_judge", {"content": judge.model_dump(mode="json", by_alias=True)})),
    )
    agents = TaskAgents.open(make_request(), task, providers={"judge_writer": FunctionProvider(model)})
    writer = agents.judge_writer()
    result = writer.run(judge_task())
    assert load_artifact(JudgeSpec, task.root / "judge" / "draft.json") == judge
    reads = json.loads(result.transcripts[0].read_text())["tool_results"]
    assert "stages" in reads[0]["content"][0]["text"] and "objects" in reads[1]["content"][0]["text"]
    refused = json.loads(result.transcripts[1].read_text())["tool_results"][0]["content"][0]["text"]
    assert "judge stages" in refused and "differ from the contract's" in refused
    system = json.loads(result.transcripts[0].read_text())["request"]["system"]
    assert system.startswith("You are the judge-writer agent") and contract.stages[0].name in system


def test_reviewer_sees_frames_and_writes_a_verdict_with_evidence(task) -> None:
    episode = task.episode("ep_0001")
    (episode / "obs").mkdir(parents=True)
    shutil.copy(EXAMPLE_CLIP / "front.mp4", episode / "obs" / "front.mp4")
    verdict = {
        "accepted": True,
        "claims": [
            {
                "claim": "the red cup is inside the blue cup at the end",
                "holds": True,
                "evidence": [{"camera": "front", "frames": [0], "note": "red rim inside blue rim"}],
            }
        ],
    }
    model = scripted(
        calls(
            ("sim_state_summary", {}),
            ("fetch_rendered_frame", {"view": "front", "frame": 0}),
            ("fetch_reference_frame", {"view": "front", "frame": 0}),
            ("fetch_reference_frame", {"view": "front", "frame": 5}),
            ("region_stats", {"view": "front", "frame": 0, "source": "reference", "x0": 0, "y0": 0, "x1": 10, "y1": 10}),
        ),
        calls(("write_verdict", {"content": verdict})),
    )
    material = ReviewMaterial(
        episode_dir=Path("episodes/ep_0001"),
        state_summary="red_cup inside blue_cup; 2 contacts",
        reference_frames={"front": [0, 10]},
    )
    provider = FunctionProvider(model)
    result = TaskAgents.open(make_request(), task, providers={"reviewer": provider}).reviewer(material).run(review_task())
    saved = load_artifact(ReviewVerdict, episode / "review.json")
    assert saved.accepted and saved.provider == "function" and saved.model == provider.model
    results = json.loads(result.transcripts[0].read_text())["tool_results"]
    assert results[0]["content"][0]["text"] == "red_cup inside blue_cup; 2 contacts"
    assert [p["type"] for p in results[1]["content"]] == ["text", "image"]
    assert [p["type"] for p in results[2]["content"]] == ["text", "image"]
    assert "not a reference frame of front; its reference frames are: 0, 10" in results[3]["content"][0]["text"]
    assert json.loads(results[4]["content"][0]["text"])["pixels"] == 100
    system = json.loads(result.transcripts[0].read_text())["request"]["system"]
    assert '"provider"' not in system.split("JSON Schema:")[-1]  # filled in by the tool, not asked of the model


def test_malformed_writes_count_against_the_repair_budget(task) -> None:
    model = scripted(calls(("write_artifact", {"artifact": "G"})))  # no content, forever
    provider = FunctionProvider(model)
    with pytest.raises(StageFailed, match="invalid arguments for write_artifact"):
        TaskAgents.open(make_request(), task, providers={"author": provider}, repair_budget=1).author().run(
            author_task("grounding")
        )
    assert provider.calls == 2


def test_a_crashing_tool_still_records_the_billed_call(task) -> None:
    def rollout(seed: int):
        raise RuntimeError("harness bug")

    model = scripted(calls(("request_rollout", {"dev_seed": 0})))
    agents = TaskAgents.open(make_request(), task, providers={"author": FunctionProvider(model)})
    with pytest.raises(RuntimeError, match="harness bug"):
        agents.author(rollout=rollout).run(author_task(Stage.expert))
    [entry] = list(Ledger(task.ledger).entries())
    assert entry.outcome == LedgerOutcome.error and "a tool crashed: RuntimeError: harness bug" in entry.reason
    assert (
        entry.cost.input_tokens > 0 and agents.budget.state().spent_tokens == entry.cost.input_tokens + entry.cost.output_tokens
    )
    assert json.loads((task.transcripts_dir / "author" / "0001.json").read_text())["error"].endswith("harness bug")


def test_reviewer_refuses_an_episode_outside_the_episode_folders(task) -> None:
    from datafarm.agents import AccessDenied

    agents = TaskAgents.open(make_request(), task, providers={"reviewer": FunctionProvider(lambda r, i: "x")})
    with pytest.raises(AccessDenied):
        agents.reviewer(ReviewMaterial(Path("transcripts/author"), "summary"))


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_a_failed_call_is_recorded_with_the_providers_error(wire: Wire, tmp_path: Path, canary_keys) -> None:
    from datafarm.agents import ProviderHTTPError

    request = make_request(roles={"author": {"provider": wire.provider, "model": wire.model}})
    tdir = make_task_dir(tmp_path / "task", request)
    with LoopbackAPI([wire.error(500, "boom"), wire.error(400, "messages: text content blocks must be non-empty")]) as api:
        s = fast_settings()
        settings = ProviderSettings(s.timeout_s, 2048, wire.base_url(api), s.retry)
        with pytest.raises(ProviderHTTPError, match="HTTP 400 invalid_request_error: messages: text content blocks must be non-empty"):
            TaskAgents.open(request, tdir, settings=settings).author().run(author_task("grounding"))
    [entry] = list(Ledger(tdir.ledger).entries())
    assert entry.outcome == LedgerOutcome.error and entry.cost.is_zero()
    assert "text content blocks must be non-empty" in entry.reason and entry.details["attempts"] == 2
    assert "HTTP 500" in entry.details["retries"][0]
    record = json.loads((tdir.transcripts_dir / "author" / "0001.json").read_text())
    assert record["response"] is None and record["attempts"] == 2 and "HTTP 400" in record["error"]
    assert record["request"]["system"].startswith("You are the author agent")
