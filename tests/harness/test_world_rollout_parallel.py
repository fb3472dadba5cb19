"""Rollouts on different seeds in parallel processes (spawn): each is its own fresh execution, both
land in the ledger, and the hash chain stays valid."""

from __future__ import annotations

import pytest

from datafarm.artifacts.io import load_artifact
from datafarm.errors import InputError
from datafarm.harness.rollout import (
    REPORT_FILE,
    RolloutJob,
    RolloutReport,
    run_rollouts,
)
from datafarm.harness.seeds import admission_seeds
from datafarm.ledger import Ledger
from datafarm.sim.episode_io import read_episode
from tests.harness.test_world_rollout_fixtures import ROLLOUT_OPTIONS, make_task


@pytest.mark.slow
def test_rollouts_on_different_seeds_run_in_parallel_processes_and_both_land_in_the_ledger(tmp_path):
    task = make_task(tmp_path / "task")
    before = len(list(Ledger(task).entries()))
    results = run_rollouts(task, [RolloutJob("dev", seed=2), RolloutJob("admission", index=0)], workers=2,
                           **ROLLOUT_OPTIONS)
    dev, admission = results
    assert dev.passed and admission.passed, (dev.summary.reason, admission.summary.reason)
    assert dev.folder.parent.name == "attempts" and admission.folder.parent.name == "episodes"
    # different seeds, different scenes: z came from each job's own seed
    assert read_episode(dev.folder).record.variation.seed == 2
    assert read_episode(admission.folder).record.variation.seed == admission_seeds(task, 1)[0]

    report = Ledger(task).verify()
    assert report.ok, report.summary()
    entries = list(Ledger(task).entries())[before:]
    assert sorted(e.details.get("seed", e.details.get("admission_index")) for e in entries) == [0, 2]
    assert {e.details["episode_id"] for e in entries} == {dev.episode_id, admission.episode_id}
    assert [e.seq for e in entries] == [before, before + 1]
    assert {dev.ledger_entry.hash, admission.ledger_entry.hash} == {e.hash for e in entries}
    # they ran at the same time (each in its own process: one simulator and one sandbox each)
    spans = []
    for result in results:
        report = load_artifact(RolloutReport, result.folder / REPORT_FILE)
        start = report.started_at.timestamp()
        spans.append((start, start + report.wall_seconds))
    assert max(s for s, _ in spans) < min(e for _, e in spans)


@pytest.mark.slow
def test_a_job_that_cannot_run_raises_in_the_caller(tmp_path):
    task = make_task(tmp_path / "task")
    with pytest.raises(InputError, match="rollout dev 9: .*not one of B's dev seeds"):
        run_rollouts(task, [RolloutJob("dev", seed=9)], **ROLLOUT_OPTIONS)
