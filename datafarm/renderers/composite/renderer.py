"""The `composite` renderer (default; CPU, offline, deterministic per seed).

Per camera, prepared once per episode:
1. a clean plate of the real static background from the clip (`plate.py`), warped to the episode's
   camera pose when z jitters it (through the table plane);
2. ood variations the contract allows (`ood.py`): the tablecloth on the plate's table region, the
   light's colour and intensity as gains on everything lit;
3. appearance transfer (`appearance.py`): each object's colour statistics from its real pixels in R's
   reference frames, fitted against the sim render of G's scene as the clip shows it; the robot,
   which has no reliable real pixels of its own, gets the scene's light (the real table against the
   sim table).

Per frame: plate -> contact shadows of objects and grippers at their recorded poses -> the sim's
robot and objects (segmentation) through their lookup tables -> each scale's readout with the sim's
reading -> optional sensor grain seeded per chunk. All cameras are then tiled on the canvas.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import cv2
import numpy as np
from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.renderers.base import FrameInput, Renderer, RenderJob
from datafarm.renderers.chunks import ChunkSpan
from datafarm.renderers.composite import ood
from datafarm.renderers.composite.appearance import (
    MIN_PIXELS,
    ColourStats,
    colour_stats,
    gain_lut,
    light_gains,
    pool,
    transfer_lut,
)
from datafarm.renderers.composite.display import DisplayGeometry, draw_display, scale_displays
from datafarm.renderers.composite.plate import clean_plate, erode
from datafarm.renderers.composite.shadows import ShadowCaster, draw_shadow, gripper_points, hull_points, world_points
from datafarm.renderers.record import RendererReport
from datafarm.renderers.scene import BACKGROUND, ROBOT, Projector
from datafarm.sim.world.frames import quat_to_matrix


class CompositeParameters(Artifact):
    """R's `renderer.parameters` for the composite renderer."""

    shadow_strength: float = Field(default=0.45, ge=0.0, le=1.0)
    """How dark a contact shadow is where the caster touches the table (0 = no shadows)."""
    grain: float = Field(default=0.0, ge=0.0, le=20.0)
    """Standard deviation of sensor grain added per frame, 0-255 levels (0 = none), seeded per chunk."""
    plate_frames: int = Field(default=30, ge=1, le=600)
    """Clip frames (spread over the clip) whose median makes the clean plate."""
    mask_dilation: float = Field(default=0.015, ge=0.0, le=0.2)
    """How far the foreground G places in the clip is grown before it is inpainted, as a fraction of the image width."""
    stable_fraction: float = Field(default=0.6, gt=0.0, le=1.0)
    """Share of clip frames that must agree with the median for a pixel to count as static."""


@dataclass
class _CameraState:
    """What the renderer prepared for one camera."""

    projector: Projector
    plate: np.ndarray
    luts: dict[int, np.ndarray] = field(default_factory=dict)


