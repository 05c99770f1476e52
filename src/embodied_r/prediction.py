"""Generating and scoring predictions, for evaluation and training alike: one completion -> a scored
``Prediction`` by the row's method's scorer (the accuracy reward's), and batches of rows through any
generation engine with the context policy applied.

It sits above ``methods`` (each row's scorer is its method's) and below both ``training`` and
``evaluation``: ``evaluation.predict`` (resumable generation into a predictions file, the ``eval`` command,
the baselines) and the training run's held-out evaluation (``training.callbacks.EvalCallback``) predict
through here, so training imports no evaluation module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from embodied_r.core.records import Prediction, PromptRow
from embodied_r.inference.context_policy import ContextPolicy
from embodied_r.inference.generation import TransformersEngine
from embodied_r.methods import method_for_row


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


__all__ = ["evaluate_rows", "evaluate_with_engine", "score_completion", "skipped_prediction"]
