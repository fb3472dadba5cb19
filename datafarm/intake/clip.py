"""Validate a calibration clip folder: clip.yaml plus one decodable video per camera, consistent
across views. Every defect found is reported at once, each naming the file, what is wrong and a fix."""

from __future__ import annotations

from pathlib import Path

from datafarm.artifacts.clip import VIDEO_SUFFIXES, CameraReport, ClipReport, ClipSpec
from datafarm.errors import InputError, Problem
from datafarm.hashing import sha256_file, sha256_tree
from datafarm.intake.load import validate_document
from datafarm.intake.video import VideoProbe, VideoUnreadable, probe_video
from datafarm.intake.yaml_source import YamlDocument, read_yaml

CLIP_FILE = "clip.yaml"
"""Name of the clip's description file inside the clip folder."""

FPS_TOLERANCE = 0.01
"""Largest relative frame-rate difference accepted between views and against clip.yaml."""

MAX_FRAME_COUNT_SPREAD = 1
"""Largest difference in frame counts accepted between views."""

_REENCODE = "re-encode it, e.g. `ffmpeg -i IN -c:v libx264 -pix_fmt yuv420p OUT.mp4`"


def _relative_spread(a: float, b: float) -> float:
    return abs(a - b) / max(min(a, b), 1e-9)


def _check_video(folder: Path, doc: YamlDocument, spec: ClipSpec, index: int) -> tuple[VideoProbe | None, list[Problem]]:
    """Decode one camera's video and check it on its own (exists, decodes, has frames, even size, intrinsics)."""
    cam = spec.cameras[index]
    path = folder / cam.video
    where = f"camera '{cam.name}'"
    if not path.is_file():
        return None, [
            Problem(
                f"{where}: video file {path} does not exist",
                file=doc.path,
                line=doc.line_of(("cameras", index, "video")),
                field=f"cameras[{index}].video",
                expected=f"a video file named {cam.video} in the clip folder",
                hint="add the video, or set `video:` to its file name",
            )
        ]
    try:
        probe = probe_video(path)
    except VideoUnreadable as err:
        return None, [
            Problem(
                f"{where}: cannot read the video: {err}",
                file=path,
                expected="a video FFmpeg can decode (e.g. H.264 in .mp4)",
                hint=_REENCODE,
            )
        ]
    problems: list[Problem] = []
    if probe.frames == 0:
        problems.append(
            Problem(f"{where}: the video has no frames", file=path, expected="at least one frame", hint=_REENCODE)
        )
        return None, problems
    odd = [side for side, size in (("width", probe.width), ("height", probe.height)) if size % 2]
    if odd:
        problems.append(
            Problem(
                f"{where}: frame size {probe.width}x{probe.height} has an odd {' and '.join(odd)}",
                file=path,
                expected="even width and height (yuv420p video, which datafarm renders, cannot hold odd sizes)",
                hint="crop one pixel, e.g. `ffmpeg -i IN -vf crop=trunc(iw/2)*2:trunc(ih/2)*2 -c:v libx264 -pix_fmt yuv420p OUT.mp4`",
            )
        )
    k = cam.intrinsics
    if k is not None and (k.width, k.height) != (probe.width, probe.height):
        problems.append(
            Problem(
                f"{where}: intrinsics are for {k.width}x{k.height} images but the video is {probe.width}x{probe.height}",
                file=doc.path,
                line=doc.line_of(("cameras", index, "intrinsics", "width")),
                field=f"cameras[{index}].intrinsics",
                expected=f"intrinsics width {probe.width} and height {probe.height}, the video's frame size",
                hint="give the intrinsics of the resolution the video was recorded at (scale fx, fy, cx, cy with the image)",
            )
        )
    return probe, problems


def _extra_videos(folder: Path, spec: ClipSpec) -> list[Problem]:
    """A Problem for each video-like file in the folder that no camera names."""
    named = {cam.video for cam in spec.cameras}
    return [
        Problem(
            "video file is not named by any camera in clip.yaml",
            file=path,
            expected=f"only the videos clip.yaml lists ({', '.join(sorted(named))})",
            hint="add a camera for it to clip.yaml, or move it out of the clip folder",
        )
        for path in sorted(folder.iterdir())
        if path.is_file() and path.suffix.lower() in VIDEO_SUFFIXES and path.name not in named
    ]


