"""Render passes by replay: RGB, depth and segmentation per camera from recorded states, no physics.

A `RenderPasses` mounts one SAPIEN camera per grounded camera (G's intrinsics and OpenCV-convention
extrinsics) on a scene that has a render system, and renders frames from a sequence of recorded
states: per frame it sets rigid-body poses (by entity name) and articulation joint positions (by
articulation name), syncs the renderer with `scene.update_render()` and never steps physics. So the
passes can run later than the rollout, at their own frame rate, in another process: build the same
scene there (with visuals) and feed it the recorded states.

Outputs per camera and frame (`CameraFrame`):
- `rgb`: uint8 H x W x 3.
- `depth`: float32 H x W, metres along the camera's optical axis (OpenCV camera z, not the distance
  along the ray); **0 where nothing was hit** (within the far plane).
- `segmentation`: uint32 H x W, the SAPIEN per-scene id of the entity seen in each pixel, 0 where
  nothing was hit; `RenderPasses.segmentation_labels` maps ids to entity names.

Conventions checked by tests (tests/sim/test_render_passes.py), not assumed:
- A SAPIEN camera looks along its +x axis with +z up and +y left; an OpenCV camera (x right, y down,
  z forward) is turned into it by `OPENCV_FROM_SAPIEN_CAMERA`.
- SAPIEN's principal point counts from the pixel corner (pixel centres at +0.5), OpenCV's from the
  pixel centre; `mount_camera` adds the half pixel, so pixel (u, v) of a render is the OpenCV ray
  through (u, v).
- Lens distortion (`Intrinsics.distortion`) is not rendered: the passes are ideal pinhole images.

Rendering needs a Vulkan device (lavapipe from Mesa >= 25 on the CPU); without one, constructing
`RenderPasses` raises `RenderDeviceError` saying how to get one. Nothing here runs on import, so the
physics-only path never touches Vulkan. SAPIEN keeps one renderer per process, shared by all its
scenes, and the first frame of a process costs seconds of shader compilation: render many episodes
in one process.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sapien

from datafarm.artifacts.common import Intrinsics
from datafarm.artifacts.common import Pose as ArtifactPose
from datafarm.artifacts.grounding import GroundedCamera
from datafarm.errors import DatafarmError
from datafarm.sim.sapien_scene import (
    RENDER_SETUP_HINT,
    RenderDeviceError,
    is_physics_only,
    require_render_device,
)

DEFAULT_NEAR = 0.01
"""Near clipping plane, metres: closer than any camera sits to the table or the arm."""
DEFAULT_FAR = 10.0
"""Far clipping plane, metres: beyond a tabletop scene, so only empty pixels read depth 0."""

OPENCV_FROM_SAPIEN_CAMERA = np.array([[0.0, -1.0, 0.0],
                                      [0.0, 0.0, -1.0],
                                      [1.0, 0.0, 0.0]])
"""Rotation opencv_from_sapien: its columns are SAPIEN's camera axes (x forward, y left, z up)
written in the OpenCV camera frame (x right, y down, z forward); world_from_sapien_camera =
world_from_opencv_camera @ this matrix."""

PoseLike = ArtifactPose | sapien.Pose | Sequence[float] | np.ndarray
"""A pose: an artifact Pose, a sapien.Pose, 7 numbers (x, y, z, qw, qx, qy, qz) or a 4x4 matrix."""


class ReplayError(DatafarmError):
    """A recorded state does not fit the scene it is replayed in (unknown body, wrong joint count)."""

    exit_code = 4


def as_sapien_pose(pose: PoseLike) -> sapien.Pose:
    """Any `PoseLike` as a sapien.Pose (quaternions wxyz)."""
    if isinstance(pose, sapien.Pose):
        return pose
    if isinstance(pose, ArtifactPose):
        return sapien.Pose(np.asarray(pose.position, dtype=np.float64), np.asarray(pose.quaternion, dtype=np.float64))
    array = np.asarray(pose, dtype=np.float64)
    if array.shape == (4, 4):
        return sapien.Pose(array)
    if array.shape == (7,):
        return sapien.Pose(array[:3], array[3:])
    raise ValueError(f"a pose is a Pose, a sapien.Pose, 7 numbers (xyz, wxyz) or a 4x4 matrix; got shape {array.shape}")


def sapien_camera_pose(world_from_camera: PoseLike) -> sapien.Pose:
    """The SAPIEN camera entity pose for an OpenCV-convention camera pose (world_from_camera)."""
    matrix = as_sapien_pose(world_from_camera).to_transformation_matrix()
    out = np.eye(4)
    out[:3, :3] = matrix[:3, :3] @ OPENCV_FROM_SAPIEN_CAMERA
    out[:3, 3] = matrix[:3, 3]
    return sapien.Pose(out)


def scale_intrinsics(intrinsics: Intrinsics, width: int, height: int) -> Intrinsics:
    """The same camera rendered at `width` x `height`: focal lengths scale, and the principal point
    scales about the image corner (OpenCV pixel centres sit at integers, hence the half pixels)."""
    sx, sy = width / intrinsics.width, height / intrinsics.height
    return Intrinsics(width=width, height=height, fx=intrinsics.fx * sx, fy=intrinsics.fy * sy,
                      cx=(intrinsics.cx + 0.5) * sx - 0.5, cy=(intrinsics.cy + 0.5) * sy - 0.5,
                      distortion=list(intrinsics.distortion))


def mount_camera(scene: sapien.Scene, name: str, intrinsics: Intrinsics, world_from_camera: PoseLike,
                 near: float = DEFAULT_NEAR, far: float = DEFAULT_FAR) -> sapien.render.RenderCameraComponent:
    """Add a pinhole camera to `scene` (which must have a render system) with OpenCV intrinsics and
    extrinsics (world_from_camera, x right, y down, z forward). Returns its camera component."""
    if not 0 < near < far:
        raise ValueError(f"need 0 < near < far, got near={near}, far={far}")
    camera = sapien.render.RenderCameraComponent(intrinsics.width, intrinsics.height)
    camera.set_name(name)
    camera.set_focal_lengths(intrinsics.fx, intrinsics.fy)
    # SAPIEN measures the principal point from the pixel corner, OpenCV from the first pixel's centre
    camera.set_principal_point(intrinsics.cx + 0.5, intrinsics.cy + 0.5)
    camera.set_near(near)
    camera.set_far(far)
    entity = sapien.Entity()
    entity.set_name(f"camera:{name}")
    entity.add_component(camera)
    entity.set_pose(sapien_camera_pose(world_from_camera))
    scene.add_entity(entity)
    return camera


@dataclass(frozen=True)
class CameraFrame:
    """One camera's render of one frame."""

    camera: str
    """Camera name (as in G)."""
    rgb: np.ndarray
    """uint8 H x W x 3 colour image."""
    depth: np.ndarray
    """float32 H x W, metres along the optical axis (OpenCV camera z); 0 where nothing was hit."""
    segmentation: np.ndarray
    """uint32 H x W entity ids (SAPIEN per-scene ids); 0 where nothing was hit."""


