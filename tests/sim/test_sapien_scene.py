"""Physics-only scenes by default; rendering only on request, with a clear error when no device exists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sapien

from datafarm.sim.robots import load_robot
from datafarm.sim.sapien_scene import (
    RenderDeviceError,
    create_physics_scene,
    create_scene,
    has_render_device,
    is_physics_only,
)

REPO = Path(__file__).resolve().parents[2]

NO_DEVICE_SCRIPT = """
import json, numpy as np
from datafarm.sim.sapien_scene import RenderDeviceError, create_physics_scene, create_scene, has_render_device
from datafarm.sim.robots import load_robot
out = {"has_device": has_render_device()}
try:
    create_scene(render=True)
    out["render"] = "created"
except RenderDeviceError as exc:
    out["render"] = str(exc)
scene = create_physics_scene()
robot = load_robot(scene, "piper-dual")
robot.set_joint_targets("left", np.array([0.3, 1.0, -1.0, 0.0, 0.5, 0.0]))
robot.step(500)
out["moved"] = float(abs(robot.qpos("left")[1] - 1.0))
print(json.dumps(out))
"""


def test_default_scene_is_physics_only():
    scene = create_physics_scene(timestep=0.004)
    assert is_physics_only(scene)
    assert scene.timestep == pytest.approx(0.004)
    with pytest.raises(ValueError):
        create_physics_scene(timestep=0)


def test_has_render_device_answers_without_raising():
    assert isinstance(has_render_device(), bool)


def test_without_a_render_device_physics_runs_and_rendering_says_how_to_get_one():
    """A process whose Vulkan loader finds no driver: simulation still works; asking for rendering
    raises our error naming the setup script (not SAPIEN's bare RuntimeError)."""
    env = dict(os.environ, VK_ICD_FILENAMES="/nonexistent/icd.json", VK_DRIVER_FILES="/nonexistent/icd.json")
    proc = subprocess.run([sys.executable, "-c", NO_DEVICE_SCRIPT], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["has_device"] is False
    assert "scripts/setup-system.sh" in out["render"] and "Mesa >= 25" in out["render"]
    assert out["moved"] < 0.02


def test_visuals_on_a_physics_only_scene_are_refused():
    with pytest.raises(RenderDeviceError, match="physics-only"):
        load_robot(create_physics_scene(), "piper", visuals=True)


@pytest.mark.render
def test_render_path_loads_the_robot_with_visuals():
    if not has_render_device():
        pytest.skip("no Vulkan render device (install Mesa >= 25 lavapipe: bash scripts/setup-system.sh)")
    scene = create_scene(render=True)
    assert not is_physics_only(scene)
    robot = load_robot(scene, "piper-dual", visuals=True)
    robot.step(10)
    bodies = [e for e in scene.entities if e.find_component_by_type(sapien.render.RenderBodyComponent)]
    assert len(bodies) == 18  # 9 links per arm, each with its visual shapes
