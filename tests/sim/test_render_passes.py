"""Render passes by replay: cameras from G-style intrinsics/extrinsics render RGB, depth and
segmentation that agree with an independent pinhole model (OpenCV formula, analytic ray casting of
the known geometry), frames follow replayed states without physics, and without a render device
the render path says how to get one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import sapien

from datafarm.artifacts.common import Intrinsics, Pose, Provenance
from datafarm.artifacts.grounding import GroundedCamera
from datafarm.sim.render_passes import (
    FrameState,
    RenderPasses,
    ReplayError,
    scale_intrinsics,
)
from datafarm.sim.robots import RobotSpec, load_robot, piper
from datafarm.sim.sapien_scene import create_scene, has_render_device

REPO = Path(__file__).resolve().parents[2]
NO_DEVICE = "no Vulkan render device (install Mesa >= 25 lavapipe: sudo bash scripts/setup-system.sh)"

WIDTH, HEIGHT = 160, 120
TABLE_HALF = (0.3, 0.3, 0.02)
RED_HALF = (0.025, 0.025, 0.025)
GREEN_HALF = (0.02, 0.035, 0.03)
SPHERE_RADIUS = 0.03
START = {  # body name -> world position of its centre (identity orientation unless turned below)
    "red_box": (0.0, 0.09, 0.025),
    "green_box": (0.07, -0.09, 0.03),
    "blue_ball": (-0.06, -0.02, 0.03),
}
COLOURS = {"red_box": (0.9, 0.05, 0.05), "green_box": (0.05, 0.8, 0.05), "blue_ball": (0.05, 0.05, 0.9)}
ROBOT_BASE_XY = (-0.3, 0.2)


# --- an independent pinhole model and ray caster ---------------------------------------------------


def look_at(eye: tuple[float, float, float], target: tuple[float, float, float]) -> Pose:
    """world_from_camera in the OpenCV convention (z towards target, x right, y down)."""
    eye_a, z = np.array(eye, float), np.array(target, float) - np.array(eye, float)
    z /= np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return Pose(position=tuple(eye_a), quaternion=tuple(sapien.Pose(_matrix(np.stack([x, y, z], 1), eye_a)).q))


def _matrix(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3], out[:3, 3] = rotation, translation
    return out


def pose_matrix(pose: Pose | sapien.Pose) -> np.ndarray:
    """4x4 matrix of a pose, computed here from the quaternion (not by SAPIEN)."""
    p = pose if isinstance(pose, Pose) else Pose(position=tuple(pose.p), quaternion=tuple(pose.q))
    w, x, y, z = p.quaternion
    rotation = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                         [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                         [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return _matrix(rotation, np.array(p.position))


def project(cam: GroundedCamera, point) -> tuple[np.ndarray, float]:
    """OpenCV pinhole projection of a world point: pixel (u, v) and camera-frame z."""
    k = cam.intrinsics
    x, y, z = (np.linalg.inv(pose_matrix(cam.world_from_camera)) @ np.append(np.asarray(point, float), 1.0))[:3]
    return np.array([k.fx * x / z + k.cx, k.fy * y / z + k.cy]), float(z)


def rays(cam: GroundedCamera) -> tuple[np.ndarray, np.ndarray]:
    """Camera centre and per-pixel world ray directions scaled so that t along a ray is camera z."""
    k = cam.intrinsics
    u, v = np.meshgrid(np.arange(k.width, dtype=float), np.arange(k.height, dtype=float))
    d_cam = np.stack([(u - k.cx) / k.fx, (v - k.cy) / k.fy, np.ones_like(u)], -1)
    m = pose_matrix(cam.world_from_camera)
    return m[:3, 3], d_cam @ m[:3, :3].T


def box_depth(cam: GroundedCamera, world_from_box: np.ndarray, half) -> np.ndarray:
    """Camera z of the first hit of each pixel's ray with a box (inf on a miss): the slab method."""
    origin, d = rays(cam)
    rot, centre = world_from_box[:3, :3], world_from_box[:3, 3]
    o_b, d_b = rot.T @ (origin - centre), d @ rot
    h = np.asarray(half, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t1, t2 = (-h - o_b) / d_b, (h - o_b) / d_b
    t_near, t_far = np.minimum(t1, t2).max(-1), np.maximum(t1, t2).min(-1)
    return np.where((t_far >= t_near) & (t_near > 0), t_near, np.inf)


def sphere_depth(cam: GroundedCamera, centre, radius: float) -> np.ndarray:
    """Camera z of the first hit of each pixel's ray with a sphere (inf on a miss)."""
    origin, d = rays(cam)
    oc = origin - np.asarray(centre, float)
    a, b, c = (d * d).sum(-1), 2 * (d @ oc), oc @ oc - radius**2
    disc = b * b - 4 * a * c
    t = (-b - np.sqrt(np.maximum(disc, 0))) / (2 * a)
    return np.where((disc > 0) & (t > 0), t, np.inf)


def expected_depths(cam: GroundedCamera, positions: dict[str, tuple[float, float, float]]) -> dict[str, np.ndarray]:
    """Per body, the analytic depth image of that body alone."""
    def box_at(name: str) -> np.ndarray:
        return _matrix(np.eye(3), np.array(positions[name]))
    return {
        "table": box_depth(cam, _matrix(np.eye(3), np.array([0.0, 0.0, -TABLE_HALF[2]])), TABLE_HALF),
        "red_box": box_depth(cam, box_at("red_box"), RED_HALF),
        "green_box": box_depth(cam, box_at("green_box"), GREEN_HALF),
        "blue_ball": sphere_depth(cam, positions["blue_ball"], SPHERE_RADIUS),
    }


def centroid(mask: np.ndarray) -> np.ndarray:
    vs, us = np.nonzero(mask)
    return np.array([us.mean(), vs.mean()])


# --- the scene -------------------------------------------------------------------------------------

CAMERAS = [
    # different focal lengths per axis and an off-centre principal point, so a swapped or
    # half-pixel-shifted convention shows
    GroundedCamera(name="front", video="front.mp4",
                   intrinsics=Intrinsics(width=WIDTH, height=HEIGHT, fx=150.0, fy=140.0, cx=83.0, cy=57.5),
                   intrinsics_tag=Provenance.measured, world_from_camera=look_at((0.55, 0.05, 0.35), (0.0, 0.0, 0.0)),
                   extrinsics_tag=Provenance.fitted),
    GroundedCamera(name="side", video="side.mp4",
                   intrinsics=Intrinsics(width=WIDTH, height=HEIGHT, fx=130.0, fy=135.0, cx=78.2, cy=62.0),
                   intrinsics_tag=Provenance.measured, world_from_camera=look_at((0.1, -0.5, 0.45), (0.0, 0.02, 0.0)),
                   extrinsics_tag=Provenance.fitted),
]


def _add_box(scene: sapien.Scene, name: str, half, colour, static: bool = False) -> sapien.Entity:
    builder = scene.create_actor_builder()
    builder.add_box_collision(half_size=list(half))
    builder.add_box_visual(half_size=list(half), material=sapien.render.RenderMaterial(base_color=[*colour, 1.0]))
    return builder.build_static(name=name) if static else builder.build(name=name)


@pytest.fixture(scope="module")
def world():
    """One render-enabled scene (table, two boxes, a ball, a PiPER behind them) with two cameras:
    one renderer per process, so every render test shares it."""
    if not has_render_device():
        pytest.skip(NO_DEVICE)
    scene = create_scene(render=True)
    table = _add_box(scene, "table", TABLE_HALF, (0.55, 0.5, 0.45), static=True)
    table.set_pose(sapien.Pose([0.0, 0.0, -TABLE_HALF[2]]))
    _add_box(scene, "red_box", RED_HALF, COLOURS["red_box"])
    _add_box(scene, "green_box", GREEN_HALF, COLOURS["green_box"])
    builder = scene.create_actor_builder()
    builder.add_sphere_collision(radius=SPHERE_RADIUS)
    builder.add_sphere_visual(radius=SPHERE_RADIUS,
                              material=sapien.render.RenderMaterial(base_color=[*COLOURS["blue_ball"], 1.0]))
    builder.build(name="blue_ball")
    robot = load_robot(scene, RobotSpec(model="piper", base_xy=ROBOT_BASE_XY), visuals=True)
    passes = RenderPasses(scene, CAMERAS)
    t0 = time.perf_counter()
    passes.render({"bodies": {name: sapien.Pose(list(p)) for name, p in START.items()}})
    return {"scene": scene, "robot": robot, "passes": passes, "first_frame_s": time.perf_counter() - t0}


def _ids(passes: RenderPasses) -> dict[str, int]:
    return {name: i for i, name in passes.segmentation_labels.items()}


def _start_state() -> dict:
    return {"bodies": {name: Pose(position=p) for name, p in START.items()}}


# --- tests -----------------------------------------------------------------------------------------


@pytest.mark.render
@pytest.mark.parametrize("cam", CAMERAS, ids=lambda c: c.name)
def test_segmentation_centroids_match_the_pinhole_projection_of_each_pose(world, cam):
    passes = world["passes"]
    frame = passes.render(_start_state())[cam.name]
    assert frame.rgb.shape == (HEIGHT, WIDTH, 3) and frame.rgb.dtype == np.uint8
    assert frame.depth.shape == (HEIGHT, WIDTH) and frame.depth.dtype == np.float32
    assert frame.segmentation.shape == (HEIGHT, WIDTH)
    ids = _ids(passes)
    for name, centre in START.items():
        mask = frame.segmentation == ids[name]
        assert mask.sum() > 40, f"{name} barely visible in {cam.name}"
        (u, v), _ = project(cam, centre)
        assert np.linalg.norm(centroid(mask) - [u, v]) < 2.0, (name, centroid(mask), (u, v))


@pytest.mark.render
@pytest.mark.parametrize("cam", CAMERAS, ids=lambda c: c.name)
def test_depth_and_labels_agree_with_ray_casting_the_known_geometry(world, cam):
    passes = world["passes"]
    frame = passes.render(_start_state())[cam.name]
    depths = expected_depths(cam, START)
    ids = _ids(passes)
    # at each object's projected centre: the visible surface's camera z, within 1 cm
    for name, centre in START.items():
        (u, v), _ = project(cam, centre)
        px = round(v), round(u)
        assert frame.segmentation[px] == ids[name]
        assert abs(frame.depth[px] - depths[name][px]) < 0.01, (name, frame.depth[px], depths[name][px])
    # the whole image: the nearest body per pixel, and its depth
    stack = np.stack(list(depths.values()))
    nearest = np.array([ids[n] for n in depths], dtype=np.uint32)[stack.argmin(0)]
    hit = np.isfinite(stack.min(0))
    expected_seg = np.where(hit, nearest, 0)
    robot = np.isin(frame.segmentation, list(passes.articulation_labels))
    agree = (frame.segmentation == expected_seg) | robot  # the arm is not in the analytic model
    assert agree.mean() > 0.97, agree.mean()
    inside = hit & ~robot & (frame.segmentation == expected_seg)
    assert np.median(np.abs(frame.depth[inside] - stack.min(0)[inside])) < 0.002
    assert np.all(frame.depth[frame.segmentation == 0] == 0.0)  # empty pixels read 0


@pytest.mark.render
def test_the_pixel_convention_is_opencv_to_a_tenth_of_a_pixel(world):
    """A sphere's silhouette centroid against the analytic one: a half-pixel principal point
    error (SAPIEN counts from the pixel corner) would show here although it passes 2 px checks."""
    passes = world["passes"]
    for cam in CAMERAS:
        frame = passes.render(_start_state())[cam.name]
        rendered = centroid(frame.segmentation == _ids(passes)["blue_ball"])
        analytic = centroid(np.isfinite(sphere_depth(cam, START["blue_ball"], SPHERE_RADIUS)))
        assert np.abs(rendered - analytic).max() < 0.15, (cam.name, rendered, analytic)


@pytest.mark.render
def test_rgb_shows_each_objects_colour_at_its_centroid(world):
    passes = world["passes"]
    frames = passes.render(_start_state())
    ids = _ids(passes)
    for cam in CAMERAS:
        for name, colour in COLOURS.items():
            v, u = np.round(centroid(frames[cam.name].segmentation == ids[name])[::-1]).astype(int)
            pixel = frames[cam.name].rgb[v, u].astype(int)
            channel = int(np.argmax(colour))
            others = [pixel[c] for c in range(3) if c != channel]
            assert pixel[channel] > 60 and pixel[channel] > 2 * max(others), (cam.name, name, pixel)


@pytest.mark.render
def test_replaying_a_moved_object_moves_its_centroid_without_stepping_physics(world):
    passes = world["passes"]
    ids = _ids(passes)
    moved = dict(START, blue_ball=(0.12, 0.08, 0.2))  # in mid-air: a physics step would drop it
    turned = Pose(position=START["red_box"], quaternion=(np.cos(0.3), 0.0, 0.0, np.sin(0.3)))
    states = [_start_state(), FrameState(bodies={"blue_ball": Pose(position=moved["blue_ball"]), "red_box": turned})]
    frames = list(passes.replay(states))
    for cam in CAMERAS:
        before, after = (centroid(f[cam.name].segmentation == ids["blue_ball"]) for f in frames)
        (u0, v0), _ = project(cam, START["blue_ball"])
        (u1, v1), _ = project(cam, moved["blue_ball"])
        assert np.linalg.norm(before - [u0, v0]) < 2.0
        assert np.linalg.norm(after - [u1, v1]) < 2.0
        assert np.linalg.norm(after - before) > 10.0
        # the turned box's silhouette is the analytic one of the turned pose
        expected = np.isfinite(box_depth(cam, pose_matrix(turned), RED_HALF))
        got = frames[1][cam.name].segmentation == ids["red_box"]
        assert (expected & got).sum() / (expected | got).sum() > 0.85
    ball = next(e for e in world["scene"].entities if e.name == "blue_ball")
    assert np.allclose(ball.pose.p, moved["blue_ball"], atol=1e-6)  # not fallen: physics never ran


@pytest.mark.render
def test_replaying_joint_positions_poses_the_arm_as_forward_kinematics_says(world):
    """Articulations are replayed from qpos (full vector or by joint name); the gripper's link6 box
    lands where pinocchio's FK of the replayed joints puts it."""
    passes, robot = world["passes"], world["robot"]
    art = robot.articulation("arm")
    link6_id = next(i for i, n in passes.segmentation_labels.items() if n == "link6")
    shape = art.find_link_by_name("link6").entity.find_component_by_type(sapien.render.RenderBodyComponent).render_shapes[0]
    link6_from_tcp = _matrix(np.eye(3), np.array(piper.TCP_IN_LINK6))
    q_a = np.array([0.0, 1.5, -1.0, 0.0, 0.5, 0.0])  # gripper above the table, in both views
    q_b = np.array([-0.4, 1.8, -1.2, 0.0, 0.6, 0.3])
    full_a = np.concatenate([q_a, np.zeros(art.dof - 6)])
    states = [{**_start_state(), "articulations": {"piper": full_a}},
              {"articulations": {"piper": {f"joint{i + 1}": float(v) for i, v in enumerate(q_b)}}}]
    rest = art.get_qpos().copy()
    centroids = []
    try:
        for q, frames in zip((q_a, q_b), passes.replay(states), strict=True):
            assert np.allclose(art.get_qpos()[:6], q, atol=1e-5)
            world_from_box = (pose_matrix(robot.fk("arm", q)) @ np.linalg.inv(link6_from_tcp)
                              @ pose_matrix(shape.local_pose))
            for cam in CAMERAS:
                expected = np.isfinite(box_depth(cam, world_from_box, shape.half_size))
                got = frames[cam.name].segmentation == link6_id
                assert got.sum() > 15, f"link6 hardly visible in {cam.name}"
                # fingers may hide part of the box; what shows lies inside the analytic silhouette
                assert (got & expected).sum() / got.sum() > 0.97
                assert (got & expected).sum() / expected.sum() > 0.8
                centroids.append(centroid(got))
    finally:
        passes.apply({"articulations": {"piper": rest}})  # later tests see the arm where it was
    assert np.linalg.norm(centroids[0] - centroids[2]) > 10.0  # front camera: the arm moved


@pytest.mark.render
def test_lower_resolution_renders_with_scaled_intrinsics(world):
    small = RenderPasses(world["scene"], [c.model_copy(update={"name": f"{c.name}_half"}) for c in CAMERAS], scale=0.5)
    frames = small.render(_start_state())
    ids = _ids(small)
    for cam in CAMERAS:
        intr = small.intrinsics(f"{cam.name}_half")
        assert (intr.width, intr.height) == (WIDTH // 2, HEIGHT // 2)
        assert intr == scale_intrinsics(cam.intrinsics, WIDTH // 2, HEIGHT // 2)
        half = cam.model_copy(update={"intrinsics": intr})
        frame = frames[f"{cam.name}_half"]
        assert frame.rgb.shape == (HEIGHT // 2, WIDTH // 2, 3)
        rendered = centroid(frame.segmentation == ids["blue_ball"])
        analytic = centroid(np.isfinite(sphere_depth(half, START["blue_ball"], SPHERE_RADIUS)))
        assert np.abs(rendered - analytic).max() < 0.25


@pytest.mark.render
def test_moving_camera_and_state_errors(world):
    passes = world["passes"]
    front = CAMERAS[0]
    assert np.allclose(pose_matrix(passes.world_from_camera("front")), pose_matrix(front.world_from_camera), atol=1e-5)
    closer = front.model_copy(update={"world_from_camera": look_at((0.35, 0.0, 0.25), (0.0, 0.0, 0.0))})
    frame = passes.render({"cameras": {"front": closer.world_from_camera}})["front"]
    (u, v), _ = project(closer, START["green_box"])
    assert np.linalg.norm(centroid(frame.segmentation == _ids(passes)["green_box"]) - [u, v]) < 2.0
    passes.apply({"cameras": {"front": front.world_from_camera}})
    with pytest.raises(ReplayError, match="purple_box"):
        passes.apply({"bodies": {"purple_box": Pose()}})
    with pytest.raises(ReplayError, match="joint positions"):
        passes.apply({"articulations": {"piper": [0.0, 0.1]}})
    with pytest.raises(ReplayError, match="no movable joint"):
        passes.apply({"articulations": {"piper": {"elbow": 0.1}}})
    with pytest.raises(ReplayError, match="objects"):
        passes.apply({"objects": {}})


@pytest.mark.render
def test_frames_per_second_per_camera_is_measured(world):
    """Not a speed gate (machines differ): records the replay rate, arm included, for the report."""
    passes = world["passes"]
    states = [{"bodies": {"blue_ball": Pose(position=(-0.06, -0.02 + 0.002 * i, 0.03))}} for i in range(20)]
    t0 = time.perf_counter()
    for _ in passes.replay(states, cameras=["front"]):
        pass
    fps = len(states) / (time.perf_counter() - t0)
    print(f"\nrender passes at {WIDTH}x{HEIGHT}: {fps:.0f} frames/s per camera "
          f"(first frame of the process {world['first_frame_s']:.1f} s)")
    assert fps > 1.0


NO_DEVICE_SCRIPT = """
import json, sapien
from datafarm.artifacts.common import Intrinsics, Pose, Provenance
from datafarm.artifacts.grounding import GroundedCamera
from datafarm.sim.sapien_scene import RenderDeviceError, create_physics_scene, has_render_device
from datafarm.sim.render_passes import RenderPasses
out = {"has_device": has_render_device()}
try:
    sapien.render.RenderSystem()
    out["sapien"] = "created"
except RuntimeError as exc:
    out["sapien"] = str(exc)
scene = create_physics_scene()
builder = scene.create_actor_builder()
builder.add_box_collision(half_size=[0.02, 0.02, 0.02])
box = builder.build(name="box")
box.set_pose(sapien.Pose([0, 0, 1.0]))
for _ in range(100):
    scene.step()
out["fell"] = 1.0 - float(box.pose.p[2])
cam = GroundedCamera(name="front", video=None, intrinsics=Intrinsics(width=64, height=48, fx=60, fy=60, cx=32, cy=24),
                     intrinsics_tag=Provenance.measured, world_from_camera=Pose(), extrinsics_tag=Provenance.fitted)
try:
    RenderPasses(scene, [cam])
    out["passes"] = "created"
except RenderDeviceError as exc:
    out["passes"] = str(exc)
print(json.dumps(out))
"""


def test_without_a_render_device_render_passes_say_how_to_get_one_and_physics_still_runs():
    """The Vulkan loader pointed at a driver file that does not exist hides lavapipe (checked: SAPIEN
    itself then fails to create a render system); physics runs, RenderPasses names the fix."""
    env = dict(os.environ, VK_ICD_FILENAMES="/nonexistent/icd.json", VK_DRIVER_FILES="/nonexistent/icd.json")
    proc = subprocess.run([sys.executable, "-c", NO_DEVICE_SCRIPT], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["has_device"] is False
    assert "failed to find a rendering device" in out["sapien"]
    assert out["fell"] > 0.05
    assert "no render device" in out["passes"] and "Mesa >= 25" in out["passes"]
    assert "scripts/setup-system.sh" in out["passes"]


@pytest.mark.render
def test_a_physics_only_scene_is_refused_with_the_fix(world):
    from datafarm.sim.sapien_scene import RenderDeviceError, create_physics_scene
    with pytest.raises(RenderDeviceError, match="physics-only"):
        RenderPasses(create_physics_scene(), CAMERAS)
