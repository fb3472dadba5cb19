"""Segmentation of a calibrated multi-view clip against the table and the robot.

The table top is the world's z = 0 plane, so every view can be warped onto a top-down grid of it.
Where a cell of that grid is table, the views agree on its colour (shadows and the table's texture
included, since they lie on the plane); where something stands above the table, the views see
different things there (parallax). So:

1. Each view (a temporal median of a few frames, in CIE Lab and linear RGB) is warped onto the plane
   grid; cells the robot covers in a view (its at-rest silhouette, known from G's robot and cameras)
   are left out. Each camera's colour gains are matched to the others' on the table around the origin.
2. The table's colours are the colour clusters of the agreeing cells around the origin (the origin
   lies on the top) that are spread over that area (a plain top, a wood grain, a checked cloth), not
   those found in one place (an object's top seen alike from everywhere), plus their shades. A colour
   is table when it is a shade of a table colour (`shade_mismatch`: the same chromaticity, from
   `SHADE_MIN` to `SHADE_MAX` times as bright). The table region is the agreeing, table-coloured
   region around the origin, holes filled, made convex, kept `EDGE_MARGIN_M` off its edge.
3. A cell is *known* when at least one view sees a table colour there; its background colour is that
   view's. A cell no view sees as table is covered from every view (an object's footprint, or a deep
   shadow, a printed board, a stain: step 5 sorts these out). Cells known to be flat (a board the clip
   describes) are known, with the views' median colour as background.
4. A pixel is foreground when it lies over the table region and either differs from its cell's
   background (parallax: it sees something above the table), or its cell is covered from every view.
5. A visual hull of the parallax evidence alone (covered cells cannot be judged) shows what stands on
   the table; covered cells with nothing standing over them are flat things: background. Then the
   masks are made again, and their visual hull gives every foreground region its height.

The result: per view, a foreground mask (objects only; the robot is `care = False`) and the hull's
top-down height map, from which `objects` finds and fits the objects.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from datafarm.agents.builtin.vision.camera import Camera
from datafarm.agents.builtin.vision.raster import Solid, mask

GRID_M = 0.003
"""Plane grid resolution, metres per cell."""
GRID_HALF_M = 1.0
"""The plane grid spans the world origin +- this, metres (the origin lies on the table top)."""
AGREE = 8.0
"""Largest colour distance (weighted Lab, see `colour_distance`) between views that still agree."""
ALIKE = 5.0
"""Largest plain Lab distance between views for a cell to give the table's colours."""
CHROMA_MAX = 0.09
"""Largest colour angle (residual over brightness, linear RGB) of a shade of a table colour."""
CHROMA_FLOOR = 0.01
"""Brightness (linear RGB) added to a pixel's before dividing by it: noise dominates dark pixels' colour."""
SHADE_MIN = 0.45
"""Darkest shade of the table still taken for table (deep shadow), as a fraction of its brightest colour."""
SHADE_SLACK = 0.15
"""Log-brightness beyond the shade range that doubles a colour's mismatch."""
SHADE_MAX = 1.35
"""Brightest shade of a table colour still taken for table (a lit patch), as a fraction."""
DIFFERS = 12.0
"""Smallest Lab distance of a pixel from its cell's background colour that makes it foreground."""
CLUSTERS = 8
"""Colour clusters tried for the table."""
EDGE_MARGIN_M = 0.02
"""How far inside the table top's visible edge the judged region ends, metres."""
SEED_RADIUS_M = 0.4
"""Radius around the world origin (on the table top) whose agreeing cells give the table's colours, metres."""
MIN_SHARE = 0.03
"""Smallest share of the seed's cells a table colour cluster has."""
SPREAD_MIN = 0.55
"""How spread out over the seed a table colour must be: the standard deviation of its cells' positions
at least this fraction of that of all the seed's cells."""
FLAT_M = 0.015
"""Covered cells under nothing taller than this (metres) hold something flat."""
HULL_VOXEL_M = 0.005
"""Voxel side of the visual hull, metres."""
HULL_TOP_M = 0.45
"""Highest point of the visual hull above the table, metres (taller things are not table objects)."""
ROBOT_MARGIN_PX = 3
"""Pixels the robot's silhouette is grown by (its drawn geometry is a close, not exact, match)."""


def to_lab(rgb: np.ndarray) -> np.ndarray:
    """CIE Lab (L 0-100) of an RGB image (uint8 or float 0-255)."""
    return cv2.cvtColor((np.asarray(rgb, np.float32) / 255.0).astype(np.float32), cv2.COLOR_RGB2Lab)


