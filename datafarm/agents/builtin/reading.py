"""Reading a request's task text against its grounding G: which task family it is, which of G's
objects play which role, and the family's parameters (strike count, whether to close the drawer,
how long success must hold).

Families (K's skill library, `skills/contract.md`):

| family | said as (any word order, synonyms) | roles |
| --- | --- | --- |
| `nest` | nest / stack / put a cup in or on another cup | inner, outer |
| `place_in` | put / place / set / drop / insert X in / into / inside / on / onto / on top of Y | item, container (in) or support (on) |
| `place_on_scale` | weigh X; put X on the scale | item, scale |
| `drawer_put_inside` | (open the drawer,) put X in (the drawer)(, close it) | container, item |
| `strike_drum` | strike / beat / hit / tap / bang / drum the drum N times / repeatedly (with the stick) | instrument, tool (optional) |

Anything else fails with `TaskNotSupported`, naming the families; a cloth, towel or folding task
says a deformable-capable simulator is required.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from datafarm.agents.builtin.linking import (
    KIND_WORDS,
    Candidate,
    colour_name,
    graspable,
    noun_heads,
    ranked,
    world_extent,
)
from datafarm.agents.builtin.text import (
    Mention,
    find_mentions,
    hold_seconds,
    repeat_count,
    split_success,
    tokens,
)
from datafarm.artifacts.grounding import Grounding
from datafarm.errors import DatafarmError

FAMILIES: dict[str, str] = {
    "nest": "nest or stack one cup in another (e.g. `nest the small cup in the big cup`)",
    "place_in": "put an object in or on another (e.g. `put the block into the bowl`, `place the ball on the box`)",
    "place_on_scale": "weigh an object on a scale (e.g. `weigh the apple on the scale`)",
    "drawer_put_inside": "open a drawer, put an object inside, close it (e.g. `open the drawer, put the block in, close it`)",
    "strike_drum": "strike a drum N times or repeatedly (e.g. `beat the drum three times with the stick`)",
}
"""The task families the builtin agent compiles, with an example phrasing each."""

DEFAULT_STRIKES = 3
"""Strikes asked for by `repeatedly`, `several times`, or no count at all."""
MAX_STRIKES = 20
"""Most strikes one episode may ask for."""
DEFAULT_HOLD_S = 1.0
"""How long success must hold at the end when the text does not say, seconds."""

STRIKE_VERBS = frozenset(
    ["strike", "strikes", "striking", "struck", "beat", "beats", "beating", "hit", "hits", "hitting", "tap", "taps", "tapping", "bang", "bangs", "banging", "knock", "knocks", "knocking", "pound", "pounds", "pounding", "play", "plays", "playing", "whack", "whacks", "whacking", "smack", "smacks", "thump", "thumps", "drum", "drums", "drumming", "hammer", "hammers", "hammering", "rap", "raps", "rapping"]
)
NEST_VERBS = frozenset(["nest", "nests", "nesting", "nested", "stack", "stacks", "stacking", "stacked"])
WEIGH_VERBS = frozenset(["weigh", "weighs", "weighing", "weighed"])
CLOSE_WORDS = frozenset(["close", "closes", "closing", "closed", "shut", "shuts", "shutting"])
DEFORMABLE_WORDS = frozenset(
    ["cloth", "cloths", "towel", "towels", "napkin", "napkins", "fabric", "fabrics", "fold", "folds", "folding", "folded", "unfold", "garment", "garments", "shirt", "shirts", "tshirt", "blanket", "blankets", "rope", "ropes", "cable", "cables", "cord", "cords", "sheet", "sheets", "handkerchief", "scarf", "scarves", "sock", "socks", "dough", "sponge", "sponges", "bag", "bags", "paper"]
)
IN_WORDS = frozenset(["in", "into", "inside", "within"])
ON_WORDS = frozenset(["on", "onto", "atop", "upon"])
WITH_WORDS = frozenset(["with", "using", "via"])
TOOL_WORDS = frozenset(["stick", "sticks", "drumstick", "drumsticks", "mallet", "mallets", "beater", "beaters", "baton"])
"""Nouns of the tools a drum is struck with."""


class TaskNotSupported(DatafarmError):
    """The task text is outside the builtin's families, or names what G does not have.

    `route_to` is the earliest stage responsible: `contract` for the text, `grounding` when the text
    names an object that G lacks."""

    exit_code = 2

    def __init__(self, message: str, route_to: str = "contract") -> None:
        self.route_to = route_to
        """Earliest stage responsible."""
        super().__init__(message)


def supported_families_text() -> str:
    """One line naming every supported family with an example."""
    return "; ".join(f"{name}: {how}" for name, how in FAMILIES.items())


def unsupported(why: str) -> TaskNotSupported:
    """The error for a request outside the families."""
    return TaskNotSupported(f"{why}. The builtin agent compiles these task families: {supported_families_text()}. "
                            "Rephrase the task as one of them, or choose openai or anthropic for roles.author.")


@dataclass
class TaskReading:
    """What the task text asks, linked to G."""

    family: str
    """Task family (a key of FAMILIES)."""
    roles: dict[str, str]
    """Role -> G object id."""
    relation: str | None = None
    """`in` or `on` for place_in."""
    strikes: int | None = None
    """Strike count (strike_drum)."""
    close: bool = False
    """Whether the drawer must be closed again (drawer_put_inside)."""
    hold_s: float = DEFAULT_HOLD_S
    """How long success must hold at the end, seconds."""
    instruction: str = ""
    """The instruction part of the text."""
    success: str = ""
    """The success clause of the text (empty when it states none)."""
    notes: list[str] = field(default_factory=list)
    """How the text was read (defaults taken, choices made), for people."""


# --- helpers -----------------------------------------------------------------------------------------


def _objects(grounding: Grounding) -> list[Any]:
    return [o for o in grounding.objects if o.kind != "actor"]


def _kinds(mention: Mention, objects: list[Any]) -> set[str]:
    """G object kinds the mention may name."""
    if mention.special or mention.head is None:
        return set()
    kinds = {o.kind for o in objects if o.id in {c.id for c in ranked(mention, objects)}}
    if mention.head in KIND_WORDS:
        kinds.add(KIND_WORDS[mention.head])
    return kinds


def _describe(obj: Any) -> str:
    nouns = f" ({', '.join(obj.nouns)})" if obj.nouns else ""
    return f"{obj.id}: {colour_name(obj.colour)} {obj.kind}{nouns}"


def _inventory(objects: list[Any]) -> str:
    return "; ".join(_describe(o) for o in objects) or "none"


def _missing(what: str, objects: list[Any]) -> TaskNotSupported:
    return TaskNotSupported(
        f"the task names {what}, but the grounding has no such object (its objects: {_inventory(objects)})",
        route_to="grounding",
    )


def _best(mention: Mention, objects: list[Any], kinds: set[str] | None = None, exclude: set[str] = frozenset()) -> str:
    """The object the mention names (among `kinds`, not in `exclude`); TaskNotSupported when none or ambiguous."""
    pool = [o for o in objects if (kinds is None or o.kind in kinds) and o.id not in exclude]
    found = ranked(mention, pool)
    if not found:
        raise _missing(f"'{mention.phrase}'", objects)
    if len(found) > 1 and found[0].score - found[1].score < 0.3:
        raise TaskNotSupported(
            f"'{mention.phrase}' could be {found[0].id} or {found[1].id}: name it by its colour or size "
            f"(objects: {_inventory(pool)})")
    return found[0].id


def _only(objects: list[Any], kind: str, what: str) -> str:
    """The one object of `kind` in G (TaskNotSupported when none, or several to choose from)."""
    found = [o for o in objects if o.kind == kind]
    if not found:
        raise _missing(what, objects)
    if len(found) > 1:
        raise TaskNotSupported(f"the grounding has several {kind} objects ({', '.join(o.id for o in found)}); "
                               f"say which {what} by its colour or size")
    return found[0].id


def _mention_after(mentions: list[Mention], index: int, reach: int = 5) -> Mention | None:
    """The first mention starting within `reach` words after word `index`."""
    for m in mentions:
        if index < m.start <= index + reach:
            return m
    return None


def _instrument_mentions(words: list[str], mentions: list[Mention]) -> list[Mention]:
    """Mentions right after `with` / `using` (the instrument of the action)."""
    return [m for i, w in enumerate(words) if w in WITH_WORDS if (m := _mention_after(mentions, i, 4)) is not None]


# --- the reading -------------------------------------------------------------------------------------


def read_task(text: str, grounding: Grounding) -> TaskReading:
    """Read the task text against G. Raises TaskNotSupported for a request outside the families, or
    one that names objects G does not have (or cannot tell apart)."""
    instruction, success = split_success(text)
    words_all, words = tokens(text), tokens(instruction)
    deformable = sorted(set(words_all) & DEFORMABLE_WORDS)
    if deformable:
        raise TaskNotSupported(
            f"the task involves deformable material ({', '.join(deformable)}): it needs a deformable-capable simulator "
            "(cloth, towels, folding), which datafarm's rigid-body simulator (SAPIEN) and the builtin agent do not "
            f"provide. The builtin agent compiles rigid and articulated tasks: {supported_families_text()}")
    objects = _objects(grounding)
    heads = noun_heads(objects)
    mentions = find_mentions(words, heads)
    if not any(m.special is None for m in mentions):
        mentions = find_mentions(words_all, heads)  # everything may be in the success clause
    things = [m for m in mentions if m.special is None]
    # verbs are the words outside noun phrases ("drum" in "put it on the drum" is no verb)
    said = {w for i, w in enumerate(words) if not any(m.start <= i < m.end for m in mentions)}
    kinds = [(m, _kinds(m, objects)) for m in things]

    hold = hold_seconds(tokens(success)) or hold_seconds(words)
    notes: list[str] = []
    if hold is None:
        hold = DEFAULT_HOLD_S
        notes.append(f"success must hold {hold:g} s at the end (the default: the text gives no duration)")
    hold = min(max(hold, 0.2), 10.0)

    def reading(family: str, roles: dict[str, str], **extra: Any) -> TaskReading:
        return TaskReading(family=family, roles=roles, hold_s=hold, instruction=instruction, success=success,
                           notes=notes + extra.pop("notes", []), **extra)

    drum_mentions = [m for m, k in kinds if "drum" in k]
    if said & STRIKE_VERBS and (drum_mentions or any(o.kind == "drum" for o in objects) and "drum" in words):
        roles, extra = _read_strike(words, words_all, mentions, drum_mentions, objects)
        return reading("strike_drum", roles, **extra)
    drawer_mentions = [m for m, k in kinds if "drawer_cabinet" in k]
    if drawer_mentions:
        roles, extra = _read_drawer(words_all, mentions, drawer_mentions, objects)
        return reading("drawer_put_inside", roles, **extra)
    scale_mentions = [m for m, k in kinds if "scale" in k]
    if said & WEIGH_VERBS or scale_mentions:
        roles, extra = _read_scale(scale_mentions, things, objects)
        return reading("place_on_scale", roles, **extra)
    placed = _read_place(words, mentions, objects, said)
    if placed is not None:
        family, roles, relation, more = placed
        return reading(family, roles, relation=relation, notes=more)
    raise unsupported(f"the builtin agent cannot read a supported task in {text!r}")


def _read_strike(words: list[str], words_all: list[str], mentions: list[Mention], drum_mentions: list[Mention],
                 objects: list[Any]) -> tuple[dict[str, str], dict[str, Any]]:
    notes: list[str] = []
    drum = _best(drum_mentions[0], objects, {"drum"}) if drum_mentions else _only(objects, "drum", "a drum")
    roles = {"instrument": drum}
    tool_mention = next((m for m in _instrument_mentions(words, mentions) if m not in drum_mentions), None)
    if tool_mention is None:
        tool_mention = next((m for m in mentions if m.special is None and m not in drum_mentions), None)
    if tool_mention is not None and tool_mention.special != "robot":
        tool = _best(tool_mention, objects, exclude={drum})
        obj = next(o for o in objects if o.id == tool)
        if not graspable(obj):
            raise TaskNotSupported(f"the tool {tool} ({obj.kind}) is too wide for the gripper to hold")
        roles["tool"] = tool
    elif tool_mention is None and len(tools := _striking_tools(objects, drum)) == 1:
        roles["tool"] = tools[0].id
        notes.append(f"strikes with {tools[0].id} ({', '.join(tools[0].nouns)}), the one striking tool in G")
    else:
        notes.append("strikes with the gripper (the text names no tool)")
    count, how = repeat_count(words_all, DEFAULT_STRIKES)
    if count is None:
        count = DEFAULT_STRIKES
        notes.append(f"{count} strikes (the default: the text gives no count)")
    elif not how[:1].isdigit():
        notes.append(f"{count} strikes for '{how}'")
    if count > MAX_STRIKES:
        raise TaskNotSupported(f"{count} strikes is more than the {MAX_STRIKES} one episode may ask for")
    return roles, {"strikes": count, "notes": notes}


def _striking_tools(objects: list[Any], drum: str) -> list[Any]:
    """Graspable objects G calls a stick, mallet or the like (a scene's drumsticks, unnamed by the text)."""
    return [o for o in objects if o.id != drum and graspable(o)
            and any(w in TOOL_WORDS for phrase in o.nouns for w in tokens(phrase))]


def _read_drawer(words_all: list[str], mentions: list[Mention], drawer_mentions: list[Mention],
                 objects: list[Any]) -> tuple[dict[str, str], dict[str, Any]]:
    cabinet = _best(drawer_mentions[0], objects, {"drawer_cabinet"})
    items = [m for m in mentions if m.special is None and m not in drawer_mentions]
    if not items:
        raise unsupported("a drawer task must put an object inside the drawer, and the text names none")
    item = _best(items[0], objects, exclude={cabinet})
    obj = next(o for o in objects if o.id == item)
    if not graspable(obj):
        raise TaskNotSupported(f"{item} ({obj.kind}) is too wide for the gripper to pick up")
    close = bool(set(words_all) & CLOSE_WORDS)
    notes = [] if close else ["the drawer is left open (the text does not ask to close it)"]
    return {"container": cabinet, "item": item}, {"close": close, "notes": notes}


def _read_scale(scale_mentions: list[Mention], things: list[Mention], objects: list[Any]) -> tuple[dict[str, str], dict[str, Any]]:
    scale = _best(scale_mentions[0], objects, {"scale"}) if scale_mentions else _only(objects, "scale", "a scale")
    items = [m for m in things if m not in scale_mentions]
    if not items:
        raise unsupported("a weighing task must name the object to weigh")
    item = _best(items[0], objects, exclude={scale})
    obj = next(o for o in objects if o.id == item)
    if not graspable(obj):
        raise TaskNotSupported(f"{item} ({obj.kind}) is too wide for the gripper to pick up")
    return {"item": item, "scale": scale}, {}


def _relation(words: list[str], mentions: list[Mention]) -> tuple[str | None, Mention | None]:
    """The placing relation (`in` or `on`) and the mention of its target, as the text says them."""
    instruments = _instrument_mentions(words, mentions)
    for i, word in enumerate(words):
        kind = "in" if word in IN_WORDS else "on" if word in ON_WORDS else None
        at = i
        if word == "on" and words[i + 1:i + 3] == ["top", "of"]:
            kind, at = "on", i + 2
        if kind is None:
            continue
        if word == "in" and words[i + 1:i + 2] in (["front"], ["order"], ["place"]):
            continue
        target = _mention_after(mentions, at, 4)
        if target is not None and target.special is None and target not in instruments:
            return kind, target
    for word in words:
        if word in IN_WORDS:
            return "in", None
        if word in ON_WORDS:
            return "on", None
    return None, None


def _fits_in(item: Any, container: Any) -> bool:
    """Whether `item` fits into a cup `container`'s cavity (by footprint)."""
    if container.kind != "cup":
        return False
    ex = world_extent(item)
    reach = 0.5 * float((ex[0] ** 2 + ex[1] ** 2) ** 0.5) if item.kind == "box" else 0.5 * float(max(ex[0], ex[1]))
    return reach < container.outer_radius.value - container.wall_thickness.value - 0.002


def _read_place(words: list[str], mentions: list[Mention], objects: list[Any],
                said: set[str]) -> tuple[str, dict[str, str], str, list[str]] | None:
    relation, target_mention = _relation(words, mentions)
    nesting = bool(said & NEST_VERBS)
    if relation is None and not nesting:
        return None
    relation = relation or "in"
    instruments = _instrument_mentions(words, mentions)
    things = [m for m in mentions if m.special is None and m is not target_mention and m not in instruments]
    item_mention = things[0] if things else None
    # a mention without a head noun ("the big one", "another") names the same kind of thing as the other
    for m, other in ((item_mention, target_mention), (target_mention, item_mention)):
        if m is not None and m.head is None and other is not None and other.head is not None:
            m.head = other.head
    by_id = {o.id: o for o in objects}

    def candidates(mention: Mention | None, pool: list[Any]) -> list[Candidate]:
        if mention is None:
            return [Candidate(o.id, 0.0) for o in pool]
        if mention.plural:  # "the cups": any of them
            return [Candidate(c.id, 0.0) for c in ranked(mention, pool)]
        return ranked(mention, pool)

    if item_mention is None and target_mention is None and not nesting:
        return None
    if item_mention is None and target_mention is not None and target_mention.plural:
        item_mention = target_mention  # "stack the cups on each other"
    items = candidates(item_mention, [o for o in objects if o.kind in ("box", "cylinder", "sphere", "cup")])
    targets = candidates(target_mention if target_mention is not item_mention else None,
                         [o for o in objects if o.kind not in ("drawer_cabinet",)])
    if item_mention is None:
        # "put it in the bowl": the one graspable object the text's nouns were linked to
        items = [c for c in items if graspable(by_id[c.id])]
        linked = [c for c in items if by_id[c.id].nouns]
        items = linked if linked else items
    if nesting and (item_mention is None or item_mention.plural) and (target_mention is None or target_mention.plural
                                                                       or target_mention is item_mention):
        items = [c for c in items if by_id[c.id].kind == "cup"]
        targets = [Candidate(o.id, 0.0) for o in objects if o.kind == "cup"]
    if not items:
        raise _missing(f"'{item_mention.phrase}'" if item_mention else "an object to pick up", objects)
    if not targets:
        raise _missing(f"'{target_mention.phrase}'" if target_mention else "where to put it", objects)

    pairs: list[tuple[float, str, str]] = []
    for i in items:
        for t in targets:
            if i.id == t.id:
                continue
            item, target = by_id[i.id], by_id[t.id]
            score = i.score + t.score + (0.0 if graspable(item) else -1.0)
            if relation == "in" or (item.kind == "cup" and target.kind == "cup"):
                score += 1.0 if _fits_in(item, target) else -1.0
            if target_mention is not None and target_mention.other and item_mention is not None and item_mention.head:
                score += 0.5 if target.kind == item.kind else 0.0
            pairs.append((score, i.id, t.id))
    if not pairs:
        raise TaskNotSupported(f"the task needs two different objects but names only {items[0].id}")
    pairs.sort(key=lambda p: -p[0])
    best = pairs[0]
    if len(pairs) > 1 and best[0] - pairs[1][0] < 0.3 and (pairs[1][1], pairs[1][2]) != (best[1], best[2]):
        raise TaskNotSupported(
            f"cannot tell which object goes where: {best[1]} into {best[2]} or {pairs[1][1]} into {pairs[1][2]}; "
            f"name them by colour or size (objects: {_inventory(objects)})")
    item, target = by_id[best[1]], by_id[best[2]]
    notes: list[str] = []
    if not graspable(item):
        raise TaskNotSupported(f"{item.id} ({item.kind}) is too wide for the gripper to pick up")
    if item.kind == "cup" and target.kind == "cup":  # a cup into, or stacked on, a cup
        if not _fits_in(item, target):
            raise TaskNotSupported(
                f"{item.id} (outer radius {item.outer_radius.value * 1000:.0f} mm) does not fit inside {target.id} "
                f"(inner radius {(target.outer_radius.value - target.wall_thickness.value) * 1000:.0f} mm), so it cannot be nested")
        return "nest", {"inner": item.id, "outer": target.id}, "in", notes
    if relation == "in":
        if target.kind == "cup":
            if not _fits_in(item, target):
                raise TaskNotSupported(f"{item.id} is too wide to fit into {target.id}")
            return "place_in", {"item": item.id, "container": target.id}, "in", notes
        notes.append(f"{target.id} is a solid {target.kind} in G, so the item is placed on it")
    return "place_in", {"item": item.id, "support": target.id}, "on", notes
