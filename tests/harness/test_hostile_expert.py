"""Hostile expert controllers at the protocol level, each in the real bwrap sandbox against a real
SAPIEN scene: every one is contained, the rollout ends (or the command is refused) with a precise
recorded reason, the simulation only ever moved through the robot, and the harness goes on to
serve a good rollout. (Resource attacks on the sandbox itself live in test_hostile_sandbox.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import datafarm
from datafarm.harness.sandbox import EndCause
from datafarm.harness.server import RolloutEnd
from datafarm.hashing import sha256_tree
from tests.harness.test_rollout_fixtures import (
    BOX_START,
    SHORT_WALL,
    TEST_LIMITS,
    Scene,
    assert_harness_still_serves,
    run,
    write_controller,
)


def test_flood_of_observe_requests(tmp_path):
    scene = Scene()
    folder = write_controller(tmp_path / "c", """
        from datafarm_expert import Harness
        robot = Harness()
        while True:
            robot.observe()
        """)
    outcome = run(folder, scene, limits=TEST_LIMITS.model_copy(update={"message_burst": 300}))
    assert outcome.ended_by is RolloutEnd.PROTOCOL_VIOLATION and outcome.violation == "flood"
    assert outcome.reason.startswith("protocol violation (flood): 301 requests by sim time 0.00 s")
    # the API raised RolloutEnded on the fatal reply and the controller exited; or it was killed
    assert (outcome.sandbox.ended_by is EndCause.KILLED and outcome.sandbox.reason == outcome.reason) or \
        "RolloutEnded: protocol_violation: protocol violation (flood)" in outcome.sandbox.reason
    assert_harness_still_serves(tmp_path)


def test_flood_of_raw_bytes(tmp_path):
    folder = write_controller(tmp_path / "c", """
        import os
        import datafarm_expert                 # takes fd 1; write to the protocol pipe directly
        fd = datafarm_expert._PIPES[1].fileno()
        while True:
            os.write(fd, b"A" * 65536)
        """)
    outcome = run(folder)
    assert outcome.violation == "oversized"
    assert outcome.reason == ("protocol violation (oversized): declared message length 1094795585 bytes exceeds "
                              "the 65536-byte limit (header bytes 41414141, text 'AAAA': did the controller print "
                              "to stdout?)")
    assert_harness_still_serves(tmp_path)


@pytest.mark.parametrize(
    ("garbage", "violation", "reason"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "oversized",
         ("protocol violation (oversized): declared message length 2303741511 bytes exceeds the 65536-byte limit "
         "(header bytes 89504e47)")),
        (b"\x00\x00\x00\x08" + bytes([0x80, 0x81, 0x82, 0x83, 0xC0, 0xC1, 0xF5, 0xFF]), "malformed",
         "protocol violation (malformed): message is not UTF-8 (invalid start byte at byte 0)"),
        (b"\x00\x00\x00\x05" + b"\x00" * 5, "malformed",
         "protocol violation (malformed): message is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    ],
    ids=["png-header", "binary-body", "zero-bytes"],
)
def test_garbage_after_a_good_start(tmp_path, garbage, violation, reason):
    scene = Scene()
    folder = write_controller(tmp_path / "c", f"""
        from raw import *
        call(1, "hello", protocol=1)
        call(2, "wait", seconds=0.1)
        send_bytes({garbage!r})
        import time; time.sleep(30)
        """, raw=True)
    outcome = run(folder, scene)
    assert outcome.ended_by is RolloutEnd.PROTOCOL_VIOLATION
    assert (outcome.violation, outcome.reason) == (violation, reason)
    assert outcome.messages == 2 and scene.session.steps == 5
    assert_harness_still_serves(tmp_path)


def test_nan_and_out_of_limit_targets_are_refused_and_the_rollout_goes_on(tmp_path):
    scene = Scene()
    folder = write_controller(tmp_path / "c", """
        import json
        from datafarm_expert import Harness, HarnessError
        robot = Harness()
        nan, inf = float("nan"), float("inf")
        attempts = [
            lambda: robot.move_joints([0, nan, 0, 0, 0, 0]),
            lambda: robot.move_joints([0, 0.5, -0.5, 0, 0, 0], duration=inf),
            lambda: robot.move_ee([0.3, 0, nan], [0, 1, 0, 0]),
            lambda: robot.request("move_joints", q=[0, 0.5, -0.5, 0, 0, 1e999]),
            lambda: robot.move_joints([3.5, 0.5, -0.5, 0, 0, 0]),           # joint1 limit 2.618
            lambda: robot.move_joints([0, -0.5, 0, 0, 0, 0]),              # joint2 lower limit 0
            lambda: robot.gripper(0.2),                                    # max 0.076
            lambda: robot.gripper(-0.01),
            lambda: robot.wait(1e6),
            lambda: robot.wait(-1),
            lambda: robot.move_joints([0, 1.5, -1.5, 0, 0, 0], duration=0.05),  # 1.5 rad in 50 ms
            lambda: robot.move_ee([2.0, 0, 0.1], [0, 1, 0, 0]),            # out of reach
            lambda: robot.move_joints([0, 0.5, -0.5, 0, 0]),               # 5 joints for 6
            lambda: robot.move_joints([0, 0.5, -0.5, 0, 0, 0], arm="third"),
            lambda: robot.request("move_joints", q=[0, "0.5", -0.5, 0, 0, 0]),
        ]
        codes = []
        for attempt in attempts:
            try:
                attempt()
                codes.append("accepted")
            except HarnessError as error:
                codes.append(error.code)
        refused_time = robot.observe()["time"]
        robot.move_joints([0, 0.5, -0.5, 0, 0, 0])     # a good command still works
        robot.wait(0.5)
        robot.done(success=False, note=json.dumps({"codes": codes, "time": refused_time}))
        """)
    outcome = run(folder, scene)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    import json

    note = json.loads(outcome.done_note)
    assert note["codes"] == [
        "non_finite", "non_finite", "non_finite", "non_finite",
        "out_of_limits", "out_of_limits", "out_of_limits", "out_of_limits", "out_of_limits", "out_of_limits",
        "too_fast", "ik_failed", "bad_args", "unknown_arm", "bad_args",
    ]
    assert note["time"] == 0.0  # no refused command simulated anything
    assert outcome.refusals == 15 and [r.code for r in outcome.refused] == note["codes"]
    messages = [r.message for r in outcome.refused]
    assert messages[0] == "move_joints: args.q[1] is not a finite number"
    assert messages[3] == "move_joints: args.q[5] is not a finite number"
    assert messages[4] == "move_joints: arm.joint1 target 3.5000 outside its limits [-2.6180, 2.6180]"
    assert messages[6] == "gripper width 0.2000 m outside [0, 0.0760] m"
    assert messages[8] == "`seconds` 1e+06 s outside 0 < seconds <= 30 s"
    assert messages[10].startswith("arm.joint2 would move at ")
    assert messages[11].startswith("move_ee: no joint configuration of arm within its limits reaches position [2.0, 0.0, 0.1]")
    assert messages[13] == "no arm called 'third'; this robot has ['arm']"
    assert np.abs(scene.robot.qpos("arm") - [0, 0.5, -0.5, 0, 0, 0]).max() < 0.02
    assert_harness_still_serves(tmp_path)


def test_set_pose_does_not_exist(tmp_path):
    scene = Scene()
    folder = write_controller(tmp_path / "c", """
        from datafarm_expert import Harness, HarnessError
        robot = Harness()
        codes = []
        for op, args in [
            ("set_pose", {"object": "box", "pose": {"position": [0.3, 0.0, 0.5], "quaternion": [1, 0, 0, 0]}}),
            ("set_state", {"qpos": [0] * 8}),
            ("teleport", {"object": "box", "position": [0, 0, 1]}),
            ("__class__", {}),
        ]:
            try:
                robot.request(op, **args)
            except HarnessError as error:
                codes.append(error.code)
        robot.wait(0.5)
        robot.done(success=True, note=",".join(codes))
        """)
    outcome = run(folder, scene)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    assert outcome.done_note == "unknown_op,unknown_op,unknown_op,unknown_op"
    assert outcome.refused[0].op == "set_pose"
    assert outcome.refused[0].message == ("unknown op 'set_pose'; the harness serves hello, observe, move_joints, "
                                          "move_ee, gripper, wait, done")
    assert np.allclose(scene.box_position(), BOX_START, atol=1e-3)  # the box never moved
    assert_harness_still_serves(tmp_path)


def test_raise_mid_episode(tmp_path):
    scene = Scene()
    folder = write_controller(tmp_path / "c", """
        from datafarm_expert import Harness
        robot = Harness()
        robot.move_joints([0, 0.5, -0.5, 0, 0, 0])
        raise RuntimeError("boom mid-episode")
        """)
    outcome = run(folder, scene)
    assert outcome.ended_by is RolloutEnd.CONTROLLER_EXITED
    assert outcome.reason == ("controller ended without claiming done: exited with code 1: "
                              "RuntimeError: boom mid-episode")
    assert outcome.commands == 1 and scene.session.steps > 0 and not outcome.claimed_done
    assert_harness_still_serves(tmp_path)


@pytest.mark.parametrize(
    ("ending", "reason"),
    [
        ("os._exit(3)", "controller ended without claiming done: exited with code 3"),
        ("os._exit(0)", "controller ended without claiming done: exited normally (code 0)"),
        ("os.kill(os.getpid(), signal.SIGSEGV)",
         "controller ended without claiming done: killed by signal SIGSEGV (Segmentation fault)"),
        ("os.write(robot._out.fileno(), (200).to_bytes(4, 'big') + b'{\"seq\": 3'); os._exit(0)",
         ("controller ended without claiming done: exited normally (code 0) (it left a message unfinished "
         "after 13 bytes)")),
    ],
    ids=["exit-3", "exit-0", "segfault", "mid-message"],
)
def test_exit_mid_episode(tmp_path, ending, reason):
    folder = write_controller(tmp_path / "c", f"""
        import os, signal
        import datafarm_expert
        robot = datafarm_expert.Harness()
        robot.wait(0.2)
        {ending}
        """)
    outcome = run(folder)
    assert outcome.ended_by is RolloutEnd.CONTROLLER_EXITED
    assert outcome.reason == reason
    assert outcome.sim_time == pytest.approx(0.2)
    assert_harness_still_serves(tmp_path)


def test_sleep_forever_hits_the_wall_deadline(tmp_path):
    folder = write_controller(tmp_path / "c", """
        import time
        from datafarm_expert import Harness
        robot = Harness()
        robot.wait(0.1)
        time.sleep(10**6)
        """)
    outcome = run(folder, sandbox_limits=SHORT_WALL)
    assert outcome.ended_by is RolloutEnd.SANDBOX_LIMIT
    assert outcome.reason == "wall-clock deadline (2 s) exceeded"
    assert outcome.sandbox.ended_by is EndCause.WALL_DEADLINE
    assert 2.0 <= outcome.wall_seconds < 4.0
    assert_harness_still_serves(tmp_path)


def test_closing_the_pipe_but_staying_alive_is_ended_by_the_deadline(tmp_path):
    folder = write_controller(tmp_path / "c", """
        import os, time
        from datafarm_expert import Harness
        robot = Harness()
        os.close(robot._out.fileno())
        os.close(robot._in.fileno())
        time.sleep(10**6)
        """)
    outcome = run(folder, sandbox_limits=SHORT_WALL)
    assert outcome.ended_by is RolloutEnd.SANDBOX_LIMIT
    assert outcome.reason == "wall-clock deadline (2 s) exceeded"
    assert outcome.messages == 1
    assert_harness_still_serves(tmp_path)


def test_lingering_after_done_is_killed_but_the_claim_stands(tmp_path):
    folder = write_controller(tmp_path / "c", """
        import time
        from datafarm_expert import Harness
        robot = Harness()
        robot.done(success=True, note="claimed")
        while True:
            time.sleep(1)
        """)
    outcome = run(folder)
    assert outcome.ended_by is RolloutEnd.DONE and outcome.claimed_success is True
    assert outcome.sandbox.ended_by is EndCause.KILLED
    assert outcome.sandbox.reason == "controller still running 1 s after done"


def test_harness_files_are_not_visible_by_path(tmp_path, monkeypatch):
    task = tmp_path / "task"
    (task / "judge").mkdir(parents=True)
    (task / "judge" / "spec.yaml").write_text("stages: [grasp, lift]\n")
    (task / "ledger.jsonl").write_text('{"seq": 0}\n')
    (task / "admission_secret").write_text("seed-secret-0xC0FFEE\n")
    monkeypatch.setenv("DATAFARM_ADMISSION_SECRET", "seed-secret-0xC0FFEE")
    run_dir = tmp_path / "run"
    paths = [
        task / "judge" / "spec.yaml",
        task / "ledger.jsonl",
        task / "admission_secret",
        Path(datafarm.__file__),
        run_dir / "program" / "controller.py",  # the staging folder, by its host path
        Path(datafarm.__file__).parents[1] / "pyproject.toml",
        Path("/etc/shadow"),
        Path("/root/.bashrc"),
    ]
    folder = write_controller(tmp_path / "c", f"""
        import json, os
        from datafarm_expert import Harness
        robot = Harness()
        seen = {{}}
        for path in {[str(p) for p in paths]!r}:
            try:
                with open(path) as f:
                    seen[path] = "READ " + f.read(40)
            except OSError as error:
                seen[path] = type(error).__name__
        secret = [k for k, v in os.environ.items() if "secret" in v.lower() or "SECRET" in k]
        robot.done(success=True, note=json.dumps({{"seen": seen, "env": secret}}))
        """)
    before = sha256_tree(task)
    outcome = run(folder, run_dir=run_dir)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    import json

    note = json.loads(outcome.done_note)
    assert note["seen"] == {str(p): "FileNotFoundError" for p in paths}
    assert note["env"] == []
    assert sha256_tree(task) == before
    assert os.environ["DATAFARM_ADMISSION_SECRET"]  # the harness kept it; the controller never saw it
    assert_harness_still_serves(tmp_path)
