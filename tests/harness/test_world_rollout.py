"""Real rollouts on a SAPIEN world built from G: a scripted expert runs in the bwrap sandbox against a
`WorldSession`, the recorder writes the episode, the frozen judge decides, the ledger records it.
The same expert with its target moved 10 cm off the pad fails at the placing stage; a hostile
expert's failure lands in attempts/ and the next rollout still works."""

from __future__ import annotations

import json

import numpy as np
import pytest

from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.judge import JudgeSpec
from datafarm.artifacts.sampler import SamplerSpec
from datafarm.errors import InputError, IntegrityError, StateError
from datafarm.harness.judge import evaluate, judge_frozen, load_lock
from datafarm.harness.judge.from_recording import (
    robot_limits,
    trajectory_from_episode,
    trajectory_from_recording,
)
from datafarm.harness.rollout import (
    REPORT_FILE,
    RolloutReport,
    RolloutTask,
    run_rollout,
)
from datafarm.harness.sandbox import SandboxLimits
from datafarm.harness.seeds import admission_seeds
from datafarm.harness.server import RolloutEnd
from datafarm.harness.session import SimSession
from datafarm.harness.world_session import WorldSession
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.sim.episode_io import read_episode
from datafarm.sim.recording import Recorder
from datafarm.sim.world import build_world, sample_variation
from datafarm.taskdir import TaskDir
from tests.harness.test_world_rollout_fixtures import (
    PLACE_EXPERT,
    ROLLOUT_OPTIONS,
    make_task,
    place_grounding,
    place_sampler,
    write_expert,
)
from tests.sim.conftest import drawer_grounding, weigh_grounding

PAD_HALF = 0.06


def _final_xy(folder, oid: str) -> np.ndarray:
    recording = read_episode(folder).recording
    return recording.object_poses(oid)[-1, :2]


def _last_entry(task):
    return list(Ledger(task).entries())[-1]


# --- the session ---------------------------------------------------------------------------------------


def test_world_session_steps_through_the_recorder_and_observes_grams_and_drawers():
    from datafarm.artifacts.common import Pose
    from datafarm.artifacts.sampler import Variation

    g = weigh_grounding()
    scale = g.object("scale")
    plate_top = scale.body_height.value + scale.plate.z.value
    world = build_world(g, Variation(seed=0, object_poses={"apple": Pose(position=(0.15, 0.1, plate_top + 0.002))}))
    steps = []
    session = WorldSession(world, control_hz=20, hooks=[steps.append])
    assert isinstance(session, SimSession) and session.control_dt == pytest.approx(0.05)
    assert session.describe() == {"objects": ["scale", "apple"], "scales": ["scale"], "drawers": []}
    info = session.arm_info("left")
    start = session.joint_targets("left")
    goal = start + 0.05 * np.sign((info.lower + info.upper) / 2 - start)  # 0.05 rad inwards
    session.set_joint_targets("left", goal)
    session.set_gripper("right", 0.02)
    for _ in range(30):
        session.step_control()
    seen = session.observe()
    recording = session.recorder.finish()
    # one recorded row per control step, the hooks called once each, time in control steps
    assert recording.steps == session.steps == 30 and seen["time"] == pytest.approx(1.5) and seen["step"] == 30
    assert [s.index for s in steps] == list(range(1, 31))
    # the apple resting on the plate reads its G mass in grams, as the recorder records it
    assert seen["scales"]["scale"] == pytest.approx(1000 * g.object("apple").mass.value, rel=0.05)
    assert recording.scale_readings[-1, 0] == pytest.approx(seen["scales"]["scale"], rel=0.05)
    # the targets the controller held are the recorded actions, and the arm went there
    left = [i for i, name in enumerate(recording.joints) if name.startswith("left.")]
    assert recording.joint_targets[-1, left] == pytest.approx(goal)
    assert np.abs(np.array(seen["arms"]["left"]["q"]) - goal).max() < 0.02
    assert recording.gripper_targets[-1, recording.grippers.index("right")] == pytest.approx(0.02)
    assert set(seen["objects"]["apple"]) == {"position", "quaternion", "linear_velocity", "angular_velocity"}

    drawer = WorldSession(build_world(drawer_grounding()), control_hz=50)
    assert drawer.describe()["drawers"] == ["cabinet"]
    drawer.step_control()
    assert drawer.observe()["drawers"]["cabinet"] == pytest.approx(0.0, abs=1e-3)


