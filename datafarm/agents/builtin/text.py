"""Reading task text: words, numbers written as digits or words, colour and size words, noun
phrases (mentions of things), the success clause, repeat counts and hold times.

Everything here is about English words, never about a scene: which object a mention means is
`linking`'s job, which family a request belongs to is `reading`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# --- words -------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\d+(?:\.\d+)?|[a-z]+|[.,;:!?()]")

DETERMINERS = frozenset(
    ["the", "a", "an", "this", "that", "these", "those", "its", "it's", "my", "your", "our", "their", "his", "her", "each", "every", "both", "either", "some", "any", "one's"]
)
"""Words that open a noun phrase (never part of its modifiers)."""
PUNCTUATION = frozenset(".,;:!?()")


def tokens(text: str) -> list[str]:
    """Lower-case words, numbers and punctuation of `text` (hyphens and apostrophes split words)."""
    text = text.lower().replace("’", "'").replace("'s ", " ").replace("-", " ").replace("_", " ")
    return _TOKEN.findall(text)


def singular(word: str) -> str:
    """A crude singular of an English plural noun (`cups` -> `cup`, `boxes` -> `box`, `glasses` -> `glass`)."""
    if len(word) <= 3 or word.endswith("ss"):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("xes", "ches", "shes", "sses")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("us"):
        return word[:-1]
    return word


# --- numbers -----------------------------------------------------------------------------------------

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_SPECIAL = {"dozen": 12, "half": 0.5, "couple": 2, "pair": 2}


def number_at(words: list[str], i: int) -> tuple[float, int] | None:
    """The number written at words[i] (`3`, `2.5`, `three`, `twenty one`, `a dozen`, `half`) and how
    many words it takes; None when there is none."""
    if i >= len(words):
        return None
    word = words[i]
    if re.fullmatch(r"\d+(?:\.\d+)?", word):
        return float(word), 1
    if word in _UNITS:
        return float(_UNITS[word]), 1
    if word in _TENS:
        if i + 1 < len(words) and words[i + 1] in _UNITS and 0 < _UNITS[words[i + 1]] < 10:
            return float(_TENS[word] + _UNITS[words[i + 1]]), 2
        return float(_TENS[word]), 1
    if word in _SPECIAL:
        return float(_SPECIAL[word]), 1
    if word in ("a", "an") and i + 1 < len(words) and words[i + 1] in ("dozen", "couple", "pair"):
        return float(_SPECIAL[words[i + 1]]), 2 + (i + 2 < len(words) and words[i + 2] == "of")
    return None


# --- colours and sizes -------------------------------------------------------------------------------

COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.8, 0.1, 0.1), "crimson": (0.86, 0.08, 0.24), "scarlet": (1.0, 0.14, 0.0), "maroon": (0.5, 0.0, 0.0),
    "burgundy": (0.5, 0.0, 0.13), "cherry": (0.82, 0.12, 0.23), "ruby": (0.88, 0.07, 0.37), "vermilion": (0.89, 0.26, 0.2),
    "blue": (0.1, 0.2, 0.8), "navy": (0.0, 0.0, 0.5), "azure": (0.0, 0.5, 1.0), "cobalt": (0.0, 0.28, 0.67),
    "sapphire": (0.06, 0.32, 0.73), "indigo": (0.29, 0.0, 0.51), "cyan": (0.0, 0.8, 0.9), "turquoise": (0.25, 0.88, 0.82),
    "teal": (0.0, 0.5, 0.5), "aqua": (0.0, 0.9, 0.9), "green": (0.1, 0.6, 0.2), "lime": (0.5, 0.9, 0.1),
    "olive": (0.5, 0.5, 0.0), "emerald": (0.31, 0.78, 0.47), "mint": (0.6, 1.0, 0.6), "jade": (0.0, 0.66, 0.42),
    "yellow": (0.95, 0.85, 0.1), "gold": (0.85, 0.65, 0.13), "golden": (0.85, 0.65, 0.13), "mustard": (0.88, 0.68, 0.2),
    "amber": (1.0, 0.75, 0.0), "orange": (0.95, 0.5, 0.1), "tangerine": (0.95, 0.52, 0.0), "purple": (0.5, 0.15, 0.6),
    "violet": (0.56, 0.0, 1.0), "lilac": (0.78, 0.64, 0.78), "lavender": (0.71, 0.49, 0.86), "magenta": (0.9, 0.1, 0.6),
    "pink": (1.0, 0.6, 0.7), "rose": (1.0, 0.0, 0.5), "fuchsia": (0.9, 0.1, 0.7), "brown": (0.45, 0.28, 0.15),
    "wooden": (0.6, 0.45, 0.3), "wood": (0.6, 0.45, 0.3), "tan": (0.82, 0.71, 0.55), "beige": (0.9, 0.85, 0.7),
    "khaki": (0.76, 0.69, 0.57), "chocolate": (0.48, 0.25, 0.1), "black": (0.05, 0.05, 0.05), "white": (0.95, 0.95, 0.95),
    "ivory": (1.0, 1.0, 0.94), "cream": (1.0, 0.99, 0.82), "grey": (0.5, 0.5, 0.5), "gray": (0.5, 0.5, 0.5),
    "silver": (0.75, 0.75, 0.75), "charcoal": (0.21, 0.27, 0.31),
}
"""Colour words and a typical sRGB value of each (channels in [0, 1])."""

SMALL_WORDS = frozenset(
    ["small", "smaller", "smallest", "little", "littler", "littlest", "tiny", "tinier", "tiniest", "mini", "short", "shorter", "shortest", "narrow", "narrower", "narrowest", "thin", "thinner", "thinnest", "inner"]
)
"""Words asking for the smaller of several like things."""
BIG_WORDS = frozenset(
    ["big", "bigger", "biggest", "large", "larger", "largest", "huge", "giant", "tall", "taller", "tallest", "wide", "wider", "widest", "outer"]
)
"""Words asking for the larger of several like things."""


# --- nouns -------------------------------------------------------------------------------------------

KIND_NOUNS: dict[str, frozenset[str]] = {
    "cup": frozenset(["cup", "mug", "glass", "tumbler", "beaker", "bowl", "pot", "jar", "vessel", "beaker", "pail", "bucket", "chalice", "goblet", "container"]),
    "box": frozenset(["block", "cube", "box", "brick", "crate", "package", "parcel", "carton", "cuboid", "tile"]),
    "sphere": frozenset(["ball", "sphere", "apple", "orange", "fruit", "tomato", "lemon", "peach", "plum", "pear", "globe", "marble"]),
    "cylinder": frozenset(
        ["can", "bottle", "cylinder", "stick", "drumstick", "mallet", "rod", "baton", "dowel", "tube", "marker", "pen", "pencil", "beater", "hammer", "candle"]
    ),
    "drum": frozenset(["drum", "snare", "tom", "bongo", "tambourine", "timpani"]),
    "scale": frozenset(["scale", "balance", "weigher"]),
    "drawer_cabinet": frozenset(["drawer", "cabinet", "dresser", "chest", "nightstand", "cupboard"]),
}
"""Category nouns by the G object kind they most likely name (a G object's own `nouns` come first)."""

SPECIAL_NOUNS: dict[str, str] = {
    **{w: "table" for w in ("table", "tabletop", "desk", "counter", "surface")},
    **{w: "robot" for w in ("gripper", "grippers", "hand", "hands", "finger", "fingers", "fingertip", "fingertips",
                            "robot", "arm", "arms", "claw", "claws", "jaw", "jaws")},
}
"""Nouns that name no object of G: the table, the robot's own body."""

PART_NOUNS = frozenset(["head", "heads", "skin", "plate", "pan", "platform", "handle", "handles", "lid", "rim", "top", "surface", "membrane"])
"""Nouns naming a part of the thing just named (`drum head`, `scale plate`): the mention is that thing."""

COUNT_NOUNS = frozenset(
    ["time", "times", "strike", "strikes", "beat", "beats", "hit", "hits", "tap", "taps", "blow", "blows", "knock", "knocks", "bang", "bangs", "whack", "whacks", "stroke", "strokes"]
)
"""Nouns after a number that make it a repeat count (`three times`, `4 strikes`)."""

REPEATED_WORDS = ("repeatedly", "several times", "a few times", "multiple times", "many times", "again and again",
                  "over and over", "a number of times", "rhythmically", "a couple of times")
"""Phrases meaning "more than once" without a number."""


@dataclass
class Mention:
    """A noun phrase of the task text that names a thing (or `another`/`the other one`)."""

    start: int
    """Index of its first word."""
    end: int
    """Index one past its last word."""
    head: str | None
    """The head noun, singular (None for `another`, `the other one`)."""
    words: list[str] = field(default_factory=list)
    """Its words, modifiers then head, as written (lower case)."""
    colours: list[str] = field(default_factory=list)
    """Colour words among the modifiers."""
    sizes: list[str] = field(default_factory=list)
    """Size words among the modifiers."""
    plural: bool = False
    """True when the head is a plural (`the cups`)."""
    other: bool = False
    """True for `another`, `the other (one|cup)`: a thing different from one already named."""
    special: str | None = None
    """`table` or `robot` for a noun that names no object of G."""

    @property
    def phrase(self) -> str:
        """The words joined, e.g. `small red cup`."""
        return " ".join(self.words)


def find_mentions(words: list[str], object_nouns: set[str]) -> list[Mention]:
    """Noun phrases of `words` whose head is a category noun, a special noun (table, gripper) or one
    of `object_nouns` (the head words of G's object nouns); plus `another` / `the other one`."""
    lexicon = set(object_nouns) | set(SPECIAL_NOUNS) | {w for group in KIND_NOUNS.values() for w in group}

    def is_noun(word: str) -> bool:
        return word in lexicon or singular(word) in lexicon

    out: list[Mention] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "another" or (word == "other" and (i == 0 or words[i - 1] in ("the", "that"))):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if not is_noun(nxt):
                end = i + 2 if nxt == "one" else i + 1
                out.append(Mention(i, end, None, words[i:end], other=True))
                i = end
                continue
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if word == "one" and i > 0 and (words[i - 1] in COLOURS or words[i - 1] in SMALL_WORDS | BIG_WORDS):
            # "the red one", "the bigger one": a thing named by its colour or size alone
            begin = i
            while begin > 0 and i - begin < 3 and (words[begin - 1] in COLOURS or words[begin - 1] in SMALL_WORDS | BIG_WORDS
                                                   or words[begin - 1] == "other"):
                begin -= 1
            modifiers = words[begin:i]
            out.append(Mention(begin, i + 1, None, modifiers + [word], colours=[w for w in modifiers if w in COLOURS],
                               sizes=[w for w in modifiers if w in SMALL_WORDS | BIG_WORDS], other="other" in modifiers))
            i += 1
            continue
        if is_noun(word) and word in COLOURS and nxt in ("one", "ones"):
            i += 1  # "the orange one": a colour here, not the fruit
            continue
        if is_noun(word) and nxt in _VERB_CUES and word not in SPECIAL_NOUNS:
            i += 1  # "hammer the drum", "can you...": a noun word used as a verb
            continue
        if is_noun(word):
            # a noun followed by another noun modifies it (`drum stick`), unless the next one names a part
            if is_noun(nxt) and nxt not in PART_NOUNS and singular(nxt) not in PART_NOUNS:
                i += 1
                continue
            head = word if word in lexicon else singular(word)
            begin = i
            while begin > 0 and i - begin < 4:
                prev = words[begin - 1]
                if prev in DETERMINERS or prev in PUNCTUATION or not prev.isalpha() or prev in _NOT_MODIFIERS:
                    break
                begin -= 1
            modifiers = words[begin:i]
            end = i + 1
            while end < len(words) and (words[end] in PART_NOUNS or singular(words[end]) in PART_NOUNS):
                end += 1
            mention = Mention(
                start=begin, end=end, head=head, words=modifiers + [word],
                colours=[w for w in modifiers if w in COLOURS], sizes=[w for w in modifiers if w in SMALL_WORDS | BIG_WORDS],
                plural=head != word and word not in lexicon, other="other" in modifiers or "another" in modifiers,
                special=SPECIAL_NOUNS.get(head),
            )
            out.append(mention)
            i = end
            continue
        i += 1
    return out


_VERB_CUES = frozenset(["the", "a", "an", "this", "that", "these", "those", "your", "my", "you", "it", "them", "i", "we"])
"""Words that, right after a noun word, show it is used as a verb (nouns are not followed by these)."""

_NOT_MODIFIERS = frozenset(
    ["in", "into", "inside", "within", "on", "onto", "atop", "upon", "of", "with", "using", "by", "from", "to", "at", "and", "or", "then", "it", "them", "is", "are", "be", "was", "so", "until", "while", "after", "before", "up", "down", "out", "off", "over", "under", "put", "place", "set", "drop", "move", "insert", "nest", "stack", "lay", "pick", "weigh", "strike", "beat", "hit", "tap", "open", "close", "shut", "push", "pull", "grab", "take", "lift", "get", "bring", "carry"]
)
"""Words that end a noun phrase when reading backwards from its head (prepositions, verbs, conjunctions)."""


# --- clauses, counts, holds --------------------------------------------------------------------------

_SUCCESS = re.compile(
    r"\b(?:success(?:\s+condition)?\s*(?:is|means|when|:|-)|succeeds?\s+(?:when|if)|done\s+when|"
    r"the\s+task\s+is\s+(?:complete|done|successful)\s+when|it\s+is\s+successful\s+when)",
    re.IGNORECASE,
)


def split_success(text: str) -> tuple[str, str]:
    """(instruction, success clause) of a task text; the clause is empty when the text states none."""
    match = _SUCCESS.search(text)
    if match is None:
        return text.strip(), ""
    return text[: match.start()].strip(), text[match.end():].strip()


def repeat_count(words: list[str], default: int) -> tuple[int | None, str]:
    """How many times something is to be done: (count, how it was said). `default` for `repeatedly`
    and the like; None when the text says nothing about it."""
    joined = " ".join(words)
    for i in range(len(words)):
        if words[i] in ("twice", "thrice", "once"):
            return {"twice": 2, "thrice": 3, "once": 1}[words[i]], words[i]
        number = number_at(words, i)
        if number is None:
            continue
        value, width = number
        nxt = words[i + width] if i + width < len(words) else ""
        if nxt in COUNT_NOUNS or (nxt == "x" and value == int(value)):
            if value != int(value) or value < 1:
                continue
            return int(value), " ".join(words[i:i + width + 1])
    for phrase in REPEATED_WORDS:
        if re.search(rf"\b{phrase}\b", joined):
            return default, phrase
    return None, ""


_SECONDS = frozenset(["s", "sec", "secs", "second", "seconds"])
_MILLISECONDS = frozenset(["ms", "millisecond", "milliseconds"])


def hold_seconds(words: list[str]) -> float | None:
    """A duration stated with `for` (`for one second`, `for at least 2 s`, `for half a second`,
    `for 500 ms`), in seconds; None when there is none."""
    for i, word in enumerate(words):
        if word != "for":
            continue
        j = i + 1
        while j < len(words) and words[j] in ("at", "least", "about", "around", "roughly", "approximately", "some",
                                               "a", "an", "full", "whole", "another"):
            if words[j] in ("a", "an") and j + 1 < len(words) and words[j + 1] in _SECONDS:
                return 1.0  # "for a second"
            j += 1
        number = number_at(words, j)
        if number is None:
            continue
        value, width = number
        k = j + width
        if value == 0.5 and k < len(words) and words[k] in ("a", "an"):  # "half a second"
            k += 1
        unit = words[k] if k < len(words) else ""
        if unit in _SECONDS:
            return value
        if unit in _MILLISECONDS:
            return value / 1000.0
    return None


STILL_WORDS = frozenset(["still", "stable", "steady", "stably", "motionless", "stationary", "settled", "settles", "settle", "rest", "rests", "resting"])
"""Words asking that things end up not moving."""
