"""Fixtures shared by the intake tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.intake.clips import CLIP_YAML, write_video


@pytest.fixture
def make_clip(tmp_path: Path):
    """Build a clip folder: clip.yaml text plus videos (name -> write_video kwargs, or bytes)."""

    def build(yaml_text: str = CLIP_YAML, videos: dict[str, dict | bytes] | None = None) -> Path:
        folder = tmp_path / "clip"
        folder.mkdir()
        (folder / "clip.yaml").write_text(yaml_text)
        if videos is None:
            videos = {"front.mp4": {}, "left.mp4": {}, "right.mp4": {}}
        for name, spec in videos.items():
            if isinstance(spec, bytes):
                (folder / name).write_bytes(spec)
            else:
                write_video(folder / name, **spec)
        return folder

    return build
