"""ood appearance variations, applied only along the axes the contract allows:

- `tablecloth`: the table top is covered with a procedural cloth, drawn in table coordinates (so
  every view shows the same cloth, in perspective) and shaded by the real table's own light and
  shadows. Names are `<colour>_<pattern>`, `<pattern>` or `<colour>` (see COLOURS and PATTERNS).
- `light_colour`: a colour cast on everything lit by the scene's light: a name in LIGHT_COLOURS or
  a colour temperature in kelvin (e.g. 3200).
- `light_intensity`: a brightness factor (e.g. 0.7) or a name in LIGHT_LEVELS.

Each value is checked when the renderer is prepared; an unknown one is an InputError listing
what is known.
"""

from __future__ import annotations

import math
import zlib

import cv2
import numpy as np

from datafarm.errors import InputError, Problem
from datafarm.renderers.scene import Projector

COLOURS = {
    "red": (196, 36, 44), "blue": (40, 80, 170), "navy": (28, 40, 92), "green": (52, 128, 70),
    "yellow": (226, 190, 60), "orange": (222, 120, 40), "purple": (110, 60, 140), "pink": (228, 150, 170),
    "white": (238, 236, 230), "black": (30, 30, 32), "grey": (128, 128, 128), "gray": (128, 128, 128),
    "brown": (110, 72, 44), "beige": (214, 196, 160),
}
"""Cloth colour names (sRGB 0-255)."""
PATTERNS = ("check", "stripe", "linen", "felt", "dots", "plain", "wood")
"""Cloth patterns."""
DEFAULT_PATTERN_COLOUR = {"check": "red", "stripe": "blue", "linen": "white", "felt": "green", "dots": "navy",
                          "plain": "grey", "wood": "brown"}
"""Colour of a pattern named without one."""
LIGHT_COLOURS = {"warm": (1.10, 1.0, 0.82), "cool": (0.86, 0.97, 1.12), "neutral": (1.0, 1.0, 1.0),
                 "red": (1.15, 0.9, 0.88), "green": (0.9, 1.12, 0.9), "blue": (0.86, 0.92, 1.18),
                 "amber": (1.12, 0.98, 0.7)}
"""Named light casts: per-channel gains (R, G, B)."""
LIGHT_LEVELS = {"dark": 0.45, "dim": 0.65, "normal": 1.0, "bright": 1.3}
"""Named light intensities: brightness factors."""
CLOTH_PX_PER_M = 500
"""Resolution of the cloth texture, pixels per metre of table."""
SHADING_LIMITS = (0.25, 1.6)
"""Bounds of the real table's relative shading carried onto the cloth."""


def _problem(axis: str, value: object, expected: str) -> InputError:
    return InputError([Problem(f"unknown {axis} value {value!r}", field=f"variations.{axis}", expected=expected)])


def parse_tablecloth(value: object) -> tuple[str, str]:
    """(colour name, pattern) of a tablecloth name (InputError for an unknown one)."""
    expected = (f"<colour>_<pattern>, <pattern> or <colour>; colours {', '.join(COLOURS)}; "
                f"patterns {', '.join(PATTERNS)}")
    if not isinstance(value, str):
        raise _problem("tablecloth", value, expected)
    words = value.lower().replace("-", "_").split("_")
    if len(words) == 1 and words[0] in PATTERNS:
        return DEFAULT_PATTERN_COLOUR[words[0]], words[0]
    if len(words) == 1 and words[0] in COLOURS:
        return words[0], "plain"
    if len(words) == 2 and words[0] in COLOURS and words[1] in PATTERNS:
        return words[0], words[1]
    raise _problem("tablecloth", value, expected)


