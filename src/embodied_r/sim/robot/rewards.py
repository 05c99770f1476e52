"""Robot-R1's open-ended waypoint reward: ``clip(1 - L1(pred, gt), 0, 1)`` (paper §4.4, App. D).

In the paper's Open-End ablation the model writes the next keypoint's ``[x, y, z]`` itself instead of
choosing an option, and is rewarded by how close it is (L1 distance in metres). It follows TRL's reward
contract ``fn(completions, **columns) -> list[float | None]``: rows that are not open-ended xyz
questions (``answer_type`` other than ``"open"``) get None so the reward can share a batch with the
choice rewards.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from embodied_r.core.chat import completion_text

_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def parse_xyz(text: str) -> np.ndarray | None:
    """The first three numbers of a text, or None when it has fewer.

    >>> parse_xyz("[0.1, -0.25, 0.3]").tolist()
    [0.1, -0.25, 0.3]
    >>> parse_xyz("somewhere up") is None
    True
    """
    numbers = _NUMBER_RE.findall(text or "")
    if len(numbers) < 3:
        return None
    return np.array([float(v) for v in numbers[:3]])


def l1_score(predicted: Sequence[float] | None, target: Sequence[float]) -> float:
    """``clip(1 - sum|pred - gt|, 0, 1)``; 0 for a missing prediction.

    >>> l1_score([0.1, 0.6, 0.2], [0.1, 0.6, 0.2])
    1.0
    >>> round(l1_score([0.2, 0.6, 0.3], [0.1, 0.6, 0.2]), 3)
    0.8
    """
    if predicted is None:
        return 0.0
    distance = float(np.sum(np.abs(np.asarray(predicted, dtype=float) - np.asarray(target, dtype=float))))
    return float(np.clip(1.0 - distance, 0.0, 1.0))


def open_l1_reward(completions: list[Any], answer: list[Any], answer_type: list[str] | None = None,
                   **_: Any) -> list[float | None]:
    """TRL reward: L1 closeness of the ``[x, y, z]`` inside the last ``<answer>`` to the gold ``answer``.

    A completion without an ``<answer>`` or with fewer than three numbers in it scores 0 (a wrong
    answer, not an error); a gold answer that is not an xyz is a data error and raises.

    >>> open_l1_reward(["<think>.</think><answer>[0.1, 0.6, 0.25]</answer>"], ["[0.1, 0.6, 0.2]"])
    [0.95]
    >>> open_l1_reward(["[[A]]"], ["A"], answer_type=["choice"])
    [None]
    """
    from embodied_r.reasoning.parsing import extract_answer_span

    rewards: list[float | None] = []
    for i, completion in enumerate(completions):
        if answer_type is not None and answer_type[i] != "open":
            rewards.append(None)
            continue
        gold = parse_xyz(str(answer[i]))
        if gold is None:
            raise ValueError(f"open_l1_reward: row {i} answer {answer[i]!r} is not an [x, y, z] position; "
                             f"use this reward only with prompts_open.jsonl rows")
        span = extract_answer_span(completion_text(completion))
        rewards.append(round(l1_score(parse_xyz(span) if span is not None else None, gold), 6))
    return rewards


REWARDS = {"open_l1": open_l1_reward}
