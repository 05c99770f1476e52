"""Key-frame chats: user turns that hold a video's key frames as images, each after its frame line.

A key-frame prompt row (``embodied-r build-prompts --input keyframes``, the paper's VLM arm) keeps the
cascade's wording, but where the text arm writes ``Frame k: After <action>, Observe: <description>``
it writes the frame line up to the action and then the frame itself::

    [{"type": "text", "text": "Please assume the role of an agent. ... <\\n<header>"},
     {"type": "text", "text": "\\nFrame 0:"}, {"type": "image", "image": "frames/v/000.jpg"},
     {"type": "text", "text": "\\nFrame 1: After Rotate left"}, {"type": "image", "image": "frames/v/001.jpg"},
     {"type": "text", "text": "\\n>\\nQuestion: ..."}]

A *frame unit* is one such text part and the image part(s) after it. Units are found by that structure
alone, so the context policy can drop the oldest frames of any such chat, as it drops the oldest frame
descriptions of a text prompt. Paths are as the row stores them (relative to the data file's folder).

>>> content = [{"type": "text", "text": "head"}, {"type": "text", "text": "\\nFrame 0:"},
...            {"type": "image", "image": "a.jpg"}, {"type": "text", "text": "\\nFrame 1: After x"},
...            {"type": "image", "image": "b.jpg"}, {"type": "text", "text": "\\n>\\nQuestion: q"}]
>>> frame_units(content)
[(1, 3), (3, 5)]
>>> [p["image"] for p in image_parts(without_oldest_keyframes([{"role": "user", "content": content}], 1))]
['b.jpg']
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

# A frame line opens a text part (after the newline that separates it from what came before).
FRAME_LINE = re.compile(r"\s*Frame \d+:")


def is_image_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "image"


def is_text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text"


def image_parts(messages: Sequence[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """The image parts of ``messages``, in prompt order."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            yield from (part for part in content if is_image_part(part))


def frame_units(content: Sequence[Any]) -> list[tuple[int, int]]:
    """``(start, end)`` indices into one message's content of each key frame: a text part that opens with
    ``Frame k:`` and the image parts right after it (a frame line with no image after it is not a unit)."""
    units: list[tuple[int, int]] = []
    index = 0
    while index < len(content):
        part = content[index]
        opens = is_text_part(part) and FRAME_LINE.match(str(part.get("text") or "")) is not None
        if opens and index + 1 < len(content) and is_image_part(content[index + 1]):
            end = index + 1
            while end < len(content) and is_image_part(content[end]):
                end += 1
            units.append((index, end))
            index = end
        else:
            index += 1
    return units


def keyframe_message_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the last user message whose content holds key-frame units, else None."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list) and frame_units(content):
            return index
    return None


def is_keyframe_chat(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``messages`` hold key frames as frame units (a key-frame prompt row)."""
    return keyframe_message_index(messages) is not None


def keyframe_count(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many key frames (frame units) the key-frame message holds (0 for other chats)."""
    index = keyframe_message_index(messages)
    return 0 if index is None else len(frame_units(messages[index]["content"]))


def without_oldest_keyframes(messages: Sequence[Mapping[str, Any]], count: int) -> list[dict[str, Any]]:
    """A copy of ``messages`` without the first ``count`` key frames (their frame lines and images)."""
    out = copy.deepcopy([dict(m) for m in messages])
    index = keyframe_message_index(out)
    if index is None or count <= 0:
        return out
    content = out[index]["content"]
    dropped = {i for start, end in frame_units(content)[:count] for i in range(start, end)}
    out[index]["content"] = [part for i, part in enumerate(content) if i not in dropped]
    return out


__all__ = ["FRAME_LINE", "frame_units", "image_parts", "is_image_part", "is_keyframe_chat", "is_text_part",
           "keyframe_count", "keyframe_message_index", "without_oldest_keyframes"]