def to_linear(rgb: np.ndarray) -> np.ndarray:
    """Linear RGB (0-1) of sRGB values (0-255)."""
    c = np.asarray(rgb, np.float32) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4).astype(np.float32)


def lab_to_linear(lab: np.ndarray) -> np.ndarray:
    """Linear RGB (0-1) of Lab colours (any shape ... x 3)."""
    lab = np.asarray(lab, np.float32)
    rgb = cv2.cvtColor(lab.reshape(-1, 1, 3), cv2.COLOR_Lab2RGB).reshape(lab.shape)
    return to_linear(np.clip(rgb, 0, 1) * 255.0)


def shade_mismatch(linear: np.ndarray, reference: np.ndarray, darkest: float | None = None) -> np.ndarray:
    """How far linear RGB colours are from being a shade of `reference` (a linear RGB colour): 0 for
    the reference under any light in [SHADE_MIN, SHADE_MAX] times its brightness, growing with the
    angle between the colours (as a fraction of the pixel's brightness) and outside that range.
    `darkest` overrides SHADE_MIN."""
    x = np.asarray(linear, np.float32)
    c = np.asarray(reference, np.float32)
    t = (x @ c) / max(float(c @ c), 1e-9)
    residual = np.linalg.norm(x - t[..., None] * c, axis=-1) / (np.linalg.norm(x, axis=-1) + CHROMA_FLOOR)
    below = np.clip(np.log(np.maximum(t, 1e-4) / (SHADE_MIN if darkest is None else darkest)), None, 0.0)
    above = np.clip(np.log(np.maximum(t, 1e-4) / SHADE_MAX), 0.0, None)
    return residual / CHROMA_MAX + np.abs(below) / SHADE_SLACK + above / SHADE_SLACK


def linear_to_lab(linear: np.ndarray) -> np.ndarray:
    """CIE Lab of linear RGB (0-1) values."""
    c = np.clip(np.asarray(linear, np.float32), 0.0, 1.0)
    srgb = np.where(c <= 0.0031308, 12.92 * c, 1.055 * np.power(c, 1 / 2.4) - 0.055).astype(np.float32)
    return cv2.cvtColor(srgb.reshape(-1, 1, 3) if srgb.ndim != 3 else srgb, cv2.COLOR_RGB2Lab).reshape(c.shape)


def colour_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance of Lab colours with lightness half weighted (shading changes lightness most)."""
    d = np.asarray(a, np.float32) - np.asarray(b, np.float32)
    return np.sqrt((0.5 * d[..., 0]) ** 2 + d[..., 1] ** 2 + d[..., 2] ** 2)


@dataclass
class View:
    """One calibrated view: its frame, in Lab, and where the robot covers it."""

    camera: Camera
    """The camera."""
    rgb: np.ndarray
    """H x W x 3 uint8 frame (a temporal median of a few frames)."""
    lab: np.ndarray
    """The frame in CIE Lab, lightly blurred."""
    robot: np.ndarray
    """bool H x W: pixels the robot covers (grown by ROBOT_MARGIN_PX)."""
    linear: np.ndarray
    """The frame in linear RGB (0-1), lightly blurred: shading scales it."""

    @classmethod
    def of(cls, camera: Camera, frames: Sequence[np.ndarray], robot: Sequence[Solid]) -> View:
        """A view from a few frames of one camera (their median) and the robot's solids."""
        rgb = np.median(np.stack([np.asarray(f, np.float32) for f in frames]), axis=0)
        if rgb.shape[:2] != (camera.height, camera.width):
            camera = camera.scaled(rgb.shape[1], rgb.shape[0])
        blurred = cv2.GaussianBlur(rgb, (0, 0), 1.0)
        covered = mask(camera, robot).astype(np.uint8)
        if ROBOT_MARGIN_PX:
            covered = cv2.dilate(covered, np.ones((2 * ROBOT_MARGIN_PX + 1,) * 2, np.uint8))
        return cls(camera, np.clip(rgb + 0.5, 0, 255).astype(np.uint8), to_lab(blurred), covered > 0,
                   to_linear(blurred))


