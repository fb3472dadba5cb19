"""Linking the task text's mentions to G's objects, by the nouns G links to each object, the
category its kind belongs to, its colour and its size. Nothing here knows any scene's names: a
mention scores every object of G and the best fitting one wins.

Scores (higher is better; None = cannot be that object):
- the mention's whole phrase is one of the object's G nouns: +4; its head noun heads one of them: +2;
  the head is a category noun of the object's kind: +1 (a mention with neither cannot be it);
- each colour word: +3 when the object's G nouns use it, else 2.5 at a perfect colour match down to
  -1 at `COLOUR_REJECT` (CIE Lab distance of the word's typical colour and G's colour), beyond which
  the mention cannot name the object;
- each size word (`small`, `bigger`...): +2 for the extreme object of the mention's candidates in that
  direction, -2 for the others (only when there are several candidates).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from datafarm.agents.builtin.text import (
    COLOURS,
    KIND_NOUNS,
    SMALL_WORDS,
    Mention,
    singular,
    tokens,
)

GRASP_MAX_WIDTH = 0.07
"""Widest side (m) an object may have to be grasped by a PiPER gripper (K probes.yaml `grasp_max_width_m`)."""

COLOUR_REJECT = 70.0
"""Colour distance (see `colour_distance`) beyond which a colour word cannot name an object: red vs a
shaded red is about 40, red vs blue or green over 100."""

KIND_WORDS: dict[str, str] = {word: kind for kind, words in KIND_NOUNS.items() for word in words}
"""Category noun -> G object kind."""


# --- object geometry ---------------------------------------------------------------------------------


def _quat_matrix(q: Sequence[float]) -> np.ndarray:
    w, x, y, z = (float(v) for v in q)
    n = math.sqrt(w * w + x * x + y * y + z * z) or 1.0
    w, x, y, z = w / n, x / n, y / n, z / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def local_box(obj: object) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) corners of the object's bounding box in its own frame (G's nominal sizes)."""
    kind = getattr(obj, "kind", "")
    if kind in ("box", "drawer_cabinet", "actor"):
        s = obj.size  # type: ignore[attr-defined]
        hx, hy, h = s.x.value / 2, s.y.value / 2, s.z.value
    elif kind == "cylinder":
        hx = hy = obj.radius.value  # type: ignore[attr-defined]
        h = obj.height.value  # type: ignore[attr-defined]
    elif kind == "sphere":
        hx = hy = obj.radius.value  # type: ignore[attr-defined]
        h = 2 * hx
    elif kind == "cup":
        hx = hy = obj.outer_radius.value  # type: ignore[attr-defined]
        h = obj.height.value  # type: ignore[attr-defined]
    elif kind == "scale":
        hx, hy = obj.plate.x.value / 2, obj.plate.y.value / 2  # type: ignore[attr-defined]
        h = obj.body_height.value + obj.plate.z.value  # type: ignore[attr-defined]
    elif kind == "drum":
        hx = hy = obj.head_radius.value  # type: ignore[attr-defined]
        h = obj.height.value  # type: ignore[attr-defined]
    else:
        raise ValueError(f"no extent for object kind {kind!r}")
    return np.array([-hx, -hy, 0.0]), np.array([hx, hy, h])


def world_extent(obj: object) -> np.ndarray:
    """(x, y, z) extents of the object's bounding box along the world axes, as it rests in G."""
    lo, hi = local_box(obj)
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    rotated = corners @ _quat_matrix(obj.pose.quaternion).T  # type: ignore[attr-defined]
    return rotated.max(axis=0) - rotated.min(axis=0)


def narrowest_width(obj: object) -> float:
    """The narrowest horizontal extent (what the fingers close across), metres."""
    if getattr(obj, "kind", "") in ("cylinder", "sphere", "cup"):
        _, hi = local_box(obj)
        return float(min(world_extent(obj)[:2].min(), 2 * hi[0]))
    return float(world_extent(obj)[:2].min())


def graspable(obj: object) -> bool:
    """Whether the gripper can close across it."""
    return getattr(obj, "kind", "") in ("box", "cylinder", "sphere", "cup") and narrowest_width(obj) <= GRASP_MAX_WIDTH


