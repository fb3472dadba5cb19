"""Shared pieces of the rollout, protocol and hostile-expert tests (no tests here): a real SAPIEN
physics-only scene with a PiPER and a box on the ground, controller folders on disk, a raw
stdlib-only client for controllers that must break the protocol on purpose, and the check that the
harness still serves a good rollout afterwards."""

from __future__ import annotations

import textwrap
from pathlib import Path

import sapien

from datafarm.harness.sandbox import SandboxLimits
from datafarm.harness.server import (
    RolloutEnd,
    RolloutLimits,
    RolloutOutcome,
    run_expert,
)
from datafarm.harness.session import ControlStep, RobotSession
from datafarm.sim.robots import load_robot
from datafarm.sim.sapien_scene import add_ground, create_physics_scene

BOX_HALF = (0.02, 0.02, 0.03)
BOX_START = (0.3, 0.0, 0.03)

TEST_SANDBOX = SandboxLimits(cpu_seconds=10, wall_seconds=20, processes=32, memory_bytes=2 << 30)
"""Sandbox limits for test controllers: roomy, but nothing can run away."""
SHORT_WALL = SandboxLimits(cpu_seconds=5, wall_seconds=2, processes=32, memory_bytes=2 << 30)
"""A 2 s wall-clock deadline, for controllers that hang."""
TEST_LIMITS = RolloutLimits(reply_timeout_seconds=1.0, exit_grace_seconds=1.0, max_sim_seconds=30.0)
"""Rollout limits with short timeouts so misbehaving controllers end fast."""

RAW_CLIENT = '''
"""A raw protocol client (stdlib only) for controllers that must break the protocol on purpose."""
import json, os

def send_bytes(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]

def send(message):
    payload = json.dumps(message).encode()   # json.dumps writes NaN / Infinity literals
    send_bytes(len(payload).to_bytes(4, "big") + payload)

def _exactly(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise EOFError("harness closed the pipe")
        data += chunk
    return data

def recv():
    return json.loads(_exactly(int.from_bytes(_exactly(4), "big")))

def call(seq, op, **args):
    send({"seq": seq, "op": op, "args": args})
    return recv()
'''


class Scene:
    """A fresh physics-only scene: PiPER at the origin, a 4 x 4 x 6 cm box at x = 0.3 m, and a
    session over them that counts control steps."""

    def __init__(self) -> None:
        self.scene = create_physics_scene()
        add_ground(self.scene)
        self.robot = load_robot(self.scene, "piper")
        builder = self.scene.create_actor_builder()
        builder.add_box_collision(half_size=list(BOX_HALF), material=sapien.physx.PhysxMaterial(0.8, 0.8, 0),
                                  density=500)
        self.box = builder.build(name="box")
        self.box.pose = sapien.Pose(list(BOX_START))
        self.steps: list[ControlStep] = []
        self.session = RobotSession(self.scene, self.robot, {"box": self.box}, hooks=[self.steps.append])

    def box_position(self) -> tuple[float, float, float]:
        """The box's position according to the harness's own session."""
        return tuple(self.session.observe()["objects"]["box"]["position"])  # type: ignore[return-value]


def write_controller(folder: Path, source: str, *, raw: bool = False) -> Path:
    """Write `controller.py` (and `raw.py`, the raw client, when `raw`) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "controller.py").write_text(textwrap.dedent(source))
    if raw:
        (folder / "raw.py").write_text(RAW_CLIENT)
    return folder


def run(folder: Path, scene: Scene | None = None, *, limits: RolloutLimits = TEST_LIMITS,
        sandbox_limits: SandboxLimits = TEST_SANDBOX, **kwargs) -> RolloutOutcome:
    """Run the controller in `folder` under bwrap against `scene` (a fresh one by default)."""
    scene = scene or Scene()
    return run_expert(folder, scene.session, "bwrap", limits, sandbox_limits, **kwargs)


GOOD_CONTROLLER = """
from datafarm_expert import Harness
robot = Harness()
robot.wait(0.1)
robot.done(success=True, note="fine")
"""


def assert_harness_still_serves(tmp_path: Path) -> None:
    """After whatever happened before, a well-behaved controller still gets a normal rollout."""
    folder = write_controller(tmp_path / "good-after", GOOD_CONTROLLER)
    scene = Scene()
    outcome = run(folder, scene)
    assert outcome.ended_by is RolloutEnd.DONE, outcome.reason
    assert outcome.claimed_success is True and outcome.done_note == "fine"
    assert outcome.sandbox is not None and outcome.sandbox.ok
    assert len(scene.steps) == 5