def tablecloth_texture(value: object, size_x: float, size_y: float) -> np.ndarray:
    """The cloth over a table of size_x x size_y metres: uint8 RGB, rows along table y, columns
    along table x, CLOTH_PX_PER_M pixels per metre. Deterministic per name."""
    colour_name, pattern = parse_tablecloth(value)
    colour = np.array(COLOURS[colour_name], dtype=np.float32)
    white = np.array(COLOURS["white"], dtype=np.float32)
    w, h = max(2, round(size_x * CLOTH_PX_PER_M)), max(2, round(size_y * CLOTH_PX_PER_M))
    x = (np.arange(w, dtype=np.float32) + 0.5)[None, :] / CLOTH_PX_PER_M
    y = (np.arange(h, dtype=np.float32) + 0.5)[:, None] / CLOTH_PX_PER_M
    rng = np.random.default_rng(zlib.crc32(str(value).encode()))
    if pattern == "check":  # gingham: white, colour where one band crosses, full colour where both do
        period = 0.04
        bx = ((x // (period / 2)) % 2).astype(np.float32)
        by = ((y // (period / 2)) % 2).astype(np.float32)
        amount = (bx + by)[..., None] / 2
        image = white * (1 - amount) + colour * amount
    elif pattern == "stripe":
        band = ((x // 0.025) % 2).astype(np.float32)[..., None]
        image = white * (1 - band) + colour * band
    elif pattern == "dots":
        period, radius = 0.05, 0.009
        dx, dy = (x % period) - period / 2, (y % period) - period / 2
        dot = (dx * dx + dy * dy < radius * radius).astype(np.float32)[..., None]
        image = colour * (1 - dot) + white * dot
    elif pattern == "wood":
        grain = np.sin(2 * math.pi * (y * 22 + 0.6 * np.sin(2 * math.pi * x * 1.3)))
        image = colour * (0.85 + 0.12 * grain[..., None])
    else:  # linen, felt, plain: a flat colour with a fine weave
        image = colour
    image = np.broadcast_to(image, (h, w, 3)).astype(np.float32)
    weave = {"linen": 10.0, "felt": 6.0}.get(pattern, 3.0)
    image = image + rng.normal(0.0, weave, size=(h, w, 1)).astype(np.float32)
    return np.clip(image + 0.5, 0, 255).astype(np.uint8)


def _clip_polygon_front(points_cam: np.ndarray, near: float = 0.02) -> np.ndarray:
    """The part of a convex polygon (camera frame) in front of z = near (Sutherland-Hodgman)."""
    out = []
    n = len(points_cam)
    for i in range(n):
        a, b = points_cam[i], points_cam[(i + 1) % n]
        a_in, b_in = a[2] >= near, b[2] >= near
        if a_in:
            out.append(a)
        if a_in != b_in:
            t = (near - a[2]) / (b[2] - a[2])
            out.append(a + t * (b - a))
    return np.array(out)


def table_region(projector: Projector, world_from_table: np.ndarray, size_x: float, size_y: float) -> np.ndarray:
    """bool H x W: where the table top (size_x x size_y, centred on its frame) is in the image."""
    corners = np.array([[-size_x / 2, -size_y / 2, 0, 1], [size_x / 2, -size_y / 2, 0, 1],
                        [size_x / 2, size_y / 2, 0, 1], [-size_x / 2, size_y / 2, 0, 1]])
    world = (world_from_table @ corners.T).T[:, :3]
    polygon = _clip_polygon_front(projector.to_camera(world))
    mask = np.zeros((projector.height, projector.width), dtype=np.uint8)
    if len(polygon) >= 3:
        uv = (polygon @ projector.k.T)[:, :2] / polygon[:, 2:3]
        cv2.fillPoly(mask, [np.round(uv * 16).astype(np.int32).reshape(-1, 1, 2)], 1, lineType=cv2.LINE_8, shift=4)
    return mask.astype(bool)


def apply_tablecloth(plate: np.ndarray, projector: Projector, world_from_table: np.ndarray, size_x: float,
                     size_y: float, value: object) -> tuple[np.ndarray, np.ndarray]:
    """The plate with the table top covered by cloth `value`, keeping the real table's shading;
    returns (new plate, table region mask)."""
    region = table_region(projector, world_from_table, size_x, size_y)
    if not region.any():
        return plate.copy(), region
    texture = tablecloth_texture(value, size_x, size_y)
    # texture pixel (column, row) -> table coordinates (x, y) metres -> image
    texture_to_table = np.array([[1 / CLOTH_PX_PER_M, 0, -size_x / 2 + 0.5 / CLOTH_PX_PER_M],
                                 [0, 1 / CLOTH_PX_PER_M, -size_y / 2 + 0.5 / CLOTH_PX_PER_M], [0, 0, 1]])
    homography = projector.plane_homography(world_from_table) @ texture_to_table
    cloth = cv2.warpPerspective(texture, homography, (projector.width, projector.height), flags=cv2.INTER_AREA,
                                borderMode=cv2.BORDER_REPLICATE)
    luma = cv2.cvtColor(plate, cv2.COLOR_RGB2GRAY).astype(np.float32)
    reference = float(np.median(luma[region]))
    shading = np.clip(luma / max(reference, 1.0), *SHADING_LIMITS)[..., None]
    out = plate.copy()
    shaded = np.clip(cloth.astype(np.float32) * shading + 0.5, 0, 255).astype(np.uint8)
    out[region] = shaded[region]
    return out, region


def kelvin_gains(kelvin: float) -> np.ndarray:
    """Per-channel gains of a light at `kelvin` relative to daylight (6500 K), from Tanner Helland's
    fit of the blackbody colour, normalised to keep the green channel."""
    def rgb(k: float) -> np.ndarray:
        t = k / 100.0
        r = 255.0 if t <= 66 else 329.698727446 * (t - 60) ** -0.1332047592
        g = 99.4708025861 * math.log(t) - 161.1195681661 if t <= 66 else 288.1221695283 * (t - 60) ** -0.0755148492
        b = 255.0 if t >= 66 else (0.0 if t <= 19 else 138.5177312231 * math.log(t - 10) - 305.0447927307)
        return np.clip(np.array([r, g, b]), 1.0, 255.0)
    gains = rgb(kelvin) / rgb(6500.0)
    return gains / gains[1]


def light_colour_gains(value: object) -> np.ndarray:
    """Per-channel gains of a light colour value (name or kelvin)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not 1000 <= value <= 20000:
            raise _problem("light_colour", value, "a colour temperature from 1000 to 20000 K")
        return kelvin_gains(float(value))
    if isinstance(value, str) and value.lower() in LIGHT_COLOURS:
        return np.array(LIGHT_COLOURS[value.lower()])
    if isinstance(value, str) and value.lower().rstrip("k").isdigit():
        return light_colour_gains(float(value.lower().rstrip("k")))
    raise _problem("light_colour", value, f"one of {', '.join(LIGHT_COLOURS)} or a temperature in kelvin")


def light_intensity_gain(value: object) -> float:
    """Brightness factor of a light intensity value (number or name)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not 0.1 <= value <= 3.0:
            raise _problem("light_intensity", value, "a factor from 0.1 to 3")
        return float(value)
    if isinstance(value, str) and value.lower() in LIGHT_LEVELS:
        return LIGHT_LEVELS[value.lower()]
    raise _problem("light_intensity", value, f"one of {', '.join(LIGHT_LEVELS)} or a factor from 0.1 to 3")


def light_gains(variations: dict[str, object]) -> np.ndarray:
    """Combined per-channel gains of the light axes among `variations` (ones when none applies)."""
    gains = np.ones(3)
    if "light_colour" in variations:
        gains = gains * light_colour_gains(variations["light_colour"])
    if "light_intensity" in variations:
        gains = gains * light_intensity_gain(variations["light_intensity"])
    return gains
