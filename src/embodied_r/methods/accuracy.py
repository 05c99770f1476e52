"""Accuracy reward: the evaluation's own scorer, applied to each completion.

Training and evaluation must agree on what "correct" means, so this reward does no parsing of its
own: it calls :func:`embodied_r.core.scoring.score_completion` (text inside the last ``<answer>``
only, unlike the official reward that read letters out of the reasoning; letter match for choices,
including Robot-R1's ``[[X]]``, VSI-Bench mean relative accuracy for numbers, L1 closeness for
positions).

>>> accuracy_reward(["<think>.</think><answer>B</answer>", "<think>.</think><answer>A</answer>"],
...                 answer=["B", "B"], answer_type=["choice", "choice"], options=[["A. l", "B. r"]] * 2)
[1.0, 0.0]
>>> accuracy_reward(["<answer>9.6</answer>"], answer=["10"], answer_type=["number"])
[1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from embodied_r.core.chat import completion_text
from embodied_r.core.columns import column
from embodied_r.core.scoring import score_completion


def accuracy_reward(completions: Sequence[Any], **columns: Any) -> list[float]:
    """Per-completion score in [0, 1]; needs the ``answer`` column (``answer_type`` defaults to choice).

    A missing ``answer`` column is a configuration error, raised at the first step rather than
    returning zeros that would look like a model that never learns.
    """
    n = len(completions)
    answers = column(columns, "answer", n, required=True)
    answer_types = [t or "choice" for t in column(columns, "answer_type", n)]
    options = column(columns, "options", n)
    return [
        score_completion(completion_text(c), answers[i], answer_types[i], options[i]).score
        for i, c in enumerate(completions)
    ]
