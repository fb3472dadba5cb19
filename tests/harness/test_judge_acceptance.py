"""Judge acceptance: the harness's canned shortcut trajectories, each rejected by a good J for the
right reason; a good J accepted; a deliberately lax J refused, naming the shortcuts that escaped it."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from datafarm.artifacts.judge import JudgeSpec
from datafarm.harness.judge import (
    SHORTCUT_NAMES,
    accept_judge,
    canned_shortcuts,
    evaluate,
    goal_object,
)
from tests.harness.test_judge_scenes import (
    Task,
    drawer_task,
    drum_task,
    nest_task,
    weigh_task,
)

TASKS = {"nest": nest_task, "drawer": drawer_task, "weigh": weigh_task, "drum": drum_task}


@functools.cache
def task_and_shortcuts(name: str) -> tuple[Task, tuple[tuple[str, Any], ...]]:
    task = TASKS[name]()
    return task, tuple(canned_shortcuts(task.good, task.grounding, task.contract))


def lax(spec: JudgeSpec) -> JudgeSpec:
    """The judge a careless judge-writer makes: no hold times, no teleport or success_too_brief check."""
    data = spec.model_dump(mode="json", by_alias=True)
    for stage in data["stages"]:
        stage["hold_s"] = 0.0
    data["invariants"] = [i for i in data["invariants"] if i["shortcut"] not in ("teleport", "success_too_brief")]
    return JudgeSpec.model_validate(data)


@pytest.mark.parametrize("name", list(TASKS))
def test_every_canned_shortcut_is_made_and_rejected_by_a_good_judge_for_its_own_reason(name: str) -> None:
    task, shortcuts = task_and_shortcuts(name)
    assert [s for s, _ in shortcuts] == list(SHORTCUT_NAMES)
    for shortcut, traj in shortcuts:
        verdict = evaluate(task.judge, traj)
        assert not verdict.passed, (shortcut, verdict.reason)
        # the cheat, and only the cheat, is what the invariants see
        assert {v.shortcut for v in verdict.violations} == {shortcut}, (shortcut, verdict.reason)
        assert verdict.reason.startswith(f"{shortcut} at "), verdict.reason


@pytest.mark.parametrize("name", ["nest", "drawer"])
def test_shortcut_reasons_name_the_goal_object_and_what_happened(name: str) -> None:
    task, shortcuts = task_and_shortcuts(name)
    goal = goal_object(task.contract, task.grounding)
    assert goal == {"nest": "red_cup", "drawer": "red_block"}[name]
    reasons = {s: evaluate(task.judge, traj).reason for s, traj in shortcuts}
    assert f"{goal} jumped" in reasons["teleport"]
    grasp = task.contract.stages[0 if name == "nest" else 1].name
    assert f"before stage '{grasp}' completed" in reasons["stage_skipped"]
    assert f"stage '{grasp}'" in reasons["stage_skipped"] and "never true: grasped" in reasons["stage_skipped"]
    assert "success held 0.00 s at the end" in reasons["success_too_brief"]
    assert "passed through the wall of" in reasons["penetration"] and goal in reasons["penetration"]


@pytest.mark.parametrize("name", ["nest", "drawer"])
def test_shortcuts_keep_the_episode_continuous_and_the_teleport_has_no_contact(name: str) -> None:
    task, shortcuts = task_and_shortcuts(name)
    good, by_name = task.good, dict(shortcuts)
    goal = goal_object(task.contract, task.grounding)
    teleported = by_name["teleport"]
    step = np.linalg.norm(np.diff(teleported.objects[goal].pose[:, :3], axis=0), axis=1)
    jump = int(step.argmax()) + 1
    assert step.max() > 0.2  # one big jump...
    t = teleported.times[jump]
    robot = ("left.", "right.")
    touching = [c for c in teleported.contacts if goal in (c.a, c.b) and (c.a.startswith(robot) or c.b.startswith(robot))
                and c.start_t <= t and (c.end_t is None or c.end_t >= teleported.times[jump - 1] - 1e-9)]
    assert touching == []  # ...with no contact at either end of it
    assert np.allclose(teleported.objects[goal].pose[-1], good.objects[goal].pose[-1])  # ending where it should
    brief = by_name["success_too_brief"]
    assert brief.n_steps < good.n_steps and np.array_equal(brief.times, good.times[:brief.n_steps])
    for _, traj in shortcuts:
        assert np.array_equal(traj.step_indices, np.arange(traj.n_steps))


@pytest.mark.parametrize("name", list(TASKS))
def test_a_good_judge_is_accepted(name: str) -> None:
    task, shortcuts = task_and_shortcuts(name)
    report = accept_judge(task.judge, task.good, shortcuts, contract=task.contract)
    assert report.accepted, report.reason
    assert report.escaped == [] and report.problems == []
    assert all(o.rejected for o in report.shortcuts)
    assert report.judge_sha256 == task.judge.sha256()
    assert report.ledger_details()["rejected"] == list(SHORTCUT_NAMES)


@pytest.mark.parametrize("name", ["nest", "drawer", "weigh"])
def test_a_lax_judge_is_refused_naming_the_shortcuts_that_escaped(name: str) -> None:
    task, shortcuts = task_and_shortcuts(name)
    careless = lax(task.judge)
    assert evaluate(careless, task.good).passed  # it passes good work...
    report = accept_judge(careless, task.good, shortcuts)
    assert not report.accepted
    assert report.escaped == ["teleport", "success_too_brief"]  # ...and lets these through
    assert report.reason == "refused: lets through the shortcut(s) teleport, success_too_brief"
    escaped = {o.name: o for o in report.shortcuts if not o.rejected}
    assert escaped["teleport"].reason.startswith("passed")
    # measured against T, the missing invariants are named too
    report = accept_judge(careless, task.good, shortcuts, contract=task.contract)
    assert "no invariant enforces forbidden shortcut 'teleport'" in report.problems


def test_a_judge_that_fails_good_work_is_refused() -> None:
    task, shortcuts = task_and_shortcuts("nest")
    data = task.judge.model_dump(mode="json", by_alias=True)
    data["stages"][0]["hold_s"] = 10.0
    report = accept_judge(JudgeSpec.model_validate(data), task.good, shortcuts)
    assert not report.accepted and not report.good_passed and report.escaped == []
    assert "fails the good trajectory (" in report.reason
    assert "stage 'grasp_inner' (1 of 2) did not complete: its condition held at most 4.10 s" in report.reason


def test_an_ill_formed_judge_is_refused_without_judging() -> None:
    task, shortcuts = task_and_shortcuts("drawer")
    data = task.judge.model_dump(mode="json", by_alias=True)
    data["success"] = {"predicate": "inside", "object": "red_block", "container": "cabinet.shelf"}
    report = accept_judge(JudgeSpec.model_validate(data), task.good, shortcuts)
    assert not report.accepted and report.shortcuts == []
    assert report.problems == [("success: object 'cabinet' (drawer_cabinet) has no part 'shelf'; its parts: drawer, handle "
                                "(expected body references that name G's objects, parts, arms, `robot` or `table`)")]


def test_shortcuts_need_a_trajectory_that_does_the_task() -> None:
    task = nest_task()
    unfinished = task.good.truncated(60)  # still carrying the cup
    with pytest.raises(ValueError, match="does not do the task as the contract states it: stage 'insert'"):
        canned_shortcuts(unfinished, task.grounding, task.contract)


def test_report_models_document_every_field() -> None:
    from datafarm.harness.judge import AcceptanceReport, ShortcutOutcome

    for model in (AcceptanceReport, ShortcutOutcome):
        assert all((f.description or "").strip() for f in model.model_fields.values()), model.__name__
