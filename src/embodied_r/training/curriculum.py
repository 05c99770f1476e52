"""Easy-first curriculum (recipe ``curriculum: easy-first``): GRPO takes its prompts from easiest to hardest
among those whose groups can teach it, instead of in TRL's shuffled order.

A GRPO group teaches only when its completions' rewards differ: a prompt the policy always gets right, or
never does, gives every completion advantage 0. Before training, a **difficulty pass** samples
``num_generations`` completions for each row of a pool, with the run's own sampling settings and from the
model GRPO starts from (after the format warm-up), and scores them with the run's accuracy reward
(``methods.accuracy``, the evaluation's scorer). Then :func:`curriculum_order` puts the rows with some but
not all completions right first, more right first, and the rest after them; :class:`CurriculumSampler`
hands them to TRL in that order, in TRL's own repeat layout.

- The pool is a seeded sample of the training rows, ``curriculum_pool_factor`` times the prompts the run
  consumes (all rows for a run sized by epochs); rows outside it are not trained on.
- ``OUTPUT/curriculum.jsonl`` gets one line per scored row (``{"id", "right", "of"}``) as each batch of
  rows finishes; a rerun or ``--resume`` scores only the rows it does not hold yet.
- With several processes the main process scores, the others wait for it and read the file.
"""

from __future__ import annotations

import logging
import math
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch.utils.data import Sampler

from embodied_r.core.chat import has_image
from embodied_r.core.io import JsonlAppender, iter_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.training.data import reward_columns
from embodied_r.training.recipe import Recipe, RecipeError, check_batch_geometry
from embodied_r.training.recipe_keys import trl_value

logger = logging.getLogger(__name__)

FILE_NAME = "curriculum.jsonl"


