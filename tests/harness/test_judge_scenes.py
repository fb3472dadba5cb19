"""Scripted, physically consistent episodes of the paper's tasks (the gripper reaches, contacts begin,
objects move only while touched, get placed and stay still), shared by the judge tests, and checks
that the scripts really are consistent."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.judge import JudgeSpec
from datafarm.harness.judge import SceneGeometry, Trajectory, evaluate
from datafarm.harness.judge.synthetic import ScriptedEpisode
from tests.artifacts.test_schemas import (
    drawer_contract,
    drawer_grounding,
    drum_contract,
    drum_grounding,
    judge_from,
    nest_contract,
    nest_grounding,
    weigh_contract,
    weigh_grounding,
)

HZ = 20.0
DT = 1.0 / HZ


@dataclass
class Task:
    """One task: G, T, a good J, the scripted good trajectory and the times the script put its events at."""

    grounding: Grounding
    contract: TaskContract
    judge: JudgeSpec
    good: Trajectory
    marks: dict[str, float]


def nest_task() -> Task:
    """Nest the red cup in the blue cup: grasp at 1.0 s, lift, carry over the rim, lower, release."""
    g = nest_grounding()
    ep = ScriptedEpisode(SceneGeometry.from_grounding(g), HZ)
    ep.touch("red_cup", "table").touch("blue_cup", "table")
    ep.wait(1.0)  # the arm approaches
    marks = {"grasp": ep.now}
    ep.grasp("right", "red_cup").wait(0.3).part("red_cup", "table")
    marks["lift"] = ep.now
    ep.advance(1.0, moves={"red_cup": (0.05, -0.15, 0.10)})  # bottom 1 cm above the blue rim
    ep.advance(1.5, moves={"red_cup": (0.05, 0.15, 0.10)})
    ep.advance(1.0, moves={"red_cup": (0.05, 0.15, 0.003)})  # onto the blue cup's floor
    marks["placed"] = ep.now
    ep.touch("red_cup", "blue_cup").wait(0.3).release("right", "red_cup")
    marks["release"] = ep.now
    ep.wait(2.5)
    return Task(g, nest_contract(), judge_from(nest_contract()), ep.build(), marks)


def drawer_task() -> Task:
    """Open the drawer by its handle, put the block in, push the drawer closed with the block riding in it."""
    g = drawer_grounding()
    ep = ScriptedEpisode(SceneGeometry.from_grounding(g), HZ, joints={"cabinet.drawer": 0.0})
    ep.touch("red_block", "table").touch("cabinet", "table")
    ep.wait(0.5)
    marks = {"handle": ep.now}
    ep.grasp("left", "cabinet.handle").advance(1.5, joints={"cabinet.drawer": 0.15}).wait(0.3)
    ep.release("left", "cabinet.handle").wait(0.2)
    marks["grasp"] = ep.now
    ep.grasp("right", "red_block").wait(0.2).part("red_block", "table")
    marks["lift"] = ep.now
    ep.advance(1.0, moves={"red_block": (-0.05, -0.2, 0.23)})  # above the drawer's top (0.2)
    ep.advance(1.5, moves={"red_block": (-0.07, 0.05, 0.23)})  # over the open part of the drawer
    ep.advance(1.0, moves={"red_block": (-0.07, 0.05, 0.114)})  # onto the drawer floor: 100 + 2 + 12 mm
    ep.touch("red_block", "cabinet.drawer").wait(0.2).release("right", "red_block")
    marks["release"] = ep.now
    ep.wait(0.5)
    marks["push"] = ep.now
    ep.grasp("left", "cabinet.handle")
    ep.advance(1.5, joints={"cabinet.drawer": 0.0}, riders={"cabinet.drawer": ["red_block"]})
    ep.release("left", "cabinet.handle")
    marks["closed"] = ep.now
    ep.wait(1.5)
    return Task(g, drawer_contract(), judge_from(drawer_contract()), ep.build(), marks)


def weigh_task(grams: float = 150.0) -> Task:
    """Put the apple on the scale's plate; the scale reads `grams` once it rests there."""
    g = weigh_grounding()
    ep = ScriptedEpisode(SceneGeometry.from_grounding(g), HZ, scales=["scale"])
    ep.touch("apple", "table").touch("scale", "table").wait(0.5)
    marks = {"grasp": ep.now}
    ep.grasp("right", "apple").wait(0.2).part("apple", "table")
    ep.advance(1.0, moves={"apple": (-0.05, -0.2, 0.08)})
    ep.advance(1.5, moves={"apple": (0.15, 0.1, 0.08)})
    ep.advance(1.0, moves={"apple": (0.15, 0.1, 0.031)})  # plate top: body 25 mm + plate 6 mm
    ep.touch("apple", "scale.plate").set_reading("scale", grams).wait(0.2).release("right", "apple")
    marks["release"] = ep.now
    ep.wait(2.0)
    return Task(g, weigh_contract(), judge_from(weigh_contract()), ep.build(), marks)


