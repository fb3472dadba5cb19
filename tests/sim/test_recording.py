"""Recording episodes in real SAPIEN (CPU, physics-only) with scripted arm motions: drum strikes as
one contact event each, a pick-and-lift whose box rises between recorded finger contacts, joint
occupancy flags, Parquet round trips, and bit-identical replays in one process and across processes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import sapien

from datafarm.artifacts.common import Pose
from datafarm.artifacts.episode import ContactEvent
from datafarm.artifacts.judge import JudgeVerdict
from datafarm.artifacts.sampler import SamplerSpec, Variation
from datafarm.sim.episode_io import (
    make_record,
    read_episode,
    recording_tables,
    write_episode,
)
from datafarm.sim.recording import Recorder, Recording, merged_contacts, replay_states
from datafarm.sim.world import build_world, sample_variation
from datafarm.sim.world.reference import reference_actions, reference_grounding
from tests.sim.conftest import (
    ArmScript,
    block,
    drawer_grounding,
    grounding_with,
    rigid,
    tilted_down,
    weigh_grounding,
)

REPO = Path(__file__).resolve().parents[2]
VERDICT = JudgeVerdict.model_validate({"passed": True, "stage_reached": "lift", "reason": "lifted",
                                       "stages": [{"name": "lift", "start_s": 0.5, "end_s": 2.9}], "judge_sha256": "ab" * 32})


# --- drum ---------------------------------------------------------------------------------------------


def test_each_drum_strike_of_the_arm_is_one_contact_event_and_a_hover_is_none():
    drum = rigid("drum", "drum", [0.9, 0.85, 0.7], (-0.1, 0.2), head_radius=0.1, height=0.12)
    world = build_world(grounding_with(drum))
    recorder = Recorder(world, control_hz=50)
    arm = ArmScript(recorder, "left")
    quaternion, approach = tilted_down(45)
    head = np.array([-0.1, 0.2, 0.12])

    def tip_at(height: float, steps: int) -> None:  # the fingertips 2 cm beyond the TCP
        arm.move(head + (0, 0, height) - 0.02 * approach, 0.0, steps, quaternion)

    tip_at(0.06, 30)
    tip_at(0.004, 15)  # hover 4 mm above the head: inside PhysX's contact offsets, not touching
    hover_end = recorder.steps
    pairs = {frozenset((world.shape_names[c.shapes[0]], world.shape_names[c.shapes[1]])) for c in world.scene.get_contacts()}
    assert any("drum.head" in p and any(n.startswith("left.") for n in p) for p in pairs)  # PhysX reports the pair
    strikes = []
    for _ in range(3):
        start = recorder.steps
        tip_at(-0.01, 17)  # down into the head, and hold
        tip_at(0.06, 12)  # back up
        strikes.append((start, recorder.steps - 1))
    recording = recorder.finish()

    gripper = world.body_aliases()["left.gripper"]
    head_events = [e for e in recording.contacts if "drum.head" in (e.a, e.b)]
    assert head_events and all(({e.a, e.b} - {"drum.head"}) <= gripper for e in head_events)
    assert all(e.start_step >= hover_end for e in head_events)  # the hover was no contact
    # per pair of bodies, one event per strike, inside that strike's window
    for pair in {(e.a, e.b) for e in head_events}:
        events = [e for e in head_events if (e.a, e.b) == pair]
        assert len(events) == 3, pair
        for e, (first, last) in zip(events, strikes):
            assert first <= e.start_step <= e.end_step <= last
            assert e.max_impulse > 0 and e.end_s >= e.start_s
    # and seen as the gripper against the head: three strikes
    assert len(merged_contacts(recording.contacts, gripper, {"drum.head"})) == 3


def test_merged_contacts_joins_overlapping_and_adjacent_events():
    def event(a: str, b: str, start: int, end: int | None) -> ContactEvent:
        return ContactEvent(a=a, b=b, start_step=start, end_step=end, start_s=start / 10,
                            end_s=None if end is None else end / 10, max_impulse=0.1)

    events = [event("drum.head", "left.link7", 3, 6), event("drum.head", "left.link8", 5, 8),
              event("drum.head", "left.link8", 9, 10), event("drum.head", "left.link7", 20, 22),
              event("drum", "left.link7", 30, None), event("drum.head", "right.link7", 40, 41)]
    assert merged_contacts(events, {"left.link7", "left.link8"}, {"drum.head"}) == [(3, 10), (20, 22)]
    assert merged_contacts(events, {"left.link7"}, {"drum", "drum.head"}) == [(3, 6), (20, 22), (30, None)]


# --- pick and lift ------------------------------------------------------------------------------------


def _pick_and_lift() -> tuple[Recording, dict[str, set[str]]]:
    """The left arm picks the 4 cm block (at 0.3 m in front of its base) and lifts it by 6.5 cm."""
    world = build_world(grounding_with(block("block", (-0.15, 0.3))))
    recorder = Recorder(world, control_hz=20)
    arm = ArmScript(recorder, "left")
    arm.move((-0.15, 0.3, 0.1), 0.07, 20)  # above, open
    arm.move((-0.15, 0.3, 0.035), 0.07, 15)  # fingers around the block
    arm.move((-0.15, 0.3, 0.035), 0.0, 10)  # close
    arm.move((-0.15, 0.3, 0.1), 0.0, 15)  # lift
    return recorder.finish(), world.body_aliases()


@pytest.fixture(scope="module")
def picks() -> tuple[tuple[Recording, dict[str, set[str]]], tuple[Recording, dict[str, set[str]]]]:
    return _pick_and_lift(), _pick_and_lift()


def test_pick_and_lift_records_the_box_rising_between_finger_contacts(picks):
    recording, aliases = picks[0]
    assert recording.steps == 60
    z = recording.object_poses("block")[:, 2]
    assert abs(z[0]) < 1e-3 and z[-1] > 0.055
    fingers = [e for e in recording.contacts if "block" in (e.a, e.b) and ({e.a, e.b} & aliases["left.gripper"])]
    assert {e.a if e.b == "block" else e.b for e in fingers} == {"left.link7", "left.link8"}
    for e in fingers:
        assert 35 <= e.start_step < 45 and e.end_step is None  # from the closing to the end
    table = [e for e in recording.contacts if {e.a, e.b} == {"block", "table"}]
    assert len(table) == 1 and table[0].start_step == 0
    assert table[0].end_step is not None and z[table[0].end_step + 1] > 1e-3  # the block left the table
    assert recording.gripper_openings[-1, 0] == pytest.approx(0.04, abs=2e-3)  # holding 4 cm
    assert recording.grippers == ["left", "right"] and recording.joints[6] == "right.joint1"


def test_replay_states_put_a_fresh_world_where_the_recording_was(picks):
    recording, _ = picks[0]
    world = build_world(grounding_with(block("block", (-0.15, 0.3))))
    states = replay_states(world, recording)
    assert len(states) == recording.steps
    last = states[-1]
    assert set(last["bodies"]) == {"block"} and set(last["articulations"]) == {"left_piper", "right_piper"}
    for name, joints in last["articulations"].items():  # what a replayer does: no physics, just set
        art = next(world.robot.articulation(a) for a in world.robot.arms if world.robot.articulation(a).name == name)
        order = [j.name for j in art.active_joints]
        art.set_qpos(np.array([joints[j] for j in order], dtype=np.float32))
    world.object("block").entity.set_pose(sapien.Pose(last["bodies"]["block"][:3], last["bodies"]["block"][3:]))
    assert world.robot.ee_pose("left").p == pytest.approx(recording.end_effectors[-1, 0, :3], abs=1e-5)
    assert world.robot.gripper_width("left") == pytest.approx(recording.gripper_openings[-1, 0], abs=1e-6)
    assert world.object_pose("block").p[2] > 0.055
    drawer_world = build_world(drawer_grounding())
    drawer_world.object("cabinet").articulation.set_qpos(np.array([0.07], dtype=np.float32))
    drawer = Recorder(drawer_world, control_hz=50)
    drawer.step()
    state = replay_states(drawer_world, drawer.finish())[0]
    assert state["articulations"]["cabinet"]["drawer"] == pytest.approx(0.07, abs=1e-3)
    assert "cabinet" not in state["bodies"]  # fixed: nothing to set


def test_same_world_and_actions_give_bit_identical_recordings(picks):
    (a, _), (b, _) = picks
    for name in ("joint_targets", "gripper_targets", "joint_positions", "joint_velocities", "joint_efforts",
                 "gripper_openings", "end_effectors", "objects", "scale_readings", "joint_values"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.contacts == b.contacts and a.occupancy == b.occupancy
    assert np.abs(np.diff(a.joint_positions, axis=0)).max() > 0.01  # it did move


def _fingerprint() -> str:
    """sha256 of a short recording of the reference scene under a sampled variation (for the
    cross-process check)."""
    g = reference_grounding()
    world = build_world(g, sample_variation(g, SamplerSpec(physics=["objects.can.mass"]), 5))
    recorder = Recorder(world, control_hz=25)
    for joints, grippers in reference_actions(30):
        recorder.step(joints, grippers)
    recording = recorder.finish()
    digest = hashlib.sha256()
    for name in ("joint_positions", "joint_velocities", "joint_efforts", "end_effectors", "objects"):
        digest.update(getattr(recording, name).tobytes())
    digest.update(json.dumps([e.model_dump() for e in recording.contacts]).encode())
    return digest.hexdigest()


def test_a_fresh_process_replays_the_same_states_bit_for_bit():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = "from tests.sim.test_recording import _fingerprint; print(_fingerprint())"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == _fingerprint()


# --- limits, state channels, errors ----------------------------------------------------------------


def test_an_out_of_limit_action_is_clamped_and_flagged_with_step_and_joint():
    world = build_world(drawer_grounding())
    safe = np.array([0.0, 1.0, -1.0, 0.0, 0.5, 0.0])
    for arm in ("left", "right"):
        world.robot.reset(arm, safe)  # episode setup: start away from q = 0, which sits on joint limits
    recorder = Recorder(world, control_hz=20)
    recorder.step({"left": safe, "right": safe}, {"left": 0.03})
    recorder.step({"left": safe, "right": safe})
    recorder.step({"left": safe + [3.0, 0, 0, 0, 0, 0]}, {"right": 0.2})  # joint1 to 3.0 rad: limit is 2.618
    recorder.step({"left": safe})
    recording = recorder.finish()
    occupancy = {o.joint: o for o in recording.occupancy}
    assert occupancy["left.joint1"].actions_over_limit == 1 and occupancy["left.joint1"].first_over_limit_step == 2
    assert occupancy["right.gripper"].actions_over_limit == 1 and occupancy["right.gripper"].first_over_limit_step == 2
    assert all(o.actions_over_limit == 0 for name, o in occupancy.items() if name not in ("left.joint1", "right.gripper"))
    assert recording.over_limit == [(2, "left.joint1"), (2, "right.gripper")]
    # what was applied (and recorded) is the clamped, executable action
    assert recording.joint_targets[2, 0] == pytest.approx(world.robot.limits("left").upper[0])
    assert recording.gripper_targets[2, 1] == pytest.approx(0.076)
    assert recording.gripper_targets[0, 0] == pytest.approx(0.03) and recording.gripper_targets[3, 0] == pytest.approx(0.03)
    for o in recording.occupancy:
        assert 0.0 <= o.max_position_fraction <= 1.0 + 1e-6
    assert occupancy["left.joint2"].max_position_fraction == pytest.approx(abs(1.0 - 1.57) / 1.57, abs=0.05)
    assert occupancy["left.joint2"].max_effort_fraction > 0.0


def test_every_state_channel_is_recorded():
    g = weigh_grounding()
    plate_top = g.object("scale").body_height.value + g.object("scale").plate.z.value
    world = build_world(g, Variation(seed=0, object_poses={"apple": Pose(position=(0.15, 0.1, plate_top + 0.002))}))
    recorder = Recorder(world, control_hz=10)
    pose = np.array([0.3, 1.2, -1.1, 0.2, 0.6, 0.4])
    for _ in range(12):
        recorder.step({"left": pose}, {"left": 0.05})
    recording = recorder.finish()
    assert recording.scale_ids == ["scale"] and recording.scale_readings[-1, 0] == pytest.approx(150.0, rel=0.05)
    assert recording.time_s[-1] == pytest.approx(1.1)
    left = slice(0, 6)
    q = recording.joint_positions[-1, left]
    assert q == pytest.approx(pose, abs=0.01)
    tcp = world.robot.fk("left", q)
    assert recording.end_effectors[-1, 0, :3] == pytest.approx(tcp.p, abs=1e-4)
    assert recording.gripper_openings[-1, 0] == pytest.approx(0.05, abs=1e-3)
    # at rest, the motor effort is what holds the arm against gravity (joint 2 carries the most)
    static = recording.joint_efforts[-1, left]
    assert abs(static[1]) > 0.5 and np.abs(recording.joint_velocities[-1, left]).max() < 0.05
    apple = recording.object_poses("apple")[-1]
    assert apple[:3] == pytest.approx(world.object_pose("apple").p, abs=1e-6)
    assert recording.objects.shape == (12, 2, 13)

    cabinet_world = build_world(drawer_grounding())
    cabinet_world.object("cabinet").articulation.set_qpos(np.array([0.1], dtype=np.float32))
    drawer = Recorder(cabinet_world, control_hz=50)
    drawer.step()
    assert drawer.finish().joint_value_names == ["cabinet.drawer"]
    assert drawer.finish().joint_values[0, 0] == pytest.approx(0.1, abs=1e-3)


def test_recorder_refuses_bad_actions_and_rates():
    world = build_world(drawer_grounding())
    with pytest.raises(ValueError, match="whole number"):
        Recorder(world, control_hz=30)  # 1/30 s is not a whole number of 2 ms steps
    recorder = Recorder(world, control_hz=25)
    with pytest.raises(ValueError, match="no arm"):
        recorder.step({"middle": np.zeros(6)})
    with pytest.raises(ValueError, match="6 finite"):
        recorder.step({"left": np.zeros(5)})
    with pytest.raises(ValueError, match="6 finite"):
        recorder.step({"left": np.array([0, np.nan, 0, 0, 0, 0])})
    with pytest.raises(ValueError, match="14 numbers"):
        recorder.step_vector(np.zeros(3))
    recorder.step_vector(np.concatenate([np.full(12, 0.1), [0.02, 0.03]]))
    recording = recorder.finish()
    assert recording.steps == 1 and recording.gripper_targets[0] == pytest.approx([0.02, 0.03])


# --- storage ------------------------------------------------------------------------------------------


def test_parquet_round_trip_reads_back_what_was_recorded(tmp_path, picks):
    recording, _ = picks[0]
    g = grounding_with(block("block", (-0.15, 0.3)))
    record = make_record(recording, episode_id="ep_000001", robot="piper-dual", variation=sample_variation(g, SamplerSpec(), 1),
                         verdict=VERDICT, expert_sha256="cd" * 32)
    paths = write_episode(tmp_path / "ep_000001", record, recording)
    assert {p.relative_to(tmp_path / "ep_000001").as_posix() for p in paths.values()} == {
        "data/actions.parquet", "data/states.parquet", "contacts.parquet", "data/joint_occupancy.parquet", "episode.json"}
    stored = read_episode(tmp_path / "ep_000001")
    assert stored.record == record
    back = stored.recording
    for name in ("joint_targets", "gripper_targets", "joint_positions", "joint_velocities", "joint_efforts",
                 "gripper_openings", "end_effectors", "objects", "scale_readings", "joint_values"):
        assert np.array_equal(getattr(back, name), getattr(recording, name)), name
    assert back.contacts == recording.contacts and back.occupancy == recording.occupancy
    assert (back.joints, back.grippers, back.object_ids) == (recording.joints, recording.grippers, recording.object_ids)
    assert (back.timestep, back.substeps) == (recording.timestep, recording.substeps)
    # every row is a valid row model, one per control step
    actions, states = stored.action_rows(), stored.state_rows()
    assert [r.step for r in states] == list(range(60)) and states[10].time_s == pytest.approx(0.5)
    assert actions[-1].as_vector() == pytest.approx(list(recording.joint_targets[-1]) + list(recording.gripper_targets[-1]))
    assert states[-1].objects[0].id == "block" and states[-1].objects[0].pose.position[2] > 0.055
    # columns are documented in the files themselves
    schema = pq.read_schema(paths["states"])
    assert schema.metadata[b"datafarm.row_model"] == b"ArmStateRow"
    assert all(f.metadata and f.metadata[b"description"] for f in schema)
    assert set(recording_tables(recording)) == {"actions", "states", "contacts", "joint_occupancy"}
    # a record that does not describe the recording is refused
    with pytest.raises(ValueError, match="steps"):
        write_episode(tmp_path / "bad", record.model_copy(update={"steps": 61}), recording)
