"""Objects from a segmentation: find them in the visual hull, gather each one's pixels in every view,
and fit a primitive (box, cylinder, sphere) to those silhouettes.

Finding: the hull's columns taller than `segment.FLAT_M`, grouped into connected regions seen from
above. Each region's hull, projected into a view, says which foreground pixels are its own.

Fitting, in two passes: first each region alone (a region fitted badly is tried as two neighbours
whose hulls merged), then every object again with the pixels claimed by the first fits, so where two
objects overlap in a view the nearer one owns the pixels and the farther one cannot judge them. A fit
is the primitive's parameters (position on the table, yaw, dimensions) that best match the object's
silhouettes in all views at once (mean intersection over union, pixels covered by the robot or a
nearer object not counted), found by Nelder-Mead; the primitive with the best match wins (a sphere
only when clearly better). What fits badly, is flat, is seen in fewer than two views, or overlaps a
better-fitted object on the table is a hull ghost, not an object.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np

from datafarm.agents.builtin.vision.optimize import nelder_mead
from datafarm.agents.builtin.vision.raster import (
    Solid,
    box,
    cylinder,
    fill,
    polygon,
    sphere,
)
from datafarm.agents.builtin.vision.segment import FLAT_M, Segmentation

MIN_CELLS = 8
"""Fewest hull columns a region needs to be taken for an object."""
REGION_MARGIN_PX = 4
"""Pixels an object's hull projection is grown by before it claims foreground."""
ROI_MARGIN_PX = 16
"""Pixels around an object's region that its fit looks at."""
CLAIM_GROW = 0.4
"""How much taller than its hull an object's claim on foreground pixels reaches (fraction of its height)."""
OFF_TABLE_MATCH = 3.0
"""Mahalanobis distance (Lab) within which a pixel beyond the table top has an object's colour."""
FIRST_PASS_IOU = 0.45
"""Worst mean IoU of a first-pass fit (its silhouettes may still share pixels with a neighbour's)."""
SPLIT_BELOW = 0.85
"""A first fit below this mean IoU may be two neighbouring objects whose hulls merged."""
SPLIT_GAIN = 0.05
"""How much better (mean IoU) both halves must fit for a region to be split."""
SPLIT_DEPTH = 2
"""How many times a region may be split."""
GROW_SECOND = 0.1
"""How much bigger than its first fit an object's claim on pixels is in the second pass (fraction)."""
MIN_SIZE_M = 0.012
"""Narrowest footprint side of an object, metres."""
MIN_VIEWS = 2
"""Fewest views an object must be seen in (one view cannot place it)."""
FIT_SIDE_PX = 96
"""Longest side of the region a fit compares silhouettes on (larger ones are scaled down)."""
MOSTLY_HIDDEN = 0.6
"""A view where nearer objects claim more than this share of an object's projection does not judge it."""
MIN_VIEW_PIXELS = 25
"""Fewest foreground pixels a view needs to take part in an object's fit."""
MIN_IOU = 0.7
"""Worst mean silhouette IoU of a fit still taken for an object (lower: a hull ghost)."""
MIN_VIEW_IOU = 0.6
"""Worst silhouette IoU in each of at least MIN_VIEWS views."""
OVERLAP = 0.2
"""Largest share of the smaller footprint two objects may overlap by."""
KINDS = ("box", "cylinder", "sphere")
"""Primitive shapes fitted."""
SPHERE_MARGIN = 0.03
"""A sphere must beat the best other primitive by this IoU to be chosen (the fewest parameters)."""


@dataclass
class Region:
    """One object's share of the hull."""

    cells: np.ndarray
    """(N x 2) world (x, y) of its hull columns."""
    heights: np.ndarray
    """Hull height over each column, metres."""
    cell_size: float
    """Side of a hull column, metres."""

    @property
    def centre(self) -> np.ndarray:
        """Footprint centre, weighted by column height (the hull's inflation is thin)."""
        w = self.heights / self.heights.sum()
        return (self.cells * w[:, None]).sum(axis=0)

    def solid(self, owner: str, grow: float = 0.0) -> Solid:
        """The region's hull as a convex solid (footprint cells up to their heights), its top raised
        by `grow` times its height (a hull carved by a view that missed part of the object is low)."""
        h = self.cell_size / 2
        corners = []
        for (x, y), z in zip(self.cells, self.heights * (1.0 + grow)):
            for dx in (-h, h):
                for dy in (-h, h):
                    corners.append((x + dx, y + dy, 0.0))
                    corners.append((x + dx, y + dy, z))
        return Solid(np.array(corners), owner)


