"""The builtin expert without the simulator in the loop: the controller it writes is a whole program
generated from G and T (no example's ids, colours or coordinates in the code), its kinematic model
agrees with the simulator's robot, `revise` turns dev verdicts into the next parameters, and the
stage's conversation (`respond`) replays through tool calls to the end."""

from __future__ import annotations

import ast
import itertools
import json
import math
import re

import numpy as np
import pytest
import yaml

from datafarm.agents.builtin import expert
from datafarm.agents.builtin.controllers import INLINE_MARKER, inline_source
from datafarm.agents.builtin.controllers import runtime as rt
from datafarm.agents.builtin.expert import (
    DevPlan,
    ExpertError,
    default_params,
    failure_kind,
    respond,
    revise,
    scene_spec,
    task_spec,
    write_controller,
)
from datafarm.agents.messages import (
    Message,
    ModelRequest,
    TextPart,
    ToolResult,
    ToolSpec,
)
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.sim.world import build_world
from tests.agents.builtin.expert_fixtures import (
    CASES,
    contract_from_text,
    side_drawer_grounding,
)


def _renamed(grounding: Grounding, names: dict[str, str], shift: float = 0.03) -> Grounding:
    """G with its objects renamed, recoloured and moved: what the same task looks like elsewhere."""
    data = grounding.model_dump(mode="json")
    for obj in data["objects"]:
        obj["id"] = names.get(obj["id"], obj["id"])
        obj["nouns"] = [obj["id"].replace("_", " ")]
        obj["colour"] = [round(1.0 - c, 3) for c in obj["colour"]]
        obj["pose"]["position"][0] += shift
    return Grounding.model_validate(data)