def drum_task(strikes: int = 3) -> Task:
    """Pick up the stick and strike the drum head `strikes` times, 0.6 s apart, keeping the stick."""
    g = drum_grounding()
    geometry = SceneGeometry.from_grounding(g)
    geometry.rest_poses["stick"][2] = 0.01  # lying on its side: the axis is 1 radius above the table
    ep = ScriptedEpisode(geometry, HZ)
    ep.touch("stick", "table").touch("drum", "table").wait(0.5)
    ep.grasp("right", "stick").wait(0.2).part("stick", "table")
    ep.advance(1.0, moves={"stick": (-0.05, -0.25, 0.2)})
    ep.advance(1.0, moves={"stick": (0.1, -0.1, 0.25)})
    marks: dict[str, float] = {}
    for i in range(strikes):
        ep.advance(0.3, moves={"stick": (0.1, -0.1, 0.16)})
        marks[f"strike{i + 1}"] = ep.now
        ep.touch("stick", "drum.head").wait(0.05).part("stick", "drum.head")
        ep.advance(0.25, moves={"stick": (0.1, -0.1, 0.25)})
    ep.wait(1.0)
    return Task(g, drum_contract(), judge_from(drum_contract()), ep.build(), marks)


def index(traj: Trajectory, t: float) -> int:
    """Step index at time t."""
    return round(t * traj.control_hz)


# --- the scripts are consistent -------------------------------------------------------------------------


@pytest.mark.parametrize("make", [nest_task, drawer_task, weigh_task])
def test_objects_move_only_while_touched_by_something_moving(make) -> None:  # type: ignore[no-untyped-def]
    task = make()
    traj = task.good
    for obj, track in traj.objects.items():
        moved = np.flatnonzero(np.linalg.norm(np.diff(track.pose[:, :3], axis=0), axis=1) > 1e-9)
        for i in moved:
            t = traj.times[i + 1]
            touching = [c for c in traj.contacts if obj in (c.a.partition(".")[0], c.b.partition(".")[0])
                        and c.start_t <= t + 1e-9 and (c.end_t is None or c.end_t >= traj.times[i] - 1e-9)
                        and any(side.partition(".")[0] in ("left", "right", "cabinet") and side != obj for side in (c.a, c.b))]
            assert touching, f"{obj} moves at {t:.2f} s with nothing touching it"


@pytest.mark.parametrize("make", [nest_task, drawer_task, weigh_task])
def test_scripted_episodes_are_continuous_and_within_limits(make) -> None:  # type: ignore[no-untyped-def]
    traj = make().good
    assert np.allclose(np.diff(traj.times), DT)
    assert (traj.step_indices == np.arange(traj.n_steps)).all()
    for arm in traj.arms.values():
        assert ((arm.positions >= arm.lower) & (arm.positions <= arm.upper)).all()
        assert (np.abs(arm.velocities) <= arm.velocity_limits).all()
    for obj, track in traj.objects.items():
        # the recorded velocity is the derivative of the recorded position
        fd = np.diff(track.pose[:, :3], axis=0) / DT
        mid = (track.linear_velocity[1:] + track.linear_velocity[:-1]) / 2
        assert np.abs(fd - mid).max() < 0.05, obj


def test_good_trajectories_pass_their_own_judge() -> None:
    for make in (nest_task, drawer_task, weigh_task):
        task = make()
        verdict = evaluate(task.judge, task.good)
        assert verdict.passed, (make.__name__, verdict.reason)
