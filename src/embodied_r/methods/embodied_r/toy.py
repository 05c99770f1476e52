"""Toy data: text-only "egocentric" episodes with exact answers, in the official Embodied-R prompt format,
for smoke runs, tests and benchmarks (a recipe's ``train_data: toy:N``, through ``Method.toy_rows``).
"""

from __future__ import annotations

import random

from embodied_r.core.records import PromptRow
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

_OBJECTS = ["chair", "sofa", "table", "lamp", "door", "bed", "plant", "television", "shelf", "window"]
_ACTIONS = ["move forward", "rotate left", "rotate right", "move forward a few steps"]


def toy_prompt_rows(n: int, seed: int = 0) -> list[PromptRow]:
    """``n`` small questions over a scripted walk, in the official prompt format.

    Two tasks alternate: ``appearance_order`` (which of four objects was seen first, a choice) and
    ``object_count`` (how many distinct objects were seen, a number). The answers follow exactly from
    the text, so a reasoner can in principle learn them; they are a smoke test, not a benchmark.

    >>> rows = toy_prompt_rows(2)
    >>> [r.task for r in rows], rows[0].answer_type, rows[1].answer_type
    (['appearance_order', 'object_count'], 'choice', 'number')
    """
    if n < 1:
        raise ValueError("the toy data set needs n >= 1")
    rng = random.Random(seed)
    rows = []
    for index in range(n):
        seen = rng.sample(_OBJECTS, k=rng.randint(3, 6))
        frames = [
            {
                "action": None if i == 0 else rng.choice(_ACTIONS),
                "delta": f"A {obj} comes into view.",
                "q_related": "",
            }
            for i, obj in enumerate(seen)
        ]
        if index % 2 == 0:
            choices = rng.sample(seen, k=min(4, len(seen)))
            first = min(choices, key=seen.index)
            options = [f"{letter}. {obj}" for letter, obj in zip("ABCD", choices)]
            answer: str | float = "ABCD"[choices.index(first)]
            question = "Which of these objects did you see first?"
            task, answer_type = "appearance_order", "choice"
        else:
            options, answer = None, float(len(seen))
            question = "How many different objects have you seen in total?"
            task, answer_type = "object_count", "number"
        rows.append(
            PromptRow(
                id=f"toy-{seed}-{index}",
                task=task,
                prompt=build_reasoner_messages(frames, question, options),
                answer=answer,
                answer_type=answer_type,
                options=options,
                meta={"source": "toy"},
            )
        )
    return rows
