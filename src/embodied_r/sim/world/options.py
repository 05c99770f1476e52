"""Multiple-choice options with balanced answer letters.

VSI-Bench puts each correct answer under the letter used least so far ("letter answers distributed as
uniformly as possible" in its generation rules); ``LetterBalancer`` does the same per (task, number of
options), breaking ties at random, so over a dataset no letter is favoured and a model cannot score by
always answering "A".
"""

from __future__ import annotations

import string
from collections import Counter

import numpy as np


class LetterBalancer:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.used: dict[tuple[str, int], Counter[int]] = {}

    def pick(self, task: str, n_options: int) -> int:
        """Index of the slot for the correct answer: a least-used one for this task and option count."""
        counter = self.used.setdefault((task, n_options), Counter())
        low = min(counter.get(i, 0) for i in range(n_options))
        slots = [i for i in range(n_options) if counter.get(i, 0) == low]
        slot = int(slots[int(self.rng.integers(len(slots)))])
        counter[slot] += 1
        return slot


def letter_options(task: str, correct: str, distractors: list[str], balancer: LetterBalancer) -> tuple[list[str], str]:
    """``(["A. x", "B. y", ...], answer_letter)`` with the correct text at a balanced slot and the
    distractors shuffled into the others.

    >>> opts, ans = letter_options("t", "left", ["right"], LetterBalancer(np.random.default_rng(0)))
    >>> sorted(o[3:] for o in opts), opts[string.ascii_uppercase.index(ans)][3:]
    (['left', 'right'], 'left')
    """
    texts = [correct, *distractors]
    if len(set(texts)) != len(texts):
        raise ValueError(f"{task}: options must be distinct, got {texts}")
    slot = balancer.pick(task, len(texts))
    others = list(distractors)
    order = balancer.rng.permutation(len(others))
    others = [others[i] for i in order]
    ordered = others[:slot] + [correct] + others[slot:]
    letters = string.ascii_uppercase
    return [f"{letters[i]}. {text}" for i, text in enumerate(ordered)], letters[slot]
