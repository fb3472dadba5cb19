"""Role boundaries are enforced by code: each role has exactly its own tools, and every path a tool
touches is resolved and checked, so no spelling (`..`, absolute paths, symlinks) lets the author read
J, the judge-writer read C, or the reviewer read the author's transcript."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from datafarm.agents import FunctionProvider, ReviewMaterial, StageFailed, TaskAgents, author_task, judge_task, review_task
from datafarm.agents.access import PRIVATE_AREAS, AccessDenied, ExternalRoot, RoleAccess
from datafarm.agents.messages import ModelResponse, ToolCall
from datafarm.agents.tools.base import ToolContext
from datafarm.artifacts.stages import Stage
from tests.agents.conftest import EXAMPLE_CLIP, make_request

AUTHOR_TOOLS = {
    "list_views",
    "clip_info",
    "fetch_frame",
    "pixel_colour",
    "region_stats",
    "find_colour",
    "read_artifact",
    "write_artifact",
    "write_controller",
    "request_rollout",
}
JUDGE_WRITER_TOOLS = {"read_contract", "read_grounding", "write_judge"}
REVIEWER_TOOLS = {
    "fetch_rendered_frame",
    "fetch_reference_frame",
    "pixel_colour",
    "region_stats",
    "find_colour",
    "sim_state_summary",
    "write_verdict",
}


@pytest.fixture
def private_material(task):
    """Every role's private files, as a later stage would have left them."""
    root = task.root
    for rel, text in {
        "judge/spec.json": '{"marker": "J-SPEC-7731"}',
        "judge/draft.json": '{"marker": "J-DRAFT-7731"}',
        "expert/controller.py": "EXPERT_CONTROLLER_7731 = 1\n",
        "transcripts/author/0001.json": '{"marker": "AUTHOR-TRANSCRIPT-7731"}',
        "batch.yaml": "admission_seed_count: 9\n",
        "contract.yaml": "stages: []\n",
        "grounding.json": "{}\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    episode = task.episode("ep_0001")
    (episode / "obs").mkdir(parents=True)
    shutil.copy(EXAMPLE_CLIP / "front.mp4", episode / "obs" / "front.mp4")
    return task


def first_then(first: ModelResponse, then: str):
    """A model function answering `first` once, then the text `then` forever."""

    def model(request, info) -> ModelResponse:
        return first if info.call_index == 0 else ModelResponse.of(then)

    return model


def agents_for(task, **providers) -> TaskAgents:
    silent = FunctionProvider(lambda request, info: ModelResponse.of("nothing"))
    return TaskAgents.open(
        make_request(), task, providers={r: providers.get(r, silent) for r in ("author", "judge_writer", "reviewer")}
    )


def test_each_role_has_exactly_its_own_tools(private_material) -> None:
    agents = agents_for(private_material)
    author = agents.author(rollout=lambda seed: {"passed": True, "stage_reached": "done", "reason": "ok"}, dev_seeds=[0])
    assert set(author.tools.names) == AUTHOR_TOOLS
    assert set(agents.author().tools.names) == AUTHOR_TOOLS - {"request_rollout"}  # offered only with a harness
    assert set(agents.judge_writer().tools.names) == JUDGE_WRITER_TOOLS
    assert set(agents.reviewer(ReviewMaterial(Path("episodes/ep_0001"), "summary")).tools.names) == REVIEWER_TOOLS


@pytest.mark.parametrize(
    "role, path",
    [
        ("author", "judge/spec.json"),
        ("author", "judge/draft.json"),
        ("author", "./judge/../judge/spec.json"),
        ("author", "expert/../judge/spec.json"),
        ("author", "expert/../../task/judge/spec.json"),
        ("author", "transcripts/author/0001.json"),
        ("author", "batch.yaml"),
        ("author", "ledger.jsonl"),
        ("judge_writer", "expert/controller.py"),
        ("judge_writer", "contract.yaml/../expert/controller.py"),
        ("judge_writer", "transcripts/author/0001.json"),
        ("reviewer", "transcripts/author/0001.json"),
        ("reviewer", "episodes/ep_0001/obs/../../../transcripts/author/0001.json"),
        ("reviewer", "judge/spec.json"),
        ("reviewer", "expert/controller.py"),
        ("reviewer", "grounding.json"),
        ("reviewer", "/etc/passwd"),
        ("author", "../outside.txt"),
    ],
)
def test_path_guard_refuses_other_roles_material(private_material, role: str, path: str) -> None:
    guard = agents_for(private_material).access(role)
    with pytest.raises(AccessDenied):
        guard.readable(path)
    with pytest.raises(AccessDenied):
        guard.readable(private_material.root / path)  # the same, spelled absolute
    with pytest.raises(AccessDenied):
        guard.writable(path)


def test_path_guard_follows_symlinks(private_material) -> None:
    root = private_material.root
    os.symlink(root / "judge" / "spec.json", root / "expert" / "notes.txt")
    os.symlink(root / "transcripts", root / "episodes" / "ep_0001" / "obs" / "left.mp4")
    author = RoleAccess("author", root)
    reviewer = RoleAccess("reviewer", root)
    with pytest.raises(AccessDenied, match="judge is private to judge_writer"):
        author.readable("expert/notes.txt")
    with pytest.raises(AccessDenied, match="transcripts is private to no agent role"):
        reviewer.readable("episodes/ep_0001/obs/left.mp4")


def test_path_guard_allows_each_roles_own_material(private_material) -> None:
    root = private_material.root
    clip = {"clip": ExternalRoot(EXAMPLE_CLIP)}
    assert RoleAccess("author", root, clip).readable("expert/controller.py").name == "controller.py"
    assert RoleAccess("author", root, clip).readable(EXAMPLE_CLIP / "front.mp4").name == "front.mp4"
    assert RoleAccess("judge_writer", root).readable("contract.yaml").name == "contract.yaml"
    assert RoleAccess("judge_writer", root).writable("judge/draft.json").name == "draft.json"
    assert RoleAccess("reviewer", root, clip).readable("episodes/ep_0001/obs/front.mp4").name == "front.mp4"
    assert RoleAccess("reviewer", root).writable("episodes/ep_0001/review.json").name == "review.json"
    with pytest.raises(AccessDenied):
        agents_for(private_material).access("judge_writer").readable(EXAMPLE_CLIP / "front.mp4")  # no clip for it
    with pytest.raises(ValueError, match="judge_writer may not be granted clip"):
        RoleAccess("judge_writer", root, clip)
    with pytest.raises(AccessDenied):
        RoleAccess("judge_writer", root).writable("judge/spec.json")  # the frozen spec is the harness's


def test_private_areas_name_every_role_boundary() -> None:
    assert PRIVATE_AREAS["judge"] == {"judge_writer"}
    assert PRIVATE_AREAS["expert"] == {"author"}
    assert PRIVATE_AREAS["transcripts"] == frozenset()


def _run_tool(agent, name: str, args: dict, stage: Stage, writes: tuple[str, ...]):
    task = author_task(stage) if agent.role == "author" else (judge_task() if agent.role == "judge_writer" else review_task())
    context = ToolContext(agent.role, task, "function", "function:test")
    result, _ = agent.tools.run(ToolCall("c1", name, args), context)
    return result


@pytest.mark.parametrize(
    "role, tool, args",
    [
        ("author", "fetch_frame", {"view": "../../judge/spec", "frame": 0}),
        ("author", "fetch_frame", {"view": "../task/judge/spec.json", "frame": 0}),
        ("author", "read_artifact", {"artifact": "J"}),
        ("author", "read_artifact", {"artifact": "../judge/spec.json"}),
        ("reviewer", "fetch_rendered_frame", {"view": "../../../transcripts/author/0001", "frame": 0}),
        ("reviewer", "fetch_rendered_frame", {"view": "../../../judge/spec", "frame": 0}),
        ("reviewer", "fetch_reference_frame", {"view": "../../transcripts/author/0001", "frame": 0}),
        ("reviewer", "pixel_colour", {"view": "../../../transcripts/author/0001", "frame": 0, "x": 0, "y": 0}),
    ],
)
def test_tools_refuse_path_tricks(private_material, role: str, tool: str, args: dict) -> None:
    agents = agents_for(private_material)
    agent = agents.author() if role == "author" else agents.reviewer(ReviewMaterial(Path("episodes/ep_0001"), "summary"))
    result = _run_tool(agent, tool, args, Stage.grounding, ())
    assert result.is_error
    assert "7731" not in result.text


def test_a_whole_author_conversation_cannot_reach_j(private_material) -> None:
    """Whatever a model asks, no tool result of the author ever carries J's content, and J is untouched."""
    attempts = [
        ToolCall("a", "read_artifact", {"artifact": "J"}),
        ToolCall("b", "fetch_frame", {"view": "../../judge/spec", "frame": 0}),
        ToolCall("c", "read_judge", {}),
        ToolCall("d", "write_artifact", {"artifact": "G", "content": {"../judge/spec.json": 1}}),
    ]
    agents = agents_for(private_material, author=FunctionProvider(first_then(ModelResponse.of(*attempts), "giving up")))
    with pytest.raises(StageFailed):
        agents.author().run(author_task(Stage.grounding))
    planted, *recorded = sorted((private_material.transcripts_dir / "author").glob("*.json"))
    assert planted.name == "0001.json" and recorded[0].name == "0002.json"  # numbering continues, never overwrites
    first = json.loads(recorded[0].read_text())
    assert [r["is_error"] for r in first["tool_results"]] == [True, True, True, True]
    assert "there is no tool 'read_judge'" in first["tool_results"][2]["content"][0]["text"]
    for p in recorded:
        assert "7731" not in p.read_text()
    assert (private_material.root / "judge" / "spec.json").read_text() == '{"marker": "J-SPEC-7731"}'


def test_judge_writer_prompt_and_tools_never_include_the_expert(private_material) -> None:
    model = first_then(ModelResponse.of(ToolCall("x", "read_contract", {})), "stop")
    agents = agents_for(private_material, judge_writer=FunctionProvider(model))
    with pytest.raises(StageFailed):
        agents.judge_writer().run(judge_task())
    for p in (private_material.transcripts_dir / "judge_writer").glob("*.json"):
        assert "7731" not in p.read_text()


def test_reviewer_prompt_never_includes_the_authors_transcript(private_material) -> None:
    agents = agents_for(private_material, reviewer=FunctionProvider(first_then(ModelResponse.of("stop"), "stop")))
    with pytest.raises(StageFailed):
        agents.reviewer(ReviewMaterial(Path("episodes/ep_0001"), "summary")).run(review_task())
    for p in (private_material.transcripts_dir / "reviewer").glob("*.json"):
        assert "7731" not in p.read_text()
