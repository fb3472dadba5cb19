"""The judge runtime on scripted episodes: verdicts, stage timings (the task labels y), reasons, the
global invariants, and the predicate vocabulary."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from datafarm.artifacts.episode import EpisodeRecord
from datafarm.artifacts.judge import JudgeSpec, JudgeVerdict
from datafarm.errors import InputError
from datafarm.harness.judge import (
    ArmTrack,
    Contact,
    ObjectTrack,
    SceneGeometry,
    Trajectory,
    evaluate,
)
from datafarm.harness.judge.predicates import Conditions
from datafarm.harness.judge.scene import Scene
from datafarm.harness.judge.synthetic import ScriptedEpisode
from tests.artifacts.test_schemas import arm_episode, ue_grounding
from tests.harness.test_judge_scenes import (
    DT,
    drawer_task,
    drum_task,
    index,
    nest_task,
    weigh_task,
)


def spec_with(spec: JudgeSpec, **changes: Any) -> JudgeSpec:
    """A copy of `spec` with top-level fields replaced (validated again)."""
    data = spec.model_dump(mode="json", by_alias=True)
    data.update(changes)
    return JudgeSpec.model_validate(data)


def holds(traj: Trajectory, condition: dict[str, Any], stage_start: int = 0) -> np.ndarray:
    """Where a condition written as in a spec holds on `traj`."""
    spec = JudgeSpec.model_validate({"stages": [{"name": "s", "condition": condition}], "success": condition,
                                     "invariants": [{"shortcut": "episode_gap"}], "time_limit_s": 100})
    return Conditions(Scene(traj)).evaluate(spec.stages[0].condition, stage_start)


def shortcuts_seen(verdict: JudgeVerdict) -> set[str]:
    return {v.shortcut for v in verdict.violations}


# --- good episodes and their labels ---------------------------------------------------------------------


def test_nest_cups_passes_with_the_stage_times_the_script_put_there() -> None:
    task = nest_task()
    verdict = evaluate(task.judge, task.good)
    assert verdict.passed, verdict.reason
    assert verdict.violations == []
    assert verdict.judge_sha256 == task.judge.sha256()
    grasp, insert = verdict.stages
    # grasped the moment both fingers touch; inserted the step after the fingers let go of the nested cup
    assert (grasp.name, grasp.start_s, grasp.end_s) == ("grasp_inner", 0.0, pytest.approx(task.marks["grasp"]))
    assert (insert.name, insert.start_s, insert.end_s) == ("insert", pytest.approx(task.marks["grasp"]),
                                                           pytest.approx(task.marks["release"] + DT))
    assert verdict.stage_reached == "insert"
    assert "success held" in verdict.reason


def test_drawer_passes_and_its_labels_follow_joint_values_holds_and_contacts() -> None:
    task = drawer_task()
    traj = task.good
    verdict = evaluate(task.judge, traj)
    assert verdict.passed, verdict.reason
    opening = traj.joint_values["cabinet.drawer"]
    opened = int(np.flatnonzero(opening >= 0.12)[0])
    lifted = int(np.flatnonzero(traj.objects["red_block"].pose[:, 2] >= 0.03)[0])
    closed = int(np.flatnonzero((opening <= 0.005) & (np.arange(traj.n_steps) > opened))[0])
    expected = [
        ("open_drawer", 0.0, traj.times[opened] + 0.2),  # hold 0.2 s
        ("grasp_block", traj.times[opened] + 0.2, traj.times[lifted]),  # grasped by the right arm and 3 cm up
        ("place_block", traj.times[lifted], task.marks["release"] + DT + 0.3),  # let go, then hold 0.3 s
        ("close_drawer", task.marks["release"] + DT + 0.3, traj.times[closed] + 0.5),  # closed with the block, 0.5 s
    ]
    got = [(s.name, s.start_s, s.end_s) for s in verdict.stages]
    assert [g[0] for g in got] == [e[0] for e in expected]
    assert np.allclose([g[1:] for g in got], [e[1:] for e in expected], atol=1e-9)
    # the labels are contiguous: each stage starts where the previous one ended
    assert all(a.end_s == b.start_s for a, b in zip(verdict.stages, verdict.stages[1:]))


def test_the_verdict_goes_into_the_episode_record_as_its_labels() -> None:
    task = drawer_task()
    verdict = evaluate(task.judge, task.good)
    record = EpisodeRecord.model_validate({**arm_episode().model_dump(mode="json"), "verdict": verdict.model_dump(mode="json")})
    assert record.labels == verdict.stages
    assert [y.name for y in record.labels] == [s.name for s in task.contract.stages]


def test_author_summary_carries_no_stage_times_or_violations() -> None:
    task = drawer_task()
    summary = evaluate(task.judge, task.good).summary()
    assert set(summary.model_dump()) == {"passed", "stage_reached", "reason"}


# --- failing episodes: stage reached and reason -------------------------------------------------------


def test_block_left_beside_the_drawer_fails_at_place_block_naming_what_never_held() -> None:
    task = drawer_task()
    traj = task.good
    block = traj.objects["red_block"]
    pose = block.pose.copy()
    settled = index(traj, task.marks["release"])
    pose[settled:, :2] += (0.0, 0.25)  # a perturbed target: put down 25 cm off, beside the cabinet
    moved = int(np.flatnonzero(np.linalg.norm(np.diff(block.pose[:, :2], axis=0), axis=1) > 0)[0])
    pose[moved:settled, 1] += np.linspace(0.0, 0.25, settled - moved)
    vel = np.gradient(pose[:, :3], DT, axis=0)
    perturbed = traj.copy(objects={**traj.objects, "red_block": ObjectTrack(pose, vel, block.angular_velocity)},
                          contacts=[c for c in traj.contacts if "cabinet.drawer" not in (c.a, c.b) or "red_block" not in (c.a, c.b)])
    verdict = evaluate(task.judge, perturbed)
    assert not verdict.passed
    assert verdict.stage_reached == "place_block"
    assert verdict.stages[-1].end_s is None
    assert [s.name for s in verdict.stages] == ["open_drawer", "grasp_block", "place_block"]
    assert "stage 'place_block' (3 of 4) did not complete" in verdict.reason
    assert "inside(red_block, cabinet.drawer" in verdict.reason


def test_a_stage_past_its_time_limit_fails() -> None:
    task = drawer_task()
    data = task.judge.model_dump(mode="json", by_alias=True)
    data["stages"][3]["time_limit_s"] = 1.0  # closing takes 1.5 s plus the 0.5 s hold
    verdict = evaluate(JudgeSpec.model_validate(data), task.good)
    assert not verdict.passed and verdict.stage_reached == "close_drawer"
    assert "within its 1.00 s limit" in verdict.reason


def test_a_hold_never_reached_is_reported_with_the_longest_hold() -> None:
    task = nest_task()
    data = task.judge.model_dump(mode="json", by_alias=True)
    data["stages"][0]["hold_s"] = 10.0  # the cup is held for about 4 s
    verdict = evaluate(JudgeSpec.model_validate(data), task.good)
    assert not verdict.passed and verdict.stage_reached == "grasp_inner"
    assert "held at most 4.10 s at a time, it must hold 10.00 s" in verdict.reason


def test_episode_longer_than_the_judge_allows_fails() -> None:
    task = nest_task()
    verdict = evaluate(spec_with(task.judge, time_limit_s=5.0), task.good)
    assert not verdict.passed
    assert "longer than the 5.00 s limit" in verdict.reason


def test_success_false_at_the_end_fails_with_the_false_part() -> None:
    task = nest_task()
    cut = task.good.truncated(index(task.good, task.marks["release"]) + 5)  # released, not yet still for 1 s
    verdict = evaluate(task.judge, cut)
    assert not verdict.passed
    assert "the success condition does not hold at the end" in verdict.reason
    assert "stable_for(red_cup" in verdict.reason


def test_unknown_bodies_in_the_spec_are_input_errors_naming_the_field() -> None:
    task = nest_task()
    data = task.judge.model_dump(mode="json", by_alias=True)
    data["stages"][1]["condition"] = {"predicate": "inside", "object": "red_cup", "container": "green_cup"}
    with pytest.raises(InputError) as info:
        evaluate(JudgeSpec.model_validate(data), task.good)
    (problem,) = info.value.problems
    assert problem.field == "stages[1].condition"
    assert "unknown body 'green_cup'" in problem.message and "blue_cup" in problem.message


def test_a_non_finite_recording_fails_without_judging() -> None:
    task = nest_task()
    traj = task.good.copy()
    traj.objects["red_cup"].pose[40, 0] = np.nan
    verdict = evaluate(task.judge, traj)
    assert not verdict.passed
    assert "non-finite red_cup pose at row 40" in verdict.reason


# --- invariants -----------------------------------------------------------------------------------------


def test_object_sliding_with_nothing_pushing_is_a_teleport() -> None:
    task = nest_task()
    traj = task.good.copy()
    blue = traj.objects["blue_cup"]
    # the blue cup drifts 1 cm per step for 10 steps, with a matching velocity, touching only the table
    blue.pose[20:30, 0] += np.arange(1, 11) * 0.01
    blue.pose[30:, 0] += 0.1
    blue.linear_velocity[20:30, 0] = 0.2
    verdict = evaluate(task.judge, traj)
    assert not verdict.passed
    (v,) = [v for v in verdict.violations if v.shortcut == "teleport"]
    assert v.time_s == pytest.approx(traj.times[20])
    assert "blue_cup sped up from 0.000 to 0.200 m/s" in v.detail and "no contact with the robot" in v.detail


def test_the_block_riding_in_a_moving_drawer_is_not_a_teleport() -> None:
    task = drawer_task()
    verdict = evaluate(task.judge, task.good)
    assert "teleport" not in shortcuts_seen(verdict)
    # ...but the same ride without the block touching the drawer is
    traj = task.good.copy(contacts=[c for c in task.good.contacts if {c.a, c.b} != {"red_block", "cabinet.drawer"}])
    verdict = evaluate(task.judge, traj)
    assert "teleport" in shortcuts_seen(verdict)
    assert any("red_block started moving from rest" in v.detail for v in verdict.violations)


def test_simulator_reported_penetration_beyond_the_threshold_fails() -> None:
    task = nest_task()
    contacts = [replace(c, max_penetration=0.006) if {c.a, c.b} == {"red_cup", "blue_cup"} else c for c in task.good.contacts]
    verdict = evaluate(task.judge, task.good.copy(contacts=contacts))
    assert shortcuts_seen(verdict) == {"penetration"}
    assert "red_cup and blue_cup interpenetrated 6.0 mm (limit 4.0 mm)" in verdict.reason
    contacts = [replace(c, max_penetration=0.003) for c in task.good.contacts]
    assert evaluate(task.judge, task.good.copy(contacts=contacts)).passed


def test_object_sunk_into_the_table_is_penetration() -> None:
    task = weigh_task()
    traj = task.good.copy()
    traj.objects["scale"].pose[:, 2] -= 0.01  # the scale's housing 1 cm into the table top
    verdict = evaluate(task.judge, traj)
    assert any(v.shortcut == "penetration" and "scale is 10.0 mm into the table" in v.detail for v in verdict.violations)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda t: t.copy(step_indices=np.delete(np.arange(t.n_steps + 1), 50), times=np.delete(np.arange(t.n_steps + 1), 50) * DT),
         "the step index skips from 49 to 51"),
        (lambda t: t.copy(step_indices=np.concatenate([np.arange(60), np.arange(t.n_steps - 60)]),
                          times=np.concatenate([np.arange(60), np.arange(t.n_steps - 60)]) * DT),
         "the step index goes back from 59 to 0"),
        (lambda t: t.copy(times=np.where(np.arange(t.n_steps) >= 80, t.times + 0.5, t.times)),
         "step 80 is recorded at 4.5000 s, not 4.0000 s"),
        (lambda t: t.copy(resets=np.arange(t.n_steps) == 70), "reset or the expert restarted before step 70"),
        (lambda t: t.truncated(t.n_steps).copy(step_indices=np.arange(t.n_steps) + 3, times=(np.arange(t.n_steps) + 3) * DT),
         "the recording starts at step 3, not 0"),
    ],
)
def test_gaps_and_restarts_in_the_episode_are_caught(edit, words: str) -> None:  # type: ignore[no-untyped-def]
    task = nest_task()
    verdict = evaluate(task.judge, edit(task.good))
    assert not verdict.passed
    assert any(v.shortcut == "episode_gap" and words in v.detail for v in verdict.violations), verdict.reason


def test_joint_and_velocity_limits() -> None:
    task = nest_task()
    traj = task.good.copy()
    right = traj.arms["right"]
    right.positions[30, 2] = right.upper[2] + 0.01  # joint3 past its upper limit
    right.velocities[40, 0] = 2.9  # joint1 at 97 % of 3 rad/s; the judge allows 95 %
    verdict = evaluate(task.judge, traj)
    details = {v.shortcut: v for v in verdict.violations}
    assert set(details) == {"joint_limit", "velocity_limit"}
    assert details["joint_limit"].time_s == pytest.approx(traj.times[30]) and "right.joint3" in details["joint_limit"].detail
    assert details["velocity_limit"].time_s == pytest.approx(traj.times[40]) and "right.joint1" in details["velocity_limit"].detail
    relaxed = spec_with(task.judge, invariants=[i.model_dump(mode="json") for i in task.judge.invariants
                                                if i.shortcut not in ("joint_limit", "velocity_limit")])
    assert evaluate(relaxed, traj).passed


def test_stuck_agent_on_the_ue_track() -> None:
    geometry = SceneGeometry.from_grounding(ue_grounding())
    n, hz = 200, 20.0
    t = np.arange(n) / hz
    x = np.minimum(t, 6.0) * 1.5  # walks 1.5 m/s towards the door at x = 12 for 6 s... then stops
    pose = np.zeros((n, 7))
    pose[:, 0], pose[:, 1], pose[:, 3] = x, 2.0, 1.0
    vel = np.zeros((n, 3))
    vel[:, 0] = np.where(t < 6.0, 1.5, 0.0)
    traj = Trajectory(times=t, control_hz=hz, geometry=geometry,
                      objects={"agent": ObjectTrack(pose, vel, np.zeros((n, 3)))}, commanded_motion=np.ones(n, bool))
    spec = JudgeSpec.model_validate({
        "stages": [{"name": "reach_door", "condition": {"predicate": "near", "a": "agent", "b": "red_door", "max_distance": 3.5}}],
        "success": {"all": [{"predicate": "near", "a": "agent", "b": "red_door", "max_distance": 3.5},
                            {"predicate": "facing", "viewer": "agent", "target": "red_door", "max_angle": 0.4}]},
        "invariants": [{"shortcut": "teleport", "max_displacement": 0.1}, {"shortcut": "stuck", "max_still_s": 1.0},
                       {"shortcut": "episode_gap"}],
        "time_limit_s": 20.0,
    })
    verdict = evaluate(spec, traj)
    assert shortcuts_seen(verdict) == {"stuck"}, verdict.reason
    assert "the success condition" not in verdict.reason  # near the door and facing it (18 degrees off)
    assert verdict.stages[0].end_s is not None  # reached the door; frozen while still told to walk
    not_commanded = traj.copy(commanded_motion=t < 6.0)
    assert evaluate(spec, not_commanded).passed
    jumped = not_commanded.copy()
    jumped.objects["agent"].pose[100:, 1] += 1.0  # a sideways jump with no velocity behind it
    assert shortcuts_seen(evaluate(spec, jumped)) == {"teleport"}


# --- predicates -----------------------------------------------------------------------------------------


def test_scale_reading_and_on_the_plate() -> None:
    task = weigh_task(grams=150.0)
    traj = task.good
    verdict = evaluate(task.judge, traj)
    assert verdict.passed, verdict.reason
    placed = index(traj, task.marks["release"]) - 4  # touching the plate, reading set
    reading = holds(traj, {"predicate": "scale_reading_in_range", "scale": "scale", "min_g": 100, "max_g": 250})
    assert not reading[:placed].any() and reading[placed + 1:].all()
    on_plate = holds(traj, {"predicate": "on", "object": "apple", "support": "scale.plate"})
    assert not on_plate[:placed].any() and on_plate[placed:].all()
    on_table = holds(traj, {"predicate": "on", "object": "apple", "support": "table"})
    assert on_table[:5].all() and not on_table[placed:].any()
    # on the plate but not in contact with it (hovering 3 mm above) is not `on`
    no_contact = traj.copy(contacts=[c for c in traj.contacts if "scale.plate" not in (c.a, c.b)])
    assert not holds(no_contact, {"predicate": "on", "object": "apple", "support": "scale.plate"}).any()
    heavy = weigh_task(grams=400.0)  # a different apple: out of range, the episode fails on success
    verdict = evaluate(heavy.judge, heavy.good)
    assert not verdict.passed and "scale_reading_in_range(scale" in verdict.reason


def test_contact_count_in_a_window_counts_distinct_strikes() -> None:
    task = drum_task(strikes=3)
    traj = task.good
    verdict = evaluate(task.judge, traj)
    assert verdict.passed, verdict.reason
    assert verdict.stages[-1].end_s == pytest.approx(task.marks["strike3"])
    three = holds(traj, {"predicate": "contact_count", "a": "drum.head", "b": "stick", "at_least": 3})
    assert three.argmax() == index(traj, task.marks["strike3"])
    # the last 1.0 s holds two strikes (0.6 s apart) from the second strike on, then fewer
    window = {"predicate": "contact_count", "a": "drum.head", "b": "stick", "at_least": 2, "at_most": 2, "window_s": 1.0}
    two = holds(traj, window)
    s2, s3 = index(traj, task.marks["strike2"]), index(traj, task.marks["strike3"])
    first_out = index(traj, task.marks["strike1"] + 1.0) + 1  # the first strike leaves the window
    assert not two[:s2].any() and two[s2:first_out].all()
    assert not two[first_out:s3].any() and two[s3:index(traj, task.marks["strike2"] + 1.0) + 1].all()
    # a touch with the stick and the head at once through two links counts once
    doubled = traj.copy(contacts=traj.contacts + [replace(c, a="drum.head", b="stick") for c in traj.contacts
                                                  if {c.a, c.b} == {"stick", "drum.head"}])
    assert (holds(doubled, {"predicate": "contact_count", "a": "drum", "b": "stick", "at_least": 3, "at_most": 3})
            == three).all()
    # counting from the stage start: strikes before it do not count
    late = holds(traj, {"predicate": "contact_count", "a": "drum.head", "b": "stick", "at_least": 1}, stage_start=s2 + 1)
    assert not late[:s3].any() and late[s3:].all()
    two_strikes = drum_task(strikes=2)
    verdict = evaluate(two_strikes.judge, two_strikes.good)
    assert not verdict.passed and verdict.stage_reached == "strike"


def test_geometric_predicates_on_the_nest_episode() -> None:
    task = nest_task()
    traj = task.good
    lift, placed = index(traj, task.marks["lift"]), index(traj, task.marks["placed"])
    nested = holds(traj, {"predicate": "inside", "object": "red_cup", "container": "blue_cup", "margin": 0.002})
    # nested once the red cup's rim (80 mm tall) is 2 mm below the blue rim (90 mm): bottom at most 8 mm up
    red = traj.objects["red_cup"].pose
    low = np.flatnonzero((red[:, 2] <= 0.008 + 1e-9) & (red[:, 1] > 0.1499))  # lowered over the blue cup
    assert nested.argmax() == low[0] and nested[low[0]:].all() and not nested[:low[0]].any()
    assert placed - 3 <= low[0] <= placed
    # a margin wider than the gap between the cups (42 - 33 = 9 mm) is never met
    assert not holds(traj, {"predicate": "inside", "object": "red_cup", "container": "blue_cup", "margin": 0.01}).any()
    above = holds(traj, {"predicate": "above", "object": "red_cup", "target": "blue_cup", "min_height": 0.005, "max_height": 0.02})
    carried_high = np.flatnonzero(traj.objects["red_cup"].pose[:, 2] >= 0.095)
    assert (above[carried_high]).all() and not above[:lift].any()
    assert holds(traj, {"predicate": "upright", "object": "blue_cup"}).all()
    tipped = traj.copy()
    tipped.objects["blue_cup"].pose[:, 3:] = (np.cos(0.15), np.sin(0.15), 0.0, 0.0)  # 0.3 rad about x
    assert not holds(tipped, {"predicate": "upright", "object": "blue_cup", "max_tilt": 0.2}).any()
    assert holds(tipped, {"predicate": "upright", "object": "blue_cup", "max_tilt": 0.35}).all()
    still = holds(traj, {"predicate": "stable_for", "object": "red_cup", "duration_s": 1.0})
    slow = np.linalg.norm(traj.objects["red_cup"].linear_velocity, axis=1) < 0.01
    settled = traj.times[int(np.flatnonzero(~slow)[-1]) + 1]  # the lowering's last moving step, +1
    assert still[index(traj, settled + 1.0)] and not still[index(traj, settled + 0.95)]
    assert still[index(traj, settled + 1.0):].all()
    moving = holds(traj, {"predicate": "speed_below", "object": "red_cup", "max_speed": 0.01})
    speed = np.linalg.norm(traj.objects["red_cup"].linear_velocity, axis=1)
    assert (moving == (speed < 0.01)).all()
    assert moving[:lift + 1].all() and not moving[lift + 2:lift + 18].any()  # at rest, then lifted (20 steps)
    grasped = holds(traj, {"predicate": "grasped", "object": "red_cup", "by": "right"})
    assert grasped.sum() == index(traj, task.marks["release"]) - index(traj, task.marks["grasp"]) + 1
    assert not holds(traj, {"predicate": "grasped", "object": "red_cup", "by": "left"}).any()
    assert (holds(traj, {"predicate": "grasped", "object": "red_cup", "by": "right.gripper"}) == grasped).all()
    either = holds(traj, {"any": [{"predicate": "grasped", "object": "red_cup"}, {"not": {"predicate": "speed_below",
                                                                                            "object": "blue_cup", "max_speed": 1}}]})
    assert (either == grasped).all()


def test_joint_value_of_arms_and_drawers() -> None:
    task = drawer_task()
    traj = task.good
    open_ = holds(traj, {"predicate": "joint_value", "body": "cabinet", "joint": "drawer", "compare": ">", "value": 0.1})
    assert (open_ == (traj.joint_values["cabinet.drawer"] > 0.1)).all() and open_.any()
    j2 = traj.arms["left"].positions[:, 1]
    arm = holds(traj, {"predicate": "joint_value", "body": "left", "joint": "joint2", "compare": "<=", "value": 1.6})
    assert (arm == (j2 <= 1.6)).all() and arm.any() and not arm.all()
    # the drawer's interior moves with the drawer: the block stays inside while it closes
    inside = holds(traj, {"predicate": "inside", "object": "red_block", "container": "cabinet.drawer"})
    assert inside[index(traj, task.marks["push"]):].all()


def test_near_and_facing_with_an_arm_tcp() -> None:
    task = nest_task()
    traj = task.good.copy()
    tcp = np.zeros((traj.n_steps, 7))
    tcp[:, :3] = traj.objects["red_cup"].pose[:, :3] + (0.0, 0.0, 0.04)
    tcp[:, 3] = 1.0
    traj.arms["right"] = replace(traj.arms["right"], tcp=tcp)
    assert holds(traj, {"predicate": "near", "a": "right", "b": "red_cup", "max_distance": 0.05}).all()
    assert not holds(traj, {"predicate": "near", "a": "right", "b": "blue_cup", "max_distance": 0.05})[:60].any()
    # the TCP's +x axis points at +x world; the blue cup is at +y from it
    assert not holds(traj, {"predicate": "facing", "viewer": "right", "target": "blue_cup", "max_angle": 0.5})[:20].any()


def test_trajectory_checks_its_arrays() -> None:
    task = nest_task()
    with pytest.raises(ValueError, match=r"object 'red_cup' pose has shape \(3, 7\), expected \(153, 7\)"):
        Trajectory(times=task.good.times, control_hz=20.0, geometry=task.good.geometry,
                   objects={"red_cup": ObjectTrack(np.zeros((3, 7)), np.zeros((3, 3)), np.zeros((3, 3)))})
    with pytest.raises(ValueError, match="no geometry"):
        Trajectory(times=[0.0], control_hz=20.0, geometry=task.good.geometry,
                   objects={"ghost": ObjectTrack(np.zeros((1, 7)), np.zeros((1, 3)), np.zeros((1, 3)))})
    arm = ArmTrack(("joint1",), np.zeros((1, 1)), np.zeros((1, 1)), [-1.0], [1.0], [1.0])
    traj = Trajectory(times=[0.0], control_hz=20.0, geometry=task.good.geometry, objects={}, arms={"left": arm},
                      contacts=[Contact("red_cup", "left.link7", 0.0, None)])
    assert traj.arms["left"].finger_links == ("left.link7", "left.link8")


def test_scripted_episode_rejects_an_unknown_joint() -> None:
    ep = ScriptedEpisode(nest_task().good.geometry, 20.0, joints={"blue_cup.lid": 0.0})
    with pytest.raises(KeyError, match="has no joint"):
        ep.advance(1.0, joints={"blue_cup.lid": 0.1})


def dropped_cup(bounce: float) -> Trajectory:
    """The red cup lifted 5 cm, let go, falling freely onto the table and skidding off sideways at `bounce` m/s."""
    task = nest_task()
    ep = ScriptedEpisode(task.good.geometry, 20.0)
    ep.touch("red_cup", "table").wait(0.5).grasp("right", "red_cup").wait(0.2).part("red_cup", "table")
    ep.advance(1.0, moves={"red_cup": (0.05, -0.15, 0.05)}).wait(0.2).release("right", "red_cup")
    released = ep.steps - 1
    ep.wait(1.5)
    traj = ep.build()
    cup = traj.objects["red_cup"]
    fall = traj.times[released:] - traj.times[released]
    z = 0.05 - 0.5 * 9.81 * fall**2
    landed = released + int(np.flatnonzero(z <= 0)[0])
    cup.pose[released:landed, 2], cup.linear_velocity[released:landed, 2] = z[:landed - released], -9.81 * fall[:landed - released]
    skid = np.maximum(bounce - 3.0 * (traj.times[landed:] - traj.times[landed]), 0.0)  # friction slows it
    cup.pose[landed:, 2], cup.linear_velocity[landed:, 2] = 0.0, 0.0
    cup.linear_velocity[landed:, 0] = skid
    cup.pose[landed:, 0] += np.concatenate([[0.0], np.cumsum((skid[1:] + skid[:-1]) / 2 * DT)])
    return traj.copy(contacts=traj.contacts + [Contact("red_cup", "table", float(traj.times[landed]), None)])


def test_falling_and_bouncing_after_release_is_not_a_teleport() -> None:
    task = nest_task()
    spec = JudgeSpec.model_validate({
        "stages": [{"name": "grasp", "condition": {"predicate": "grasped", "object": "red_cup"}}],
        "success": {"predicate": "on", "object": "red_cup", "support": "table"},
        "invariants": [i.model_dump(mode="json") for i in task.judge.invariants if i.shortcut != "success_too_brief"],
        "time_limit_s": 30.0,
    })
    verdict = evaluate(spec, dropped_cup(bounce=0.4))
    assert verdict.passed, verdict.reason
    # the same cup at rest on the table, then sliding off by itself, is not physical
    resting = dropped_cup(bounce=0.0)
    cup = resting.objects["red_cup"]
    start = resting.n_steps - 15
    cup.linear_velocity[start:, 1] = np.linspace(0.0, 0.14, 15)  # a slow, smooth drag: 0.01 m/s per step
    cup.pose[start:, 1] += np.concatenate([[0.0], np.cumsum((cup.linear_velocity[start + 1:, 1] + cup.linear_velocity[start:-1, 1]) / 2 * DT)])
    verdict = evaluate(spec, resting)
    assert [v.shortcut for v in verdict.violations] == ["teleport"]
    assert "red_cup started moving from rest" in verdict.reason


def test_contacts_between_control_steps_count_for_the_step_they_happened_in() -> None:
    task = drum_task(strikes=3)
    traj = task.good
    strikes = [c for c in traj.contacts if {c.a, c.b} == {"stick", "drum.head"}]
    others = [c for c in traj.contacts if c not in strikes]
    # as the recorder reports them: physics-step times inside a control step, a few ms long
    brief = [replace(c, start_t=c.start_t + 0.004, end_t=c.start_t + 0.006) for c in strikes]
    counted = holds(traj.copy(contacts=others + brief), {"predicate": "contact_count", "a": "drum.head", "b": "stick", "at_least": 3})
    assert counted.argmax() == index(traj, task.marks["strike3"]) and counted[-1]
    # explicit control steps win over times
    stepped = [replace(c, start_t=0.0, end_t=0.0, start_step=index(traj, c.start_t), end_step=index(traj, c.start_t)) for c in strikes]
    counted = holds(traj.copy(contacts=others + stepped), {"predicate": "contact_count", "a": "drum.head", "b": "stick", "at_least": 3})
    assert counted.argmax() == index(traj, task.marks["strike3"]) and counted[-1]


def test_a_release_that_lands_within_one_step_is_not_a_teleport() -> None:
    """A block let go 8 mm above its support lands between two 20 Hz samples, both at rest: the
    pose changes with zero recorded speed, which free fall (g dt^2 / 2 = 12 mm) explains."""
    task = nest_task()
    spec = JudgeSpec.model_validate({
        "stages": [{"name": "grasp", "condition": {"predicate": "grasped", "object": "red_cup"}}],
        "success": {"predicate": "on", "object": "red_cup", "support": "table"},
        "invariants": [{"shortcut": "teleport", "max_displacement": 0.002}],
        "time_limit_s": 30.0,
    })
    ep = ScriptedEpisode(task.good.geometry, 20.0)
    ep.touch("red_cup", "table").wait(0.5).grasp("right", "red_cup").wait(0.2).part("red_cup", "table")
    ep.advance(1.0, moves={"red_cup": (0.05, -0.15, 0.008)}).wait(0.2).release("right", "red_cup")
    released = ep.steps - 1
    ep.wait(1.0)
    traj = ep.build()
    cup = traj.objects["red_cup"]
    cup.pose[released + 1:, 2] = 0.0
    cup.linear_velocity[released + 1:] = 0.0
    traj = traj.copy(contacts=traj.contacts + [Contact("red_cup", "table", float(traj.times[released + 1]), None)])
    verdict = evaluate(spec, traj)
    assert "teleport" not in shortcuts_seen(verdict), verdict.reason
    # ...while a 5 cm jump at rest is still one
    traj.objects["red_cup"].pose[released + 3:, 2] += 0.05
    assert "teleport" in shortcuts_seen(evaluate(spec, traj))
