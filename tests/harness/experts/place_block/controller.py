"""Scripted expert (test fixture): pick the block up with the left arm and set it down on the pad.

It reads the scene (observe) instead of assuming where things are, so it works on any seed.
It places by hand rather than with `place`: it waits for the arm to settle on the goal before
opening, so the block is set down instead of dropped. `params.json` next to it (optional) tunes it; `target_offset` ([dx, dy] or [dx, dy, dz], metres) moves the place point off the pad,
which is how the tests make a deliberately wrong expert.
"""

import json
import math
import os

from datafarm_expert import Harness, down_with_yaw

PARAMS = {
    "arm": "left",
    "block_height": 0.04,      # G: the block is a 4 cm cube
    "pad_height": 0.01,        # G: the pad is 1 cm thick
    "release_clearance": 0.002,
    "hold_before_release": 0.4,  # let the arm catch up with its targets before letting go
    "target_offset": [0.0, 0.0],
    "settle_seconds": 1.5,
}
_here = os.path.dirname(os.path.abspath(__file__))
if os.path.exists(os.path.join(_here, "params.json")):
    with open(os.path.join(_here, "params.json")) as f:
        PARAMS.update(json.load(f))


def yaw_of(quaternion):
    """Rotation about world z of an object standing upright (w, x, y, z)."""
    w, x, y, z = quaternion
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def square_yaw(yaw):
    """A cube looks the same every 90 degrees: the equivalent yaw nearest zero."""
    return (yaw + math.pi / 4) % (math.pi / 2) - math.pi / 4


robot = Harness()
arm = PARAMS["arm"]
block_position, block_quaternion = robot.object_pose("block")
pad = robot.object_position("pad")
half = PARAMS["block_height"] / 2

grip = down_with_yaw(square_yaw(yaw_of(block_quaternion)))
width = robot.grasp([block_position[0], block_position[1], block_position[2] + half], quaternion=grip, arm=arm)
print(f"grasped, gap {width:.4f} m")
if width < 0.01:
    robot.done(success=False, note="missed the block")
else:
    robot.lift(0.06, arm=arm)
    dx, dy, dz = (list(PARAMS["target_offset"]) + [0.0, 0.0, 0.0])[:3]
    goal = [pad[0] + dx, pad[1] + dy, pad[2] + PARAMS["pad_height"] + half + PARAMS["release_clearance"] + dz]
    robot.approach(goal, height=0.06, quaternion=grip, arm=arm)
    robot.move_ee(goal, grip, arm=arm, linear=True)
    robot.wait(PARAMS["hold_before_release"])
    robot.open_gripper(arm)
    robot.lift(0.06, arm=arm)
    robot.wait(PARAMS["settle_seconds"])
    robot.done(success=True, note=f"placed at {goal}")