def test_world_session_refuses_a_rate_or_a_recorder_it_cannot_use():
    world = build_world(place_grounding())
    with pytest.raises(ValueError, match="whole number"):
        WorldSession(world, control_hz=7)
    used = Recorder(world, 20)
    used.step()
    with pytest.raises(ValueError, match="already recorded"):
        WorldSession(world, used)
    with pytest.raises(ValueError, match="another world"):
        WorldSession(build_world(place_grounding()), Recorder(world, 20))


def test_a_tilted_table_is_levelled_for_the_judge():
    g = place_grounding()
    z = sample_variation(g, SamplerSpec(table_height=(0.01, 0.01), table_tilt=(0.02, 0.02)), 0)
    world = build_world(g, z)
    recorder = Recorder(world, 20)
    for _ in range(20):
        recorder.step()
    recording = recorder.finish()
    rest = JudgeSpec.model_validate({
        "stages": [{"name": "rest", "condition": {"predicate": "on", "object": "block", "support": "table"}}],
        "success": {"predicate": "on", "object": "pad", "support": "table"},
        "invariants": [{"shortcut": "penetration", "max_depth": 0.004}, {"shortcut": "teleport"}],
        "time_limit_s": 5.0})
    traj = trajectory_from_recording(recording, g, z, robot_limits(world))
    verdict = evaluate(rest, traj)
    assert verdict.passed, verdict.reason
    # in the world frame the block, resting on the tilted top, sits ~1 cm below the top's centre
    # height; in the level table frame it is on the level top
    world_z = recording.object_poses("block")[-1, 2]
    assert abs(world_z - 0.01) > 0.006
    assert traj.objects["block"].pose[-1, 2] == pytest.approx(0.01, abs=1e-3)


# --- rollouts ------------------------------------------------------------------------------------------


def test_scripted_expert_passes_a_dev_rollout_with_labels_and_files(tmp_path):
    task = make_task(tmp_path / "task")
    result = run_rollout(task, 0, "dev", **ROLLOUT_OPTIONS)
    assert result.passed, result.summary.reason
    assert result.outcome.ended_by is RolloutEnd.DONE and result.outcome.refusals == 0
    assert result.outcome.sandbox.provider == "bwrap" and result.outcome.sandbox.isolated
    assert result.folder.parent == TaskDir(task).attempts_dir  # dev rollouts are never admitted episodes

    stored = read_episode(result.folder)
    record = stored.record
    # y: both stages completed, in order, back to back
    grasp, place = record.labels
    assert (grasp.name, place.name) == ("grasp_block", "place_block")
    assert 0.0 == grasp.start_s < grasp.end_s == place.start_s < place.end_s < record.steps / record.control_hz
    # z, the expert's hash, and the data files agree with what ran
    g = place_grounding()
    assert record.variation == sample_variation(g, place_sampler(), 0)
    assert record.expert_sha256 == sha256_file(TaskDir(task).expert_dir / "controller.py")
    assert record.verdict.judge_sha256 == load_lock(TaskDir(task).judge_dir).spec_sha256
    assert len(stored.action_rows()) == record.steps == result.outcome.sim_time * 20
    # physically: the block ended on the pad; fingers and pad touched it under their judge names
    assert np.abs(_final_xy(result.folder, "block") - _final_xy(result.folder, "pad")).max() < PAD_HALF - 0.02
    pairs = {frozenset((e.a, e.b)) for e in stored.recording.contacts}
    assert {frozenset(("block", "left.link7")), frozenset(("block", "left.link8")), frozenset(("block", "pad"))} <= pairs
    # the stored episode read back from Parquet gets the same verdict from the frozen judge
    again = judge_frozen(TaskDir(task).judge_dir, trajectory_from_episode(result.folder, g), Ledger(task))
    assert again == record.verdict

    report = load_artifact(RolloutReport, result.folder / REPORT_FILE)
    assert report.passed and report.seed == 0 and report.kind == "dev"
    entry = _last_entry(task)
    assert entry == result.ledger_entry
    assert (entry.stage.value, entry.event.value, entry.outcome.value) == ("expert", "rollout", "ok")
    assert entry.inputs["judge/spec.json"] == record.verdict.judge_sha256
    assert entry.inputs["expert/controller.py"] == record.expert_sha256
    assert entry.details["seed"] == 0 and entry.details["seed_kind"] == "dev"
    for name, digest in entry.outputs.items():
        assert sha256_file(task / name) == digest, name
    assert f"{result.folder.relative_to(task).as_posix()}/episode.json" in entry.outputs
    assert Ledger(task).verify().ok