@dataclass
class ViewEvidence:
    """What one view shows of one object."""

    view: int
    """Index of the view."""
    origin: tuple[int, int]
    """(x, y) of the ROI's top-left pixel."""
    observed: np.ndarray
    """float32 ROI: 1 where the object's foreground is."""
    care: np.ndarray
    """float32 ROI: 1 where a pixel can be judged."""
    pixels: int
    """Foreground pixels of the object in the view."""
    scale: float = 1.0
    """ROI pixels per image pixel (large ROIs are judged at a reduced resolution, for speed)."""


@dataclass
class Fit:
    """A primitive fitted to one object's silhouettes."""

    kind: str
    """`box`, `cylinder` or `sphere`."""
    params: dict[str, float]
    """x, y (footprint centre), yaw, and the kind's sizes: box sx, sy, sz; cylinder r, h; sphere r."""
    iou: list[float] = field(default_factory=list)
    """Silhouette IoU per view that took part."""

    @property
    def score(self) -> float:
        """Mean IoU over the views."""
        return float(np.mean(self.iou)) if self.iou else 0.0

    @property
    def height(self) -> float:
        """Height of the primitive, metres."""
        return {"box": lambda p: p["sz"], "cylinder": lambda p: p["h"], "sphere": lambda p: 2 * p["r"]}[self.kind](self.params)

    @property
    def extents(self) -> tuple[float, float, float]:
        """(size along its x, along its y, height), metres."""
        p = self.params
        if self.kind == "box":
            return p["sx"], p["sy"], p["sz"]
        d = 2 * p["r"]
        return d, d, self.height


