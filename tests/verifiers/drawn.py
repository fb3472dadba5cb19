"""A one-camera episode drawn with OpenCV, for verifier tests that need a scene whose truth is known
without a render device: the clip's view of one object on a background, a moving robot mask drawn
over it in a flat colour with a little noise per frame, encoded as H.264 like a render, and the
evidence it is verified against (the sim's classes, the object's track and real colours)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from datafarm.artifacts.episode import ContactEvent
from datafarm.artifacts.grounding import Grounding
from datafarm.renderers.video import VideoWriter
from datafarm.taskdir import TaskDir
from datafarm.verifiers import VerifierSpec, derive_spec
from datafarm.verifiers.colour import model_from_pixels, to_lab
from datafarm.verifiers.evidence import CameraEvidence, ObjectTrack, SimEvidence, erode
from tests.renderers.helpers import contract
from tests.verifiers.helpers import nest_contract

CAMERA = "front"
"""The drawn episode's one camera."""


def drawn_episode(root: Path, episode_id: str, object_id: str, scene: tuple[np.ndarray, np.ndarray],
                  robot: Callable[[int], np.ndarray], robot_rgb: tuple[int, int, int], *, steps: int, fps: float,
                  seams: Sequence[int] = (), contacts: Sequence[ContactEvent] = ()) -> SimEvidence:
    """Write `episodes/<episode_id>/obs/front.mp4` under `root`: `scene` (image, classes with the object
    as class 2) with `robot(t)` (a bool mask) drawn over it in `robot_rgb` at each of `steps` frames;
    return the evidence: the object still at its clip place, the given contacts and chunk seams."""
    image, reference_classes = scene
    height, width = reference_classes.shape
    rng = np.random.default_rng(11)
    classes = np.repeat(reference_classes[None], steps, axis=0)
    folder = TaskDir(root).episode(episode_id) / "obs"
    folder.mkdir(parents=True)
    with VideoWriter(folder / f"{CAMERA}.mp4", width, height, fps) as writer:
        for t in range(steps):
            mask = robot(t)
            classes[t][mask] = 1
            frame = np.where(mask[..., None], np.array(robot_rgb, np.uint8), image).astype(np.float32)
            writer.write(np.clip(frame + rng.normal(0, 1.0, frame.shape), 0, 255).astype(np.uint8))
    areas = (classes == 2).sum(axis=(1, 2))
    ys, xs = np.nonzero(reference_classes == 2)
    track = ObjectTrack(areas=areas.astype(np.int64), centroids=np.tile([xs.mean(), ys.mean()], (steps, 1)))
    pixels = image[erode(reference_classes == 2, 1)]
    camera = CameraEvidence(name=CAMERA, classes=classes, outline_frames=[], outlines=np.zeros((0, height, width), bool),
                            reference_classes=reference_classes, reference_image=image, clip_median=image,
                            tracks={object_id: track}, colours={object_id: model_from_pixels(pixels, "real pixels")},
                            reference_lab={object_id: to_lab(pixels).reshape(-1, 3)})
    return SimEvidence(episode_id=episode_id, frames=steps, fps=fps, width=width, height=height,
                       object_ids=[object_id], cameras={CAMERA: camera}, positions=np.zeros((steps, 1, 3)),
                       speeds=np.zeros((steps, 1)), contacts=list(contacts), seams=list(seams), mode="sim2real",
                       variations={}, light_gains=np.ones(3))


def drawn_spec(grounding: Grounding, object_id: str, kind: str, rgb: tuple[int, int, int],
               checks: Sequence[str]) -> VerifierSpec:
    """The spec derive_spec writes from T, G, R and K, narrowed to the drawn episode's camera, its one
    (movable) object of colour `rgb` and `checks` (views and background need a real camera geometry)."""
    data = derive_spec((nest_contract(), grounding, contract())).model_dump(mode="json")
    data["cameras"] = [CAMERA]
    data["objects"] = [{"id": object_id, "kind": kind, "role": None, "colour": [c / 255 for c in rgb],
                        "colour_source": "grounding", "cameras": [CAMERA], "movable": True}]
    data["checks"] = [c for c in data["checks"] if c["check"] in checks]
    return VerifierSpec.model_validate(data)