def size_of(obj: object) -> float:
    """One number for `small` / `big` comparisons: the cube root of the bounding box volume, metres."""
    lo, hi = local_box(obj)
    return float(np.prod(hi - lo)) ** (1.0 / 3.0)


# --- colours -----------------------------------------------------------------------------------------


def _lab(rgb: Sequence[float]) -> np.ndarray:
    """CIE Lab (D65) of an sRGB colour with channels in [0, 1]."""
    c = np.clip(np.asarray(rgb, float), 0.0, 1.0)
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = m @ lin / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def colour_distance(word: str, rgb: Sequence[float]) -> float:
    """How far G's colour `rgb` is from the colour word's typical colour (Lab, lightness half weighted:
    a clip's dominant colour is often shaded)."""
    a, b = _lab(COLOURS[word]), _lab(rgb)
    d = a - b
    return float(math.sqrt((0.5 * d[0]) ** 2 + d[1] ** 2 + d[2] ** 2))


def colour_name(rgb: Sequence[float]) -> str:
    """The colour word closest to `rgb` (for descriptions)."""
    basic = ("red", "blue", "green", "yellow", "orange", "purple", "pink", "brown", "black", "white", "grey", "cyan")
    return min(basic, key=lambda w: colour_distance(w, rgb))


# --- scoring -----------------------------------------------------------------------------------------


def noun_phrases(obj: object) -> list[list[str]]:
    """G's nouns of the object, each as its words."""
    return [tokens(n) for n in getattr(obj, "nouns", []) if tokens(n)]


def noun_heads(objects: Sequence[object]) -> set[str]:
    """The head words (last word, singular too) of every G noun: what mentions may be headed by."""
    heads: set[str] = set()
    for obj in objects:
        for words in noun_phrases(obj):
            heads.update({words[-1], singular(words[-1])})
    return heads


def _base_score(mention: Mention, obj: object) -> float | None:
    """The noun part of the score; None when the mention cannot name the object."""
    phrases = noun_phrases(obj)
    score = 0.0
    if mention.head is None:
        return 0.0
    heads = {singular(p[-1]) for p in phrases} | {p[-1] for p in phrases}
    said = [singular(w) if i == len(mention.words) - 1 else w for i, w in enumerate(mention.words)]
    if any(p == mention.words or [*p[:-1], singular(p[-1])] == said for p in phrases):
        score += 4.0
    if mention.head in heads:
        score += 2.0
    if KIND_WORDS.get(mention.head) == getattr(obj, "kind", None):
        score += 1.0
    return score if score > 0 else None


def score_objects(mention: Mention, objects: Sequence[object]) -> dict[str, float]:
    """Object id -> how well `mention` names it (objects it cannot name are left out)."""
    base = {o.id: s for o in objects if (s := _base_score(mention, o)) is not None}  # type: ignore[attr-defined]
    by_id = {o.id: o for o in objects}  # type: ignore[attr-defined]
    scores = dict(base)
    for oid in base:
        obj = by_id[oid]
        words = {w for p in noun_phrases(obj) for w in p}
        for colour in mention.colours:
            if colour in words:
                scores[oid] += 3.0
                continue
            distance = colour_distance(colour, obj.colour)  # type: ignore[attr-defined]
            if distance > COLOUR_REJECT:
                del scores[oid]
                break
            scores[oid] += 2.5 * (1.0 - distance / 50.0)
    base = {oid: s for oid, s in base.items() if oid in scores}
    if len(base) > 1:
        sizes = {oid: size_of(by_id[oid]) for oid in base}
        for word in mention.sizes:
            small = word in SMALL_WORDS
            extreme = min(sizes, key=sizes.get) if small else max(sizes, key=sizes.get)  # type: ignore[arg-type]
            for oid in base:
                if word in {w for p in noun_phrases(by_id[oid]) for w in p}:
                    scores[oid] += 3.0
                else:
                    scores[oid] += 2.0 if oid == extreme else -2.0
    return scores


@dataclass(frozen=True)
class Candidate:
    """An object a mention may name, with its score."""

    id: str
    """G object id."""
    score: float
    """How well the mention names it."""


def ranked(mention: Mention, objects: Sequence[object]) -> list[Candidate]:
    """Objects the mention may name, best first."""
    scores = score_objects(mention, objects)
    return sorted((Candidate(k, v) for k, v in scores.items()), key=lambda c: -c.score)
