"""SAPIEN scenes: physics-only by default (CPU PhysX, no render system), rendering only on request.

A physics-only scene needs neither a GPU nor Vulkan, so simulation runs anywhere. SAPIEN's default
`sapien.Scene()` (and any visual shape or URDF material) needs a render device and raises
`RuntimeError: failed to find a rendering device` without one; here that path is opt-in, and asking
for it without a device raises `RenderDeviceError`, which says how to get one.
"""

from __future__ import annotations

import functools
import re

import sapien

from datafarm.errors import DatafarmError

DEFAULT_TIMESTEP = 1.0 / 500.0
"""Physics step, seconds: 2 ms keeps finger contacts stable with the PD gains of `RobotSpec`."""

RENDER_SETUP_HINT = (
    "rendering needs a Vulkan device: on a machine without a GPU, install Mesa >= 25 lavapipe with "
    "`sudo bash scripts/setup-system.sh` (Debian 12: from bookworm-backports; its own Mesa 22 is rejected "
    "by SAPIEN). Physics-only scenes (the default) need no device."
)


class RenderDeviceError(DatafarmError):
    """Rendering was requested but SAPIEN finds no usable Vulkan device."""

    exit_code = 1


@functools.cache
def render_device_summary() -> str | None:
    """SAPIEN's description of the render devices it can use, or None when it finds none.

    Probing opens a Vulkan instance once per process (about 0.5 s); the answer is cached."""
    try:
        summary = sapien.render.get_device_summary()
    except RuntimeError:  # "failed to find a rendering device"
        return None
    return summary if re.search(r"Supported:\s*1", summary) else None


def has_render_device() -> bool:
    """True when SAPIEN can render in this process (a GPU, or lavapipe from Mesa >= 25); never raises."""
    return render_device_summary() is not None


def require_render_device() -> None:
    """Raise `RenderDeviceError` (with setup instructions) unless a render device exists."""
    if not has_render_device():
        raise RenderDeviceError(f"no render device found; {RENDER_SETUP_HINT}")


def configure_physx(gravity: tuple[float, float, float] = (0.0, 0.0, -9.81),
                    enhanced_determinism: bool = False) -> None:
    """Set PhysX's process-wide scene configuration, read when a PhysX system is created."""
    sapien.physx.set_scene_config(gravity=list(gravity), enable_enhanced_determinism=enhanced_determinism)


def create_scene(timestep: float = DEFAULT_TIMESTEP, render: bool = False,
                 gravity: tuple[float, float, float] = (0.0, 0.0, -9.81),
                 enhanced_determinism: bool = False) -> sapien.Scene:
    """A SAPIEN scene on the CPU PhysX system, with a render system only when `render` is True.

    `render=True` raises `RenderDeviceError` (with setup instructions) when no device exists.
    """
    if timestep <= 0:
        raise ValueError(f"timestep must be positive, got {timestep}")
    systems: list[object] = []
    if render:
        require_render_device()
    configure_physx(gravity, enhanced_determinism)
    systems.append(sapien.physx.PhysxCpuSystem())
    if render:
        systems.append(sapien.render.RenderSystem())
    scene = sapien.Scene(systems)
    scene.set_timestep(timestep)
    return scene


def create_physics_scene(timestep: float = DEFAULT_TIMESTEP,
                         gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)) -> sapien.Scene:
    """A physics-only scene (`PhysxCpuSystem`, no render system): works with no GPU and no Vulkan."""
    return create_scene(timestep=timestep, render=False, gravity=gravity)


def is_physics_only(scene: sapien.Scene) -> bool:
    """True when `scene` has no render system (so it must never receive visual shapes)."""
    try:
        return scene.render_system is None
    except (RuntimeError, AttributeError):
        return True


def add_ground(scene: sapien.Scene, altitude: float = 0.0, static_friction: float = 0.8,
               dynamic_friction: float = 0.8, restitution: float = 0.0) -> sapien.Entity:
    """A static infinite ground plane at z = `altitude` (SAPIEN's own `add_ground` adds a visual
    plane, which aborts the process in a physics-only scene)."""
    material = sapien.physx.PhysxMaterial(static_friction, dynamic_friction, restitution)
    return scene.add_ground(altitude, render=not is_physics_only(scene), material=material)
