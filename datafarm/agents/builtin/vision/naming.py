"""Naming the objects found in the clip after the task text: each mention of a thing (`the red cup`,
`the apple`, `the drawer`) is linked to the object its category word and colour and size words fit
best, and that object takes the mention's kind (a cup, a drum, a scale...) when its shape allows it.

Only English words and measured shapes and colours are used: nothing here knows any scene.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from datafarm.agents.builtin.linking import COLOUR_REJECT, colour_distance
from datafarm.agents.builtin.text import (
    COUNT_NOUNS,
    KIND_NOUNS,
    SMALL_WORDS,
    Mention,
    find_mentions,
    singular,
    tokens,
)
from datafarm.agents.builtin.vision.objects import FoundObject

KIND_WORDS: dict[str, str] = {word: kind for kind, words in KIND_NOUNS.items() for word in words}
"""Category noun -> G object kind."""

SHAPE_OF_KIND: dict[str, str] = {
    "box": "box", "scale": "box", "drawer_cabinet": "box",
    "cylinder": "cylinder", "cup": "cylinder", "drum": "cylinder",
    "sphere": "sphere",
}
"""G object kind -> the primitive its silhouettes look like."""

SHAPE_SLACK = 0.08
"""A mention's kind is taken when its primitive fits within this IoU of the object's best primitive."""

DEFAULT_WORD = {"box": "block", "cylinder": "cylinder", "sphere": "ball"}
"""Name of an object no mention names, by its primitive."""


@dataclass
class Named:
    """An object with the kind and nouns the task text gives it."""

    found: FoundObject
    """What the vision found."""
    kind: str
    """G object kind."""
    nouns: list[str] = field(default_factory=list)
    """Task-text noun phrases linked to it (empty for a distractor)."""
    word: str = ""
    """The noun its id is made from."""
    said_colour: str = ""
    """The colour word the task text names it by (empty when the text gives none)."""

    @property
    def colour_word(self) -> str:
        """The text's colour word for it when the text gives one (a shaded orange reads as brown to
        `colour_word`, but the id should say what the text says), else a basic word for its colour."""
        return self.said_colour or colour_word(self.found.colour)


HUE_WORDS = ((15, "red"), (40, "orange"), (70, "yellow"), (170, "green"), (200, "cyan"), (255, "blue"),
             (290, "purple"), (345, "pink"), (361, "red"))
"""Upper hue bound (degrees) of each colour word, for colours with some saturation."""


def colour_word(rgb: Sequence[float]) -> str:
    """A basic colour word for an sRGB colour seen in the clip (by hue, saturation and brightness:
    clip colours are shaded, so distances to typical colours misname them)."""
    r, g, b = (float(v) for v in rgb)
    top, bottom = max(r, g, b), min(r, g, b)
    saturation = (top - bottom) / top if top > 1e-6 else 0.0
    if saturation < 0.25:
        return "black" if top < 0.2 else "white" if top > 0.7 else "grey"
    if top - bottom == 0:
        hue = 0.0
    elif top == r:
        hue = (60 * (g - b) / (top - bottom)) % 360
    elif top == g:
        hue = 60 * (b - r) / (top - bottom) + 120
    else:
        hue = 60 * (r - g) / (top - bottom) + 240
    word = next(w for bound, w in HUE_WORDS if hue < bound)
    if word == "orange" and (top < 0.65 or saturation < 0.5):
        return "brown"
    return word


def mentions(task: str) -> list[Mention]:
    """The mentions of objects in the task text (not the table or the robot), `another` resolved to
    the category of the mention before it."""
    out: list[Mention] = []
    words = tokens(task)
    for m in find_mentions(words, set()):
        if m.special is not None:
            continue
        if m.head is None:
            counted = m.end < len(words) and words[m.end] in COUNT_NOUNS  # "another strike" names no object
            if m.other and out and not counted:
                previous = out[-1]
                out.append(Mention(m.start, m.end, previous.head, [previous.head or ""], other=True))
            continue
        head = m.head if m.head in KIND_WORDS else singular(m.head)
        if head in KIND_WORDS:
            m.head = head
            out.append(m)
    return out


def _fit_score(obj: FoundObject, kind: str) -> float | None:
    shape = SHAPE_OF_KIND.get(kind)
    fit = obj.fits.get(shape) if shape else None
    if fit is None:
        return None
    return fit.score


def kind_prior(kind: str, extents: tuple[float, float, float]) -> float:
    """How plausible an object of these extents (long side, short side, height, metres) is as `kind`:
    a scale is flat, a drawer cabinet large, a drum wide, a block hand-sized (+1 plausible, -1 not)."""
    long, short, height = sorted(extents[:2], reverse=True) + [extents[2]]
    if kind == "scale":
        return 1.0 if height <= 0.5 * short and short >= 0.06 else -1.0
    if kind == "drawer_cabinet":
        return 1.0 if short >= 0.12 and height >= 0.08 else -1.0
    if kind == "drum":
        return 0.5 if short >= 0.8 * height and short >= 0.08 else -0.5
    if kind in ("box", "cup", "cylinder", "sphere"):
        return 0.5 if long <= 0.2 else -0.5
    return 0.0


def _score(m: Mention, obj: FoundObject) -> float | None:
    """How well a mention fits an object (None: it cannot be that object)."""
    kind = KIND_WORDS[m.head or ""]
    shape = _fit_score(obj, kind)
    if shape is None:
        return None
    score = shape - obj.best.score  # 0 when its shape is the best fit, negative otherwise
    score += kind_prior(kind, obj.best.extents)
    for colour in m.colours:
        d = colour_distance(colour, obj.colour)
        if d > COLOUR_REJECT:
            return None
        score += 1.5 * (1.0 - d / 50.0)
    return score


def _volume(obj: FoundObject) -> float:
    x, y, z = obj.best.extents
    return x * y * z


def name_objects(found: Sequence[FoundObject], task: str) -> list[Named]:
    """Link the task's mentions to the objects and choose each object's kind and nouns."""
    named = [Named(o, o.best.kind) for o in found]
    said = mentions(task)
    taken: dict[tuple[str, tuple[str, ...], tuple[str, ...]], int] = {}
    # the most specific mentions (with colour or size words) pick first
    order = sorted(range(len(said)), key=lambda i: (-(len(said[i].colours) + len(said[i].sizes)), i))
    used: set[int] = set()
    for i in order:
        m = said[i]
        key = (m.head or "", tuple(m.colours), tuple(m.sizes))
        if key in taken and not m.other:
            _link(named[taken[key]], m)
            continue
        scores = {k: s for k, obj in enumerate(found) if k not in used and (s := _score(m, obj)) is not None}
        if not scores:
            continue
        if m.sizes and len(scores) > 1:
            small = any(w in SMALL_WORDS for w in m.sizes)
            pick = (min if small else max)(scores, key=lambda k: _volume(found[k]))
        else:
            pick = max(scores, key=scores.get)  # type: ignore[arg-type]
        used.add(pick)
        taken[key] = pick
        _link(named[pick], m)
        if m.plural:  # "the cups": every object of that shape not named otherwise
            for k, obj in enumerate(found):
                if k not in used and _score(m, obj) is not None and _fit_score(obj, KIND_WORDS[m.head or ""]) is not None \
                        and obj.best.kind == SHAPE_OF_KIND[KIND_WORDS[m.head or ""]]:
                    used.add(k)
                    _link(named[k], m)
    for n in named:
        if not n.word:
            n.word = DEFAULT_WORD.get(n.kind, n.kind)
    return named


def _link(n: Named, m: Mention) -> None:
    """Give the object the mention's nouns, and its kind when its shape allows."""
    head = m.head or ""
    kind = KIND_WORDS[head]
    fit = _fit_score(n.found, kind)
    if fit is not None and fit >= n.found.best.score - SHAPE_SLACK:
        n.kind = kind
    phrase = " ".join(w for w in m.words if w not in ("another", "other"))
    phrase = " ".join([*phrase.split()[:-1], singular(phrase.split()[-1])]) if phrase else head
    for noun in (phrase, head):
        if noun and noun not in n.nouns:
            n.nouns.append(noun)
    if not n.word:
        n.word = head
    if m.colours and not n.said_colour:
        n.said_colour = m.colours[0]