def test_the_same_expert_with_its_target_10cm_off_fails_at_the_placing_stage(tmp_path):
    task = make_task(tmp_path / "task", params={"target_offset": [-0.10, 0.0, -0.01]})
    result = run_rollout(task, 0, "dev", **ROLLOUT_OPTIONS)
    assert result.outcome.ended_by is RolloutEnd.DONE and result.outcome.claimed_success is True
    assert not result.passed
    assert result.summary.stage_reached == "place_block"
    assert result.summary.reason.startswith("stage 'place_block' (2 of 2) did not complete")
    assert "on(block, pad)" in result.summary.reason
    verdict = result.verdict
    assert verdict.violations == []  # a plain failure to place, not a forbidden shortcut
    assert verdict.stages[0].end_s is not None and verdict.stages[1].end_s is None
    # it really is 10 cm off: the block stands on the table beside the pad
    offset = _final_xy(result.folder, "block") - _final_xy(result.folder, "pad")
    assert offset == pytest.approx([-0.10, 0.0], abs=0.01)
    assert result.folder.parent == TaskDir(task).attempts_dir
    stored = read_episode(result.folder).record
    assert not stored.verdict.passed and stored.labels[1].end_s is None
    entry = _last_entry(task)
    assert entry.outcome.value == "fail" and entry.details["stage_reached"] == "place_block"
    assert entry.reason == result.summary.reason


def test_a_passing_admission_rollout_is_an_episode_and_the_ledger_keeps_its_index_not_its_seed(tmp_path):
    task = make_task(tmp_path / "task")
    result = run_rollout(task, kind="admission", index=2, **ROLLOUT_OPTIONS)
    assert result.passed, result.summary.reason
    assert result.folder.parent == TaskDir(task).episodes_dir and result.in_episodes
    assert result.seed is None and result.admission_index == 2
    seed = admission_seeds(task, 3)[2]
    record = read_episode(result.folder).record
    assert record.variation == sample_variation(place_grounding(), place_sampler(), seed)
    entry = _last_entry(task)
    assert (entry.stage.value, entry.outcome.value) == ("rollout", "ok")
    assert entry.details["admission_index"] == 2 and "seed" not in entry.details
    assert str(seed) not in Ledger(task).path.read_text()
    assert not TaskDir(task).attempts_dir.exists()
    with pytest.raises(StateError, match="already gave episode"):
        run_rollout(task, kind="admission", index=2, **ROLLOUT_OPTIONS)  # the same scene twice
    with pytest.raises(InputError, match="named by its index"):
        run_rollout(task, seed, "admission", **ROLLOUT_OPTIONS)
    with pytest.raises(InputError, match="outside 0..2"):
        run_rollout(task, kind="admission", index=3, **ROLLOUT_OPTIONS)
    with pytest.raises(InputError, match="not one of B's dev seeds"):
        run_rollout(task, 7, "dev", **ROLLOUT_OPTIONS)


