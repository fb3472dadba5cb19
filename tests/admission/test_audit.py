"""`datafarm audit`: a clean dataset reproduces exactly (re-judged verdicts and stage times equal q's,
re-simulated admission seeds bit-identical to the stored states); a tampered states.parquet is caught
by re-judging and by re-simulation; an installed K that differs from capability.lock, or a J that
differs from its freeze, is refused; the verifier's hook is called and compared when it exists."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from datafarm.admission.audit import audit, check_capability
from datafarm.admission.commands import audit_command
from datafarm.admission.record import load_admission
from datafarm.artifacts.admission import VerifierResults
from datafarm.capability import bundle as k_bundle
from datafarm.errors import InputError, IntegrityError
from datafarm.ledger import Ledger
from datafarm.sim.episode_io import read_episode, recording_tables
from datafarm.taskdir import TaskDir
from tests.admission.dataset import synthetic_verifier_results


def _episodes(task):
    return sorted(TaskDir(task).episodes_dir.iterdir())


def _as_stored(task_dir: Path, episode_id: str, stored: VerifierResults) -> VerifierResults:
    """TEST INPUT standing in for the verifier's re-run (not built yet): it reproduces q's results.
    Passed explicitly, so these tests do not depend on the real verifier's hook."""
    return stored


def _cli():
    app = typer.Typer()
    app.command()(audit_command)
    return app


@pytest.mark.slow
def test_a_clean_dataset_reproduces_bit_for_bit(dataset):
    before = {p: p.read_bytes() for p in dataset.rglob("*") if p.is_file() and p.name != "ledger.jsonl"}
    report = audit(dataset, reverify=_as_stored)
    assert report.ok, report.render()
    names = [f.name for f in _episodes(dataset)]
    assert report.rejudged == names == report.reverified
    assert [c.episode_id for c in report.resimulated] == names and [c.seed_index for c in report.resimulated] == [0, 1]
    for comparison in report.resimulated:
        assert comparison.identical and comparison.ended_by == "done"
        assert comparison.steps_resimulated == comparison.steps_stored > 100
        assert set(comparison.max_abs_difference) >= {"objects", "joint_positions", "joint_targets"}
        assert max(comparison.max_abs_difference.values()) == 0.0
    # nothing in the task folder was written but the ledger's audit event
    after = {p: p.read_bytes() for p in dataset.rglob("*") if p.is_file() and p.name != "ledger.jsonl"}
    assert after == before
    last = Ledger(dataset).head()
    assert (last.stage.value, last.event.value, last.outcome.value) == ("audit", "check", "ok")
    assert Ledger(dataset).verify().ok


def _tamper_states(folder: Path, object_id: str = "block", shift: float = 0.1, from_step: int = 60) -> None:
    """Rewrite states.parquet as a valid file in which `object_id` sits `shift` m further along x
    from `from_step` on (what a hand-edited trajectory would look like)."""
    stored = read_episode(folder)
    recording = stored.recording
    k = recording.object_ids.index(object_id)
    recording.objects[from_step:, k, 0] += shift
    pq.write_table(recording_tables(recording)["states"], folder / "data" / "states.parquet")


@pytest.mark.slow
def test_a_tampered_states_file_is_caught_by_re_judging_and_by_re_simulation(dataset):
    tampered, clean = _episodes(dataset)
    _tamper_states(tampered)
    report = audit(dataset, reverify=_as_stored)
    assert not report.ok
    rejudge = [d.message for d in report.differences if d.check == "rejudge"]
    resim = [d.message for d in report.differences if d.check == "resimulate"]
    assert {d.episode_id for d in report.differences} == {tampered.name}, report.render()
    assert rejudge and any("teleport" in m or "failed" in m for m in rejudge), rejudge
    assert any(m.startswith("objects: differs by up to 0.1") and "first at step 60" in m for m in resim), resim
    by_id = {c.episode_id: c for c in report.resimulated}
    assert by_id[tampered.name].max_abs_difference["objects"] == pytest.approx(0.1)
    assert not by_id[tampered.name].identical and by_id[clean.name].identical
    assert Ledger(dataset).head().outcome.value == "fail"


@pytest.mark.slow
def test_a_sample_re_simulates_only_part_and_says_which(dataset):
    report = audit(dataset, sample=1, sample_seed=3, reverify=_as_stored, record=False)
    assert report.ok and len(report.resimulated) == 1 and len(report.rejudged) == 2
    assert any("a sample of 1 of 2" in n for n in report.notes)
    assert audit(dataset, sample=1, sample_seed=3, reverify=_as_stored, record=False).resimulated == report.resimulated