class CompositeRenderer(Renderer):
    """Real background + sim foreground with transferred appearance (see the module docstring)."""

    name = "composite"
    parameters_model = CompositeParameters

    def prepare(self, job: RenderJob) -> None:
        """Build each camera's plate, ood variations and appearance lookup tables."""
        p: CompositeParameters = self.parameters
        self.job = job
        self._details: dict[str, object] = {"cameras": {}, "objects": {}}
        self._notes: list[str] = []
        job.clip.max_frames = p.plate_frames
        table = job.grounding.table
        ood_gains = ood.light_gains(job.variations)
        self._check_variations(job)
        references = {c.camera: c.frames for c in job.contract.cameras}
        object_ids = job.segments.object_ids
        sim_stats: dict[str, dict[str, ColourStats]] = {oid: {} for oid in object_ids}
        real_stats: dict[str, dict[str, ColourStats]] = {oid: {} for oid in object_ids}
        table_id = next((sid for sid, name in job.segments.names.items() if name == "table"), None)
        light_sim, light_real = [], []
        self._cameras: dict[str, _CameraState] = {}
        for camera in job.layout.cameras:
            clip = job.clip.camera(camera, references[camera])
            nominal = job.nominal[camera]
            classes = job.segments.classify(nominal.segmentation)
            width = nominal.rgb.shape[1]
            plate = clean_plate(clip.plate, classes != BACKGROUND, round(p.mask_dilation * width), p.stable_fraction)
            for k, oid in enumerate(object_ids):
                mask = erode(classes == 2 + k, max(1, round(width / 320)))
                if mask.sum() == 0:
                    continue
                sim_stats[oid][camera] = colour_stats(nominal.rgb[mask], reject_outliers=False)
                real_stats[oid][camera] = colour_stats(np.concatenate([ref[mask] for ref in clip.references]))
            if table_id is not None:  # the real table (plate, where nothing was filled in) against the sim's
                on_table = erode((nominal.segmentation == table_id) & ~plate.filled, 2)
                if on_table.sum() >= MIN_PIXELS:
                    light_sim.append(colour_stats(nominal.rgb[on_table], reject_outliers=False))
                    light_real.append(colour_stats(plate.image[on_table], reject_outliers=False))
            projector = Projector.of(job.cameras[camera])
            image = self._to_episode_view(plate.image, Projector.of(job.clip_cameras[camera]), projector)
            if "tablecloth" in job.variations and table is not None:
                image, _ = ood.apply_tablecloth(image, projector, job.clip_world_from_table_top, table.size_x.value,
                                                table.size_y.value, job.variations["tablecloth"])
            image = cv2.LUT(image, gain_lut(ood_gains))
            self._cameras[camera] = _CameraState(projector, image)
            self._details["cameras"][camera] = {  # type: ignore[index]
                "plate_filled_fraction": round(float(plate.filled.mean()), 4),
                "plate_unstable_fraction": round(plate.unstable_fraction, 4), "plate_frames": len(clip.plate)}
        scene_light = light_gains(pool(light_sim), pool(light_real))
        self._details["light_gains"] = [round(float(g), 4) for g in scene_light]
        self._details["ood_gains"] = [round(float(g), 4) for g in ood_gains]
        for camera, state in self._cameras.items():
            state.luts[ROBOT] = gain_lut(scene_light * ood_gains)
            for k, oid in enumerate(object_ids):
                state.luts[2 + k] = self._object_lut(oid, camera, sim_stats[oid], real_stats[oid], scene_light, ood_gains)
        self._casters = self._shadow_casters(job)
        self._displays: list[tuple[int, int, DisplayGeometry]] = [
            (object_ids.index(d.scale_id), job.recording.scale_ids.index(d.scale_id), d)
            for d in scale_displays(job.grounding) if d.scale_id in job.recording.scale_ids]
        self._details["displays"] = [d.scale_id for _, _, d in self._displays]

    # --- preparation helpers -------------------------------------------------------------------------
    def _check_variations(self, job: RenderJob) -> None:
        """Validate the applied ood values now (InputError for an unknown name) rather than mid-render."""
        if "tablecloth" in job.variations:
            ood.parse_tablecloth(job.variations["tablecloth"])
        ood.light_gains(job.variations)

    def _to_episode_view(self, plate: np.ndarray, clip_view: Projector, episode_view: Projector) -> np.ndarray:
        """The plate as the episode's (jittered) camera sees it, through the table plane."""
        if np.allclose(clip_view.camera_from_world, episode_view.camera_from_world, atol=1e-9):
            return plate
        table = self.job.clip_world_from_table_top
        homography = episode_view.plane_homography(table) @ np.linalg.inv(clip_view.plane_homography(table))
        self._notes.append("camera pose jittered by z: the clean plate was warped through the table plane")
        return cv2.warpPerspective(plate, homography, (episode_view.width, episode_view.height),
                                   flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)

    def _object_lut(self, oid: str, camera: str, sim: dict[str, ColourStats], real: dict[str, ColourStats],
                    scene_light: np.ndarray, ood_gains: np.ndarray) -> np.ndarray:
        """The object's lookup table in `camera`: its own view's statistics, else all views pooled, else R's
        target colour against G's colour under the scene's light."""
        details = self._details["objects"].setdefault(oid, {})  # type: ignore[union-attr]
        if camera in sim and sim[camera].pixels >= MIN_PIXELS and real[camera].pixels >= MIN_PIXELS:
            s, r, source = sim[camera], real[camera], "reference pixels in this view"
        else:
            views = [c for c in sim if sim[c].pixels >= MIN_PIXELS and real[c].pixels >= MIN_PIXELS]
            if views:
                s, r = pool([sim[c] for c in views]), pool([real[c] for c in views])
                source = f"reference pixels pooled over {', '.join(views)}"
            else:
                look = self.job.contract.appearance.objects.get(oid)
                g_colour = np.array(self.job.grounding.object(oid).colour)
                target = np.array(look.colour) if look is not None else g_colour
                gains = np.clip(target / np.maximum(g_colour, 0.02), 0.2, 5.0) * scene_light
                details[camera] = {"source": "R target colour (no usable reference pixels)"}
                self._notes.append(f"{oid}: no usable reference pixels; coloured from R's target colour")
                return gain_lut(gains * ood_gains)
        details[camera] = {"source": source, "real_mean": [round(float(v), 1) for v in r.mean],
                           "sim_mean": [round(float(v), 1) for v in s.mean], "real_pixels": r.pixels}
        return transfer_lut(s, r, ood_gains)

    def _shadow_casters(self, job: RenderJob) -> list[tuple[str, int, ShadowCaster]]:
        """(kind, index into the recording, caster) for each object and gripper."""
        casters: list[tuple[str, int, ShadowCaster]] = []
        for k, oid in enumerate(job.recording.object_ids):
            casters.append(("object", k, ShadowCaster(oid, hull_points(job.grounding.object(oid)))))
        for g, arm in enumerate(job.recording.grippers):
            casters.append(("gripper", g, ShadowCaster(f"{arm}.gripper", gripper_points())))
        return casters

    # --- rendering ----------------------------------------------------------------------------------
    def render_camera(self, camera: str, step: int, control: object) -> np.ndarray:
        """One camera's composited frame at `step` from its control signals."""
        state = self._cameras[camera]
        recording = self.job.recording
        frame = state.plate.copy()
        strength = self.parameters.shadow_strength
        if strength > 0:
            for kind, index, caster in self._casters:
                pose = recording.objects[step, index, :7] if kind == "object" else recording.end_effectors[step, index]
                draw_shadow(frame, state.projector, world_points(caster.points, pose), self.job.world_from_table_top,
                            strength)
        classes = self.job.segments.classify(control.segmentation)  # type: ignore[attr-defined]
        rgb = control.rgb  # type: ignore[attr-defined]
        for cls, lut in state.luts.items():
            mask = classes == cls
            if mask.any():
                ys, xs = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
                y0, y1, x0, x1 = ys[0], ys[-1] + 1, xs[0], xs[-1] + 1
                sub = mask[y0:y1, x0:x1]
                frame[y0:y1, x0:x1][sub] = cv2.LUT(rgb[y0:y1, x0:x1], lut)[sub]
        for object_index, scale_index, display in self._displays:
            world_from_scale = pose_to_matrix_array(recording.objects[step, object_index, :7])
            draw_display(frame, state.projector, display, world_from_scale,
                         float(recording.scale_readings[step, scale_index]), control.depth)  # type: ignore[attr-defined]
        return frame

    def render_chunk(self, chunk: ChunkSpan, frames: Iterator[FrameInput]) -> Iterator[np.ndarray]:
        """One canvas per frame, as the frames come."""
        grain = self.parameters.grain
        rng = np.random.default_rng(chunk.seed) if grain > 0 else None
        layout = self.job.layout
        for item in frames:
            images = {camera: self.render_camera(camera, item.step, item.controls[camera]) for camera in layout.cameras}
            canvas = layout.compose(images)
            if rng is not None:
                noise = rng.normal(0.0, grain, size=canvas.shape).astype(np.float32)
                canvas = np.clip(canvas.astype(np.float32) + noise + 0.5, 0, 255).astype(np.uint8)
            yield canvas

    def report(self) -> RendererReport:
        """Notes and measurements (transferred colours, plates, gains); no cost."""
        return RendererReport(notes=sorted(set(self._notes)), details=self._details)  # type: ignore[arg-type]


def pose_to_matrix_array(pose7: np.ndarray) -> np.ndarray:
    """4 x 4 matrix of a pose given as (x, y, z, qw, qx, qy, qz)."""
    out = np.eye(4)
    out[:3, :3] = quat_to_matrix(pose7[3:7])
    out[:3, 3] = pose7[:3]
    return out
