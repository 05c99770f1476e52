"""Resumable generation into a predictions file (``generate_resumable``: only the ids not there yet), and
what evaluation reads back from such files.

Scoring one completion and generating batches (``score_completion``, ``evaluate_rows``,
``evaluate_with_engine``) live in :mod:`embodied_r.prediction`, shared with the training run's held-out
evaluation; they are imported here so that ``runner.run_eval`` (the ``eval`` command), the baselines and
the VLM-only baseline all predict through this module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.io import JsonlAppender
from embodied_r.core.records import Prediction, PromptRow
from embodied_r.evaluation.reference_names import row_question_types, with_item_reference
from embodied_r.inference.context_policy import ContextPolicy
from embodied_r.inference.generation import TransformersEngine
from embodied_r.prediction import evaluate_rows, evaluate_with_engine, score_completion, skipped_prediction

logger = logging.getLogger(__name__)


def generate_resumable(engine_factory: Callable[[], Any], rows: Sequence[PromptRow], path: Path, batch_size: int,
                       max_new_tokens: int, progress: Callable[[int, int], None] | None = None,
                       completion_prefix: str = "",
                       context: ContextPolicy | None = None) -> tuple[list[dict[str, Any]], int, int]:
    """Predictions for ``rows`` in ``path`` (jsonl), generating only the ids not there yet.

    The engine is built only when something is left to generate. Each row written carries its
    ``reference`` scores where a reference applies (``reference_names.with_item_reference``). Returns
    (predictions for ``rows``, one per id, the first when the file holds several; number generated now;
    number of duplicates ignored)."""
    appender = JsonlAppender(path)
    question_types = row_question_types(rows)
    done = appender.done_keys("id")
    todo = [r for r in rows if r.id not in done]
    logger.info("%s: %d questions, %d already done, %d to generate", path.name, len(rows), len(rows) - len(todo),
                len(todo))
    generated = 0
    if todo:
        engine = engine_factory()

        def persist(batch: list[Prediction]) -> None:
            nonlocal generated
            appender.extend(with_item_reference(p.to_dict(), question_types) for p in batch)
            generated += len(batch)
            if progress is not None:
                progress(len(rows) - len(todo) + generated, len(rows))

        if isinstance(engine, TransformersEngine):
            # Looked up through the module so tests (and callers) can wrap evaluate_rows.
            evaluate_rows(engine.model, engine.tokenizer, todo, batch_size=batch_size,
                          max_new_tokens=max_new_tokens, on_predictions=persist,
                          completion_prefix=completion_prefix, context=context)
        else:
            evaluate_with_engine(engine, todo, batch_size=batch_size, max_new_tokens=max_new_tokens,
                                 on_predictions=persist, completion_prefix=completion_prefix, context=context)
    wanted = {r.id for r in rows}
    predictions, duplicates = first_per_id(p for p in appender.existing() if p["id"] in wanted)
    if duplicates:
        logger.warning("%s holds %d duplicate prediction(s) (an earlier concurrent run?); each id counts once, "
                       "its first prediction", path, duplicates)
    return predictions, generated, duplicates


def prediction_context(predictions: Sequence[dict[str, Any]], context: ContextPolicy) -> dict[str, Any]:
    """``context.report`` over prediction dicts: the policy, counts by action, one line per affected row."""
    return context.report((str(p["id"]), (p.get("meta") or {}).get("context")) for p in predictions)


def first_per_id(records: Iterable[dict[str, Any]], key: str = "id") -> tuple[list[dict[str, Any]], int]:
    """The first record of each ``key`` in order, and how many later duplicates were dropped.

    >>> first_per_id([{"id": "a", "v": 1}, {"id": "b"}, {"id": "a", "v": 2}])
    ([{'id': 'a', 'v': 1}, {'id': 'b'}], 1)
    """
    seen: set[str] = set()
    kept: list[dict[str, Any]] = []
    dropped = 0
    for record in records:
        if str(record[key]) in seen:
            dropped += 1
            continue
        seen.add(str(record[key]))
        kept.append(record)
    return kept, dropped


__all__ = ["evaluate_rows", "evaluate_with_engine", "first_per_id", "generate_resumable", "prediction_context",
           "score_completion", "skipped_prediction"]
