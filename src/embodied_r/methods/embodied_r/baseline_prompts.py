r"""The prompts of two of evaluation's baselines for Embodied-R's rows, named by the method
(``Method.blind_prompt``, ``Method.direct_prompt``) and reached through each row's method.

- ``blind_prompt``: the row's prompt with the video description removed: every ``Frame k:`` block of the
  last user message is dropped; the system prompt, the rest of the user text (question, options) and the
  answer stay. The "Video content" wrapper (its header and "<" ">" in the official templates, the bare
  "Video content:" line in compact-v1) is left as it is: the prompt differs from the model's only by the
  frame descriptions, so a difference in score is theirs and not the template's.
- ``direct_answer_prompt``: the same user text under the no-thinking instruction (``direct_answer_messages``).

>>> from embodied_r.core.records import PromptRow
>>> text = "Video content: \n<\nHeader.\nFrame 0: Observe: a sofa.\n>\nQuestion: Where?\nChoices:\nA. l"
>>> prompt, removed = blind_prompt(PromptRow("q", "t", [{"role": "user", "content": text}], "A", "choice", ["A. l"]))
>>> prompt[-1]["content"], removed
('Video content: \n<\nHeader.\n>\nQuestion: Where?\nChoices:\nA. l', 1)
>>> direct_answer_prompt(PromptRow("q", "t", [{"role": "user", "content": "Q?"}], 2.0, "number"))[-1]["content"]
'Q?\nAnswer with a single number only, inside <answer> </answer>.'
"""

from __future__ import annotations

from typing import Any

from embodied_r.core.records import PromptRow
from embodied_r.methods.embodied_r.frame_text import video_frames
from embodied_r.methods.embodied_r.prompts import direct_answer_messages


def blind_prompt(row: PromptRow) -> tuple[list[dict[str, Any]], int]:
    """``row``'s prompt without the frame descriptions of its last user message, and how many frames that
    removed (0: no frame lines, the prompt as it is)."""
    last_user = max((i for i, m in enumerate(row.prompt) if m.get("role") == "user"), default=None)
    content = row.prompt[last_user].get("content") if last_user is not None else None
    if not isinstance(content, str):
        return [dict(m) for m in row.prompt], 0
    frames = video_frames(content)
    if frames:
        content = content[:frames[0].start] + content[frames[-1].end:]
    return [dict(m, content=content) if i == last_user else dict(m) for i, m in enumerate(row.prompt)], len(frames)


def direct_answer_prompt(row: PromptRow) -> list[dict[str, str]]:
    """The no-thinking prompt of ``row``: its last user text, asking for the answer alone in tags."""
    user = next((m["content"] for m in reversed(row.prompt) if m.get("role") == "user"), "")
    return direct_answer_messages(user, row.options)
