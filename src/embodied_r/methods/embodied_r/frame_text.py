"""Reading the perception text of an Embodied-R reasoner prompt: its ``Frame k:`` blocks, the objects
they mention, and the object a question asks about.

Shared by the method's text rules (text_rules.py, position_rules.py), which answer from this text, and the
warm-up's evidence quote (evidence.py), which copies the part of it an answer depends on.

An object is *mentioned* where an indefinite noun phrase names it, ``a|an`` plus up to three describing
words and the category ("a red chair", "an orange stool", "a dark brown bookshelf"), as the oracle
writes every sighting. Sentences such as "The chair is not visible." name the category without seeing
it, which is why ``the`` does not count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from embodied_r.core.records import PromptRow

_FRAME_START_RE = re.compile(r"^Frame (\d+): ", re.MULTILINE)
# What ends the last frame: the ">" closing the official "Video content" block, or the question.
_AFTER_FRAMES_RE = re.compile(r"^(?:>\s*$|\s*Question:)", re.MULTILINE)
_FRAME_BODY_RE = re.compile(r"Frame \d+: (?:After (?P<action>[^\n]*?), )?Observe:\s*(?P<view>.*)\Z", re.DOTALL)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")  # "2.1 m" keeps its point: no space follows it


@dataclass(frozen=True)
class Frame:
    """One ``Frame k:`` block of a prompt: its number, the action that led to it (None for the first
    frame or one without ``After ...``), its description, and where it lies in the text."""

    index: int
    action: str | None
    view: str
    start: int
    end: int


def user_text(row: PromptRow) -> str:
    """The text of the row's last user message (the text parts of an image message)."""
    for message in reversed(row.prompt):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
        return str(content or "")
    return ""


def video_frames(text: str) -> list[Frame]:
    r"""The ``Frame k:`` blocks of a reasoner's user text, oldest first. A block runs to the next
    ``Frame`` line; the last one to the line that closes the video content (``>``, or ``Question:``).

    >>> frames = video_frames("Video content:\nFrame 0: Observe: a sofa.\nFrame 1: After Rotate left, "
    ...                       "Observe: a door.\nQuestion: Where?")
    >>> [(f.index, f.action, f.view) for f in frames]
    [(0, None, 'a sofa.'), (1, 'Rotate left', 'a door.')]
    """
    starts = list(_FRAME_START_RE.finditer(text))
    if not starts:
        return []
    closing = _AFTER_FRAMES_RE.search(text, starts[-1].end())
    stop = closing.start() if closing else len(text)
    frames = []
    for match, following in zip(starts, [*starts[1:], None]):
        end = following.start() if following else stop
        body = _FRAME_BODY_RE.match(text[match.start():end].rstrip("\n"))
        action = body.group("action") if body else None
        view = (body.group("view") if body else text[match.end():end]).strip()
        frames.append(Frame(int(match.group(1)), action, view, match.start(), end))
    return frames


def mention_pattern(category: str) -> re.Pattern[str]:
    """An indefinite noun phrase naming ``category``: ``a|an``, up to three words, the category.

    >>> pattern = mention_pattern("trash bin")
    >>> len(pattern.findall("I see a green trash bin; an old dark green trash bin. The trash bin is not visible."))
    2
    >>> mention_pattern("table").findall("a red chair and table; a brown table")
    ['a brown table']
    """
    name = r"\s+".join(re.escape(word) for word in category.split())
    # A describing word is not a joining or a determining one: "a chair and table" names no table.
    word = r"(?!(?:and|or|with|a|an|the)\s)[a-z][a-z-]*\s+"
    return re.compile(rf"\b(?:a|an)\s+(?:{word}){{0,3}}?{name}\b", re.IGNORECASE)


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END_RE.split(text) if s.strip()]


# The sentence of a frame's newly visible objects (the first frame: everything it sees), as the oracle writes
# Embodied-R's "newly visible spatial information" part; structured-v1 puts "New: " before it.
_NEW_OBJECTS_RE = re.compile(r"^(?:New:\s*)?(?:Newly visible|I see)\b", re.IGNORECASE)
_COUNT_QUESTION_RE = re.compile(r"How many (.+?)(?:\(s\)|s)? (?:are|is) ", re.IGNORECASE)
_DIRECTION_QUESTION_RE = re.compile(r"where is the (.+?) relative to", re.IGNORECASE)
_CLAUSE_END_RE = re.compile(r";|\.(?:\s|$)")
# Direction words that name one quadrant around the viewer; "straight ahead" and "to the left" name none.
QUADRANT_WORDS = {"ahead-left": "front-left", "front-left": "front-left", "ahead-right": "front-right",
                  "front-right": "front-right", "behind-left": "back-left", "back-left": "back-left",
                  "behind-right": "back-right", "back-right": "back-right"}


def new_object_sentences(frame: Frame) -> list[str]:
    """The frame's sentences that list newly visible objects ("Newly visible: ...", frame 0's "I see ...").

    >>> new_object_sentences(Frame(1, "x", "Newly visible: a red chair. The chair is visible: a red chair.", 0, 0))
    ['Newly visible: a red chair.']
    """
    return [s for s in sentences(frame.view) if _NEW_OBJECTS_RE.match(s)]


def question_text(row: PromptRow) -> str:
    return user_text(row).split("Question:")[-1]


def counted_category(row: PromptRow) -> str | None:
    """The category a counting question asks about ("How many chair(s) are in this room?" -> chair)."""
    match = _COUNT_QUESTION_RE.search(question_text(row))
    return match.group(1).strip() if match else None


def direction_object(row: PromptRow) -> str | None:
    """The object an egocentric-direction question asks about ("where is the sofa relative to me")."""
    match = _DIRECTION_QUESTION_RE.search(question_text(row))
    return match.group(1).strip() if match else None


def clause_after(view: str, position: int) -> str:
    """The words from ``position`` to the end of their clause (";" or a sentence's full stop), lowercased:
    what the oracle says of the object mentioned just before.

    >>> clause_after("a red chair ahead-left, about 2.1 m away; a door.", 11)
    ' ahead-left, about 2.1 m away'
    """
    end = _CLAUSE_END_RE.search(view, position)
    return view[position:end.start() if end else len(view)].lower()
