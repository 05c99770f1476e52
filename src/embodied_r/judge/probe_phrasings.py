"""Reasoning texts for the judge probe, one set per kind, and options said without their own words.

The probe (``embodied_r.judge.probe``) asks a judge which option a short reasoning reaches.
Reasoning that ends on its target can be "read" by a string matcher that answers the option mentioned
last, so the probe also writes reasoning such a matcher gets wrong:

- ``target-first``: the target is named first and an option it rules out is named last;
- ``paraphrase``: the target is described without any word of any option of the question ("my
  clockwise side" for "right", "the couch" for "sofa", "a value of one and a half" for "1.5 meters");
- ``no-basis``: reasoning that supports no option (undecided between two, about something else, or
  against every option), where the right answer is ``none``.

Paraphrases come from a small table of what embodied spatial questions ask about: directions,
movements and turns, household objects, and numbers. An option outside the table has no paraphrase;
a question with such an option gives no paraphrase cases (the probe then adds ``BUILTIN_QUESTIONS``).

>>> paraphrase("1.5 meters", option_words(["A. 1.5 meters", "B. 3.0 meters"]), random.Random(0))
'a value of one and a half'
>>> paraphrase("Turn Left, Turn Back", option_words(["A. Turn Left, Turn Back"]), random.Random(0))
'first pivot anticlockwise, then reverse my heading'
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence

# ---------------------------------------------------------------------------------------------------
# Phrasings, by kind. {target}: the target option's text; {other}/{others}: options it rules out;
# {topic}: words of the question; {a}/{b}/{rest}: options a no-basis reasoning leaves open or rejects.
# ---------------------------------------------------------------------------------------------------

# Each ends on its target, so the option mentioned last is the right one.
CONTENT_TEMPLATES = (
    (
        "The question asks {topic}. Going through the choices, {others} do not match what was observed, "
        'while "{target}" does. So the answer is "{target}".'
    ),
    (
        'I need to work out {topic}. It cannot be "{other}"; the observations point to "{target}". '
        'Therefore: "{target}".'
    ),
    (
        'Considering {topic}: "{target}" fits the evidence best, better than "{other}". '
        'Final conclusion: "{target}".'
    ),
    (
        "Ruling out {others}, since none of them agree with the scene, what remains for {topic} is "
        '"{target}", and that is my conclusion.'
    ),
    'At first "{other}" looked possible, but checking {topic} again, the right description is "{target}".',
)

# The target first, a ruled-out option last: "the option mentioned last" answers the wrong one.
TARGET_FIRST_TEMPLATES = (
    '"{target}" is what the frames show for {topic}. I also weighed "{other}", but the scene rules "{other}" out.',
    'The answer is "{target}". It cannot be "{other}", since nothing observed supports "{other}".',
    'Everything observed agrees with "{target}"; by contrast, {others} each contradict something in the scene.',
    '"{target}" fits. At first glance "{other}" seemed plausible too, but a closer look excludes "{other}".',
    'My conclusion for {topic} is "{target}", and not {others}.',
)

# No option word at all; {phrase} is the target said another way.
PARAPHRASE_TEMPLATES = (
    "Going through the frames, what they show is {phrase}. That settles it.",
    "The observations point to {phrase}, and nothing I saw contradicts that.",
    "After checking each frame, my conclusion is {phrase}.",
    "Putting the views together, it has to be {phrase}.",
)

# Reasoning that supports no option: the right answer is none.
NO_BASIS_TEMPLATES = (
    "The frames are too dark to make out anything about {topic}, so I cannot tell which choice is right.",
    "I went through the observations, but the things the question is about never appear in them; nothing "
    "decides it.",
    'Both "{a}" and "{b}" stay possible: what I saw fits either one equally, and I cannot choose.',
    '"{a}" does not match what I saw, and neither does any other choice ({rest}).',
    "I am not sure. The scene description is too vague to support any of the choices over the others.",
    'I first thought of "{a}", then of "{b}", but I could confirm neither, and I have nothing to go on.',
)

# Questions for the paraphrase kind when the probed rows' options are outside the table (sentence-long
# options, say): every option here has a paraphrase.
BUILTIN_QUESTIONS = (
    ("Question: Standing by the door and facing the window, where is the lamp?",
     ["A. left", "B. right", "C. back", "D. front"]),
    ("Question: Which movement did the camera make between the last two frames?",
     ["A. Move forward", "B. Move backward", "C. Rotate left", "D. Rotate right"]),
    ("Question: Seen from where I stand, where is the chair relative to me?",
     ["A. front-left", "B. front-right", "C. back-left", "D. back-right"]),
    ("Question: Which object is nearest to the camera in the first frame?",
     ["A. sofa", "B. refrigerator", "C. bed", "D. trash bin"]),
)

# ---------------------------------------------------------------------------------------------------
# The paraphrase table (keys lower-case, hyphens and underscores as spaces)
# ---------------------------------------------------------------------------------------------------

_PHRASES: dict[str, tuple[str, ...]] = {
    # where something is, seen from the viewer
    "left": ("the side a quarter turn anticlockwise of where I face", "my anticlockwise side"),
    "right": ("the side a quarter turn clockwise of where I face", "my clockwise side"),
    "front": ("the way I am facing", "the space straight ahead of me"),
    "forward": ("the way I am facing", "the space straight ahead of me"),
    "back": ("the space at my rear", "the side half a turn from where I face"),
    "behind": ("the space at my rear", "the side half a turn from where I face"),
    "front left": ("the area ahead of me and toward my anticlockwise side",),
    "front right": ("the area ahead of me and toward my clockwise side",),
    "back left": ("the area at my rear and toward my anticlockwise side",),
    "back right": ("the area at my rear and toward my clockwise side",),
    # movements and turns of the camera
    "move forward": ("stepping ahead in the direction I face", "advancing a step"),
    "move backward": ("stepping away toward my rear", "retreating a step"),
    "rotate left": ("spinning anticlockwise on the spot",),
    "rotate right": ("spinning clockwise on the spot",),
    "turn left": ("pivot anticlockwise",),
    "turn right": ("pivot clockwise",),
    "turn back": ("reverse my heading",),
    "go forward": ("carry on ahead",),
    # household objects (the synthetic world's vocabulary and common benchmark ones)
    "table": ("the flat-topped piece of furniture one sits at",),
    "chair": ("the seat with a backrest", "the single seat with legs and a backrest"),
    "stool": ("the backless seat",),
    "sofa": ("the couch",),
    "couch": ("the sofa",),
    "bed": ("the piece of furniture one sleeps in",),
    "door": ("the hinged panel one walks through",),
    "window": ("the glazed opening in the wall",),
    "tv": ("the television",),
    "television": ("the TV set",),
    "trash bin": ("the wastebasket", "the rubbish container"),
    "refrigerator": ("the fridge",),
    "fridge": ("the refrigerator",),
    "toilet": ("the lavatory",),
    "backpack": ("the rucksack",),
    "bathtub": ("the tub for bathing",),
    "washer": ("the washing machine",),
    "dishwasher": ("the machine that cleans plates",),
    "heater": ("the radiator",),
    "bookshelf": ("the shelving for books",),
    "mirror": ("the looking glass",),
    "fireplace": ("the hearth",),
    "lamp": ("the light fixture", "the reading light"),
    "whiteboard": ("the marker board",),
    "plant": ("the potted greenery",),
    "nightstand": ("the bedside cabinet", "the small cabinet beside the sleeping place"),
    "closet": ("the wardrobe",),
    "desk": ("the writing table", "the workstation"),
    "cabinet": ("the cupboard",),
    "sink": ("the basin",),
}

_UNITS = r"(?:[a-z]+(?:\s[a-z]+)?)?"
_NUMBER_RE = re.compile(rf"^(\d{{1,2}})(?:\.(\d+))?\s*{_UNITS}$")
_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_FRACTIONS = {"5": "and a half", "25": "and a quarter", "75": "and three quarters"}
# Words a paraphrase may share with an option: they say nothing about which option it is.
_FUNCTION_WORDS = frozenset("a an the of to and or in on at is my me i".split())


def option_words(options: Iterable[str]) -> set[str]:
    """The words of the options' texts (letters and function words left out), lower-case.

    >>> sorted(option_words(["A. Turn Left, Turn Back", "B. on the left"]))
    ['back', 'left', 'turn']
    """
    words: set[str] = set()
    for option in options:
        text = re.sub(r"^\s*\(?[A-Za-z]\s*[.):]\s*", "", str(option)).lower()
        words.update(w.strip(".") for w in re.findall(r"[a-z0-9]+(?:\.[0-9]+)?", text))
    return {w for w in words if w and w not in _FUNCTION_WORDS}


def free_of(text: str, words: Iterable[str]) -> bool:
    """True when no word of ``words`` starts a word of ``text`` ("door" is caught in "doorway")."""
    low = text.lower()
    return not any(re.search(rf"(?<![a-z0-9]){re.escape(w)}", low) for w in words)


def _key(text: str) -> str:
    return " ".join(re.sub(r"[-_]", " ", text.lower()).split())


def _number_words(whole: str, fraction: str | None) -> str | None:
    n = int(whole)
    words = _ONES[n] if n < 20 else _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _ONES[n % 10])
    digits = (fraction or "").rstrip("0")
    if not digits:
        return words
    if digits in _FRACTIONS:
        return f"{words} {_FRACTIONS[digits]}"
    return f"{words} point " + " ".join(_ONES[int(d)] for d in digits)


def _phrases(piece: str) -> tuple[str, ...]:
    """Ways to say one option (or one step of a list option) without its words; () when unknown."""
    key = _key(piece)
    if key in _PHRASES:
        return _PHRASES[key]
    number = _NUMBER_RE.match(key)
    if number:
        words = _number_words(number.group(1), number.group(2))
        return (f"a value of {words}",) if words else ()
    return ()


def paraphrase(text: str, forbidden: set[str], rng: random.Random) -> str | None:
    """``text`` (an option's text) said with none of ``forbidden``'s words, or None when the table has
    no such wording. A list option ("Turn Left, Turn Back") is said step by step, in order."""
    pieces = [p.strip() for p in text.split(",")] if "," in text else [text]
    said = []
    for piece in pieces:
        allowed = [p for p in _phrases(piece) if free_of(p, forbidden)]
        if not allowed:
            return None
        said.append(rng.choice(allowed))
    if len(said) == 1:
        return said[0]
    return "first " + ", then ".join(said)


def paraphrases_for(texts: Sequence[str], rng: random.Random) -> list[str] | None:
    """One paraphrase per option text, none using any option's words, or None when an option has none
    or two options would read alike ("3.0 meters" and "3.0 feet" both say "a value of three")."""
    forbidden = option_words(texts)
    said = [paraphrase(text, forbidden, rng) for text in texts]
    if any(s is None for s in said):
        return None
    if len({_key(t) for t in said if t}) < len(texts) or len({_shape(t) for t in texts}) < len(texts):
        return None
    return [s for s in said if s is not None]


def _shape(text: str) -> tuple[tuple[str, ...], ...]:
    """What an option's paraphrases can be: options with the same possibilities cannot be told apart."""
    return tuple(_phrases(p.strip()) for p in text.split(","))


def quoted(texts: Sequence[str]) -> str:
    """``["a", "b", "c"]`` -> ``'"a", "b" and "c"'``."""
    parts = [f'"{t}"' for t in texts]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


__all__ = ["BUILTIN_QUESTIONS", "CONTENT_TEMPLATES", "NO_BASIS_TEMPLATES", "PARAPHRASE_TEMPLATES",
           "TARGET_FIRST_TEMPLATES", "free_of", "option_words", "paraphrase", "paraphrases_for", "quoted"]
