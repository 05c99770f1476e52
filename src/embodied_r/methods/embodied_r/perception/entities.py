"""Entity names mentioned in a question, for perception prompts that must not show the choices.

The improved perception prompt (``json-v1``) tells the VLM which things to look for without showing the
answer choices, because the official prompt's choices let the VLM leak an answer into its descriptions
(the official pipeline passes the options themselves). The entities come, in order of preference, from the question's
``meta`` (a generator that knows the objects writes ``meta["entities"]`` or ``meta["objects"]``), or
from a small rule-based noun-phrase extractor over the question stem only (never the options).

The extractor is deliberately simple and predictable: it picks phrases introduced by a determiner
("the red chair", "a door", "each table"), the object after "How many", and comma lists in
parentheses (VSI-Bench's "which of these objects (sofa, tv, bed) ..."), then drops generic words
("room", "distance", "video", ...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

MAX_ENTITIES = 8

# Words that end a noun phrase started by a determiner (function words and common motion verbs).
_STOP_WORDS = frozenset(
    """a an the and or but of to in on at by for from with without into onto over under above below
    near next between behind beside besides around across along through toward towards than then
    is are was were be been being am do does did has have had will would can could should may might
    must if when while where which who whom whose what how that this these those it its i me my you
    your we our they their he she his her as so not no yes up down left right closest farthest nearest
    first last current each every any all some one two three four five six seven eight nine ten
    after before during until since turn turns fly flies go goes move moves rise stop reach get face
    facing standing stand walk walks look looking measured""".split()
)

# Nouns that name no perceivable thing (measurements, the video itself, the agent, directions).
_GENERIC = frozenset(
    """room video videos frame frames camera agent point points distance distances size sizes length
    width height meters meter metre metres centimeters centimetres cm m order time times position
    positions location locations direction directions way side sides number count question questions
    option options answer choice choices instruction instructions step steps view views observation
    observations moment series movement movements object objects thing things area space middle top
    bottom end start beginning edge centre center front back first dimension dimensions appearance
    categories category following""".split()
)

_DETERMINERS = frozenset({"the", "a", "an", "each", "every", "any", "my"})
_TOKEN = re.compile(r"[A-Za-z][A-Za-z\-']*|[^\sA-Za-z]")
_PHRASE_WORDS = 5
# Comma lists in parentheses (VSI-Bench relative distance) or after a colon (appearance order).
_LISTS = (re.compile(r"\(([^()]*,[^()]*)\)"), re.compile(r":\s*([^:?()]*,[^:?()]*)\?"))


def _phrase_head(words: Sequence[str]) -> str:
    """Cut a word run at the first stop word or punctuation; empty when the head noun is generic."""
    kept: list[str] = []
    for word in words[:_PHRASE_WORDS]:
        if word.lower() in _STOP_WORDS or not word[0].isalpha():
            break
        kept.append(word.lower())
    # A phrase whose head noun is generic ("the longest dimension") names nothing to look for.
    if not kept or kept[-1] in _GENERIC:
        return ""
    return " ".join(kept)


def _determiner_phrases(question: str) -> list[tuple[int, str]]:
    tokens = [(m.start(), m.group(0)) for m in _TOKEN.finditer(question)]
    found: list[tuple[int, str]] = []
    for i, (_, word) in enumerate(tokens):
        lower = word.lower()
        if lower in _DETERMINERS or (lower == "many" and i > 0 and tokens[i - 1][1].lower() == "how"):
            name = _phrase_head([w for _, w in tokens[i + 1:i + 1 + _PHRASE_WORDS]])
            if name and i + 1 < len(tokens):
                found.append((tokens[i + 1][0], name))
    return found


def _from_meta(meta: Mapping[str, Any]) -> list[str] | None:
    for name in ("entities", "objects"):
        value = meta.get(name)
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value) and value:
            return [" ".join(v.split()) for v in value]
    return None


def extract_entities(question: str, meta: Mapping[str, Any] | None = None,
                     max_entities: int = MAX_ENTITIES) -> list[str]:
    """Entity names in ``question`` (stem only), deduplicated, in order of first mention.

    >>> extract_entities("What is the distance between the sofa and the tv (in meters)?")
    ['sofa', 'tv']
    >>> extract_entities("How many chairs are in this room?")
    ['chairs']
    >>> extract_entities("Which of these objects (bed, trash bin, door) is the closest to the table?")
    ['bed', 'trash bin', 'door', 'table']
    >>> extract_entities("Where is it?", meta={"entities": ["red  chair"]})
    ['red chair']
    """
    if meta:
        given = _from_meta(meta)
        if given is not None:
            return _dedupe(given)[:max_entities]
    found = _determiner_phrases(question)
    for pattern in _LISTS:
        for match in pattern.finditer(question):
            offset = match.start(1)
            for item in match.group(1).split(","):
                name = _phrase_head([m.group(0) for m in _TOKEN.finditer(item)])
                if name:
                    found.append((offset, name))
                offset += len(item) + 1
    found.sort(key=lambda item: item[0])
    return _dedupe([name for _, name in found])[:max_entities]


def _dedupe(names: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        key = name.lower()
        if key and key not in seen:
            seen.add(key)
            out.append(name)
    return out
