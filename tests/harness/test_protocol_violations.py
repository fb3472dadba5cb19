"""Every protocol violation, sent by a real controller in the bwrap sandbox: the rollout ends
with the violation's code and a precise reason, the controller is killed, the simulation did not
move for the bad message, and the harness then serves a good rollout."""

from __future__ import annotations

import pytest

from datafarm.harness.sandbox import EndCause
from datafarm.harness.server import RolloutEnd, RolloutLimits
from tests.harness.test_rollout_fixtures import (
    TEST_LIMITS,
    Scene,
    assert_harness_still_serves,
    run,
    write_controller,
)

HELLO = 'call(1, "hello", protocol=1)\n'

CASES = {
    # name: (controller body after `from raw import *`, violation code, exact reason)
    "oversized": (
        HELLO + 'send_bytes((1 << 20).to_bytes(4, "big") + b"x" * 100)\nrecv()\n',
        "oversized",
        ("protocol violation (oversized): declared message length 1048576 bytes exceeds the 65536-byte "
        "limit (header bytes 00100000)"),
    ),
    "zero_length": (
        HELLO + 'send_bytes(b"\\x00\\x00\\x00\\x00")\nrecv()\n',
        "malformed",
        "protocol violation (malformed): empty message (length 0)",
    ),
    "not_json": (
        HELLO + 'send_bytes((9).to_bytes(4, "big") + b"{not json")\nrecv()\n',
        "malformed",
        ("protocol violation (malformed): message is not valid JSON: Expecting property name enclosed in "
        "double quotes: line 1 column 2 (char 1)"),
    ),
    "not_utf8": (
        HELLO + 'send_bytes((4).to_bytes(4, "big") + b"\\xff\\xfe\\xfd\\xfc")\nrecv()\n',
        "malformed",
        "protocol violation (malformed): message is not UTF-8 (invalid start byte at byte 0)",
    ),
    "no_seq": (
        HELLO + 'send({"op": "observe"})\nrecv()\n',
        "malformed",
        "protocol violation (malformed): `seq` must be an integer, got null",
    ),
    "skipped_seq": (
        HELLO + 'call(3, "observe")\n',
        "out_of_order",
        "protocol violation (out_of_order): expected seq 2, got 3",
    ),
    "repeated_seq": (
        HELLO + 'call(2, "observe")\ncall(2, "observe")\n',
        "out_of_order",
        "protocol violation (out_of_order): expected seq 3, got 2",
    ),
    "no_hello": (
        'call(1, "observe")\n',
        "handshake",
        "protocol violation (handshake): the first request must be hello, got 'observe'",
    ),
    "wrong_version": (
        'call(1, "hello", protocol=2)\n',
        "handshake",
        "protocol violation (handshake): hello asks for protocol '2'; the harness speaks 1",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_violation_ends_the_rollout_with_its_reason(tmp_path, name):
    body, code, reason = CASES[name]
    scene = Scene()
    folder = write_controller(tmp_path / "bad", "from raw import *\n" + body + "import time\ntime.sleep(30)\n",
                              raw=True)
    outcome = run(folder, scene)
    assert outcome.ended_by is RolloutEnd.PROTOCOL_VIOLATION
    assert outcome.violation == code
    assert outcome.reason == reason
    # the harness killed the controller for exactly that reason; it did not wait for the deadline
    assert outcome.sandbox.ended_by is EndCause.KILLED and outcome.sandbox.reason == reason
    assert outcome.wall_seconds < 5
    assert scene.session.time == 0.0  # nothing was simulated for a bad message
    assert_harness_still_serves(tmp_path)


def test_the_controller_gets_a_fatal_error_reply_it_can_read(tmp_path):
    folder = write_controller(tmp_path / "bad", """
        import sys
        from raw import *
        call(1, "hello", protocol=1)
        reply = call(5, "observe")
        sys.stderr.write("REPLY " + json.dumps(reply) + "\\n")
        sys.stderr.flush()
        import time; time.sleep(30)
        """, raw=True)
    outcome = run(folder)
    assert outcome.violation == "out_of_order"
    assert ('REPLY {"seq": 5, "ok": false, "error": {"code": "protocol_violation", "message": "protocol violation '
            '(out_of_order): expected seq 2, got 5"}, "fatal": true}') in outcome.sandbox.stderr_tail


def test_flood_of_requests_without_letting_time_pass(tmp_path):
    scene = Scene()
    folder = write_controller(tmp_path / "flood", """
        from raw import *
        call(1, "hello", protocol=1)
        seq = 2
        while True:                      # poll observe forever, never advancing the simulation
            call(seq, "observe")
            seq += 1
        """, raw=True)
    limits = TEST_LIMITS.model_copy(update={"message_burst": 200, "messages_per_sim_second": 100.0})
    outcome = run(folder, scene, limits=limits)
    assert outcome.ended_by is RolloutEnd.PROTOCOL_VIOLATION and outcome.violation == "flood"
    assert outcome.reason == ("protocol violation (flood): 201 requests by sim time 0.00 s exceed the budget "
                              "of 200 + 100 per sim second")
    assert outcome.messages == 201
    assert_harness_still_serves(tmp_path)


def test_the_budget_grows_with_simulated_time(tmp_path):
    folder = write_controller(tmp_path / "busy", """
        from datafarm_expert import Harness
        robot = Harness()
        for _ in range(100):             # 2 requests per 20 ms: 100 per sim second, within budget
            robot.observe()
            robot.wait(0.02)
        robot.done()
        """)
    limits = TEST_LIMITS.model_copy(update={"message_burst": 20, "messages_per_sim_second": 110.0})
    outcome = run(folder, limits=limits)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    assert outcome.messages == 202


def test_controller_that_never_reads_its_replies(tmp_path):
    folder = write_controller(tmp_path / "deaf", """
        import time
        from raw import *
        for seq in range(1, 400):        # requests pile up; replies fill the pipe; none is read
            send({"seq": seq, "op": "hello" if seq == 1 else "observe", "args": {"protocol": 1} if seq == 1 else {}})
        time.sleep(30)
        """, raw=True)
    outcome = run(folder, limits=TEST_LIMITS.model_copy(update={"reply_timeout_seconds": 0.5}))
    assert outcome.ended_by is RolloutEnd.PROTOCOL_VIOLATION and outcome.violation == "not_reading"
    assert outcome.reason == ("protocol violation (not_reading): the controller left the harness's replies "
                              "unread for 0.5 s (pipe full)")
    assert 30 < outcome.messages < 399
    assert_harness_still_serves(tmp_path)


def test_limits_are_part_of_the_hello_reply(tmp_path):
    folder = write_controller(tmp_path / "hello", """
        from datafarm_expert import Harness
        robot = Harness()
        info = robot.info
        robot.done(note=f"{info['protocol']} {info['control_dt']} {info['limits']['max_message_bytes']} "
                        f"{info['arms']['arm']['gripper_max_width']} {info['arms']['arm']['joints'][0]}")
        """)
    outcome = run(folder, limits=RolloutLimits())
    assert outcome.done_note == "1 0.02 65536 0.076 joint1"