@dataclass
class FrameState:
    """What one replayed frame sets. Names are SAPIEN entity and articulation names.

    As a plain mapping (what `RenderPasses.apply` also accepts) it reads
    `{"bodies": {name: pose}, "articulations": {name: qpos}, "cameras": {name: pose}}`, every key
    optional. Bodies and cameras not named keep their last pose."""

    bodies: dict[str, PoseLike] = field(default_factory=dict)
    """Rigid body (actor) entity name -> world pose."""
    articulations: dict[str, Sequence[float] | np.ndarray | Mapping[str, float]] = field(default_factory=dict)
    """Articulation name -> joint positions: a full vector (length = its dof, in active-joint
    order) or {joint name: position} for some of its joints (the rest keep their value)."""
    cameras: dict[str, PoseLike] = field(default_factory=dict)
    """Camera name -> world_from_camera (OpenCV), for cameras that ride on a moving body."""

    @classmethod
    def from_mapping(cls, state: FrameState | Mapping[str, Any]) -> FrameState:
        """A FrameState from itself or from a mapping with keys bodies / articulations / cameras."""
        if isinstance(state, FrameState):
            return state
        unknown = set(state) - {"bodies", "articulations", "cameras"}
        if unknown:
            raise ReplayError(f"a frame state has keys bodies, articulations, cameras; got also {sorted(unknown)}")
        return cls(bodies=dict(state.get("bodies", {})), articulations=dict(state.get("articulations", {})),
                   cameras=dict(state.get("cameras", {})))


