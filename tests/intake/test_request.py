"""Reading request.yaml: every bad input names file, line, field, what was expected and a fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from datafarm.artifacts.common import Pose
from datafarm.artifacts.request import Request
from datafarm.errors import InputError, Problem
from datafarm.intake import load_model, load_request

BASE = """\
task: nest the red cup in the blue cup
clip: clip
episodes: 4
mode: sim2real
robot: piper-dual
roles:
  author: {provider: builtin, model: builtin}
sandbox: bwrap
"""


def write_request(tmp_path: Path, text: str, *, clip: bool = True) -> Path:
    """A request file in tmp_path (with an empty clip folder next to it unless `clip` is False)."""
    if clip:
        (tmp_path / "clip").mkdir(exist_ok=True)
    path = tmp_path / "request.yaml"
    path.write_text(text)
    return path


def problems_of(tmp_path: Path, text: str, **kwargs) -> list[Problem]:
    """The problems load_request reports for `text`; fails the test if it loads."""
    path = write_request(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_request(path, **kwargs)
    err = caught.value
    assert err.exit_code == 2
    for problem in err.problems:
        assert problem.file == path, "every problem names the request file"
    return err.problems


def the_problem(problems: list[Problem], field: str) -> Problem:
    """The one problem about `field`."""
    matching = [p for p in problems if p.field == field]
    assert len(matching) == 1, f"expected one problem for {field}, got: {[p.render() for p in problems]}"
    return matching[0]


# (name, edit of BASE, field, line, words the message must contain, words `expected` must contain, hint)
BAD_VALUES = [
    ("episodes zero", ("episodes: 4", "episodes: 0"), "episodes", 3, "got 0", "an integer >= 1", None),
    ("episodes words", ("episodes: 4", "episodes: four"), "episodes", 3, "'four'", "an integer >= 1", None),
    ("episodes fraction", ("episodes: 4", "episodes: 2.5"), "episodes", 3, "2.5", "an integer >= 1", None),
    ("episodes yes", ("episodes: 4", "episodes: yes"), "episodes", 3, "got true", "an integer >= 1", None),
    ("mode misspelled", ("mode: sim2real", "mode: simreal"), "mode", 4, "'simreal'", "one of: sim2real, ood", "did you mean 'sim2real'?"),
    ("task empty", ("task: nest the red cup in the blue cup", "task: ''"), "task", 1, "empty", "a non-empty string", None),
    ("task a list", ("task: nest the red cup in the blue cup", "task: [a, b]"), "task", 1, "a list of 2 items", "a non-empty string", None),
    ("provider misspelled", ("provider: builtin, model", "provider: openia, model"), "roles.author.provider", 7, "'openia'", "one of: builtin, openai, anthropic", "did you mean 'openai'?"),
    ("hosted provider without model", ("{provider: builtin, model: builtin}", "{provider: anthropic}"), "roles.author.model", 7, "needs a model name", "anthropic model", None),
    ("role not a mapping", ("{provider: builtin, model: builtin}", "openai"), "roles.author", 7, "got 'openai'", "a mapping with keys: provider, model", None),
    ("unknown renderer", ("sandbox: bwrap", "sandbox: bwrap\nrenderer: blender"), "renderer", 9, "'blender'", "one of: composite, minimax, seedance", None),
    ("unknown executor", ("sandbox: bwrap", "sandbox: bwrap\nexecutor: ray2"), "executor", 9, "'ray2'", "one of: local, ray", "did you mean 'ray'?"),
    ("unknown sandbox", ("sandbox: bwrap", "sandbox: bwarp"), "sandbox", 8, "'bwarp'", "one of: bwrap, docker, none", "did you mean 'bwrap'?"),
    ("negative seed", ("sandbox: bwrap", "sandbox: bwrap\nseed: -1"), "seed", 9, "got -1", "an integer >= 0", None),
    ("unknown robot", ("robot: piper-dual", "robot: pipr"), "robot", 5, "'pipr'", "piper, piper-dual, or a path to a .urdf file", "did you mean 'piper'?"),
    ("negative budget", ("sandbox: bwrap", "sandbox: bwrap\nbudget:\n  max_usd: -5"), "budget.max_usd", 10, "got -5", "a number >= 0", None),
    ("fractional token budget", ("sandbox: bwrap", "sandbox: bwrap\nbudget:\n  max_tokens: 1500000.5"), "budget.max_tokens", 10, "1500000.5", "an integer >= 0", None),
    ("exponent YAML reads as text", ("sandbox: bwrap", "sandbox: bwrap\nbudget:\n  max_usd: 1e2"), "budget.max_usd", 10, "'1e2'", "a number >= 0", "write it as 100"),
    ("empty output", ("sandbox: bwrap", "sandbox: bwrap\noutput: ''"), "output", 9, "empty", "a folder path", None),
    ("clip not a path", ("clip: clip", "clip: {folder: clip}"), "clip", 2, "a mapping", "a path", None),
]


@pytest.mark.parametrize("name,edit,field,line,message,expected,hint", BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_bad_value_names_file_line_field_and_expectation(tmp_path, name, edit, field, line, message, expected, hint):
    old, new = edit
    assert old in BASE
    problem = the_problem(problems_of(tmp_path, BASE.replace(old, new, 1)), field)
    assert problem.line == line
    assert message in problem.message
    assert expected in (problem.expected or "")
    if hint:
        assert hint in (problem.hint or "")
    rendered = problem.render()
    assert rendered.startswith(f"{tmp_path / 'request.yaml'}:{line}: {field}: ")


# (name, edit, unknown key's dotted field, line, suggested key)
MISSPELLED_KEYS = [
    ("top-level key", ("episodes: 4", "epsiodes: 4"), "epsiodes", 3, "episodes"),
    ("role name", ("  author:", "  autor:"), "roles.autor", 7, "author"),
    ("key inside a role", ("model: builtin", "modle: builtin"), "roles.author.modle", 7, "model"),
    ("budget key", ("sandbox: bwrap", "sandbox: bwrap\nbudget:\n  max_tokns: 5"), "budget.max_tokns", 10, "max_tokens"),
    ("ood axis", ("mode: sim2real", "mode: ood\nood_axes:\n  tablecloht: [red]"), "ood_axes.tablecloht", 6, "tablecloth"),
]


@pytest.mark.parametrize("name,edit,field,line,suggestion", MISSPELLED_KEYS, ids=[c[0] for c in MISSPELLED_KEYS])
def test_misspelled_key_suggests_the_closest_valid_one(tmp_path, name, edit, field, line, suggestion):
    problem = the_problem(problems_of(tmp_path, BASE.replace(*edit, 1)), field)
    assert problem.line == line
    assert "unknown key" in problem.message
    assert suggestion in (problem.expected or "")
    assert problem.hint == f"did you mean '{suggestion}'?"


def test_misspelled_required_key_also_reports_the_missing_one(tmp_path):
    problems = problems_of(tmp_path, BASE.replace("episodes: 4", "epsiodes: 4"))
    missing = the_problem(problems, "episodes")
    assert "required key 'episodes' is missing" in missing.message
    assert missing.expected == "an integer >= 1"


def test_missing_required_key(tmp_path):
    problem = the_problem(problems_of(tmp_path, BASE.replace("task: nest the red cup in the blue cup\n", "")), "task")
    assert "required key 'task' is missing" in problem.message
    assert problem.expected == "a non-empty string"


def test_every_problem_is_reported_not_just_the_first(tmp_path):
    text = BASE.replace("episodes: 4", "episodes: 0").replace("mode: sim2real", "mode: both").replace("  author:", "  autor:")
    problems = problems_of(tmp_path, text)
    assert [p.field for p in problems] == ["episodes", "mode", "roles.autor"]
    assert [p.line for p in problems] == [3, 4, 7]


def test_yaml_syntax_error_gives_line_and_column(tmp_path):
    problems = problems_of(tmp_path, BASE.replace("episodes: 4", "episodes: [4"))
    assert len(problems) == 1
    problem = problems[0]
    assert "YAML syntax error" in problem.message
    assert problem.line is not None and problem.line >= 3
    assert problem.column is not None
    assert f"request.yaml:{problem.line}:{problem.column}: " in problem.render()


def test_bad_indentation_is_a_syntax_error(tmp_path):
    problems = problems_of(tmp_path, BASE.replace("  author:", "   author:\n  judge_writer: {}"))
    assert "YAML syntax error" in problems[0].message
    assert problems[0].line == 8


def test_duplicate_key_names_both_lines(tmp_path):
    problems = problems_of(tmp_path, BASE + "episodes: 5\n")
    problem = the_problem(problems, "episodes")
    assert problem.line == 9
    assert "duplicate key 'episodes'" in problem.message and "line 3" in problem.message


def test_duplicate_key_in_a_nested_mapping(tmp_path):
    problems = problems_of(tmp_path, BASE.replace("  author:", "  reviewer: {}\n  reviewer: {}\n  author:"))
    problem = the_problem(problems, "roles.reviewer")
    assert problem.line == 8 and "line 7" in problem.message


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    text = BASE.replace(
        "roles:\n  author: {provider: builtin, model: builtin}",
        "roles:\n  author: &role {provider: builtin, model: builtin}\n  reviewer:\n    <<: *role\n    model: builtin",
    )
    request = load_request(write_request(tmp_path, text))
    assert request.roles.reviewer.provider == "builtin"


def test_top_level_must_be_a_mapping(tmp_path):
    problems = problems_of(tmp_path, "- task: nest cups\n- episodes: 4\n")
    assert len(problems) == 1
    assert "top level must be a mapping" in problems[0].message and "a list" in problems[0].message
    assert problems[0].line == 1
    assert "task" in (problems[0].expected or "")


def test_empty_file(tmp_path):
    problems = problems_of(tmp_path, "# nothing here\n")
    assert "empty" in problems[0].message


def test_missing_request_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as caught:
        load_request(path)
    assert caught.value.problems[0].file == path
    assert "not found" in caught.value.problems[0].message


def test_clip_folder_missing(tmp_path):
    path = write_request(tmp_path, BASE.replace("clip: clip", "clip: recordings/day1"))
    with pytest.raises(InputError) as caught:
        load_request(path)
    problem = the_problem(caught.value.problems, "clip")
    assert problem.line == 2
    assert str(tmp_path / "recordings" / "day1") in problem.message and "does not exist" in problem.message
    assert "clip.yaml" in (problem.expected or "")


def test_clip_that_is_a_file(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"")
    problem = the_problem(problems_of(tmp_path, BASE.replace("clip: clip", "clip: clip.mp4")), "clip")
    assert "is a file, not a folder" in problem.message


def test_urdf_missing(tmp_path):
    problem = the_problem(problems_of(tmp_path, BASE.replace("robot: piper-dual", "robot: arms/my_arm.urdf")), "robot")
    assert problem.line == 5
    assert str(tmp_path / "arms" / "my_arm.urdf") in problem.message and "does not exist" in problem.message


def test_urdf_path_is_resolved_against_the_request_folder(tmp_path):
    (tmp_path / "arms").mkdir()
    (tmp_path / "arms" / "my_arm.urdf").write_text("<robot name='x'/>")
    request = load_request(write_request(tmp_path, BASE.replace("robot: piper-dual", "robot: arms/my_arm.urdf")))
    assert request.robot_urdf == tmp_path / "arms" / "my_arm.urdf"


def test_sandbox_none_needs_the_unsafe_flag(tmp_path):
    text = BASE.replace("sandbox: bwrap", "sandbox: none")
    problem = the_problem(problems_of(tmp_path, text), "sandbox")
    assert problem.line == 8
    assert "--unsafe-no-sandbox" in (problem.hint or "")
    assert "admission refuses" in (problem.hint or "")
    request = load_request(tmp_path / "request.yaml", allow_unsafe_sandbox=True)
    assert request.sandbox == "none"


def test_ood_without_axes(tmp_path):
    problem = the_problem(problems_of(tmp_path, BASE.replace("mode: sim2real", "mode: ood")), "ood_axes")
    assert "mode is ood" in problem.message
    assert "tablecloth, light_colour, light_intensity" in (problem.expected or "")


def test_sim2real_with_axes(tmp_path):
    text = BASE.replace("mode: sim2real", "mode: sim2real\nood_axes: {tablecloth: [red_check]}")
    problem = the_problem(problems_of(tmp_path, text), "ood_axes")
    assert problem.line == 5
    assert "sim2real" in problem.message and "not allowed" in problem.message


def test_unknown_ood_axis(tmp_path):
    text = BASE.replace("mode: sim2real", "mode: ood\nood_axes:\n  tablecloth: [red_check]\n  weather: [rain]")
    problem = the_problem(problems_of(tmp_path, text), "ood_axes.weather")
    assert problem.line == 7
    assert "unknown key 'weather'" in problem.message
    assert problem.expected == "one of: tablecloth, light_colour, light_intensity"


def test_ood_axis_without_values(tmp_path):
    text = BASE.replace("mode: sim2real", "mode: ood\nood_axes:\n  light_colour: []")
    problem = the_problem(problems_of(tmp_path, text), "ood_axes.light_colour")
    assert problem.line == 6 and "empty list" in problem.message
    assert "non-empty list" in (problem.expected or "")


def test_ood_request_loads(tmp_path):
    text = BASE.replace("mode: sim2real", "mode: ood\nood_axes:\n  tablecloth: [red_check, white_linen]\n  light_intensity: [0.5, 1.5]")
    request = load_request(write_request(tmp_path, text))
    assert request.ood_axes == {"tablecloth": ["red_check", "white_linen"], "light_intensity": [0.5, 1.5]}


def test_roles_left_out_get_the_builtin_default(tmp_path):
    text = BASE.replace("  author: {provider: builtin, model: builtin}", "  reviewer: {provider: openai, model: gpt-5}")
    request = load_request(write_request(tmp_path, text))
    assert (request.roles.author.provider, request.roles.author.model) == ("builtin", "builtin")
    assert (request.roles.judge_writer.provider, request.roles.judge_writer.model) == ("builtin", "builtin")
    assert (request.roles.reviewer.provider, request.roles.reviewer.model) == ("openai", "gpt-5")
    assert (request.renderer, request.executor, request.seed) == ("composite", "local", 0)
    assert (request.budget.max_usd, request.budget.max_tokens) == (50.0, 2_000_000)


def test_paths_resolve_against_the_request_file_not_the_working_directory(tmp_path, monkeypatch):
    write_request(tmp_path, BASE)
    monkeypatch.chdir("/")
    request = load_request(tmp_path / "request.yaml")
    assert request.clip == tmp_path / "clip"
    assert request.output == tmp_path / "runs"


def test_key_yaml_reads_as_a_number(tmp_path):
    problem = the_problem(problems_of(tmp_path, BASE + "2: two\n"), "2")
    assert problem.line == 9 and "unknown key '2'" in problem.message


def test_task_folder_copy_round_trips_without_a_base_folder(tmp_path):
    request = load_request(write_request(tmp_path, BASE))
    copy = tmp_path / "copy.yaml"
    copy.write_text(yaml.safe_dump(request.model_copy(update={"clip_sha256": "ab" * 32}).model_dump(mode="json")))
    again = load_model(Request, copy)
    assert again.clip == request.clip and again.output == request.output and again.clip_sha256 == "ab" * 32


def test_load_model_works_for_any_artifact(tmp_path):
    path = tmp_path / "pose.yaml"
    path.write_text("position: [0, 0]\nquaternion: [1, 0, 0, 0]\nrotation: 1\n")
    with pytest.raises(InputError) as caught:
        load_model(Pose, path)
    problems = {p.field: p for p in caught.value.problems}
    assert problems["position"].line == 1 and problems["position"].expected == "a list of 3 numbers"
    assert problems["rotation"].line == 3 and "position, quaternion" in (problems["rotation"].expected or "")
