"""``judge.rule: shuffled-options``: a reasoning is consistent when, read again with the options
shuffled and relabelled, it still leads to the same option (by content).

This is the self-judging form of the consistency reward published as ACRE (arXiv 2510.10104): instead
of an outside judge, the model reads its own reasoning once more under a different labelling of the
choices. A reasoning that argues for the *content* of its answer reaches the same option text wherever
that text now stands; one that only carries a letter, or none of the options, does not.

``ShuffledOptionsJudge`` wraps any judge (``judge.judges``; by default the starting policy, frozen)
and is itself a judge, so the consistency reward, the probe and evaluation call it like any other:

1. per row, the options are permuted so that no option keeps its letter (a derangement, seeded by the
   question and the reasoning, so a row always gets the same one) and relabelled with the same letters;
2. the question's choice list is rewritten in the new order, and the reader is asked about it;
3. its pick is mapped back to the original letter of the option text it picked (``none`` and
   "not judged" pass through).

The reader is a frozen copy, not the weights being trained: a forward pass of the trained model inside
a reward would need every process to judge the same number of rows under DeepSpeed ZeRO-3.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from embodied_r.core.choices import reordered_choices
from embodied_r.judge.judges import Judge, JudgeReport

RULE = "shuffled-options"


def derangement(n: int, rng: random.Random) -> list[int]:
    """A permutation of ``range(n)`` that moves every index (the identity for n < 2).

    >>> p = derangement(4, random.Random(0)); sorted(p) == [0, 1, 2, 3] and all(p[i] != i for i in range(4))
    True
    """
    if n < 2:
        return list(range(n))
    order = list(range(n))
    while any(order[i] == i for i in range(n)):  # about e tries on average, for every n
        rng.shuffle(order)
    return order


def relabelled(question: str, options: list[str], seed: int | str) -> tuple[str, list[str], dict[str, str]]:
    """The question with its choices in a new order, the new option list, and new letter -> original
    letter. The choice lines are rewritten where they stand (or appended when the question lacks them).

    >>> q, opts, back = relabelled("Question: where?\\nChoices:\\nA. left\\nB. right", ["A. left", "B. right"], 0)
    >>> q, opts, back
    ('Question: where?\\nChoices:\\nA. right\\nB. left', ['A. right', 'B. left'], {'A': 'B', 'B': 'A'})
    """
    order = derangement(len(options), random.Random(f"{seed}\n{question}"))
    return reordered_choices(question, options, order)


class ShuffledOptionsJudge:
    """A judge that asks ``reader`` about every row with the options shuffled and relabelled, and answers
    with the original letter of the option it picked. Rows without options are not judged (None)."""

    def __init__(self, reader: Judge, seed: int = 0) -> None:
        self.reader = reader
        self.seed = seed
        self.name = f"{RULE}:{getattr(reader, 'name', type(reader).__name__)}"
        self.sees_letters = bool(getattr(reader, "sees_letters", False))
        self.scoring = getattr(reader, "scoring", None)
        self.last_report = JudgeReport()

    @property
    def no_basis(self) -> float | None:
        return getattr(self.reader, "no_basis", None)

    @property
    def refusal(self) -> bool:
        return bool(getattr(self.reader, "refusal", False))

    def judge(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[str | None]:
        wanted = [i for i, opts in enumerate(options) if opts and len(opts) >= 2]
        asked: list[tuple[str, list[str], dict[str, str]]] = [
            # The reasoning is part of the seed, so the G completions of one question get different orders.
            relabelled(questions[i], list(options[i] or []), f"{self.seed}\n{thinks[i]}") for i in wanted
        ]
        picks = self.reader.judge([a[0] for a in asked], [thinks[i] for i in wanted], [a[1] for a in asked])
        report: Any = getattr(self.reader, "last_report", None)
        self.last_report = JudgeReport(
            rows=len(questions),
            thinks_cut=getattr(report, "thinks_cut", 0),
            not_judged=getattr(report, "not_judged", 0) + len(questions) - len(wanted),
        )
        out: list[str | None] = [None] * len(questions)
        for i, (_, _, back), pick in zip(wanted, asked, picks, strict=True):
            out[i] = back.get(pick, pick) if pick is not None else None  # "none" passes through
        return out


__all__ = ["RULE", "ShuffledOptionsJudge", "derangement", "relabelled"]
