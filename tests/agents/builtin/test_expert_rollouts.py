"""The builtin expert against the real harness: its controllers run in the bwrap sandbox on SAPIEN
worlds built from each family's G and S, judged by the frozen J the builtin judge-writer made of the
builtin contract stage's T. Each family passes at least 80% of its dev seeds; a controller with a
deliberately wrong parameter fails and `revise` recovers it through the author's real tools; and
the whole stage runs as the builtin author's conversation (tool calls, transcripts, ledger)."""

from __future__ import annotations

from pathlib import Path

import pytest

from datafarm.agents.builtin.expert import (
    DevPlan,
    DirectTools,
    default_params,
    revise,
    run_expert_stage,
    write_controller,
)
from datafarm.agents.roles import author_task
from datafarm.agents.tools.base import ToolContext
from datafarm.artifacts.expert import ExpertManifest
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.ledger_entry import LedgerEvent
from datafarm.artifacts.stages import Stage
from datafarm.harness.rollout import RolloutJob, run_rollouts
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir
from tests.agents.builtin.expert_fixtures import (
    CASES,
    DEV_SEEDS,
    ROLLOUT_OPTIONS,
    author_agent,
    make_task,
    put_controller,
)

PASS_RATE = 0.8


def _dev_rollouts(task: Path, seeds=DEV_SEEDS) -> list:
    """Run the task's controller on `seeds` (two sandboxed rollouts at a time)."""
    return run_rollouts(task, [RolloutJob("dev", seed=s) for s in seeds], workers=2, **ROLLOUT_OPTIONS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_family_passes_its_dev_seeds(tmp_path, name):
    case = CASES[name]
    task = make_task(tmp_path / name, case)
    g, t = case.grounding(), case.contract()
    put_controller(task, write_controller(g, t, default_params(g, t)))
    results = _dev_rollouts(task)
    passed = [r.seed for r in results if r.passed]
    rate = len(passed) / len(results)
    print(f"{name}: {len(passed)}/{len(results)} dev seeds passed ({rate:.0%})")  # the report's figure
    failures = "; ".join(f"seed {r.seed}: {r.summary.reason[:300]}" for r in results if not r.passed)
    assert rate >= PASS_RATE, failures
    for result in results:  # every rollout is a real, recorded, sandboxed episode
        assert result.outcome.sandbox is not None and result.outcome.sandbox.isolated
        if result.passed:
            assert result.outcome.refusals < 20 and result.outcome.claimed_success


def _direct_tools(task: Path, seeds: list[int]) -> DirectTools:
    from datafarm import capability
    from datafarm.agents.access import RoleAccess
    from datafarm.agents.tools.author import author_tools
    from datafarm.agents.tools.base import Toolbox
    from datafarm.harness.rollout import request_rollout

    paths = TaskDir(task)
    tools = author_tools(RoleAccess("author", paths.root), paths, k_version=capability.load().version,
                         rollout=lambda seed: request_rollout(task, seed, **ROLLOUT_OPTIONS), dev_seeds=seeds)
    context = ToolContext(role="author", task=author_task(Stage.expert), provider="builtin", model="builtin")
    return DirectTools(Toolbox.of(tools), context)


@pytest.mark.slow
def test_a_wrong_parameter_fails_and_revise_recovers(tmp_path):
    case = CASES["weigh"]
    task = make_task(tmp_path / "weigh", case)
    g, t = case.grounding(), case.contract()
    wrong = {**default_params(g, t), "place_offset": [0.15, 0.0, 0.0]}  # sets the apple down beside the scale
    result = run_expert_stage(_direct_tools(task, DEV_SEEDS), g, t, DevPlan(tuple(DEV_SEEDS), PASS_RATE), budget=3,
                              params=wrong)
    first, last = result.versions[0], result.versions[-1]
    assert first.passed / len(DEV_SEEDS) < PASS_RATE  # the wrong parameter fails ...
    assert result.reached and last.passed / len(DEV_SEEDS) >= PASS_RATE  # ... and the revision recovers
    assert len(result.versions) == 2 and last.params["place_offset"] == [0.0, 0.0, 0.0]
    assert len(last.params["revisions"]) == 1 and "undo" in last.params["revisions"][0]
    assert revise(last.params, last.verdicts) is None or last.passed < len(DEV_SEEDS)
    # C on disk is the recovered version, and the harness recorded every dev run against it
    manifest = load_artifact(ExpertManifest, TaskDir(task).artifact("expert"))
    assert manifest.parameters["place_offset"] == [0.0, 0.0, 0.0]
    assert len(manifest.dev_runs) == 2 * len(DEV_SEEDS) and manifest.dev_pass_rate() >= PASS_RATE


@pytest.mark.slow
def test_the_builtin_author_works_the_expert_stage_through_its_tools(tmp_path):
    case = CASES["drum"]
    task = make_task(tmp_path / "drum", case)
    agent = author_agent(task, dev_seeds=DEV_SEEDS)
    result = agent.run(author_task(Stage.expert, f"Reach a dev pass rate of {PASS_RATE:g}."))
    assert "reached the dev pass rate" in result.final_text
    paths = TaskDir(task)
    manifest = load_artifact(ExpertManifest, paths.artifact("expert"))
    assert manifest.dev_pass_rate() >= PASS_RATE and manifest.skills == ["approach", "strike"]
    assert (paths.expert_dir / "controller.py").read_text().startswith('"""Expert controller C')
    entries = list(Ledger(task).entries())
    rollouts = [e for e in entries if e.event == LedgerEvent.rollout and e.stage == Stage.expert]
    calls = [e for e in entries if e.event == LedgerEvent.llm_call and e.actor.role == "author"]
    assert len(rollouts) == len(DEV_SEEDS) and all(e.details["seed_kind"] == "dev" for e in rollouts)
    assert len(calls) == len(result.transcripts) >= 4  # every turn in the transcripts and the ledger
    assert all(e.actor.provider == "builtin" for e in calls)
