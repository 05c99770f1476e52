"""Robot-R1's open-ended waypoint reward ``open_l1``: ``clip(1 - L1, 0, 1)`` (Robot-R1 §4.4, App. D).

In the paper's Open-End ablation the model writes the next keypoint's ``[x, y, z]`` itself instead of
choosing an option and is rewarded by how close it is (L1 distance in metres). The score is the one
``embodied-r eval`` gives the same rows (:mod:`embodied_r.core.scoring`, answer type ``position``).
Rows of any other answer type get None, so the reward can share a batch with the choice rewards.

>>> open_l1(["<think>.</think><answer>[0.1, 0.6, 0.25]</answer>"], answer=["[0.1, 0.6, 0.2]"],
...         answer_type=["position"])
[0.95]
>>> open_l1(["[[A]]"], answer=["A"], answer_type=["choice"])
[None]
"""

from __future__ import annotations

from typing import Any

from embodied_r.core.chat import completion_text
from embodied_r.core.columns import column
from embodied_r.core.scoring import parse_xyz, score_completion


def open_l1(completions: list[Any], **columns: Any) -> list[float | None]:
    """TRL reward: L1 closeness of the ``[x, y, z]`` inside the last ``<answer>`` to the gold ``answer``.

    A completion without an ``<answer>`` or with fewer than three numbers in it scores 0 (a wrong
    answer); a gold answer that is not an xyz is a data error and raises.
    """
    n = len(completions)
    answers = column(columns, "answer", n, required=True)
    answer_types = column(columns, "answer_type", n)
    rewards: list[float | None] = []
    for i, completion in enumerate(completions):
        if answer_types[i] != "position":
            rewards.append(None)
            continue
        if parse_xyz(answers[i]) is None:
            raise ValueError(f"open_l1: row {i} answer {answers[i]!r} is not an [x, y, z] position; use this "
                             f"reward only with prompts_open.jsonl rows")
        scored = score_completion(completion_text(completion), answers[i], "position", None)
        rewards.append(round(scored.score, 6))
    return rewards


__all__ = ["open_l1"]
