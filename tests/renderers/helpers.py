"""Shared helpers for the renderer tests: render contracts for the demo scene, an SSIM, and the skip
marker for tests that need a render device."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest

from datafarm.artifacts.render_contract import RenderContract
from datafarm.renderers.demo import REAL_COLOURS, REAL_TABLE_COLOUR
from datafarm.sim.sapien_scene import has_render_device

NO_DEVICE = "no Vulkan render device (install Mesa >= 25 lavapipe: sudo bash scripts/setup-system.sh)"
device = pytest.mark.skipif(not has_render_device(), reason=NO_DEVICE)
"""Skip when there is no render device."""
needs_device = [pytest.mark.render, device]
"""Marks for a module whose tests render (`pytestmark = needs_device`)."""

TASK = "Pick up the red cup and place it inside the blue cup."
CAMERAS = ("front", "left", "right")


def contract_data(mode: str = "sim2real", renderer: str = "composite", parameters: dict[str, Any] | None = None,
                  variables: dict[str, str] | None = None, **changes: Any) -> dict[str, Any]:
    """R for the demo scene as a dict (320x240, 20 fps, chunks of 16 with 4 overlapping); `changes`
    replace top-level keys."""
    data: dict[str, Any] = {
        "mode": mode,
        "cameras": [{"camera": c, "frames": [0, 15]} for c in CAMERAS],
        "appearance": {"scene": "a light wooden table in front of a grey wall, soft overhead light",
                       "table_colour": list(REAL_TABLE_COLOUR),
                       "objects": {oid: {"colour": list(rgb), "material": "glazed ceramic"}
                                   for oid, rgb in REAL_COLOURS.items()}},
        "renderer": {"name": renderer, "parameters": parameters or {},
                     "template_variables": variables if variables is not None else {"scene_summary": "a red and a blue cup"}},
        "chunk_frames": 16, "overlap_frames": 4, "fps": 20.0, "resolution": [320, 240],
    }
    if mode == "ood":
        data["variations"] = {"tablecloth": ["red_check"], "light_colour": ["warm"]}
    data.update(changes)
    return data


def contract(mode: str = "sim2real", renderer: str = "composite", parameters: dict[str, Any] | None = None,
             variables: dict[str, str] | None = None, **changes: Any) -> RenderContract:
    """`contract_data` validated."""
    return RenderContract.model_validate(contract_data(mode, renderer, parameters, variables, **changes))


def ssim(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None) -> float:
    """Mean structural similarity (Wang et al. 2004; 7x7 Gaussian window, sigma 1.5) of two images'
    luminance, over `mask` when given."""
    def gray(x: np.ndarray) -> np.ndarray:
        return cv2.cvtColor(x, cv2.COLOR_RGB2GRAY).astype(np.float64) if x.ndim == 3 else x.astype(np.float64)

    x, y = gray(a), gray(b)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def blur(z: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(z, (7, 7), 1.5)

    mx, my = blur(x), blur(y)
    sxx, syy, sxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    index = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(index[mask].mean() if mask is not None else index.mean())