def _ensure_lighting(scene: sapien.Scene) -> None:
    """Give a scene without any light an even, shadowless light, so colours are recognisable."""
    if scene.render_system.lights or np.any(np.asarray(scene.ambient_light) > 0):
        return
    scene.set_ambient_light([0.45, 0.45, 0.45])
    scene.add_directional_light([0.3, 0.2, -1.0], [0.7, 0.7, 0.7], shadow=False)


def _names(entities: Iterable[Any]) -> dict[str, Any | None]:
    """name -> thing, with None for a name several things share (ambiguous in a state)."""
    out: dict[str, Any | None] = {}
    for thing in entities:
        out[thing.name] = None if thing.name in out else thing
    return out


class RenderPasses:
    """Cameras from G on a render-enabled SAPIEN scene, rendering RGB, depth and segmentation from
    replayed states (poses and joint positions set per frame; physics is never stepped)."""

    def __init__(self, scene: sapien.Scene, cameras: Sequence[GroundedCamera], scale: float = 1.0,
                 near: float = DEFAULT_NEAR, far: float = DEFAULT_FAR, add_lights: bool = True) -> None:
        """Mount `cameras` on `scene`, each at its G resolution times `scale` (intrinsics scaled
        with it). With `add_lights`, a scene without any light gets a plain one.

        Raises RenderDeviceError (saying how to get a device) when no render device exists or the
        scene is physics-only."""
        require_render_device()
        if is_physics_only(scene):
            raise RenderDeviceError("this scene is physics-only and cannot render; build it with "
                                    f"create_scene(render=True) and load bodies with visuals. {RENDER_SETUP_HINT}")
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        names = [c.name for c in cameras]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"need at least one camera and unique camera names, got {names}")
        self.scene = scene
        if add_lights:
            _ensure_lighting(scene)
        self._intrinsics: dict[str, Intrinsics] = {}
        self._cameras: dict[str, sapien.render.RenderCameraComponent] = {}
        for cam in cameras:
            intr = cam.intrinsics
            if scale != 1.0:
                intr = scale_intrinsics(intr, max(1, round(intr.width * scale)), max(1, round(intr.height * scale)))
            self._intrinsics[cam.name] = intr
            self._cameras[cam.name] = mount_camera(scene, cam.name, intr, cam.world_from_camera, near, far)
        self._refresh_index()

    # --- description -------------------------------------------------------------------------------
    @property
    def camera_names(self) -> tuple[str, ...]:
        """Camera names, in G order."""
        return tuple(self._cameras)

    def intrinsics(self, camera: str) -> Intrinsics:
        """The intrinsics `camera` renders with (G's, scaled to the render resolution)."""
        return self._intrinsics[camera]

    def world_from_camera(self, camera: str) -> sapien.Pose:
        """The camera's current OpenCV-convention pose in the world."""
        matrix = self._cameras[camera].entity.pose.to_transformation_matrix()
        matrix[:3, :3] = matrix[:3, :3] @ OPENCV_FROM_SAPIEN_CAMERA.T
        return sapien.Pose(matrix)

    @property
    def segmentation_labels(self) -> dict[int, str]:
        """Segmentation id -> entity name, for every entity with visuals (0, no entity, is absent).
        Articulation links appear under their link names."""
        return {e.per_scene_id: e.name for e in self.scene.entities
                if e.find_component_by_type(sapien.render.RenderBodyComponent) is not None}

    @property
    def articulation_labels(self) -> dict[int, str]:
        """Segmentation id -> articulation name, for the links of articulations (e.g. the robot)."""
        out: dict[int, str] = {}
        for art in self.scene.get_all_articulations():
            for link in art.links:
                out[link.entity.per_scene_id] = art.name
        return out

    # --- replay ------------------------------------------------------------------------------------
    def _refresh_index(self) -> None:
        actors = [e for e in self.scene.entities
                  if e.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent) is not None
                  or e.find_component_by_type(sapien.physx.PhysxRigidStaticComponent) is not None]
        self._bodies = _names(actors)
        self._articulations = _names(self.scene.get_all_articulations())

    def _lookup(self, index: dict[str, Any | None], name: str, what: str) -> Any:
        if name not in index:
            self._refresh_index()  # the scene may have gained bodies since construction
        if name not in index:
            raise ReplayError(f"the recorded state names {what} {name!r}, which the scene lacks "
                              f"(it has {sorted(index)})")
        thing = index[name]
        if thing is None:
            raise ReplayError(f"several {what}s of the scene are called {name!r}; give them unique names")
        return thing

    def _set_qpos(self, name: str, qpos: Sequence[float] | np.ndarray | Mapping[str, float]) -> None:
        art = self._lookup(self._articulations, name, "articulation")
        if isinstance(qpos, Mapping):
            joints = [j.name for j in art.active_joints]
            full = np.asarray(art.get_qpos(), dtype=np.float64).copy()
            for joint, value in qpos.items():
                if joint not in joints:
                    raise ReplayError(f"articulation {name!r} has no movable joint {joint!r} (it has {joints})")
                full[joints.index(joint)] = value
            values = full
        else:
            values = np.asarray(qpos, dtype=np.float64)
            if values.shape != (art.dof,):
                raise ReplayError(f"articulation {name!r} has {art.dof} joint positions, the state gives shape {values.shape}")
        art.set_qpos(values.astype(np.float32))

    def apply(self, state: FrameState | Mapping[str, Any]) -> None:
        """Set the scene to a recorded state (poses, joint positions, moving cameras) and sync the
        renderer; physics is not stepped."""
        state = FrameState.from_mapping(state)
        for name, pose in state.bodies.items():
            self._lookup(self._bodies, name, "body").set_pose(as_sapien_pose(pose))
        for name, qpos in state.articulations.items():
            self._set_qpos(name, qpos)
        for name, pose in state.cameras.items():
            if name not in self._cameras:
                raise ReplayError(f"the recorded state moves camera {name!r}, not one of {list(self._cameras)}")
            self._cameras[name].entity.set_pose(sapien_camera_pose(pose))
        self.scene.update_render()

    def render(self, state: FrameState | Mapping[str, Any] | None = None,
               cameras: Sequence[str] | None = None) -> dict[str, CameraFrame]:
        """Apply `state` (when given) and render every camera (or those named): camera -> frame."""
        if state is not None:
            self.apply(state)
        else:
            self.scene.update_render()
        frames: dict[str, CameraFrame] = {}
        for name in cameras if cameras is not None else self._cameras:
            if name not in self._cameras:
                raise KeyError(f"no camera {name!r}; cameras are {list(self._cameras)}")
            frames[name] = self._take(name)
        return frames

    def replay(self, states: Iterable[FrameState | Mapping[str, Any]],
               cameras: Sequence[str] | None = None) -> Iterator[dict[str, CameraFrame]]:
        """Render each state of a recorded sequence in order, one dict of camera frames per state."""
        for state in states:
            yield self.render(state, cameras)

    def _take(self, name: str) -> CameraFrame:
        camera = self._cameras[name]
        camera.take_picture()
        colour = camera.get_picture("Color")
        position = camera.get_picture("Position")  # OpenGL camera frame xyz; w is 1 beyond the far plane
        ids = camera.get_picture("Segmentation")[..., 1]  # channel 0: visual shape, 1: entity
        rgb = (np.clip(colour[..., :3], 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
        hit = position[..., 3] < 1.0
        depth = np.where(hit, -position[..., 2], 0.0).astype(np.float32)
        return CameraFrame(camera=name, rgb=rgb, depth=depth, segmentation=np.where(hit, ids, 0).astype(np.uint32))
