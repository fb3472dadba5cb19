"""Role prompts come from K's Jinja2 role templates, filled with the stage skill and the JSON Schemas
of what the role writes; the draft K's templates (k2) also list the role's tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datafarm import capability
from datafarm.agents import FunctionProvider, ReviewMaterial, TaskAgents
from datafarm.agents.messages import ModelResponse
from datafarm.agents.prompts import author_prompt, judge_writer_prompt, reviewer_prompt
from datafarm.agents.tools.reviewer import verdict_schema
from datafarm.artifacts.judge import JudgeSpec
from datafarm.capability.bundle import BUNDLES_DIR, CapabilityBundle
from datafarm.capability.models import CapabilityManifest
from tests.agents.conftest import make_request


def draft_k2() -> CapabilityBundle:
    """The draft k2 folder as a bundle (it has no manifest until released)."""
    manifest = CapabilityManifest(version="k2", released="draft", description="draft", sha256="0" * 64, files={})
    return CapabilityBundle(root=BUNDLES_DIR / "k2", manifest=manifest)


@pytest.mark.parametrize("bundle", [capability.load(), draft_k2()], ids=["released", "k2-draft"])
def test_every_role_prompt_renders(bundle: CapabilityBundle, task) -> None:
    silent = FunctionProvider(lambda r, i: ModelResponse.of("x"))
    agents = TaskAgents.open(
        make_request(), task, bundle=bundle, providers={r: silent for r in ("author", "judge_writer", "reviewer")}
    )
    author = agents.author()
    tools = list(author.tools.tools.values())
    text = author_prompt(bundle, agents.request, "contract", "contract", ("contract", "sampler"), tools)
    schemas = json.loads(text.split("JSON Schema:\n", 1)[1])
    assert set(schemas) == {"contract", "sampler"} and schemas["contract"]["title"] == "TaskContract"
    assert bundle.skill("contract").strip()[:120] in text

    access = agents.access("judge_writer")
    jw_tools = list(agents.judge_writer().tools.tools.values())
    jw = judge_writer_prompt(bundle, access, task, JudgeSpec.model_json_schema(), jw_tools)
    assert "Task contract (T):\n(not written yet)" in jw
    assert json.loads(jw.split("JSON Schema:\n", 1)[1])["title"] == "JudgeSpec"

    rv_tools = list(agents.reviewer(ReviewMaterial(Path("episodes/e"), "s")).tools.tools.values())
    rv = reviewer_prompt(bundle, "nest the cups", "red cup in blue cup", verdict_schema(), rv_tools)
    assert "red cup in blue cup" in rv and "provider" not in json.loads(rv.split("JSON Schema:\n", 1)[1])["properties"]

    listed = bundle.version == "k2"
    assert ("- write_artifact:" in text) is listed
    assert ("- write_judge:" in jw) is listed
    assert ("- fetch_reference_frame:" in rv) is listed


def test_judge_writer_prompt_carries_t_as_written(task) -> None:
    from datafarm.artifacts.io import save_artifact
    from tests.artifacts.test_schemas import nest_contract

    save_artifact(nest_contract(), task.contract)
    agents = TaskAgents.open(make_request(), task, providers={"judge_writer": FunctionProvider(lambda r, i: "x")})
    text = judge_writer_prompt(capability.load(), agents.access("judge_writer"), task, JudgeSpec.model_json_schema(), [])
    assert task.contract.read_text() in text
