"""`datafarm audit` on a real compiled dataset (tests.admission.dataset).

A clean dataset reproduces (exit 0): every stored trajectory re-judged with the frozen J gives q's
verdict and stage times, a sample of admission seeds re-simulated in the sandbox is bit-identical to the
stored states, and the real verifier re-run on the stored videos gives q's results. A recoloured video
is caught by the re-verification, a hand-edited states file by re-judging and re-simulation; an
installed K that differs from the lock, or a J that differs from its freeze, is refused."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from datafarm.admission.audit import (
    audit,
    check_capability,
    variation_differences,
    verdict_differences,
    verifier_differences,
)
from datafarm.admission.commands import audit_command
from datafarm.admission.ledger_view import LedgerView
from datafarm.admission.record import load_admission
from datafarm.admission.secret import read_secret
from datafarm.capability import bundle as k_bundle
from datafarm.errors import InputError, IntegrityError
from datafarm.harness.rollout import RolloutTask
from datafarm.harness.seeds import admission_seed
from datafarm.ledger import Ledger
from datafarm.sim.episode_io import read_episode
from datafarm.sim.world import sample_variation
from datafarm.taskdir import TaskDir
from tests.admission.dataset import (
    SLOW_COMPILE,
    episodes,
    most_moved_object,
    recolour_objects,
    shift_object,
)

pytestmark = SLOW_COMPILE  # every test here needs the session's compile (tests/admission/conftest.py)


def _cli():
    app = typer.Typer()
    app.command()(audit_command)
    return app


def _files(task) -> dict:
    return {p: p.read_bytes() for p in task.rglob("*") if p.is_file() and p.name != "ledger.jsonl"}


def test_a_clean_dataset_reproduces_and_the_command_exits_0(dataset, tmp_path):
    before = _files(dataset)
    folders = episodes(dataset)
    result = CliRunner().invoke(_cli(), [str(dataset), "--sample", "1", "--sample-seed", "3", "--work-dir",
                                         str(tmp_path / "work"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    names = [f.name for f in folders]
    assert report["differences"] == [] and report["rejudged"] == names == report["reverified"]
    assert any(f"a sample of 1 of {len(names)}" in note for note in report["notes"]), report["notes"]
    [comparison] = report["resimulated"]
    assert comparison["identical"] and comparison["ended_by"] == "done"
    assert comparison["steps_resimulated"] == comparison["steps_stored"] > 100
    assert set(comparison["max_abs_difference"]) >= {"objects", "joint_positions", "joint_targets"}
    assert max(comparison["max_abs_difference"].values()) == 0.0
    # the re-simulated episode is kept in the work folder, identical to the stored one
    [kept] = list((tmp_path / "work").glob("*/episode/data/states.parquet"))
    stored = read_episode(TaskDir(dataset).episode(comparison["episode_id"])).recording
    assert kept.parents[2].name == comparison["episode_id"]
    assert np.array_equal(read_episode(kept.parents[1]).recording.objects, stored.objects)
    # nothing in the task folder was written but the ledger's audit event
    assert _files(dataset) == before
    last = Ledger(dataset).head()
    assert (last.stage.value, last.event.value, last.outcome.value) == ("audit", "check", "ok")
    assert last.details["reverified"] == names and Ledger(dataset).verify().ok


def test_a_recoloured_video_is_caught_by_re_verifying_and_edited_states_by_re_judging_and_re_simulating(dataset):
    videos, states = episodes(dataset)[:2]
    recolour_objects(videos)
    moved, first, last = most_moved_object(states)
    shift_object(states, moved, 0.1, (first + last) // 2)
    report = audit(dataset)
    assert not report.ok
    by = {(d.episode_id, d.check) for d in report.differences}
    # the recoloured episode: only the verifier, which looks at the videos, sees it
    assert (videos.name, "reverify") in by and not {(videos.name, "rejudge"), (videos.name, "resimulate")} & by
    recoloured = [d.message for d in report.differences if d.episode_id == videos.name]
    assert "check appearance: passed in q, failed re-run" in recoloured, recoloured
    # the edited trajectory: re-judging and re-simulation both disagree with it
    assert {(states.name, "rejudge"), (states.name, "resimulate")} <= by, report.render()
    resim = [d.message for d in report.differences if (d.episode_id, d.check) == (states.name, "resimulate")]
    assert any(m.startswith("objects: differs by up to 0.1") for m in resim), resim
    by_id = {c.episode_id: c for c in report.resimulated}
    assert by_id[states.name].max_abs_difference["objects"] == pytest.approx(0.1)
    assert not by_id[states.name].identical and by_id[videos.name].identical
    assert Ledger(dataset).head().outcome.value == "fail"


def test_an_installed_k_that_differs_from_the_lock_is_refused(dataset, tmp_path, monkeypatch):
    installed = tmp_path / "capability"
    shutil.copytree(k_bundle.BUNDLES_DIR, installed, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(k_bundle, "BUNDLES_DIR", installed)
    pinned = check_capability(TaskDir(dataset)).k_version  # an unmodified copy is the pinned K
    skill = min((installed / pinned / "skills").glob("*.md"))
    skill.write_text(skill.read_text() + "\nA quiet edit to a released skill.\n")
    head = Ledger(dataset).head()
    with pytest.raises(IntegrityError, match="audit refuses to run under a different K"):
        audit(dataset)
    result = CliRunner().invoke(_cli(), [str(dataset)])
    assert result.exit_code == 4 and f"installed {pinned}" in result.output
    assert Ledger(dataset).head() == head  # refused before anything ran


def test_a_judge_that_differs_from_its_freeze_is_refused(dataset):
    spec_path = TaskDir(dataset).judge_dir / "spec.json"
    spec = json.loads(spec_path.read_text())
    spec["time_limit_s"] += 1.0
    spec_path.write_text(json.dumps(spec))
    with pytest.raises(IntegrityError, match="J changed after it was frozen"):
        audit(dataset, sample=0)


def test_a_missing_verifier_spec_is_a_difference_and_the_command_exits_4(dataset):
    (TaskDir(dataset).verifier_dir / "spec.json").unlink()
    result = CliRunner().invoke(_cli(), [str(dataset), "--sample", "0"])
    assert result.exit_code == 4 and result.output.startswith("AUDIT FAILED: 1 difference(s)"), result.output
    assert ("[reverify] (task): verifier/spec.json is missing: the admitted episodes were verified under a spec that "
            "is gone, so none can be re-verified") in result.output
    assert Ledger(dataset).head().outcome.value == "fail"


def test_verdict_and_verifier_comparisons_name_what_differs(pristine):
    q = load_admission(episodes(pristine)[0])
    assert verdict_differences(q.judge, q.judge) == [] and verifier_differences(q.verifier, q.verifier) == []
    stage = q.judge.stages[-1]
    later = q.judge.model_copy(update={"stages": [*q.judge.stages[:-1], stage.model_copy(update={"end_s": stage.end_s + 0.05})]})
    assert verdict_differences(q.judge, later) == [f"stage {stage.name} end: {stage.end_s} s in q, {stage.end_s + 0.05} s re-judged"]
    check = q.verifier.checks[0]
    drifted = q.verifier.model_copy(update={"checks": [check.model_copy(update={"passed": False, "metric": check.metric + 4}),
                                                       *q.verifier.checks[1:]]})
    assert verifier_differences(q.verifier, drifted) == [
        f"check {check.check.value}: passed in q, failed re-run",
        f"check {check.check.value}: metric {check.metric:g} in q, {check.metric + 4:g} re-run"]


def test_z_is_compared_with_what_its_admission_seed_draws_up_to_float_noise(pristine):
    paths = TaskDir(pristine)
    task = RolloutTask.load(pristine)
    secret, problems = read_secret(paths, LedgerView.read(paths.ledger))
    assert secret is not None and not problems
    for folder in episodes(pristine):
        q, stored = load_admission(folder), read_episode(folder).record.variation
        drawn = sample_variation(task.grounding, task.sampler, admission_seed(secret, q.seed_index))
        assert variation_differences(stored, drawn) == []
        # a few ulp are float noise of the matrix products that draw z; a value picked by hand is not
        oid = min(stored.object_poses)
        pose = stored.object_poses[oid]
        nudged = (pose.position[0] + 4 * float(np.spacing(pose.position[0])), *pose.position[1:])
        noisy = stored.model_copy(update={"object_poses": {**stored.object_poses,
                                                           oid: pose.model_copy(update={"position": nudged})}})
        assert variation_differences(noisy, drawn) == []
        assert (f"object_poses.{oid}.position[0]: {nudged[0]!r} stored, {drawn.object_poses[oid].position[0]!r} drawn"
                in variation_differences(noisy, drawn, tolerance=0.0))
        other = sample_variation(task.grounding, task.sampler, admission_seed(secret, q.seed_index + 1))
        assert variation_differences(stored, other)[-1].startswith("and ")  # another seed: another scene entirely


def test_the_work_folder_must_lie_outside_the_task_folder(pristine):
    with pytest.raises(InputError, match="outside the task folder"):
        audit(pristine, work_dir=pristine / "audit")
