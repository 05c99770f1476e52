"""Balanced GRPO steps (recipe ``balanced_steps``) built from option rotations: a choice question's n
rotations shift its options by 0..n-1 places, so its answer stands at each letter once.

- ``letters``: every question enters training as its n rotations, all sampled in the same step;
- ``answers``: a step holds n questions with n different gold answers (option texts), each in the rotation
  that puts its answer at a letter no other question of the step has.

Why: GRPO's accuracy advantage pushes up whatever a group got right, its letter and its option text alike.
A policy that does not yet read the prompt gains by preferring the letter or the answer that happens to be
right most often, and once it does, a group's completions agree, its rewards agree and it teaches nothing
more: the task ladder's seeds that did not learn settled on letters B and D, and with ``letters`` alone on
the most frequent answer, "Rotate left". In a ``letters`` step each letter is right in exactly one group of
a question, so the pushes on letters cancel; in an ``answers`` step each letter and each answer is right
exactly once, so a policy that always gives one letter or one answer scores the same whichever it picks,
and what the step rewards is reading. Evaluation reads the rows as they are; rotations are training data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import torch
from torch.utils.data import Sampler

from embodied_r.core.choices import reordered_choices
from embodied_r.core.parsing import option_letters, option_texts
from embodied_r.core.records import PromptRow


def rotations(row: PromptRow) -> list[PromptRow]:
    """The row's n option rotations, shift 0 (the row itself) first; the choice lines of its user message
    are rewritten and its answer letter follows its option.

    >>> row = PromptRow(id="q", task="t", answer="B", options=["A. x", "B. y"],
    ...                 prompt=[{"role": "user", "content": "Pick.\\nA. x\\nB. y"}])
    >>> [(r.id, r.answer, r.prompt[0]["content"]) for r in rotations(row)]
    [('q', 'B', 'Pick.\\nA. x\\nB. y'), ('q~rot1', 'A', 'Pick.\\nA. y\\nB. x')]
    """
    options = list(row.options or [])
    if row.answer_type != "choice" or len(options) < 2:
        raise ValueError(f"row {row.id}: balanced_steps needs choice questions with options "
                         f"(answer_type {row.answer_type!r}, {len(options)} options)")
    users = [i for i, m in enumerate(row.prompt) if m.get("role") == "user"]
    if not users or not isinstance(row.prompt[users[-1]].get("content"), str):
        raise ValueError(f"row {row.id}: balanced_steps rewrites the choice lines of a text user message; "
                         "this row has none (image rows are not rotated)")
    last = users[-1]
    out = []
    for shift in range(len(options)):
        order = [(k + shift) % len(options) for k in range(len(options))]
        content, new_options, back = reordered_choices(row.prompt[last]["content"], options, order)
        answer = next((new for new, old in back.items() if old == str(row.answer).strip().upper()), None)
        if answer is None:
            raise ValueError(f"row {row.id}: answer {row.answer!r} is not one of its option letters {list(back)}")
        prompt = [dict(m) for m in row.prompt]
        prompt[last]["content"] = content
        out.append(dataclasses.replace(
            row, id=row.id if shift == 0 else f"{row.id}~rot{shift}", prompt=prompt, answer=answer,
            options=new_options, meta={**row.meta, "rotation_of": row.id, "rotation": shift}))
    return out


MODES = ("none", "letters", "answers")


def rotated_rows(rows: list[PromptRow]) -> tuple[list[PromptRow], int]:
    """Every row's rotations, each question's consecutive, and how many each question has. All rows must
    be choice questions with the same number of options, so a step holds whole questions."""
    counts = sorted({len(r.options or []) for r in rows})
    if len(counts) != 1:
        raise ValueError(f"balanced_steps needs every training row to have the same number of options; "
                         f"found {counts}")
    return [rotated for row in rows for rotated in rotations(row)], counts[0]


def gold_text(row: PromptRow) -> str:
    """The option text of the row's answer, e.g. "Rotate left" for answer B of ["A. ...", "B. Rotate left"]."""
    return option_texts(row.options)[str(row.answer).strip().upper()]


def letter_index(row: PromptRow) -> int:
    """Where the row's answer stands among its options (0 for A)."""
    return option_letters(row.options).index(str(row.answer).strip().upper())


