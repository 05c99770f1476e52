"""Format rewards: did the completion reason inside ``<think>`` and then answer inside ``<answer>``?

Every method whose prompts ask for ``<think>...</think><answer>...</answer>`` trains with these (Embodied-R's
recipes and Robot-R1's, whose answer ``[[X]]`` sits inside the same answer block), so they live beside the
accuracy reward rather than in one method's package.

``format_reward`` is the rule Embodied-R trained with (ms-swift's built-in ``format`` reward, see
the official format reward): the completion must *start* with a think block, follow it (after optional
whitespace) with an answer block, and have nothing after ``</answer>``. It accepts degenerate outputs
such as an empty think block or several answer blocks nested inside the think text.

``strict_format_reward`` closes those holes, which matters because a format reward that is easy to
satisfy is the first thing GRPO learns to game (reward hacking of loose format checks): exactly one
non-empty think block, exactly one non-empty answer block, no stray tags, and an answer that the
evaluation parser can read as the row's answer type.

``soft_format_reward`` (recipe name ``format_soft``) is our own shaped variant, not the paper's: it pays
0.25 for each step of the official structure reached in order, so a small model that never writes the
whole structure still gets a reward that differs between completions (GRPO learns nothing from a group
whose rewards are all equal). It is 1.0 exactly when the official rule holds.

>>> format_reward(["<think>left of me</think>\\n<answer>A</answer>", "<answer>A</answer>"])
[1.0, 0.0]
>>> strict_format_reward(["<think></think><answer>A</answer>"], answer_type=["choice"], options=[["A. x", "B. y"]])
[0.0]
>>> soft_format_reward(["<think>left", "<think>left</think>", "<think>l</think><answer>A</answer> more"])
[0.25, 0.5, 0.75]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from embodied_r.core.chat import completion_text
from embodied_r.core.columns import column
from embodied_r.core.parsing import parse_answer

# The official rule, as a fact carried over: think block at the very start, answer block, then the end.
OFFICIAL_FORMAT_RE = re.compile(
    r"^<think>.*?</think>\s*<answer>.*?</answer>(?![\s\S])", re.DOTALL | re.MULTILINE
)

_STRICT_RE = re.compile(
    r"^\s*<think>(?P<think>.*?)</think>\s*<answer>(?P<answer>.*?)</answer>\s*$", re.DOTALL
)
_ANY_TAG_RE = re.compile(r"</?(?:think|answer)>", re.IGNORECASE)
# After the opening <think>: a closing tag, then (whitespace only between) a complete answer block.
_THINK_OPEN = "<think>"
_ANSWER_AFTER_THINK_RE = re.compile(r"</think>\s*<answer>.*?</answer>", re.DOTALL)
SOFT_FORMAT_STEP = 0.25


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


def format_steps(text: str) -> int:
    """How many of the four steps of the official structure ``text`` reaches, counted in order.

    1. it starts with ``<think>`` (no leading whitespace, as the official rule);
    2. a ``</think>`` follows;
    3. a ``</think>`` is followed, after optional whitespace, by a complete ``<answer>...</answer>``;
    4. the official rule holds (in particular nothing at all after the final ``</answer>``).

    A step counts only when the earlier ones hold, so 4 means exactly ``is_official_format(text)``.

    >>> [format_steps(t) for t in ["<answer>A</answer>", "<think>x", "<think>x</think>A",
    ...                            "<think>x</think> <answer>A</answer>\\n", "<think>x</think><answer>A</answer>"]]
    [0, 1, 2, 3, 4]
    """
    if not text.startswith(_THINK_OPEN):
        return 0
    rest = text[len(_THINK_OPEN):]
    if "</think>" not in rest:
        return 1
    if _ANSWER_AFTER_THINK_RE.search(rest) is None:
        return 2
    return 4 if is_official_format(text) else 3


def soft_format_reward(completions: Sequence[Any], **_: Any) -> list[float]:
    """0.25 per step of the official structure reached in order (``format_steps``); 1.0 iff official.

    Shaped partial credit is our addition for small models (the paper's format reward is all or
    nothing); the recipe name is ``format_soft`` and the paper recipe keeps ``format``.

    >>> soft_format_reward(["plain text", "<think>a</think><answer>B</answer>"])
    [0.0, 1.0]
    """
    return [SOFT_FORMAT_STEP * format_steps(completion_text(c)) for c in completions]
