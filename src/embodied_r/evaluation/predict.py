"""Generating and scoring predictions: one completion -> a scored ``Prediction`` with the accuracy
reward's parser and scorer, batches through any generation engine with the context policy applied, and
resumable generation into a predictions file (``generate_resumable``: only the ids not there yet).

``runner.run_eval`` (the ``eval`` command), the baselines, the VLM-only baseline and the training
evaluation callback all predict through here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.io import JsonlAppender
from embodied_r.core.records import Prediction, PromptRow
from embodied_r.inference.context_policy import ContextPolicy
from embodied_r.inference.generation import TransformersEngine
from embodied_r.methods import method_for_row

logger = logging.getLogger(__name__)


def score_completion(row: PromptRow, completion: str) -> Prediction:
    """Parse and score one completion with the row's method's scorer (the accuracy reward's)."""
    parsed, score = method_for_row(row.meta).score(row, completion)
    return Prediction(
        id=row.id, task=row.task, completion=completion, parsed_answer=parsed, answer=row.answer,
        answer_type=row.answer_type, correct=score >= 1.0, score=score,
    )


def evaluate_rows(model: Any, tokenizer: Any, rows: Sequence[PromptRow], batch_size: int = 8,
                  max_new_tokens: int = 256,
                  on_predictions: Callable[[list[Prediction]], None] | None = None,
                  completion_prefix: str = "", context: ContextPolicy | None = None,
                  **sampling: Any) -> list[Prediction]:
    """Generate (greedy unless sampling args say otherwise) and score every row; ``completion_prefix``
    prefills the assistant turn (as the training recipe key of the same name) and is part of each
    prediction's completion. Prompts are fitted by ``context`` (see ``evaluate_with_engine``)."""
    return evaluate_with_engine(TransformersEngine(model, tokenizer), rows, batch_size=batch_size,
                                max_new_tokens=max_new_tokens, on_predictions=on_predictions,
                                completion_prefix=completion_prefix, context=context, **sampling)


def skipped_prediction(row: PromptRow, record: dict[str, Any]) -> Prediction:
    """The prediction of a row the context policy did not give to the model: unanswered, scored 0, and
    marked (``meta.context``) so metrics count it apart from answers that failed to parse."""
    prediction = score_completion(row, "")
    prediction.meta["context"] = record
    return prediction


def evaluate_with_engine(engine: Any, rows: Sequence[PromptRow], batch_size: int = 8, max_new_tokens: int = 256,
                         on_predictions: Callable[[list[Prediction]], None] | None = None,
                         completion_prefix: str = "", context: ContextPolicy | None = None,
                         **sampling: Any) -> list[Prediction]:
    """``evaluate_rows`` over any ``generation.Engine`` (transformers or vLLM).

    The context policy is applied first: a skipped row is recorded at once as unanswered, a cut one is
    generated from what was kept; both carry ``meta.context``.
    """
    fitted = engine.fit([r.prompt for r in rows], max_new_tokens, completion_prefix, context)
    predictions: list[Prediction | None] = [None] * len(rows)
    skipped = []
    for index, fit in enumerate(fitted):
        if fit.skipped:
            predictions[index] = skipped_prediction(rows[index], fit.record() or {})
            skipped.append(predictions[index])
    if skipped and on_predictions is not None:
        on_predictions(skipped)
    todo = [i for i, fit in enumerate(fitted) if not fit.skipped]

    def handle(indices: list[int], completions: list[str]) -> None:
        batch = []
        for local, completion in zip(indices, completions):
            index = todo[local]
            prediction = score_completion(rows[index], completion)
            record = fitted[index].record()
            if record:
                prediction.meta["context"] = record
            predictions[index] = prediction
            batch.append(prediction)
        if on_predictions is not None:
            on_predictions(batch)

    if todo:
        engine.generate_fitted([fitted[i] for i in todo], max_new_tokens, batch_size, on_batch=handle,
                               context=context, **sampling)
    return [p for p in predictions if p is not None]


def generate_resumable(engine_factory: Callable[[], Any], rows: Sequence[PromptRow], path: Path, batch_size: int,
                       max_new_tokens: int, progress: Callable[[int, int], None] | None = None,
                       completion_prefix: str = "",
                       context: ContextPolicy | None = None) -> tuple[list[dict[str, Any]], int, int]:
    """Predictions for ``rows`` in ``path`` (jsonl), generating only the ids not there yet.

    The engine is built only when something is left to generate. Returns (predictions for ``rows``, one
    per id, the first when the file holds several; number generated now; number of duplicates ignored)."""
    appender = JsonlAppender(path)
    done = appender.done_keys("id")
    todo = [r for r in rows if r.id not in done]
    logger.info("%s: %d questions, %d already done, %d to generate", path.name, len(rows), len(rows) - len(todo),
                len(todo))
    generated = 0
    if todo:
        engine = engine_factory()

        def persist(batch: list[Prediction]) -> None:
            nonlocal generated
            appender.extend(p.to_dict() for p in batch)
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