@dataclass(frozen=True)
class PlaneGrid:
    """A top-down grid over the table plane: cell (row i, column j) is at x = x0 + j*res, y = y0 + i*res."""

    x0: float
    y0: float
    res: float
    nx: int
    ny: int

    @classmethod
    def around_origin(cls, half: float = GRID_HALF_M, res: float = GRID_M) -> PlaneGrid:
        """A square grid centred on the world origin."""
        n = round(2 * half / res)
        return cls(-half, -half, res, n, n)

    def points(self, z: float = 0.0) -> np.ndarray:
        """World points (ny*nx x 3) of the cells, row-major."""
        xs = self.x0 + self.res * np.arange(self.nx)
        ys = self.y0 + self.res * np.arange(self.ny)
        X, Y = np.meshgrid(xs, ys)
        return np.column_stack([X.ravel(), Y.ravel(), np.full(X.size, z)])

    def cell_of(self, xy: np.ndarray) -> np.ndarray:
        """Fractional (column, row) of world (x, y) points (N x 2)."""
        xy = np.asarray(xy, float)
        return np.column_stack([(xy[:, 0] - self.x0) / self.res, (xy[:, 1] - self.y0) / self.res])

    def xy_of(self, cols: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """World (x, y) of cells (N x 2)."""
        return np.column_stack([self.x0 + self.res * np.asarray(cols, float), self.y0 + self.res * np.asarray(rows, float)])


@dataclass
class Warp:
    """One view warped onto the plane grid."""

    lab: np.ndarray
    """ny x nx x 3: the colour (Lab) each cell shows in the view."""
    linear: np.ndarray
    """ny x nx x 3: the same in linear RGB."""
    valid: np.ndarray
    """ny x nx bool: the cell is in the view and the robot does not cover it there."""
    cell_x: np.ndarray
    """H x W float32: grid column of each pixel's ray on the plane (NaN where it misses the plane)."""
    cell_y: np.ndarray
    """H x W float32: grid row of each pixel's ray on the plane."""


def warp(view: View, grid: PlaneGrid) -> Warp:
    """The view on the plane grid, and each pixel's plane cell."""
    cam = view.camera
    pix, depth = cam.project(grid.points())
    mx = pix[:, 0].reshape(grid.ny, grid.nx).astype(np.float32)
    my = pix[:, 1].reshape(grid.ny, grid.nx).astype(np.float32)
    inside = (mx >= 0) & (my >= 0) & (mx <= cam.width - 1) & (my <= cam.height - 1) & (depth.reshape(mx.shape) > 0)
    mx = np.where(inside, mx, -10).astype(np.float32)
    my = np.where(inside, my, -10).astype(np.float32)
    lab = cv2.remap(view.lab, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    linear = cv2.remap(view.linear, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    robot = cv2.remap(view.robot.astype(np.uint8), mx, my, cv2.INTER_NEAREST, borderValue=1) > 0
    world, ok = cam.plane_points(cam.pixel_grid())
    cells = grid.cell_of(world[:, :2])
    cells[~ok] = np.nan
    return Warp(lab, linear, inside & ~robot, cells[:, 0].reshape(cam.height, cam.width).astype(np.float32),
                cells[:, 1].reshape(cam.height, cam.width).astype(np.float32))


@dataclass
class TableModel:
    """What the views say about the table plane."""

    grid: PlaneGrid
    """The plane grid."""
    region: np.ndarray
    """ny x nx bool: the table top (as far as the views see it)."""
    colours: np.ndarray
    """k x 3 Lab centres of the table's colour clusters."""
    known: np.ndarray
    """ny x nx bool: some view sees table (or flat background) there."""
    flat: np.ndarray
    """ny x nx bool: cells known to hold something flat (a printed board): background, whatever their colour."""
    background: np.ndarray
    """ny x nx x 3 Lab: the background colour of each known cell."""
    median: np.ndarray
    """ny x nx x 3 Lab: the median colour of the views at each cell."""
    agree: np.ndarray
    """ny x nx bool: at least two views see the cell and agree on its colour."""
    seen_by_two: np.ndarray
    """ny x nx bool: at least two views see the cell."""

    def mismatch(self, linear: np.ndarray) -> np.ndarray:
        """How unlike any shade of a table colour linear RGB colours are (below 1: table). Shades go
        down to SHADE_MIN of the brightest table colour, whichever colour they are a shade of."""
        refs = lab_to_linear(self.colours)
        brightest = float(np.max(refs.sum(axis=-1)))
        return np.min(np.stack([shade_mismatch(linear, c, SHADE_MIN * brightest / max(float(c.sum()), 1e-6))
                                for c in refs], axis=-1), axis=-1)


def _largest_component(mask_: np.ndarray) -> np.ndarray:
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask_.astype(np.uint8), connectivity=4)
    if count <= 1:
        return np.zeros_like(mask_, bool)
    best = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    return labels == best


def _fill_holes(mask_: np.ndarray) -> np.ndarray:
    filled = mask_.astype(np.uint8).copy()
    contours, _ = cv2.findContours(filled, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    cv2.drawContours(filled, contours, -1, 1, thickness=cv2.FILLED)
    return filled > 0


def _table_colours(samples: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Lab centres of the colour clusters spread over the seed region (`cells`: (row, col) per sample).

    A table colour (its plain colour, each shade of a grain, each colour of a check) is found all over
    the seed; an object's colour, seen alike from every view over its footprint, only in one place."""
    rng = np.random.default_rng(0)
    pick = rng.choice(len(samples), size=min(len(samples), 60000), replace=False)
    data = samples[pick].astype(np.float32)
    where = cells[pick].astype(np.float64)
    k = min(CLUSTERS, max(1, len(data) // 50))
    cv2.setRNGSeed(0)
    _, labels, centres = cv2.kmeans(data, k, None, (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 40, 0.2), 2,
                                    cv2.KMEANS_PP_CENTERS)
    labels = labels.ravel()
    overall = float(np.sqrt(where.var(axis=0).mean()))
    # a colour and its shades are one surface, judged together: a table colour with its lit bands and
    # shadowed patches lies all over the seed; a large object's lit top and shaded sides (alike in
    # two views where their projections overlap) lie together in one place, however far one face's
    # projection smears on its own
    big = [c for c in range(k) if (labels == c).sum() >= MIN_SHARE * len(labels)]
    lins = lab_to_linear(centres)
    group = {c: c for c in big}

    def root(c: int) -> int:
        while group[c] != c:
            c = group[c]
        return c

    for i, a in enumerate(big):
        for b in big[i + 1:]:
            if min(float(shade_mismatch(lins[a], lins[b])), float(shade_mismatch(lins[b], lins[a]))) < 1.0:
                group[root(b)] = root(a)
    keep = []
    for r in {root(c) for c in big}:
        members = [c for c in big if root(c) == r]
        spread = float(np.sqrt(where[np.isin(labels, members)].var(axis=0).mean()))
        if spread >= SPREAD_MIN * overall:
            keep += members
    if not keep:
        keep = [int(np.argmax(np.bincount(labels, minlength=k)))]
    return centres[sorted(keep)]


def table_model(warps: Sequence[Warp], grid: PlaneGrid, flat: np.ndarray | None = None) -> TableModel:
    """The table region, its colours and each cell's background colour (steps 2 and 3 of the module
    docstring). `flat` marks cells known to hold something flat (a printed board)."""
    labs = np.stack([w.lab for w in warps])
    linears = np.stack([w.linear for w in warps])
    valid = np.stack([w.valid for w in warps])
    seen = valid.sum(axis=0)
    masked = np.where(valid[..., None], labs, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nan_to_num(np.nanmedian(masked, axis=0))
    # a cell agrees when two views see the same colour there (a third may see an object in front of it)
    close = valid & (colour_distance(labs, median[None]) < AGREE)
    agree = close.sum(axis=0) >= 2
    # views seeing different faces of one uniformly coloured object agree on its hue, rarely on its shade
    alike = (valid & (np.linalg.norm(labs - median[None], axis=-1) < ALIKE)).sum(axis=0) >= 2
    flat = np.zeros(agree.shape, bool) if flat is None else flat
    # the table's colours: those spread over the agreeing cells around the origin (on the table by definition)
    xy = grid.points()[:, :2].reshape(grid.ny, grid.nx, 2)
    seed = alike & ~flat & (np.linalg.norm(xy, axis=-1) < SEED_RADIUS_M)
    if seed.sum() < 100:
        seed = agree & ~flat
    rows, cols = np.nonzero(seed)
    colours = _table_colours(median[rows, cols], np.column_stack([rows, cols]))
    model = TableModel(grid, np.zeros(agree.shape, bool), colours, np.zeros(agree.shape, bool), flat,
                       np.zeros_like(median), median, agree, seen >= 2)
    # the table top: the agreeing, table-coloured region around the origin, holes (objects) filled, made convex
    median_linear = lab_to_linear(median)
    tabled = (agree & (model.mismatch(median_linear) < 1.0)) | flat
    closed = cv2.morphologyEx(tabled.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((7, 7), np.uint8)) > 0
    region = _fill_holes(_largest_component(closed))
    rows, cols = np.nonzero(region)
    if len(rows):
        convex = np.zeros(region.shape, np.uint8)
        cv2.fillConvexPoly(convex, cv2.convexHull(np.column_stack([cols, rows]).astype(np.int32)), 1)
        # keep off the edge: pixels there mix the top with its side and the floor
        margin = max(1, round(EDGE_MARGIN_M / grid.res))
        region = cv2.erode(convex, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * margin + 1,) * 2)) > 0
    model.region = region
    # step 3: each cell's background is the view that sees it most like the table
    mismatch = np.where(valid, np.stack([model.mismatch(lin) for lin in linears]), np.inf)
    best = np.argmin(mismatch, axis=0)
    model.known = (np.take_along_axis(mismatch, best[None], axis=0)[0] < 1.0) | flat
    model.background = np.where(flat[..., None], median, np.take_along_axis(labs, best[None, ..., None], axis=0)[0])
    return model


def _sample(image: np.ndarray, cx: np.ndarray, cy: np.ndarray, nearest: bool = False) -> np.ndarray:
    x = np.nan_to_num(cx, nan=-10.0).astype(np.float32)
    y = np.nan_to_num(cy, nan=-10.0).astype(np.float32)
    if image.dtype == bool:
        return cv2.remap(image.astype(np.uint8), x, y, cv2.INTER_NEAREST, borderValue=0) > 0
    return cv2.remap(image.astype(np.float32), x, y, cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR,
                     borderMode=cv2.BORDER_REPLICATE)


@dataclass
class ViewMasks:
    """Foreground and where it can be judged, for one view."""

    foreground: np.ndarray
    """bool H x W: something other than table and robot is seen there."""
    care: np.ndarray
    """bool H x W: the pixel can be judged (over the table top, not covered by the robot)."""


def view_masks(view: View, w: Warp, model: TableModel, parallax_only: bool = False) -> ViewMasks:
    """Step 4 of the module docstring, for one view. With `parallax_only`, pixels over covered cells
    cannot be judged (only what differs from a known background counts)."""
    over = _sample(model.region, w.cell_x, w.cell_y)
    known = _sample(model.known, w.cell_x, w.cell_y)
    background = _sample(model.background, w.cell_x, w.cell_y)
    differs = np.linalg.norm(view.lab - background, axis=-1) > DIFFERS
    care = over & ~view.robot & (known if parallax_only else True)
    foreground = care & (differs if parallax_only else (~known | differs))
    foreground = cv2.morphologyEx(foreground.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)) > 0
    return ViewMasks(foreground, care)


@dataclass
class Hull:
    """The visual hull of the foreground, seen from above."""

    grid: PlaneGrid
    """The plane grid (the hull's cells are `step` grid cells wide)."""
    step: int
    """Grid cells per hull column."""
    height: np.ndarray
    """(ny/step) x (nx/step) float: top of the hull over each column, metres (0: empty)."""
    bottom: np.ndarray
    """Same shape: bottom of the hull's lowest run over each column, metres."""

    def full_height(self) -> np.ndarray:
        """`height` at the grid's resolution."""
        return cv2.resize(self.height, (self.grid.nx, self.grid.ny), interpolation=cv2.INTER_NEAREST)


def visual_hull(views: Sequence[View], masks: Sequence[ViewMasks], model: TableModel,
                voxel: float = HULL_VOXEL_M, top: float = HULL_TOP_M) -> Hull:
    """Voxels over the table that every view seeing them shows as foreground, and at least two views
    (or the only view that can judge them) show as foreground.

    Only columns whose foot two views see as foreground (or cannot judge) are tried: an object's foot
    is foreground in every view that sees it."""
    grid = model.grid
    step = max(1, round(voxel / grid.res))
    shape = (grid.ny // step, grid.nx // step)
    region = cv2.resize(model.region.astype(np.uint8), (shape[1], shape[0]), interpolation=cv2.INTER_NEAREST) > 0
    rows, cols = np.nonzero(region)
    xy = grid.xy_of((cols + 0.5) * step - 0.5, (rows + 0.5) * step - 0.5)
    grown = [cv2.dilate(m.foreground.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0 for m in masks]

    def look(view: View, z: float, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cam = view.camera
        pix, depth = cam.project(np.column_stack([pts, np.full(len(pts), z)]))
        u = np.round(pix[:, 0]).astype(int)
        v = np.round(pix[:, 1]).astype(int)
        inside = (u >= 0) & (v >= 0) & (u < cam.width) & (v < cam.height) & (depth > 0)
        return inside, np.clip(u, 0, cam.width - 1), np.clip(v, 0, cam.height - 1)

    support = np.zeros(len(rows), np.int16)
    for view, m, g in zip(views, masks, grown):
        inside, u, v = look(view, 0.0, xy)
        support += inside & (g[v, u] | ~m.care[v, u])
    keep = support >= min(2, len(views))
    rows, cols, xy = rows[keep], cols[keep], xy[keep]
    levels = np.arange(voxel / 2, top, voxel)
    occupied = np.ones((len(levels), len(rows)), bool)
    positive = np.zeros((len(levels), len(rows)), np.int16)
    judges = np.zeros((len(levels), len(rows)), np.int16)
    for view, m, g in zip(views, masks, grown):
        for li, z in enumerate(levels):
            inside, u, v = look(view, z, xy)
            judged = inside & m.care[v, u]
            occupied[li] &= ~(judged & ~g[v, u])
            positive[li] += inside & m.foreground[v, u]
            judges[li] += judged
    occupied &= positive >= np.minimum(2, np.maximum(judges, 1))
    height = np.zeros(shape, np.float32)
    bottom = np.zeros(shape, np.float32)
    any_ = occupied.any(axis=0)
    top_index = len(levels) - 1 - np.argmax(occupied[::-1], axis=0)
    bottom_index = np.argmax(occupied, axis=0)
    height[rows[any_], cols[any_]] = levels[top_index[any_]] + voxel / 2
    bottom[rows[any_], cols[any_]] = levels[bottom_index[any_]] - voxel / 2
    return Hull(grid, step, height, bottom)


@dataclass
class Segmentation:
    """Everything `segment` found."""

    views: list[View]
    """The views."""
    warps: list[Warp]
    """Each view on the plane grid."""
    model: TableModel
    """The table."""
    masks: list[ViewMasks]
    """Per-view foreground and care masks (flat things removed)."""
    hull: Hull
    """Visual hull of the foreground."""


def balance(views: Sequence[View], warps: Sequence[Warp], grid: PlaneGrid) -> tuple[list[View], list[Warp]]:
    """Views and warps with each camera's colour gains (white balance, exposure) matched to the
    median camera's, measured on the plane cells every view sees near the origin (the table)."""
    lins = np.stack([w.linear for w in warps])
    xy = grid.points()[:, :2].reshape(grid.ny, grid.nx, 2)
    valid = np.stack([w.valid for w in warps]).all(axis=0) & (np.linalg.norm(xy, axis=-1) < SEED_RADIUS_M)
    if valid.sum() < 200:
        return list(views), list(warps)
    median = np.median(lins[:, valid], axis=0)
    out_views, out_warps = [], []
    for view, w, lin in zip(views, warps, lins):
        ratio = lin[valid] / np.maximum(median, 1e-3)
        gain = np.median(ratio, axis=0).astype(np.float32)
        gain = np.clip(gain, 0.5, 2.0)
        linear = view.linear / gain
        wl = w.linear / gain
        out_views.append(View(view.camera, view.rgb, linear_to_lab(linear), view.robot, linear))
        out_warps.append(Warp(linear_to_lab(wl), wl, w.valid, w.cell_x, w.cell_y))
    return out_views, out_warps


def segment(views: Sequence[View], grid: PlaneGrid | None = None, flat: np.ndarray | None = None) -> Segmentation:
    """Foreground masks of every view and their visual hull (the module docstring's five steps).
    `flat` marks plane cells known to hold something flat (a printed board), on `grid`."""
    grid = grid or PlaneGrid.around_origin()
    warps = [warp(v, grid) for v in views]
    for _ in range(3):  # the median moves as the gains do
        views, warps = balance(views, warps, grid)
    model = table_model(warps, grid, flat)
    # step 5: covered cells with nothing standing over them (as parallax alone shows) are flat
    # things (shadows, boards, stains): background
    parallax = visual_hull(views, [view_masks(v, w, model, parallax_only=True) for v, w in zip(views, warps)], model)
    standing = cv2.dilate((parallax.full_height() > FLAT_M).astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    flat_cells = ~model.known & model.region & ~standing
    model.known = model.known | flat_cells
    model.background = np.where(flat_cells[..., None], model.median, model.background)
    masks = [view_masks(v, w, model) for v, w in zip(views, warps)]
    hull = visual_hull(views, masks, model)
    return Segmentation(list(views), warps, model, masks, hull)
