"""The lines a question's answer depends on, quoted in a few words: the opening of the warm-up's
``evidence`` think (training/warmup.py), the general form of its ``latest-frame`` quote.

The quote is copied from the frame descriptions, never from the answer: it states what the text says
about the question (the last frame's action, where each listed category is first seen, which frames
newly see the counted category, where the asked object is in the last frame) and leaves the choice to
the model. A policy warmed up to write it has the evidence in view when it chooses, so GRPO's rewards
can teach it to choose what it quoted. Task types whose answer the text does not state get no quote.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from embodied_r.core.parsing import option_texts
from embodied_r.core.records import PromptRow
from embodied_r.methods.embodied_r.frame_text import (
    QUADRANT_WORDS,
    Frame,
    clause_after,
    counted_category,
    direction_object,
    mention_pattern,
    new_object_sentences,
    user_text,
    video_frames,
)
from embodied_r.methods.embodied_r.prompts import latest_frame_action


def last_action_quote(row: PromptRow, frames: Sequence[Frame]) -> str:
    action = frames[-1].action
    return f"The latest frame: After {action}." if action else "The latest frame names no action."


def appearance_quote(row: PromptRow, frames: Sequence[Frame]) -> str:
    texts = list(option_texts(row.options).values())
    categories = [c.strip() for c in texts[0].split(",") if c.strip()] if texts else []
    parts = []
    for category in sorted(categories):  # alphabetical: the quote's order says nothing about the answer
        pattern = mention_pattern(category)
        seen = [frame.index for frame in frames if pattern.search(frame.view)]
        parts.append(f"{category} {seen[0]}" if seen else f"{category} never")
    return "First seen in frame: " + ", ".join(parts) + "." if parts else ""


def counting_quote(row: PromptRow, frames: Sequence[Frame]) -> str:
    category = counted_category(row)
    if category is None:
        return ""
    pattern = mention_pattern(category)
    sightings = [str(frame.index) for frame in frames for sentence in new_object_sentences(frame)
                 for _ in pattern.findall(sentence)]
    return (f"New {category} in frames: {', '.join(sightings)}." if sightings
            else f"No {category} is newly seen.")


def direction_quote(row: PromptRow, frames: Sequence[Frame]) -> str:
    name = direction_object(row)
    if name is None:
        return ""
    words = []
    for mention in mention_pattern(name).finditer(frames[-1].view):
        clause = clause_after(frames[-1].view, mention.end())
        words += [w for w in QUADRANT_WORDS if re.search(rf"\b{w}\b", clause)] or [clause.split(",")[0].strip()]
    return (f"The latest frame: the {name} {' and '.join(words)}." if words
            else f"The latest frame does not show the {name}.")


QUOTES: dict[str, Callable[[PromptRow, Sequence[Frame]], str]] = {
    "last_action": last_action_quote,
    "obj_appearance_order": appearance_quote,
    "object_counting": counting_quote,
    "egocentric_direction": direction_quote,
}


_FACTS_RE = re.compile(r"Facts: .*?\.(?=\s|$)(?!\d)")


def facts_quote(frames: Sequence[Frame]) -> str:
    """The last frame's ``Facts: ...`` sentence (the oracle's ``relations`` level states there what the question
    needs), or "" without one. Its numbers keep their decimal points: the sentence ends at a full stop that
    no digit follows.

    >>> facts_quote([Frame(0, None, "In view: sofa 1. Facts: the chair instances seen: chair 1, chair 2.", 0, 0)])
    'Facts: the chair instances seen: chair 1, chair 2.'
    >>> facts_quote([Frame(0, None, "Facts: distances from the sofa: bed 1.20 m, door 0.75 m.", 0, 0)])
    'Facts: distances from the sofa: bed 1.20 m, door 0.75 m.'
    """
    match = _FACTS_RE.search(frames[-1].view) if frames else None
    return match.group(0) if match else ""


def evidence_quote(row: PromptRow) -> str:
    r"""The quote for ``row`` ("" when its task type has none, or its prompt has no frame lines). A prompt at
    the ``relations`` level quotes its facts sentence, whatever the task type.

    >>> text = "Frame 0: Observe: I see a red chair.\nFrame 1: After Rotate left, Observe: a door.\nQuestion: x"
    >>> row = PromptRow("q", "last_action", [{"role": "user", "content": text}], "A", "choice",
    ...                 ["A. Rotate left", "B. Move forward"])
    >>> evidence_quote(row)
    'The latest frame: After Rotate left.'
    >>> evidence_quote(PromptRow("r", "route_planning", [{"role": "user", "content": text}], "A", "choice"))
    ''
    """
    frames = video_frames(user_text(row))
    facts = facts_quote(frames)
    if facts:
        return facts
    quote = QUOTES.get(row.task)
    return quote(row, frames) if frames and quote else ""


def think_quote(row: PromptRow, style: str) -> str:
    r"""What a format warm-up think opens with under ``style`` (``Method.think_quote``, training/warmup.py):
    the evidence quote under ``evidence`` and ``listed``, the latest frame's action under ``latest-frame``, ""
    otherwise.
    A prompt without frame lines has no latest frame to quote: a ValueError saying what to use instead.

    >>> text = "Frame 0: Observe: a sofa.\nFrame 1: After Rotate left, Observe: a door.\nQuestion: x"
    >>> think_quote(PromptRow("q", "route_planning", [{"role": "user", "content": text}], "A", "choice"),
    ...             "latest-frame")
    ' The latest frame: After Rotate left.'
    """
    if style in ("evidence", "listed"):  # listed: the evidence quote, then the options (training/warmup.py)
        quote = evidence_quote(row)
        return f" {quote}" if quote else ""
    if style != "latest-frame":
        return ""
    action = latest_frame_action(str(row.prompt[-1].get("content") or ""))
    if action is None:
        raise ValueError(f"format_warmup.think latest-frame quotes the last 'Frame k:' line of an Embodied-R "
                         f"prompt; row {row.id!r} has none (use option-first for other prompts)")
    return f" The latest frame: {action}."
