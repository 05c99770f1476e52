"""Format rewards: did the completion reason inside ``<think>`` and then answer inside ``<answer>``?

``format_reward`` is the rule Embodied-R trained with (ms-swift's built-in ``format`` reward, see
research/embodied_r.md §5.1): the completion must *start* with a think block, follow it (after optional
whitespace) with an answer block, and have nothing after ``</answer>``. It accepts degenerate outputs
such as an empty think block or several answer blocks nested inside the think text.

``strict_format_reward`` closes those holes, which matters because a format reward that is easy to
satisfy is the first thing GRPO learns to game (grpo_frameworks.md §7, pain 6): exactly one
non-empty think block, exactly one non-empty answer block, no stray tags, and an answer that the
evaluation parser can read as the row's answer type.

>>> format_reward(["<think>left of me</think>\\n<answer>A</answer>", "<answer>A</answer>"])
[1.0, 0.0]
>>> strict_format_reward(["<think></think><answer>A</answer>"], answer_type=["choice"], options=[["A. x", "B. y"]])
[0.0]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from embodied_r.reasoning.parsing import parse_answer
from embodied_r.rewards.text import column, completion_text

# The official rule, as a fact carried over: think block at the very start, answer block, then the end.
OFFICIAL_FORMAT_RE = re.compile(
    r"^<think>.*?</think>\s*<answer>.*?</answer>(?![\s\S])", re.DOTALL | re.MULTILINE
)

_STRICT_RE = re.compile(
    r"^\s*<think>(?P<think>.*?)</think>\s*<answer>(?P<answer>.*?)</answer>\s*$", re.DOTALL
)
_ANY_TAG_RE = re.compile(r"</?(?:think|answer)>", re.IGNORECASE)


def is_official_format(text: str) -> bool:
    """True when ``text`` passes the official Embodied-R format rule."""
    return OFFICIAL_FORMAT_RE.match(text) is not None


def is_strict_format(text: str, options: list[str] | None = None, answer_type: str | None = None) -> bool:
    """True for exactly one non-empty think block then one non-empty, readable answer block.

    ``answer_type``/``options`` make "readable" mean "``parse_answer`` returns a value"; without them
    any non-empty answer text counts.

    >>> is_strict_format("<think>a</think><answer>B</answer>", ["A. x", "B. y"], "choice")
    True
    >>> is_strict_format("<think>a <answer>A</answer></think><answer>B</answer>")
    False
    >>> is_strict_format("<think>a</think><answer>Z</answer>", ["A. x", "B. y"], "choice")
    False
    """
    match = _STRICT_RE.match(text)
    if match is None:
        return False
    think, answer = match.group("think"), match.group("answer")
    if not think.strip() or not answer.strip():
        return False
    if _ANY_TAG_RE.search(think) or _ANY_TAG_RE.search(answer):
        return False
    if answer_type is not None:
        return parse_answer(text, options, answer_type) is not None
    return True


def format_reward(completions: Sequence[Any], **_: Any) -> list[float]:
    """1.0 when a completion follows the official Embodied-R format rule, else 0.0.

    >>> format_reward(["<think>x</think><answer>B</answer> trailing"])
    [0.0]
    """
    return [1.0 if is_official_format(completion_text(c)) else 0.0 for c in completions]


def strict_format_reward(completions: Sequence[Any], **columns: Any) -> list[float]:
    """1.0 for the strict format (see module docstring), using the ``options``/``answer_type`` columns
    when the dataset has them.

    >>> strict_format_reward(["  <think>the door is behind</think>\\n<answer>C</answer>\\n"])
    [1.0]
    """
    n = len(completions)
    options = column(columns, "options", n)
    answer_types = column(columns, "answer_type", n)
    return [
        1.0 if is_strict_format(completion_text(c), options[i], answer_types[i]) else 0.0
        for i, c in enumerate(completions)
    ]
