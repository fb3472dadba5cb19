"""Real rollouts: a controller in the bwrap sandbox drives a PiPER in a SAPIEN physics-only scene
through the harness API (K2's `datafarm_expert`), and the harness reports how it ended."""

from __future__ import annotations

import os

import numpy as np
import pytest

from datafarm.harness.server import (
    RolloutEnd,
    RolloutLimits,
    harness_api_dir,
    run_expert,
    stage_program,
)
from datafarm.harness.session import RobotSession, SimSession
from datafarm.sim.robots import RobotSpec, load_robot
from datafarm.sim.sapien_scene import create_physics_scene
from tests.harness.test_rollout_fixtures import (
    BOX_START,
    TEST_LIMITS,
    TEST_SANDBOX,
    Scene,
    run,
    write_controller,
)

PICK_AND_LIFT = """
from datafarm_expert import Harness
print("controller started")          # goes to the log, not into the protocol
robot = Harness()
assert robot.arms == ("arm",) and robot.info["objects"] == ["box"]
box = robot.object_position("box")
width = robot.grasp(box)
robot.lift(0.06)
robot.wait(0.5)
z = robot.observe()["objects"]["box"]["position"][2]
robot.done(success=width > 0.03, note=f"width={width:.4f} z={z:.4f}")
"""


def test_scripted_expert_picks_up_and_lifts_the_box(tmp_path):
    scene = Scene()
    outcome = run(write_controller(tmp_path / "expert", PICK_AND_LIFT), scene)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    assert outcome.reason == "controller claimed done (success=true)"
    assert outcome.claimed_success is True and outcome.refusals == 0
    # the harness's own view: the box rose about 6 cm with the gripper and stayed between the fingers
    x, y, z = scene.box_position()
    assert z > BOX_START[2] + 0.045
    tcp = scene.session.observe()["arms"]["arm"]["tcp"]["position"]
    assert abs(x - tcp[0]) < 0.01 and abs(y - tcp[1]) < 0.01
    assert scene.robot.gripper_width("arm") == pytest.approx(0.04, abs=0.003)  # holding the 40 mm box
    # every control step went through the hook, with the commanded targets, and time adds up
    assert len(scene.steps) == scene.session.steps > 100
    assert scene.steps[-1].time == pytest.approx(outcome.sim_time)
    assert [s.index for s in scene.steps] == list(range(1, len(scene.steps) + 1))
    assert scene.steps[-1].commands["arm"].gripper == 0.0
    assert outcome.sandbox is not None and outcome.sandbox.ok
    assert "controller started" in outcome.sandbox.stderr_tail
    assert outcome.commands >= 6 and outcome.messages > outcome.commands


def test_commanded_targets_are_smooth_and_within_velocity_limits(tmp_path):
    scene = Scene()
    outcome = run(write_controller(tmp_path / "expert", PICK_AND_LIFT), scene)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    targets = np.array([s.commands["arm"].q for s in scene.steps])
    speed = np.abs(np.diff(targets, axis=0)) / scene.session.control_dt
    assert speed.max() <= scene.robot.limits("arm").velocity.max()
    lim = scene.robot.limits("arm")
    assert np.all(targets >= lim.lower - 1e-6) and np.all(targets <= lim.upper + 1e-6)


def test_controller_folder_is_read_only_and_the_api_module_is_ks(tmp_path):
    folder = write_controller(tmp_path / "expert", """
        import errno
        from datafarm_expert import Harness
        robot = Harness()
        results = []
        for path in ("/in/controller.py", "/in/new_file.txt"):
            try:
                open(path, "a").write("x")
                results.append("wrote " + path)
            except OSError as error:
                results.append(errno.errorcode[error.errno])
        open("/out/notes.txt", "w").write("scratch")  # its own /out is writable
        robot.done(success=True, note=",".join(results) + "|" + str(hasattr(Harness, "strike")))
        """)
    (folder / "datafarm_expert.py").write_text("raise SystemExit('a controller-supplied API must not be used')\n")
    os.symlink("/etc/hostname", folder / "link_to_host_file")
    run_dir = tmp_path / "run"
    before = sorted((p.name, p.read_bytes() if not p.is_symlink() else b"") for p in folder.iterdir())
    outcome = run(folder, run_dir=run_dir)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    written, created = outcome.done_note.split("|")[0].split(",")
    assert written in ("EACCES", "EROFS") and created == "EROFS"  # read-only files in a read-only mount
    assert outcome.done_note.endswith("|True")
    assert outcome.skipped_files == ["link_to_host_file"]
    assert (run_dir / "out" / "notes.txt").read_text() == "scratch"
    staged = run_dir / "program" / "datafarm_expert.py"
    assert staged.read_bytes() == (harness_api_dir() / "datafarm_expert.py").read_bytes()
    after = sorted((p.name, p.read_bytes() if not p.is_symlink() else b"") for p in folder.iterdir())
    assert after == before  # the author's folder is untouched


def test_stage_program_refuses_a_missing_folder(tmp_path):
    from datafarm.errors import InputError

    with pytest.raises(InputError):
        stage_program(tmp_path / "nope", tmp_path / "staging")
    with pytest.raises(InputError):
        run_expert(write_controller(tmp_path / "c", "pass\n"), Scene().session, "bwrap", entry="../x.py")


def test_episode_sim_time_limit_ends_the_rollout(tmp_path):
    scene = Scene()
    folder = write_controller(tmp_path / "expert", """
        from datafarm_expert import Harness
        robot = Harness()
        robot.wait(0.6)
        robot.wait(0.6)   # would pass the 1 s episode limit
        robot.done()
        """)
    outcome = run(folder, scene, limits=TEST_LIMITS.model_copy(update={"max_sim_seconds": 1.0}))
    assert outcome.ended_by is RolloutEnd.SIM_TIME_LIMIT
    assert outcome.reason == ("episode sim time limit (1 s) reached: at 0.600 s a command asked for "
                              "0.600 s more")
    assert scene.session.time == pytest.approx(0.6)