def primitive_solid(kind: str, p: dict[str, float], owner: str = "object") -> Solid:
    """The fitted primitive as a convex solid in the world."""
    if kind == "sphere":
        return sphere((p["x"], p["y"], p["r"]), p["r"], owner)
    m = np.eye(4)
    yaw = p.get("yaw", 0.0)
    c, s = math.cos(yaw), math.sin(yaw)
    m[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    if kind == "box":
        m[:3, 3] = (p["x"], p["y"], p["sz"] / 2)
        return box(m, (p["sx"] / 2, p["sy"] / 2, p["sz"] / 2), owner)
    m[:3, 3] = (p["x"], p["y"], p["h"] / 2)
    return cylinder(m, p["r"], p["h"] / 2, owner)


@dataclass
class FoundObject:
    """An object found in the clip: its hull region, its evidence per view and its best fit."""

    region: Region
    """Its share of the visual hull."""
    evidence: list[ViewEvidence]
    """Its silhouettes."""
    fits: dict[str, Fit]
    """Every primitive fitted, by kind."""
    best: Fit
    """The chosen fit."""
    colour: tuple[float, float, float] = (0.5, 0.5, 0.5)
    """Its colour (sRGB 0-1) from its pixels' lit side."""
    masks: dict[int, np.ndarray] = field(default_factory=dict)
    """View index -> bool full-frame mask of its own pixels."""


def regions(seg: Segmentation) -> list[Region]:
    """Connected regions of hull columns taller than FLAT_M, seen from above."""
    hull = seg.hull
    tall = (hull.height > FLAT_M).astype(np.uint8)
    count, labels = cv2.connectedComponents(tall, connectivity=8)
    grid, step = hull.grid, hull.step
    out = []
    for c in range(1, count):
        rows, cols = np.nonzero(labels == c)
        if len(rows) < MIN_CELLS:
            continue
        xy = grid.xy_of((cols + 0.5) * step - 0.5, (rows + 0.5) * step - 0.5)
        out.append(Region(xy, hull.height[rows, cols].astype(float), grid.res * step))
    return out


def _evidence(seg: Segmentation, solids: Sequence[Solid], margin_px: int = REGION_MARGIN_PX,
              occlusion: bool = True) -> list[list[ViewEvidence]]:
    """Each object's silhouettes: foreground inside its solid's projection (grown by `margin_px`),
    minus, with `occlusion`, what nearer objects' solids claim (those pixels cannot be judged for it)."""
    out: list[list[ViewEvidence]] = [[] for _ in solids]
    kernel = np.ones((2 * margin_px + 1,) * 2, np.uint8)
    for vi, (view, masks) in enumerate(zip(seg.views, seg.masks)):
        cam = view.camera
        claims = []
        for solid in solids:
            m = np.zeros((cam.height, cam.width), np.uint8)
            poly = polygon(cam, solid)
            if poly is not None:
                fill(m, poly, 1)
            claims.append((cv2.dilate(m, kernel) > 0, float(np.linalg.norm(solid.centre - cam.centre))))
        for k, (claim, depth) in enumerate(claims):
            if not claim.any():
                continue
            nearer = np.zeros_like(claim)
            for j, (other, d) in enumerate(claims):
                if occlusion and j != k and d < depth:
                    nearer |= other
            if (claim & nearer).sum() > MOSTLY_HIDDEN * claim.sum():
                continue  # mostly behind a nearer object here: this view cannot judge it
            ys, xs = np.nonzero(claim)
            x0, y0 = max(0, xs.min() - ROI_MARGIN_PX), max(0, ys.min() - ROI_MARGIN_PX)
            x1, y1 = min(cam.width, xs.max() + ROI_MARGIN_PX + 1), min(cam.height, ys.max() + ROI_MARGIN_PX + 1)
            own = _fill_holes(masks.foreground & claim) & ~nearer  # a solid's silhouette has no holes
            care = (masks.care | own) & ~nearer
            # foreground outside every claim is some other thing's: it cannot be judged for this object
            claimed = np.zeros_like(claim)
            for other, _ in claims:
                claimed |= other
            if occlusion:
                care &= ~(masks.foreground & ~claim & ~claimed)
            pixels = int(own.sum())
            if pixels < MIN_VIEW_PIXELS:
                continue
            roi = (slice(y0, y1), slice(x0, x1))
            own_roi, care_roi = _beyond_table(view, masks, own[roi], care[roi], ~nearer[roi], roi)
            scale = min(1.0, FIT_SIDE_PX / max(own_roi.shape))
            own_f, care_f = own_roi.astype(np.float32), care_roi.astype(np.float32)
            if scale < 1.0:
                size = (max(1, round(own_f.shape[1] * scale)), max(1, round(own_f.shape[0] * scale)))
                own_f = cv2.resize(own_f, size, interpolation=cv2.INTER_AREA)
                care_f = cv2.resize(care_f, size, interpolation=cv2.INTER_AREA)
            out[k].append(ViewEvidence(vi, (int(x0), int(y0)), own_f, care_f, pixels, scale))
    return out


def _fill_holes(mask: np.ndarray) -> np.ndarray:
    filled = mask.astype(np.uint8)
    contours, _ = cv2.findContours(filled, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    cv2.drawContours(filled, contours, -1, 1, thickness=cv2.FILLED)
    return filled > 0


def _beyond_table(view, masks, own: np.ndarray, care: np.ndarray, free: np.ndarray,
                  roi: tuple[slice, slice]) -> tuple[np.ndarray, np.ndarray]:
    """Judge the ROI's pixels beyond the table top (walls, floor, or the object standing out against
    them): those of the object's colour joined to its pixels are its own, the others are not."""
    beyond = ~masks.care[roi] & ~view.robot[roi] & free
    if not beyond.any():
        return own, care
    lab = view.lab[roi]
    inner = cv2.erode(own.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    samples = lab[inner if inner.sum() >= 10 else own].reshape(-1, 3).astype(np.float64)
    if len(samples) < 10:
        return own, care
    mean = samples.mean(axis=0)
    cov = np.cov(samples.T) + np.eye(3) * 4.0
    d = lab.reshape(-1, 3) - mean
    maha = np.sqrt(np.einsum("ij,jk,ik->i", d, np.linalg.inv(cov), d)).reshape(own.shape)
    candidate = (own | (beyond & (maha < OFF_TABLE_MATCH))).astype(np.uint8)
    _, labels = cv2.connectedComponents(candidate, connectivity=8)
    joined = np.isin(labels, np.unique(labels[own])) & (labels > 0)
    return own | (beyond & joined), care | beyond


def silhouette_iou(seg: Segmentation, evidence: Sequence[ViewEvidence], solid: Solid) -> list[float]:
    """Soft IoU of a solid's silhouette with the object's silhouette in each view of `evidence`."""
    out = []
    for ev in evidence:
        cam = seg.views[ev.view].camera
        pred = np.zeros(ev.observed.shape, np.uint8)
        poly = polygon(cam, solid)
        if poly is not None:
            fill(pred, (poly - np.asarray(ev.origin, float)) * ev.scale, 255, smooth=True)
        p = pred.astype(np.float32) / 255.0
        inter = float((np.minimum(p, ev.observed) * ev.care).sum())
        union = float((np.maximum(p, ev.observed) * ev.care).sum())
        out.append(inter / union if union > 0 else 0.0)
    return out


def _pack(kind: str, v: np.ndarray) -> dict[str, float]:
    if kind == "box":
        return {"x": v[0], "y": v[1], "yaw": v[2], "sx": abs(v[3]), "sy": abs(v[4]), "sz": abs(v[5])}
    if kind == "cylinder":
        return {"x": v[0], "y": v[1], "yaw": 0.0, "r": abs(v[2]), "h": abs(v[3])}
    return {"x": v[0], "y": v[1], "yaw": 0.0, "r": abs(v[2])}


def fit_kind(seg: Segmentation, evidence: Sequence[ViewEvidence], region: Region, kind: str,
             start: Fit | None = None, iterations: int = 200) -> Fit:
    """The best `kind` primitive for the object's silhouettes, from its hull region (or a previous fit)."""
    cx, cy = region.centre
    pts = region.cells.astype(np.float32)
    _, (w, h), angle = cv2.minAreaRect(pts) if len(pts) >= 3 else ((cx, cy), (0.03, 0.03), 0.0)
    w, h = max(w, 0.01), max(h, 0.01)
    top = float(np.percentile(region.heights, 90))
    starts: list[tuple[np.ndarray, np.ndarray]]
    # steps of a centimetre suit the objects a gripper handles; a cabinet's loose hull needs longer ones
    reach = max(0.01, 0.08 * max(w, h))
    if kind == "box":
        yaw = math.radians(angle)
        starts = [(np.array([cx, cy, yaw + d, 0.8 * w, 0.8 * h, 0.85 * top]), np.array([reach, reach, 0.2, reach, reach, reach]))
                  for d in (0.0, math.pi / 4)]
    elif kind == "cylinder":
        r = 0.4 * math.sqrt(w * h)
        starts = [(np.array([cx, cy, r, 0.85 * top]), np.array([0.01, 0.01, 0.005, 0.01]))]
    else:
        r = min(0.4 * math.sqrt(w * h), 0.45 * top)
        starts = [(np.array([cx, cy, r]), np.array([0.01, 0.01, 0.005]))]
    if start is not None:
        q = start.params
        vector = {"box": [q.get("x"), q.get("y"), q.get("yaw"), q.get("sx"), q.get("sy"), q.get("sz")],
                  "cylinder": [q.get("x"), q.get("y"), q.get("r"), q.get("h")], "sphere": [q.get("x"), q.get("y"), q.get("r")]}
        starts = [(np.array(vector[kind], float), starts[0][1] / 2)]

    def cost(v: np.ndarray) -> float:
        p = _pack(kind, v)
        if min(abs(x) for k, x in p.items() if k not in ("x", "y", "yaw")) < 0.003:
            return 2.0
        return 1.0 - float(np.mean(silhouette_iou(seg, evidence, primitive_solid(kind, p))))

    best_v, best_c = None, math.inf
    for x0, steps in starts:
        v, c = nelder_mead(cost, x0, steps, iterations=iterations)
        v, c = nelder_mead(cost, v, steps / 4, iterations=iterations // 2)  # restart: NM stalls on flat pixel steps
        if c < best_c:
            best_v, best_c = v, c
    params = _pack(kind, best_v)
    if kind == "box":  # report the yaw in (-pi/4, pi/4], swapping sides to match
        yaw = math.remainder(params["yaw"], math.pi / 2)
        if abs(math.remainder(params["yaw"] - yaw, math.pi)) > 1e-6:
            params["sx"], params["sy"] = params["sy"], params["sx"]
        params["yaw"] = yaw
    params = {k: float(v) for k, v in params.items()}
    return Fit(kind, params, silhouette_iou(seg, evidence, primitive_solid(kind, params)))


def _colour(seg: Segmentation, evidence: Sequence[ViewEvidence]) -> tuple[float, float, float]:
    """The object's colour: the median of the most colourful half of its inner pixels (away from its
    outline, where the background bleeds in), over its views."""
    samples = []
    for ev in evidence:
        x0, y0 = ev.origin
        h, w = round(ev.observed.shape[0] / ev.scale), round(ev.observed.shape[1] / ev.scale)
        observed = cv2.resize(ev.observed, (w, h), interpolation=cv2.INTER_LINEAR) if ev.scale < 1 else ev.observed
        own = (observed > 0.5).astype(np.uint8)
        for size in (5, 3, 1):
            inner = cv2.erode(own, np.ones((size, size), np.uint8)) > 0
            if inner.sum() >= 12:
                break
        rgb = seg.views[ev.view].rgb[y0:y0 + h, x0:x0 + w]
        inner = inner[: rgb.shape[0], : rgb.shape[1]]
        samples.append(rgb[inner].astype(np.float64))
    rgb = np.vstack(samples).astype(np.float32) / 255.0
    hsv = cv2.cvtColor(rgb.reshape(-1, 1, 3), cv2.COLOR_RGB2HSV).reshape(-1, 3)
    # hue and saturation from the most saturated half (shaded and lit faces, without the white of
    # specular highlights), brightness from the lit faces
    vivid = hsv[:, 1] >= np.median(hsv[:, 1])
    angle = np.radians(hsv[vivid, 0])
    hue = float(np.degrees(np.arctan2(np.sin(angle).mean(), np.cos(angle).mean())) % 360.0)
    colour = np.array([[[hue, float(np.median(hsv[vivid, 1])), float(np.percentile(hsv[:, 2], 75))]]], np.float32)
    out = cv2.cvtColor(colour, cv2.COLOR_HSV2RGB).reshape(3)
    return tuple(float(v) for v in np.clip(out, 0, 1))  # type: ignore[return-value]


def _split(region: Region) -> list[Region]:
    """The region's columns in two groups (2-means on their positions)."""
    if len(region.cells) < 2 * MIN_CELLS:
        return []
    cv2.setRNGSeed(0)
    _, labels, _ = cv2.kmeans(region.cells.astype(np.float32), 2, None,
                              (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 30, 1e-4), 3, cv2.KMEANS_PP_CENTERS)
    labels = labels.ravel()
    parts = [Region(region.cells[labels == k], region.heights[labels == k], region.cell_size) for k in (0, 1)]
    return parts if all(len(p.cells) >= MIN_CELLS for p in parts) else []


def _fit_regions(seg: Segmentation, regions_: Sequence[Region], kinds: Sequence[str], views_needed: int,
                 occlusion: bool) -> list[Fit | None]:
    """The best first-pass fit of each region (None where too few views see it)."""
    out: list[Fit | None] = []
    for region, evidence in zip(regions_, _evidence(seg, [r.solid("r", CLAIM_GROW) for r in regions_],
                                                    occlusion=occlusion)):
        out.append(_choose({k: fit_kind(seg, evidence, region, k, iterations=120) for k in kinds})
                   if len(evidence) >= views_needed else None)
    return out


def _first_fits(seg: Segmentation, region: Region, kinds: Sequence[str], views_needed: int,
                depth: int) -> list[tuple[Region, Fit]]:
    """First-pass fits of a hull region; a region fitted badly is tried as two objects side by side
    (the hulls of neighbours merge) and kept split when both halves fit clearly better."""
    [fit] = _fit_regions(seg, [region], kinds, views_needed, occlusion=False)
    if fit is None:
        return []
    if depth > 0 and fit.score < SPLIT_BELOW:
        parts = _split(region)
        fits = _fit_regions(seg, parts, kinds, views_needed, occlusion=True) if parts else []
        if fits and all(f is not None and f.score > fit.score + SPLIT_GAIN for f in fits):
            out: list[tuple[Region, Fit]] = []
            for part, part_fit in zip(parts, fits):
                if part_fit.score < SPLIT_BELOW:  # type: ignore[union-attr]
                    out += _first_fits(seg, part, kinds, views_needed, depth - 1)
                elif _standing(part_fit):  # type: ignore[arg-type]
                    out.append((part, part_fit))  # type: ignore[arg-type]
            return out
    if fit.score >= FIRST_PASS_IOU and _standing(fit):
        return [(region, fit)]
    return []


def _choose(fits: dict[str, Fit]) -> Fit:
    """The best fit; a sphere only when clearly better (it has the fewest parameters)."""
    others = [f for k, f in fits.items() if k != "sphere"]
    best = max(others, key=lambda f: f.score) if others else fits["sphere"]
    if "sphere" in fits and fits["sphere"].score > best.score + SPHERE_MARGIN:
        best = fits["sphere"]
    return best


def _standing(fit: Fit) -> bool:
    """A real object: taller than a flat thing and at least MIN_SIZE_M across (edge slivers are not)."""
    return fit.height > FLAT_M and min(fit.extents[:2]) >= MIN_SIZE_M


def _grown(fit: Fit) -> Solid:
    """A fit's solid made a little bigger (its claim on pixels in the second pass)."""
    p = dict(fit.params)
    for key in ("sx", "sy", "sz", "r", "h"):
        if key in p:
            p[key] = p[key] * (1 + GROW_SECOND) + 0.01
    return primitive_solid(fit.kind, p)


def find_objects(seg: Segmentation, kinds: Sequence[str] = KINDS) -> list[FoundObject]:
    """Every object of the segmentation with its primitive fits, ordered by position (x, then y)."""
    views_needed = min(MIN_VIEWS, len(seg.views))
    regs = regions(seg)
    # pass 1: silhouettes claimed by the (loose) hull regions
    first: list[tuple[Region, Fit]] = []
    for region in regs:
        first += _first_fits(seg, region, kinds, views_needed, SPLIT_DEPTH)
    # pass 2: silhouettes claimed by the (tight) first fits, so neighbours stop sharing pixels
    solids = [_grown(f) for _, f in first]
    found = []
    for (region, fit), evidence in zip(first, _evidence(seg, solids, margin_px=2)):
        if len(evidence) < views_needed:
            continue
        fits = {k: fit_kind(seg, evidence, region, k, start=fit if fit.kind == k else None) for k in kinds}
        best = _choose(fits)
        if best.score < MIN_IOU or sum(v >= MIN_VIEW_IOU for v in best.iou) < views_needed or not _standing(best):
            continue
        masks = {}
        for ev in evidence:
            cam = seg.views[ev.view].camera
            full = np.zeros((cam.height, cam.width), bool)
            x0, y0 = ev.origin
            h, w = ev.observed.shape
            h, w = round(h / ev.scale), round(w / ev.scale)
            observed = cv2.resize(ev.observed, (w, h), interpolation=cv2.INTER_LINEAR) if ev.scale < 1 else ev.observed
            full[y0:y0 + h, x0:x0 + w] = (observed > 0.5)[: cam.height - y0, : cam.width - x0]
            masks[ev.view] = full
        found.append(FoundObject(region, evidence, fits, best, _colour(seg, evidence), masks))
    found = _without_overlaps(found)
    found.sort(key=lambda o: (round(o.best.params["x"], 3), round(o.best.params["y"], 3)))
    return found


def footprint(fit: Fit) -> np.ndarray:
    """The fit's footprint on the table as a polygon (N x 2 world x, y)."""
    p = fit.params
    if fit.kind == "box":
        c, s = math.cos(p["yaw"]), math.sin(p["yaw"])
        corners = np.array([[sx * p["sx"] / 2, sy * p["sy"] / 2] for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))])
        return corners @ np.array([[c, s], [-s, c]]) + (p["x"], p["y"])
    a = np.linspace(0, 2 * math.pi, 32, endpoint=False)
    return np.column_stack([p["x"] + p["r"] * np.cos(a), p["y"] + p["r"] * np.sin(a)])


def _without_overlaps(found: list[FoundObject]) -> list[FoundObject]:
    """Solid objects do not overlap: of two whose footprints share more than OVERLAP of the smaller's
    area, the worse fit is a hull ghost (a sliver of the other's silhouette)."""
    order = sorted(found, key=lambda o: -o.best.score)
    kept: list[FoundObject] = []
    for obj in order:
        mine = footprint(obj.best).astype(np.float32)
        area = cv2.contourArea(mine)
        clash = False
        for other in kept:
            theirs = footprint(other.best).astype(np.float32)
            shared, _ = cv2.intersectConvexConvex(mine, theirs)
            if shared > OVERLAP * min(area, cv2.contourArea(theirs)):
                clash = True
                break
        if not clash:
            kept.append(obj)
    return kept
