"""The pipeline after grounding, on a real task folder: contract, qualification and the judge run
through the builtin roles and the harness, each recorded in the ledger; resume skips finished stages.

Grounding is seeded from a known-good G fixture (the ledger entry says so), so these tests exercise
the later stages whatever the state of the builtin grounding.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from datafarm.artifacts.io import save_artifact
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.compiler import compile_request
from datafarm.intake import load_request
from datafarm.ledger import Ledger
from datafarm.pipeline import PipelineContext, run_pipeline
from datafarm.taskdir import TaskDir
from tests.artifacts.test_schemas import nest_grounding

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nest_cups"
pytestmark = pytest.mark.slow


def seeded_task(tmp_path: Path) -> tuple[Path, TaskDir]:
    """A task folder whose grounding stage is recorded as finished with a fixture G."""
    dst = tmp_path / "nest_cups"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("runs"))
    request = dst / "request.yaml"
    result = compile_request(request, run_stages=False)
    task = result.task_dir
    save_artifact(nest_grounding(), task.grounding)
    Ledger(task.root).append(
        stage=Stage.grounding, event=LedgerEvent.stage_finished, outcome=LedgerOutcome.ok,
        reason="TEST FIXTURE: G seeded from tests/artifacts nest_grounding()",
        actor=LedgerActor(role="test", provider="pytest", model="fixture"),
    )
    return request, task


def test_contract_qualification_and_judge_run_and_are_recorded(tmp_path):
    request_path, task = seeded_task(tmp_path)
    ctx = PipelineContext(request=load_request(request_path), task=task, ledger=Ledger(task.root))
    outcome = run_pipeline(ctx, stop_after=Stage.judge)
    assert outcome.skipped_done == [Stage.grounding]
    assert outcome.finished == [Stage.contract, Stage.qualification, Stage.judge]
    for path in (task.contract, task.sampler, task.batch, task.qualification, task.judge_dir / "spec.json",
                 task.judge_dir / "lock.json", task.harness_dir / "secret"):
        assert path.is_file(), path
    entries = list(Ledger(task.root).entries())
    assert any(e.event == LedgerEvent.freeze for e in entries)
    assert any(e.event == LedgerEvent.llm_call and e.actor and e.actor.role == "judge_writer" for e in entries)
    assert Ledger(task.root).verify().ok

    # resume: the finished stages are not redone
    again = run_pipeline(PipelineContext(request=load_request(request_path), task=task, ledger=Ledger(task.root)),
                         stop_after=Stage.judge)
    assert {Stage.grounding, Stage.contract, Stage.qualification, Stage.judge} <= set(again.skipped_done)
    freezes = [e for e in Ledger(task.root).entries() if e.event == LedgerEvent.freeze]
    assert len(freezes) == 1