def test_dual_arm_moves_both_arms_in_one_command(tmp_path):
    scene = create_physics_scene()
    robot = load_robot(scene, RobotSpec(model="piper-dual"))
    steps = []
    session = RobotSession(scene, robot, hooks=[steps.append])
    assert isinstance(session, SimSession)
    folder = write_controller(tmp_path / "expert", """
        from datafarm_expert import Harness
        robot = Harness()
        assert robot.arms == ("left", "right")
        goal = [0.3, 0.8, -0.6, 0.0, 0.4, 0.0]
        robot.move_joints(targets={"left": goal, "right": [-v for v in goal[:1]] + goal[1:]}, duration=1.0)
        robot.wait(0.5)
        try:
            robot.move_joints(goal)          # two arms: which one?
        except Exception as error:
            note = type(error).__name__
        robot.done(note=note)
        """)
    outcome = run_expert(folder, session, "bwrap", TEST_LIMITS, TEST_SANDBOX)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    assert outcome.done_note == "HarnessError" and outcome.refused[0].code == "bad_args"
    assert np.abs(robot.qpos("left") - [0.3, 0.8, -0.6, 0.0, 0.4, 0.0]).max() < 0.02
    assert np.abs(robot.qpos("right") - [-0.3, 0.8, -0.6, 0.0, 0.4, 0.0]).max() < 0.02
    assert len(steps) == 75  # 1.0 s + 0.5 s at 50 Hz, both arms moving in the same steps


def test_skills_strike_and_push_run_through_the_harness(tmp_path):
    scene = Scene()
    folder = write_controller(tmp_path / "expert", """
        from datafarm_expert import Harness
        robot = Harness()
        hits = robot.strike([0.25, 0.1, 0.05], times=3, height=0.04)
        robot.push_handle([0.25, 0.0, 0.03], direction=[1, 0, 0], distance=0.05, height=0.05)
        robot.done(note=",".join(f"{t:.2f}" for t in hits))
        """)
    outcome = run(folder, scene)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    hits = [float(t) for t in outcome.done_note.split(",")]
    assert len(hits) == 3 and hits == sorted(hits) and min(np.diff(hits)) >= 0.6
    assert scene.box_position()[0] > BOX_START[0] + 0.02  # pushed along +x by the closed gripper


def test_rollout_limits_are_documented_and_validated():
    with pytest.raises(ValueError):
        RolloutLimits(max_message_bytes=10)
    for name, field in RolloutLimits.model_fields.items():
        assert field.description, name


def test_unsafe_no_sandbox_runs_the_same_controller_and_says_it_was_not_isolated(tmp_path):
    from datafarm.harness import sandbox

    scene = Scene()
    folder = write_controller(tmp_path / "expert", PICK_AND_LIFT)
    outcome = run_expert(folder, scene.session, sandbox.get("none", unsafe=True), TEST_LIMITS, TEST_SANDBOX)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    assert outcome.sandbox.provider == "none" and outcome.sandbox.isolated is False
    assert scene.box_position()[2] > BOX_START[2] + 0.045


def test_a_failing_harness_is_reported_as_such_not_blamed_on_the_controller(tmp_path):
    scene = Scene()

    def broken_recorder(step):
        if step.index == 3:
            raise RuntimeError("recorder disk full")

    scene.session.add_hook(broken_recorder)
    folder = write_controller(tmp_path / "expert", """
        from datafarm_expert import Harness
        robot = Harness()
        robot.wait(1.0)
        robot.done()
        """)
    outcome = run(folder, scene)
    assert outcome.ended_by is RolloutEnd.HARNESS_ERROR
    assert outcome.reason == "harness error: RuntimeError: recorder disk full"
    assert not outcome.claimed_done and outcome.sandbox.reason == outcome.reason


def test_control_period_must_be_whole_physics_steps():
    scene = Scene()
    with pytest.raises(ValueError, match="not a whole number of physics steps"):
        RobotSession(scene.scene, scene.robot, control_dt=0.003)
    assert RobotSession(scene.scene, scene.robot, control_dt=0.01).physics_steps_per_control == 5


def test_skills_place_insert_and_pull_handle_move_the_box_only_through_the_gripper(tmp_path):
    scene = Scene()
    folder = write_controller(tmp_path / "expert", """
        from datafarm_expert import Harness
        robot = Harness()
        robot.grasp(robot.object_position("box"))
        robot.place([0.25, 0.12, 0.031])
        after_place = robot.object_position("box").tolist()
        robot.grasp(robot.object_position("box"))
        robot.insert([0.3, -0.1, 0.045], depth=0.014, height=0.04)   # into an (imaginary) bin
        after_insert = robot.object_position("box").tolist()
        robot.pull_handle(robot.object_position("box"), direction=[-1, 0, 0], distance=0.05)
        after_pull = robot.object_position("box").tolist()
        robot.done(note=repr([after_place, after_insert, after_pull]))
        """)
    outcome = run(folder, scene)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    after_place, after_insert, after_pull = (np.array(p) for p in eval(outcome.done_note))
    assert np.allclose(after_place, [0.25, 0.12, 0.03], atol=0.01)
    assert np.allclose(after_insert, [0.3, -0.1, 0.03], atol=0.01)
    assert np.allclose(after_pull, [0.25, -0.1, 0.03], atol=0.01)
    assert outcome.refusals == 0