class RotationSampler(Sampler[int]):
    """TRL's ``RepeatSampler`` order (each prompt index repeated ``mini_repeat_count`` times, each batch of
    ``batch_size`` prompts repeated ``repeat_count`` times), with the shuffle over whole questions: the
    ``group_size`` consecutive rows of a question always fall in one batch. Same seed, same order on every
    process, as TRL's grouping across processes needs."""

    def __init__(self, num_rows: int, group_size: int, batch_size: int, mini_repeat_count: int,
                 repeat_count: int = 1, seed: int | None = None) -> None:
        if group_size < 1 or num_rows % group_size:
            raise ValueError(f"{num_rows} rows do not split into questions of {group_size} rotations")
        if batch_size % group_size:
            raise ValueError(f"balanced_steps: a step's {batch_size} prompts must hold whole questions of "
                             f"{group_size} rotations; make prompts per step a multiple of {group_size}")
        self.num_rows, self.group_size, self.batch_size = num_rows, group_size, batch_size
        self.mini_repeat_count, self.repeat_count = mini_repeat_count, repeat_count
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(seed)

    def __iter__(self) -> Iterator[int]:
        questions = torch.randperm(self.num_rows // self.group_size, generator=self.generator).tolist()
        order = [q * self.group_size + r for q in questions for r in range(self.group_size)]
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        for batch in batches:
            if len(batch) < self.batch_size:
                continue  # as TRL does: an incomplete last batch is dropped
            for _ in range(self.repeat_count):
                for index in batch:
                    yield from [index] * self.mini_repeat_count

    def __len__(self) -> int:
        whole = (self.num_rows // self.batch_size) * self.batch_size
        return whole * self.mini_repeat_count * self.repeat_count


def check_answer_classes(answers: list[str], group_size: int) -> None:
    """``answers`` steps need as many different gold answers as a block has questions."""
    if len(set(answers)) < group_size:
        raise ValueError(f"balanced_steps: answers needs at least {group_size} different gold answers among the "
                         f"training questions to fill a step; found {len(set(answers))} "
                         f"({', '.join(sorted(set(answers)))}); use letters")


class BalancedAnswerSampler(Sampler[int]):
    """``answers`` steps over rows laid out as :func:`rotated_rows` lays them out (question q's rotation r
    at index q x n + r): each batch of ``batch_size`` prompts is made of blocks of n questions with n
    different gold answers, each in the rotation that gives it a letter of its own in the block. Answers
    are drawn in proportion to how many questions have them (every one, when there are exactly n), and
    each answer's questions are visited in a shuffled cycle. Same seed, same order on every process."""

    def __init__(self, rows: list[PromptRow], group_size: int, batch_size: int, mini_repeat_count: int,
                 repeat_count: int = 1, seed: int | None = None) -> None:
        if batch_size % group_size:
            raise ValueError(f"balanced_steps: a step's {batch_size} prompts must hold whole blocks of "
                             f"{group_size} questions; make prompts per step a multiple of {group_size}")
        self.n, self.batch_size = group_size, batch_size
        self.mini_repeat_count, self.repeat_count = mini_repeat_count, repeat_count
        self.num_questions = len(rows) // group_size
        self.classes: dict[str, list[int]] = {}
        self.letter_of: dict[tuple[int, int], int] = {}  # (question, letter) -> row index
        for index, row in enumerate(rows):
            question = index // group_size
            if index % group_size == 0:
                self.classes.setdefault(gold_text(row), []).append(question)
            self.letter_of[(question, letter_index(row))] = index
        check_answer_classes(list(self.classes), group_size)
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(seed)
        self.cycles: dict[str, list[int]] = {name: [] for name in self.classes}

    def _next_question(self, name: str) -> int:
        if not self.cycles[name]:
            order = torch.randperm(len(self.classes[name]), generator=self.generator).tolist()
            self.cycles[name] = [self.classes[name][i] for i in order]
        return self.cycles[name].pop()

    def _block(self) -> list[int]:
        names = sorted(self.classes)
        weights = torch.tensor([len(self.classes[name]) for name in names], dtype=torch.float)
        picked = torch.multinomial(weights, self.n, replacement=False, generator=self.generator).tolist()
        letters = torch.randperm(self.n, generator=self.generator).tolist()
        return [self.letter_of[(self._next_question(names[c]), letter)] for c, letter in zip(picked, letters)]

    def __iter__(self) -> Iterator[int]:
        for _ in range(len(self) // (self.batch_size * self.mini_repeat_count * self.repeat_count)):
            batch = [index for _ in range(self.batch_size // self.n) for index in self._block()]
            for _ in range(self.repeat_count):
                for index in batch:
                    yield from [index] * self.mini_repeat_count

    def __len__(self) -> int:
        # As many prompts an epoch as there are questions: each question about once.
        whole = (self.num_questions // self.batch_size) * self.batch_size
        return max(whole, self.batch_size) * self.mini_repeat_count * self.repeat_count