def test_an_installed_k_that_differs_from_the_lock_is_refused(dataset, tmp_path, monkeypatch):
    installed = tmp_path / "capability"
    shutil.copytree(k_bundle.BUNDLES_DIR, installed, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(k_bundle, "BUNDLES_DIR", installed)
    pinned = check_capability(TaskDir(dataset)).k_version  # an unmodified copy is the pinned K
    assert pinned == k_bundle.latest_version()
    skill = installed / pinned / "skills" / "expert.md"
    skill.write_text(skill.read_text() + "\nA quiet edit to a released skill.\n")
    with pytest.raises(IntegrityError, match="audit refuses to run under a different K"):
        audit(dataset)
    result = CliRunner().invoke(_cli(), [str(dataset)])
    assert result.exit_code == 4 and f"installed {pinned}" in result.output
    assert Ledger(dataset).head().stage.value != "audit"  # refused before anything ran


def test_a_judge_that_differs_from_its_freeze_is_refused(dataset):
    spec_path = TaskDir(dataset).judge_dir / "spec.json"
    spec = json.loads(spec_path.read_text())
    spec["time_limit_s"] = 99.0
    spec_path.write_text(json.dumps(spec))
    with pytest.raises(IntegrityError, match="J changed after it was frozen"):
        audit(dataset, sample=0)


def test_the_verifier_hook_is_re_run_and_compared(dataset):
    calls: list[str] = []

    def same(task_dir: Path, episode_id: str, stored: VerifierResults) -> VerifierResults:
        calls.append(episode_id)
        return synthetic_verifier_results(task_dir)

    report = audit(dataset, sample=0, reverify=same, record=False)
    assert report.ok and report.reverified == calls == [f.name for f in _episodes(dataset)]

    def drifted(task_dir: Path, episode_id: str, stored: VerifierResults) -> VerifierResults:
        return synthetic_verifier_results(task_dir, appearance=4.0)

    report = audit(dataset, sample=0, reverify=drifted, record=False)
    assert [d.message for d in report.differences if d.check == "reverify"] == [
        "check appearance: passed in q, failed re-run", "check appearance: metric 0 in q, 4 re-run"] * 2

    shutil.rmtree(TaskDir(dataset).verifier_dir)
    report = audit(dataset, sample=0, reverify=drifted, record=False)
    assert report.ok and report.reverified == [] and "verifier not re-run: the task has no verifier/spec.json" in report.notes


def test_re_judging_compares_stage_times_with_q(dataset):
    folder = _episodes(dataset)[0]
    q = load_admission(folder)
    stages = [s.model_copy(update={"end_s": s.end_s + 0.05}) if s.name == "place_block" else s for s in q.judge.stages]
    q_path = folder / "admission.json"
    q_path.write_text(q.model_copy(update={"judge": q.judge.model_copy(update={"stages": stages})}).model_dump_json())
    report = audit(dataset, sample=0, reverify=_as_stored, record=False)
    assert [d.message for d in report.differences] == [
        f"stage place_block end: {stages[1].end_s} s in q, {q.judge.stages[1].end_s} s re-judged"]


def test_the_work_folder_must_lie_outside_the_task_folder(dataset):
    with pytest.raises(InputError, match="outside the task folder"):
        audit(dataset, work_dir=dataset / "audit")


@pytest.mark.slow
def test_the_command_keeps_re_simulated_episodes_in_the_work_folder(dataset, tmp_path):
    shutil.rmtree(TaskDir(dataset).verifier_dir)  # the CLI uses the real verifier hook: keep the placeholder spec out of it
    result = CliRunner().invoke(_cli(), [str(dataset), "--sample", "1", "--work-dir", str(tmp_path / "work")])
    assert result.exit_code == 0, result.output
    assert "AUDIT OK" in result.output and "identical" in result.output
    assert "verifier not re-run: the task has no verifier/spec.json" in result.output
    kept = list((tmp_path / "work").glob("*/episode/data/states.parquet"))
    assert len(kept) == 1
    stored = read_episode(TaskDir(dataset).episode(kept[0].parents[2].name)).recording
    assert np.array_equal(read_episode(kept[0].parents[1]).recording.objects, stored.objects)