def _cross_view(doc: YamlDocument, spec: ClipSpec, probes: dict[int, VideoProbe]) -> list[Problem]:
    """Frame counts and frame rates compared across views and against clip.yaml's fps."""
    problems: list[Problem] = []
    names = {i: spec.cameras[i].name for i in probes}
    counts = {i: p.frames for i, p in probes.items()}
    if counts and max(counts.values()) - min(counts.values()) > MAX_FRAME_COUNT_SPREAD:
        listing = ", ".join(f"{names[i]} {n}" for i, n in counts.items())
        problems.append(
            Problem(
                f"frame counts differ by {max(counts.values()) - min(counts.values())} across views ({listing})",
                file=doc.path,
                line=doc.line_of(("cameras",), key=True),
                field="cameras",
                expected=f"the same number of frames in every view (a difference of {MAX_FRAME_COUNT_SPREAD} is tolerated)",
                hint="trim every video to the same synchronized span",
            )
        )
    off_spec = False
    for i, probe in probes.items():
        if _relative_spread(probe.fps, spec.fps) > FPS_TOLERANCE:
            off_spec = True
            fps_line = doc.line_of(("fps",))
            problems.append(
                Problem(
                    f"camera '{names[i]}': the video runs at {probe.fps:g} fps but clip.yaml"
                    f"{f' (line {fps_line})' if fps_line else ''} says fps: {spec.fps:g}",
                    file=doc.path.parent / spec.cameras[i].video,
                    field=f"cameras[{i}]",
                    expected=f"a frame rate within {FPS_TOLERANCE:.0%} of clip.yaml's fps",
                    hint="fix fps in clip.yaml, or re-time the video to it",
                )
            )
    rates = [p.fps for p in probes.values()]
    if not off_spec and rates and _relative_spread(max(rates), min(rates)) > FPS_TOLERANCE:
        listing = ", ".join(f"{names[i]} {p.fps:g}" for i, p in probes.items())
        problems.append(
            Problem(
                f"frame rates differ across views ({listing})",
                file=doc.path,
                line=doc.line_of(("cameras",), key=True),
                field="cameras",
                expected=f"every view at the same frame rate (within {FPS_TOLERANCE:.0%})",
                hint="re-time the videos to one frame rate",
            )
        )
    return problems


def validate_clip(folder: Path | str) -> ClipReport:
    """Check a calibration clip folder and measure its videos.

    Loads clip.yaml (errors located by line as for any YAML input), decodes every camera's video
    with PyAV, and checks: each video exists and decodes, has a video stream and frames, has even
    width and height, matches its intrinsics' size; no video file in the folder is left unnamed;
    frame counts agree across views within one frame; frame rates agree with each other and with
    clip.yaml within 1%. Raises InputError listing every problem found; returns a ClipReport.
    """
    folder = Path(folder).absolute()
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise InputError(
            [Problem(f"clip folder {what}", file=folder, expected="a folder holding clip.yaml and one video per camera")]
        )
    clip_file = folder / CLIP_FILE
    if not clip_file.is_file():
        raise InputError(
            [
                Problem(
                    f"{CLIP_FILE} is missing from the clip folder",
                    file=clip_file,
                    expected=f"{CLIP_FILE} with fps and cameras (name, video, optional intrinsics and extrinsics)",
                    hint="see examples/nest_cups/clip/clip.yaml for a complete example",
                )
            ]
        )
    doc = read_yaml(clip_file)
    spec = validate_document(ClipSpec, doc)

    problems: list[Problem] = []
    probes: dict[int, VideoProbe] = {}
    for i in range(len(spec.cameras)):
        probe, found = _check_video(folder, doc, spec, i)
        problems += found
        if probe is not None:
            probes[i] = probe
    problems += _extra_videos(folder, spec)
    problems += _cross_view(doc, spec, probes)
    if problems:
        raise InputError(problems)

    cameras = [
        CameraReport(
            name=cam.name,
            video=cam.video,
            frames=probes[i].frames,
            fps=probes[i].fps,
            width=probes[i].width,
            height=probes[i].height,
            codec=probes[i].codec,
            sha256=sha256_file(folder / cam.video),
        )
        for i, cam in enumerate(spec.cameras)
    ]
    return ClipReport(spec=spec, cameras=cameras, frames=min(c.frames for c in cameras), sha256=sha256_tree(folder))
