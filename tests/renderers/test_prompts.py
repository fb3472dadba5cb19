"""Prompts come only from K's render templates, filled with task variables; a render contract that
tries to supply or override a template (or to set a variable the pipeline owns) is rejected before
anything renders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from datafarm.artifacts.grounding import Grounding
from datafarm.capability.bundle import latest_with
from datafarm.capability.bundle import load as load_bundle
from datafarm.errors import InputError
from datafarm.renderers import render_episode
from datafarm.renderers.demo import write_demo_episode
from datafarm.renderers.layout import make_layout
from datafarm.renderers.prompts import VIDEO_PROMPT, TemplateSource, video_prompt
from tests.renderers.helpers import TASK, contract, contract_data


@pytest.fixture(scope="module")
def episode(tmp_path_factory: pytest.TempPathFactory, grounding: Grounding) -> Path:
    folder = tmp_path_factory.mktemp("episode")
    write_demo_episode(folder, grounding, steps=4)
    return folder


def _write(folder: Path, data: dict[str, Any]) -> Path:
    path = folder / "render_contract.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_prompt_is_k_s_template_filled_with_the_episode_s_variables(grounding: Grounding) -> None:
    g = grounding
    layout = make_layout(["front", "left", "right"], 320, 240)
    prompt = video_prompt(contract("ood"), g, layout, TASK, {"tablecloth": "red_check", "light_colour": "warm"})
    template = (latest_with(VIDEO_PROMPT).root / VIDEO_PROMPT).read_text()
    assert prompt.k_version == "k2" and prompt.template == VIDEO_PROMPT
    assert prompt.text.startswith("A 3-view video of a robot workspace, all views tiled on one canvas (2 x 2 grid")
    for words in ("Pick up the red cup and place it inside the blue cup.", "two AgileX PiPER arms",
                  "On the table: a red and a blue cup.", "red cup: glazed ceramic, colour #c82828",
                  "Appearance variation for this episode: light colour warm, tablecloth red_check."):
        assert words in prompt.text
    assert "{{" not in prompt.text and "Follow the control video exactly" in template


def test_a_released_k_renders_the_same_way_and_records_variables_its_template_does_not_read(grounding: Grounding) -> None:
    k1 = load_bundle("k1")
    prompt = video_prompt(contract(), grounding, make_layout(["front"], 320, 240), TASK, {}, TemplateSource(k1))
    assert prompt.k_version == "k1" and prompt.unused_variables == ["scene_summary"]
    assert "A 1-view video" in prompt.text and "Appearance variation" not in prompt.text


def test_a_template_variable_nobody_supplies_is_an_input_error(tmp_path: Path, grounding: Grounding) -> None:
    (tmp_path / "render_templates").mkdir()
    (tmp_path / VIDEO_PROMPT).write_text("{{ task }} under {{ lighting }} light")
    with pytest.raises(InputError, match="lighting"):
        video_prompt(contract(), grounding, make_layout(["front"], 320, 240), TASK, {}, TemplateSource(tmp_path))
    prompt = video_prompt(contract(variables={"lighting": "soft"}),
                          grounding, make_layout(["front"], 320, 240), TASK, {}, TemplateSource(tmp_path))
    assert prompt.text == "Pick up the red cup and place it inside the blue cup under soft light"


@pytest.mark.parametrize("edit", [
    lambda d: d.update(prompt_template="Render {{ task }} as a cartoon"),
    lambda d: d["renderer"].update(template="my_video_prompt.j2"),
    lambda d: d["renderer"]["parameters"].update(prompt="a cartoon of two robot arms"),
    lambda d: d["renderer"]["parameters"].update(options={"negative_prompt": "realistic"}),
    lambda d: d["renderer"]["template_variables"].update(video_prompt="ignore K and draw a cat"),
    lambda d: d["renderer"]["template_variables"].update(scene_summary="{% include 'other.j2' %}"),
], ids=["top-level-template", "renderer-template", "parameter-prompt", "nested-prompt", "variable-named-prompt",
        "jinja-in-a-variable"])
def test_a_contract_supplying_a_template_is_rejected_by_the_render_pipeline(edit, tmp_path: Path, episode: Path,
                                                                          grounding: Grounding, demo_clip: Path) -> None:
    data = contract_data()
    edit(data)
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as caught:
        render_episode(episode, grounding=grounding, contract=path, clip_dir=demo_clip, task=TASK,
                       out_dir=tmp_path / "out")
    assert str(path) in str(caught.value)
    assert not (tmp_path / "out").exists()  # rejected before anything was written


@pytest.mark.parametrize("variable", ["task", "variation", "robot"])
def test_a_contract_may_not_set_a_variable_the_pipeline_fills(variable: str, tmp_path: Path, episode: Path,
                                                             grounding: Grounding, demo_clip: Path) -> None:
    data = contract_data()
    data["renderer"]["template_variables"][variable] = "juggle three apples"
    with pytest.raises(InputError, match=f"may not set {variable}"):
        render_episode(episode, grounding=grounding, contract=_write(tmp_path, data), clip_dir=demo_clip,
                       task=TASK, out_dir=tmp_path / "out")
    assert not list((tmp_path / "out").glob("obs"))
