"""Embodied-R's text rules: per task, a simple deterministic rule that reads the perception text.

They are the method's ``text_rules`` (``Method.text_rules``, :data:`TEXT_RULES`), which evaluation's
text-rule baseline (evaluation/text_rule_baseline.py) reaches through each row's method. A reasoner that
scores no better than these rules has not shown that it reasons; a task where a rule is often exactly right
is one whose answer the frame descriptions spell out (its **answerable ceiling**). The rules read only the
``Frame k: ...`` lines of a prompt's last user message and the question's options (a prompt without frame
lines: no rule applies):

- ``last_action``: the option equal to the action that opens the last frame (``After <action>``).
- ``obj_appearance_order``: the option listing the categories in the order of the frame in which each
  is first mentioned; two categories first mentioned in the same frame, or one never mentioned, and
  the rule does not apply.
- ``object_counting``: the category's mentions in the frames' new-object sentences ("Newly visible:
  ...", and the first frame's "I see ..."), summed over the frames. One instance is mentioned again
  and again across frames (in the question's sentence "The chair is visible: ..." of every frame
  where it is in view, with slightly different distances and directions), so mentions cannot simply
  be added up; the new-object sentences name each instance once when it comes into view (again if
  it left the view and came back). Text without such sentences: the instances in view in the first
  frame plus every rise of that number between consecutive frames. Measured on 285 counting
  questions of 300 generated scenes (``synth world`` seeds 11 and 29, 320x240, 12 s, oracle
  perception over at most 6 key frames), exact share / mean MRA: new-object sentences summed
  0.51 / 0.58 (kept); first frame plus rises in view 0.48 / 0.56; the most mentions in one frame
  0.47 / 0.53 (the new-object and the question's sentence name one instance twice); the most in one
  sentence, i.e. in view together, 0.39 / 0.46; distinct "direction, distance" phrases 0.29 / 0.35.
  (Answering 2 every time scores 0.78 / 0.86 there, as most generated rooms hold two: that is the
  ``prior`` baseline's median, not a reading of the text.)
- ``egocentric_direction``: the last frame's direction words for the object mapped to a quadrant
  (ahead-left -> front-left, ahead-right -> front-right, behind-left -> back-left, behind-right ->
  back-right); "straight ahead" and "to the left/right" do not determine a quadrant, and an object
  not mentioned in the last frame has none: the rule does not apply.
- relative distance, relative direction (easy, medium, hard), route planning and absolute distance:
  the named objects placed on a floor plan from one frame's bearing words and distances
  (position_rules.py).
- every other task (object and room size: the text states no sizes): no rule.

What counts as a mention of an object, and how the frames are read, is methods/embodied_r/frame_text.py.

How a rule's answer is scored, and a row where no rule applies, is the baseline's
(evaluation/text_rule_baseline.py).

>>> text = "Frame 0: Observe: a sofa.\\nFrame 1: After Rotate left, Observe: a door.\\nQuestion: Which action?"
>>> row = PromptRow("q", "last_action", [{"role": "user", "content": text}], "B", "choice",
...                 ["A. Rotate right", "B. Rotate left"])
>>> name, rule = TEXT_RULES["last_action"]
>>> name, rule(row)
("last frame's action", ('B', None))
>>> rule(PromptRow("r", "last_action", [{"role": "user", "content": "Question: Which action?"}], "B", "choice"))
(None, 'no frame lines in the prompt')
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

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
    sentences,
    user_text,
    video_frames,
)
from embodied_r.methods.embodied_r.position_rules import POSITION_RULES

# ---------------------------------------------------------------------------------------------------
# The rules: each returns (answer, None) when it applies, or (None, reason) when it does not
# ---------------------------------------------------------------------------------------------------

Outcome = tuple[Any, str | None]


def option_letter(row: PromptRow, wanted: str) -> str | None:
    def norm(text: str) -> str:
        return " ".join(text.lower().replace(",", " , ").split()).rstrip(".")

    matches = [letter for letter, text in option_texts(row.options).items() if norm(text) == norm(wanted)]
    return matches[0] if len(matches) == 1 else None


def last_action_rule(row: PromptRow, frames: Sequence[Frame]) -> Outcome:
    if not frames[-1].action:
        return None, "the last frame names no action"
    letter = option_letter(row, frames[-1].action)
    return (letter, None) if letter else (None, f"the last action is not one of the options: {frames[-1].action}")


def appearance_order_rule(row: PromptRow, frames: Sequence[Frame]) -> Outcome:
    texts = list(option_texts(row.options).values())
    if not texts:
        return None, "no options"
    categories = [c.strip() for c in texts[0].split(",") if c.strip()]
    first: dict[str, int] = {}
    for category in categories:
        pattern = mention_pattern(category)
        seen = [position for position, frame in enumerate(frames) if pattern.search(frame.view)]
        if not seen:
            return None, f"category never mentioned: {category}"
        first[category] = seen[0]
    by_frame = Counter(first.values())
    tied = sorted(c for c, position in first.items() if by_frame[position] > 1)
    if tied:
        return None, f"categories first mentioned in the same frame: {', '.join(tied)}"
    order = ", ".join(sorted(categories, key=first.__getitem__))
    letter = option_letter(row, order)
    return (letter, None) if letter else (None, f"no option lists the order of first mentions: {order}")


def counting_rule(row: PromptRow, frames: Sequence[Frame]) -> Outcome:
    category = counted_category(row)
    if category is None:
        return None, "the question names no category to count"
    pattern = mention_pattern(category)
    if any(new_object_sentences(frame) for frame in frames):
        count = sum(len(pattern.findall(s)) for frame in frames for s in new_object_sentences(frame))
    else:
        # Without new-object sentences: the instances in view in the first frame plus every rise of that
        # number from one frame to the next (in view = the most mentioned in one sentence of the frame).
        in_view = [max([len(pattern.findall(s)) for s in sentences(frame.view)] or [0]) for frame in frames]
        count = in_view[0] + sum(max(0, b - a) for a, b in zip(in_view, in_view[1:]))
    return (count, None) if count else (None, "category never mentioned")


def egocentric_direction_rule(row: PromptRow, frames: Sequence[Frame]) -> Outcome:
    name = direction_object(row)
    if name is None:
        return None, "the question names no object"
    view = frames[-1].view
    quadrants = set()
    mentions = list(mention_pattern(name).finditer(view))
    if not mentions:
        return None, "object not in the last frame"
    for mention in mentions:
        clause = clause_after(view, mention.end())
        quadrants |= {q for word, q in QUADRANT_WORDS.items() if re.search(rf"\b{word}\b", clause)}
    if len(quadrants) != 1:
        return None, ("the last frame's direction words do not determine a quadrant" if not quadrants
                      else f"the last frame gives several quadrants: {', '.join(sorted(quadrants))}")
    letter = option_letter(row, quadrants.pop())
    return (letter, None) if letter else (None, "the quadrant is not one of the options")


Rule = Callable[[PromptRow, Sequence[Frame]], Outcome]


def _as_option(rule: Rule) -> Rule:
    """A rule that answers with an option's text, answering with its letter instead (numbers pass)."""

    def lettered(row: PromptRow, frames: Sequence[Frame]) -> Outcome:
        answer, reason = rule(row, frames)
        if reason is not None or row.answer_type != "choice":
            return answer, reason
        letter = option_letter(row, str(answer))
        return (letter, None) if letter else (None, f"no option says: {answer}")

    return lettered


RULES: dict[str, tuple[str, Rule]] = {
    "last_action": ("last frame's action", last_action_rule),
    "obj_appearance_order": ("order of first mentions", appearance_order_rule),
    "object_counting": ("new-object mentions, summed", counting_rule),
    "egocentric_direction": ("last frame's direction", egocentric_direction_rule),
    **{task: (name, _as_option(rule)) for task, (name, rule) in POSITION_RULES.items()},
}


# ---------------------------------------------------------------------------------------------------
# The method's text rules: each reads its row's frames
# ---------------------------------------------------------------------------------------------------

RowRule = Callable[[PromptRow], Outcome]


def _on_frames(rule: Rule) -> RowRule:
    """``rule`` over the frames of its row's prompt; a prompt without frame lines: the rule does not apply."""

    def on_row(row: PromptRow) -> Outcome:
        frames = video_frames(user_text(row))
        if not frames:
            return None, "no frame lines in the prompt"
        return rule(row, frames)

    return on_row


# ``Method.text_rules`` of Embodied-R: task -> (rule name, ``fn(row) -> (answer, reason)``).
TEXT_RULES: dict[str, tuple[str, RowRule]] = {task: (name, _on_frames(rule)) for task, (name, rule) in RULES.items()}