def test_a_judge_changed_after_freezing_is_refused_before_the_expert_runs(tmp_path):
    task = make_task(tmp_path / "task")
    spec_path = TaskDir(task).judge_dir / "spec.json"
    spec = json.loads(spec_path.read_text())
    spec["time_limit_s"] = 99.0
    spec_path.write_text(json.dumps(spec))
    with pytest.raises(IntegrityError, match="changed after it was frozen"):
        run_rollout(task, 0, "dev", **ROLLOUT_OPTIONS)
    entry = _last_entry(task)
    assert entry.outcome.value == "error" and entry.reason.startswith("rollout refused:")
    assert not TaskDir(task).attempts_dir.exists() and not TaskDir(task).episodes_dir.exists()


@pytest.mark.slow
def test_a_hostile_experts_failure_lands_in_attempts_and_the_next_rollout_works(tmp_path):
    task = make_task(tmp_path / "task")
    write_expert(task, """
        import os, socket
        from datafarm_expert import Harness, HarnessError
        robot = Harness()
        before = robot.object_position("block").tolist()
        try:
            robot.request("set_pose", object="block", position=[0.0, 0.0, 0.5])
        except HarnessError as refused:
            print("refused:", refused.code)
        for path in ("../judge/spec.json", "/in/../judge/spec.json", "../ledger.jsonl", "/etc/shadow"):
            print(path, os.path.exists(path))
        try:
            socket.create_connection(("1.1.1.1", 80), timeout=1)
        except OSError as error:
            print("no network:", error)
        robot.move_joints([0.2, 0.5, -0.5, 0.0, 0.3, 0.0], arm="left", duration=0.5)
        raise RuntimeError("hostile: giving up mid-episode")
        """)
    hostile = run_rollout(task, 1, "dev", **ROLLOUT_OPTIONS)
    assert not hostile.passed
    assert hostile.outcome.ended_by is RolloutEnd.CONTROLLER_EXITED
    assert "hostile: giving up mid-episode" in hostile.summary.reason
    assert hostile.outcome.refused[0].op == "set_pose" and hostile.outcome.refused[0].code == "unknown_op"
    assert hostile.folder.parent == TaskDir(task).attempts_dir
    log = hostile.outcome.sandbox.stderr_tail
    assert "refused: unknown_op" in log and "no network:" in log
    assert all(f"{path} False" in log for path in ("../judge/spec.json", "/in/../judge/spec.json", "../ledger.jsonl"))
    report = load_artifact(RolloutReport, hostile.folder / REPORT_FILE)
    assert report.reason == hostile.summary.reason and report.outcome.ended_by is RolloutEnd.CONTROLLER_EXITED
    record = read_episode(hostile.folder).record  # what it did before dying is kept, judged, and failed
    assert not record.verdict.passed and record.steps == 10
    assert _last_entry(task).outcome.value == "fail" and _last_entry(task).details["ended_by"] == "controller_exited"

    write_expert(task, "while True:\n    pass\n")  # never even says hello: nothing is recorded
    spinner = run_rollout(task, 1, "dev", limits=ROLLOUT_OPTIONS["limits"],
                          sandbox_limits=SandboxLimits(cpu_seconds=5, wall_seconds=2, processes=32, memory_bytes=2 << 30))
    assert spinner.outcome.ended_by is RolloutEnd.SANDBOX_LIMIT and not spinner.passed
    assert spinner.verdict is None and "nothing was recorded" in spinner.summary.reason
    assert sorted(p.name for p in spinner.folder.iterdir()) == [REPORT_FILE]

    write_expert(task, (PLACE_EXPERT / "controller.py").read_text())
    good = run_rollout(task, 1, "dev", **ROLLOUT_OPTIONS)
    assert good.passed, good.summary.reason
    assert Ledger(task).verify().ok
    assert [e.details["ended_by"] for e in Ledger(task).entries() if e.event.value == "rollout"] == [
        "controller_exited", "sandbox_limit", "done"]


def test_the_rollout_report_documents_every_field():
    assert all(info.description for info in RolloutReport.model_fields.values())


def test_rollout_task_reads_the_task_folder(tmp_path):
    task = make_task(tmp_path / "task")
    loaded = RolloutTask.load(task)
    assert loaded.control_hz == 20.0 and loaded.time_limit_s == 20.0 and loaded.entry == "controller.py"
    assert loaded.grounding == place_grounding() and loaded.batch.dev_seeds == [0, 1, 2]