def _with_ids(case, prefix: str = "obj") -> tuple[Grounding, TaskContract]:
    """The case's G and T with every object id replaced by an arbitrary one."""
    g = case.grounding()
    names = {o.id: f"{prefix}{i}_q" for i, o in enumerate(g.objects)}

    def swap(value, key=None):
        if isinstance(value, dict):
            return {k: swap(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, str) and key != "kind":
            head, dot, part = value.partition(".")
            if head in names:
                return names[head] + dot + part
        return value

    g2 = Grounding.model_validate(swap(g.model_dump(mode="json")))
    return g2, TaskContract.model_validate(swap(case.contract().model_dump(mode="json", by_alias=True)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_controller_is_one_program_generated_from_g_and_t(name):
    g, t = _with_ids(CASES[name])
    source = write_controller(g, t, default_params(g, t))
    tree = ast.parse(source)  # a whole, valid Python program
    imports = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imports |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imports <= {"datafarm_expert", "math", "sys", "time", "numpy"}  # what the sandbox has
    assert source.index("from datafarm_expert import") < source.index("import numpy")  # the API takes stdout first
    assert "robot.done(" not in source or "done(success=True" in source
    for oid in t.roles.values():
        assert repr(oid) in source  # the ids come from G and T ...
    # ... and the code below the data names none of them: the same program drives any scene
    code = ast.parse(source[source.index("# --- runtime"):])
    literals = {n.value for n in ast.walk(code) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not literals & {obj.id for obj in g.objects}


def test_another_scene_and_phrasing_give_the_same_program_with_other_data():
    g = CASES["nest"].grounding()
    other = _renamed(g, {"red_cup": "small_mug", "blue_cup": "big_bowl_cup"})
    t = contract_from_text("Stack the small mug inside the big bowl cup.")(other)
    assert t.family == "nest" and set(t.roles.values()) == {"small_mug", "big_bowl_cup"}
    first = write_controller(g, CASES["nest"].contract(), default_params(g, CASES["nest"].contract()))
    second = write_controller(other, t, default_params(other, t))
    assert first.split("# --- runtime")[1] == second.split("# --- runtime")[1]  # same code
    spec = task_spec(other, t)
    assert spec["item"] == "small_mug" and spec["container"] == "big_bowl_cup"  # the smaller goes in


def test_roles_counts_and_arms_come_from_the_contract():
    g = CASES["drum"].grounding()
    t = contract_from_text("Hit the drum 5 times.")(g)
    assert task_spec(g, t)["strikes"] == 5
    drawer = CASES["drawer"]
    spec = task_spec(drawer.grounding(), drawer.contract())
    assert spec["cabinet"] == "cabinet" and spec["item"] == "red_block"
    assert spec["open_at_least"] == pytest.approx(drawer.contract().stages[0].done_when.value)
    # a contract naming who grasps makes that arm required
    data = drawer.contract().model_dump(mode="json", by_alias=True)
    data["stages"][1]["done_when"]["all"][0]["by"] = "right"
    assert task_spec(drawer.grounding(), TaskContract.model_validate(data))["item_arm"] == "right"


def test_unsupported_families_and_missing_roles_are_refused():
    case = CASES["nest"]
    data = case.contract().model_dump(mode="json", by_alias=True)
    with pytest.raises(ExpertError, match="family 'fold_towel'"):
        default_params(case.grounding(), TaskContract.model_validate({**data, "family": "fold_towel"}))
    with pytest.raises(ExpertError, match="G lacks"):
        task_spec(case.grounding(), TaskContract.model_validate({**data, "roles": {"inner": "ghost", "outer": "blue_cup"}}))


def test_inlined_sources_have_no_imports_and_strip_to_valid_code():
    for name in ("runtime", "families"):
        body = inline_source(name)
        assert not re.search(r"^\s*(import|from) ", body, re.MULTILINE)
        ast.parse(body)
        assert len(body) < len(inline_source(name, docstrings=True))
        assert INLINE_MARKER not in body


def test_the_controllers_kinematics_match_the_simulated_robot():
    g = CASES["nest"].grounding()
    world = build_world(g)
    spec = scene_spec(g)
    rng = np.random.default_rng(3)
    for arm in ("left", "right"):
        limits = world.robot.limits(arm)
        kin = rt.Kinematics(spec["arms"][arm]["chain"], spec["arms"][arm]["base_matrix"], spec["arms"][arm]["tcp"],
                            limits.lower, limits.upper, spec["arms"][arm]["reach"])
        for _ in range(5):
            q = rng.uniform(limits.lower, limits.upper)
            mine = kin.forward(q)[0]
            theirs = world.robot.fk(arm, q)
            assert np.abs(mine[:3, 3] - np.asarray(theirs.p)).max() < 1e-5
            assert rt.rotation_error(mine[:3, :3], rt.quat_to_matrix(theirs.q)) == pytest.approx(np.zeros(3), abs=1e-5)
            # the quick check refuses only poses at full stretch (within its small safety margin)
            reach = spec["arms"][arm]["reach"]
            wrist = mine[:3, 3] - reach["wrist_offset"] * mine[:3, 2]
            stretch = np.linalg.norm(wrist - kin.shoulder)
            assert kin.within_reach(mine[:3, 3], mine[:3, :3]) or stretch > reach["radius"] - 1e-9
            assert stretch < reach["radius"] + 0.02
            solved = kin.solve(mine[:3, 3], mine[:3, :3], (limits.lower + limits.upper) / 2, restarts=6)
            if solved is not None:
                assert np.abs(kin.forward(solved)[0][:3, 3] - mine[:3, 3]).max() < 1e-3
        far = np.asarray(spec["arms"][arm]["base"]) + np.array([0.9, 0.0, 0.1])
        assert kin.solve(far, np.diag([1.0, -1.0, -1.0]), (limits.lower + limits.upper) / 2) is None


def _left_arm_kinematics() -> rt.Kinematics:
    g = CASES["nest"].grounding()
    spec = scene_spec(g)["arms"]["left"]
    limits = build_world(g).robot.limits("left")
    return rt.Kinematics(spec["chain"], spec["base_matrix"], spec["tcp"], limits.lower, limits.upper, spec["reach"])


def test_a_point_to_point_move_that_would_sweep_through_an_object_detours_around_it():
    kin = _left_arm_kinematics()
    gripper = scene_spec(CASES["nest"].grounding())["gripper"]
    home = np.zeros(6)  # folded at rest, as after `park`
    base = kin.base[:3, 3]
    down = np.diag([1.0, -1.0, -1.0])  # straight down
    goal = base + np.array([0.30, 0.18, 0.10])
    q1 = kin.solve(goal, down, home)
    assert q1 is not None
    # a block where the hand passes halfway along the direct joint-space move
    middle = kin.forward(0.5 * q1)[0]
    hand = rt.gripper_points(middle[:3, 3], middle[:3, :3], gripper).mean(axis=0)
    block = ("block", hand, np.eye(3), np.array([0.03, 0.03, 0.03]))
    assert kin.sweeps(home, q1, [block], gripper)
    joints = kin.path(home, [(goal, down, False, ())], [block], gripper)
    assert joints is not None
    plan = np.atleast_2d(joints[0])
    assert len(plan) >= 2, "the direct move sweeps the block: the plan must go by way of another configuration"
    reached = kin.forward(plan[-1])[0]
    assert np.linalg.norm(reached[:3, 3] - goal) < 1e-3
    legs = [home, *plan]
    assert not any(kin.sweeps(a, b, [block], gripper) for a, b in itertools.pairwise(legs))
    # nothing in the way: one configuration, no detour
    clear = kin.path(home, [(goal, down, False, ())], [], gripper)
    assert clear is not None and np.ndim(clear[0]) == 1

    # `go` moves through the detour's configurations in turn
    class Recorder:
        def __init__(self):
            self.moves = []

        def move_joints(self, q, arm):
            self.moves.append((arm, q))

    class Holder:
        robot = Recorder()

    assert rt.go(Holder, "left", (goal, down, False), joints[0])
    assert [q for _a, q in Holder.robot.moves] == [[float(v) for v in row] for row in plan]


def test_grip_frames_keep_the_pads_upright_and_lean_away_from_the_base():
    heading = np.array([1.0, 0.0, 0.0])
    for frame in rt.lean_frames(heading, [np.array([0.0, 1.0, 0.0])], (0.0, 30.0, 60.0)):
        assert abs(frame.closing[2]) < 1e-9  # pads upright: the fingers close horizontally
        assert math.degrees(math.acos(-frame.approach[2])) == pytest.approx(math.degrees(frame.tilt))
        assert frame.approach[0] >= -1e-9  # leaning away from the arm
        m = rt.quat_to_matrix(frame.quaternion)
        assert np.allclose(m[:, 2], frame.approach) and np.allclose(m[:, 0], frame.closing)


# --- revising ----------------------------------------------------------------------------------------------


def _verdict(passed: bool, reason: str, stage: str = "insert_inner") -> dict:
    return {"passed": passed, "stage_reached": stage, "reason": reason}


def test_failures_are_classified_from_the_verdict_reason():
    assert failure_kind(_verdict(True, "passed: all stages")) is None
    assert failure_kind(_verdict(False, "stage 'insert_inner' (2 of 2) did not complete: never true: inside(red_cup, blue_cup)")) == "place"
    assert failure_kind(_verdict(False, "stage 'grasp_inner' did not complete: never true: grasped(red_cup, by=robot)")) == "grasp"
    assert failure_kind(_verdict(False, "controller_exited: ... expert failed: right cannot carry red_cup over [0.1]")) == "reach"
    assert failure_kind(_verdict(False, "velocity_limit at 3.2 s: right.joint6 moved at 2.9")) == "speed"
    assert failure_kind(_verdict(False, "the success condition does not hold at the end: false: stable_for(apple)")) == "settle"
    assert failure_kind(_verdict(False, "something new")) == "other"


def test_revise_undoes_a_bad_offset_then_tries_further_ideas_and_runs_out():
    g, t = CASES["nest"].grounding(), CASES["nest"].contract()
    bad = {**default_params(g, t), "place_offset": [0.1, 0.0, 0.0]}
    missed = [_verdict(False, "stage 'insert_inner' (2 of 2) did not complete: never true: inside(red_cup, blue_cup)")] * 5
    first = revise(bad, missed)
    assert first["place_offset"] == [0.0, 0.0, 0.0] and first["revisions"] == ["place: undo place offset"]
    assert bad["place_offset"] == [0.1, 0.0, 0.0]  # the input is not changed
    seen, params = {json.dumps(first, sort_keys=True)}, first
    for _ in range(30):
        params = revise(params, missed)
        if params is None:
            break
        key = json.dumps(params, sort_keys=True)
        assert key not in seen  # every revision changes something new
        seen.add(key)
    assert params is None  # out of ideas, eventually
    assert revise(first, [_verdict(True, "passed")] * 5) is None  # nothing to fix


def test_revise_answers_each_kind_of_failure_with_a_matching_change():
    g, t = CASES["drum"].grounding(), CASES["drum"].contract()
    p = default_params(g, t)
    slower = revise(p, [_verdict(False, "velocity_limit at 1.0 s: left.joint6")])
    assert slower["stroke_down_seconds"] > p["stroke_down_seconds"]
    softer = revise(p, [_verdict(False, "penetration at 2.0 s: drum.head and left.link7")])
    assert softer["strike_depth"] < p["strike_depth"]
    more = revise(p, [_verdict(False, "stage 'strike_drum' did not complete: never true: contact_count(drum.head, robot)")])
    assert more["strike_height"] > p["strike_height"]


# --- the stage's conversation ---------------------------------------------------------------------------


class ScriptedTools:
    """Answers the author's tool calls of one conversation: artifacts from memory, controllers kept,
    and dev verdicts from a script (version -> passed per seed)."""

    def __init__(self, case, script):
        self.g, self.t = case.grounding(), case.contract()
        self.script = script
        self.controllers: list[str] = []
        self.manifest: dict | None = None
        self.calls: list[str] = []

    def run(self, name: str, args: dict) -> tuple[str, bool]:
        self.calls.append(name)
        if name == "read_artifact":
            if args["artifact"] == "G":
                return self.g.model_dump_json(), False
            if args["artifact"] == "T":
                return yaml.safe_dump(self.t.model_dump(mode="json", by_alias=True)), False
            return (json.dumps(self.manifest) if self.manifest else "expert has not been written yet"), False
        if name == "write_controller":
            self.controllers.append(args["code"])
            return "expert/controller.py saved", False
        if name == "write_artifact":
            self.manifest = args["content"]
            return "C validated and saved", False
        if name == "request_rollout":
            passed = self.script[len(self.controllers) - 1][args["dev_seed"]]
            reason = "passed: all stages" if passed else "never true: inside(red_cup, blue_cup)"
            return json.dumps(_verdict(passed, reason)), False
        return f"no tool {name}", True


def _converse(tools: ScriptedTools, seeds=(0, 1, 2, 3, 4), instructions="Reach a dev pass rate of 80%.", turns=40):
    specs = (ToolSpec("request_rollout", f"Run the controller on a dev seed. Dev seeds: {', '.join(map(str, seeds))}.", {}),)
    messages = [Message.user(f"Stage: expert. Work with your tools.\n\n{instructions}")]
    for _ in range(turns):
        response = respond(ModelRequest(system="Stage: expert", messages=tuple(messages), tools=specs))
        messages.append(response.as_message())
        if not response.tool_calls:
            return response.text, messages
        results = []
        for call in response.tool_calls:
            text, error = tools.run(call.name, call.arguments)
            results.append(ToolResult(call.id, call.name, (TextPart(text),), error))
        messages.append(Message("user", tuple(results)))
    raise AssertionError("the stage did not finish")


def test_the_stage_replays_through_tool_calls_and_revises_until_the_rate_is_reached():
    tools = ScriptedTools(CASES["nest"], script=[[False] * 5, [True, True, True, True, False]])
    text, messages = _converse(tools)
    assert "reached the dev pass rate: 80%" in text
    assert len(tools.controllers) == 2  # a revised second version
    assert tools.calls[:2] == ["read_artifact", "read_artifact"]
    assert tools.calls.count("request_rollout") == 10 and tools.calls.count("write_artifact") == 2
    assert tools.manifest["parameters"]["revisions"] == ["place: undo place offset"] or \
        tools.manifest["parameters"]["revisions"][0].startswith("place:")
    assert tools.manifest["sha256"] == expert.sha256_bytes(tools.controllers[-1].encode())
    # one model turn per step: reads, write the controller (+ read C), write C, the dev seeds, ...
    turns = [m for m in messages if m.role == "assistant"]
    assert len(turns) == 1 + 2 * 3 + 1


def test_the_stage_stops_at_its_budget_and_keeps_the_best_version():
    tools = ScriptedTools(CASES["nest"], script=[[True, True, False, False, False]] + [[False] * 5] * 5)
    text, _ = _converse(tools, instructions="Reach a dev pass rate of 0.8 within at most 3 controller versions.")
    assert "did not reach the dev pass rate: 40%" in text
    assert len(tools.controllers) == 4  # three versions, then the best (the first) written back
    assert tools.controllers[-1] == tools.controllers[0]


def test_plan_from_request_reads_seeds_rate_and_budget():
    specs = (ToolSpec("request_rollout", "Run it. Dev seeds: 3, 7, 9.", {}),)
    request = ModelRequest(system="", messages=(Message.user("Stage: expert. dev pass rate 0.6, at most 2 versions"),),
                           tools=specs)
    assert expert.plan_from_request(request) == (DevPlan((3, 7, 9), 0.6), 2)


class _StillRobot:
    """A harness stand-in for planning only: it reports G's object poses, the drawer `opening` open
    and the arm folded at rest; it takes no commands (the test stops before the first one)."""

    def __init__(self, grounding: Grounding, opening: float):
        world = build_world(grounding)
        self.arms = [a.name for a in grounding.robot.arms]
        self.info = {"arms": {}}
        self.state = {"arms": {}, "drawers": {}, "objects": {}}
        for arm in self.arms:
            limits = world.robot.limits(arm)
            self.info["arms"][arm] = {"lower": list(limits.lower), "upper": list(limits.upper),
                                      "gripper_max_width": scene_spec(grounding)["gripper"]["max_width"]}
            q = np.zeros(len(limits.lower))
            spec = scene_spec(grounding)["arms"][arm]
            tcp = rt.Kinematics(spec["chain"], spec["base_matrix"], spec["tcp"], limits.lower, limits.upper).forward(q)[0]
            self.state["arms"][arm] = {"q": list(q), "target": list(q), "tcp": {
                "position": list(tcp[:3, 3]), "quaternion": [float(v) for v in rt.matrix_to_quat(tcp[:3, :3])]}}
        for obj in grounding.objects:
            self.state["objects"][obj.id] = {"position": list(obj.pose.position), "quaternion": list(obj.pose.quaternion)}
            if obj.kind == "drawer_cabinet":
                self.state["drawers"][obj.id] = opening

    def observe(self):
        return self.state


def test_an_item_level_with_a_cabinets_front_is_carried_back_towards_the_arm_first(monkeypatch):
    from datafarm.agents.builtin.controllers import families

    g = side_drawer_grounding()
    t = contract_from_text("Open the drawer, put the red block inside and close the drawer.")(g)
    task = task_spec(g, t)
    planned: dict[str, list] = {}

    class Planned(Exception):
        pass

    def plan_only(scene, oid, preferred, then, arms=None, adjust=None, pulls=(0.0,)):
        planned[str(scene.params["carry_pulls"])] = rt.plan_pick(scene, oid, preferred, then, arms, adjust=adjust, pulls=pulls)
        raise Planned

    monkeypatch.setattr(rt, "pick_for", plan_only)
    monkeypatch.setattr(families, "move_drawer", lambda scene, task, opening, preferred=None: scene.arms[0])
    monkeypatch.setattr(families, "park", lambda scene, arm: None)
    params = default_params(g, t)
    opening = params["open_fraction"] * task["travel"] - 0.007  # where the slide stops, a little short
    for pulls in ([], params["carry_pulls"]):
        scene = rt.Scene(_StillRobot(g, opening), scene_spec(g), {**params, "carry_pulls": pulls})
        with pytest.raises(Planned):
            families.drawer_put_inside(scene, task)
    # carried straight, every grip's load or hand clips the cabinet's corner (or is out of reach) ...
    assert not rt.planned(planned["[]"])
    # ... drawn back towards the arm first, it passes in front of the cabinet and over the drawer
    ranked = planned[str(params["carry_pulls"])]
    assert rt.planned(ranked)
    grip = ranked[0]
    assert grip.pull > 0
    lifted, first = grip.tcp + params["lift_height"] * rt.EZ, grip.then[0][0]
    base = np.asarray(g.robot.arms[0].base.position)
    assert np.linalg.norm((first - base)[:2]) < np.linalg.norm((lifted - base)[:2]) - 0.5 * grip.pull
    assert first[2] == pytest.approx(lifted[2], abs=0.02)