def prompts_consumed(trl: Mapping[str, Any], num_processes: int) -> int | None:
    """The prompts a run of ``max_steps`` optimizer steps samples (None when epochs size the run). TRL
    generates once every ``steps_per_generation x num_iterations`` micro-batches, ``generation batch /
    num_generations`` prompts each time.

    >>> prompts_consumed({"max_steps": 3, "per_device_train_batch_size": 8, "num_generations": 4}, 1)
    6
    >>> prompts_consumed({"max_steps": 3, "per_device_train_batch_size": 8, "num_generations": 4,
    ...                   "num_iterations": 2}, 1)
    4
    >>> prompts_consumed({"num_train_epochs": 1}, 1) is None
    True
    """
    max_steps = int(trl_value(trl, "max_steps"))
    if max_steps <= 0:
        return None
    generation_batch = check_batch_geometry(dict(trl), num_processes)
    per_device = int(trl_value(trl, "per_device_train_batch_size"))
    steps_per_generation = generation_batch // (per_device * num_processes)  # TRL's, however it was given
    micro_batches = max_steps * int(trl_value(trl, "gradient_accumulation_steps"))
    generations = math.ceil(micro_batches / (steps_per_generation * int(trl_value(trl, "num_iterations"))))
    return generations * (generation_batch // int(trl_value(trl, "num_generations")))


def pool_indices(num_rows: int, consumed: int | None, factor: float, seed: int) -> list[int]:
    """The rows the difficulty pass scores: ``factor x consumed`` of them (at least one) drawn with ``seed``,
    or all when that is as many as there are or ``consumed`` is None; in data set order.

    >>> pool_indices(10, 2, 2.0, seed=0)
    [0, 2, 6, 9]
    >>> pool_indices(3, 2, 2.0, seed=0), pool_indices(3, None, 2.0, seed=0)
    ([0, 1, 2], [0, 1, 2])
    """
    size = num_rows if consumed is None else min(num_rows, max(1, math.ceil(factor * consumed)))
    if size >= num_rows:
        return list(range(num_rows))
    return sorted(random.Random(seed).sample(range(num_rows), size))


def teaches(right: int, group_size: int) -> bool:
    """Whether a group with ``right`` of ``group_size`` completions right has rewards that differ."""
    return 1 <= right <= group_size - 1


def curriculum_order(counts: Mapping[int, int], group_size: int, seed: int) -> list[int]:
    """The keys of ``counts`` (row index -> completions right of ``group_size``) in training order: rows
    whose groups teach (1 to group_size - 1 right) first, more right first, ties in an order drawn with
    ``seed``; then the rows all or none right, in that drawn order.

    >>> curriculum_order({10: 0, 11: 3, 12: 1, 13: 4, 14: 3, 15: 2}, group_size=4, seed=0)
    [14, 11, 15, 12, 10, 13]
    >>> curriculum_order({10: 0, 11: 3, 12: 1, 13: 4, 14: 3, 15: 2}, group_size=4, seed=2)  # other ties
    [11, 14, 15, 12, 13, 10]
    """
    bad = {index: right for index, right in counts.items() if not 0 <= right <= group_size}
    if bad:
        raise ValueError(f"completions right must be between 0 and {group_size}; got {bad}")
    drawn = sorted(counts)
    random.Random(seed).shuffle(drawn)
    learning = sorted((i for i in drawn if teaches(counts[i], group_size)), key=lambda i: -counts[i])  # stable
    return learning + [i for i in drawn if not teaches(counts[i], group_size)]


class CurriculumSampler(Sampler[int]):
    """TRL's ``RepeatSampler`` stream over a fixed ``order`` instead of a shuffle: batches of ``batch_size``
    prompts taken in order, each prompt index repeated ``mini_repeat_count`` times in a row and each batch
    ``repeat_count`` times. One epoch is one pass over the order (its last batch filled from the order's
    start); the next epoch goes on around the order from where the last one stopped, so a run longer than
    the order cycles through it. Same order on every process, as TRL's grouping across processes needs."""

    def __init__(self, order: Sequence[int], batch_size: int, mini_repeat_count: int, repeat_count: int = 1) -> None:
        if not order:
            raise ValueError("curriculum: the order holds no rows")
        self.order, self.batch_size = list(order), batch_size
        self.mini_repeat_count, self.repeat_count = mini_repeat_count, repeat_count
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        # The Trainer (through accelerate) sets the epoch before each pass, on a resume too, so where an
        # epoch starts in the order follows from the epoch alone.
        self.epoch = epoch

    def batches_per_epoch(self) -> int:
        return math.ceil(len(self.order) / self.batch_size)

    def __iter__(self) -> Iterator[int]:
        start = self.epoch * self.batches_per_epoch() * self.batch_size
        for batch_number in range(self.batches_per_epoch()):
            first = start + batch_number * self.batch_size
            batch = [self.order[(first + k) % len(self.order)] for k in range(self.batch_size)]
            for _ in range(self.repeat_count):
                for index in batch:
                    yield from [index] * self.mini_repeat_count

    def __len__(self) -> int:
        return self.batches_per_epoch() * self.batch_size * self.mini_repeat_count * self.repeat_count


@dataclass(frozen=True)
class Curriculum:
    """The difficulty pass's result: pool row index -> completions right of ``group_size``, and the order
    GRPO takes the rows in (data set indices)."""

    counts: dict[int, int]
    group_size: int
    order: list[int]

    def describe(self) -> dict[str, Any]:
        """For ``summary.json``: how many pool rows had none, some (the groups that teach) or all right."""
        rights = list(self.counts.values())
        return {"mode": "easy-first", "pool_rows": len(rights), "completions_per_row": self.group_size,
                "none_right": sum(r == 0 for r in rights),
                "some_right": sum(teaches(r, self.group_size) for r in rights),
                "all_right": sum(r == self.group_size for r in rights)}


def check_curriculum_rows(rows: Sequence[PromptRow], source: str) -> None:
    """Rows the difficulty pass can use: text prompts (it samples with the text generation code) with
    distinct ids (``curriculum.jsonl`` is keyed by id). Checked before the warm-up or any model loads."""
    if any(has_image(row) for row in rows):
        raise RecipeError(f"{source}: curriculum: easy-first samples text prompts only; these rows have images "
                          "(set curriculum: none)")
    repeated = sorted(row_id for row_id, times in Counter(row.id for row in rows).items() if times > 1)
    if repeated:
        raise RecipeError(f"{source}: curriculum: easy-first records each row by its id, and ids repeat "
                          f"(e.g. {', '.join(repeated[:3])}); give the rows distinct ids")


def read_counts(path: Path, group_size: int) -> dict[str, int]:
    """Row id -> completions right, from the lines of ``path`` scored with ``group_size`` completions (the
    first line of an id wins; lines of another group size are not used)."""
    if not path.exists():
        return {}
    counts: dict[str, int] = {}
    other = 0
    for line in iter_jsonl(path):
        if line.get("of") != group_size:
            other += 1
        else:
            counts.setdefault(str(line["id"]), int(line["right"]))
    if other:
        logger.warning("%s: %d line(s) scored with another num_generations than %d are not used", path, other,
                       group_size)
    return counts


def completions_right(accuracy: Callable[..., list[Any]], row: PromptRow, completions: Sequence[str]) -> int:
    """How many of a row's completions the accuracy reward scores 1 (a number within MRA's closest
    threshold), called with the columns TRL gives it for that row."""
    columns = reward_columns(row.to_dict())
    scores = accuracy(list(completions), **{name: [value] * len(completions) for name, value in columns.items()})
    return sum(1 for score in scores if score is not None and score >= 1.0)


@dataclass(frozen=True)
class Sampling:
    """The run's sampling settings for the difficulty pass (TRL's GRPOConfig defaults where the recipe is
    silent), and how many rows to sample at once."""

    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int
    rows_per_batch: int

    @classmethod
    def from_trl(cls, trl: Mapping[str, Any], num_processes: int) -> Sampling:
        from trl import GRPOConfig

        def value(key: str) -> Any:
            given = trl.get(key)
            return getattr(GRPOConfig, key) if given is None else given

        # As many rows as one process's generation batch holds prompts: a size the run generates anyway.
        per_process = check_batch_geometry(dict(trl), num_processes) // num_processes
        return cls(max_new_tokens=int(value("max_completion_length")), temperature=float(value("temperature")),
                   top_p=float(value("top_p")), top_k=int(value("top_k")),
                   rows_per_batch=max(1, per_process // int(trl_value(trl, "num_generations"))))


def sample_completions(engine: Any, rows: Sequence[PromptRow], group_size: int, sampling: Sampling,
                       completion_prefix: str, context: Any) -> list[list[str]]:
    """``group_size`` sampled completions per row (each the whole assistant turn, prefix included, as a
    reward sees it), with the project's batched generation (``inference.generation``)."""
    conversations = [row.prompt for row in rows for _ in range(group_size)]
    texts = engine.generate_chats(conversations, sampling.max_new_tokens, batch_size=len(conversations),
                                  completion_prefix=completion_prefix, context=context, do_sample=True,
                                  temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k)
    return [texts[i * group_size:(i + 1) * group_size] for i in range(len(rows))]


def _score_rows(todo: list[PromptRow], path: Path, group_size: int, sampling: Sampling,
                sample: Callable[[list[PromptRow]], list[list[str]]], accuracy: Callable[..., list[Any]],
                already: int, total: int) -> None:
    """Sample and score ``todo`` a batch of rows at a time, each batch appended to ``path`` when done."""
    appender = JsonlAppender(path)
    for start in range(0, len(todo), sampling.rows_per_batch):
        part = todo[start:start + sampling.rows_per_batch]
        groups = sample(part)
        appender.extend({"id": row.id, "right": completions_right(accuracy, row, completions), "of": group_size}
                        for row, completions in zip(part, groups))
        logger.info("curriculum: %d of %d pool rows scored", already + start + len(part), total)


def _load_engine(model_path: str, dtype: str, attn_implementation: str | None) -> Any:
    from embodied_r.inference.generation import TransformersEngine
    from embodied_r.inference.models import load_reasoner

    return TransformersEngine(*load_reasoner(model_path, dtype=dtype, attn_implementation=attn_implementation))


def difficulty_pass(recipe: Recipe, rows: Sequence[PromptRow], model_path: str, accuracy: Callable[..., list[Any]],
                    dtype: str, num_processes: int) -> Curriculum:
    """Score the pool of ``rows`` (the training data set's rows, in its order) with ``model_path`` and return
    the curriculum. Runs before TRL's config exists: once DeepSpeed ZeRO-3 is set up, a model loaded on one
    process alone would be sharded across processes that never load it."""
    from accelerate import PartialState

    trl = recipe.trl
    group_size = int(trl_value(trl, "num_generations"))
    seed = int(trl_value(trl, "seed"))
    pool = pool_indices(len(rows), prompts_consumed(trl, num_processes), float(recipe.curriculum_pool_factor), seed)
    path = recipe.output_dir / FILE_NAME
    with PartialState().main_process_first():  # the main process scores; the others then find every row done
        counts = read_counts(path, group_size)
        todo = [rows[i] for i in pool if rows[i].id not in counts]
        logger.info("curriculum easy-first: %d pool rows of %d, %d scored in %s, %d to score with %d completions "
                    "each", len(pool), len(rows), len(pool) - len(todo), path, len(todo), group_size)
        if todo:
            _score_with_model(recipe, todo, path, group_size, model_path, accuracy, dtype, num_processes, seed,
                              already=len(pool) - len(todo), total=len(pool))
            counts = read_counts(path, group_size)
    by_index = {i: counts[rows[i].id] for i in pool}
    curriculum = Curriculum(by_index, group_size, curriculum_order(by_index, group_size, seed))
    logger.info("curriculum easy-first: %s", curriculum.describe())
    return curriculum


def _score_with_model(recipe: Recipe, todo: list[PromptRow], path: Path, group_size: int, model_path: str,
                      accuracy: Callable[..., list[Any]], dtype: str, num_processes: int, seed: int,
                      already: int, total: int) -> None:
    """Load the starting model, score ``todo``, and free the model before GRPO loads its own copy."""
    import gc

    import torch
    from transformers import set_seed

    sampling = Sampling.from_trl(recipe.trl, num_processes)
    set_seed(seed)  # the Trainer seeds again when it is built
    engine = _load_engine(model_path, dtype, recipe.attn_implementation)
    try:
        def sample(part: list[PromptRow]) -> list[list[str]]:
            # Looked up through the module so tests can see which rows are sampled.
            return sample_completions(engine, part, group_size, sampling, recipe.completion_prefix,
                                      recipe.sections.context)

        _score_rows(todo, path, group_size, sampling, sample, accuracy, already, total)
    finally:
        engine = None  # the model's last reference: freed before GRPO loads its own copy
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


__all__ = ["FILE_NAME", "Curriculum", "CurriculumSampler", "check_curriculum_rows", "curriculum_order",
           "difficulty_pass", "pool_indices", "prompts_consumed", "read_counts"]
